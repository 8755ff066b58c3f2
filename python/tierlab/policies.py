"""Page replacement in hierarchical memory: sweeps as records, the CMCP reproductions' tables
and plots, the core-map distribution, and the replacement-policy benchmark against
libCacheSim.

A scenario with ``[machine.hmem]`` and a ``[[policies]]`` entry runs in the hierarchical
memory mode (see ``docs/policies.md``). Its sweep points run as separate simulations; each
gives one *record*: the point's label, what it ran (workload, cores, policy, page tables,
page size, fast memory) and the per-core averages of the counters of the CMCP paper's
Table 1 (``page_faults``, ``remote_tlb_invalidations``, ``dtlb_misses``) with the data
moved, the time in fault handling and the modeled run time.
"""

from __future__ import annotations

import json
import math
import time
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from tierlab import stats_keys as sk
from tierlab.sweep.kinds import JSON, SweepKind, SweepPlan

if TYPE_CHECKING:
    from rich.console import Console

    from tierlab._native import StatValue
    from tierlab.sweep.engine import SweepProgress, SweepRun
    from tierlab.sweep.executor import Executor
    from tierlab.sweep.point import PointError

#: Record fields taken from the stats (per-core averages over the application's cores).
COUNTERS = {
    "page_faults": sk.HMEM_PER_CORE_PAGE_FAULTS,
    "remote_tlb_invalidations": sk.HMEM_PER_CORE_REMOTE_TLB_INVALIDATIONS,
    "dtlb_misses": sk.HMEM_PER_CORE_DTLB_MISSES,
    "pte_copy_faults": sk.HMEM_PER_CORE_PTE_COPY_FAULTS,
    "data_moved_bytes": sk.HMEM_PER_CORE_DATA_MOVED_BYTES,
    "fault_time_s": sk.HMEM_PER_CORE_FAULT_TIME_S,
    "run_time_s": sk.HMEM_RUN_TIME_S,
}

#: Record fields describing the configuration.
CONFIG = ("workload", "cores", "policy", "page_tables", "page_size", "fast_memory_fraction")

NO_MOVEMENT = "no-movement"


def workload_name(scenario: dict[str, Any]) -> str:
    """A short name of a scenario's workload: the ``sweep3d`` preset (``bt``, ``lu``,
    ``scale``), ``cg`` for ``spmv`` with conjugate gradient, else the kind."""
    w = scenario.get("workload", {})
    kind = str(w.get("kind", ""))
    if kind == "sweep3d":
        return str(w.get("preset", "bt"))
    if kind == "spmv":
        return "cg" if w.get("cg", True) else "spmv"
    return kind


@dataclass
class PlainRecord:
    """The record of a run outside the hierarchical memory mode: its label, workload and
    every machine-wide stat (JSON: ``{"label", "workload", <stat>: value, ...}``)."""

    label: str
    workload: str
    stats: dict[str, StatValue]

    def get(self, key: str, default: StatValue = None) -> StatValue:
        return self.stats.get(key, default)

    def to_json(self) -> dict[str, StatValue]:
        return {"label": self.label, "workload": self.workload, **self.stats}


@dataclass
class HmemRecord:
    """The record of a run in the hierarchical memory mode: what ran and the per-core
    averages of the CMCP paper's Table 1 counters (see the module docs). ``p`` is CMCP's
    (None for other policies); ``relative_performance`` and ``speedup`` are filled in by
    :func:`add_relative_performance` where their baselines exist."""

    label: str
    workload: str
    cores: int
    policy: str
    page_tables: str
    page_size: str
    fast_memory_fraction: float
    page_faults: float
    remote_tlb_invalidations: float
    dtlb_misses: float
    pte_copy_faults: float
    data_moved_bytes: float
    fault_time_s: float
    run_time_s: float
    evictions: int
    wall_seconds: float
    p: float | None = None
    relative_performance: float | None = None
    speedup: float | None = None

    def counter(self, name: str) -> float:
        """A counter of :data:`COUNTERS` by name."""
        value = getattr(self, name)
        assert isinstance(value, float)
        return value

    def to_json(self) -> dict[str, StatValue]:
        out: dict[str, StatValue] = {
            "label": self.label,
            "workload": self.workload,
            "cores": self.cores,
            "policy": self.policy,
            "page_tables": self.page_tables,
            "page_size": self.page_size,
            "fast_memory_fraction": self.fast_memory_fraction,
        }
        for name in COUNTERS:
            out[name] = self.counter(name)
        if self.p is not None:
            out["p"] = self.p
        out["evictions"] = self.evictions
        out["wall_seconds"] = self.wall_seconds
        if self.relative_performance is not None:
            out["relative_performance"] = self.relative_performance
        if self.speedup is not None:
            out["speedup"] = self.speedup
        return out


