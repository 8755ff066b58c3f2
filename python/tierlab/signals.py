"""SIGTERM and SIGHUP stop a command as Ctrl-C (SIGINT) does.

Every command keeps what was done when it is interrupted: a simulation returns the part it
ran, a sweep the points that finished, a recorder drains what the kernel holds. A job
scheduler, a closed terminal or ``kill`` sends SIGTERM or SIGHUP instead: :func:`install`
(called by ``tierlab``'s entry point) makes both raise :class:`KeyboardInterrupt` like
SIGINT, so the same code paths run, and remembers which signal came so the process exits
with 128 + its number (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP), as a shell
reports a process that the signal ended.

Code that must not be interrupted between two steps (a recorder between a poll and the
append of its batch) installs its own handler for all three with :func:`on_stop`.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from types import FrameType
from typing import Any

#: The signals that stop a command and keep what was done.
STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_received: int | None = None


def received() -> int | None:
    """The stop signal that came last (``None``: none came)."""
    return _received


def note(signum: int) -> None:
    """Remember that ``signum`` asked the command to stop (for :func:`exit_code`)."""
    global _received
    _received = signum


def reset() -> None:
    global _received
    _received = None


def _raise(signum: int, _frame: FrameType | None) -> None:
    note(signum)
    raise KeyboardInterrupt


def _ours(handler: Any) -> bool:
    """Whether ``handler`` may be replaced: Python's own defaults, not an ``SIG_IGN`` set by
    ``nohup`` or by a parent that wants the signal ignored."""
    return handler in (signal.SIG_DFL, signal.default_int_handler, _raise)


def install() -> dict[int, Any]:
    """Make every stop signal raise :class:`KeyboardInterrupt` (main thread only); returns
    the handlers replaced, for :func:`restore`."""
    old: dict[int, Any] = {}
    if threading.current_thread() is not threading.main_thread():
        return old
    reset()
    for sig in STOP_SIGNALS:
        handler = signal.getsignal(sig)
        if _ours(handler):
            old[sig] = signal.signal(sig, _raise)
    return old


def restore(old: dict[int, Any]) -> None:
    for sig, handler in old.items():
        signal.signal(sig, handler)


def exit_code() -> int:
    """The exit status of a command that stopped on a signal: 128 + its number (130 when
    none was noted: an interrupt raised by other means)."""
    return 128 + (_received if _received is not None else int(signal.SIGINT))


def name() -> str:
    """The stop signal's name (``SIGINT`` when none was noted)."""
    return signal.Signals(_received).name if _received is not None else "SIGINT"


def forward(proc: Any) -> None:
    """Pass a SIGTERM or SIGHUP that stopped tierlab on to its child ``proc`` (a
    ``subprocess.Popen``): a terminal's Ctrl-C reaches the whole process group, ``kill PID``
    only tierlab, and the traced program must end too."""
    if _received is not None and _received != signal.SIGINT and proc.poll() is None:
        with suppress(OSError):
            proc.send_signal(_received)


@contextmanager
def on_stop(fn: Callable[[], None]) -> Iterator[None]:
    """Call ``fn`` (instead of raising) when a stop signal comes, inside the block (main
    thread only; elsewhere nothing is installed). Signals ignored by the parent stay
    ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: FrameType | None) -> None:
        note(signum)
        fn()

    old: dict[int, Any] = {}
    for sig in STOP_SIGNALS:
        current = signal.getsignal(sig)
        if _ours(current) or sig == signal.SIGINT:
            old[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        restore(old)


__all__ = ["STOP_SIGNALS", "exit_code", "forward", "install", "name", "note", "on_stop", "received"]
