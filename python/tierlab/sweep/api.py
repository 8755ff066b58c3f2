"""Run a sweep of any kind from Python: :func:`sweep` (the kind named by the scenario, or
given) and :func:`run_kind` (a kind object, typed report)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from tierlab.api import build_overrides
from tierlab.sweep.engine import SweepProgress, SweepRun, SweepState, execute
from tierlab.sweep.executor import Executor, LocalExecutor
from tierlab.sweep.kinds import SweepKind, SweepPlan, for_sweep, get
from tierlab.sweep.point import Point, PointError, PointResult, scenario_points

ReportT = TypeVar("ReportT")

#: ``on_done(points_done, total, label, wall_seconds)``
OnDone = Callable[[int, int, str, float], None]


@dataclass
class SweepOutcome(Generic[ReportT]):
    """A sweep's plan, how its run went (:class:`~tierlab.sweep.engine.SweepRun`:
    interrupted, failures, points reused) and its kind's report."""

    kind: SweepKind[ReportT]
    plan: SweepPlan
    run: SweepRun
    report: ReportT

    def frame(self, library: str = "pandas") -> Any:
        """The report as one table: a pandas frame, or a polars one (``"polars"``)."""
        from tierlab.display import sweep_frame, to_library

        return to_library(sweep_frame(self), library)

    def __repr__(self) -> str:
        from tierlab.display import sweep_repr

        return sweep_repr(self)

    def _repr_html_(self) -> str:
        from tierlab.display import sweep_html

        return sweep_html(self)

    def raise_failures(self) -> None:
        """Raise the first point's error if a point failed (the report holds the others)."""
        if self.run.failures:
            raise self.run.failures[0]


class _Callbacks(SweepProgress):
    """Forwards events to ``progress`` and calls ``on_done`` for every point finished."""

    def __init__(self, progress: SweepProgress | None, on_done: OnDone | None) -> None:
        self.progress = progress or SweepProgress()
        self.on_done = on_done

    def started(self, state: SweepState, executor: Executor) -> None:
        self.progress.started(state, executor)

    def point_done(self, state: SweepState, point: Point, result: PointResult) -> None:
        if self.on_done is not None:
            self.on_done(state.done, state.total, point.label, result.wall_seconds)
        self.progress.point_done(state, point, result)

    def point_failed(self, state: SweepState, point: Point, error: PointError) -> None:
        self.progress.point_failed(state, point, error)

    def finished(self, state: SweepState, interrupted: bool) -> None:
        self.progress.finished(state, interrupted)


def run_kind(
    scenario: str | Path,
    kind: SweepKind[ReportT],
    *,
    seed: int | None = None,
    set: Iterable[str] | None = None,
    only: str | None = None,
    jobs: int = 1,
    executor: Executor | None = None,
    progress: SweepProgress | None = None,
    on_done: OnDone | None = None,
    cache_dir: Path | None = None,
    fresh: bool = False,
    keep: Callable[[str], bool] | None = None,
) -> SweepOutcome[ReportT]:
    """Run the sweep of ``scenario`` as ``kind``: its points (those whose label matches the
    glob ``only``, and whose sweep label ``keep`` keeps) with the overrides ``set`` after
    each point's own, on ``executor`` (default: ``jobs`` local processes). With
    ``cache_dir``, every finished point's result is stored there and reused by later runs of
    the same point (:mod:`tierlab.sweep.cache`; ``fresh``: recompute every point and
    overwrite what was stored)."""
    plan = plan_kind(scenario, kind, seed=seed, set=set, only=only, keep=keep)
    store = None
    if cache_dir is not None:
        from tierlab.sweep.cache import ResultCache

        store = ResultCache(cache_dir, reuse=not fresh)
    run = execute(
        plan.points, executor or LocalExecutor(jobs), _Callbacks(progress, on_done), store
    )
    return SweepOutcome(kind, plan, run, kind.report(plan, run))


def plan_kind(
    scenario: str | Path,
    kind: SweepKind[Any],
    *,
    seed: int | None = None,
    set: Iterable[str] | None = None,
    only: str | None = None,
    keep: Callable[[str], bool] | None = None,
) -> SweepPlan:
    """The points :func:`run_kind` would run (nothing is run)."""
    import dataclasses

    plan = kind.plan(str(scenario), build_overrides(None, set), seed, only)
    if keep is not None:
        plan = dataclasses.replace(
            plan,
            points=[p for p in plan.points if keep(p.sweep_label)],
            labels=[x for x in plan.labels if keep(x)],
        )
    return plan


def sweep(
    scenario: str | Path,
    kind: str | None = None,
    *,
    seed: int | None = None,
    set: Iterable[str] | None = None,
    only: str | None = None,
    jobs: int = 1,
    executor: Executor | None = None,
    progress: SweepProgress | None = None,
    on_done: OnDone | None = None,
    cache_dir: Path | None = None,
    fresh: bool = False,
    **options: Any,
) -> SweepOutcome[Any]:
    """Run the sweep of ``scenario`` as the kind named ``kind`` (built with ``options``;
    default: the kind named by the scenario's ``[report] sweep_name``). See
    :func:`run_kind`."""
    if kind is None:
        name, _ = scenario_points(str(scenario), build_overrides(None, set))
        k = for_sweep(name)
    else:
        k = get(kind, **options)
    return run_kind(
        scenario,
        k,
        seed=seed,
        set=set,
        only=only,
        jobs=jobs,
        executor=executor,
        progress=progress,
        on_done=on_done,
        cache_dir=cache_dir,
        fresh=fresh,
    )
