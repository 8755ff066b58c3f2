"""The lab's guest kernel and the initramfs the lab builds for it.

The kernel is Debian bookworm-backports' ``linux-image-amd64`` (6.12), unpacked by
``tools/lab-kernel.sh`` (``make install`` runs it) under ``target/lab/kernel`` of the
repository, or under the directory ``TIERLAB_LAB_DIR`` names. The initramfs is built here from
the static busybox (``busybox-static``), the kernel modules the guest needs (9p over virtio,
the NVDIMM/dax stack for a dax kmem slow tier), decompressed and loaded in dependency order,
and the init script below; a second, per-boot archive appended to it carries that boot's
settings (``/lab.conf``).
"""

from __future__ import annotations

import gzip
import io
import lzma
import os
import shutil
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

#: The modules the init script loads (their dependencies first). 9p: the host's root and the
#: results directory; nd_e820/nd_pmem/dax_pmem/kmem: a ``memmap`` pmem slow tier.
GUEST_MODULES = (
    "9pnet_virtio",
    "9p",
    "nd_e820",
    "nd_pmem",
    "dax_pmem",
    "kmem",
)


class LabSetupError(Exception):
    """Something the lab needs is missing (QEMU, the kernel, busybox): the message says what
    and how to get it."""


def lab_dir() -> Path:
    """Where the kernel and the built initramfs are kept: ``$TIERLAB_LAB_DIR``, else
    ``target/lab`` of the repository this package runs from."""
    env = os.environ.get("TIERLAB_LAB_DIR")
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parents[3]
    return repo / "target" / "lab"


@dataclass(frozen=True)
class Kernel:
    """An unpacked kernel package: the image, its release and its modules."""

    root: Path
    release: str

    @property
    def image(self) -> Path:
        return self.root / "boot" / f"vmlinuz-{self.release}"

    @property
    def config(self) -> Path:
        return self.root / "boot" / f"config-{self.release}"

    @property
    def modules(self) -> Path:
        for base in ("lib", "usr/lib"):
            p = self.root / base / "modules" / self.release
            if p.is_dir():
                return p
        return self.root / "lib" / "modules" / self.release


def find_kernel(where: Path | None = None) -> Kernel:
    """The kernel unpacked under ``where/kernel`` (default :func:`lab_dir`), or a
    :class:`LabSetupError` saying how to fetch it."""
    base = (where or lab_dir()) / "kernel"
    images = sorted((base / "boot").glob("vmlinuz-*")) if (base / "boot").is_dir() else []
    if not images:
        raise LabSetupError(
            f"the lab's kernel is missing (no {base}/boot/vmlinuz-*): run `make install` "
            "(it fetches Debian's bookworm-backports linux-image-amd64 with "
            f"tools/lab-kernel.sh), or `tools/lab-kernel.sh {base.parent}`"
        )
    release = images[-1].name.removeprefix("vmlinuz-")
    return Kernel(base, release)


def find_busybox() -> Path:
    """The static busybox the initramfs is made of."""
    for p in (os.environ.get("TIERLAB_LAB_BUSYBOX"), "/bin/busybox", "/usr/bin/busybox"):
        if p and Path(p).is_file():
            with open(p, "rb") as f:
                head = f.read(1 << 16)
            # A dynamically linked busybox has an interpreter path in its first pages.
            if b"/lib64/ld-linux" in head or b"ld-linux-x86-64" in head:
                continue
            return Path(p)
    raise LabSetupError(
        "no static busybox (the lab's initramfs is built from it): install Debian's "
        "busybox-static (`make install` does, as root)"
    )


def find_qemu() -> Path:
    """``qemu-system-x86_64``."""
    p = shutil.which("qemu-system-x86_64")
    if p is None:
        raise LabSetupError(
            "qemu-system-x86_64 not found: install Debian's qemu-system-x86 "
            "(`make install` does, as root)"
        )
    return Path(p)


def _module_files(kernel: Kernel) -> dict[str, Path]:
    """Module name (``-`` as ``_``) -> its file under the kernel's modules directory."""
    out: dict[str, Path] = {}
    for p in kernel.modules.rglob("*.ko*"):
        name = p.name.split(".ko")[0].replace("-", "_")
        out[name] = p
    return out


def _read_module(path: Path) -> bytes:
    data = path.read_bytes()
    if path.name.endswith(".xz"):
        return lzma.decompress(data)
    if path.name.endswith(".gz"):
        return gzip.decompress(data)
    if path.name.endswith(".zst"):
        raise LabSetupError(f"{path}: zstd-compressed modules are not supported")
    return data


def _depends(image: bytes) -> list[str]:
    """The ``depends=`` field of a module's ``.modinfo``."""
    key = b"\0depends="
    i = image.find(key)
    if i < 0:
        return []
    end = image.index(b"\0", i + len(key))
    text = image[i + len(key) : end].decode()
    return [d.replace("-", "_") for d in text.split(",") if d]


