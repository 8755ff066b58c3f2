"""The loop of ``tierlab tier``: telemetry -> decision -> ``move_pages``, step after step.

Every step (``interval``):

1. poll the recorder for one interval; its samples and mapping events go into the recording
   (as ``tierlab record`` writes them) and the samples' pages into the policy's counts
   (halved every ``sample_decay_s``, the simulated policy's ``sample_decay``);
2. read ``/proc/PID/maps`` and ask the kernel (``move_pages`` with no target nodes) which node
   each counted page is on, for the pages inside the current mappings only;
3. decide with the simulator's ``hottest-first`` decision core
   (``tierlab._native.HottestFirstCore.decide``): the pages to promote to the fast node,
   hottest first, and the colder pages to demote first to make room, within
   ``fast_capacity`` bytes and the rate limit's share of one interval;
4. move: demotions, then promotions, in batches of at most ``batch_pages`` pages; before each
   batch the rate limit's token bucket is waited for, ``/proc/PID/maps`` is read again and
   pages no longer inside a mapping are dropped (logged, never passed to the kernel); a batch
   that took longer than ``batch_time_cap_ms`` halves the next batch (a batch within the cap
   doubles it again, up to ``batch_pages``).

Ctrl-C (SIGINT) or the target's exit ends the loop before the next batch; the batch in
flight completes (``move_pages`` cannot be interrupted), so the loop stops within one batch.
"""

from __future__ import annotations

import contextlib
import errno as _errno
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tierlab.place import PlaceError
from tierlab.place.numa import (
    MPOL_MF_MOVE,
    UNWRITTEN,
    Kernel,
    LinuxKernel,
    NumaError,
    Topology,
    errno_message,
    errno_name,
    topology,
)
from tierlab.place.proc import Vma, read_maps
from tierlab.tier import TierError
from tierlab.tier.log import DecisionLog

PAGE = 4096
#: Policies whose decision core the loop can run (the simulator's, through the binding).
POLICIES = ("hottest-first", "memtis")
_ABSENT = (_errno.ENOENT, _errno.EFAULT)
_FATAL = (_errno.EPERM, _errno.ENOSYS, _errno.ENODEV, _errno.EINVAL)


def _thread_states(tasks: Path) -> list[str]:
    """The state letter of every thread under ``/proc/PID/task`` (empty: the process is
    gone)."""
    out: list[str] = []
    try:
        names = os.listdir(tasks)
    except OSError:
        return out
    for n in names:
        try:
            stat = (tasks / n / "stat").read_bytes()
        except OSError:
            continue  # the thread exited meanwhile
        out.append(stat.rsplit(b")", 1)[1].split()[0].decode())
    return out


