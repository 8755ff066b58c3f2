"""Tables for people at a terminal, and for machines.

Every table-printing command lays its rows out with :func:`render`: short headers (a legend
under the table says what each means and its unit), numbers in human form (thousands
separators, percentages as percentages, sizes in binary units, ``never`` for a time that was
never reached), and only the columns that fit the console's width (``COLUMNS`` when stdout is
not a terminal): the others are named under the table. ``--columns A,B`` chooses the columns
(by key or short header) and ``--raw`` prints tab-separated raw values with the full keys as
headers, for machines (:func:`options` sets both for the tables a command prints).
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from rich.console import Console

Kind = Literal["text", "count", "number", "percent", "pct", "seconds", "never_s", "bytes"]


@dataclass(frozen=True)
class Col:
    """A column: its key in the rows, its short header, what it means (with its unit, for the
    legend), how its values are shown (``count``: a whole number with separators; ``number``:
    three significant digits; ``percent``: a fraction shown as a percentage; ``pct``: a value
    already in percent; ``seconds``; ``never_s``: seconds, empty meaning never reached;
    ``bytes``: binary units) and whether it names the row (kept whatever the width)."""

    key: str
    head: str
    meaning: str = ""
    kind: Kind = "number"
    key_column: bool = False


#: Every column of the built-in tables, by key.
COLUMNS: dict[str, Col] = {
    c.key: c
    for c in (
        # telemetry
        Col("technique", "technique", kind="text", key_column=True),
        Col("kind", "kind", "the technique's kind", "text"),
        Col(
            "time_to_precision_s",
            "P0.9 at",
            "first time precision reached 0.9 (s; never: not within the run)",
            "never_s",
        ),
        Col(
            "time_to_recall_s",
            "R0.9 at",
            "first time recall reached 0.9 (s; never: not within the run)",
            "never_s",
        ),
        Col("mean_precision", "mean P", "mean precision over the windows", "number"),
        Col("mean_recall", "mean R", "mean recall over the windows", "number"),
        Col("observer_cpu_s", "obs CPU", "the technique's CPU time (s)", "seconds"),
        Col("slowdown", "slowdown", "run time over the baseline's, minus one", "percent"),
        Col("samples", "samples", "samples taken", "count"),
        Col("interrupts", "irqs", "sampling interrupts (buffer drains)", "count"),
        Col("samples_per_set", "per set", "mean samples per drained sample set", "number"),
        Col("pages_seen", "pages", "distinct pages sampled", "count"),
        Col("period", "R", "sampling period (reset value): events per sample", "count"),
        Col("wall_s", "wall", "wall time of the point's run (s)", "seconds"),
        Col("note", "note", kind="text"),
        # tiering
        Col("policy", "policy", kind="text", key_column=True),
        Col("telemetry", "telemetry", "the telemetry technique the policy follows", "text"),
        Col("fast_tier_bytes", "fast", "fast tier capacity", "bytes"),
        Col("slow_tier_bytes", "slow", "slow tier capacity", "bytes"),
        Col("run_time_s", "run", "simulated run time (s)", "seconds"),
        Col("throughput_rps", "req/s", "throughput (requests per second)", "count"),
        Col("p95_us", "p95 us", "95th percentile request latency (microseconds)", "number"),
        Col("fast_used_bytes", "fast used", "fast tier in use at the end", "bytes"),
        Col("fast_hot_bytes", "fast hot", "hot data in the fast tier (mean)", "bytes"),
        Col("migrations", "migr.", "pages migrated", "count"),
        Col("promoted_pages", "promoted", "pages promoted to the fast tier", "count"),
        Col("demoted_pages", "demoted", "pages demoted to the slow tier", "count"),
        Col(
            "optimum_throughput_rps",
            "opt. req/s",
            "throughput of the optimum bound (requests per second)",
            "count",
        ),
        Col(
            "share_of_optimum",
            "of opt.",
            "the policy's gain over no tiering as a share of the optimum's",
            "percent",
        ),
        # tiering: the counter schema of every run
        Col("ping_pong", "ping-pong", "pages moved back within the ping-pong window", "count"),
        Col(
            "wasted_promotions",
            "wasted",
            "promotions demoted before any access (a lower bound)",
            "count",
        ),
        Col("migrated_bytes", "moved", "bytes migrated", "bytes"),
        Col("migration_mbps", "MB/s", "migration bandwidth (MB/s)", "number"),
        Col("migration_s", "migr. s", "time spent migrating (s)", "seconds"),
        Col("shootdown_s", "shootd. s", "time spent in TLB shootdowns (s)", "seconds"),
        Col("telemetry_cpu_s", "tel. CPU", "telemetry CPU time (s)", "seconds"),
        Col("policy_cpu_s", "pol. CPU", "policy CPU time (s)", "seconds"),
        Col("run_fast_share", "fast acc.", "share of accesses served by the fast tier", "percent"),
        Col(
            "optimum_fast_share",
            "opt. fast",
            "the optimum's share of accesses in the fast tier",
            "percent",
        ),
        Col("p50_us", "p50 us", "median request latency (microseconds)", "number"),
        Col("p99_us", "p99 us", "99th percentile request latency (microseconds)", "number"),
        # policies, placement
        Col("label", "point", kind="text", key_column=True),
        Col("kernel", "kernel", kind="text"),
        Col("nodes", "nodes", "memory nodes", "count"),
        Col("page_tables", "PT", "page tables: shared or per-core (PSPT)", "text"),
        Col("page_size", "page", "page size", "text"),
        Col("fast_memory_fraction", "memory", "memory provided, share of the footprint", "percent"),
        Col("page_faults", "faults", "page faults per core", "count"),
        Col("remote_tlb_invalidations", "inval.", "remote TLB invalidations per core", "count"),
        Col("dtlb_misses", "dTLB miss", "dTLB misses per core", "count"),
        Col("relative_performance", "rel. perf", "performance relative to the best", "number"),
        Col("savings_pct", "saving", "run time saved over first touch", "pct"),
        Col("overhead_pct", "overhead", "one-time profiling overhead", "pct"),
    )
}


@dataclass(frozen=True)
class Options:
    """What ``--columns`` and ``--raw`` asked for."""

    columns: tuple[str, ...] = ()
    raw: bool = False


_OPTIONS: contextvars.ContextVar[Options | None] = contextvars.ContextVar("tables", default=None)


def _options() -> Options:
    return _OPTIONS.get() or Options()


@contextmanager
def options(columns: str | None = None, raw: bool = False) -> Iterator[None]:
    """Use ``--columns A,B`` and ``--raw`` for the tables printed inside."""
    chosen = tuple(c.strip() for c in (columns or "").split(",") if c.strip())
    token = _OPTIONS.set(Options(chosen, raw))
    try:
        yield
    finally:
        _OPTIONS.reset(token)


def col(key: str) -> Col:
    """The column ``key`` (a column of no table: its key as header, numbers)."""
    return COLUMNS.get(key) or Col(key, key.replace("_", " "))


# ---------------------------------------------------------------------------------------
# Values


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def number(v: float) -> str:
    """Three significant digits without exponents, separators from 1,000: ``0.0417``,
    ``3.14``, ``13.6``, ``287,520``."""
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 100:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    if a >= 1e-3:
        return f"{v:.3g}"
    return f"{v:.2g}"


def human_bytes(n: float) -> str:
    """``4 KiB``, ``1.5 MiB``, ``32 GiB``, ``1 TiB``."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            v = n / size
            return f"{v:,.0f} {unit}" if v == int(v) or abs(v) >= 100 else f"{v:.3g} {unit}"
    return f"{n:,.0f} B"


