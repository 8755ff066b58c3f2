"""Apply a placement plan to a running process with ``move_pages(2)``.

1. The plan's mappings are checked against the process's current ``/proc/PID/maps``. A plan
   mapping **matches** when every byte of its range is still mapped, by mappings of the same
   name (file path, or ``[anon]``, ``[heap]``, ...) and, when both sides know it, the same
   inode. The kernel merges adjacent compatible mappings, so a match may lie inside a larger
   mapping; ``strict`` also demands that the range starts and ends exactly where the current
   mapping does. A mapping that is gone, partly unmapped, now backed by something else, or
   (strict) resized is a **mismatch**: its pages are reported and not touched.
2. The current node of every page of the matched mappings is queried (``nodes = NULL``).
   Pages already on their target are not moved.
3. The others are moved in batches of ``batch`` pages that share a target node. Per page, the
   kernel's status says where the page is now, or why it did not move. Busy pages (``-EBUSY``,
   or pages the kernel reports as not migrated with a positive return) are retried up to
   ``retries`` times.

Only addresses listed in the plan are ever passed to ``move_pages``.

Outcomes: ``moved``, ``already there``, ``would move`` (dry run), ``busy`` (still busy after
the retries), ``not present`` (``-ENOENT``: never touched or swapped out; ``-EFAULT``: not
mapped or not movable), ``failed`` (with the errno: ``ENODEV`` target node does not exist or
has no memory, ``EACCES`` shared page, ``ENOMEM``, ``EPERM``, ...), ``mismatch``.
"""

from __future__ import annotations

import errno as _errno
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tierlab.place import PlaceError
from tierlab.place.numa import (
    MPOL_MF_MOVE,
    MPOL_MF_MOVE_ALL,
    UNWRITTEN,
    Kernel,
    LinuxKernel,
    NumaError,
    Topology,
    errno_message,
    errno_name,
    topology,
)
from tierlab.place.plan import Plan, PlanMapping
from tierlab.place.proc import Vma, check_process, command, normalize_name, read_maps

OUTCOMES = (
    "moved",
    "already there",
    "would move",
    "busy",
    "not present",
    "failed",
    "mismatch",
)
MOVED, THERE, WOULD, BUSY, ABSENT, FAILED, MISMATCH = range(len(OUTCOMES))
#: Outcomes that leave a page where the plan wants it, or with nothing to move.
GOOD = frozenset({MOVED, THERE, WOULD, ABSENT})
_ABSENT_ERRNOS = (_errno.ENOENT, _errno.EFAULT)
#: Errors of a whole call that end the run (every later call would fail the same way).
_FATAL = (_errno.EPERM, _errno.ESRCH, _errno.ENOSYS)


@dataclass
class ApplyOptions:
    dry_run: bool = False
    batch: int = 1024
    retries: int = 3
    #: ``MPOL_MF_MOVE_ALL``: also move pages shared with other processes (CAP_SYS_NICE).
    move_all: bool = False
    strict: bool = False
    #: Pause before retry ``k`` is ``k * retry_delay_s``.
    retry_delay_s: float = 0.005


