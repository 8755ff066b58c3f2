"""What ``/proc/PID`` says about a process: its mappings (``maps``), where their pages are
(``numa_maps``) and its command line."""

from __future__ import annotations

import errno
import re
from dataclasses import dataclass, field
from pathlib import Path

from tierlab.place import PlaceError

PROC = Path("/proc")

#: Names under which an anonymous mapping appears: ``/proc/PID/maps`` leaves the path empty,
#: recordings call it ``[anon]``.
ANON = "[anon]"


def normalize_name(name: str | None) -> str:
    """One spelling for the same mapping in recordings, plans and ``/proc/PID/maps``."""
    name = (name or "").strip()
    if name in ("", "//anon", "[anon]", "anon"):
        return ANON
    return name


@dataclass
class Vma:
    """One line of ``/proc/PID/maps``."""

    start: int
    end: int
    perms: str
    offset: int
    dev: str
    inode: int
    path: str

    @property
    def length(self) -> int:
        return self.end - self.start

    @property
    def name(self) -> str:
        return normalize_name(self.path)


@dataclass
class NumaMapsEntry:
    """One line of ``/proc/PID/numa_maps``: pages per node of one VMA."""

    start: int
    policy: str
    nodes: dict[int, int] = field(default_factory=dict)
    kernel_page_kib: int = 4
    fields: dict[str, str] = field(default_factory=dict)


def check_process(pid: int, proc: Path = PROC) -> None:
    """Raise :class:`PlaceError` unless ``pid`` is a live (not zombie) process."""
    if pid <= 0:
        raise PlaceError(f"--pid {pid}: expected a positive process id")
    stat = proc / str(pid) / "stat"
    try:
        text = stat.read_text()
    except FileNotFoundError:
        raise PlaceError(f"--pid {pid}: no such process") from None
    except OSError as e:
        raise PlaceError(f"--pid {pid}: cannot read {stat}: {e.strerror}") from None
    state = text.rsplit(") ", 1)[-1][:1]
    if state in ("Z", "X"):
        raise PlaceError(f"--pid {pid}: the process has exited (it is a zombie)")


def _read(path: Path, pid: int) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        raise PlaceError(f"--pid {pid}: no such process ({path} is gone)") from None
    except PermissionError:
        raise PlaceError(
            f"{path}: permission denied (reading another user's process needs ptrace "
            "access: run as its user, or with CAP_SYS_PTRACE)"
        ) from None
    except OSError as e:
        if e.errno == errno.ESRCH:
            raise PlaceError(f"--pid {pid}: no such process") from None
        raise PlaceError(f"{path}: {e.strerror}") from None


def parse_maps(text: str) -> list[Vma]:
    out = []
    for line in text.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) < 5:
            continue
        lo, hi = parts[0].split("-", 1)
        out.append(
            Vma(
                start=int(lo, 16),
                end=int(hi, 16),
                perms=parts[1],
                offset=int(parts[2], 16),
                dev=parts[3],
                inode=int(parts[4]),
                path=parts[5] if len(parts) > 5 else "",
            )
        )
    return out


def read_maps(pid: int, proc: Path = PROC) -> list[Vma]:
    """The process's mappings, in address order."""
    return parse_maps(_read(proc / str(pid) / "maps", pid))


_NODE = re.compile(r"N(\d+)=(\d+)")


def parse_numa_maps(text: str) -> dict[int, NumaMapsEntry]:
    out: dict[int, NumaMapsEntry] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        try:
            start = int(parts[0], 16)
        except ValueError:
            continue
        e = NumaMapsEntry(start=start, policy=parts[1])
        for tok in parts[2:]:
            m = _NODE.fullmatch(tok)
            if m:
                e.nodes[int(m.group(1))] = int(m.group(2))
            elif "=" in tok:
                k, v = tok.split("=", 1)
                e.fields[k] = v
                if k == "kernelpagesize_kB" and v.isdigit():
                    e.kernel_page_kib = int(v)
        out[start] = e
    return out


def read_numa_maps(pid: int, proc: Path = PROC) -> dict[int, NumaMapsEntry] | None:
    """``numa_maps`` by VMA start, or ``None`` when the kernel has none (no CONFIG_NUMA)."""
    path = proc / str(pid) / "numa_maps"
    if not path.exists():
        if not (proc / str(pid)).exists():
            raise PlaceError(f"--pid {pid}: no such process")
        return None
    return parse_numa_maps(_read(path, pid))


def command(pid: int, proc: Path = PROC) -> list[str]:
    """The process's argv (``[comm]`` for kernel threads)."""
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        raw = b""
    args = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    if not args:
        try:
            args = [f"[{(proc / str(pid) / 'comm').read_text().strip()}]"]
        except OSError:
            args = []
    return args
