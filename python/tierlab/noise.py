"""Saying when a measured figure may be noise: a confidence interval that spans zero, or a
machine that was busy while it was measured (its load average above its core count)."""

from __future__ import annotations

import os


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def load() -> float | None:
    """The 1-minute load average (``None`` where the system has none)."""
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None


class LoadWatch:
    """The highest load average seen by :meth:`sample` (call it during a measurement)."""

    def __init__(self) -> None:
        self.max: float | None = None
        self.sample()

    def sample(self) -> None:
        v = load()
        if v is not None:
            self.max = v if self.max is None else max(self.max, v)


def busy(load_max: float | None, n_cores: int | None = None) -> bool:
    """Whether the machine was busy: load above its core count."""
    return load_max is not None and load_max > (n_cores or cores())


def notes(
    ci: tuple[float, float] | None = None,
    load_max: float | None = None,
    n_cores: int | None = None,
) -> list[str]:
    """What makes a figure doubtful, in words: ``the interval spans zero: not significant``,
    ``machine busy: load 5.2 on 2 cores``."""
    out = []
    if ci is not None and ci[0] <= 0 <= ci[1]:
        out.append("the interval spans zero: not significant")
    if busy(load_max, n_cores):
        out.append(f"machine busy: load {load_max:.1f} on {n_cores or cores()} cores")
    return out


def flag(
    ci: tuple[float, float] | None = None,
    load_max: float | None = None,
    n_cores: int | None = None,
) -> str:
    """:func:`notes` as a suffix for a printed number (``""`` when there is nothing to say)."""
    n = notes(ci, load_max, n_cores)
    return f"  [{'; '.join(n)}]" if n else ""