#: The record of one sweep point.
Record = HmemRecord | PlainRecord


def record(
    label: str, stats_flat: dict[str, StatValue], scenario: str, wall_seconds: float = 0.0
) -> Record:
    """The record of one run from its flat stats and expanded scenario."""
    st = stats_flat
    sc = tomllib.loads(scenario)
    if sk.HMEM_POLICY not in st:
        # Not the hierarchical mode: every machine-wide stat.
        stats = {k: v for k, v in st.items() if not k.startswith(("machine.core.", "node."))}
        return PlainRecord(label, workload_name(sc), stats)
    frac = _float(st[sk.HMEM_FAST_MEMORY_FRACTION])
    no_move = frac >= 1.0 and _int(st.get(sk.HMEM_EVICTIONS, 0)) == 0
    policy = str(st[sk.HMEM_POLICY])
    c = {name: _float(st.get(key, 0.0)) for name, key in COUNTERS.items()}
    return HmemRecord(
        label=label,
        workload=workload_name(sc),
        cores=_int(st[sk.RUN_THREADS]),
        policy=NO_MOVEMENT if no_move else policy,
        page_tables=str(st[sk.HMEM_PAGE_TABLES]),
        page_size=str(st[sk.HMEM_PAGE_SIZE]),
        fast_memory_fraction=round(frac, 4),
        page_faults=c["page_faults"],
        remote_tlb_invalidations=c["remote_tlb_invalidations"],
        dtlb_misses=c["dtlb_misses"],
        pte_copy_faults=c["pte_copy_faults"],
        data_moved_bytes=c["data_moved_bytes"],
        fault_time_s=c["fault_time_s"],
        run_time_s=c["run_time_s"],
        evictions=_int(st.get(sk.HMEM_EVICTIONS, 0)),
        wall_seconds=float(wall_seconds),
        p=_float(st.get(sk.HMEM_CMCP_P, math.nan)) if policy == "cmcp" else None,
    )


def _float(v: StatValue) -> float:
    try:
        return float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def _int(v: StatValue) -> int:
    return int(v)  # type: ignore[arg-type]


def add_relative_performance(records: Sequence[Record]) -> None:
    """Add ``relative_performance`` (no-movement run time of the same workload, cores and
    4 KiB pages, over the record's) and ``speedup`` (no-movement run time at the smallest
    core count of the workload, over the record's) where the baselines exist."""
    hmem = [r for r in records if isinstance(r, HmemRecord)]
    base: dict[tuple[str, int, str], float] = {}
    for r in hmem:
        if r.policy == NO_MOVEMENT:
            base.setdefault((r.workload, r.cores, r.page_size), r.run_time_s)
    smallest: dict[str, tuple[int, float]] = {}
    for (w, c, ps), t in base.items():
        if ps == "4KiB" and (w not in smallest or c < smallest[w][0]):
            smallest[w] = (c, t)
    for r in hmem:
        if not r.run_time_s:
            continue
        b = base.get((r.workload, r.cores, "4KiB")) or base.get((r.workload, r.cores, r.page_size))
        if b:
            r.relative_performance = round(b / r.run_time_s, 4)
        if r.workload in smallest:
            r.speedup = round(smallest[r.workload][1] / r.run_time_s, 4)


# -- running sweeps ---------------------------------------------------------------------------


@dataclass
class Sweep:
    """The records of a scenario's sweep (in sweep order; points not run are missing)."""

    scenario: str
    sweep_name: str
    records: list[Record] = field(default_factory=list)
    interrupted: bool = False
    failures: list[PointError] = field(default_factory=list)


