"""The classes a user's agent derives from, its parameters and the context its hooks get.

Times are picoseconds (ints), as in the engine (``ctx.now_ps``); sizes are bytes; page
addresses are virtual addresses of a page's first byte. Arrays are numpy arrays (``uint64``
addresses); a hook never gets one Python object per page.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np

PS_PER_NS = 1000
#: Page-size level names for :meth:`Context.accessed`.
LEVELS = ("pte", "pmd", "pud")


class Param:
    """A parameter of a user's agent: its default, kind, range and description, declared once
    as a class attribute (``interval = Param("10ms", kind="duration", doc="...")``).

    ``kind`` is ``int``, ``float``, ``bool``, ``str``, ``size`` (bytes: an int or ``"4KiB"``)
    or ``duration`` (ns: an int or ``"10ms"``; a bare float is seconds as in scenarios); by
    default the default's type. ``range`` is ``(lo, hi)``, both included (None: open). The
    scenario's value replaces the attribute on the instance, checked and converted.
    """

    KINDS = ("int", "float", "bool", "str", "size", "duration")

    def __init__(
        self,
        default: Any,
        *,
        kind: str | None = None,
        range: tuple[float | None, float | None] | None = None,
        doc: str = "",
    ) -> None:
        if kind is None:
            kind = {bool: "bool", int: "int", float: "float", str: "str"}.get(type(default), "")
        if kind not in self.KINDS:
            raise TypeError(f"Param kind {kind!r}: expected one of {', '.join(self.KINDS)}")
        self.kind = kind
        self.range = range
        self.doc = doc
        self.name = ""
        self.default = self.convert(default)

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def convert(self, value: Any) -> Any:
        """``value`` as this parameter's kind, or ValueError saying what was expected."""
        from tierlab.live.units import parse_duration_ns, parse_size

        k = self.kind
        if k == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"{value!r} is not true or false")
            return value
        if k == "str":
            if not isinstance(value, str):
                raise ValueError(f"{value!r} is not a string")
            return value
        if k == "size":
            if isinstance(value, bool) or not isinstance(value, int | str):
                raise ValueError(
                    f'{value!r} is not a size (an int of bytes or a string like "4KiB")'
                )
            v: float = parse_size(value) if isinstance(value, str) else value
        elif k == "duration":
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                raise ValueError(f'{value!r} is not a duration ("10ms", or seconds as a number)')
            if isinstance(value, str):
                v = parse_duration_ns(value)
            elif isinstance(value, float):
                v = round(value * 1e9)
            else:
                v = value * 1_000_000_000
        elif k == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{value!r} is not an integer")
            v = value
        else:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{value!r} is not a number")
            v = float(value)
        if isinstance(v, float) and not np.isfinite(v):
            raise ValueError(f"{value!r} is not a finite number")
        if self.range is not None:
            lo, hi = self.range
            if (lo is not None and v < lo) or (hi is not None and v > hi):
                raise ValueError(f"{value!r} is outside [{lo}, {hi}]")
        return v

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return obj.__dict__.get(self.name, self.default)

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.name] = value


class ScanResult(NamedTuple):
    """What :meth:`Context.scan_accessed` read."""

    #: Entries read.
    read: int
    #: Runs of base-page numbers found accessed: ``[starts[i], ends[i])``.
    starts: np.ndarray
    ends: np.ndarray
    #: Base pages found accessed.
    pages: int
    #: Lowest address and end of the highest accessed page (``lo >= hi``: none).
    lo: int
    hi: int


@dataclass(frozen=True)
class Samples:
    """A batch of sampled addresses (a PEBS-like technique's drains)."""

    addr: np.ndarray
    time_ps: np.ndarray
    core: np.ndarray
    kind: ClassVar[str] = "samples"


@dataclass(frozen=True)
class Regions:
    """A region snapshot: regions with the number of samples that found them accessed."""

    start: np.ndarray
    end: np.ndarray
    nr_accesses: np.ndarray
    age: np.ndarray
    max_nr_accesses: int
    hot_threshold: int
    time_ps: int
    kind: ClassVar[str] = "regions"


