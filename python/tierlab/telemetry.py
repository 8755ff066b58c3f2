"""Compare telemetry techniques on one scenario, each on a machine of its own.

A scenario lists techniques as ``[[telemetry]]`` tables. :func:`compare` runs the scenario
once per technique (only that technique attached, so techniques never see each other's
Accessed-bit clearing) plus once without any (the baseline for slowdown), for every sweep
point (``[[sweep]]``, e.g. one per footprint), in parallel worker processes. Each run is
deterministic, so the comparison is too.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from tierlab import stats_keys as sk
from tierlab.api import build_overrides
from tierlab.sweep.engine import SweepProgress, SweepState
from tierlab.sweep.kinds import JSON, SweepKind, SweepPlan
from tierlab.sweep.point import Point, PointError, PointResult, scenario_points, select

if TYPE_CHECKING:
    from rich.console import Console

    from tierlab._native import StatValue
    from tierlab.sweep.engine import SweepRun
    from tierlab.sweep.executor import Executor

BASELINE = "(baseline)"
#: The override of the baseline runs: they time the application, nothing else.
NO_TRUTH = "report.ground_truth=false"


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
    sampling: dict[str, StatValue] = field(default_factory=dict)
    #: The run's result with its samples and mapping log, when kept (``keep_samples``).
    point: PointResult | None = field(default=None, repr=False)
    #: Why the figures are missing, when they are ("no scan ran": a PTE scan whose interval
    #: is longer than the run reported nothing, and scores nothing, rather than 0).
    note: str = ""

    def as_json(self, target: float) -> dict[str, JSON]:
        tag = f"{target:g}".replace(".", "_")
        return {
            f"time_to_precision_{tag}": self.time_to_precision,
            f"time_to_recall_{tag}": self.time_to_recall,
            "mean_precision": _num(self.mean_precision),
            "mean_recall": _num(self.mean_recall),
            "observer_cpu_seconds": self.observer_cpu_seconds,
            "slowdown": self.slowdown,
            **({"note": self.note} if self.note else {}),
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
    failures: list[PointError] = field(default_factory=list)

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
                        "note": r.note,
                    }
                )
        df = pd.DataFrame(rows)
        if "note" in df and not df["note"].astype(bool).any():
            df = df.drop(columns="note")
        return df

    def as_json(self) -> JSON:
        def techs(point: str) -> JSON:
            return {n: r.as_json(self.target) for n, r in self.results[point].items()}

        if list(self.results) == [""]:
            return {"techniques": techs("")}
        return {self.sweep_name: {p: {"techniques": techs(p)} for p in self.results}}


def _num(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


#: Per-technique stats of sample-based techniques shown in the table (stat -> column).
SAMPLING_COLUMNS: dict[Callable[[str], str], str] = {
    sk.telemetry_samples: "samples",
    sk.telemetry_interrupts: "interrupts",
    sk.telemetry_mean_samples_per_drain: "samples_per_set",
    sk.telemetry_pages_seen: "pages_seen",
    sk.telemetry_period: "period",
}


def point_label(sweep_label: str, technique: str) -> str:
    """The label of the run of ``technique`` (or :data:`BASELINE`) on a sweep point."""
    return f"{sweep_label}/{technique}" if sweep_label else technique


@dataclass
class TelemetryPlan(SweepPlan):
    """A comparison's plan: also the techniques compared, by name, with their kinds."""

    kinds: dict[str, str] = field(default_factory=dict)


