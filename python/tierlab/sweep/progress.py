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


class PlainSweepProgress(SweepProgress):
    """A sweep's progress as plain lines on stderr, for a log file or a pipe: one when the
    sweep starts, one every :func:`tierlab.progress.interval` seconds or every tenth of the
    points (whichever comes first), with the points failed so far."""

    def __init__(self, label: str = "sweep") -> None:
        from tierlab.progress import interval

        self.label = label
        self.every = interval()
        self._last = 0.0
        self._last_share = 0
        self._start = 0.0

    def _line(self, text: str) -> None:
        from tierlab.progress import line

        line(f"tierlab {self.label}: {text}")

    def started(self, state: SweepState, executor: Executor) -> None:
        import time

        self._start = self._last = time.monotonic()
        self._line(f"{state.total} points, {counts(state)}")

    def _maybe(self, state: SweepState) -> None:
        import time

        from tierlab.progress import format_elapsed

        now = time.monotonic()
        share = (10 * (state.done + state.failed)) // max(state.total, 1)
        if now - self._last < self.every and share <= self._last_share:
            return
        self._last, self._last_share = now, share
        self._line(
            f"{counts(state)}, {format_elapsed(now - self._start)} elapsed, "
            f"{format_eta(state.eta_seconds())}"
        )

    def point_done(self, state: SweepState, point: Point, result: PointResult) -> None:
        self._maybe(state)

    def point_failed(self, state: SweepState, point: Point, error: PointError) -> None:
        # Counted here; the command names every failed point once, when the sweep ends.
        self._maybe(state)

    def finished(self, state: SweepState, interrupted: bool) -> None:
        import time

        from tierlab.progress import format_elapsed

        if state.total and time.monotonic() - self._start >= self.every:
            self._line(
                f"{'interrupted' if interrupted else 'finished'}: {counts(state)} in "
                f"{format_elapsed(time.monotonic() - self._start)}"
            )


def sweep_progress(
    label: str = "sweep", console: Console | None = None, lines: bool = True
) -> SweepProgress:
    """The progress of a sweep on stderr: a rich bar in a terminal, plain lines otherwise."""
    from tierlab.progress import is_terminal

    if is_terminal() if console is None else console.is_terminal:
        return RichSweepProgress(console or Console(stderr=True), lines=lines)
    return PlainSweepProgress(label)