class RecordsKind(SweepKind[Sweep]):
    """Any scenario's ``[[sweep]]``: one record per point (:class:`HmemRecord` in the
    hierarchical memory mode, else :class:`PlainRecord`); ``--out`` writes
    ``records.json`` and ``records.csv``."""

    name = "records"

    def report(self, plan: SweepPlan, run: SweepRun) -> Sweep:
        records = [
            record(p.label, r.stats_flat, r.scenario, r.wall_seconds) for p, r in run.finished()
        ]
        add_relative_performance(records)
        return Sweep(plan.spec, plan.sweep_name, records, run.interrupted, list(run.failures))

    def to_json(self, report: Sweep) -> JSON:
        return [_json(r.to_json()) for r in report.records]

    def write(self, report: Sweep, out_dir: Path) -> list[Path]:
        return write_sweep(report, out_dir)

    def render(self, report: Sweep, console: Console, title: str) -> None:
        render_records(
            [r.to_json() for r in report.records], console, f"{title}: {len(report.records)} points"
        )


class Table1Kind(RecordsKind):
    """The CMCP paper's Table 1 (``cmcp-table1``): records, ``table1.csv`` and plots."""

    name = "table1"


class ScalingKind(RecordsKind):
    """Shared page tables vs PSPT over core counts (``cmcp-scaling``)."""

    name = "scaling"


class PKind(RecordsKind):
    """CMCP's ``p`` (``cmcp-p``)."""

    name = "p"


class PageSizeKind(RecordsKind):
    """Page sizes vs memory provided (``cmcp-pagesize``)."""

    name = "pagesize"


def _json(d: dict[str, StatValue]) -> JSON:
    return dict(d)


#: Columns of the terminal table of records, in order (those some record has).
TABLE_COLUMNS = (
    "label",
    "kernel",
    "nodes",
    "policy",
    "page_tables",
    "page_size",
    "fast_memory_fraction",
    "page_faults",
    "remote_tlb_invalidations",
    "dtlb_misses",
    "run_time_s",
    "relative_performance",
    "savings_pct",
    "overhead_pct",
)
_LEFT = ("label", "kernel", "policy", "page_tables", "page_size")


def render_records(rows: Sequence[dict[str, StatValue]], console: Console, title: str) -> None:
    """Records as a table of the :data:`TABLE_COLUMNS` some record has; records of runs
    outside the hierarchical mode (only a label of those columns) as the table of every stat
    they hold (:func:`render_plain_records`). The title is a line of its own (a table's title
    would wrap at the table's width)."""
    from rich.text import Text

    console.print(Text(title), soft_wrap=True)
    cols = [c for c in TABLE_COLUMNS if any(c in r for r in rows)]
    if rows and cols == ["label"]:
        render_plain_records(rows, console)
        return
    from tierlab import tables

    tables.render(rows, cols, console)


#: Record columns that are per-core averages of counts (the CMCP paper's Table 1 divides by
#: the cores): a half event is an average, shown rounded and labelled as such.
PER_CORE_COLUMNS = ("page_faults", "remote_tlb_invalidations", "dtlb_misses")


def fmt_per_core(v: object) -> str:
    """A per-core average of a count: a whole number (``49,515``), never ``49514.5``."""
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
        return f"{round(v):,}"
    return fmt_cell(v)


def render_plain_records(rows: Sequence[dict[str, StatValue]], console: Console) -> None:
    """Records of plain runs (label, workload, every machine-wide and workload stat): one row
    per stat, one column per point; points that do not fit the console's width beside each
    other go to further tables, each with the stat names again."""
    from rich.table import Table

    keys: dict[str, None] = {}
    for r in rows:
        keys.update((k, None) for k in r if k != "label")
    cells = [[fmt_cell(r.get(k)) for k in keys] for r in rows]
    labels = [fmt_cell(r.get("label")) for r in rows]
    stat_width = max([len("stat")] + [len(k) for k in keys])
    widths = [max([len(lb)] + [len(c) for c in cs]) for lb, cs in zip(labels, cells, strict=True)]
    groups: list[list[int]] = []
    used = console.width  # each column takes its width and one space either side
    for i, w in enumerate(widths):
        if not groups or used + w + 2 > console.width:
            groups.append([])
            used = stat_width + 2
        groups[-1].append(i)
        used += w + 2
    for n, group in enumerate(groups):
        if n:
            console.print()
        table = Table(box=None)
        table.add_column("stat", justify="left", no_wrap=True)
        for i in group:
            table.add_column(labels[i], justify="right", no_wrap=True)
        for j, k in enumerate(keys):
            table.add_row(k, *(cells[i][j] for i in group))
        console.print(table)


