"""``tierlab lab``: a QEMU guest with a real kernel (Debian's 6.12) and two memory nodes.

``tierlab lab machines`` lists the built-in machines, ``tierlab lab check [MACHINE]`` says
what the lab needs and whether this host has it, ``tierlab lab run MACHINE -- CMD`` boots the
machine, runs CMD in it (the host's tierlab installation is there, read-only, at the same
paths; the results directory is shared read-write at its own path) and exits with CMD's
status, ``tierlab lab compare damon MACHINE`` runs the guest kernel's DAMON and tierlab's
simulated DAMON on the same masim configs, and ``tierlab lab compare tiering MACHINE`` the
guest's DAMOS migrate_hot/migrate_cold and NUMA balancing in tiering mode against the
simulator's damon-mtier and numa-tiering (pages promoted and demoted over time). See
docs/lab.md.

Exit status of ``run``: the command's (128 + N when signal N ended it), 2 when the lab could
not be set up or the guest did not boot.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tierlab.cli.common import EXIT_OK, EXIT_USAGE, print_error


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number of seconds") from None
    if not 0 < v < 1e6:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number of seconds > 0")
    return v


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "lab",
        help="boot a QEMU guest with a real kernel and two memory nodes; run commands in it",
        description="The lab: a QEMU guest (Debian's 6.12 kernel, an initramfs tierlab builds, "
        "the host's root shared read-only over 9p) with the NUMA nodes and slow tier a machine "
        "file describes. See docs/lab.md.",
    )
    what = p.add_subparsers(dest="lab", metavar="ACTION", required=True)

    m = what.add_parser("machines", help="list the built-in machines")
    m.set_defaults(func=machines, parser=m)

    c = what.add_parser("check", help="what the lab needs, and whether this host has it")
    c.add_argument("machine", nargs="?", help="also check this machine file (or built-in name)")
    c.set_defaults(func=check, parser=c)

    r = what.add_parser(
        "run",
        help="boot MACHINE, run CMD in it, power off",
        description="Boots MACHINE (a built-in name or a machine .toml file), runs CMD in the "
        "guest with the results directory as its working directory, streams its output and "
        "exits with its status. The guest sees the host's files read-only at the same paths "
        "(with tierlab first on PATH), a tmpfs at /tmp, and RESULTS read-write.",
    )
    r.add_argument("machine", help="built-in machine name or machine file")
    _run_options(r)
    r.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    r.set_defaults(func=run, parser=r)

    from tierlab.lab import compare as cmp

    c = cmp.add_parser(what)
    c.set_defaults(func=_compare)


def _compare(args: argparse.Namespace) -> int:
    """`lab compare damon` or `lab compare tiering`: each mechanism's own module."""
    if args.mechanism == "tiering":
        from tierlab.lab import tiering_compare

        return tiering_compare.main(args)
    from tierlab.lab import compare

    return compare.main(args)


def _run_options(r: argparse.ArgumentParser) -> None:
    r.add_argument(
        "--results",
        type=Path,
        default=Path("lab-out"),
        help="directory shared read-write with the guest, the command's working directory "
        "(default: lab-out)",
    )
    r.add_argument(
        "--timeout",
        type=_seconds,
        default=3600.0,
        help="host seconds before the command is killed (default 3600)",
    )
    r.add_argument("--boot-log", type=Path, help="copy the guest's console log here")


def machines(args: argparse.Namespace) -> int:
    from tierlab.lab import machine as mm

    for name in mm.builtin_machines():
        mach = mm.load(name)
        print(f"{name:<16} {mach.description}")
    return EXIT_OK


def check(args: argparse.Namespace) -> int:
    from tierlab.lab import kernel as k
    from tierlab.lab import machine as mm
    from tierlab.lab import vm

    ok = True
    for label, find in (
        ("qemu", k.find_qemu),
        ("busybox", k.find_busybox),
        ("kernel", lambda: k.find_kernel().image),
    ):
        try:
            print(f"{label:<10} {find()}")
        except k.LabSetupError as e:
            print(f"{label:<10} missing: {e}")
            ok = False
    print(f"{'accel':<10} {vm.accelerator()}")
    if args.machine:
        try:
            print(mm.load(args.machine).summary())
        except mm.MachineError as e:
            print_error(str(e))
            return EXIT_USAGE
    return EXIT_OK if ok else EXIT_USAGE


def run(args: argparse.Namespace) -> int:
    from tierlab.lab import machine as mm
    from tierlab.lab import vm
    from tierlab.lab.kernel import LabSetupError

    command = list(args.command)
    # The options given after MACHINE (argparse's remainder starts right after it).
    if "--" in command:
        cut = command.index("--")
        if cut:
            from tierlab.cli.common import ArgumentParser

            opts = ArgumentParser(prog="tierlab lab run", add_help=False)
            _run_options(opts)
            opts.parse_args(command[:cut], namespace=args)
        command = command[cut + 1 :]
    if not command:
        args.parser.error("no command: tierlab lab run MACHINE -- CMD [ARGS...]")
    try:
        mach = mm.load(args.machine)
    except mm.MachineError as e:
        print_error(str(e))
        return EXIT_USAGE

    def out(fd: int, data: bytes) -> None:
        stream = sys.stdout if fd == 1 else sys.stderr
        stream.buffer.write(data)
        stream.flush()

    lab = vm.Lab(mach, args.results)
    try:
        print(f"tierlab lab: booting {mach.summary()}", file=sys.stderr, flush=True)
        lab.start()
        print(
            f"tierlab lab: booted Linux {lab.release} in {lab.boot_seconds:.1f} s ({lab.accel})",
            file=sys.stderr,
            flush=True,
        )
        res = lab.run(command, timeout=args.timeout, on_output=out)
    except (LabSetupError, vm.LabError) as e:
        print_error(str(e))
        return EXIT_USAGE
    finally:
        if args.boot_log is not None and lab.boot_log.is_file():
            args.boot_log.write_bytes(lab.boot_log.read_bytes())
        lab.close()
    if res.timed_out:
        print_error(f"the command ran past --timeout {args.timeout:g} s and was killed")
    return res.code if res.code >= 0 else 128 - res.code
