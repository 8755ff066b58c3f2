"""Compare telemetry techniques on one scenario, each on a machine of its own.

A scenario lists techniques as ``[[telemetry]]`` tables. :func:`compare` runs the scenario
once per technique (only that technique attached, so techniques never see each other's
Accessed-bit clearing) plus once without any (the baseline for slowdown), for every sweep
point (``[[sweep]]``, e.g. one per footprint), in parallel worker processes. Each run is
deterministic, so the comparison is too.
"""

from __future__ import annotations

import math
import multiprocessing
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from tierlab.api import build_overrides, native

BASELINE = "(baseline)"


class TelemetryError(ValueError):
    """A comparison that cannot run as asked (no techniques, unknown technique names)."""


@dataclass
class TechniqueResult:
    """One technique's figures on one sweep point."""

    name: str
    kind: str
    time_to_precision: float | None
    time_to_recall: float | None
    mean_precision: float
    mean_recall: float
    observer_cpu_seconds: float
    accesses: int
    slowdown: float | None
    wall_seconds: float
    #: Sample-based techniques (PEBS): samples, interrupts, drains, mean samples per drain
    #: (sample set), distinct pages seen, reset value at the end.
    sampling: dict[str, float] = field(default_factory=dict)
    #: The raw native result (samples and mapping log) when kept (``keep_samples``).
    raw: dict[str, Any] | None = field(default=None, repr=False)

    def as_json(self, target: float) -> dict[str, Any]:
        tag = f"{target:g}".replace(".", "_")
        return {
            f"time_to_precision_{tag}": self.time_to_precision,
            f"time_to_recall_{tag}": self.time_to_recall,
            "mean_precision": _num(self.mean_precision),
            "mean_recall": _num(self.mean_recall),
            "observer_cpu_seconds": self.observer_cpu_seconds,
            "slowdown": self.slowdown,
        }


@dataclass
class Comparison:
    """Everything :func:`compare` measured."""

    scenario: str
    sweep_name: str
    target: float
    #: point label ("" without a sweep) -> technique name -> figures
    results: dict[str, dict[str, TechniqueResult]] = field(default_factory=dict)
    #: long table: point, technique, window, t_end_s, precision, recall, reported_bytes,
    #: truth_bytes, cpu_s
    timeseries: pd.DataFrame = field(default_factory=pd.DataFrame)
    interrupted: bool = False

    def table(self) -> pd.DataFrame:
        rows = []
        for point, techs in self.results.items():
            for r in techs.values():
                rows.append(
                    {
                        **({self.sweep_name: point} if point else {}),
                        "technique": r.name,
                        "kind": r.kind,
                        "time_to_precision_s": r.time_to_precision,
                        "time_to_recall_s": r.time_to_recall,
                        "mean_precision": r.mean_precision,
                        "mean_recall": r.mean_recall,
                        "observer_cpu_s": r.observer_cpu_seconds,
                        "slowdown": r.slowdown,
                        **r.sampling,
                        "wall_s": r.wall_seconds,
                    }
                )
        return pd.DataFrame(rows)

    def as_json(self) -> dict[str, Any]:
        def techs(point: str) -> dict[str, Any]:
            return {n: r.as_json(self.target) for n, r in self.results[point].items()}

        if list(self.results) == [""]:
            return {"techniques": techs("")}
        return {self.sweep_name: {p: {"techniques": techs(p)} for p in self.results}}