@dataclass
class TierOptions:
    fast_node: int = 0
    slow_node: int = 1
    #: Seconds per step (default: the simulated policy re-ranks sampled pages every 200 ms).
    interval_s: float = 0.2
    #: Migration limit, MB/s (10^6 bytes; the simulated hottest-first's default, 2048).
    rate_limit_mbps: float = 2048.0
    #: Most pages per move_pages call (the simulator's batch, 512).
    batch_pages: int = 512
    #: A batch taking longer halves the next one.
    batch_time_cap_ms: float = 10.0
    #: Bytes of the fast node the target's pages may fill (None: the node's free memory at
    #: start).
    fast_capacity: int | None = None
    fill: float = 0.95
    #: The policy whose decision core decides: ``hottest-first`` or ``memtis``, or ``python``
    #: (a Python class: ``python_policy``).
    policy: str = "hottest-first"
    #: ``FILE.py:Class``: a Python tiering policy (``tierlab.agents``), with its parameters.
    python_policy: str | None = None
    python_params: dict[str, Any] = field(default_factory=dict)
    #: hottest-first: samples a page needs to be a candidate.
    min_samples: int = 1
    #: hottest-first: counts halve every this long.
    sample_decay_s: float = 1.0
    #: memtis: samples between two coolings (Memtis' 2 M).
    cooling_samples: int = 2_000_000
    dry_run: bool = False
    #: Stop the target (SIGSTOP, then SIGCONT) around each batch, from reading its mappings
    #: to the move_pages call, so that it cannot unmap a page in between.
    freeze: bool = True
    #: Stop after this many seconds (None: until Ctrl-C or the target exits).
    duration_s: float | None = None

    def check(self) -> None:
        def bad(opt: str, what: str) -> TierError:
            return TierError(f"{opt}: {what}")

        if not self.interval_s > 0:
            raise bad(f"--interval {self.interval_s}", "must be > 0")
        if not (self.rate_limit_mbps > 0 and np.isfinite(self.rate_limit_mbps)):
            raise bad(f"--rate-limit-mbps {self.rate_limit_mbps}", "must be > 0")
        if self.batch_pages < 1:
            raise bad(f"--batch-pages {self.batch_pages}", "must be at least 1")
        if not self.batch_time_cap_ms > 0:
            raise bad(f"--batch-time-cap {self.batch_time_cap_ms}", "must be > 0")
        if not 0 < self.fill <= 1:
            raise bad(f"--fill {self.fill}", "must be in (0, 1]")
        if self.policy == "python" and not self.python_policy:
            raise bad("--policy python", "give the class as FILE.py:Class")
        if self.policy not in POLICIES and self.policy != "python":
            raise bad(
                f"--policy {self.policy}", f"expected one of {', '.join(POLICIES)} or FILE.py:Class"
            )
        if self.cooling_samples < 1:
            raise bad(f"--cooling-samples {self.cooling_samples}", "must be at least 1")
        if self.min_samples < 1:
            raise bad(f"--min-samples {self.min_samples}", "must be at least 1")
        if not self.sample_decay_s > 0:
            raise bad(f"--sample-decay {self.sample_decay_s}", "must be > 0")
        if self.fast_capacity is not None and self.fast_capacity < PAGE:
            raise bad(f"--fast-capacity {self.fast_capacity}", f"must be at least {PAGE} bytes")


def check_nodes(opts: TierOptions, topo: Topology) -> list[str]:
    """Raise :class:`TierError` naming what the machine lacks when a requested node is not a
    node with memory; returns notes (one node for both tiers)."""
    have = topo.memory
    count = f"this machine has {len(have)} NUMA node{'s' if len(have) != 1 else ''} with memory"
    listed = f" (node{'s' if len(have) != 1 else ''} {', '.join(map(str, have))})"
    for opt, n in (("--fast-node", opts.fast_node), ("--slow-node", opts.slow_node)):
        if n not in have:
            hint = ""
            if len(have) == 1:
                hint = (
                    f"; on one node, run with --fast-node {have[0]} --slow-node {have[0]} "
                    "(every move then finds the page already there)"
                )
            raise TierError(f"{opt} {n}: node {n} not present: {count}{listed}{hint}")
    notes = []
    if opts.fast_node == opts.slow_node:
        notes.append(
            f"fast and slow node are both node {opts.fast_node}: the loop keeps its own record "
            "of which pages it promoted, and every move finds the page already there"
        )
    return notes


def node_free_bytes(node: int, root: Path = Path("/sys/devices/system/node")) -> int | None:
    """``MemFree`` of ``node`` (``/sys/devices/system/node/nodeN/meminfo``)."""
    try:
        for line in (root / f"node{node}" / "meminfo").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 4 and parts[2] == "MemFree:":
                return int(parts[3]) * 1024
    except (OSError, ValueError):
        return None
    return None


def inside(addrs: np.ndarray, vmas: list[Vma]) -> np.ndarray:
    """Mask of the page addresses lying inside one of ``vmas`` (whole page)."""
    addrs = np.asarray(addrs, dtype=np.uint64)
    if not vmas or addrs.size == 0:
        return np.zeros(addrs.size, dtype=bool)
    v = sorted(vmas, key=lambda m: m.start)
    starts = np.array([m.start for m in v], dtype=np.uint64)
    ends = np.array([m.end for m in v], dtype=np.uint64)
    i = np.searchsorted(starts, addrs, side="right") - 1
    ok = i >= 0
    j = np.where(ok, i, 0)
    return ok & (addrs >= starts[j]) & (addrs + np.uint64(PAGE) <= ends[j])


