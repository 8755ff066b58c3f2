"""The kernel side of live placement: ``move_pages(2)`` through ``ctypes`` and the NUMA
topology from ``/sys/devices/system/node``.

``move_pages(pid, count, pages, nodes, status, flags)`` is called with ``syscall(2)`` on the
architectures whose number is known (x86-64, aarch64, riscv64), else through libnuma's
``move_pages`` when the library is installed. Nothing is compiled.

Two uses:

- **query** (``nodes = NULL``): ``status[i]`` is the node page ``i`` is on, or ``-errno``
  (``-ENOENT`` not present, ``-EFAULT`` not mapped or not movable);
- **move** (``nodes[i]`` = target): ``status[i]`` is the node the page is on afterwards, or
  ``-errno`` (``-EBUSY``, ``-EACCES``, ``-ENOMEM``, ``-ENOENT``, ``-EFAULT``, ...). A call can
  also fail as a whole (``-1``, ``errno``: ``ENODEV`` for a node without memory, ``EPERM``,
  ``ESRCH``, ...) after having processed only the pages before the failing one, and since
  Linux 4.17 it returns a positive count of pages it did not migrate, leaving their status
  (and every later one) unwritten. :class:`Kernel` fills every status the kernel did not write
  with :data:`UNWRITTEN`, so callers can tell the three cases apart.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno as _errno
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

#: ``move_pages`` flags.
MPOL_MF_MOVE = 1 << 1
MPOL_MF_MOVE_ALL = 1 << 2

#: ``status`` value of a page the kernel did not get to (a whole-call error, or a positive
#: return: the count of pages not migrated).
UNWRITTEN = -(2**31)

#: ``SYS_move_pages`` per ``platform.machine()``.
SYSCALL_NUMBERS = {
    "x86_64": 279,
    "amd64": 279,
    "aarch64": 239,
    "arm64": 239,
    "riscv64": 239,
}

NODE_ROOT = Path("/sys/devices/system/node")

#: What each errno means for move_pages, in words (``os.strerror`` for the rest).
_MEANING = {
    _errno.ENODEV: "target node does not exist or has no memory",
    _errno.EINVAL: "invalid node number or flags",
    _errno.EACCES: "page is mapped by several processes (moving it needs --move-all and "
    "CAP_SYS_NICE)",
    _errno.EPERM: "not permitted: moving another user's pages needs ptrace access "
    "(CAP_SYS_PTRACE); --move-all needs CAP_SYS_NICE",
    _errno.ENOMEM: "no free memory on the target node",
    _errno.EBUSY: "page busy (under I/O or locked)",
    _errno.ENOENT: "page not present (never touched, or swapped out)",
    _errno.EFAULT: "address not mapped, or a page that cannot be moved",
    _errno.ESRCH: "no such process",
    _errno.EIO: "page is being written back and cannot move now",
    _errno.E2BIG: "too many pages in one call",
    _errno.ENOSYS: "move_pages is not available (kernel without NUMA support)",
}


class NumaError(OSError):
    """A ``move_pages`` call failed as a whole (``errno`` set)."""


def errno_name(code: int) -> str:
    """``19`` -> ``ENODEV``."""
    return _errno.errorcode.get(code, f"E{code}")


def errno_message(code: int) -> str:
    """What ``code`` means for move_pages (falls back to ``strerror``)."""
    return _MEANING.get(code) or os.strerror(code)


class Kernel(Protocol):
    """Where pages are and how they move. :class:`LinuxKernel` calls the real system call;
    tests substitute a model with several nodes."""

    def move_pages(
        self, pid: int, addrs: np.ndarray, nodes: np.ndarray | None, flags: int
    ) -> tuple[int, int, np.ndarray]:
        """One ``move_pages`` call over ``addrs`` (uint64, page-aligned): returns (return
        value, errno if it was -1 else 0, status int32 with :data:`UNWRITTEN` where the kernel
        wrote nothing)."""
        ...


class LinuxKernel:
    """``move_pages(2)`` via ``syscall(2)`` (or libnuma on an architecture whose number is not
    known here)."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        machine = platform.machine().lower()
        self._nr = SYSCALL_NUMBERS.get(machine)
        self._numa = None
        if self._nr is None:
            path = ctypes.util.find_library("numa")
            if path is None:
                raise NumaError(
                    _errno.ENOSYS,
                    f"move_pages: no system call number known for {machine} and libnuma is "
                    "not installed",
                )
            self._numa = ctypes.CDLL(path, use_errno=True)
            self._numa.move_pages.restype = ctypes.c_long
            self._numa.move_pages.argtypes = [
                ctypes.c_int,
                ctypes.c_ulong,
                ctypes.c_void_p,
                ctypes.c_void_p,
                ctypes.c_void_p,
                ctypes.c_int,
            ]
        else:
            self._libc.syscall.restype = ctypes.c_long

    def move_pages(
        self, pid: int, addrs: np.ndarray, nodes: np.ndarray | None, flags: int
    ) -> tuple[int, int, np.ndarray]:
        pages = np.ascontiguousarray(addrs, dtype=np.uint64)
        n = pages.size
        status = np.full(n, UNWRITTEN, dtype=np.int32)
        if n == 0:
            return 0, 0, status
        node_arr = None if nodes is None else np.ascontiguousarray(nodes, dtype=np.int32)
        nodes_ptr = None if node_arr is None else ctypes.c_void_p(node_arr.ctypes.data)
        ctypes.set_errno(0)
        if self._nr is not None:
            ret = self._libc.syscall(
                ctypes.c_long(self._nr),
                ctypes.c_long(pid),
                ctypes.c_ulong(n),
                ctypes.c_void_p(pages.ctypes.data),
                nodes_ptr,
                ctypes.c_void_p(status.ctypes.data),
                ctypes.c_long(flags),
            )
        else:
            assert self._numa is not None
            ret = self._numa.move_pages(
                pid, n, pages.ctypes.data, nodes_ptr, status.ctypes.data, flags
            )
        err = ctypes.get_errno() if ret == -1 else 0
        return int(ret), int(err), status


