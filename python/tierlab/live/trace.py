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
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
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
    #: With --follow-children: meta.json's ``processes`` (the first process's first).
    processes: list[dict[str, Any]] | None = None


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


def _start_checks(
    argv: Sequence[str], valgrind: str | None, flush_interval_s: float | None
) -> tuple[float, str, str]:
    """What both lackey tracers check before starting: the flush interval (default: the
    recorder's), Valgrind, and that the command exists (its path)."""
    from tierlab.live.config import RecordOptions

    if flush_interval_s is None:
        flush_interval_s = RecordOptions().flush_interval_s
    exe = find_valgrind(valgrind)
    if not argv:
        raise TraceError("nothing to trace: give -- CMD [ARGS...]")
    cmd = shutil.which(argv[0]) if "/" not in argv[0] else argv[0]
    if cmd is None or not Path(cmd).exists():
        raise TraceError(f"{argv[0]}: command not found")
    return flush_interval_s, exe, cmd


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

    flush_interval_s, exe, cmd = _start_checks(argv, valgrind, flush_interval_s)
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
                # A forked child would write its trace into the same pipe, mixed with this
                # one's: it runs on untraced (--follow-children traces it).
                "--child-silent-after-fork=yes",
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


# -- child processes (--follow-children) ----------------------------------------------------
#: Bytes of trace a Valgrind process may hold before they reach its log file (its output
#: buffer): the bound on how far a program is ahead of its log file's size.
VALGRIND_BUFFER = 64 << 10
_LOG_NAME = re.compile(r"^lackey\.(\d+)\.(\d+)$")
_PARENT = re.compile(r"Parent PID:\s*(\d+)")
_COMMAND = re.compile(r"==\d+== Command:\s*(.*)$")
#: Where each followed process's recording goes inside the first one's (as ``trace --cc``).
PROCESS_DIR = "processes"


@dataclass
class _Part:
    """One log file of ``--follow-children``: a process, or what a process ran after an exec
    (Valgrind starts a new file at every exec)."""

    pid: int
    file: Path
    dir: str  # "." (the first process) or p<PID>[-N]
    how: str  # start, fork, exec
    writer: RecordingWriter
    parser: Any
    history: MapsHistory
    handle: Any
    offset: int = 0
    live: bool = True  # the pid's newest part: its mappings are read from /proc/PID/maps
    messages: list[str] = field(default_factory=list)
    done: bool = False