def module_load_order(
    kernel: Kernel, wanted: tuple[str, ...] = GUEST_MODULES
) -> list[tuple[str, bytes]]:
    """The modules ``wanted`` and everything they depend on, dependencies first, each as
    (file name, decompressed image). A module built into the kernel is skipped."""
    files = _module_files(kernel)
    builtin = set()
    bi = kernel.modules / "modules.builtin"
    if bi.is_file():
        builtin = {
            Path(line).name.split(".ko")[0].replace("-", "_") for line in bi.read_text().split()
        }
    order: list[tuple[str, bytes]] = []
    seen: set[str] = set()

    def visit(name: str) -> None:
        if name in seen or name in builtin:
            return
        seen.add(name)
        if name not in files:
            raise LabSetupError(f"kernel {kernel.release}: module {name} not found")
        image = _read_module(files[name])
        for dep in _depends(image):
            visit(dep)
        order.append((f"{name}.ko", image))

    for name in wanted:
        visit(name)
    return order


# -- cpio (newc) ----------------------------------------------------------------------------


class Cpio:
    """A newc cpio archive, as the kernel unpacks an initramfs."""

    def __init__(self) -> None:
        self._buf = io.BytesIO()
        self._ino = 1

    def _entry(self, name: str, mode: int, data: bytes = b"") -> None:
        namez = name.encode() + b"\0"
        hdr = "070701" + "".join(
            f"{v:08x}" for v in (self._ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(namez), 0)
        )
        self._ino += 1
        self._buf.write(hdr.encode() + namez)
        self._pad()
        self._buf.write(data)
        self._pad()

    def _pad(self) -> None:
        n = -self._buf.tell() % 4
        self._buf.write(b"\0" * n)

    def dir(self, name: str) -> None:
        self._entry(name, stat.S_IFDIR | 0o755)

    def file(self, name: str, data: bytes, mode: int = 0o644) -> None:
        self._entry(name, stat.S_IFREG | mode, data)

    def symlink(self, name: str, target: str) -> None:
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def finish(self) -> bytes:
        self._entry("TRAILER!!!", 0)
        n = -self._buf.tell() % 512
        self._buf.write(b"\0" * n)
        return self._buf.getvalue()