def fmt_cell(v: object) -> str:
    """A table cell: empty for missing, a few significant digits for floats."""
    if v is None:
        return ""
    if isinstance(v, float):
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-2):
            return f"{v:.3g}"
        return f"{v:.3f}".rstrip("0").rstrip(".") if v != int(v) else f"{v:.0f}"
    return str(v)


def run_sweep(
    scenario: str | Path,
    *,
    seed: int | None = None,
    set: Iterable[str] | None = None,
    only: str | None = None,
    jobs: int = 1,
    executor: Executor | None = None,
    progress: SweepProgress | None = None,
    on_done: Callable[[int, int, str, float], None] | None = None,
) -> Sweep:
    """Run every sweep point of ``scenario`` (or those matching ``only``) and return their
    records. ``set`` overrides apply after each point's own. ``jobs`` > 1 runs points in
    parallel processes (or pass an ``executor``). Ctrl-C stops and keeps the points done
    (``interrupted``); a point that failed raises its :class:`~tierlab.sweep.PointError`
    once the others ran. ``on_done(k, total, label,
    wall_seconds)`` is called as points finish."""
    from tierlab.sweep.api import run_kind

    outcome = run_kind(
        scenario,
        RecordsKind(),
        seed=seed,
        set=set,
        only=only,
        jobs=jobs,
        executor=executor,
        progress=progress,
        on_done=on_done,
    )
    outcome.raise_failures()
    return outcome.report


# -- tables and plots of the CMCP reproductions ------------------------------------------------

TABLE1_COLUMNS = ("page_faults", "remote_tlb_invalidations", "dtlb_misses")

#: A row of the Table 1 layout: workload, policy, attribute, then ``"N cores"`` -> value.
Table1Row = dict[str, str | float]


def table1(records: Sequence[Record]) -> list[Table1Row]:
    """The paper's Table 1 layout: one row per (workload, policy, counter), one column per
    core count (per-core averages)."""
    rows: dict[tuple[str, str, str], Table1Row] = {}
    for r in records:
        if not isinstance(r, HmemRecord) or r.policy == NO_MOVEMENT:
            continue
        for c in (*TABLE1_COLUMNS, "run_time_s"):
            key = (r.workload, r.policy, c)
            row = rows.setdefault(key, {"workload": r.workload, "policy": r.policy, "attribute": c})
            row[f"{r.cores} cores"] = r.counter(c)
    return list(rows.values())


def _plt() -> Any:
    from tierlab.plots import pyplot

    return pyplot()


K = TypeVar("K")


def _series(
    records: Iterable[HmemRecord], key: Callable[[HmemRecord], K]
) -> dict[K, list[HmemRecord]]:
    out: dict[K, list[HmemRecord]] = {}
    for r in records:
        out.setdefault(key(r), []).append(r)
    return out


def _nan(v: float | None) -> float:
    return math.nan if v is None else v


