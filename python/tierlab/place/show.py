"""Where a process's pages are, per mapping and node.

Every mapping of ``/proc/PID/maps`` is queried page by page with ``move_pages(2)`` (``nodes =
NULL``, in batches): a page is on a node, or not present (``-ENOENT``: never touched or
swapped out; ``-EFAULT``: nothing movable there, such as ``[vsyscall]``). Mappings larger than
``max_pages`` pages are not queried page by page; their counts come from
``/proc/PID/numa_maps``. When ``numa_maps`` exists, its per-node counts are compared with the
query's for every mapping (``agree``; not for ``[vdso]``/``[vvar]``/``[vsyscall]``, which
numa_maps does not count); the two are read a moment apart, so a running process may change
in between. ``numa_maps`` counts huge pages in units of their size: they are
converted to base pages here.
"""

from __future__ import annotations

import errno as _errno
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tierlab.place import PlaceError
from tierlab.place.numa import (
    Kernel,
    LinuxKernel,
    NumaError,
    Topology,
    errno_message,
    errno_name,
    topology,
)
from tierlab.place.proc import (
    NumaMapsEntry,
    Vma,
    check_process,
    command,
    read_maps,
    read_numa_maps,
)


@dataclass
class ShowOptions:
    batch: int = 4096
    #: Larger mappings are counted from numa_maps only.
    max_pages: int = 1 << 20
    #: Hide smaller mappings from the table (they still count in the totals).
    min_size: int = 0
    page_size: int = 4096


@dataclass
class MappingPlace:
    vma: Vma
    pages: int
    #: Pages per node (base pages).
    nodes: dict[int, int]
    not_present: int
    #: Other errors of the query, by errno name.
    errors: dict[str, int]
    #: ``move_pages`` (page by page) or ``numa_maps`` (too large to query).
    method: str
    numa_maps: dict[int, int] | None = None
    agree: bool | None = None

    def to_json(self) -> dict[str, Any]:
        v = self.vma
        return {
            "start": v.start,
            "end": v.end,
            "length": v.length,
            "perms": v.perms,
            "name": v.name,
            "path": v.path,
            "inode": v.inode or None,
            "pages": self.pages,
            "nodes": {str(n): c for n, c in sorted(self.nodes.items())},
            "present": sum(self.nodes.values()),
            "not_present": self.not_present,
            "errors": self.errors,
            "method": self.method,
            "numa_maps": None
            if self.numa_maps is None
            else {str(n): c for n, c in sorted(self.numa_maps.items())},
            "agree": self.agree,
        }


@dataclass
class ShowReport:
    pid: int
    command: list[str]
    topology: Topology
    mappings: list[MappingPlace]
    numa_maps: bool
    options: ShowOptions
    notes: list[str] = field(default_factory=list)

    def totals(self) -> dict[str, Any]:
        nodes: dict[int, int] = {}
        for m in self.mappings:
            for n, c in m.nodes.items():
                nodes[n] = nodes.get(n, 0) + c
        return {
            "mappings": len(self.mappings),
            "pages": sum(m.pages for m in self.mappings),
            "nodes": {str(n): c for n, c in sorted(nodes.items())},
            "present": sum(nodes.values()),
            "not_present": sum(m.not_present for m in self.mappings),
            "disagree": sum(1 for m in self.mappings if m.agree is False),
        }

    def nodes(self) -> list[int]:
        seen = set(self.topology.memory)
        for m in self.mappings:
            seen |= set(m.nodes)
        return sorted(seen)

    def shown(self) -> list[MappingPlace]:
        return [m for m in self.mappings if m.vma.length >= self.options.min_size]

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "command": self.command,
            "page_size": self.options.page_size,
            "machine": {**self.topology.to_json(), "note": self.topology.describe()},
            "numa_maps": self.numa_maps,
            "totals": self.totals(),
            "notes": self.notes,
            "mappings": [m.to_json() for m in self.shown()],
        }


def _numa_counts(e: NumaMapsEntry, page_size: int) -> dict[int, int]:
    scale = max(1, e.kernel_page_kib * 1024 // page_size)
    return {n: c * scale for n, c in e.nodes.items()}


def _special(v: Vma) -> bool:
    """Mappings of the kernel's own pages (vDSO and friends), which numa_maps leaves out."""
    return v.name in ("[vdso]", "[vsyscall]") or v.name.startswith("[vvar")


def show(
    pid: int,
    options: ShowOptions | None = None,
    *,
    kernel: Kernel | None = None,
    topo: Topology | None = None,
) -> ShowReport:
    opts = options or ShowOptions()
    if opts.batch < 1:
        raise PlaceError(f"--batch {opts.batch}: must be at least 1")
    check_process(pid)
    topo = topo or topology()
    try:
        kernel = kernel or LinuxKernel()
    except NumaError as exc:
        raise PlaceError(str(exc)) from None
    vmas = read_maps(pid)
    nmaps = read_numa_maps(pid)
    ps = opts.page_size
    report = ShowReport(pid, command(pid), topo, [], nmaps is not None, opts)
    if topo.single_node:
        report.notes.append(topo.describe())
    if nmaps is None:
        report.notes.append("no /proc/PID/numa_maps (kernel without NUMA): not cross-checked")
    for v in vmas:
        npages = -(-v.length // ps)
        nm = _numa_counts(nmaps[v.start], ps) if nmaps and v.start in nmaps else None
        if npages > opts.max_pages:
            if nm is None:
                report.notes.append(
                    f"{v.start:#x}-{v.end:#x} ({v.name}): {npages} pages, more than --max-pages "
                    "and no numa_maps line: not counted"
                )
                nm = {}
            present = sum(nm.values())
            report.mappings.append(
                MappingPlace(v, npages, dict(nm), npages - present, {}, "numa_maps", nm, None)
            )
            continue
        addrs = np.uint64(v.start // ps * ps) + np.arange(npages, dtype=np.uint64) * np.uint64(ps)
        status = np.empty(npages, dtype=np.int64)
        for i in range(0, npages, opts.batch):
            ret, e, st = kernel.move_pages(pid, addrs[i : i + opts.batch], None, 0)
            if ret < 0:
                if e == _errno.ESRCH:
                    raise PlaceError(f"--pid {pid}: the process exited")
                raise PlaceError(
                    f"move_pages (query) of pid {pid} failed: {errno_name(e)}: {errno_message(e)}"
                )
            status[i : i + opts.batch] = st
        on = status[status >= 0]
        nodes = {int(n): int(c) for n, c in zip(*np.unique(on, return_counts=True), strict=True)}
        neg = -status[status < 0]
        absent = int(np.isin(neg, (_errno.ENOENT, _errno.EFAULT)).sum())
        errors = {
            errno_name(int(c)): int(k)
            for c, k in zip(*np.unique(neg, return_counts=True), strict=True)
            if int(c) not in (_errno.ENOENT, _errno.EFAULT)
        }
        agree = None
        if _special(v):
            pass  # the kernel's own pages: numa_maps does not count them
        elif nm is not None:
            agree = {n: c for n, c in nm.items() if c} == nodes
        elif nmaps is not None:
            # numa_maps leaves out mappings it cannot walk (such as [vsyscall]).
            agree = not nodes
        report.mappings.append(
            MappingPlace(v, npages, nodes, absent, errors, "move_pages", nm, agree)
        )
    dis = [m for m in report.mappings if m.agree is False]
    if dis:
        report.notes.append(
            f"{len(dis)} mapping(s) where numa_maps counts differ from move_pages (the process "
            "ran between the two reads)"
        )
    return report
