"""``tierlab``: entry point; parses the command line and dispatches to a subcommand module."""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tierlab.cli.common import ArgumentParser

# Everything past the standard library is imported inside `main`'s handlers: a Ctrl-C while
# the modules load ends with "tierlab: interrupted", like one during a command.


#: The subcommands, in the order `tierlab --help` lists them: each is the module
#: ``tierlab.cli.<name>`` with ``add_parser(sub)`` and ``main(args)``. Adding a command is its
#: module plus one line here.
COMMANDS: tuple[str, ...] = (
    "run",
    "rerun",
    "scenarios",
    "export",
    "params",
    "bench",
    "telemetry",
    "reproduce",
    "tune",
    "record",
    "view",
    "trace",
    "imports",
    "export_trace",
    "overhead",
    "coremap",
    "place",
    "tier",
    "lab",
    "dataset",
)


def subcommands() -> tuple[ModuleType, ...]:
    """The subcommand modules, in the order `tierlab --help` lists them."""
    return tuple(importlib.import_module(f"tierlab.cli.{name}") for name in COMMANDS)


def build_parser() -> ArgumentParser:
    from tierlab._version import VERSION as __version__
    from tierlab.cli.common import ArgumentParser

    parser = ArgumentParser(
        prog="tierlab",
        description="Tiered-memory simulator: where a program's memory is hot, and where it "
        "should live.",
    )
    parser.add_argument("--version", action="version", version=f"tierlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in subcommands():
        module.add_parser(sub)
    return parser


#: The commands whose start line `main` prints (the others print their own, or take no
#: time), and the arguments that name what they work on.
GENERIC_START: dict[str, tuple[str, ...]] = {
    "view": ("recording",),
    "trace": ("cc", "command"),
    "import": ("files",),
    "export-trace": ("recording",),
    "overhead": ("command",),
    "tier": ("command", "pid"),
    "coremap": ("scenario",),
    "rerun": ("dir",),
    "bench": (),
    "place": ("recording", "plan", "pid"),
}


def start_line(args: object) -> None:
    """``tierlab view: rec1``: the first line of a command that may take a while, at once (on
    stderr), before its modules load."""
    parser = getattr(args, "parser", None)
    prog = str(getattr(parser, "prog", ""))
    words = prog.split()
    if len(words) < 2 or words[1] not in GENERIC_START:
        return
    what = []
    for name in GENERIC_START[words[1]]:
        v = getattr(args, name, None)
        if v is None or v == []:
            continue
        if isinstance(v, list):
            v = " ".join(str(x) for x in v if str(x) != "--")
        what.append(f"pid {v}" if name == "pid" else str(v))
    text = ", ".join(what)
    if len(text) > 70:
        text = text[:67] + "..."
    print(f"{prog}: starting{' ' + text if text else ''}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    # SIGTERM and SIGHUP stop a command as Ctrl-C does (what was done is kept); the exit
    # status is then 128 + the signal's number.
    from tierlab import signals

    old = signals.install()
    try:
        return _main(argv)
    finally:
        signals.restore(old)


def _main(argv: list[str] | None) -> int:
    from tierlab import signals
    from tierlab.cli.common import EXIT_INTERRUPTED

    try:
        parser = build_parser()
        args, extra = parser.parse_known_args(argv)
        if extra:
            # An option the subcommand does not take: its usage, not the top-level one.
            # (A subcommand of a subcommand, `bench engine`, keeps its own parser in
            # args.parser.)
            own = getattr(args, "parser", None) or parser
            own.error(f"unrecognized arguments: {' '.join(extra)}")
        start_line(args)
        code = int(args.func(args))
        return signals.exit_code() if code == EXIT_INTERRUPTED else code
    except KeyboardInterrupt:
        how = "" if signals.name() == "SIGINT" else f" ({signals.name()})"
        print(f"tierlab: interrupted{how}", file=sys.stderr)
        return signals.exit_code()
    except BrokenPipeError:
        # The reader went away (`tierlab export demo | head`): not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:
        from tierlab.cli.common import error_exit_code, report_error

        status = error_exit_code(exc)
        if status is None:
            raise
        report_error(exc)
        return status


if __name__ == "__main__":
    sys.exit(main())