class TelemetryKind(SweepKind[Comparison]):
    """``tierlab telemetry``: every technique (or those named) on a machine of its own, plus
    a baseline without telemetry (unless ``baseline=False``), for every sweep point; see the
    module docs and :func:`compare`."""

    name = "telemetry"

    def __init__(
        self,
        techniques: Iterable[str] | None = None,
        baseline: bool = True,
        keep_samples: bool = False,
        samples_dir: str | Path | None = None,
    ) -> None:
        self.techniques = None if techniques is None else [t.strip() for t in techniques]
        self.baseline = baseline
        self.keep_samples = keep_samples
        # Where the workers write the kept samples (recordings and views), one subdirectory
        # per sweep point; None: the samples come back to this process.
        self.samples_dir = None if samples_dir is None else Path(samples_dir)

    def plan(
        self,
        spec: str,
        overrides: Sequence[str] = (),
        seed: int | None = None,
        only: str | None = None,
    ) -> TelemetryPlan:
        from tierlab import _native

        base = list(overrides)
        sweep_name, pts = scenario_points(spec, base)
        if not pts:
            pts = [("", [])]
        else:
            keep = set(select((label for label, _ in pts), only))
            pts = [(label, ov) for label, ov in pts if label in keep]
        available = [(str(n), str(k)) for n, k in _native.techniques(spec, base)]
        if not available:
            raise TelemetryError(f"{spec}: the scenario has no [[telemetry]] techniques to compare")
        names = [n for n, _ in available]
        if self.techniques is not None:
            wanted = [t for t in self.techniques if t]
            unknown = [t for t in wanted if t not in names]
            if unknown:
                from tierlab.cli.suggest import did_you_mean

                hint = "".join(did_you_mean(u, names) for u in unknown)
                raise TelemetryError(
                    f"{spec}: no technique named {', '.join(unknown)}{hint} (the scenario "
                    f"has: {', '.join(names)})"
                )
            available = [(n, k) for n, k in available if n in wanted]
        runs: list[str | None] = [*([None] if self.baseline else []), *(n for n, _ in available)]
        points = [
            Point(
                label=point_label(label, tech or BASELINE),
                spec=spec,
                # The baseline only times the application: it counts no ground truth
                # (nothing it simulates depends on it; ~20% of a large run's time).
                overrides=(*sets, *base, *(() if tech is not None else (NO_TRUTH,))),
                seed=seed,
                techniques=() if tech is None else (tech,),
                keep_samples=self.keep_samples and tech is not None,
                sweep_label=label,
                samples_dir=self._samples_dir(label) if tech is not None else "",
            )
            for label, sets in pts
            for tech in runs
        ]
        return TelemetryPlan(
            spec, str(sweep_name), [label for label, _ in pts], points, kinds=dict(available)
        )

    def _samples_dir(self, label: str) -> str:
        if not self.keep_samples or self.samples_dir is None:
            return ""
        return str(self.samples_dir / label.replace("/", "_") if label else self.samples_dir)

    def report(self, plan: SweepPlan, run: SweepRun) -> Comparison:
        assert isinstance(plan, TelemetryPlan)
        target = 0.9
        cmp = Comparison(
            scenario=plan.spec,
            sweep_name=plan.sweep_name,
            target=target,
            interrupted=run.interrupted,
            failures=list(run.failures),
        )
        done = {
            (p.sweep_label, p.techniques[0] if p.techniques else BASELINE): r
            for p, r in run.finished()
        }
        frames = []
        for label in plan.labels:
            base_run = done.get((label, BASELINE))
            base_rate = _app_rate(base_run.stats_flat) if base_run else None
            cmp.results[label] = {}
            for name, kind in plan.kinds.items():
                r = done.get((label, name))
                if r is None:
                    continue
                st = r.stats_flat
                target = _float(st.get(sk.SCORING_TARGET, target))
                rate = _app_rate(st)
                no_scan = kind == "pte-scan" and st.get(f"telemetry.{name}.passes") == 0
                cmp.results[label][name] = TechniqueResult(
                    name=name,
                    kind=kind,
                    time_to_precision=_opt(st.get(sk.telemetry_time_to_precision(name))),
                    time_to_recall=_opt(st.get(sk.telemetry_time_to_recall(name))),
                    mean_precision=math.nan
                    if no_scan
                    else _float(st.get(sk.telemetry_mean_precision(name))),
                    mean_recall=math.nan
                    if no_scan
                    else _float(st.get(sk.telemetry_mean_recall(name))),
                    note="no scan ran: the scan interval is longer than the run" if no_scan else "",
                    observer_cpu_seconds=_float(st.get(sk.telemetry_cpu_seconds(name), 0.0)),
                    accesses=int(_float(st.get(sk.MACHINE_ACCESSES, 0))),
                    slowdown=(
                        base_rate / rate - 1.0
                        if base_rate and rate
                        else _charged_slowdown(st, name)
                    ),
                    wall_seconds=float(r.wall_seconds),
                    sampling={
                        col: st[key(name)]
                        for key, col in SAMPLING_COLUMNS.items()
                        if key(name) in st
                    },
                    point=r if self.keep_samples else None,
                )
                ts = pd.DataFrame(r.timeseries)
                cols = {
                    sk.ts_telemetry_precision(name): "precision",
                    sk.ts_telemetry_recall(name): "recall",
                    sk.ts_telemetry_reported_bytes(name): "reported_bytes",
                    sk.ts_telemetry_cpu_s(name): "cpu_s",
                }
                keep = [sk.TS_WINDOW, sk.TS_T_START_S, sk.TS_T_END_S, sk.TS_TRUTH_BYTES, *cols]
                part = ts[[c for c in keep if c in ts]].rename(columns=cols)
                part.insert(0, "technique", name)
                if label:
                    part.insert(0, cmp.sweep_name, label)
                frames.append(part)
        cmp.target = target
        cmp.timeseries = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        return cmp

    def to_json(self, report: Comparison) -> JSON:
        return report.as_json()

    def write(self, report: Comparison, out_dir: Path) -> list[Path]:
        """``telemetry.csv``/``.parquet``/``.json``, ``telemetry_timeseries.csv``/``.parquet``,
        the precision/recall plot and, for sample-based techniques, their samples as
        recordings and views of them."""
        out_dir.mkdir(parents=True, exist_ok=True)
        table = report.table()
        written = [
            out_dir / "telemetry.csv",
            out_dir / "telemetry.parquet",
            out_dir / "telemetry_timeseries.csv",
            out_dir / "telemetry_timeseries.parquet",
            out_dir / "telemetry.json",
        ]
        table.to_csv(written[0], index=False)
        table.to_parquet(written[1], index=False)
        report.timeseries.to_csv(written[2], index=False)
        report.timeseries.to_parquet(written[3], index=False)
        from tierlab.reporters.page import clean_json

        written[4].write_text(
            json.dumps(clean_json(report.as_json()), indent=2, allow_nan=False) + "\n"
        )
        written.extend(Path(p) for p in plot(report, str(out_dir / "precision_recall")))
        written.extend(Path(p) for p in write_sample_recordings(report, out_dir))
        remove_stale_samples(out_dir, written)
        return written

    def render(self, report: Comparison, console: Console, title: str) -> None:
        from tierlab import tables

        table = report.table()
        keys: list[str | tables.Col] = [
            tables.Col(c, c, kind="text", key_column=True) if c == report.sweep_name else str(c)
            for c in table.columns
        ]
        rows = [
            {str(k): (None if _missing(v) else v) for k, v in row.items()}
            for row in table.to_dict("records")
        ]
        tables.render(rows, keys, console, f"telemetry on {title}")


