"""The sweep engine: run a list of points on an executor, with progress, reuse of stored
results and clean interruption.

:func:`execute` is the one runner every kind of sweep uses (the CMCP policy sweeps,
telemetry comparisons, tiering, placement, any scenario's ``[[sweep]]``). It returns a
:class:`SweepRun`: the result of every point that finished (by the point's index), the
points that failed (:class:`~tierlab.sweep.point.PointError`, the others still run), and
whether Ctrl-C stopped it (then the points done are kept and the pending ones cancelled).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import Protocol

from tierlab.sweep.executor import Executor, LocalExecutor, TaskFailure
from tierlab.sweep.point import Point, PointError, PointResult
from tierlab.sweep.worker import run_point


class ResultStore(Protocol):
    """Where finished points are kept between runs (see :mod:`tierlab.sweep.cache`)."""

    def load(self, point: Point) -> PointResult | None: ...

    def save(self, point: Point, result: PointResult) -> None: ...


@dataclass
class SweepState:
    """Counts of a sweep in progress."""

    total: int
    #: points finished, including those reused from the store
    done: int = 0
    #: points whose result came from the store
    reused: int = 0
    failed: int = 0
    #: points running now (at most the executor's slots)
    running: int = 0
    #: seconds since the first point was submitted
    elapsed: float = 0.0

    @property
    def computed(self) -> int:
        """Points finished by this run (not reused)."""
        return self.done - self.reused

    @property
    def remaining(self) -> int:
        return self.total - self.done - self.failed

    def eta_seconds(self) -> float | None:
        """Seconds left at the mean rate of the points computed so far (None before the
        first)."""
        if self.computed <= 0:
            return None
        return self.elapsed / self.computed * self.remaining


class SweepProgress:
    """Receives a sweep's events; this base class ignores them."""

    def started(self, state: SweepState, executor: Executor) -> None:
        """Before the first point runs (``state.reused`` points came from the store)."""

    def point_done(self, state: SweepState, point: Point, result: PointResult) -> None:
        """A point finished (``state`` already counts it)."""

    def point_failed(self, state: SweepState, point: Point, error: PointError) -> None:
        """A point failed (``state`` already counts it)."""

    def finished(self, state: SweepState, interrupted: bool) -> None:
        """After the last point, or when the sweep stopped."""


@dataclass
class SweepRun:
    """The outcome of :func:`execute`."""

    points: list[Point]
    #: by point index: the result, or None for a point that did not finish
    results: list[PointResult | None]
    failures: list[PointError] = field(default_factory=list)
    interrupted: bool = False
    #: points whose result came from the store
    reused: int = 0

    def finished(self) -> list[tuple[Point, PointResult]]:
        """The points that finished and their results, in point order."""
        return [(p, r) for p, r in zip(self.points, self.results, strict=True) if r is not None]

    def result(self, label: str) -> PointResult | None:
        for p, r in zip(self.points, self.results, strict=True):
            if p.label == label:
                return r
        return None


def execute(
    points: Sequence[Point],
    executor: Executor | None = None,
    progress: SweepProgress | None = None,
    store: ResultStore | None = None,
) -> SweepRun:
    """Run ``points`` on ``executor`` (default: this process), reporting to ``progress``,
    reusing and saving results in ``store``. Ctrl-C (KeyboardInterrupt) stops the sweep:
    the result has ``interrupted=True`` and keeps every point that finished."""
    points = list(points)
    labels = [p.label for p in points]
    if len(set(labels)) != len(labels):
        dup = next(x for x in labels if labels.count(x) > 1)
        raise ValueError(f"two sweep points are labelled {dup!r}")
    executor = executor or LocalExecutor(1)
    progress = progress or SweepProgress()
    run = SweepRun(points=points, results=[None] * len(points))
    state = SweepState(total=len(points))
    todo: list[int] = []
    for i, p in enumerate(points):
        cached = store.load(p) if store is not None else None
        if cached is not None:
            run.results[i] = cached
            state.done += 1
            state.reused += 1
        else:
            todo.append(i)
    run.reused = state.reused
    start = time.monotonic()
    state.running = min(executor.slots, len(todo))
    progress.started(state, executor)
    try:
        if todo:
            with closing(
                executor.imap(run_point, [_shipping(points[i]) for i in todo])
            ) as outcomes:
                for j, outcome in outcomes:
                    i = todo[j]
                    state.elapsed = time.monotonic() - start
                    if isinstance(outcome, TaskFailure):  # the executor lost the point's run
                        outcome = PointError(points[i].label, outcome.message, "error")
                    if isinstance(outcome, PointError):
                        run.failures.append(outcome)
                        state.failed += 1
                        state.running = min(executor.slots, state.remaining)
                        progress.point_failed(state, points[i], outcome)
                    else:
                        if outcome.provenance is not None:
                            outcome.provenance["executor"] = executor.describe()
                        run.results[i] = outcome
                        if store is not None:
                            store.save(points[i], outcome)
                        state.done += 1
                        state.running = min(executor.slots, state.remaining)
                        progress.point_done(state, points[i], outcome)
    except KeyboardInterrupt:
        run.interrupted = True
    finally:
        state.elapsed = time.monotonic() - start
        state.running = 0
        progress.finished(state, run.interrupted)
    return run


def _shipping(point: Point) -> Point:
    """``point`` with the sources of the Python agents its scenario names (see
    :mod:`tierlab.agents.files`)."""
    from dataclasses import replace

    from tierlab import _native
    from tierlab.agents.files import agent_paths, read_sources

    try:
        expanded = _native.export(point.spec, list(point.overrides), point.seed)
    except Exception:  # an invalid point: its run says why
        return point
    paths = agent_paths(expanded)
    return replace(point, sources=read_sources(paths)) if paths else point
