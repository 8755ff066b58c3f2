"""``tierlab``: entry point; parses the command line and dispatches to a subcommand module."""

from __future__ import annotations

import os
import sys

from tierlab.cli import (
    bench,
    coremap,
    export,
    imports,
    overhead,
    place,
    record,
    run,
    scenarios,
    telemetry,
    trace,
    view,
)
from tierlab.cli.common import (
    EXIT_INTERRUPTED,
    ArgumentParser,
    error_exit_code,
    error_message,
    print_error,
)

SUBCOMMANDS = (
    run,
    scenarios,
    export,
    bench,
    telemetry,
    record,
    view,
    trace,
    imports,
    overhead,
    coremap,
    place,
)


def build_parser() -> ArgumentParser:
    from tierlab import __version__

    parser = ArgumentParser(
        prog="tierlab",
        description="Tiered-memory simulator: where a program's memory is hot, and where it "
        "should live.",
    )
    parser.add_argument("--version", action="version", version=f"tierlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("tierlab: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`tierlab export demo | head`): not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:
        code = error_exit_code(exc)
        if code is None:
            raise
        print_error(error_message(exc))
        return code


if __name__ == "__main__":
    sys.exit(main())
