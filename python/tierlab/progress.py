"""Progress on stderr, for every command and every phase.

- :func:`start`: the one line every command prints at once (``tierlab run: demo, 1 run,
  ~3.5 s of CPU``), before anything slow.
- :func:`progress_bar`: a run's simulated time; a rich bar in a terminal, else a plain line
  every :func:`interval` seconds (``tierlab run: simulating 45% ...``).
- :func:`phase`: a phase that is not a simulation (drawing, writing, importing, viewing);
  a spinner in a terminal, else a plain line when it has lasted :func:`interval` seconds
  and every interval after, and one when it ends (if a line was printed).

Whether stderr is a terminal decides rich or plain; ``TIERLAB_PROGRESS_INTERVAL`` sets the
plain lines' period in seconds (default 10).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

ProgressFn = Callable[[int, int, int], None]

#: Seconds between two plain progress lines (when stderr is not a terminal).
DEFAULT_INTERVAL = 10.0


def interval() -> float:
    """The plain lines' period: ``TIERLAB_PROGRESS_INTERVAL`` seconds, default 10."""
    try:
        v = float(os.environ.get("TIERLAB_PROGRESS_INTERVAL", DEFAULT_INTERVAL))
    except ValueError:
        return DEFAULT_INTERVAL
    return v if v > 0 else DEFAULT_INTERVAL


def is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def line(text: str) -> None:
    """One plain line on stderr, at once."""
    with suppress(OSError, ValueError):
        print(text, file=sys.stderr, flush=True)


def start(command: str, text: str) -> None:
    """A command's start line: ``tierlab COMMAND: TEXT``."""
    line(f"tierlab {command}: {text}")


def format_seconds(ns: int | float) -> str:
    """Simulated time in a short human form (``12.5 ms``, ``3.20 s``)."""
    s = ns / 1e9
    if s < 1e-3:
        return f"{s * 1e6:.0f} us"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"


def format_elapsed(seconds: float) -> str:
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{s // 60}:{s % 60:02d}"


@contextmanager
def progress_bar(
    console: Console | None = None, plain: bool | None = None, label: str = "run"
) -> Iterator[ProgressFn]:
    """Yield a ``progress(sim_ns_done, sim_ns_total, accesses_done)`` callback: a rich bar of
    simulated time on ``console`` (stderr by default) in a terminal, plain lines every
    :func:`interval` seconds otherwise (``plain`` forces one or the other)."""
    if plain is None:
        plain = not is_terminal() if console is None else not console.is_terminal
    if plain:
        with _plain_bar(label) as update:
            yield update
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = console or Console(stderr=True)
    columns = (
        TextColumn("[bold]simulating"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[sim]}"),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("run", total=None, sim="", rate="")
        start_t = time.monotonic()

        def update(done: int, total: int, accesses: int) -> None:
            elapsed = max(time.monotonic() - start_t, 1e-9)
            sim = format_seconds(done) + (f" / {format_seconds(total)}" if total else "")
            rate = f"{accesses / elapsed / 1e6:.1f} M acc/s"
            bar.update(task, completed=done, total=total or None, sim=sim, rate=rate)

        yield update


@contextmanager
def _plain_bar(label: str) -> Iterator[ProgressFn]:
    start_t = time.monotonic()
    every = interval()
    last = [start_t]

    def update(done: int, total: int, accesses: int) -> None:
        now = time.monotonic()
        if now - last[0] < every:
            return
        last[0] = now
        elapsed = max(now - start_t, 1e-9)
        if total:
            share = (
                f"{100 * done / total:.0f}% ({format_seconds(done)} of "
                f"{format_seconds(total)} simulated)"
            )
        else:  # a replay's simulated duration is not known in advance
            share = f"{format_seconds(done)} simulated"
        line(
            f"tierlab {label}: simulating {share}, {accesses / elapsed / 1e6:.1f} M acc/s, "
            f"{format_elapsed(elapsed)} elapsed"
        )

    yield update


class _Ticker:
    """Calls ``tick(elapsed)`` every :func:`interval` seconds from a daemon thread until
    stopped."""

    def __init__(self, tick: Callable[[float], None]) -> None:
        self._tick = tick
        self._stop = threading.Event()
        self._start = time.monotonic()
        self.ticks = 0
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        every = interval()
        while not self._stop.wait(every):
            self.ticks += 1
            self._tick(time.monotonic() - self._start)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join(timeout=1)
        return time.monotonic() - self._start


class PhaseState:
    """What :func:`phase` yields: set ``failed`` when the phase ends in an error it reported
    itself (a returned exit status), so no "done" line follows the error."""

    failed: bool = False


@contextmanager
def phase(what: str, command: str = "", console: Console | None = None) -> Iterator[PhaseState]:
    """Show that ``what`` (``drawing plots``, ``writing 9 files``) is under way: a spinner in
    a terminal; otherwise a plain line once it has lasted :func:`interval` seconds (and every
    interval after) and one when it ends, so a slow phase is never silent. A phase that
    raises, or whose state is marked ``failed``, ends without the "done" line: the error is
    the last thing said."""
    prefix = f"tierlab {command}: " if command else "tierlab: "
    terminal = is_terminal() if console is None else console.is_terminal
    state = PhaseState()
    if not terminal:
        ticker = _Ticker(lambda s: line(f"{prefix}{what} ({format_elapsed(s)} so far)"))
        ok = False
        try:
            yield state
            ok = True
        finally:
            took = ticker.stop()
            if ticker.ticks and ok and not state.failed:
                line(f"{prefix}{what}: done in {format_elapsed(took)}")
        return
    from rich.console import Console

    console = console or Console(stderr=True)
    with console.status(f"{what}...", spinner="dots"):
        yield state


def status_console(**kwargs: Any) -> Console:
    from rich.console import Console

    return Console(stderr=True, **kwargs)