def cell(c: Col, v: Any) -> str:
    """``v`` as column ``c`` shows it."""
    if c.kind == "never_s" and (v is None or (isinstance(v, float) and math.isnan(v))):
        return "never"
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if not math.isfinite(v):
        return "inf" if v > 0 else "-inf"
    if c.kind == "count":
        return f"{v:,.0f}"
    if c.kind == "percent":
        return percent(100 * v)
    if c.kind == "pct":
        return percent(v)
    if c.kind == "bytes":
        return human_bytes(v)
    if c.kind == "never_s" and v == int(v):
        return f"{v:,.0f}"
    if c.kind in ("seconds", "never_s"):
        return number(v)
    if isinstance(v, int):
        return f"{v:,}"
    return number(v)


def percent(p: float) -> str:
    """``4.2%``, ``0.56%``, ``27%``, ``100%``."""
    a = abs(p)
    if a == 0:
        return "0%"
    if a >= 10:
        return f"{p:.0f}%" if p == int(p) else f"{p:.1f}%"
    if a >= 1:
        return f"{p:.1f}%"
    return f"{p:.2g}%"


def raw_cell(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return repr(v) if isinstance(v, float) else str(v)


# ---------------------------------------------------------------------------------------
# Layout


def _chosen(cols: list[Col]) -> list[Col]:
    opts = _options()
    if not opts.columns:
        return cols
    by_name = {c.key: c for c in cols} | {c.head: c for c in cols}
    unknown = [n for n in opts.columns if n not in by_name]
    if unknown:
        raise TableError(
            f"--columns: no column {', '.join(map(repr, unknown))} in this table (its "
            f"columns: {', '.join(c.key for c in cols)})"
        )
    return [by_name[n] for n in opts.columns]


class TableError(ValueError):
    """A ``--columns`` that names no column of the table."""


def render(
    rows: Sequence[Mapping[str, Any]],
    keys: Sequence[str | Col],
    console: Console,
    title: str | None = None,
    cells: Mapping[str, Any] | None = None,
) -> None:
    """Print ``rows`` with the columns ``keys`` (see the module docs). ``cells`` maps a key to
    a function ``(row) -> str`` that shows that column's cell instead of :func:`cell`."""
    from rich.table import Table
    from rich.text import Text

    cols = [k if isinstance(k, Col) else col(k) for k in keys]
    cols = _chosen(cols)
    opts = _options()
    if opts.raw:
        # Written as they are: the console would expand the tabs.
        lines = ["\t".join(c.key for c in cols)]
        lines += ["\t".join(raw_cell(r.get(c.key)) for c in cols) for r in rows]
        console.file.write("\n".join(lines) + "\n")
        return
    custom = cells or {}
    shown = [
        [custom[c.key](r) if c.key in custom else cell(c, r.get(c.key)) for c in cols] for r in rows
    ]
    widths = [max([len(c.head), *(len(s[i]) for s in shown)]) for i, c in enumerate(cols)]
    keep = list(range(len(cols)))
    hidden: list[Col] = []
    width = console.width
    # One space either side of every column (box=None): drop the last columns that are not
    # the row's name until the rest fit (unless the user chose them).
    while sum(widths[i] + 2 for i in keep) > width and not opts.columns:
        drop = next((i for i in reversed(keep) if not cols[i].key_column), None)
        if drop is None or len(keep) <= 1:
            break
        keep.remove(drop)
        hidden.insert(0, cols[drop])
    if title:
        console.print(Text(title), soft_wrap=True)
    t = Table(box=None)
    for i in keep:
        c = cols[i]
        t.add_column(
            c.head,
            justify="left" if c.kind == "text" else "right",
            no_wrap=c.kind != "text",
            overflow="fold",
        )
    for s in shown:
        t.add_row(*(s[i] for i in keep))
    console.print(t)
    legend = [f"{cols[i].head}: {cols[i].meaning}" for i in keep if cols[i].meaning]
    if legend:
        console.print(Text("; ".join(legend)), style="dim")
    if hidden:
        console.print(
            Text(
                f"not shown (the table would not fit {width} columns): "
                f"{', '.join(c.key for c in hidden)}; --columns chooses, --raw prints all"
            ),
            style="dim",
        )
