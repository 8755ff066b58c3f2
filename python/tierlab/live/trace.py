"""A full access trace of a real program through Valgrind's lackey tool, streamed into a
recording's ``accesses`` table, with the program's mapping history.

Valgrind writes lackey's trace to a pipe (``--log-fd``); the native parser reads it in chunks
of ``CHUNK`` bytes (lines may span chunks), so no text file of the trace ever exists. ``I``
(instruction) lines only advance the logical clock: ``time_ns`` of an access is the number of
instructions executed before it. ``L`` is a load, ``S`` a store, ``M`` (modify) a load and a
store of the same address at the same time.

Mappings: the guest program lives in Valgrind's process, so ``/proc/PID/maps`` of that
process, read at every chunk, gives the program's mappings with their file names (a range
that appeared is dated at the previous reading, one that disappeared at this one; Valgrind's
own files are left out). Valgrind names neither the guest's heap nor its stack: its debug
log (``-d``, on stderr) shows its memory layout at start-up and shutdown, where the guest's
``brk`` segment is the anonymous segment below a reservation that shrinks upwards (``RSVN
SmLower``) and its stack the one above a reservation that shrinks downwards (``RSVN
SmUpper``): the mappings holding them are named ``[heap]`` and ``[stack]``. Everything else
on stderr (the program's own output) is passed through.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tierlab import outdir, signals
from tierlab.recording import RecordingWriter

if TYPE_CHECKING:
    from tierlab._native import LackeyColumns, LackeyCounts

CHUNK = 1 << 20
_GUEST_INSTRS = re.compile(r"guest instrs:\s*([\d,]+)")
_DEBUG = re.compile(r"^--\d+:\d+:")
_SEGMENT = re.compile(
    r"aspacem\s+\d+:\s+(?P<kind>\S+)\s+(?P<lo>[0-9a-fA-F]+)-(?P<hi>[0-9a-fA-F]+)\s.*?"
    r"(?P<sm>Sm(?:Lower|Upper|Fixed))?\s*$"
)


class MapsHistory:
    """Map and unmap events from successive readings of ``/proc/PID/maps`` (adjacent entries
    of the same name count as one mapping), dated on the trace's clock.

    The trace reaches the parser late (lackey's buffers, the pipe, the chunk being read), so
    when a reading is taken the program is ahead of the instruction count parsed so far, by at
    most ``lag`` bytes of trace. A range that appeared is dated at the count of the previous
    reading (a lower bound: it was not there then). A range that disappeared, and a range that
    replaced another, are dated once ``lag`` more bytes are parsed after the reading: by then
    the parser has passed the moment of the reading, so the date is an upper bound and no
    access of the old mapping is left out of it."""

    def __init__(self, lag: int = 0) -> None:
        self.live: list[tuple[int, int, str]] = []
        self.events: list[tuple[int, str, int, int, str]] = []
        self.prev_time = 0
        self.lag = lag
        #: Events waiting for the parser to pass their reading: (bytes, kind, start, len, name)
        self.pending: list[tuple[int, str, int, int, str]] = []

    def advance(self, parsed_bytes: int, time: int) -> None:
        """The parser has read ``parsed_bytes`` of trace, up to instruction ``time``: date
        the pending events whose reading it has passed."""
        due = [e for e in self.pending if e[0] <= parsed_bytes]
        self.pending = [e for e in self.pending if e[0] > parsed_bytes]
        self.events.extend((time, kind, lo, n, name) for _, kind, lo, n, name in due)

    def finish(self, time: int) -> None:
        self.advance(2**63, time)

    def read(self, pid: int, time: int, parsed_bytes: int = 0) -> None:
        try:
            text = Path(f"/proc/{pid}/maps").read_text()
        except (OSError, UnicodeDecodeError):
            return
        ranges: list[list[Any]] = []
        for line in text.splitlines():
            fields = line.split(None, 5)
            if len(fields) < 5 or "-" not in fields[0]:
                continue
            a, b = fields[0].split("-", 1)
            try:
                lo, hi = int(a, 16), int(b, 16)
            except ValueError:
                continue
            name = fields[5].strip() if len(fields) > 5 else ""
            if ("/valgrind/" in name and "vgpreload" not in name) or "vgdb-pipe" in name:
                continue
            name = name or "[anon]"
            if ranges and ranges[-1][1] == lo and ranges[-1][2] == name and name != "[anon]":
                ranges[-1][1] = hi
            else:
                ranges.append([lo, hi, name])
        if not ranges:  # an exiting process shows nothing: not an unmapping
            return
        now: set[tuple[int, int, str]] = {(int(r[0]), int(r[1]), str(r[2])) for r in ranges}
        before = set(self.live)
        due = parsed_bytes + self.lag
        # Gone: the parts of an old range no new range of its name covers (dated later).
        for lo, hi, name in sorted(before - now):
            same = [(x, y) for x, y, n in now if n == name and x < hi and y > lo]
            for x, y in _subtract(lo, hi, same):
                self.pending.append((due, "unmap", x, y - x, name))
        # New: a range over nothing or over ranges of its name (growth) appeared since the
        # last reading (dated then); one over something else replaced it (dated later, with
        # the unmap of what it replaced).
        for lo, hi, name in sorted(now - before):
            under = [n for x, y, n in before if x < hi and y > lo]
            if all(n == name for n in under):
                self.events.append((self.prev_time, "map", lo, hi - lo, name))
            else:
                self.pending.append((due, "map", lo, hi - lo, name))
        self.live = sorted(now)
        self.prev_time = time


def _pipe_size(fd: int) -> int:
    """Bytes a pipe holds (``F_GETPIPE_SZ``; 64 KiB by default)."""
    try:
        import fcntl

        return int(fcntl.fcntl(fd, 1032))  # F_GETPIPE_SZ
    except (OSError, ImportError):
        return 1 << 20  # the largest a user can set


def _subtract(lo: int, hi: int, cover: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of ``[lo, hi)`` outside every range of ``cover``."""
    out = []
    pos = lo
    for a, b in sorted(cover):
        if a > pos:
            out.append((pos, min(a, hi)))
        pos = max(pos, b)
    if pos < hi:
        out.append((pos, hi))
    return [(a, b) for a, b in out if b > a]


def guest_layout(debug: list[str]) -> dict[str, int]:
    """Where the guest's heap (``brk``) and stack are, from Valgrind's ``-d`` layout dumps:
    ``{"[heap]": address, "[stack]": address}`` (those found)."""
    found: dict[str, int] = {}
    segs = []
    for line in debug:
        m = _SEGMENT.search(line)
        if m:
            lo, hi = int(m.group("lo"), 16), int(m.group("hi"), 16)
            segs.append((m.group("kind"), lo, hi, m.group("sm")))
        elif "SHOW_SEGMENTS" in line:
            segs.append(("", 0, 0, None))  # a new dump: not adjacent to the last one
    for i, (kind, lo, hi, _sm) in enumerate(segs):
        if kind != "anon":
            continue
        after = segs[i + 1] if i + 1 < len(segs) else None
        before = segs[i - 1] if i else None
        if after and after[0] == "RSVN" and after[3] == "SmLower" and after[1] == hi + 1:
            found.setdefault("[heap]", lo)
        if before and before[0] == "RSVN" and before[3] == "SmUpper" and before[2] + 1 == lo:
            found["[stack]"] = hi
    return found


class TraceError(RuntimeError):
    """The trace could not be taken (no valgrind, malformed output, ...)."""


@dataclass
class TraceResult:
    path: Path
    counts: LackeyCounts
    exit_code: int | None
    interrupted: bool
    lackey_instructions: int | None
    messages: list[str]


def _append_history(
    writer: RecordingWriter, history: MapsHistory, layout: dict[str, int], end: int
) -> None:
    """The mapping events, anonymous ranges holding the guest's heap or stack renamed."""
    if not history.events:
        return

    def name_of(lo: int, length: int, name: str) -> str:
        if name != "[anon]":
            return name
        for label, at in layout.items():
            if lo <= at < lo + length:
                return label
        return name

    ev = sorted(history.events, key=lambda e: (e[0], e[1] == "map"))
    writer.append_mappings(
        time_ns=[min(e[0], end) for e in ev],
        event=[e[1] for e in ev],
        start=[e[2] for e in ev],
        length=[e[3] for e in ev],
        name=[name_of(e[2], e[3], e[4]) for e in ev],
    )


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
    flush_interval_s: float | None = None,
) -> TraceResult:
    """Trace ``argv`` under lackey into recording ``out``, writing a chunk at least every
    ``flush_interval_s`` seconds (default: the recorder's flush interval, as ``record``)."""
    from tierlab import _native
    from tierlab._version import VERSION as __version__
    from tierlab.live.config import RecordOptions

    if flush_interval_s is None:
        flush_interval_s = RecordOptions().flush_interval_s

    exe = find_valgrind(valgrind)
    if not argv:
        raise TraceError("nothing to trace: give -- CMD [ARGS...]")
    cmd = shutil.which(argv[0]) if "/" not in argv[0] else argv[0]
    if cmd is None or not Path(cmd).exists():
        raise TraceError(f"{argv[0]}: command not found")
    # What a trace that never started takes back: the directory it made, or what it put
    # into the empty one it was given (a recording it replaces stays, see abandon()).
    fresh = not os.path.lexists(out)
    was_empty = not fresh and outdir.is_empty_dir(out)
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
            [
                exe,
                "--tool=lackey",
                "--trace-mem=yes",
                "--vgdb=no",
                "-d",
                f"--log-fd={w}",
                "--",
                cmd,
                *argv[1:],
            ],
            pass_fds=(w,),
            stderr=subprocess.PIPE,
        )
    except OSError as e:
        os.close(r)
        os.close(w)
        writer.close()
        raise TraceError(f"{exe}: cannot start: {e.strerror}") from e
    os.close(w)
    debug: list[str] = []
    #: The last lines passed on: Valgrind's own error when it could not start the program.
    said: list[str] = []

    def pass_stderr() -> None:
        """Valgrind's debug log is kept; the program's own stderr is passed on."""
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode(errors="replace")
            if _DEBUG.match(line):
                if "aspacem" in line:
                    debug.append(line)
            else:
                said.append(line.rstrip("\n"))
                del said[:-5]
                sys.stderr.write(line)
                sys.stderr.flush()

    err_thread = threading.Thread(target=pass_stderr, name="tierlab-trace-stderr", daemon=True)
    err_thread.start()
    # How far the program may be ahead of the parser: valgrind's output buffer, the pipe, the
    # chunk being parsed.
    history = MapsHistory(lag=_pipe_size(r) + CHUNK + (64 << 10))
    parsed = 0
    parser = _native.LackeyParser()
    messages: list[str] = []
    interrupted = False
    last_flush = time.monotonic()
    pid = proc.pid

    def add(cols: LackeyColumns) -> None:
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
                parsed += len(chunk)
                now_count = int(parser.counts()["instructions"])
                history.advance(parsed, now_count)
                history.read(pid, now_count, parsed)
                if time.monotonic() - last_flush >= flush_interval_s:
                    writer.update_meta_or_warn(accounting=dict(parser.counts()))
                    writer.flush()
                    last_flush = time.monotonic()
            add(parser.finish())
    except KeyboardInterrupt:
        interrupted = True
        signals.forward(proc)
    except _native.LiveError as e:
        error = e
        proc.kill()
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        interrupted = True
        code = None
    err_thread.join(timeout=5)
    counts = parser.counts()
    if error is None and not interrupted and not messages and not counts["instructions"]:
        # No `==PID==` line and no trace: lackey never ran (valgrind could not execute the
        # program, or the --valgrind given is not valgrind). Nothing was recorded.
        writer.abandon()
        if fresh or was_empty:
            outdir.take_back(out, fresh)
        quoted = "; ".join(x.strip()[:200] for x in said if x.strip()) or "nothing"
        raise TraceError(
            f"{exe} did not run lackey (exit status {code}, no Valgrind output on the log "
            f"pipe); it said: {quoted}; no recording written"
        )
    history.finish(counts["instructions"])
    _append_history(writer, history, guest_layout(debug), counts["instructions"])
    reported = None
    for line in messages:
        m = _GUEST_INSTRS.search(line)
        if m:
            reported = int(m.group(1).replace(",", ""))
    writer.update_meta_or_warn(
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