def trace_children(
    out: Path,
    argv: Sequence[str],
    *,
    valgrind: str | None = None,
    overwrite: bool = False,
    flush_interval_s: float | None = None,
) -> TraceResult:
    """:func:`trace` of ``argv`` and of every process it starts (forked, and programs they
    exec: Valgrind's ``--trace-children=yes``). Lackey writes one log file per process and
    per exec (``--log-file=DIR/lackey.%p.%n``), which are read while they grow; each process's
    mappings come from its ``/proc/PID/maps`` as in :func:`trace`, a reading's unmaps dated
    once the parser has passed the file's size at the reading plus Valgrind's buffer. The first
    process's recording is ``out``; every other part is a whole recording in
    ``out/processes/p<PID>[-N]`` and ``meta.json``'s ``processes`` lists them all (the layout
    of ``trace --cc``)."""
    from tierlab import _native
    from tierlab._version import VERSION as __version__

    flush_interval_s, exe, cmd = _start_checks(argv, valgrind, flush_interval_s)
    fresh = not os.path.lexists(out)
    was_empty = not fresh and outdir.is_empty_dir(out)
    from tierlab.live.tracefiles import raw_tmp_dir

    logs = Path(tempfile.mkdtemp(prefix="tierlab-lackey-", dir=raw_tmp_dir()))
    staged = logs / "processes"  # the other processes' recordings, moved into out at the end
    source = f"tierlab-trace {__version__} (valgrind lackey)"

    def parameters(target: list[str]) -> dict[str, Any]:
        return {
            "tool": "lackey --trace-mem=yes --trace-children=yes",
            "target": {"argv": target},
            "time": "instructions executed before the access (1 ns = 1 instruction)",
        }

    try:
        proc = subprocess.Popen(
            [
                exe,
                "--tool=lackey",
                "--trace-mem=yes",
                "--vgdb=no",
                "-d",
                "--trace-children=yes",
                f"--log-file={logs}/lackey.%p.%n",
                "--",
                cmd,
                *argv[1:],
            ],
            stderr=subprocess.PIPE,
        )
    except OSError as e:
        shutil.rmtree(logs, ignore_errors=True)
        raise TraceError(f"{exe}: cannot start: {e.strerror}") from e
    debug: dict[int, list[str]] = {}
    said: list[str] = []

    def pass_stderr() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode(errors="replace")
            m = _DEBUG.match(line)
            if m:
                if "aspacem" in line:
                    debug.setdefault(int(line[2:].split(":", 1)[0]), []).append(line)
            else:
                said.append(line.rstrip("\n"))
                del said[:-5]
                sys.stderr.write(line)
                sys.stderr.flush()

    err_thread = threading.Thread(target=pass_stderr, name="tierlab-trace-stderr", daemon=True)
    err_thread.start()
    parts: list[_Part] = []
    known: set[str] = set()
    by_pid: dict[int, list[_Part]] = {}

    def scan() -> None:
        found = []
        for f in logs.iterdir():
            m = _LOG_NAME.match(f.name)
            if m and f.name not in known:
                try:
                    st = f.stat()
                except OSError:
                    continue
                found.append((st.st_mtime_ns, st.st_ino, int(m.group(1)), f))
        # A process's parts in the order they were written: an exec's file is made after
        # the last write of the file before it.
        for _, _, pid, f in sorted(found):
            known.add(f.name)
            earlier = by_pid.setdefault(pid, [])
            if not parts and pid != proc.pid:
                continue  # not ours (cannot happen: the directory is fresh)
            if pid == proc.pid and not earlier:
                d, how = ".", "start"
            else:
                d = f"p{pid}" if not earlier else f"p{pid}-{len(earlier) + 1}"
                how = "exec" if earlier else "fork"
            for old in earlier:
                old.live = False
            staged.mkdir(exist_ok=True)
            writer = RecordingWriter(
                out if d == "." else staged / d,
                source=source,
                parameters=parameters(list(argv) if d == "." else []),
                overwrite=overwrite if d == "." else False,
            )
            part = _Part(
                pid, f, d, how, writer, _native.LackeyParser(), MapsHistory(VALGRIND_BUFFER),
                f.open("rb", buffering=0),
            )  # fmt: skip
            earlier.append(part)
            parts.append(part)

    def add(part: _Part, cols: LackeyColumns) -> None:
        part.messages.extend(cols["messages"])
        if any(_GUEST_INSTRS.search(m) for m in cols["messages"]):
            part.live = False  # Valgrind's exit summary: the pid may be reused from here on
        n = len(cols["kind"])
        if n:
            part.writer.append_accesses(
                time_ns=np.frombuffer(cols["time_ns"], dtype="<u8"),
                tid=np.full(n, part.pid, dtype=np.uint32),
                addr=np.frombuffer(cols["addr"], dtype="<u8"),
                kind=np.frombuffer(cols["kind"], dtype=np.uint8),
            )

    def step(part: _Part, final: bool) -> bool:
        """Read what the part's file holds; True when something was read."""
        got = False
        while True:
            chunk = part.handle.read(CHUNK)
            if not chunk:
                break
            got = True
            add(part, part.parser.feed(chunk))
            part.offset += len(chunk)
            now_count = int(part.parser.counts()["instructions"])
            part.history.advance(part.offset, now_count)
            if not final:
                break
        if part.live and not final:
            now_count = int(part.parser.counts()["instructions"])
            before = len(part.history.pending)
            part.history.read(part.pid, now_count, 0)
            try:
                size = os.fstat(part.handle.fileno()).st_size
            except OSError:
                size = part.offset
            # The reading's unmaps are dated once the parser passes the file's size after it
            # plus Valgrind's buffer: the program's position at the reading is before that.
            pend = part.history.pending
            pend[before:] = [(size + VALGRIND_BUFFER, *e[1:]) for e in pend[before:]]
        return got

    interrupted = False
    error: Exception | None = None
    last_flush = time.monotonic()
    code: int | None = None
    try:
        try:
            while True:
                scan()
                got = False
                for part in parts:
                    got |= step(part, False)
                if time.monotonic() - last_flush >= flush_interval_s:
                    for part in parts:
                        part.writer.update_meta_or_warn(accounting=dict(part.parser.counts()))
                        part.writer.flush()
                    last_flush = time.monotonic()
                if not got:
                    if proc.poll() is not None:
                        break
                    time.sleep(0.005)
            scan()
            for part in parts:
                step(part, True)
                add(part, part.parser.finish())
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
        err_thread.join(timeout=5)
        root = parts[0] if parts else None
        if root is None or (
            error is None
            and not interrupted
            and not root.messages
            and not root.parser.counts()["instructions"]
        ):
            for part in parts:
                part.writer.abandon()
            if fresh or was_empty:
                outdir.take_back(out, fresh)
            quoted = "; ".join(x.strip()[:200] for x in said if x.strip()) or "nothing"
            raise TraceError(
                f"{exe} did not run lackey (exit status {code}, no Valgrind output in its log "
                f"files); it said: {quoted}; no recording written"
            )
        listed: list[dict[str, Any]] = []
        total = 0
        for part in parts:
            counts = part.parser.counts()
            part.history.finish(counts["instructions"])
            _append_history(
                part.writer, part.history, guest_layout(debug.get(part.pid, [])),
                counts["instructions"],
            )  # fmt: skip
            reported = parent = None
            command = ""
            for line in part.messages:
                m = _GUEST_INSTRS.search(line)
                if m:
                    reported = int(m.group(1).replace(",", ""))
                m = _PARENT.search(line)
                if m:
                    parent = int(m.group(1))
                m = _COMMAND.search(line)
                if m:
                    command = m.group(1).strip()
            part.writer.update_meta_or_warn(
                accounting={
                    **counts,
                    "lackey_guest_instrs": reported,
                    "exit_code": code if part.dir == "." else None,
                    "interrupted": interrupted,
                    "valgrind_messages": part.messages[-40:],
                }
            )
            accesses = int(counts["accesses"])
            total += accesses
            if part.dir != "." and accesses == 0:
                part.writer.abandon()
                path = None
            else:
                part.writer.close()
                path = "." if part.dir == "." else f"{PROCESS_DIR}/{part.dir}"
            listed.append(
                {
                    "pid": part.pid,
                    "parent": parent,
                    "start_ns": None,  # lackey's clocks count each process's instructions
                    "how": part.how,
                    "exe": command.split(" ", 1)[0] if command else None,
                    "path": path,
                    "accesses": accesses,
                    "threads": 1 if accesses else 0,
                    "instructions": int(counts["instructions"]),
                    "lackey_guest_instrs": reported,
                }
            )
        for part in parts[1:]:
            if (staged / part.dir).is_dir():
                (out / PROCESS_DIR).mkdir(exist_ok=True)
                shutil.move(str(staged / part.dir), str(out / PROCESS_DIR / part.dir))
        from tierlab.live.tracefiles import add_meta

        add_meta(out, processes=listed)
    finally:
        for part in parts:
            part.handle.close()
        shutil.rmtree(logs, ignore_errors=True)
    if error is not None:
        raise TraceError(f"{error} (the accesses before it are in {out})")
    counts = root.parser.counts()
    reported = listed[0]["lackey_guest_instrs"]
    return TraceResult(out, counts, code, interrupted, reported, root.messages, listed)