@dataclass(frozen=True)
class HotSet:
    """The hot set a technique reported for the window ``[start_ps, end_ps)``: byte ranges
    (``start``, ``end``) or base-page numbers (``pages``)."""

    start: np.ndarray | None
    end: np.ndarray | None
    pages: np.ndarray | None
    start_ps: int
    end_ps: int
    kind: ClassVar[str] = "hotset"


@dataclass(frozen=True)
class RegionsReport:
    """A telemetry technique's hot set as byte ranges ``[start[i], end[i])``, sorted and
    disjoint."""

    start: Any
    end: Any


@dataclass(frozen=True)
class PagesReport:
    """A telemetry technique's hot set as base-page numbers (address // 4096), sorted and
    unique."""

    pages: Any


def as_u64(x: Any, what: str) -> np.ndarray:
    """``x`` (a sequence or array of non-negative integers) as a uint64 array, or TypeError /
    ValueError naming ``what``."""
    a = np.asarray(x)
    if a.ndim != 1:
        if a.ndim == 0:
            a = a.reshape(1)
        else:
            raise ValueError(f"{what}: expected a 1-D array of addresses, got shape {a.shape}")
    if a.size == 0:
        return np.zeros(0, dtype=np.uint64)
    if a.dtype == np.uint64:
        return a
    if a.dtype.kind not in "iu":
        raise TypeError(f"{what}: expected integers (addresses), got an array of {a.dtype}")
    if a.dtype.kind == "i" and (a < 0).any():
        raise ValueError(f"{what}: negative address {int(a[a < 0][0])}")
    return a.astype(np.uint64)


def _page_bytes(pages: Any, what: str) -> bytes:
    """Page addresses as little-endian u64 bytes (a list of ints takes the short way)."""
    if isinstance(pages, list) and all(type(p) is int for p in pages):
        try:
            return struct.pack(f"<{len(pages)}Q", *pages)
        except struct.error:
            raise ValueError(f"{what}: an address is negative or above 2^64") from None
    return as_u64(pages, what).astype("<u8", copy=False).tobytes()