#: The guest's /init (busybox sh). It loads the modules, mounts the host's root read-only
#: over 9p with tmpfs over the directories programs write to, the results directory (read
#: and write, at the same path as on the host) and the guest's own /proc, /sys and /dev, then
#: runs the agent (tierlab.lab.agent, with the host's Python, chrooted into the host's root)
#: and powers the guest off when the agent ends.
INIT_SCRIPT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
. /lab.conf
fail() { echo "tierlab-lab: $*"; poweroff -f; }
for m in $(cat /modules/order); do insmod /modules/$m || fail "insmod $m failed"; done
# dax kmem: each legacy pmem namespace (memmap=SIZE!START) becomes a device-dax instance
# (the region's dax seed claims the namespace), which the kmem driver onlines as system RAM
# of a new, CPU-less node with the dax memory type (a lower memory tier).
if [ "$LAB_DAX_KMEM" = 1 ]; then
  for ns in /sys/bus/nd/devices/namespace*.0; do
    [ -e "$ns" ] || fail "dax kmem: no pmem namespace (memmap= not honoured?)"
    n=${ns##*/}; r=region${n#namespace}; r=${r%.0}
    echo $n > /sys/bus/nd/drivers/nd_pmem/unbind 2>/dev/null
    dax=$(cat /sys/bus/nd/devices/$r/dax_seed) || fail "dax kmem: $r has no dax seed"
    # As ndctl create-namespace -m devdax: a uuid, the memmap's place (on the pmem itself)
    # and the namespace, then bind (the kernel writes the info block on first bind).
    cat /proc/sys/kernel/random/uuid > /sys/bus/nd/devices/$dax/uuid
    echo pmem > /sys/bus/nd/devices/$dax/mode || fail "dax kmem: cannot set $dax's mode"
    echo $n > /sys/bus/nd/devices/$dax/namespace || fail "dax kmem: cannot claim $n"
    echo $dax > /sys/bus/nd/drivers/dax_pmem/bind || fail "dax kmem: cannot bind $dax"
  done
  for d in /sys/bus/dax/devices/dax*; do
    [ -e "$d" ] || fail "dax kmem: no device-dax instance"
    echo ${d##*/} > /sys/bus/dax/drivers/device_dax/unbind 2>/dev/null
    echo ${d##*/} > /sys/bus/dax/drivers/kmem/new_id 2>/dev/null \
      || echo ${d##*/} > /sys/bus/dax/drivers/kmem/bind || fail "dax kmem: kmem refused ${d##*/}"
  done
  for m in /sys/devices/system/memory/memory*/state; do
    grep -q offline $m && echo online_movable > $m
  done
fi
R=/newroot
mkdir -p $R
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=$LAB_MSIZE hostroot $R \
  || fail "cannot mount the host's root over 9p"
for d in /proc /sys /dev; do mount --move $d $R$d || fail "cannot move $d"; done
# The host paths the agent needs that lie under the tmpfs mounts below (a repository cloned
# in /tmp): bound aside first, put back on top of the tmpfs after.
n=0
IFS=:
for k in $LAB_KEEP; do
  mkdir -p /keep$n && mount --bind "$R$k" /keep$n || fail "cannot keep $k"; n=$((n+1))
done
unset IFS
mount -t tmpfs -o mode=1777 tmpfs $R/tmp
mount -t tmpfs tmpfs $R/run
[ -d $R/var/tmp ] && mount -t tmpfs -o mode=1777 tmpfs $R/var/tmp
mkdir -p $R/dev/shm $R/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $R/dev/shm
mount -t devpts devpts $R/dev/pts
n=0
IFS=:
for k in $LAB_KEEP; do
  mkdir -p "$R$k" && mount --move /keep$n "$R$k" || fail "cannot put $k back"; n=$((n+1))
done
unset IFS
mkdir -p "$R$LAB_RESULTS" 2>/dev/null
mount -t 9p -o trans=virtio,version=9p2000.L,rw,cache=none,msize=$LAB_MSIZE \
  results "$R$LAB_RESULTS" || fail "cannot mount the results directory at $LAB_RESULTS"
echo "$LAB_NUMA_BALANCING" > $R/proc/sys/kernel/numa_balancing || fail "cannot set numa_balancing"
[ -n "$LAB_SETUP" ] && { chroot $R /bin/sh -c "$LAB_SETUP" || fail "setup failed"; }
chroot $R /usr/bin/env PYTHONPATH="$LAB_PYTHONPATH" "$LAB_PYTHON" -m tierlab.lab.agent
echo "tierlab-lab: agent ended"
sync
poweroff -f
"""


def build_initramfs(kernel: Kernel, dest: Path | None = None) -> Path:
    """The initramfs for ``kernel`` (built once, kept beside the kernel; rebuilt when this
    module or busybox changes)."""
    busybox = find_busybox()
    dest = dest or kernel.root.parent / f"initramfs-{kernel.release}.cpio.gz"
    me = Path(__file__)
    if dest.is_file() and dest.stat().st_mtime > max(me.stat().st_mtime, busybox.stat().st_mtime):
        return dest
    cpio = Cpio()
    for d in ("bin", "dev", "proc", "sys", "modules", "newroot", "tmp"):
        cpio.dir(d)
    cpio.file("bin/busybox", busybox.read_bytes(), 0o755)
    cpio.symlink("bin/sh", "busybox")
    cpio.file("init", INIT_SCRIPT.encode(), 0o755)
    order = module_load_order(kernel)
    for name, image in order:
        cpio.file(f"modules/{name}", image)
    cpio.file("modules/order", "".join(n + "\n" for n, _ in order).encode())
    tmp = dest.with_suffix(".tmp")
    packed = gzip.compress(cpio.finish(), compresslevel=6, mtime=0)
    # Zeros up to a 512-byte boundary: the per-boot archive appended to it must start on a
    # 4-byte boundary for the kernel to read it as an uncompressed cpio.
    tmp.write_bytes(packed + b"\0" * (-len(packed) % 512))
    tmp.replace(dest)
    return dest


def config_archive(settings: dict[str, str]) -> bytes:
    """The per-boot archive appended to the initramfs: ``/lab.conf``, shell assignments."""
    lines = []
    for k, v in settings.items():
        if "'" in v or "\n" in v:
            raise LabSetupError(f"{k}: {v!r}: a lab path may not contain a quote or a newline")
        lines.append(f"{k}='{v}'\n")
    cpio = Cpio()
    cpio.file("lab.conf", "".join(lines).encode())
    return cpio.finish()


def package_parent() -> str:
    """The directory that holds the ``tierlab`` package (the agent is imported from it)."""
    return str(Path(__file__).resolve().parents[2])


#: Directories the guest mounts a tmpfs on (what the host has there is hidden in the guest).
GUEST_TMPFS = ("/tmp", "/run", "/var/tmp", "/dev/shm")


def kept_paths() -> str:
    """The host paths the guest's agent needs (the repository holding the ``tierlab``
    package, the virtual environment) that lie under :data:`GUEST_TMPFS`, ``:``-separated:
    the guest's init puts them back on top of its tmpfs mounts."""
    out: list[str] = []
    for p in (Path(package_parent()).parent, Path(sys.prefix)):
        s = str(p.resolve())
        if ":" in s:
            raise LabSetupError(f"{s}: a lab path may not contain ':'")
        hidden = any(s == c or s.startswith(c + "/") for c in GUEST_TMPFS)
        if hidden and not any(s == o or s.startswith(o + "/") for o in out):
            out = [o for o in out if not o.startswith(s + "/")] + [s]
    return ":".join(out)


def interpreter() -> str:
    """The Python the guest runs (this one, which the host's root holds at the same path)."""
    return sys.executable
