"""Boots a lab machine under QEMU and runs commands in it (through the guest agent)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tierlab.lab import kernel as kmod
from tierlab.lab.kernel import LabSetupError
from tierlab.lab.machine import Machine

#: 9p's maximum message size the guest mounts with (the virtio transport's limit is 512 KiB).
MSIZE = 512 * 1024


class LabError(RuntimeError):
    """The guest did not boot, or stopped answering: the message has the boot log's end."""


@dataclass
class RunResult:
    code: int
    stdout: str
    stderr: str
    #: The command's time as the guest's clock measured it (under TCG, not the host's time).
    guest_seconds: float
    timed_out: bool = False

    def check(self) -> RunResult:
        if self.code != 0:
            raise LabError(
                f"guest command failed (exit {self.code}):\n{self.stdout[-2000:]}"
                f"\n{self.stderr[-4000:]}"
            )
        return self


def kvm_usable() -> bool:
    """KVM when ``/dev/kvm`` can be opened and the CPU has virtualisation extensions (``vmx``
    or ``svm``; a /dev/kvm without them, as on some cloud VMs, boots nothing)."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    words = set(flags.split())
    return "vmx" in words or "svm" in words


def accelerator() -> str:
    """``kvm`` or ``tcg``: ``TIERLAB_LAB_ACCEL`` when set, else KVM where usable."""
    forced = os.environ.get("TIERLAB_LAB_ACCEL", "")
    if forced in ("kvm", "tcg"):
        return forced
    return "kvm" if kvm_usable() else "tcg"


def guest_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a guest command: this Python's bin directory (the venv's, with
    `tierlab`) first on PATH, HOME and TMPDIR on the guest's tmpfs."""
    bindir = str(Path(sys.executable).parent)
    env = {
        "PATH": f"{bindir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
    }
    env.update(extra or {})
    return env


def compile_package() -> None:
    """Byte-compiles tierlab's modules on the host (where missing or stale): the guest sees
    them read-only, and compiling them in every guest process under emulation costs seconds."""
    import compileall

    import tierlab

    with open(os.devnull, "w") as devnull:
        old = sys.stdout
        sys.stdout = devnull
        try:
            compileall.compile_dir(str(Path(tierlab.__file__).parent), quiet=2)
        finally:
            sys.stdout = old


