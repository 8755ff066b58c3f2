"""A sweep's progress on stderr: a bar with points done / running / failed and an ETA, and
one line per finished point above it."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from tierlab.sweep.engine import SweepProgress, SweepState
from tierlab.sweep.executor import Executor
from tierlab.sweep.point import Point, PointError, PointResult


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "ETA -"
    s = round(seconds)
    if s >= 3600:
        return f"ETA {s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"ETA {s // 60}:{s % 60:02d}"


def counts(state: SweepState) -> str:
    """``12/48 done, 2 running, 1 failed`` (and how many were reused)."""
    text = f"{state.done}/{state.total} done, {state.running} running, {state.failed} failed"
    if state.reused:
        text += f" ({state.reused} reused)"
    return text


class RichSweepProgress(SweepProgress):
    """Draws the sweep's progress on ``console`` (stderr by default); ``lines`` also prints
    one line per finished or failed point."""

    def __init__(self, console: Console | None = None, lines: bool = True) -> None:
        self.console = console or Console(stderr=True)
        self.lines = lines
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def started(self, state: SweepState, executor: Executor) -> None:
        self._bar = Progress(
            TextColumn("[bold]sweep"),
            BarColumn(),
            TextColumn("{task.fields[counts]}"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[eta]}"),
            console=self.console,
            transient=True,
        )
        self._bar.start()
        self._task = self._bar.add_task(
            "sweep", total=state.total, completed=state.done, counts=counts(state), eta="ETA -"
        )

    def _update(self, state: SweepState) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.update(
                self._task,
                completed=state.done + state.failed,
                counts=counts(state),
                eta=format_eta(state.eta_seconds()),
            )

    def point_done(self, state: SweepState, point: Point, result: PointResult) -> None:
        if self.lines:
            self.console.print(
                f"[{state.done}/{state.total}] {point.label} ({result.wall_seconds:.1f} s)",
                highlight=False,
                markup=False,
            )
        self._update(state)

    def point_failed(self, state: SweepState, point: Point, error: PointError) -> None:
        if self.lines:
            self.console.print(
                f"[failed] {point.label}: {error.message}", highlight=False, markup=False
            )
        self._update(state)

    def finished(self, state: SweepState, interrupted: bool) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
