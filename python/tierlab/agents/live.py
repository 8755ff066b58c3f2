"""A Python tiering policy on a live process (``tierlab tier --policy FILE.py:Class``): the
same class the simulator runs, driven by the live loop of :mod:`tierlab.tier.loop` with a
context whose operations are the kernel's: page locations from ``move_pages(2)`` queries,
moves through the loop's rate-limited, mapping-checked batches, samples from the recorder
(page faults here; PEBS/IBS where the machine has them). Decisions and moves go to the
recording's decision log in the format ``tierlab view`` shows.

What a live process cannot offer (Accessed bits, TLB shootdowns, publishing feeds) raises
:class:`LiveUnsupported` naming the operation."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from tierlab.agents import _host
from tierlab.agents.base import Samples, TieringPolicy, as_u64
from tierlab.tier import TierError

PAGE = 4096
_DONE = ("moved", "there", "placed")


class LiveUnsupported(TierError):
    """An operation the live loop cannot do on a real process."""


def parse_spec(spec: str) -> tuple[str, str]:
    """``FILE.py:Class`` -> (file, class)."""
    path, sep, cls = spec.rpartition(":")
    if not sep or not path or not cls:
        raise TierError(f"--policy {spec}: expected hottest-first, memtis or FILE.py:Class")
    return path, cls


def load(spec: str, values: dict[str, Any], shared: dict[str, Any], seed: int = 0) -> TieringPolicy:
    """The policy of ``FILE.py:Class`` with its parameters ``values`` (checked as a
    scenario's are)."""
    path, cls = parse_spec(spec)
    try:
        obj, _info = _host.build("tiering", path, cls, values, shared, seed, cls, 0)
    except _host.HostError as e:
        where = {"path": f"--policy {spec}", "class": f"--policy {spec}"}.get(
            e.field, f"--set {e.field}"
        )
        raise TierError(f"{where}: {e.message}") from None
    assert isinstance(obj, TieringPolicy)
    return obj


class LiveContext:
    """The context a Python tiering policy gets on a live process (the simulator's
    :class:`tierlab.agents.Context` operations that a process's pages allow)."""

    def __init__(self, loop: Any) -> None:
        self._loop = loop
        self.cpu_ns = 0.0

    # -- time and work -----------------------------------------------------------------------
    @property
    def now_ps(self) -> int:
        return int(self._loop._now()) * 1000

    @property
    def now_ns(self) -> float:
        return float(self._loop._now())

    @property
    def core(self) -> int:
        return 0

    def charge_ns(self, ns: float) -> None:
        self.cpu_ns += float(ns)

    def charge_ps(self, ps: int) -> None:
        self.cpu_ns += ps / 1000

    def core_clock_ps(self, core: int) -> int:
        return self.now_ps

    def core_free_before(self, until_ps: int) -> bool:
        """Wall time left before ``until_ps`` (the loop cannot do more work than time
        passes), and the loop not asked to stop."""
        return not self._loop.stop.is_set() and self.now_ps < until_ps

    # -- the process's memory ----------------------------------------------------------------
    def vmas(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        maps = self._loop._current_maps() or []
        s = np.array([m.start for m in maps], dtype=np.uint64)
        e = np.array([m.end for m in maps], dtype=np.uint64)
        return s, e, np.full(s.size, PAGE, dtype=np.uint64)

    def _nodes(self, addrs: np.ndarray) -> np.ndarray:
        if addrs.size == 0:
            return np.zeros(0, dtype=np.int64)
        return np.asarray(self._loop._query(addrs.astype(np.uint64)), dtype=np.int64)

    def node_of(self, va: int) -> int | None:
        n = int(self._nodes(np.array([va & ~(PAGE - 1)], dtype=np.uint64))[0])
        return n if n >= 0 else None

    def page_size_of(self, va: int) -> int | None:
        return PAGE if self.node_of(va) is not None else None

    def present_pages(
        self, start: int, end: int, max_pages: int = 1 << 20
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        bases: list[np.ndarray] = []
        nodes: list[np.ndarray] = []
        found = 0
        va = start & ~(PAGE - 1)
        while va < end and found < max_pages:
            chunk = np.arange(va, min(end, va + 4096 * PAGE), PAGE, dtype=np.uint64)
            st = self._nodes(chunk)
            present = np.flatnonzero(st >= 0)
            if found + present.size >= max_pages:
                present = present[: max_pages - found]
                bases.append(chunk[present])
                nodes.append(st[present])
                found = max_pages
                va = int(chunk[present[-1]]) + PAGE
                break
            bases.append(chunk[present])
            nodes.append(st[present])
            found += present.size
            va = int(chunk[-1]) + PAGE
        b = np.concatenate(bases) if bases else np.zeros(0, np.uint64)
        n = np.concatenate(nodes).astype(np.uint8) if nodes else np.zeros(0, np.uint8)
        return b, np.full(b.size, PAGE, dtype=np.uint64), n, va

    # -- tiering -----------------------------------------------------------------------------
    @property
    def fast_node(self) -> int:
        return int(self._loop.opts.fast_node)

    @property
    def slow_node(self) -> int:
        return int(self._loop.opts.slow_node)

    def budget(self) -> int:
        loop = self._loop
        now = time.monotonic()
        loop.tokens = min(loop.bucket_cap, loop.tokens + (now - loop.last_refill) * loop.rate_bps)
        loop.last_refill = now
        return int(max(loop.tokens, 0))

    def fast_capacity(self) -> int:
        return int(self._loop.capacity)

    def fast_free(self) -> int:
        return max(0, int(self._loop.capacity) - len(self._loop.promoted) * PAGE)

    def _move(self, action: str, pages: Any) -> int:
        loop = self._loop
        a = as_u64(pages, action)
        if a.size == 0:
            return 0
        if (a % PAGE).any():
            bad = int(a[(a % PAGE) != 0][0])
            raise ValueError(f"{action}: {bad:#x} is not the start of a page")
        node = loop.opts.fast_node if action == "promote" else loop.opts.slow_node
        if loop.log is not None:
            loop.log.add(loop._now(), loop.step, -1, "decide", action, a, node)
        loop.res.decided[action] += int(a.size)
        before = sum(loop.res.outcomes[action].get(o, 0) for o in _DONE)
        loop._move(action, a, np.zeros(a.size), node)
        return int(sum(loop.res.outcomes[action].get(o, 0) for o in _DONE) - before)

    def promote(self, pages: Any) -> tuple[int, bool]:
        return self._move("promote", pages), False

    def demote(self, pages: Any) -> int:
        return self._move("demote", pages)

    # -- what a live process does not offer ----------------------------------------------------
    def _no(self, what: str) -> LiveUnsupported:
        return LiveUnsupported(f"{what}: not available on a live process (tierlab tier)")

    def accessed(self, *a: Any, **k: Any) -> bool:
        raise self._no("accessed (Accessed bits)")

    def scan_accessed(self, *a: Any, **k: Any) -> Any:
        raise self._no("scan_accessed (Accessed bits)")

    def invalidate_range(self, *a: Any, **k: Any) -> None:
        raise self._no("invalidate_range (TLB shootdowns)")


def run(loop: Any) -> None:
    """Drive ``loop.py_policy`` until the target exits, ``--duration`` passes or Ctrl-C: the
    recorder's samples go to ``on_feed`` as they arrive, ``on_interval`` runs at the class's
    interval. An exception in the policy stops the loop with a :class:`TierError` naming the
    user's file and line."""
    pol: TieringPolicy = loop.py_policy
    path = getattr(pol, "_tl_path", "")
    ctx = LiveContext(loop)
    opts = loop.opts
    res = loop.res

    def call(fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except TierError:
            raise
        except Exception as e:
            raise TierError(_host.error_message(e, path)) from None

    interval_ns = int(pol.interval)
    r = call(pol.start, ctx)
    next_ns = loop._now() + interval_ns if r is None else int(r) // 1000
    end_ns = None if opts.duration_s is None else loop._now() + int(opts.duration_s * 1e9)
    wants = "samples" in pol.accepts
    while not loop.stop.is_set():
        while not loop.stop.is_set() and loop.tel.exit is None and loop._now() < next_ns:
            left_ms = max(1, min(100, (next_ns - loop._now()) // 1_000_000))
            batch = loop.tel.poll(left_ms)
            if loop.sink is not None:
                loop.sink.add(batch)
            s = batch["samples"]
            addr = np.frombuffer(s["addr"], dtype="<u8")
            res.samples += int(addr.size)
            if wants and addr.size:
                t = np.frombuffer(s["time_ns"], dtype="<u8") * np.uint64(1000)
                cpu = np.frombuffer(s["cpu"], dtype="<u4")
                call(pol.on_feed, Samples(addr, t, cpu), ctx)
        if loop.tel.exit is not None:
            loop._target_gone()
            break
        if loop.stop.is_set():
            break
        r = call(pol.on_interval, ctx)
        now = loop._now()
        next_ns = now + interval_ns if r is None else max(int(r) // 1000, now + 1)
        if loop.log is not None:
            loop.log.flush()
        loop.step += 1
        res.steps = loop.step
        if end_ns is not None and loop._now() >= end_ns and not loop.stop.is_set():
            res.stop_reason = "duration"
            loop.stop.set()
