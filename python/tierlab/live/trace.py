"""A full access trace of a real program through Valgrind's lackey tool, streamed into a
recording's ``accesses`` table.

Valgrind writes lackey's trace to a pipe (``--log-fd``); the native parser reads it in chunks
of ``CHUNK`` bytes (lines may span chunks), so no text file of the trace ever exists. ``I``
(instruction) lines only advance the logical clock: ``time_ns`` of an access is the number of
instructions executed before it. ``L`` is a load, ``S`` a store, ``M`` (modify) a load and a
store of the same address at the same time.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tierlab.recording import RecordingWriter

CHUNK = 1 << 20
_GUEST_INSTRS = re.compile(r"guest instrs:\s*([\d,]+)")


class TraceError(RuntimeError):
    """The trace could not be taken (no valgrind, malformed output, ...)."""


@dataclass
class TraceResult:
    path: Path
    counts: dict[str, int]
    exit_code: int | None
    interrupted: bool
    lackey_instructions: int | None
    messages: list[str]


def find_valgrind(explicit: str | None = None) -> str:
    exe = explicit or shutil.which("valgrind")
    if exe is None or not Path(exe).exists():
        raise TraceError(
            "valgrind not found: install it (Debian/Ubuntu: apt-get install valgrind; "
            "`make install` does it when run as root)"
        )
    return exe


def trace(
    out: Path,
    argv: Sequence[str],
    *,
    valgrind: str | None = None,
    overwrite: bool = False,
    flush_interval_s: float = 0.5,
) -> TraceResult:
    from tierlab import __version__, _native

    exe = find_valgrind(valgrind)
    if not argv:
        raise TraceError("nothing to trace: give -- CMD [ARGS...]")
    cmd = shutil.which(argv[0]) if "/" not in argv[0] else argv[0]
    if cmd is None or not Path(cmd).exists():
        raise TraceError(f"{argv[0]}: command not found")
    writer = RecordingWriter(
        out,
        source=f"tierlab-trace {__version__} (valgrind lackey)",
        parameters={
            "tool": "lackey --trace-mem=yes",
            "target": {"argv": list(argv)},
            "time": "instructions executed before the access (1 ns = 1 instruction)",
        },
        overwrite=overwrite,
    )
    r, w = os.pipe()
    try:
        proc = subprocess.Popen(
            [exe, "--tool=lackey", "--trace-mem=yes", f"--log-fd={w}", "--", cmd, *argv[1:]],
            pass_fds=(w,),
        )
    except OSError as e:
        os.close(r)
        os.close(w)
        writer.close()
        raise TraceError(f"{exe}: cannot start: {e.strerror}") from e
    os.close(w)
    parser = _native.LackeyParser()
    messages: list[str] = []
    interrupted = False
    last_flush = time.monotonic()
    pid = proc.pid

    def add(cols: dict[str, Any]) -> None:
        messages.extend(cols["messages"])
        n = len(cols["kind"])
        if n:
            writer.append_accesses(
                time_ns=np.frombuffer(cols["time_ns"], dtype="<u8"),
                tid=np.full(n, pid, dtype=np.uint32),
                addr=np.frombuffer(cols["addr"], dtype="<u8"),
                kind=np.frombuffer(cols["kind"], dtype=np.uint8),
            )

    error: Exception | None = None
    try:
        with os.fdopen(r, "rb", buffering=0) as pipe:
            while True:
                chunk = pipe.read(CHUNK)
                if not chunk:
                    break
                add(parser.feed(chunk))
                if time.monotonic() - last_flush >= flush_interval_s:
                    writer.update_meta(accounting=dict(parser.counts()))
                    writer.flush()
                    last_flush = time.monotonic()
            add(parser.finish())
    except KeyboardInterrupt:
        interrupted = True
    except _native.LiveError as e:
        error = e
        proc.kill()
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        interrupted = True
        code = None
    counts = dict(parser.counts())
    reported = None
    for line in messages:
        m = _GUEST_INSTRS.search(line)
        if m:
            reported = int(m.group(1).replace(",", ""))
    writer.update_meta(
        accounting={
            **counts,
            "lackey_guest_instrs": reported,
            "exit_code": code,
            "interrupted": interrupted,
            "valgrind_messages": messages[-40:],
        }
    )
    writer.close()
    if error is not None:
        raise TraceError(f"{error} (the accesses before it are in {out})")
    return TraceResult(out, counts, code, interrupted, reported, messages)