def plot(sweep: Sweep, out_dir: Path) -> list[Path]:
    """Plots of a sweep by its kind (``report.sweep_name``): ``table1`` (counters vs cores per
    policy), ``scaling`` (speedup vs cores per configuration), ``p`` (relative performance vs
    p), ``pagesize`` (relative performance vs memory provided per page size). Returns the
    files written (PNG and SVG)."""
    plt = _plt()
    recs = [r for r in sweep.records if isinstance(r, HmemRecord)]
    if not recs:
        return []
    workloads = sorted({r.workload for r in recs})
    kind = sweep.sweep_name
    if kind == "table1":
        metrics = (*TABLE1_COLUMNS, "run_time_s")
        fig, axes = plt.subplots(
            len(metrics),
            len(workloads),
            figsize=(3.6 * len(workloads), 2.6 * len(metrics)),
            squeeze=False,
        )
        for j, w in enumerate(workloads):
            for i, m in enumerate(metrics):
                ax = axes[i][j]
                for pol, rs in sorted(
                    _series(
                        [r for r in recs if r.workload == w and r.policy != NO_MOVEMENT],
                        lambda r: r.policy,
                    ).items()
                ):
                    rs.sort(key=lambda r: r.cores)
                    ax.plot(
                        [r.cores for r in rs], [r.counter(m) for r in rs], marker="o", label=pol
                    )
                ax.set_title(f"{w}: {m}", fontsize=9)
                ax.set_xlabel("cores", fontsize=8)
                ax.set_yscale("log")
                ax.legend(fontsize=7)
        title = "per-core page faults, remote TLB invalidations, dTLB misses and run time"
    elif kind == "scaling":
        fig, axes = plt.subplots(
            1, len(workloads), figsize=(4 * len(workloads), 3.4), squeeze=False
        )
        for j, w in enumerate(workloads):
            ax = axes[0][j]
            groups = _series(
                [r for r in recs if r.workload == w], lambda r: (r.page_tables, r.policy)
            )
            for (pt, pol), rs in sorted(
                groups.items(), key=lambda kv: (kv[0][1] != NO_MOVEMENT, kv[0])
            ):
                rs.sort(key=lambda r: r.cores)
                name = NO_MOVEMENT if pol == NO_MOVEMENT else f"{pt} + {pol}"
                ax.plot(
                    [r.cores for r in rs], [_nan(r.speedup) for r in rs], marker="o", label=name
                )
            ax.set_title(w)
            ax.set_xlabel("cores")
            if j == 0:
                ax.set_ylabel("performance (no movement, fewest cores = 1)")
            ax.legend(fontsize=7)
        title = "scaling: shared page tables vs PSPT"
    elif kind == "p":
        fig, ax = plt.subplots(figsize=(5.5, 3.6))
        for w in workloads:
            rs = sorted(
                (r for r in recs if r.workload == w and r.policy == "cmcp"),
                key=lambda r: r.p or 0.0,
            )
            ax.plot(
                [_nan(r.p) for r in rs],
                [_nan(r.relative_performance) for r in rs],
                marker="o",
                label=w,
            )
        ax.set_xlabel("p (fraction of prioritized pages)")
        ax.set_ylabel("relative performance")
        ax.legend()
        title = "CMCP: the effect of p"
    elif kind == "pagesize":
        fig, axes = plt.subplots(
            1, len(workloads), figsize=(4 * len(workloads), 3.4), squeeze=False
        )
        for j, w in enumerate(workloads):
            ax = axes[0][j]
            for ps, rs in sorted(
                _series([r for r in recs if r.workload == w], lambda r: r.page_size).items(),
                key=lambda kv: _psz(kv[0]),
            ):
                rs.sort(key=lambda r: -r.fast_memory_fraction)
                ax.plot(
                    [100 * r.fast_memory_fraction for r in rs],
                    [_nan(r.relative_performance) for r in rs],
                    marker="o",
                    label=ps,
                )
            ax.invert_xaxis()
            ax.set_title(w)
            ax.set_xlabel("memory provided (% of footprint)")
            if j == 0:
                ax.set_ylabel("relative performance")
            ax.legend(fontsize=8)
        title = "page sizes vs memory constraint (FIFO)"
    else:
        return []
    fig.suptitle(title)
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{kind}.png", out_dir / f"{kind}.svg"]
    from tierlab.plots import finish

    finish(fig)
    for p in paths:
        fig.savefig(p, dpi=110)
    plt.close(fig)
    return paths


def _psz(name: str) -> int:
    return {"4KiB": 4, "64KiB": 64, "2MiB": 2048}.get(name, 0)


def write_records(rows: Sequence[dict[str, StatValue]], out_dir: Path) -> list[Path]:
    """``records.json`` and ``records.csv`` of records given as JSON objects."""
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    p = out_dir / "records.json"
    from tierlab.reporters.page import clean_json

    p.write_text(json.dumps(clean_json(list(rows)), indent=2, allow_nan=False) + "\n")
    c = out_dir / "records.csv"
    pd.DataFrame(list(rows)).to_csv(c, index=False)
    return [p, c]


def write_sweep(sweep: Sweep, out_dir: Path) -> list[Path]:
    """``records.json``, ``records.csv``, the Table-1 layout for ``table1`` sweeps, and the
    plots."""
    import pandas as pd

    written = write_records([r.to_json() for r in sweep.records], out_dir)
    if sweep.sweep_name == "table1":
        p = out_dir / "table1.csv"
        pd.DataFrame(table1(sweep.records)).to_csv(p, index=False)
        written.append(p)
    written.extend(plot(sweep, out_dir))
    return written


# -- the core map -------------------------------------------------------------------------------


def coremap(stats_flat: dict[str, StatValue]) -> dict[int, int]:
    """Pages by number of cores that mapped them (``hmem.coremap.N``) from a run's stats."""
    prefix = sk.hmem_coremap("")  # the family's names without their count of cores
    out = {}
    for k, v in stats_flat.items():
        if k.startswith(prefix):
            out[int(k[len(prefix) :])] = _int(v)
    return dict(sorted(out.items()))