def _missing(v: object) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def fmt_cell(x: object, digits: int = 3) -> str:
    """A cell of the comparison's table: counts with separators, small figures with
    significant digits, missing values as ``-``."""
    if x is None:
        return "-"
    if isinstance(x, float):
        if x != x:  # NaN
            return "-"
        if x.is_integer() and abs(x) >= 1000:
            return f"{int(x):,}"  # counts (samples, interrupts, pages seen)
        if x != 0 and abs(x) < 0.1:
            return f"{x:.{digits}g}"  # small figures (CPU seconds, slowdowns): significant digits
        return f"{x:.{digits}f}"
    return str(x)


class _TechniqueDone(SweepProgress):
    def __init__(self, on_done: Callable[[str, str, float], None]) -> None:
        self.on_done = on_done

    def point_done(self, state: SweepState, point: Point, result: PointResult) -> None:
        tech = point.techniques[0] if point.techniques else BASELINE
        self.on_done(point.sweep_label, tech, result.wall_seconds)


def compare(
    scenario: str,
    techniques: Iterable[str] | None = None,
    *,
    seed: int | None = None,
    set: Iterable[str] | None = None,
    only: str | None = None,
    jobs: int = 2,
    executor: Executor | None = None,
    baseline: bool = True,
    keep_samples: bool = False,
    progress: SweepProgress | None = None,
    on_done: Callable[[str, str, float], None] | None = None,
) -> Comparison:
    """Run every technique (or those named) of `scenario` on its own machine, plus a
    baseline, for every sweep point (those matching the glob ``only``); see the module docs.

    Slowdown is the baseline's application throughput (accesses per simulated second of the
    application's cores) over the technique's, minus one: for a run of fixed duration, the
    same time does less work; for a workload of fixed work, the same work takes longer.
    Without a baseline run (``baseline=False``), it is the time the
    technique charged to the application's cores (interrupts, work on a shared core) over
    the rest of their time, which leaves out second-order effects such as extra TLB misses
    after flushes. ``keep_samples`` keeps each run's samples (PEBS records) and mapping log in
    :attr:`TechniqueResult.point` (see :func:`write_sample_recordings`)."""
    from tierlab.sweep.api import run_kind

    kind = TelemetryKind(techniques, baseline=baseline, keep_samples=keep_samples)
    if progress is None and on_done is not None:
        progress = _TechniqueDone(on_done)
    outcome = run_kind(
        str(scenario),
        kind,
        seed=seed,
        set=list(build_overrides(None, set)),
        only=only,
        jobs=jobs,
        executor=executor,
        progress=progress,
    )
    outcome.raise_failures()
    return outcome.report


