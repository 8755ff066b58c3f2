"""Pieces shared by the subcommands: scenario arguments and error reporting."""

from __future__ import annotations

import argparse
import io
import os
import sys
from typing import Any, NoReturn

from rich.console import Console

#: Exit codes.
#: Where commands write (docs/scenarios.md#where-commands-write), one rule for every command:
#: a command that computes results writes files only when given ``-o/--out DIR``
#: (:data:`OUT_OPTIONAL`, said in its help); a command whose product is a file (a recording,
#: a trace, a plan) requires ``-o/--out``; a command that always writes a report writes it by
#: default to ``INPUT.COMMAND`` (:func:`out_default`): ``tierlab view REC`` to ``REC.view``
#: beside the recording, ``tierlab reproduce PAPER`` to ``PAPER.reproduce``.
OUT_OPTIONAL = "without it, nothing is written (the results are printed)"


def out_default(input_metavar: str, command: str) -> str:
    """The help's statement of a report command's default folder: ``INPUT.COMMAND``."""
    return f"default: {input_metavar}.{command}"


EXIT_OK = 0
EXIT_SIMULATION = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class _TrimmedLines(io.TextIOBase):
    """A text stream that drops the spaces at the end of every line it passes on (rich pads
    each table row to the table's width: noise in a file or a pipe)."""

    def __init__(self, out: Any) -> None:
        self._out = out
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        lines = (self._pending + text).split("\n")
        self._pending = lines.pop()
        if lines:
            self._out.write("".join(line.rstrip(" ") + "\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self._out.write(self._pending)
            self._pending = ""
        self._out.flush()

    def fileno(self) -> int:
        return int(self._out.fileno())

    def isatty(self) -> bool:
        return False


def stdout_console(**kwargs: Any) -> Console:
    """A console for results on stdout: the terminal's width in a terminal; when stdout is a
    pipe or a file (and ``COLUMNS`` is unset), unbounded, so tables keep every column whole
    instead of being squeezed into 80 columns, and without the spaces that pad each row."""
    if sys.stdout.isatty():
        return Console(**kwargs)
    out: Any = _TrimmedLines(sys.stdout)
    if "COLUMNS" in os.environ:
        return Console(file=out, **kwargs)
    return Console(file=out, width=100_000, **kwargs)


class ArgumentParser(argparse.ArgumentParser):
    """argparse with tierlab's error format (``tierlab: error: ...``, exit code 2), "did
    you mean" for an invalid choice (a command, a paper, ...)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print_error(_with_suggestion(message))
        sys.exit(EXIT_USAGE)


def _with_suggestion(message: str) -> str:
    """argparse's ``invalid choice: 'dmeo' (choose from ...)`` with the closest choices."""
    import re

    m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
    if m is None:
        return message
    from tierlab.cli.suggest import did_you_mean

    choices = re.findall(r"'([^']*)'", m.group(2)) or [c.strip() for c in m.group(2).split(",")]
    hint = did_you_mean(m.group(1), choices)
    return f"{message[: m.start()]}invalid choice: {m.group(1)!r}{hint} (choose from {m.group(2)})"


def int_in(lo: int, hi: int, what: str = "an integer") -> Any:
    """An argparse type: an integer from ``lo`` to ``hi`` (so a value the system calls or the
    engine cannot take is a usage error, not an overflow deep inside)."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {what}") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{text}: expected {what} from {lo} to {hi}")
        return v

    parse.__name__ = what  # argparse names the type in some messages
    return parse


#: A process id (Linux's are below 2^22; pid_t is a signed 32-bit integer).
PID = int_in(1, 2**31 - 1, "a process id")


def seed_value(text: str) -> int:
    """``--seed``: an integer from 0 to 2^63 - 1 (it is written into the expanded scenario,
    and a TOML integer is a signed 64-bit one)."""
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected an integer seed") from None
    if not 0 <= v < 2**63:
        raise argparse.ArgumentTypeError(f"{text}: a seed is an integer from 0 to 2^63 - 1")
    return v


def add_scenario_args(parser: argparse.ArgumentParser) -> None:
    """``--seed`` and ``--set`` (the overrides every scenario command takes)."""
    parser.add_argument(
        "--seed",
        type=seed_value,
        default=None,
        help="seed for every random choice (default: the scenario's)",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help='override a scenario key, e.g. machine.cores=4 or duration="10s" '
        "(value parsed as TOML, else taken as a string); repeatable",
    )


def check_overrides(parser: argparse.ArgumentParser, overrides: list[str]) -> None:
    for item in overrides:
        if "=" not in item or not item.split("=", 1)[0].strip():
            parser.error(f"--set {item!r}: expected KEY=VALUE")


def error_exit_code(exc: BaseException) -> int | None:
    """The exit code for an error the user can fix (reported without a traceback), or
    ``None`` for a bug (re-raised)."""
    try:
        from tierlab import _native
    except ImportError:
        pass
    else:
        if isinstance(exc, _native.SimulationError):
            return EXIT_SIMULATION
        if isinstance(exc, _native.ScenarioError):
            return EXIT_USAGE
    from tierlab.outdir import OutputError
    from tierlab.recording import RecordingError
    from tierlab.sweep.point import PointError

    if isinstance(exc, PointError):
        return EXIT_USAGE if exc.kind == "scenario" else EXIT_SIMULATION
    if isinstance(exc, RecordingError | OutputError | OSError | ImportError):
        return EXIT_USAGE
    # tierlab.telemetry imports pandas: a TelemetryError can only come from it once loaded.
    telemetry = sys.modules.get("tierlab.telemetry")
    if telemetry is not None and isinstance(exc, telemetry.TelemetryError):
        return EXIT_USAGE
    return None


def report_error(exc: BaseException) -> None:
    """Print an error the user can fix as one line on stderr: ``tierlab: point 'LABEL':
    CAUSE`` for a sweep point that failed, ``tierlab: error: MESSAGE`` otherwise."""
    from tierlab.sweep.point import PointError

    if isinstance(exc, PointError) and exc.label:
        print(f"tierlab: {exc}", file=sys.stderr)
    else:
        print_error(error_message(exc))


#: Longest error message printed, in characters: a message that quotes its input (a line of
#: a file, a value) stays readable however long the input is.
MAX_ERROR_CHARS = 2000


def error_message(exc: BaseException) -> str:
    text = _error_message(exc)
    if len(text) > MAX_ERROR_CHARS:
        text = f"{text[:MAX_ERROR_CHARS]}... (message cut: {len(text):,} characters in all)"
    return text


def _error_message(exc: BaseException) -> str:
    if isinstance(exc, ImportError) and "_native" in str(exc):
        return (
            f"tierlab's native extension (tierlab._native) is not built or does not load: "
            f"{exc}. Build it with `make install` (or `maturin develop --release`)."
        )
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror.lower()}"
    return _scenario_suggestion(str(exc)) or type(exc).__name__


def _scenario_suggestion(text: str) -> str:
    """An unknown scenario's message with the closest built-in names."""
    import re

    m = re.match(r"(\S+): no such scenario file, and not a built-in scenario", text)
    if m is None:
        return text
    from tierlab.cli.suggest import did_you_mean

    try:
        from tierlab.api import scenarios

        names = [n for n, _ in scenarios()]
    except ImportError:
        return text
    hint = did_you_mean(m.group(1), names)
    return text[: m.end()] + hint + text[m.end() :] if hint else text


def exit_status_text(code: int) -> str:
    """How a child process ended, from its return code: ``exited with status N``, or
    ``killed by signal SIGSEGV`` for a negative code (``subprocess``'s way of saying so)."""
    if code < 0:
        import signal

        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        else:
            name = f"signal {name}"
        return f"killed by {name}"
    return f"exited with status {code}"


def print_error(message: str) -> None:
    print(f"tierlab: error: {message}", file=sys.stderr)