@dataclass
class TierResult:
    pid: int
    steps: int = 0
    batches: int = 0
    #: Batches already done when the stop was asked for (Ctrl-C), or None.
    batches_at_stop_request: int | None = None
    stop_reason: str = ""
    decided: dict[str, int] = field(default_factory=lambda: {"promote": 0, "demote": 0})
    outcomes: dict[str, dict[str, int]] = field(
        default_factory=lambda: {"promote": {}, "demote": {}}
    )
    dropped_unmapped: int = 0
    #: Batches skipped because the target's threads did not all stop within 0.5 s.
    unfrozen_batches: int = 0
    #: Steps without a decision for the same reason (their query needs the target stopped).
    unfrozen_queries: int = 0
    #: Sampled pages forgotten because they were no longer mapped at a decision.
    forgotten: int = 0
    move_calls: int = 0
    query_calls: int = 0
    samples: int = 0
    fast_capacity: int = 0
    notes: list[str] = field(default_factory=list)
    exit: tuple[str, int] | None = None
    wall_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Loop:
    """One run of the loop over ``telemetry`` (the native ``LiveRecorder`` or a model with
    its interface). ``kernel``, ``topo``, ``maps`` (``() -> list[Vma]``) and ``sleep``
    (``seconds -> stopped?``) default to the real ones; tests pass models."""

    def __init__(
        self,
        telemetry: Any,
        opts: TierOptions,
        *,
        log: DecisionLog | None = None,
        on_batch: Callable[[Any], None] | None = None,
        kernel: Kernel | None = None,
        topo: Topology | None = None,
        maps: Callable[[], list[Vma]] | None = None,
        sleep: Callable[[float], bool] | None = None,
    ) -> None:
        from tierlab import _native

        opts.check()
        self.tel = telemetry
        self.opts = opts
        self.pid = int(telemetry.pid)
        self.topo = topo or topology()
        self.res = TierResult(pid=self.pid)
        self.res.notes += check_nodes(opts, self.topo)
        try:
            self.kernel = kernel or LinuxKernel()
        except NumaError as e:
            raise TierError(str(e)) from None
        self._maps = maps or (lambda: read_maps(self.pid))
        self.stop = threading.Event()
        self._sleep = sleep or self.stop.wait
        self.log = log
        self.on_batch = on_batch
        cap = opts.fast_capacity
        if cap is None:
            cap = node_free_bytes(opts.fast_node) or 0
            if cap < PAGE:
                raise TierError(
                    f"cannot read the free memory of node {opts.fast_node}: give --fast-capacity"
                )
        self.capacity = int(cap)
        self.res.fast_capacity = self.capacity
        self.core: Any
        self.py_policy: Any = None
        if opts.policy == "python":
            from tierlab.agents import live

            self.core = None
            self.py_policy = live.load(
                str(opts.python_policy),
                opts.python_params,
                {
                    "fast_node": opts.fast_node,
                    "slow_node": opts.slow_node,
                    "rate_limit_mbps": opts.rate_limit_mbps,
                },
            )
        elif opts.policy == "memtis":
            self.core = _native.MemtisCore(fill=opts.fill, cooling_samples=opts.cooling_samples)
        else:
            self.core = _native.HottestFirstCore(fill=opts.fill, min_samples=opts.min_samples)
        self.rate_bps = opts.rate_limit_mbps * 1e6
        self.bucket_cap = max(self.rate_bps * opts.interval_s, float(opts.batch_pages * PAGE))
        self.tokens = self.bucket_cap
        self.last_refill = time.monotonic()
        cap_pages = int(self.rate_bps * opts.batch_time_cap_ms / 1e3 / PAGE)
        self.batch = max(1, min(opts.batch_pages, cap_pages))
        #: Pages this loop put on the fast node and has not demoted since.
        self.promoted: set[int] = set()
        self.step = 0
        self.sink: Any = None
        #: Node of each page at the last query (negative: -errno).
        self.node_of: dict[int, int] = {}

    # -- helpers ---------------------------------------------------------------------------
    def request_stop(self) -> None:
        if not self.stop.is_set():
            self.res.batches_at_stop_request = self.res.batches
            self.res.stop_reason = self.res.stop_reason or "interrupted"
        self.stop.set()

    def _now(self) -> int:
        return int(self.tel.now_ns)

    def _current_maps(self) -> list[Vma] | None:
        """The target's mappings, or None when it is gone (an exited, not yet reaped process
        has no mappings left)."""
        try:
            return self._maps() or None
        except PlaceError:
            return None

    def _target_gone(self) -> None:
        self.res.stop_reason = self.res.stop_reason or "target exited"
        self.stop.set()

    def _take(self, batch: Any) -> None:
        if self.sink is not None:
            self.sink.add(batch)
        addr = batch["samples"]["addr"]
        if self.core is None:
            # A Python policy (its samples went to its on_feed as they arrived).
            self.res.samples += len(addr) // 8
            return
        self.res.samples += self.core.add_samples(addr)

    def _wait_tokens(self, need: float) -> bool:
        """Wait until the bucket holds ``need`` bytes; False if stopped meanwhile."""
        while True:
            now = time.monotonic()
            self.tokens = min(
                self.bucket_cap, self.tokens + (now - self.last_refill) * self.rate_bps
            )
            self.last_refill = now
            if self.tokens >= need:
                return True
            if self._sleep((need - self.tokens) / self.rate_bps) or self.stop.is_set():
                return False

    # -- one step --------------------------------------------------------------------------
    def _query(self, addrs: np.ndarray) -> np.ndarray:
        out = np.full(addrs.size, -_errno.ENOENT, dtype=np.int64)
        for i in range(0, addrs.size, 4096):
            ret, err, status = self.kernel.move_pages(self.pid, addrs[i : i + 4096], None, 0)
            self.res.query_calls += 1
            if ret < 0:
                if err == _errno.ESRCH or self._current_maps() is None:
                    # ESRCH, or EINVAL from a process that exited meanwhile (no memory).
                    self._target_gone()
                    return out
                raise TierError(
                    f"move_pages (query) of pid {self.pid}: {errno_name(err)}: {errno_message(err)}"
                )
            out[i : i + 4096] = status
        return out

    def _decide(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        vmas = self._current_maps()
        if vmas is None:
            self._target_gone()
            return None
        cand = self.core.candidates()
        addrs = np.frombuffer(cand["addr"], dtype="<u8")
        mapped = inside(addrs, vmas)
        if not mapped.all():
            # Samples of memory no longer mapped (or of the program before an exec): the
            # policy forgets them, so it never ranks a page outside the current mappings.
            self.core.forget(addrs[~mapped].tobytes())
            self.res.forgotten += int((~mapped).sum())
            addrs = addrs[mapped]
        known = np.union1d(addrs, np.fromiter(self.promoted, dtype=np.uint64))
        # The query's pages are checked against the mappings with the target stopped, as a
        # move's are (``_move``): a page unmapped between the check and the call cannot
        # reach move_pages.
        frozen = self._freeze() if self.opts.freeze and not self.opts.dry_run else "no"
        if frozen == "late":
            self._thaw()
            self.res.unfrozen_queries += 1
            return None
        try:
            vmas = self._current_maps()
            if vmas is None:
                self._target_gone()
                return None
            known = known[inside(known, vmas)]
            self.promoted &= set(known.tolist())
            nodes = self._query(known)
        finally:
            if frozen == "stopped":
                self._thaw()
        self.node_of = dict(zip(known.tolist(), nodes.tolist(), strict=True))
        if self.stop.is_set() and self.res.stop_reason == "target exited":
            return None
        if self.opts.fast_node == self.opts.slow_node:
            fast = np.array(sorted(a for a in self.promoted), dtype=np.uint64)
            present = set(known[nodes >= 0].tolist())
            fast = fast[np.isin(fast, list(present))] if fast.size else fast
        else:
            fast = known[nodes == self.opts.fast_node]
        max_promote = max(1, int(self.rate_bps * self.opts.interval_s / PAGE))
        d = self.core.decide(fast.astype("<u8").tobytes(), self.capacity, max_promote)
        pro = np.frombuffer(d["promote"], dtype="<u8")
        pro_s = np.frombuffer(d["promote_score"], dtype="<f8")
        dem = np.frombuffer(d["demote"], dtype="<u8")
        dem_s = np.frombuffer(d["demote_score"], dtype="<f8")
        t = self._now()
        if self.log is not None:
            self.log.add(t, self.step, -1, "decide", "demote", dem, self.opts.slow_node, dem_s)
            self.log.add(t, self.step, -1, "decide", "promote", pro, self.opts.fast_node, pro_s)
        self.res.decided["promote"] += int(pro.size)
        self.res.decided["demote"] += int(dem.size)
        return dem, dem_s, pro, pro_s

    def _move(self, action: str, addrs: np.ndarray, scores: np.ndarray, node: int) -> None:
        i = 0
        counts = self.res.outcomes[action]
        while i < addrs.size:
            if self.stop.is_set():
                return
            chunk = addrs[i : i + self.batch]
            sc = scores[i : i + self.batch]
            i += chunk.size
            if not self.opts.dry_run and not self._wait_tokens(chunk.size * PAGE):
                return
            frozen = self._freeze() if self.opts.freeze and not self.opts.dry_run else "no"
            if frozen == "late":
                # Some thread still ran after the wait: no batch without the guarantee.
                self._thaw()
                self.res.unfrozen_batches += 1
                continue
            try:
                go_on = self._batch(action, chunk, sc, node, counts)
            finally:
                if frozen == "stopped":
                    self._thaw()
            if not go_on:
                return
            if self.on_batch is not None:
                self.on_batch(self)

    def _freeze(self) -> str:
        """Stop the target and wait until all its threads are stopped: ``stopped`` (ours to
        continue), ``no`` (gone, or stopped by someone else: left as it is), ``late`` (some
        thread still running after 0.5 s; continue it)."""
        tasks = Path(f"/proc/{self.pid}/task")
        states = _thread_states(tasks)
        if not states or all(st in "tT" for st in states):
            return "no"
        try:
            os.kill(self.pid, signal.SIGSTOP)
        except ProcessLookupError:
            return "no"
        deadline = time.monotonic() + 0.5
        while True:
            states = _thread_states(tasks)
            if not states or all(st in "tTZX" for st in states):
                return "stopped"
            if time.monotonic() > deadline:
                return "late"
            time.sleep(0.0002)

    def _thaw(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGCONT)

    def _batch(
        self, action: str, chunk: np.ndarray, sc: np.ndarray, node: int, counts: dict[str, int]
    ) -> bool:
        """One batch: drop what is no longer mapped, move the rest (the target is stopped
        meanwhile when ``freeze`` is on). False: stop moving."""
        vmas = self._current_maps()
        if vmas is None:
            self._target_gone()
            return False
        ok = inside(chunk, vmas)
        t = self._now()
        dropped = chunk[~ok]
        if dropped.size:
            self.res.dropped_unmapped += int(dropped.size)
            self.promoted -= set(dropped.tolist())
            if self.log is not None:
                self.log.add(t, self.step, -1, "drop", action, dropped, node, sc[~ok], "unmapped")
        chunk, sc = chunk[ok], sc[ok]
        if chunk.size == 0:
            return True
        batch_no = self.res.batches
        self.res.batches += 1
        if self.opts.dry_run:
            outcome = ["dry-run"] * chunk.size
            err = np.zeros(chunk.size, dtype=np.int32)
        else:
            got, err = self._call(chunk, node)
            if got is None:
                return False
            outcome = got
            self.tokens -= chunk.size * PAGE
            for a, o in zip(chunk.tolist(), outcome, strict=True):
                if o in ("moved", "there", "placed"):
                    if action == "promote":
                        self.promoted.add(a)
                    else:
                        self.promoted.discard(a)
        for o in outcome:
            counts[o] = counts.get(o, 0) + 1
        if self.log is not None:
            self.log.add(t, self.step, batch_no, "move", action, chunk, node, sc, outcome, err)
        return True

    def _call(self, chunk: np.ndarray, node: int) -> tuple[list[str] | None, np.ndarray]:
        before = time.monotonic()
        nodes = np.full(chunk.size, node, dtype=np.int32)
        ret, e, status = self.kernel.move_pages(self.pid, chunk, nodes, MPOL_MF_MOVE)
        took_ms = (time.monotonic() - before) * 1e3
        self.res.move_calls += 1
        if took_ms > self.opts.batch_time_cap_ms:
            self.batch = max(1, self.batch // 2)
        elif self.batch < self.opts.batch_pages:
            self.batch = min(self.opts.batch_pages, self.batch * 2)
        st = status.astype(np.int64)
        err = np.where((st < 0) & (st != UNWRITTEN), -st, 0).astype(np.int32)
        out: list[str] = []
        for a, s in zip(chunk.tolist(), st.tolist(), strict=True):
            if s == node:
                # Where the page was at the last query says what the call did: on the
                # target already (`there`), on another node (`moved`), or not present then
                # and faulted in by the target since, wherever the kernel put it (`placed`:
                # we cannot tell whether this call moved it).
                before = self.node_of.get(a, -1)
                out.append("there" if before == node else "moved" if before >= 0 else "placed")
                self.node_of[a] = node
            elif s == UNWRITTEN:
                out.append("failed" if ret < 0 else "busy")
            elif s >= 0:
                out.append("busy")
            elif -s in _ABSENT:
                out.append("absent")
            elif -s == _errno.EBUSY:
                out.append("busy")
            else:
                out.append("failed")
        if ret < 0:
            err = np.where(status == UNWRITTEN, e, err).astype(np.int32)
            if e == _errno.ESRCH or self._current_maps() is None:
                self._target_gone()
                return None, err
            if e in _FATAL:
                raise TierError(
                    f"move_pages to node {node} of pid {self.pid}: {errno_name(e)}: "
                    f"{errno_message(e)}"
                )
        return out, err

    # -- the run ---------------------------------------------------------------------------
    def run(self) -> TierResult:
        started = time.monotonic()
        opts = self.opts
        if self.py_policy is not None:
            from tierlab.agents import live

            live.run(self)
            if self.log is not None:
                self.log.flush()
            self.res.steps = self.step
            self.res.exit = self.tel.exit
            self.res.wall_s = time.monotonic() - started
            return self.res
        step_ns = int(opts.interval_s * 1e9)
        decay_ns = int(opts.sample_decay_s * 1e9)
        last_decay = self._now()
        end_ns = None if opts.duration_s is None else self._now() + int(opts.duration_s * 1e9)
        while not self.stop.is_set():
            until = self._now() + step_ns
            while not self.stop.is_set() and self.tel.exit is None and self._now() < until:
                left_ms = max(1, min(100, (until - self._now()) // 1_000_000))
                self._take(self.tel.poll(left_ms))
            if self.tel.exit is not None:
                self._target_gone()
                break
            if self.stop.is_set():
                break
            now = self._now()
            if now - last_decay >= decay_ns:
                self.core.halve()
                last_decay = now
            got = self._decide()
            if got is not None:
                dem, dem_s, pro, pro_s = got
                self._move("demote", dem, dem_s, opts.slow_node)
                self._move("promote", pro, pro_s, opts.fast_node)
            if self.log is not None:
                self.log.flush()
            self.step += 1
            self.res.steps = self.step
            if end_ns is not None and self._now() >= end_ns and not self.stop.is_set():
                self.res.stop_reason = "duration"
                self.stop.set()
        if self.log is not None:
            self.log.flush()
        self.res.steps = self.step
        self.res.exit = self.tel.exit
        self.res.wall_s = time.monotonic() - started
        return self.res


def run_with_sigint(loop: Loop) -> TierResult:
    """Run ``loop`` with SIGINT, SIGTERM and SIGHUP asking it to stop (in the main
    thread)."""
    from tierlab import signals

    with signals.on_stop(loop.request_stop):
        try:
            return loop.run()
        except KeyboardInterrupt:
            loop.request_stop()
            return loop.res


def tier(
    out: Path,
    opts: TierOptions,
    *,
    argv: list[str] | None = None,
    pid: int | None = None,
    record: Any = None,
    overwrite: bool = False,
    source: str | None = None,
) -> tuple[TierResult, dict[str, Any]]:
    """Run the loop on ``argv`` (launched) or process ``pid`` (attached), recording into
    ``out``. ``record`` is a :class:`tierlab.live.recorder.RecordOptions`. Returns the result
    and the recorder's parameters. Raises ``tierlab._native.LiveError`` when recording cannot
    start, :class:`TierError` for a missing node or a bad option."""
    from tierlab import _native
    from tierlab._version import VERSION as __version__
    from tierlab.live.recorder import RecordOptions, _Sink, machine_info
    from tierlab.recording import RecordingWriter

    opts.check()
    check_nodes(opts, topology())
    ropts = record or RecordOptions()
    if (argv is None) == (pid is None):
        raise ValueError("tier: give either argv or pid")
    if argv is not None:
        rec = _native.LiveRecorder.launch(list(argv), **ropts.native_kwargs())
    else:
        rec = _native.LiveRecorder.attach(int(pid), **ropts.native_kwargs())  # type: ignore[arg-type]
    writer = None
    try:
        params = dict(rec.parameters())
        params.update(
            {
                "buffer_size": ropts.buffer_size,
                "min_mapping": ropts.min_mapping,
                "snapshot_interval_ns": ropts.snapshot_interval_ns,
                "target": {"argv": list(argv)} if argv is not None else {"pid": pid},
            }
        )
        writer = RecordingWriter(
            out,
            source=source or f"tierlab-tier {__version__}",
            parameters=params,
            machine=machine_info(),
            overwrite=overwrite,
        )
        log = DecisionLog(writer._dir)
        loop = Loop(rec, opts, log=log)
        loop.sink = _Sink(writer, str(params["event"]))
        tier_meta: dict[str, Any] = {
            "policy": opts.python_policy if opts.policy == "python" else opts.policy,
            "parameters": {**asdict(opts), "fast_capacity": loop.capacity},
        }
        writer.update_meta_or_warn(tier=tier_meta)
        error: TierError | None = None
        try:
            res = run_with_sigint(loop)
        except TierError as e:
            # A call failed in a way every later one would (EPERM, ENODEV...): keep the log.
            error = e
            res = loop.res
            res.stop_reason = f"error: {e}"
            if loop.log is not None:
                loop.log.flush()
        loop._take(rec.finish())
        acc = dict(rec.stats())
        acc["duration_ns"] = rec.now_ns
        acc["target_pid"] = rec.pid
        acc["mapping_events"] = loop.sink.mapping_events
        tier_meta["result"] = res.to_json()
        tier_meta["stop"] = {
            "reason": res.stop_reason,
            "batches": res.batches,
            "batches_at_stop_request": res.batches_at_stop_request,
        }
        writer.update_meta_or_warn(accounting=acc, tier=tier_meta)
        writer.close()
        writer = None
        if error is not None:
            raise TierError(f"{error} (the decision log up to here is in {out})")
        return res, params
    finally:
        if writer is not None:
            writer.abandon()
        rec.close()