#: The samples and views of a technique: ``samples-NAME/``, ``view-NAME/``.
_SAMPLE_DIR = re.compile(r"(samples|view)-.+")


def remove_stale_samples(out_dir: Path, written: Iterable[Path]) -> list[Path]:
    """Remove the ``samples-*/`` and ``view-*/`` directories of ``out_dir`` (and of its
    per-point subdirectories) that this run did not write: those of a technique or point not
    in the new table (an earlier run with other ``--techniques`` or ``--points``, or one that
    was interrupted). Only tierlab's own recordings and views are removed."""
    from tierlab import outdir

    out = Path(os.path.abspath(out_dir))
    keep: set[Path] = set()
    for p in written:
        q = Path(os.path.abspath(p))
        keep.add(q)
        keep.update(q.parents)
    removed: list[Path] = []
    places = [out]
    try:
        places += [
            d
            for d in out.iterdir()
            if d.is_dir() and not d.is_symlink() and d.name != "points" and d in keep
        ]
    except OSError:
        return removed
    for place in places:
        try:
            entries = list(place.iterdir())
        except OSError:
            continue
        for d in entries:
            if (
                _SAMPLE_DIR.fullmatch(d.name)
                and d not in keep
                and d.is_dir()
                and not d.is_symlink()
                and outdir.kind_of(d) in ("recording", "view")
            ):
                shutil.rmtree(d, ignore_errors=True)
                removed.append(d)
    return removed


def write_sample_recordings(cmp: Comparison, out_dir: str | Path, view: bool = True) -> list[str]:
    """For every sample-based technique run with ``keep_samples``, write its samples as a
    recording ``OUT/[POINT-]samples-<technique>/`` (readable by ``tierlab view``) and, with
    ``view``, the view of it (heatmaps per mapping, histogram, drain intervals) into
    ``OUT/[POINT-]view-<technique>/``."""
    from tierlab.reporters.samples import write_sample_recordings as write_recs

    out = Path(out_dir)
    written: list[str] = []
    for point, techs in cmp.results.items():
        for r in techs.values():
            if r.point is not None and r.point.written is not None:
                # The worker wrote them (``TelemetryKind(samples_dir=...)``).
                written.extend(r.point.written)
                continue
            if r.point is None or not r.point.samples:
                continue
            res = r.point.to_result()
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


def _app_rate(st: dict[str, StatValue]) -> float | None:
    """Accesses per simulated second of the application's cores (None when not known)."""
    acc = st.get(sk.MACHINE_ACCESSES)
    secs = st.get(sk.RUN_APP_SECONDS) or st.get(sk.RUN_SIMULATED_SECONDS)
    return _float(acc) / _float(secs) if acc and secs else None


def _charged_slowdown(st: dict[str, StatValue], technique: str) -> float | None:
    app = _float(st.get(sk.RUN_APP_SECONDS, 0.0))
    stolen = _float(st.get(sk.telemetry_app_cpu_seconds(technique), 0.0))
    if app <= 0.0 or stolen >= app:
        return None
    return stolen / (app - stolen)


def _float(x: StatValue) -> float:
    try:
        return float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def _opt(x: StatValue) -> float | None:
    return None if x is None else _float(x)


def plot(cmp: Comparison, out_stem: str) -> list[str]:
    """Precision and recall over time, one curve per technique (one row of panels per sweep
    point), as PNG and SVG. Returns the files written."""
    from tierlab.plots import pyplot

    plt = pyplot()

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
    from tierlab.plots import finish

    finish(fig)
    for ext in ("png", "svg"):
        path = f"{out_stem}.{ext}"
        fig.savefig(path, dpi=110)
        written.append(path)
    plt.close(fig)
    return written