def query(kernel: Kernel, pid: int, addrs: np.ndarray, batch: int = 4096) -> np.ndarray:
    """The node of every page (``move_pages`` with ``nodes = NULL``), or ``-errno``. Raises
    :class:`NumaError` when a call fails as a whole (EPERM, ESRCH, ENOSYS)."""
    addrs = np.asarray(addrs, dtype=np.uint64)
    out = np.empty(addrs.size, dtype=np.int32)
    for i in range(0, addrs.size, batch):
        ret, err, status = kernel.move_pages(pid, addrs[i : i + batch], None, 0)
        if ret < 0:
            raise NumaError(
                err, f"move_pages (query) of pid {pid}: {errno_name(err)}: {errno_message(err)}"
            )
        out[i : i + batch] = status
    return out


# -- topology ------------------------------------------------------------------------------


#: Largest CPU number in a CPU list (Linux's NR_CPUS is at most 8192 on common builds).
MAX_CPU = 1 << 16


def parse_cpulist(text: str) -> list[int]:
    """``0-3,8,10-11`` -> ``[0, 1, 2, 3, 8, 10, 11]`` (the kernel's list format)."""
    out: list[int] = []
    text = text.strip()
    if not text:
        return out
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            a, b = part.split("-", 1)
            lo, hi = int(a), int(b)
            if hi < lo:
                raise ValueError(f"{part!r}: range end before start")
        else:
            lo = hi = int(part)
        if lo < 0:
            raise ValueError("negative number")
        if hi > MAX_CPU or len(out) + hi - lo >= MAX_CPU:
            raise ValueError(f"CPU numbers go up to {MAX_CPU}")
        out.extend(range(lo, hi + 1))
    return out


def format_cpulist(cpus: list[int]) -> str:
    """``[0, 1, 2, 3, 8]`` -> ``0-3,8``."""
    cpus = sorted(set(cpus))
    runs: list[str] = []
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        runs.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(runs)


@dataclass
class Topology:
    """The machine's NUMA nodes as the kernel shows them."""

    #: Online nodes.
    online: list[int]
    #: Nodes with memory (valid ``move_pages`` targets).
    memory: list[int]
    #: CPUs of each node (CPU-less memory nodes, such as CXL or PMEM, have none).
    cpus: dict[int, list[int]] = field(default_factory=dict)
    #: ``False`` when ``/sys/devices/system/node`` is absent (kernel without NUMA): one node
    #: 0 is assumed.
    from_sysfs: bool = True

    @property
    def single_node(self) -> bool:
        return len(self.memory) <= 1

    def cpu_to_node(self) -> dict[int, int]:
        return {cpu: node for node, cpus in self.cpus.items() for cpu in cpus}

    def describe(self) -> str:
        if self.single_node:
            only = self.memory[0] if self.memory else 0
            return (
                f"this machine has one NUMA node (node {only}): every page is on it, and a move "
                "to any other node fails with ENODEV"
            )
        return f"NUMA nodes with memory: {', '.join(map(str, self.memory))}"

    def to_json(self) -> dict[str, object]:
        return {
            "online": self.online,
            "with_memory": self.memory,
            "cpus": {str(n): format_cpulist(c) for n, c in sorted(self.cpus.items())},
            "single_node": self.single_node,
            "from_sysfs": self.from_sysfs,
        }


def _read_list(path: Path) -> list[int] | None:
    try:
        return parse_cpulist(path.read_text())
    except (OSError, ValueError):
        return None


def topology(root: Path = NODE_ROOT) -> Topology:
    """Read the NUMA topology (``online``, ``has_memory``, ``nodeN/cpulist``)."""
    if not root.is_dir():
        return Topology(
            online=[0], memory=[0], cpus={0: list(range(os.cpu_count() or 1))}, from_sysfs=False
        )
    dirs = sorted(int(p.name[4:]) for p in root.glob("node[0-9]*") if p.name[4:].isdigit())
    online = _read_list(root / "online")
    if online is None:
        online = dirs
    memory = _read_list(root / "has_memory")
    if memory is None:
        memory = online
    cpus: dict[int, list[int]] = {}
    for n in dirs:
        got = _read_list(root / f"node{n}" / "cpulist")
        if got is not None:
            cpus[n] = got
    return Topology(online=online, memory=memory, cpus=cpus)