class Lab:
    """A booted lab machine. ``with Lab(machine, results) as lab: lab.run([...])``."""

    def __init__(
        self,
        machine: Machine,
        results: Path,
        *,
        workdir: Path | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.machine = machine
        self.results = Path(results).resolve()
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="tierlab-lab-"))
        self.progress = progress or (lambda _msg: None)
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self._buf = b""
        self.boot_seconds = 0.0
        self.accel = accelerator()
        self.release = ""

    @property
    def boot_log(self) -> Path:
        return self.workdir / "boot.log"

    def _tail(self, n: int = 30) -> str:
        out = []
        for p in (self.boot_log, self.workdir / "qemu.err"):
            try:
                lines = p.read_text(errors="replace").splitlines()
            except OSError:
                continue
            out += [f"  {line}" for line in lines[-n:] if line.strip()]
        return "\n".join(out)

    def command(self) -> list[str]:
        """The QEMU command line (after :meth:`prepare`)."""
        qemu = kmod.find_qemu()
        k = kmod.find_kernel()
        append = [
            "console=ttyS0",
            "quiet",
            "panic=-1",
            "oops=panic",
            "rdinit=/init",
            # Under emulation on a busy host the boot-time checks of timers and the RCU
            # stall detector misfire (the guest's CPUs are host threads that get preempted),
            # and the TSC's frequency, calibrated at boot, can be off by a factor: the guest
            # keeps time with the HPET, which QEMU runs on the host's clock.
            "no_timer_check",
            "rcupdate.rcu_cpu_stall_suppress=1",
            "clocksource=hpet",
            "mitigations=off",
            *self.machine.kernel_args(),
        ]
        return [
            str(qemu),
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-no-reboot",
            "-accel",
            self.accel,
            "-cpu",
            "host" if self.accel == "kvm" else "max",
            *self.machine.qemu_args(),
            "-kernel",
            str(k.image),
            "-initrd",
            str(self.workdir / "initrd"),
            "-append",
            " ".join(append),
            "-chardev",
            f"file,id=con,path={self.boot_log}",
            "-serial",
            "chardev:con",
            "-fsdev",
            "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap",
            "-device",
            "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot",
            "-fsdev",
            f"local,id=results,path={self.results},security_model=none,multidevs=remap",
            "-device",
            "virtio-9p-pci,fsdev=results,mount_tag=results",
            "-device",
            "virtio-serial-pci",
            "-chardev",
            f"socket,id=agent,path={self.workdir / 'agent.sock'},server=on,wait=off",
            "-device",
            f"virtserialport,chardev=agent,name={'tierlab.agent'}",
        ]

    def prepare(self) -> None:
        """Checks what the lab needs and writes this boot's initrd."""
        kmod.find_qemu()
        compile_package()
        k = kmod.find_kernel()
        base = kmod.build_initramfs(k)
        self.results.mkdir(parents=True, exist_ok=True)
        conf = kmod.config_archive(
            {
                "LAB_PYTHON": kmod.interpreter(),
                "LAB_PYTHONPATH": kmod.package_parent(),
                "LAB_KEEP": kmod.kept_paths(),
                "LAB_RESULTS": str(self.results),
                "LAB_MSIZE": str(MSIZE),
                "LAB_SETUP": self.machine.agent_setup,
                "LAB_NUMA_BALANCING": str(self.machine.numa_balancing),
                "LAB_DAX_KMEM": "1" if self.machine.slow_tier == "dax-kmem" else "0",
            }
        )
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "initrd").write_bytes(base.read_bytes() + conf)
        self.release = k.release

    def start(self) -> None:
        self.prepare()
        cmd = self.command()
        (self.workdir / "qemu.cmd").write_text(" ".join(cmd) + "\n")
        t0 = time.monotonic()
        with open(self.workdir / "qemu.err", "wb") as err:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
        sock_path = str(self.workdir / "agent.sock")
        deadline = t0 + self.machine.boot_timeout_s
        while True:
            if self.proc.poll() is not None:
                raise LabError(
                    f"QEMU exited ({self.proc.returncode}) before the guest booted:\n{self._tail()}"
                )
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(sock_path)
                self.sock = s
                break
            except (FileNotFoundError, ConnectionRefusedError):
                s.close()
                if time.monotonic() > deadline:
                    self.close()
                    raise LabError("QEMU did not open the agent's socket") from None
                time.sleep(0.05)
        msg = self._recv(deadline, "the guest to boot")
        if msg.get("op") != "ready":
            raise LabError(f"unexpected first message from the guest agent: {msg}")
        self.boot_seconds = time.monotonic() - t0
        self.release = str(msg.get("release", self.release))

    def _recv(self, deadline: float, what: str) -> dict[str, object]:
        assert self.sock is not None and self.proc is not None
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                tail = self._tail()
                self.close()
                raise LabError(f"timed out waiting for {what}:\n{tail}")
            self.sock.settimeout(min(left, 1.0))
            try:
                chunk = self.sock.recv(1 << 16)
            except ConnectionResetError:
                chunk = b""
            except TimeoutError:
                if self.proc.poll() is not None:
                    raise LabError(
                        f"the guest stopped (QEMU exit {self.proc.returncode}) while waiting "
                        f"for {what}:\n{self._tail()}"
                    ) from None
                continue
            if not chunk:
                tail = self._tail()
                self.close()
                raise LabError(
                    f"the guest closed the agent's channel while waiting for {what}:\n{tail}"
                )
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        msg = json.loads(line)
        assert isinstance(msg, dict)
        return msg

    def run(
        self,
        argv: Sequence[str] | str,
        *,
        timeout: float = 600.0,
        cwd: str | Path | None = None,
        env: dict[str, str] | None = None,
        on_output: Callable[[int, bytes], None] | None = None,
    ) -> RunResult:
        """Runs ``argv`` (a string: with ``sh -c``) in the guest; its output and exit code.
        ``timeout`` is in host seconds."""
        if self.sock is None:
            raise LabError("the lab is not running")
        if isinstance(argv, str):
            argv = ["/bin/sh", "-c", argv]
        req = {
            "op": "run",
            "argv": list(argv),
            "cwd": str(cwd or self.results),
            "env": guest_env(env),
            "timeout": timeout,
        }
        self.sock.sendall((json.dumps(req) + "\n").encode())
        out: dict[int, list[bytes]] = {1: [], 2: []}
        deadline = time.monotonic() + timeout + 60
        while True:
            msg = self._recv(deadline, f"{' '.join(argv)[:60]!r}")
            if msg.get("op") == "out":
                fd = int(str(msg["fd"]))
                data = base64.b64decode(str(msg["data"]))
                out[fd].append(data)
                if on_output:
                    on_output(fd, data)
            elif msg.get("op") == "exit":
                return RunResult(
                    code=int(str(msg["code"])),
                    stdout=b"".join(out[1]).decode(errors="replace"),
                    stderr=b"".join(out[2]).decode(errors="replace"),
                    guest_seconds=float(str(msg["seconds"])),
                    timed_out=bool(msg.get("timed_out")),
                )

    def close(self) -> None:
        """Stops the agent (the guest powers off) and QEMU."""
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.sendall(b'{"op": "quit"}\n')
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Lab:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Lab", "LabError", "LabSetupError", "RunResult"]