def _num(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


#: Per-technique stats of sample-based techniques shown in the table (stat -> column).
SAMPLING_COLUMNS = {
    "samples": "samples",
    "interrupts": "interrupts",
    "mean_samples_per_drain": "samples_per_set",
    "pages_seen": "pages_seen",
    "period": "period",
}


def _run_one(
    spec: str, overrides: list[str], seed: int | None, technique: str | None, keep: bool
) -> dict[str, Any]:
    """Worker: one run with only `technique` attached (None = baseline)."""
    nat = native()
    raw = nat.run(spec, overrides, seed, None, None, [] if technique is None else [technique])
    out = {
        "timeseries": raw["timeseries"],
        "stats_flat": raw["stats_flat"],
        "wall_seconds": raw["wall_seconds"],
    }
    if keep:
        for k in ("samples", "mapping_log", "name", "seed", "stats"):
            out[k] = raw.get(k)
    return out


def compare(
    scenario: str,
    techniques: Iterable[str] | None = None,
    *,
    seed: int | None = None,
    set: Iterable[str] | None = None,
    jobs: int = 2,
    baseline: bool = True,
    keep_samples: bool = False,
    on_done: Callable[[str, str, float], None] | None = None,
) -> Comparison:
    """Run every technique (or those named) of `scenario` on its own machine, plus a
    baseline, for every sweep point; see the module docs.

    Slowdown is the baseline's application throughput (accesses per simulated second of the
    application's cores) over the technique's, minus one: for a run of fixed duration, the
    same time does less work; for a workload of fixed work, the same work takes longer.
    Without a baseline run (``baseline=False``), it is the time the
    technique charged to the application's cores (interrupts, work on a shared core) over
    the rest of their time, which leaves out second-order effects such as extra TLB misses
    after flushes. ``keep_samples`` keeps each run's samples (PEBS records) and mapping log in
    :attr:`TechniqueResult.raw` (see :func:`write_sample_recordings`)."""
    spec = str(scenario)
    base = build_overrides(None, set)
    nat = native()
    sweep_name, points = nat.sweep_points(spec, base)
    if not points:
        points = [("", [])]
    available = [(str(n), str(k)) for n, k in nat.techniques(spec, base)]
    if not available:
        raise TelemetryError(f"{spec}: the scenario has no [[telemetry]] techniques to compare")
    names = [n for n, _ in available]
    if techniques is not None:
        wanted = [t.strip() for t in techniques if t.strip()]
        unknown = [t for t in wanted if t not in names]
        if unknown:
            raise TelemetryError(
                f"{spec}: no technique named {', '.join(unknown)} (the scenario has: "
                f"{', '.join(names)})"
            )
        available = [(n, k) for n, k in available if n in wanted]
    kinds = dict(available)
    target = 0.9
    cmp = Comparison(scenario=spec, sweep_name=str(sweep_name), target=target)
    jobs_list = [
        (label, [*sets, *base], tech)
        for label, sets in points
        for tech in [*([None] if baseline else []), *(n for n, _ in available)]
    ]
    raw: dict[tuple[str, str], dict[str, Any]] = {}
    ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=ctx) as pool:
        futures: dict[Future[dict[str, Any]], tuple[str, str]] = {}
        for label, ov, tech in jobs_list:
            fut = pool.submit(_run_one, spec, ov, seed, tech, keep_samples and tech is not None)
            futures[fut] = (label, tech or BASELINE)
        try:
            for fut in _as_completed(futures):
                key = futures[fut]
                raw[key] = fut.result()
                if on_done is not None:
                    on_done(key[0], key[1], raw[key]["wall_seconds"])
        except KeyboardInterrupt:
            cmp.interrupted = True
            for f in futures:
                f.cancel()
            pool.shutdown(wait=False, cancel_futures=True)
    frames = []
    for label, _sets in points:
        base_run = raw.get((label, BASELINE))
        base_rate = _app_rate(base_run["stats_flat"]) if base_run else None
        cmp.results[label] = {}
        for name in [n for n, _ in available]:
            r = raw.get((label, name))
            if r is None:
                continue
            st = r["stats_flat"]
            p = f"telemetry.{name}"
            target = float(st.get("scoring.target", target))
            acc = int(st.get("machine.accesses", 0))
            cmp.results[label][name] = TechniqueResult(
                name=name,
                kind=kinds[name],
                time_to_precision=st.get(f"{p}.time_to_precision"),
                time_to_recall=st.get(f"{p}.time_to_recall"),
                mean_precision=_f(st.get(f"{p}.mean_precision")),
                mean_recall=_f(st.get(f"{p}.mean_recall")),
                observer_cpu_seconds=float(st.get(f"{p}.cpu_seconds", 0.0)),
                accesses=acc,
                slowdown=(
                    base_rate / rate - 1.0
                    if base_rate and (rate := _app_rate(st))
                    else _charged_slowdown(st, p)
                ),
                wall_seconds=float(r["wall_seconds"]),
                sampling={
                    col: st[f"{p}.{stat}"]
                    for stat, col in SAMPLING_COLUMNS.items()
                    if f"{p}.{stat}" in st
                },
                raw=r if keep_samples else None,
            )
            ts = pd.DataFrame(r["timeseries"])
            cols = {
                f"{p}.precision": "precision",
                f"{p}.recall": "recall",
                f"{p}.reported_bytes": "reported_bytes",
                f"{p}.cpu_s": "cpu_s",
            }
            keep = ["window", "t_start_s", "t_end_s", "truth_bytes", *cols]
            part = ts[[c for c in keep if c in ts]].rename(columns=cols)
            part.insert(0, "technique", name)
            if label:
                part.insert(0, cmp.sweep_name, label)
            frames.append(part)
    cmp.target = target
    cmp.timeseries = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return cmp