# -- the replacement-policy benchmark -----------------------------------------------------------

BENCH_POLICIES = ("fifo", "lru-exact", "clock")


def bench_trace(requests: int = 5_000_000, seed: int = 7) -> tuple[np.ndarray, int]:
    """The benchmark's page trace and cache size: half the requests from a Zipf(1.2) hot set
    over 200 Ki pages, half a cyclic scan over 300 Ki other pages (the loop a sweep over an
    array makes), page numbers of a real address range; 100 Ki frames."""
    rng = np.random.default_rng(seed)
    hot = (rng.zipf(1.2, requests) % 200_000).astype(np.uint64)
    scan = (np.arange(requests, dtype=np.uint64) % 300_000) + 200_000
    pages = np.where(rng.random(requests) < 0.5, hot, scan).astype(np.uint64) + (
        0x7F00_0000_0000 >> 12
    )
    return pages, 100_000


def libcachesim_cache(kind: str, capacity: int) -> Any:
    """The libCacheSim cache equal to tierlab's ``kind`` with every access visible: FIFO,
    LRU, and Clock with ``init_freq=1`` (tierlab's faulting access sets the Accessed bit)."""
    import libcachesim as lcs

    if kind == "fifo":
        return lcs.FIFO(capacity)
    if kind == "lru-exact":
        return lcs.LRU(capacity)
    if kind == "clock":
        return lcs.Clock(capacity, init_freq=1, n_bit_counter=1)
    raise ValueError(f"no libCacheSim counterpart for policy {kind!r}")


def write_oracle_trace(pages: np.ndarray, path: Path) -> None:
    """``pages`` as a libCacheSim oracleGeneral binary trace (one 1-byte object per page)."""
    dt = np.dtype([("t", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
    a = np.zeros(len(pages), dtype=dt)
    a["t"] = np.arange(len(pages), dtype=np.uint32)
    a["id"] = pages
    a["size"] = 1
    a["next"] = -1
    a.tofile(path)


def libcachesim_misses(
    kind: str, pages: np.ndarray, capacity: int, trace_path: Path
) -> tuple[int, float]:
    """Misses of libCacheSim's counterpart of ``kind`` replaying ``trace_path`` (written from
    ``pages``) with its C++ reader, and the seconds it took."""
    import libcachesim as lcs

    cache = libcachesim_cache(kind, capacity)
    reader = lcs.TraceReader(str(trace_path), lcs.TraceType.ORACLE_GENERAL_TRACE)
    t = time.perf_counter()
    miss_ratio, _ = cache.process_trace(reader)
    secs = time.perf_counter() - t
    return round(miss_ratio * len(pages)), secs


def tierlab_misses(kind: str, pages: np.ndarray, capacity: int) -> tuple[int, float]:
    """Misses of tierlab's policy ``kind`` on ``pages`` and the seconds the replay took."""
    from tierlab import _native

    _req, misses, secs = _native.policy_replay(
        kind, np.ascontiguousarray(pages, dtype="<u8").tobytes(), capacity
    )
    return int(misses), float(secs)


def bench_policies(
    requests: int = 5_000_000, repeat: int = 3, tmp_dir: Path | None = None
) -> dict[str, dict[str, float]]:
    """Replay one page trace through tierlab's fifo, exact lru and clock and through
    libCacheSim's counterparts, in this process: requests per second of each (best of
    ``repeat``), their ratio, and both miss counts (they must be equal)."""
    import tempfile

    pages, capacity = bench_trace(requests)
    with tempfile.TemporaryDirectory(dir=tmp_dir) as d:
        path = Path(d) / "trace.oracleGeneral.bin"
        write_oracle_trace(pages, path)
        out: dict[str, dict[str, float]] = {}
        for kind in BENCH_POLICIES:
            best_t = best_l = math.inf
            mt = ml = -1
            for _ in range(max(1, repeat)):
                mt, st = tierlab_misses(kind, pages, capacity)
                ml, sl = libcachesim_misses(kind, pages, capacity, path)
                best_t, best_l = min(best_t, st), min(best_l, sl)
            out[kind] = {
                "tierlab": len(pages) / best_t,
                "libcachesim": len(pages) / best_l,
                "ratio": best_l / best_t,
                "misses_tierlab": mt,
                "misses_libcachesim": ml,
            }
    return out
