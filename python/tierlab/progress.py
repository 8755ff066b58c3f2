"""A progress bar for runs, on stderr (rich)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

ProgressFn = Callable[[int, int, int], None]


def format_seconds(ns: int | float) -> str:
    """Simulated time in a short human form (``12.5 ms``, ``3.20 s``)."""
    s = ns / 1e9
    if s < 1e-3:
        return f"{s * 1e6:.0f} us"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"


@contextmanager
def progress_bar(console: Console | None = None) -> Iterator[ProgressFn]:
    """Yield a ``progress(sim_ns_done, sim_ns_total, accesses_done)`` callback drawing a bar
    of simulated time on ``console`` (stderr by default)."""
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
        start = time.monotonic()

        def update(done: int, total: int, accesses: int) -> None:
            elapsed = max(time.monotonic() - start, 1e-9)
            sim = format_seconds(done) + (f" / {format_seconds(total)}" if total else "")
            rate = f"{accesses / elapsed / 1e6:.1f} M acc/s"
            bar.update(task, completed=done, total=total or None, sim=sim, rate=rate)

        yield update