def write_sample_recordings(cmp: Comparison, out_dir: Any, view: bool = True) -> list[str]:
    """For every sample-based technique run with ``keep_samples``, write its samples as a
    recording ``OUT/[POINT-]samples-<technique>/`` (readable by ``tierlab view``) and, with
    ``view``, the view of it (heatmaps per mapping, histogram, drain intervals) into
    ``OUT/[POINT-]view-<technique>/``."""
    from pathlib import Path

    from tierlab.api import Result
    from tierlab.reporters.samples import write_sample_recordings as write_recs

    out = Path(out_dir)
    written: list[str] = []
    for point, techs in cmp.results.items():
        for r in techs.values():
            if r.raw is None or not r.raw.get("samples"):
                continue
            res = Result.from_native(dict(r.raw))
            sub = out / point.replace("/", "_") if point else out
            sub.mkdir(parents=True, exist_ok=True)
            for rec in write_recs(res, sub):
                written.append(str(rec))
                if view:
                    from tierlab.recording import Recording
                    from tierlab.view import analysis, render

                    v = analysis.analyze(Recording.open(rec))
                    vdir = sub / rec.name.replace("samples-", "view-", 1)
                    vdir.mkdir(exist_ok=True)
                    written.extend(str(x) for x in render.write(v, vdir))
    return written


def _app_rate(st: dict[str, Any]) -> float | None:
    """Accesses per simulated second of the application's cores (None when not known)."""
    acc = st.get("machine.accesses")
    secs = st.get("run.app_seconds") or st.get("run.simulated_seconds")
    return float(acc) / float(secs) if acc and secs else None


def _charged_slowdown(st: dict[str, Any], p: str) -> float | None:
    app = float(st.get("run.app_seconds", 0.0))
    stolen = float(st.get(f"{p}.app_cpu_seconds", 0.0))
    if app <= 0.0 or stolen >= app:
        return None
    return stolen / (app - stolen)


def _f(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _as_completed(futures: Iterable[Future[Any]]) -> Iterable[Future[Any]]:
    from concurrent.futures import as_completed

    return as_completed(list(futures))


def plot(cmp: Comparison, out_stem: str) -> list[str]:
    """Precision and recall over time, one curve per technique (one row of panels per sweep
    point), as PNG and SVG. Returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ts = cmp.timeseries
    points = list(cmp.results) or [""]
    fig, axes = plt.subplots(
        len(points), 2, figsize=(11, 3.2 * len(points)), squeeze=False, sharex=True
    )
    for row, point in enumerate(points):
        sub = ts[ts[cmp.sweep_name] == point] if point and cmp.sweep_name in ts else ts
        for col, metric in enumerate(["precision", "recall"]):
            ax = axes[row][col]
            for name in cmp.results.get(point, {}):
                d = sub[sub["technique"] == name]
                if len(d) and metric in d:
                    ax.plot(d["t_end_s"], d[metric].fillna(0.0), label=name, linewidth=1.4)
            ax.set_ylim(-0.02, 1.02)
            ax.axhline(cmp.target, color="grey", linewidth=0.6, linestyle=":")
            title = metric if not point else f"{metric} ({point})"
            ax.set_title(title)
            ax.set_ylabel(metric)
            ax.grid(alpha=0.3)
            if row == len(points) - 1:
                ax.set_xlabel("simulated time (s)")
        axes[row][1].legend(fontsize=8, loc="best")
    fig.suptitle(f"telemetry: {cmp.scenario}")
    fig.tight_layout()
    written = []
    for ext in ("png", "svg"):
        path = f"{out_stem}.{ext}"
        fig.savefig(path, dpi=110)
        written.append(path)
    plt.close(fig)
    return written
