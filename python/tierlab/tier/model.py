"""A model of the kernel side for testing the loop without a tiered machine: a process whose
mappings can change (:class:`ModelProcess`), ``move_pages`` over several nodes that checks
every address it is given against the mappings at that moment (:class:`ModelKernel`), and a
scripted telemetry source (:class:`ScriptedTelemetry`) with the native recorder's interface."""

from __future__ import annotations

import errno
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tierlab.place import PlaceError
from tierlab.place.numa import UNWRITTEN, Topology
from tierlab.place.proc import Vma

PAGE = 4096


@dataclass
class ModelProcess:
    """A process's mappings ``[(start, end)]``; ``gone`` once it exited."""

    pid: int
    ranges: list[tuple[int, int]]
    gone: bool = False

    def maps(self) -> list[Vma]:
        if self.gone:
            raise PlaceError(f"--pid {self.pid}: no such process")
        return [Vma(a, b, "rw-p", 0, "00:00", 0, "") for a, b in sorted(self.ranges)]

    def unmap(self, start: int, end: int) -> None:
        out = []
        for a, b in self.ranges:
            if b <= start or a >= end:
                out.append((a, b))
                continue
            if a < start:
                out.append((a, start))
            if b > end:
                out.append((end, b))
        self.ranges = out

    def mapped(self, addr: int) -> bool:
        return any(a <= addr < b for a, b in self.ranges)


@dataclass
class ModelKernel:
    """``move_pages`` on nodes ``memory``: ``where`` holds the node of every present page
    (a page first seen is on ``first_touch``). Every call is logged; an address outside the
    process's mappings at the moment of the call is recorded in ``outside``."""

    proc: ModelProcess
    memory: tuple[int, ...] = (0, 1)
    first_touch: int = 1
    where: dict[int, int] = field(default_factory=dict)
    calls: list[tuple[list[int], list[int] | None]] = field(default_factory=list)
    outside: list[int] = field(default_factory=list)

    def topology(self) -> Topology:
        m = list(self.memory)
        return Topology(online=m, memory=m, cpus={n: [] for n in m})

    def touch(self, addrs: Any) -> None:
        for a in np.asarray(addrs, dtype=np.uint64).tolist():
            self.where.setdefault(a & ~(PAGE - 1), self.first_touch)

    def move_pages(
        self, pid: int, addrs: np.ndarray, nodes: np.ndarray | None, flags: int
    ) -> tuple[int, int, np.ndarray]:
        a = [int(x) for x in addrs]
        self.calls.append((a, None if nodes is None else [int(n) for n in nodes]))
        status = np.full(len(a), UNWRITTEN, dtype=np.int32)
        if self.proc.gone:
            return -1, errno.ESRCH, status
        for i, x in enumerate(a):
            if not self.proc.mapped(x):
                self.outside.append(x)
                status[i] = -errno.EFAULT
                continue
            if nodes is None:
                status[i] = self.where.get(x, -errno.ENOENT)
                continue
            n = int(nodes[i])
            if n not in self.memory:
                return -1, errno.ENODEV, status
            if x not in self.where:
                status[i] = -errno.ENOENT
            else:
                self.where[x] = n
                status[i] = n
        return 0, 0, status

    @property
    def move_calls(self) -> list[tuple[list[int], list[int]]]:
        return [(a, n) for a, n in self.calls if n is not None]


def sample_batch(addrs: Any, time_ns: int = 0) -> dict[str, Any]:
    """A batch as the native recorder's ``poll`` returns it, holding samples at ``addrs``."""
    a = np.asarray(addrs, dtype="<u8")
    n = a.size
    z8 = np.zeros(n, dtype="<u8").tobytes()
    return {
        "samples": {
            "time_ns": np.full(n, time_ns, dtype="<u8").tobytes(),
            "tid": np.zeros(n, dtype="<u4").tobytes(),
            "cpu": np.zeros(n, dtype="<u4").tobytes(),
            "addr": a.tobytes(),
            "ip": z8,
            "weight": z8,
            "data_src": z8,
            "drain": z8,
        },
        "drains": {"cpu": b"", "time_ns": b"", "drain": b"", "records": b""},
        "mappings": [],
    }


class ScriptedTelemetry:
    """Telemetry from a script: poll ``i`` returns the samples ``script[i]`` (after running
    ``actions[i]``, if any) and advances the clock by the poll's timeout; after the script
    the process exits (``exit_at_end``) or polls return nothing."""

    def __init__(
        self,
        proc: ModelProcess,
        script: list[list[int]],
        kernel: ModelKernel | None = None,
        actions: dict[int, Callable[[], None]] | None = None,
        exit_at_end: bool = True,
    ) -> None:
        self.proc = proc
        self.script = script
        self.kernel = kernel
        self.actions = actions or {}
        self.exit_at_end = exit_at_end
        self.polls = 0
        self.now_ns = 0
        self.exit: tuple[str, int] | None = None
        self.pid = proc.pid

    def poll(self, timeout_ms: int = 100) -> dict[str, Any]:
        i = self.polls
        self.polls += 1
        self.now_ns += int(timeout_ms) * 1_000_000
        if i in self.actions:
            self.actions[i]()
        if i >= len(self.script):
            if self.exit_at_end:
                self.exit = ("exit", 0)
                self.proc.gone = True
            return sample_batch([], self.now_ns)
        if self.kernel is not None:
            self.kernel.touch(self.script[i])
        return sample_batch(self.script[i], self.now_ns)

    def finish(self) -> dict[str, Any]:
        return sample_batch([], self.now_ns)

    def close(self) -> None:
        pass

    def parameters(self) -> dict[str, Any]:
        return {"backend": "model", "event": "model", "period": 1}

    def stats(self) -> dict[str, Any]:
        return {"samples": 0}