@dataclass
class MappingCheck:
    mapping: PlanMapping
    ok: bool
    reason: str
    pages: int
    #: The current mapping(s) the range lies in: (start, end, name).
    current: list[tuple[int, int, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            **self.mapping.to_json(),
            "status": "ok" if self.ok else "mismatch",
            "reason": self.reason,
            "pages": self.pages,
            "current": [{"start": a, "end": b, "name": n} for a, b, n in self.current],
        }


@dataclass
class ApplyReport:
    pid: int
    command: list[str]
    plan_process: dict[str, Any]
    dry_run: bool
    topology: Topology
    checks: list[MappingCheck]
    addr: np.ndarray
    mapping: np.ndarray
    target: np.ndarray
    #: Node before / after (-1: none, the page was not present or the query failed).
    before: np.ndarray
    after: np.ndarray
    outcome: np.ndarray
    #: errno of a failed/busy/absent page, 0 otherwise.
    errno: np.ndarray
    attempts: np.ndarray
    notes: list[str] = field(default_factory=list)
    calls: int = 0

    def counts(self) -> dict[str, int]:
        return {name: int((self.outcome == i).sum()) for i, name in enumerate(OUTCOMES)}

    def failures(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for code in sorted(set(self.errno[self.outcome == FAILED].tolist())):
            out[errno_name(code)] = {
                "pages": int(((self.outcome == FAILED) & (self.errno == code)).sum()),
                "message": errno_message(code),
            }
        return out

    @property
    def mismatched_mappings(self) -> list[MappingCheck]:
        return [c for c in self.checks if not c.ok]

    @property
    def complete(self) -> bool:
        """Every page ended where the plan wants it (or had nothing to move) and every plan
        mapping matched."""
        return bool(np.isin(self.outcome, list(GOOD)).all()) and not self.mismatched_mappings

    def page_records(self) -> list[dict[str, Any]]:
        out = []
        for a, m, t, b, af, o, e, n in zip(
            self.addr.tolist(),
            self.mapping.tolist(),
            self.target.tolist(),
            self.before.tolist(),
            self.after.tolist(),
            self.outcome.tolist(),
            self.errno.tolist(),
            self.attempts.tolist(),
            strict=True,
        ):
            rec: dict[str, Any] = {
                "addr": a,
                "mapping": m,
                "target": t,
                "before": b if b >= 0 else None,
                "after": af if af >= 0 else None,
                "outcome": OUTCOMES[o],
                "attempts": n,
            }
            if e:
                rec["errno"] = errno_name(e)
                rec["message"] = errno_message(e)
            out.append(rec)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "command": self.command,
            "plan_process": self.plan_process,
            "dry_run": self.dry_run,
            "machine": {**self.topology.to_json(), "note": self.topology.describe()},
            "complete": self.complete,
            "counts": self.counts(),
            "failures": self.failures(),
            "mappings": [c.to_json() for c in self.checks],
            "move_pages_calls": self.calls,
            "notes": self.notes,
            "pages": self.page_records(),
        }


def _fmt(a: int) -> str:
    return f"{a:#x}"


def check_mappings(plan: Plan, vmas: list[Vma], strict: bool = False) -> list[MappingCheck]:
    """Match each plan mapping against the current mappings (see the module docstring)."""
    vmas = sorted(vmas, key=lambda v: v.start)
    starts = np.array([v.start for v in vmas], dtype=np.uint64)
    out = []
    counts = np.bincount(plan.mapping, minlength=max((m.id for m in plan.mappings), default=-1) + 1)
    ps = plan.page_size
    for m in plan.mappings:
        lo = m.start // ps * ps
        hi = -(-m.end // ps) * ps
        npages = int(counts[m.id]) if m.id < counts.size else 0
        i = int(np.searchsorted(starts, np.uint64(lo), side="right")) - 1
        i = max(i, 0)
        covering: list[Vma] = []
        while i < len(vmas) and vmas[i].start < hi:
            if vmas[i].end > lo:
                covering.append(vmas[i])
            i += 1
        cur = [(v.start, v.end, v.name) for v in covering]
        reason = ""
        pos = lo
        for v in covering:
            if v.start > pos:
                break
            pos = max(pos, v.end)
        if not covering:
            reason = f"gone: nothing is mapped at {_fmt(lo)}-{_fmt(hi)} now"
        elif pos < hi or covering[0].start > lo:
            hole = lo if covering[0].start > lo else pos
            reason = f"partly unmapped: {_fmt(hole)} is not mapped now"
        elif not m.derived:
            want = normalize_name(m.name)
            other = [v for v in covering if v.name != want]
            if other:
                reason = (
                    f"changed: {_fmt(other[0].start)}-{_fmt(other[0].end)} is now "
                    f"{other[0].name!r}, the plan has {want!r}"
                )
            elif m.inode:
                bad = [v for v in covering if v.inode and v.inode != m.inode]
                if bad:
                    reason = (
                        f"changed: {want} is now inode {bad[0].inode}, the plan has inode "
                        f"{m.inode} (the file was replaced)"
                    )
        if not reason and strict:
            # The whole current mapping: contiguous VMAs of the same name around the range.
            j = vmas.index(covering[0])
            k = vmas.index(covering[-1])
            name = covering[0].name
            while j > 0 and vmas[j - 1].end == vmas[j].start and vmas[j - 1].name == name:
                j -= 1
            while (
                k + 1 < len(vmas)
                and vmas[k + 1].start == vmas[k].end
                and (vmas[k + 1].name == name)
            ):
                k += 1
            a, b = vmas[j].start, vmas[k].end
            if (a, b) != (lo, hi):
                reason = (
                    f"changed: the mapping is now {_fmt(a)}-{_fmt(b)} ({(b - a) >> 10} KiB), "
                    f"the plan has {_fmt(lo)}-{_fmt(hi)} ({(hi - lo) >> 10} KiB)"
                )
        out.append(MappingCheck(m, not reason, reason or "ok", npages, cur))
    return out


def _validate_options(opts: ApplyOptions) -> None:
    if opts.batch < 1:
        raise PlaceError(f"--batch {opts.batch}: must be at least 1")
    if opts.retries < 0:
        raise PlaceError(f"--retries {opts.retries}: must not be negative")


def apply_plan(
    plan: Plan,
    pid: int,
    options: ApplyOptions | None = None,
    *,
    kernel: Kernel | None = None,
    topo: Topology | None = None,
    vmas: list[Vma] | None = None,
) -> ApplyReport:
    """Check ``plan`` against process ``pid`` and move its pages (or, dry run, say what would
    move). ``kernel``, ``topo`` and ``vmas`` default to the real ones (tests pass models)."""
    opts = options or ApplyOptions()
    _validate_options(opts)
    if vmas is None:
        check_process(pid)
        vmas = read_maps(pid)
    topo = topo or topology()
    try:
        kernel = kernel or LinuxKernel()
    except NumaError as exc:
        raise PlaceError(str(exc)) from None
    checks = check_mappings(plan, vmas, opts.strict)
    n = len(plan)
    before = np.full(n, -1, dtype=np.int64)
    after = np.full(n, -1, dtype=np.int64)
    outcome = np.full(n, FAILED, dtype=np.int8)
    err = np.zeros(n, dtype=np.int64)
    attempts = np.zeros(n, dtype=np.int64)
    notes: list[str] = []
    report = ApplyReport(
        pid=pid,
        command=command(pid),
        plan_process=plan.process,
        dry_run=opts.dry_run,
        topology=topo,
        checks=checks,
        addr=plan.addr,
        mapping=plan.mapping,
        target=plan.target,
        before=before,
        after=after,
        outcome=outcome,
        errno=err,
        attempts=attempts,
        notes=notes,
    )
    if (
        plan.process.get("command")
        and report.command
        and (plan.process["command"] != report.command)
    ):
        notes.append(
            f"the plan was made for `{' '.join(plan.process['command'])}`, process {pid} runs "
            f"`{' '.join(report.command)}`"
        )
    if topo.single_node:
        notes.append(topo.describe())
    bad_ids = [c.mapping.id for c in checks if not c.ok]
    mism = np.isin(plan.mapping, bad_ids)
    outcome[mism] = MISMATCH
    todo = np.flatnonzero(~mism)
    if todo.size == 0:
        return report
    flags = MPOL_MF_MOVE_ALL if opts.move_all else MPOL_MF_MOVE

    # Where the pages are now.
    fatal = 0
    for i in range(0, todo.size, opts.batch):
        idx = todo[i : i + opts.batch]
        ret, e, status = kernel.move_pages(pid, plan.addr[idx], None, 0)
        report.calls += 1
        if ret < 0:
            if e == _errno.ESRCH:
                raise PlaceError(f"--pid {pid}: the process exited")
            fatal = e
            break
        before[idx] = np.where(status >= 0, status, -1)
        err[idx] = np.where(status < 0, -status.astype(np.int64), 0)
    if fatal:
        outcome[todo] = FAILED
        err[todo] = fatal
        return report
    tgt = plan.target[todo]
    there = before[todo] == tgt
    outcome[todo[there]] = THERE
    after[todo[there]] = tgt[there]
    err[todo[there]] = 0
    rest = todo[~there]
    if opts.dry_run:
        for j in rest.tolist():
            t = int(plan.target[j])
            if t not in topo.memory:
                outcome[j] = FAILED
                err[j] = _errno.ENODEV
            elif before[j] < 0:
                absent = int(err[j]) in _ABSENT_ERRNOS
                outcome[j] = ABSENT if absent else FAILED
            else:
                outcome[j] = WOULD
                err[j] = 0
        if any(int(plan.target[j]) not in topo.memory for j in rest.tolist()):
            notes.append(
                "dry run: ENODEV predicted for pages whose target is not a node with memory here"
            )
        return report

    # Move: groups of one target node, in batches; busy pages retried.
    outcome[rest] = -1  # not tried yet
    pending = rest
    for attempt in range(opts.retries + 1):
        if pending.size == 0:
            break
        if attempt:
            time.sleep(opts.retry_delay_s * attempt)
        retry: list[np.ndarray] = []
        for node in np.unique(plan.target[pending]).tolist():
            group = pending[plan.target[pending] == node]
            dead_errno = 0
            for i in range(0, group.size, opts.batch):
                idx = group[i : i + opts.batch]
                attempts[idx] += 1
                if dead_errno:
                    outcome[idx] = FAILED
                    err[idx] = dead_errno
                    continue
                nodes = np.full(idx.size, node, dtype=np.int32)
                ret, e, status = kernel.move_pages(pid, plan.addr[idx], nodes, flags)
                report.calls += 1
                st = status.astype(np.int64)
                written = st != UNWRITTEN
                ok = written & (st == node)
                outcome[idx[ok]] = MOVED
                after[idx[ok]] = node
                err[idx[ok]] = 0
                on_other = written & (st >= 0) & (st != node)
                neg = written & (st < 0)
                busy = neg & (st == -_errno.EBUSY)
                absent = neg & np.isin(-st, _ABSENT_ERRNOS)
                failed = neg & ~busy & ~absent
                outcome[idx[absent]] = ABSENT
                err[idx[absent]] = -st[absent]
                outcome[idx[failed]] = FAILED
                err[idx[failed]] = -st[failed]
                retry.append(idx[busy | on_other])
                outcome[idx[busy | on_other]] = BUSY
                err[idx[busy | on_other]] = _errno.EBUSY
                unwritten = idx[~written]
                if ret < 0:
                    # The call stopped at the first page it could not take: the rest share
                    # its target, so they all fail the same way.
                    outcome[unwritten] = FAILED
                    err[unwritten] = e
                    if e in _FATAL:
                        if e == _errno.ESRCH:
                            notes.append(f"process {pid} exited while its pages were moving")
                        return _finish_fatal(report, rest, e)
                    dead_errno = e
                elif unwritten.size:
                    # A positive return: the kernel gave up on these (migration failed).
                    outcome[unwritten] = BUSY
                    err[unwritten] = _errno.EBUSY
                    retry.append(unwritten)
        pending = np.concatenate(retry) if retry else np.zeros(0, dtype=np.int64)
        if pending.size and attempt < opts.retries:
            # Some may have moved after all, or gone: ask before retrying.
            ret, e, status = kernel.move_pages(pid, plan.addr[pending], None, 0)
            report.calls += 1
            if ret >= 0:
                st = status.astype(np.int64)
                arrived = st == plan.target[pending]
                outcome[pending[arrived]] = MOVED
                after[pending[arrived]] = st[arrived]
                err[pending[arrived]] = 0
                gone = (st < 0) & np.isin(-st, _ABSENT_ERRNOS)
                outcome[pending[gone]] = ABSENT
                err[pending[gone]] = -st[gone]
                pending = pending[~arrived & ~gone]
    if np.any(outcome == BUSY):
        notes.append(
            f"{int((outcome == BUSY).sum())} page(s) stayed busy after {opts.retries} retries"
        )
    return report


def _finish_fatal(report: ApplyReport, rest: np.ndarray, e: int) -> ApplyReport:
    """A call failed in a way every later call would too: pages not settled fail with it."""
    left = rest[np.isin(report.outcome[rest], [-1, BUSY])]
    report.outcome[left] = FAILED
    report.errno[left] = e
    return report
