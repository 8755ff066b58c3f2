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

import fnmatch
import math
import multiprocessing
import sys
import time
import tomllib
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tierlab.api import build_overrides, native

#: Record fields taken from the stats (per-core averages over the application's cores).
COUNTERS = {
    "page_faults": "hmem.per_core.page_faults",
    "remote_tlb_invalidations": "hmem.per_core.remote_tlb_invalidations",
    "dtlb_misses": "hmem.per_core.dtlb_misses",
    "pte_copy_faults": "hmem.per_core.pte_copy_faults",
    "data_moved_bytes": "hmem.per_core.data_moved_bytes",
    "fault_time_s": "hmem.per_core.fault_time_s",
    "run_time_s": "hmem.run_time_s",
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


def record(label: str, raw: dict[str, Any]) -> dict[str, Any]:
    """The record of one run (``raw``: what ``tierlab._native.run`` returns)."""
    st = raw["stats_flat"]
    sc = tomllib.loads(raw["scenario"])
    rec: dict[str, Any] = {"label": label}
    if "hmem.policy" not in st:
        # Not the hierarchical mode: every machine-wide stat.
        rec["workload"] = workload_name(sc)
        rec.update({k: v for k, v in st.items() if not k.startswith(("machine.core.", "node."))})
        return rec
    frac = float(st["hmem.fast_memory_fraction"])
    no_move = frac >= 1.0 and int(st.get("hmem.evictions", 0)) == 0
    rec.update(
        {
            "workload": workload_name(sc),
            "cores": int(st["run.threads"]),
            "policy": NO_MOVEMENT if no_move else str(st["hmem.policy"]),
            "page_tables": str(st["hmem.page_tables"]),
            "page_size": str(st["hmem.page_size"]),
            "fast_memory_fraction": round(frac, 4),
        }
    )
    for name, key in COUNTERS.items():
        rec[name] = float(st.get(key, 0.0))
    policy = str(st["hmem.policy"])
    if policy == "cmcp":
        rec["p"] = float(st.get("hmem.cmcp.p", math.nan))
    rec["evictions"] = int(st.get("hmem.evictions", 0))
    rec["wall_seconds"] = float(raw.get("wall_seconds", 0.0))
    return rec


def add_relative_performance(records: list[dict[str, Any]]) -> None:
    """Add ``relative_performance`` (no-movement run time of the same workload, cores and
    4 KiB pages, over the record's) and ``speedup`` (no-movement run time at the smallest
    core count of the workload, over the record's) where the baselines exist."""
    base: dict[tuple[str, int, str], float] = {}
    for r in records:
        if r.get("policy") == NO_MOVEMENT:
            base.setdefault((r["workload"], r["cores"], r["page_size"]), r["run_time_s"])
    smallest: dict[str, tuple[int, float]] = {}
    for (w, c, ps), t in base.items():
        if ps == "4KiB" and (w not in smallest or c < smallest[w][0]):
            smallest[w] = (c, t)
    for r in records:
        if "run_time_s" not in r or not r["run_time_s"]:
            continue
        b = base.get((r["workload"], r["cores"], "4KiB")) or base.get(
            (r["workload"], r["cores"], r["page_size"])
        )
        if b:
            r["relative_performance"] = round(b / r["run_time_s"], 4)
        if r["workload"] in smallest:
            r["speedup"] = round(smallest[r["workload"]][1] / r["run_time_s"], 4)


# -- running sweeps ---------------------------------------------------------------------------


def _run_one(spec: str, overrides: list[str], seed: int | None) -> dict[str, Any]:
    raw = native().run(spec, overrides, seed)
    return {
        "scenario": raw["scenario"],
        "stats_flat": raw["stats_flat"],
        "wall_seconds": raw["wall_seconds"],
    }


@dataclass
class Sweep:
    """The records of a scenario's sweep (in sweep order; points not run are missing)."""

    scenario: str
    sweep_name: str
    records: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False


def sweep_points(
    scenario: str, set: Iterable[str] | None = None, only: str | None = None
) -> tuple[str, list[tuple[str, list[str]]]]:
    """A scenario's sweep name and points ``(label, overrides)``; ``only`` keeps the labels
    matching a glob pattern (``bt/*/fifo``)."""
    name, points = native().sweep_points(str(scenario), build_overrides(None, set))
    pts = [(str(label), list(ov)) for label, ov in points]
    if only:
        pts = [p for p in pts if fnmatch.fnmatchcase(p[0], only)]
    return str(name), pts


def run_sweep(
    scenario: str | Path,
    *,
    seed: int | None = None,
    set: Iterable[str] | None = None,
    only: str | None = None,
    jobs: int = 1,
    on_done: Callable[[int, int, str, float], None] | None = None,
) -> Sweep:
    """Run every sweep point of ``scenario`` (or those matching ``only``) and return their
    records. ``set`` overrides apply after each point's own. ``jobs`` > 1 runs points in
    parallel processes. Ctrl-C stops and keeps the points done (``interrupted``)."""
    spec = str(scenario)
    user = build_overrides(None, set)
    name, points = sweep_points(spec, set, only)
    if not points:
        points = [("", [])]
    out = Sweep(scenario=spec, sweep_name=name)
    done: dict[int, dict[str, Any]] = {}
    total = len(points)
    try:
        if jobs <= 1:
            for i, (label, ov) in enumerate(points):
                raw = _run_one(spec, [*ov, *user], seed)
                done[i] = record(label, raw)
                if on_done is not None:
                    on_done(len(done), total, label, raw["wall_seconds"])
        else:
            ctx = multiprocessing.get_context(
                "fork" if sys.platform.startswith("linux") else "spawn"
            )
            with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
                futures: dict[Future[dict[str, Any]], int] = {
                    pool.submit(_run_one, spec, [*ov, *user], seed): i
                    for i, (_, ov) in enumerate(points)
                }
                pending = _future_set(futures)
                try:
                    while pending:
                        finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                        for f in finished:
                            i = futures[f]
                            raw = f.result()
                            done[i] = record(points[i][0], raw)
                            if on_done is not None:
                                on_done(len(done), total, points[i][0], raw["wall_seconds"])
                except KeyboardInterrupt:
                    for f in futures:
                        f.cancel()
                    pool.shutdown(wait=False, cancel_futures=True)
                    raise
    except KeyboardInterrupt:
        out.interrupted = True
    out.records = [done[i] for i in sorted(done)]
    add_relative_performance(out.records)
    return out


def _future_set(futures: dict[Future[dict[str, Any]], int]) -> set[Future[dict[str, Any]]]:
    return set(futures)


# -- tables and plots of the CMCP reproductions ------------------------------------------------

TABLE1_COLUMNS = ("page_faults", "remote_tlb_invalidations", "dtlb_misses")


def table1(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The paper's Table 1 layout: one row per (workload, policy, counter), one column per
    core count (per-core averages)."""
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in records:
        if r.get("policy") in (None, NO_MOVEMENT):
            continue
        for c in (*TABLE1_COLUMNS, "run_time_s"):
            key = (r["workload"], r["policy"], c)
            row = rows.setdefault(
                key, {"workload": r["workload"], "policy": r["policy"], "attribute": c}
            )
            row[f"{r['cores']} cores"] = r[c]
    return list(rows.values())


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _series(
    records: Sequence[dict[str, Any]], key: Callable[[dict[str, Any]], Any]
) -> dict[Any, list[dict[str, Any]]]:
    out: dict[Any, list[dict[str, Any]]] = {}
    for r in records:
        out.setdefault(key(r), []).append(r)
    return out


def plot(sweep: Sweep, out_dir: Path) -> list[Path]:
    """Plots of a sweep by its kind (``report.sweep_name``): ``table1`` (counters vs cores per
    policy), ``scaling`` (speedup vs cores per configuration), ``p`` (relative performance vs
    p), ``pagesize`` (relative performance vs memory provided per page size). Returns the
    files written (PNG and SVG)."""
    plt = _plt()
    recs = [r for r in sweep.records if "run_time_s" in r]
    if not recs:
        return []
    workloads = sorted({r["workload"] for r in recs})
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
                        [r for r in recs if r["workload"] == w and r["policy"] != NO_MOVEMENT],
                        lambda r: r["policy"],
                    ).items()
                ):
                    rs.sort(key=lambda r: r["cores"])
                    ax.plot([r["cores"] for r in rs], [r[m] for r in rs], marker="o", label=pol)
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
                [r for r in recs if r["workload"] == w], lambda r: (r["page_tables"], r["policy"])
            )
            for (pt, pol), rs in sorted(
                groups.items(), key=lambda kv: (kv[0][1] != NO_MOVEMENT, kv[0])
            ):
                rs.sort(key=lambda r: r["cores"])
                name = NO_MOVEMENT if pol == NO_MOVEMENT else f"{pt} + {pol}"
                ax.plot(
                    [r["cores"] for r in rs],
                    [r.get("speedup", math.nan) for r in rs],
                    marker="o",
                    label=name,
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
                (r for r in recs if r["workload"] == w and r.get("policy") == "cmcp"),
                key=lambda r: r.get("p", 0),
            )
            ax.plot(
                [r["p"] for r in rs],
                [r.get("relative_performance", math.nan) for r in rs],
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
                _series([r for r in recs if r["workload"] == w], lambda r: r["page_size"]).items(),
                key=lambda kv: _psz(kv[0]),
            ):
                rs.sort(key=lambda r: -r["fast_memory_fraction"])
                ax.plot(
                    [100 * r["fast_memory_fraction"] for r in rs],
                    [r.get("relative_performance", math.nan) for r in rs],
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
    for p in paths:
        fig.savefig(p, dpi=110)
    plt.close(fig)
    return paths


def _psz(name: str) -> int:
    return {"4KiB": 4, "64KiB": 64, "2MiB": 2048}.get(name, 0)


def write_sweep(sweep: Sweep, out_dir: Path) -> list[Path]:
    """``records.json``, ``records.csv``, the Table-1 layout for ``table1`` sweeps, and the
    plots."""
    import json

    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    p = out_dir / "records.json"
    p.write_text(json.dumps(sweep.records, indent=2, allow_nan=True) + "\n")
    written.append(p)
    p = out_dir / "records.csv"
    pd.DataFrame(sweep.records).to_csv(p, index=False)
    written.append(p)
    if sweep.sweep_name == "table1":
        p = out_dir / "table1.csv"
        pd.DataFrame(table1(sweep.records)).to_csv(p, index=False)
        written.append(p)
    written.extend(plot(sweep, out_dir))
    return written


# -- the core map -------------------------------------------------------------------------------


def coremap(stats_flat: dict[str, Any]) -> dict[int, int]:
    """Pages by number of cores that mapped them (``hmem.coremap.N``) from a run's stats."""
    out = {}
    for k, v in stats_flat.items():
        if k.startswith("hmem.coremap."):
            out[int(k.rsplit(".", 1)[1])] = int(v)
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
    _req, misses, secs = native().policy_replay(
        kind, np.ascontiguousarray(pages, dtype="<u8").tobytes(), capacity
    )
    return int(misses), float(secs)


def bench_policies(
    requests: int = 5_000_000, repeat: int = 3, tmp_dir: Path | None = None
) -> dict[str, dict[str, Any]]:
    """Replay one page trace through tierlab's fifo, exact lru and clock and through
    libCacheSim's counterparts, in this process: requests per second of each (best of
    ``repeat``), their ratio, and both miss counts (they must be equal)."""
    import tempfile

    pages, capacity = bench_trace(requests)
    with tempfile.TemporaryDirectory(dir=tmp_dir) as d:
        path = Path(d) / "trace.oracleGeneral.bin"
        write_oracle_trace(pages, path)
        out: dict[str, dict[str, Any]] = {}
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