class Context:
    """What a hook gets: the machine as the engine's agents see it (a sealed view: Accessed
    bits, mappings, page locations, migration; never the ground truth), valid only during the
    hook. Every operation is the engine's own, charged as for a built-in agent."""

    __slots__ = ("_n",)

    def __init__(self, native: Any) -> None:
        self._n = native

    # -- time and work -----------------------------------------------------------------------
    @property
    def now_ps(self) -> int:
        """Current simulated time, ps."""
        return int(self._n.now_ps())

    @property
    def now_ns(self) -> float:
        return float(self._n.now_ps()) / PS_PER_NS

    @property
    def core(self) -> int:
        """The core the agent's work is charged to."""
        return int(self._n.core())

    def charge_ns(self, ns: float) -> None:
        """Charge ``ns`` of the agent's own work to its core."""
        self._n.charge_ns(float(ns))

    def charge_ps(self, ps: int) -> None:
        self._n.charge_ps(int(ps))

    def core_clock_ps(self, core: int) -> int:
        return int(self._n.core_clock_ps(int(core)))

    # -- the machine -------------------------------------------------------------------------
    def vmas(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The program's mappings: (starts, ends, page sizes), in address order."""
        s, e, p = self._n.vmas()
        return (np.frombuffer(s, "<u8"), np.frombuffer(e, "<u8"), np.frombuffer(p, "<u8"))

    def nodes(self) -> list[tuple[int, int]]:
        """(capacity, used) bytes of every memory node."""
        return list(self._n.nodes())

    def access_cost_ps(self, core: int, node: int) -> int:
        """What one access of ``core`` to memory of ``node`` costs now (the loaded latency)."""
        return int(self._n.access_cost_ps(int(core), int(node)))

    def node_of(self, va: int) -> int | None:
        n = self._n.node_of(int(va))
        return None if n < 0 else int(n)

    def page_size_of(self, va: int) -> int | None:
        n = self._n.page_size_of(int(va))
        return None if n == 0 else int(n)

    def present_pages(
        self, start: int, end: int, max_pages: int = 1 << 20
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """The present pages of ``[start, end)`` in address order, each once at its base (a
        huge page whole): (bases, sizes, nodes), at most ``max_pages``; and where the listing
        stopped (the end of the last page listed when ``max_pages`` were, else the first page
        boundary at or past ``end``)."""
        b, s, n, stop = self._n.present_pages(int(start), int(end), int(max_pages))
        return (
            np.frombuffer(b, "<u8"),
            np.frombuffer(s, "<u8"),
            np.frombuffer(n, np.uint8),
            int(stop),
        )

    def accessed(
        self, va: int, level: str = "pte", clear: bool = True, flush: str = "none"
    ) -> bool:
        """Test (and clear) the Accessed bit of ``va`` at ``level`` (``pte``, ``pmd``,
        ``pud``); ``flush``: ``none`` (x86 Linux's young-bit harvesting) or ``all`` (a
        shootdown)."""
        return bool(self._n.accessed(int(va), level, bool(clear), flush))

    def scan_accessed(self, start: int, end: int, page_size: int, clear: bool = True) -> ScanResult:
        """Read (and clear) the leaf Accessed bits of ``[start, end)`` in a mapping of
        ``page_size`` pages, 64 PTEs per bitmap word (the engine's PTE scan). Not charged:
        charge what the reads cost (``charge_ns``)."""
        read, s, e, pages, lo, hi = self._n.scan_accessed(
            int(start), int(end), int(page_size), bool(clear)
        )
        return ScanResult(read, np.frombuffer(s, "<u8"), np.frombuffer(e, "<u8"), pages, lo, hi)

    def invalidate_range(self, start: int, end: int) -> None:
        """One TLB shootdown of ``[start, end)`` from the agent's core (charged to it)."""
        self._n.invalidate_range(int(start), int(end))

    # -- tiering ---------------------------------------------------------------------------
    @property
    def fast_node(self) -> int:
        return int(self._n.tiers()[0])

    @property
    def slow_node(self) -> int:
        return int(self._n.tiers()[1])

    def budget(self) -> int:
        """Bytes the promotion rate limit allows now."""
        return int(self._n.budget())

    def fast_free(self) -> int:
        """Free bytes of the fast node."""
        return int(self._n.fast_free())

    def fast_capacity(self) -> int:
        return int(self._n.fast_capacity())

    def core_free_before(self, until_ps: int) -> bool:
        """Whether the policy's core still has time before ``until_ps`` (a migration thread
        cannot do more work than time passes)."""
        return bool(self._n.core_free_before(int(until_ps)))

    def promote(self, pages: Any) -> tuple[int, bool]:
        """Move ``pages`` (page addresses) to the fast node in batches of 512, within the rate
        limit's budget and the node's room: (pages moved, stopped for lack of room)."""
        if not len(pages):
            return (0, False)
        moved, full = self._n.promote(_page_bytes(pages, "promote"))
        return int(moved), bool(full)

    def demote(self, pages: Any) -> int:
        """Move ``pages`` to the slow node (not rate limited): pages moved."""
        if not len(pages):
            return 0
        return int(self._n.demote(_page_bytes(pages, "demote")))

    # -- telemetry ---------------------------------------------------------------------------
    def pebs_enable(
        self,
        period: int,
        *,
        loads: bool = True,
        stores: bool = True,
        capacity: int = 512,
        threshold: int = 448,
    ) -> None:
        """Program every core's PEBS-like sampler: one record every ``period`` events, a
        buffer of ``capacity`` records interrupting at ``threshold`` (the interrupt and each
        record's assist are charged to the sampled core by the hardware model)."""
        self._n.pebs_enable(bool(loads), bool(stores), int(period), int(capacity), int(threshold))

    def pebs_take(self, poll: bool = False) -> Samples:
        """The records of the buffers drained since the last call (with ``poll``, every
        core's buffer is emptied now first): addresses, cores and drain times."""
        a, c, t = self._n.pebs_take(bool(poll))
        return Samples(np.frombuffer(a, "<u8"), np.frombuffer(t, "<u8"), np.frombuffer(c, "<u4"))

    def wants(self, kind: str) -> bool:
        """Whether a policy follows this technique's feeds of ``kind`` (publishing costs a
        copy)."""
        return bool(self._n.wants(kind))

    def publish_regions(
        self,
        start: Any,
        end: Any,
        nr_accesses: Any,
        age: Any,
        max_nr_accesses: int,
        hot_threshold: int,
    ) -> None:
        """Publish a region snapshot to the policies that follow this technique."""
        s, e = as_u64(start, "publish_regions start"), as_u64(end, "publish_regions end")
        n = np.asarray(nr_accesses, dtype="<u4")
        g = np.asarray(age, dtype="<u4")
        self._n.publish_regions(
            s.astype("<u8").tobytes(),
            e.astype("<u8").tobytes(),
            n.tobytes(),
            g.tobytes(),
            int(max_nr_accesses),
            int(hot_threshold),
        )

    def publish_samples(self, addr: Any, core: int = 0, index: int = 0) -> None:
        """Publish a batch of sampled addresses."""
        self._n.publish_samples(
            as_u64(addr, "publish_samples").astype("<u8").tobytes(), int(core), int(index)
        )

    # -- placement ---------------------------------------------------------------------------
    def set_placement(self, rule: str) -> None:
        """The rule new pages follow: ``first-touch`` or ``interleave``."""
        self._n.set_placement(str(rule))

    def set_plan(self, start: Any, end: Any, node: Any) -> None:
        """The preferred-node plan every fault and populate consults: sorted, disjoint byte
        ranges ``[start[i], end[i])`` and the node of each."""
        s, e = as_u64(start, "set_plan start"), as_u64(end, "set_plan end")
        n = np.asarray(node)
        if n.size and (n.dtype.kind not in "iu" or (n < 0).any() or (n > 255).any()):
            raise ValueError("set_plan: nodes are integers in [0, 255]")
        self._n.set_plan(
            s.astype("<u8").tobytes(), e.astype("<u8").tobytes(), n.astype(np.uint8).tobytes()
        )

    def move_pages(self, pages: Any, node: int) -> int:
        """Move ``pages`` to ``node`` as one batch (one shootdown), charged to the agent's
        core: pages moved."""
        if not len(pages):
            return 0
        return int(self._n.move_pages(_page_bytes(pages, "move_pages"), int(node)))

    # -- replacement -------------------------------------------------------------------------
    def test_and_clear_young(self, page: int) -> int:
        """Test and clear the Accessed bits of the PTEs mapping page id ``page``: how many
        were set (each cleared bit costs a TLB invalidation, charged by the machine)."""
        return int(self._n.test_and_clear_young(int(page)))

    def mapcount(self, page: int) -> int:
        return int(self._n.mapcount(int(page)))

    def capacity(self) -> int:
        """Frames of fast memory."""
        return int(self._n.capacity())


class Agent:
    """What every user agent has: declared parameters (:class:`Param` attributes), ``label``,
    ``seed`` and ``rng`` (a numpy Generator seeded from the scenario's seed and the label),
    ``interval`` (time between :meth:`on_interval` calls), and the reporting hooks."""

    interval = Param("10ms", kind="duration", range=(1, None), doc="time between on_interval calls")
    label: str = ""
    seed: int = 0
    rng: np.random.Generator
    #: The kind's shared parameters as the scenario gives them (a tiering policy's
    #: ``rate_limit_mbps``, ``fast_node``...).
    shared: dict[str, Any] = {}  # noqa: RUF012 - replaced per instance by the loader
    #: The file the class was loaded from, and an error to raise at the next hook (set by
    #: the loader, tierlab.agents._host).
    _tl_path: str = ""
    _tl_deferred: str | None = None

    def start(self, ctx: Context) -> int | None:
        """Time 0, after the workload's setup. May return the first event's time, ps."""
        return None

    def on_interval(self, ctx: Context) -> int | None:
        """Every ``interval``; may return the next event's time in ps instead."""
        return None

    def stats(self) -> dict[str, float]:
        """Numbers for the run's stats (under the kind's prefix)."""
        return {}

    def window_columns(self) -> dict[str, float]:
        """Per-window time-series values."""
        return {}

    @classmethod
    def params(cls) -> dict[str, Param]:
        """The declared parameters, by name."""
        out: dict[str, Param] = {}
        for k in reversed(cls.__mro__):
            for name, v in vars(k).items():
                if isinstance(v, Param):
                    out[name] = v
        return out


class TieringPolicy(Agent):
    """A tiering policy: promotes hot pages to the fast node and demotes cold ones, called at
    its ``interval`` (:meth:`on_interval`) and whenever the technique it follows
    (``telemetry = "label"`` in the scenario) publishes a feed it accepts (:meth:`on_feed`).
    Moves go through the engine's mover: batches of 512 pages with one shootdown each, the
    rate limit (``rate_limit_mbps``), the copy time charged to the policy's core."""

    #: Feeds accepted from the followed technique, preferred first.
    accepts: ClassVar[tuple[str, ...]] = ("regions", "samples", "hotset")

    def on_feed(self, feed: Samples | Regions | HotSet, ctx: Context) -> None:
        """A feed of the followed technique."""


class Telemetry(Agent):
    """A telemetry technique: looks at the machine every ``interval`` (Accessed bits, page
    locations) and reports its hot set at every window end (:meth:`hot_set`), which the run
    scores against ground truth; it may publish region snapshots or sample batches for
    policies (:attr:`publishes`)."""

    interval = Param(
        "100ms", kind="duration", range=(1, None), doc="time between on_interval calls"
    )
    #: Feeds it publishes besides its hot set.
    publishes: ClassVar[tuple[str, ...]] = ()

    def hot_set(self, start_ps: int, end_ps: int, ctx: Context) -> RegionsReport | PagesReport:
        """What it reports hot for the window ``[start_ps, end_ps)``; ``ctx`` is read-only."""
        return RegionsReport([], [])

    def finish(self, ctx: Context) -> None:
        """Once, when the run ends."""


class Placement(Agent):
    """A placement policy: sets the rule new pages follow or a preferred-node plan in
    :meth:`prepare`, before the workload maps its memory (``ctx.set_placement``,
    ``ctx.set_plan``), and may move pages every ``interval`` (``ctx.move_pages``)."""

    interval = Param("1s", kind="duration", range=(1, None), doc="time between on_interval calls")

    def prepare(self, ctx: Context) -> None:
        """Before the workload maps its memory."""

    def start(self, ctx: Context) -> int | None:
        """Time 0, after the workload's setup (no periodic work unless it returns a time)."""
        return 1 << 62

    def finish(self, ctx: Context) -> None:
        """Once, when the run ends."""


class Replacement(Agent):
    """A page-replacement policy of the hierarchical memory mode: told of every page
    brought in (:meth:`on_fault_in`) and unmapped (:meth:`remove`), asked for a victim when
    memory is full (:meth:`evict`, per fault), or for ``batch`` victims at once
    (:meth:`evict_batch`, used in order while they stay resident). Pages are dense ids."""

    #: Victims asked for at once (1: :meth:`evict` per fault).
    batch: ClassVar[int] = 1

    def on_fault_in(self, page: int, ctx: Context) -> None:
        """``page`` became resident."""

    def evict(self, ctx: Context) -> int:
        """Choose a resident victim, forget it and return it."""
        raise NotImplementedError(
            "a replacement policy implements evict (or evict_batch with batch > 1)"
        )

    def evict_batch(self, n: int, ctx: Context) -> Any:
        """Choose up to ``n`` resident victims, in eviction order (an array of page ids)."""
        raise NotImplementedError("a replacement policy with batch > 1 implements evict_batch")

    def remove(self, page: int) -> None:
        """Resident ``page`` was unmapped by the program."""
