"""Importers into the recording format: ``perf script`` text of memory samples, the McKernel
PEBS dump, and damo (DAMON) records. Every error names the file and the line, word or field.

- ``perf script`` (fields as ``perf script -F comm,pid,tid,cpu,time,period,event,addr,
  data_src,weight,ip [--ns] [--show-mmap-events --show-task-events]`` prints them, any of
  them but time, event and addr left out, symbols allowed): one sample per line, every line
  of an event with the same fields. ``PERF_RECORD_MMAP2`` lines give the mapping history
  (with its names), ``PERF_RECORD_COMM exec`` ends it. perf script says nothing about drains:
  ``drain`` is 0 and the drains table stays empty. Times are made relative to the first
  sample or mapping event.
- McKernel PEBS dump (``docs/recording.md``): one file per thread of little-endian u64 words:
  mmap triples ``(ts, addr, len)``, ``0xFFFF_FFFF_FFFF_FFFF``, munmap triples, the separator,
  then batches ``[separator, ts, n, addr x n]``. A batch is one interrupt: one drain.
- damo: the JSON record (optionally zlib-compressed) or the older binary format; regions go
  into the optional ``regions`` table, one row per region per snapshot.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tierlab import safeio
from tierlab.place.proc import normalize_name
from tierlab.recording import RecordingWriter

# numpy, pandas and pyarrow are imported where the rows are made, after the input was parsed:
# the error paths (`tierlab import` of a missing or malformed file) do without their ~0.5 s.
if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

SEP = 0xFFFF_FFFF_FFFF_FFFF


class ImportError_(ValueError):
    """An input file that does not follow its documented format (message names where)."""


@dataclass
class ImportResult:
    path: Path
    counts: dict[str, int]
    warnings: list[str] = field(default_factory=list)


def _constant_strings(value: str, n: int) -> pa.Array:
    import numpy as np
    import pyarrow as pa

    return pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(n, dtype=np.int32)), pa.array([value])
    ).cast(pa.string())


# -- perf script ---------------------------------------------------------------------------

_HEAD = re.compile(
    r"^\s*(?P<comm>.*?)\s+(?P<pid>-?\d+)(?:/(?P<tid>-?\d+))?\s+(?:\[(?P<cpu>\d+)\]\s+)?"
    r"(?P<sec>\d+)\.(?P<frac>\d+):\s*(?P<rest>.*)$"
)
#: The decoded data source perf prints after the raw word: ``|OP ...|LVL ...|SNP ...|TLB
#: ...|LCK ...|BLK ...`` (and ``|HOPS ...`` on newer perf).
_DECODED = re.compile(
    r"\|OP\b.*?\|BLK\s+(?:(?:N/A|Data|Addr)\s?)+(?:\|HOPS\s+(?:N/A|core|node|socket|board)\s?)?"
)
_HEXDIGITS = re.compile(r"[0-9a-fA-F]+")
_MMAP = re.compile(
    r"^PERF_RECORD_MMAP2?\s+(?P<pid>-?\d+)/(?P<tid>-?\d+):\s+\[(?P<start>0x[0-9a-fA-F]+)"
    r"\((?P<len>0x[0-9a-fA-F]+)\)\s+@\s+[^\]]*\]:\s+(?P<prot>\S+)\s?(?P<name>.*)$"
)
_EXEC = re.compile(r"^PERF_RECORD_COMM\s+exec:\s+.*:(?P<pid>\d+)/(?P<tid>\d+)\s*$")
_U64 = 2**64
_U32 = 2**32
#: Sample lines of an event looked at before its fields' layout is decided.
_LAYOUT_LINES = 256
#: The fields that may follow the address (and the data source), as perf prints them.
_TAILS = ("weight+ip", "ip", "weight", "none")


def _time_ns(sec: str, frac: str) -> int:
    return int(sec) * 1_000_000_000 + int((frac + "000000000")[:9])


def _is_hex(tok: str) -> bool:
    return _HEXDIGITS.fullmatch(tok.removeprefix("0x")) is not None


def _hex(tok: str, field: str) -> int:
    if not _is_hex(tok):
        raise ValueError(f"field `{field}`: {tok[:40]!r} is not hexadecimal")
    v = int(tok, 16)
    if v >= _U64:
        raise ValueError(f"field `{field}`: {tok[:40]!r} does not fit 64 bits")
    return v


def _dec(tok: str, field: str, limit: int = _U64) -> int:
    if not tok.isascii() or not tok.isdigit():
        raise ValueError(f"field `{field}`: {tok[:40]!r} is not a non-negative decimal integer")
    v = int(tok)
    if v >= limit:
        raise ValueError(f"field `{field}`: {tok[:40]!r} is too large")
    return v


def _num_like(tok: str) -> bool:
    """A token that can be the weight or the instruction pointer, not a symbol."""
    return tok.isdigit() or (_is_hex(tok) and len(tok) >= 5)


@dataclass
class _Sample:
    """A sample line split into its parts; the tail (after the address or data source) is
    interpreted once the event's field layout is known."""

    time_ns: int
    pid: int
    tid: int
    cpu: int | None
    period: int | None
    event: str
    addr: int
    data_src: int | None
    tail: list[str]
    symbols: bool


def _split_sample(m: re.Match[str]) -> _Sample:
    rest = m.group("rest")
    tokens = rest.split()
    period = None
    if len(tokens) > 1 and tokens[0].isdigit() and tokens[1].endswith(":"):
        period = _dec(tokens.pop(0), "period")
    if not tokens or not tokens[0].endswith(":") or len(tokens[0]) < 2:
        raise ValueError("field `event`: expected an event name ending with ':' after the time")
    event = tokens[0][:-1]
    after_event = rest.split(tokens[0], 1)[1]
    decoded = _DECODED.search(after_event)
    data_src = None
    symbols = False
    if decoded:
        before = after_event[: decoded.start()].split()
        tail = after_event[decoded.end() :].split()
        if len(before) < 2:
            raise ValueError("fields `addr` and `data_src`: expected two hex numbers before '|OP'")
        addr_tok = before[0]
        data_src = _hex(before[-1], "data_src")
        symbols = len(before) > 2
    else:
        words = after_event.split()
        if not words:
            raise ValueError("field `addr`: missing")
        addr_tok, tail = words[0], words[1:]
        if tail and not _is_hex(tail[0]):
            # The address's symbol (`-F sym`): `[unknown]`, a name, `(dso)`; up to the weight or
            # the instruction pointer.
            symbols = True
            k = 0
            while k < len(tail) and not _num_like(tail[k]):
                k += 1
            tail = tail[k:]
    addr = _hex(addr_tok, "addr")
    pid = _dec(m.group("pid"), "pid", _U32)
    tid = _dec(m.group("tid"), "tid", _U32) if m.group("tid") is not None else pid
    cpu = _dec(m.group("cpu"), "cpu", _U32) if m.group("cpu") is not None else None
    t = _time_ns(m.group("sec"), m.group("frac"))
    if t >= _U64:
        raise ValueError(f"field `time`: {m.group('sec')[:30]}.{m.group('frac')[:12]} is too large")
    return _Sample(t, pid, tid, cpu, period, event, addr, data_src, tail, symbols)


def _tail_candidate(tail: list[str]) -> str | None:
    """The most specific layout a tail fits: weight then ip, ip (then symbols), weight alone,
    nothing."""
    if not tail:
        return "none"
    if len(tail) == 1:
        return "weight" if tail[0].isdigit() else ("ip" if _is_hex(tail[0]) else None)
    if tail[0].isdigit() and _is_hex(tail[1]):
        return "weight+ip"
    if _is_hex(tail[0]) and not _address_like(tail[1]):
        return "ip"
    return None


def _address_like(tok: str) -> bool:
    """A token that is an address, not a symbol name (8 hex digits or more)."""
    return len(tok.removeprefix("0x")) >= 8 and _is_hex(tok)


def _parse_tail(tail: list[str], layout: str) -> tuple[int, int]:
    """(weight, ip) from a tail in the event's layout; anything else there is an error."""
    if layout == "none":
        if tail:
            raise ValueError(f"unexpected {tail[0][:40]!r} after the address (no more fields)")
        return 0, 0
    if layout == "weight":
        if not tail:
            raise ValueError("field `weight`: missing")
        if len(tail) > 1:
            raise ValueError(f"unexpected {tail[1][:40]!r} after the weight")
        return _dec(tail[0], "weight"), 0
    if layout == "ip":
        if not tail:
            raise ValueError("field `ip`: missing")
        if len(tail) > 1 and _address_like(tail[1]):
            raise ValueError(
                f"fields after the address: {tail[0][:40]!r} then the address {tail[1][:20]!r}: "
                "expected [WEIGHT] IP [SYMBOL] (a malformed weight?)"
            )
        return 0, _hex(tail[0], "ip")
    if len(tail) < 2:
        raise ValueError(f"fields `weight` and `ip`: expected both, got {len(tail)} value(s)")
    return _dec(tail[0], "weight"), _hex(tail[1], "ip")


def parse_perf_script_line(line: str, layout: str | None = None) -> dict[str, Any] | None:
    """One sample from a ``perf script`` line; ``None`` for blank, comment and side-band
    (``PERF_RECORD_*``) lines. ``layout`` says which of weight and ip follow the address
    (``weight+ip``, ``ip``, ``weight``, ``none``; default: what the line looks like). Raises
    ``ValueError`` saying which field is wrong."""
    if not line.strip() or line.lstrip().startswith("#"):
        return None
    m = _HEAD.match(line)
    if not m:
        raise ValueError("expected 'COMM PID/TID [CPU] SECONDS.FRACTION: ...'")
    if m.group("rest").startswith("PERF_RECORD_"):
        return None
    s = _split_sample(m)
    layout = layout or _tail_candidate(s.tail)
    if layout is None:
        raise ValueError(f"cannot tell the weight and ip apart in {s.tail[:2]!r}")
    weight, ip = _parse_tail(s.tail, layout)
    return {
        "time_ns": s.time_ns,
        "tid": s.tid,
        "cpu": s.cpu or 0,
        "addr": s.addr,
        "ip": ip,
        "weight": weight,
        "data_src": s.data_src or 0,
        "event": s.event,
        "period": s.period if s.period is not None else 1,
    }


@dataclass
class _EventLayout:
    """What perf printed for every sample of one event (the same fields on every line)."""

    tail: str
    cpu: bool
    period: bool
    data_src: bool


class _PerfScriptParser:
    """Streaming parser of ``perf script`` text: samples, and mapping events from
    ``--show-mmap-events`` / ``--show-task-events`` lines.

    ``perf script`` prints the same fields for every sample of an event, but a field's
    value alone does not always say which field it is (an instruction pointer such as
    ``401136`` reads as a decimal weight). The first lines of each event are held back until
    their layout is decided by majority (``_LAYOUT_LINES`` lines); from then on every line
    must follow it, so a malformed value (``abc`` as a weight) is an error, not a zero."""

    def __init__(self) -> None:
        self.rows: dict[str, list[Any]] = {
            k: [] for k in ("time_ns", "tid", "cpu", "addr", "ip", "weight", "data_src", "event")
        }
        self.periods: set[int] = set()
        self.layouts: dict[str, _EventLayout] = {}
        self.pending: dict[str, list[tuple[str, int, _Sample]]] = {}
        #: pid -> samples, and mapping events: (time, pid, "map"/"unmap", start, length, name)
        self.pid_samples: dict[int, int] = {}
        self.maps: list[tuple[int, int, str, int, int, str]] = []
        self.live: dict[int, dict[int, tuple[int, str]]] = {}
        self.seen_sample = False

    def feed(self, line: str, where: str) -> None:
        if not line.strip() or line.lstrip().startswith("#"):
            return
        m = _HEAD.match(line)
        if not m:
            if not self.seen_sample and not self.maps:
                raise ImportError_(
                    f"{where}: not `perf script` output: expected 'COMM PID/TID [CPU] "
                    "SECONDS.FRACTION: EVENT: ADDR ...'"
                )
            raise ImportError_(f"{where}: expected 'COMM PID/TID [CPU] SECONDS.FRACTION: ...'")
        rest = m.group("rest")
        try:
            if rest.startswith("PERF_RECORD_"):
                self._side_band(m, rest)
                return
            s = _split_sample(m)
        except ValueError as e:
            raise ImportError_(f"{where}: {e}") from None
        self.seen_sample = True
        layout = self.layouts.get(s.event)
        if layout is None:
            pend = self.pending.setdefault(s.event, [])
            pend.append((where, 0, s))
            if len(pend) >= _LAYOUT_LINES:
                self._decide(s.event)
            return
        self._add(s, layout, where)

    def _side_band(self, m: re.Match[str], rest: str) -> None:
        t = _time_ns(m.group("sec"), m.group("frac"))
        mm = _MMAP.match(rest)
        if mm:
            pid = int(mm.group("pid"))
            start, length = int(mm.group("start"), 16), int(mm.group("len"), 16)
            if pid < 0 or length == 0:
                return  # the kernel's own mappings
            if start + length > _U64 or t >= _U64:
                raise ValueError(f"mapping at {start:#x} of length {length:#x} passes 2^64")
            name = normalize_name(mm.group("name").strip())
            self.maps.append((t, pid, "map", start, length, name))
            self.live.setdefault(pid, {})[start] = (length, name)
            return
        ex = _EXEC.match(rest)
        if ex:
            pid = int(ex.group("pid"))
            for start, (length, name) in sorted(self.live.pop(pid, {}).items()):
                self.maps.append((t, pid, "unmap", start, length, name))

    def _decide(self, event: str) -> None:
        pend = self.pending.pop(event)
        votes: dict[str, int] = {}
        for _, _, s in pend:
            c = _tail_candidate(s.tail)
            if c is not None:
                votes[c] = votes.get(c, 0) + 1
        tail = max(_TAILS, key=lambda k: (votes.get(k, 0), -_TAILS.index(k)))
        if not votes:
            where, _, s = pend[0]
            raise ImportError_(
                f"{where}: cannot tell the fields after the address apart (expected "
                "[WEIGHT] [IP [SYMBOL]])"
            )
        first = pend[0][2]
        layout = _EventLayout(
            tail, first.cpu is not None, first.period is not None, first.data_src is not None
        )
        self.layouts[event] = layout
        for where, _, s in pend:
            self._add(s, layout, where)

    def check_last(self, line: str, where: str) -> None:
        """Raise :class:`ImportError_` unless ``line`` parses completely as a sample (in its
        event's layout) or a side-band line; it is not added. Call after :meth:`finish`."""
        if not line.strip() or line.lstrip().startswith("#"):
            return
        m = _HEAD.match(line)
        try:
            if not m:
                raise ValueError("expected 'COMM PID/TID [CPU] SECONDS.FRACTION: ...'")
            if m.group("rest").startswith("PERF_RECORD_"):
                return
            s = _split_sample(m)
        except ValueError as e:
            raise ImportError_(f"{where}: {e}") from None
        layout = self.layouts.get(s.event)
        if layout is None:
            tail = _tail_candidate(s.tail)
            if tail is None:
                raise ImportError_(f"{where}: cannot tell the weight and ip apart")
            layout = _EventLayout(
                tail, s.cpu is not None, s.period is not None, s.data_src is not None
            )
        self._fields(s, layout, where)

    def _fields(self, s: _Sample, layout: _EventLayout, where: str) -> tuple[int, int]:
        """(weight, ip) of a sample in its event's layout; an error if it does not follow it."""
        try:
            if (s.cpu is not None) != layout.cpu:
                raise ValueError("field `cpu`: " + ("missing" if layout.cpu else "unexpected"))
            if (s.period is not None) != layout.period:
                raise ValueError(
                    "field `period`: " + ("missing" if layout.period else "unexpected")
                )
            if (s.data_src is not None) != layout.data_src:
                raise ValueError(
                    "field `data_src`: "
                    + ("missing (no '|OP ...' decoding)" if layout.data_src else "unexpected")
                )
            return _parse_tail(s.tail, layout.tail)
        except ValueError as e:
            raise ImportError_(f"{where}: {e}") from None

    def _add(self, s: _Sample, layout: _EventLayout, where: str) -> None:
        weight, ip = self._fields(s, layout, where)
        r = self.rows
        r["time_ns"].append(s.time_ns)
        r["tid"].append(s.tid)
        r["cpu"].append(s.cpu or 0)
        r["addr"].append(s.addr)
        r["ip"].append(ip)
        r["weight"].append(weight)
        r["data_src"].append(s.data_src or 0)
        r["event"].append(s.event)
        self.periods.add(s.period if s.period is not None else 1)
        self.pid_samples[s.pid] = self.pid_samples.get(s.pid, 0) + 1

    def finish(self) -> None:
        for event in list(self.pending):
            self._decide(event)


def import_perf_script(
    files: Sequence[Path], out: Path, *, overwrite: bool = False, chunk_rows: int = 1_000_000
) -> ImportResult:
    """Samples (and, with ``--show-mmap-events``, the mapping history) from ``perf script``
    text. Mapping events are kept for the process with the most samples."""
    p = _PerfScriptParser()
    warnings: list[str] = []
    #: Last lines without a final newline (perf script ends every line with one): maybe cut
    #: short, so never imported; checked once every event's layout is known.
    unended: list[tuple[str, str]] = []
    for path in files:
        with safeio.open_text(path, ImportError_, "perf script text file") as text:
            try:
                for lineno, line in enumerate(text, 1):
                    if lineno == 1:
                        line = line.removeprefix("\ufeff")  # a UTF-8 byte order mark
                    if not line.endswith("\n") and line.strip():
                        unended.append((line, f"{path}:{lineno}"))
                        continue
                    p.feed(line.rstrip("\n"), f"{path}:{lineno}")
            except UnicodeDecodeError:
                raise ImportError_(f"{path}: not text") from None
    p.finish()
    for line, where in unended:
        try:
            p.check_last(line, where)
        except ImportError_ as e:
            raise ImportError_(
                f"{e} (the last line of the file, with no final newline: cut short?)"
            ) from None
        if not line.lstrip().startswith("#"):
            warnings.append(
                f"{where}: the last line has no final newline and may have been cut short "
                "(perf script ends every line with one); left out"
            )
    n = len(p.rows["time_ns"])
    if not n:
        raise ImportError_(
            f"{', '.join(map(str, files))}: no samples found (perf script lines of the form "
            "'COMM PID/TID [CPU] TIME: [PERIOD] EVENT: ADDR ...')"
            + "".join(f"; {w}" for w in warnings)
        )
    main_pid = max(p.pid_samples, key=lambda k: (p.pid_samples[k], -k))
    maps = [m for m in p.maps if m[1] == main_pid]
    others = sorted(set(p.pid_samples) - {main_pid})
    if others and maps:
        shown = ", ".join(map(str, others[:5])) + (" ..." if len(others) > 5 else "")
        warnings.append(
            f"samples of {len(others)} other process(es) (pid {shown}) are kept, but only the "
            f"mapping history of pid {main_pid} (most samples)"
        )
    import pandas as pd

    df = pd.DataFrame(p.rows)
    times = [int(df["time_ns"].min())] + [m[0] for m in maps]
    t0 = min(times)
    df["time_ns"] = df["time_ns"] - t0
    df = df.sort_values("time_ns", kind="stable")
    events = sorted(df["event"].unique().tolist())
    with RecordingWriter(
        out,
        source="perf script (tierlab import)",
        parameters={
            "imported_from": [str(f) for f in files],
            "format": "perf-script",
            "events": events,
            "periods": sorted(p.periods),
            "fields": {e: p.layouts[e].tail for e in events},
            "time_origin_s": t0 / 1e9,
            "drains": "unknown (perf script does not report them): drain is 0, no drain rows",
            "mappings": f"from --show-mmap-events lines of pid {main_pid}"
            if maps
            else "none in the text (use perf script --show-mmap-events)",
        },
        overwrite=overwrite,
    ) as w:
        cols = ["time_ns", "tid", "cpu", "addr", "ip", "weight", "data_src", "event"]
        w.append_samples(df[cols].assign(drain=0).reset_index(drop=True))
        if maps:
            w.append_mappings(
                time_ns=[m[0] - t0 for m in maps],
                event=[m[2] for m in maps],
                start=[m[3] for m in maps],
                length=[m[4] for m in maps],
                name=[m[5] for m in maps],
            )
    counts = {"samples": n, "events": len(events)}
    if maps:
        counts["mapping events"] = len(maps)
    return ImportResult(out, counts, warnings)


# -- McKernel PEBS dump --------------------------------------------------------------------


@dataclass
class McKernelDump:
    tid: int
    mmaps: list[tuple[int, int, int]]
    munmaps: list[tuple[int, int, int]]
    #: (timestamp, addresses)
    batches: list[tuple[int, np.ndarray]]
    warnings: list[str]


def _thread_id(path: Path, index: int) -> int:
    m = re.search(r"(\d+)$", path.stem) or re.search(r"(\d+)", path.name)
    return int(m.group(1)) % (1 << 32) if m else index


#: Largest McKernel dump file read (the whole file is held in memory).
MCKERNEL_MAX_BYTES = 16 << 30


def parse_mckernel(path: Path, index: int = 0) -> McKernelDump:
    raw = safeio.read_bytes(path, MCKERNEL_MAX_BYTES, ImportError_, "McKernel dump file")
    if len(raw) % 8:
        raise ImportError_(f"{path}: {len(raw)} bytes is not a whole number of u64 words")
    import numpy as np

    w = np.frombuffer(raw, dtype="<u8")
    seps = np.flatnonzero(w == np.uint64(SEP))
    if seps.size < 2:
        raise ImportError_(
            f"{path}: expected the mmap and munmap sections each ended by 0xffffffffffffffff; "
            f"found {seps.size} separator(s)"
        )
    s1, s2 = int(seps[0]), int(seps[1])

    def triples(lo: int, hi: int, what: str) -> list[tuple[int, int, int]]:
        if (hi - lo) % 3:
            raise ImportError_(
                f"{path}: {what} section (words {lo}..{hi - 1}) has {hi - lo} words, "
                f"not (ts, addr, len) triples"
            )
        out = [tuple(int(x) for x in w[i : i + 3]) for i in range(lo, hi, 3)]
        for k, (_ts, addr, length) in enumerate(out):
            if addr + length > SEP + 1:
                raise ImportError_(
                    f"{path}: word {lo + 3 * k + 1}: {what} at {addr:#x} of length {length:#x} "
                    "passes the end of the 64-bit address space"
                )
        return out  # type: ignore[return-value]

    mmaps = triples(0, s1, "mmap")
    munmaps = triples(s1 + 1, s2, "munmap")
    batches: list[tuple[int, np.ndarray]] = []
    warnings: list[str] = []
    pos = s2 + 1
    while pos < w.size:
        if int(w[pos]) != SEP:
            raise ImportError_(
                f"{path}: word {pos}: expected the batch separator 0xffffffffffffffff, "
                f"got {int(w[pos]):#x}"
            )
        if pos + 3 > w.size:
            warnings.append(f"{path}: word {pos}: batch header cut short; ignored")
            break
        ts, n = int(w[pos + 1]), int(w[pos + 2])
        start = pos + 3
        if start + n > w.size:
            have = w.size - start
            warnings.append(
                f"{path}: word {pos}: batch of {n} addresses holds only {have} "
                f"(file cut short); kept them"
            )
            n = have
        addrs = w[start : start + n]
        if (addrs == np.uint64(SEP)).any():
            bad = start + int(np.flatnonzero(addrs == np.uint64(SEP))[0])
            raise ImportError_(
                f"{path}: word {bad}: separator inside a batch of {n} addresses starting at "
                f"word {pos} (wrong count?)"
            )
        batches.append((ts, addrs.copy()))
        pos = start + n
    return McKernelDump(_thread_id(path, index), mmaps, munmaps, batches, warnings)


def import_mckernel(
    files: Sequence[Path],
    out: Path,
    *,
    ticks_per_second: float = 1e9,
    event: str = "pebs-mckernel",
    overwrite: bool = False,
) -> ImportResult:
    if not (isinstance(ticks_per_second, int | float) and math.isfinite(ticks_per_second)) or (
        ticks_per_second <= 0
    ):
        raise ImportError_(
            f"--ticks-per-second {ticks_per_second}: expected a positive finite number of "
            "timestamp ticks per second (1e9: nanoseconds)"
        )
    dumps = [parse_mckernel(p, i) for i, p in enumerate(files)]
    tids = [d.tid for d in dumps]
    if len(set(tids)) != len(tids):
        tids = list(range(len(dumps)))  # names without distinct numbers: use the file order
    times = [t for d in dumps for t, _ in d.batches] + [
        m[0] for d in dumps for m in d.mmaps + d.munmaps
    ]
    if not times:
        raise ImportError_(f"{', '.join(map(str, files))}: no batches and no mappings")
    t0 = min(times)
    scale = 1e9 / ticks_per_second
    span_ns = (max(times) - t0) * scale
    if not math.isfinite(span_ns) or span_ns >= 2**64:
        raise ImportError_(
            f"{', '.join(map(str, files))}: timestamps span {max(times) - t0} ticks, "
            f"{span_ns:.3g} ns at --ticks-per-second {ticks_per_second:g}: more than 64-bit "
            "nanoseconds hold (is the tick rate right?)"
        )

    def ns(t: int) -> int:
        return min(round((t - t0) * scale), 2**64 - 1)

    import numpy as np

    batches = sorted(
        ((ts, k, tids[k], a) for k, d in enumerate(dumps) for ts, a in d.batches),
        key=lambda b: (b[0], b[1]),
    )
    maps: dict[tuple[str, int, int, int], None] = {}
    for d in dumps:  # the process's mapping log is in every thread's file: keep one copy
        for ts, addr, length in d.mmaps:
            maps[("map", ts, addr, length)] = None
        for ts, addr, length in d.munmaps:
            maps[("unmap", ts, addr, length)] = None
    with RecordingWriter(
        out,
        source="McKernel PEBS dump (tierlab import)",
        parameters={
            "imported_from": [str(f) for f in files],
            "format": "mckernel-pebs",
            "event": event,
            "ticks_per_second": ticks_per_second,
            "threads": dict(zip(map(str, files), tids, strict=True)),
        },
        overwrite=overwrite,
    ) as w:
        n_samples = 0
        for i, (ts, _k, tid, addrs) in enumerate(batches):
            n = int(addrs.size)
            w.append_drains(time_ns=[ns(ts)], cpu=[0], drain=[i], records=[n])
            if n:
                w.append_samples(
                    time_ns=np.full(n, ns(ts), dtype=np.uint64),
                    tid=np.full(n, tid, dtype=np.uint32),
                    cpu=np.zeros(n, dtype=np.uint32),
                    addr=addrs,
                    ip=np.zeros(n, dtype=np.uint64),
                    weight=np.zeros(n, dtype=np.uint64),
                    data_src=np.zeros(n, dtype=np.uint64),
                    event=_constant_strings(event, n),
                    drain=np.full(n, i, dtype=np.uint64),
                )
                n_samples += n
        ordered = sorted(maps, key=lambda m: (m[1], m[0] == "map"))
        if ordered:
            w.append_mappings(
                time_ns=[ns(m[1]) for m in ordered],
                event=[m[0] for m in ordered],
                start=[m[2] for m in ordered],
                length=[m[3] for m in ordered],
                name=["" for _ in ordered],
            )
    warnings = [x for d in dumps for x in d.warnings]
    counts = {
        "samples": n_samples,
        "drains": len(batches),
        "mappings": len(maps),
        "threads": len(dumps),
    }
    return ImportResult(out, counts, warnings)


# -- damo ----------------------------------------------------------------------------------

#: Largest damo record file read (JSON, zlib-compressed JSON or binary).
DAMO_MAX_BYTES = 4 << 30
_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)")


def _num(value: Any, where: str, limit: int = 2**64) -> int:
    """A non-negative integer below ``limit``: a JSON integer, an integral float, or a string
    of digits with optional thousands separators (``"139,637,985,116,160"``)."""
    if isinstance(value, bool):
        raise ImportError_(f"{where}: expected a number, got a boolean")
    if isinstance(value, int):
        v = value
    elif isinstance(value, float) and value.is_integer():
        v = int(value)
    elif isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        v = int(value.strip().replace(",", ""))
    else:
        shown = repr(value)[:40] if isinstance(value, str | int | float) else type(value).__name__
        raise ImportError_(f"{where}: expected a number, got {shown}")
    if v < 0:
        raise ImportError_(f"{where}: {v} is negative")
    if v >= limit:
        raise ImportError_(f"{where}: {v} is too large (at most {limit - 1})")
    return v


def _damo_json(path: Path, data: Any) -> list[dict[str, Any]]:
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise ImportError_(f"{path}: expected a JSON list of records")
    rows = []
    for i, record in enumerate(data):
        where = f"{path}: record {i}"
        if not isinstance(record, dict) or "snapshots" not in record:
            raise ImportError_(f"{where}: missing field `snapshots`")
        target = record.get("target_id", i)
        target = _num(target, f"{where}: field `target_id`", 2**32) if target is not None else i
        snaps = record["snapshots"]
        if not isinstance(snaps, list):
            raise ImportError_(f"{where}: field `snapshots`: expected a list")
        for j, snap in enumerate(snaps):
            sw = f"{where}: snapshots[{j}]"
            if not isinstance(snap, dict):
                raise ImportError_(f"{sw}: expected an object")
            for key in ("start_time", "end_time", "regions"):
                if key not in snap:
                    raise ImportError_(f"{sw}: missing field `{key}`")
            t0 = _num(snap["start_time"], f"{sw}: field `start_time`")
            t1 = _num(snap["end_time"], f"{sw}: field `end_time`")
            if t1 < t0:
                raise ImportError_(f"{sw}: field `end_time` ({t1}) is before `start_time` ({t0})")
            if not isinstance(snap["regions"], list):
                raise ImportError_(f"{sw}: field `regions`: expected a list")
            for k, reg in enumerate(snap["regions"]):
                rw = f"{sw}: regions[{k}]"
                if not isinstance(reg, dict):
                    raise ImportError_(f"{rw}: expected an object")
                for key in ("start", "end", "nr_accesses"):
                    if key not in reg:
                        raise ImportError_(f"{rw}: missing field `{key}`")
                nr = reg["nr_accesses"]
                nr = nr.get("samples") if isinstance(nr, dict) else nr
                age = reg.get("age", 0)
                age = age.get("aggr_intervals", 0) if isinstance(age, dict) else age
                start = _num(reg["start"], f"{rw}: field `start`")
                end = _num(reg["end"], f"{rw}: field `end`")
                if end < start:
                    raise ImportError_(
                        f"{rw}: field `end` ({end:#x}) is before `start` ({start:#x})"
                    )
                rows.append(
                    {
                        "time_ns": t0,
                        "end_ns": t1,
                        "target": target,
                        "start": start,
                        "end": end,
                        "nr_accesses": _num(nr, f"{rw}: field `nr_accesses.samples`", 2**32),
                        "age": _num(age, f"{rw}: field `age.aggr_intervals`", 2**32),
                    }
                )
    return rows


def _damo_binary(path: Path, raw: bytes) -> list[dict[str, Any]]:
    magic = b"damon_recfmt_ver"
    if not raw.startswith(magic):
        raise ImportError_(
            f"{path}: not a damo record (neither JSON, zlib-compressed JSON, nor the binary "
            "format starting with `damon_recfmt_ver`)"
        )
    pos = len(magic)

    def take(fmt: str, what: str) -> tuple[Any, ...]:
        nonlocal pos
        size = struct.calcsize(fmt)
        if pos + size > len(raw):
            raise ImportError_(f"{path}: byte {pos}: file ends inside {what}")
        v = struct.unpack_from(fmt, raw, pos)
        pos += size
        return v

    (version,) = take("=i", "the version")
    if version not in (1, 2):
        raise ImportError_(f"{path}: byte {pos - 4}: binary format version {version} (1 or 2)")
    region = struct.calcsize("=QQI")
    rows = []
    while pos < len(raw):
        sec, nsec = take("=qq", "a snapshot time")
        if sec < 0 or not 0 <= nsec < 1_000_000_000 or sec * 1_000_000_000 + nsec >= 2**64:
            raise ImportError_(
                f"{path}: byte {pos - 16}: snapshot time {sec} s {nsec} ns is not a time"
            )
        (nr_tasks,) = take("=I", "a task count")
        t = sec * 1_000_000_000 + nsec
        for _ in range(nr_tasks):
            (target,) = take("=i" if version == 1 else "=Q", "a target id")
            (nr_regions,) = take("=I", "a region count")
            if nr_regions * region > len(raw) - pos:
                raise ImportError_(
                    f"{path}: byte {pos}: file ends inside a region ({nr_regions} region(s) "
                    f"need {nr_regions * region} bytes, {len(raw) - pos} are left)"
                )
            for _ in range(nr_regions):
                at = pos
                start, end, nr = take("=QQI", "a region")
                if end < start:
                    raise ImportError_(f"{path}: byte {at}: region end {end:#x} before start")
                rows.append(
                    {
                        "time_ns": t,
                        "end_ns": t,
                        "target": target % 2**32,
                        "start": start,
                        "end": end,
                        "nr_accesses": nr,
                        "age": 0,
                    }
                )
    return rows


def import_damo(files: Sequence[Path], out: Path, *, overwrite: bool = False) -> ImportResult:
    rows: list[dict[str, Any]] = []
    for path in files:
        raw = safeio.read_bytes(path, DAMO_MAX_BYTES, ImportError_, "damo record file")
        text = raw
        if raw[:1] == b"\x78":  # zlib's first byte (deflate, 32 KiB window); JSON never starts so
            text = safeio.decompress_zlib(raw, path, ImportError_)
        text = text.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte order mark before JSON
        if text.lstrip()[:1] in (b"[", b"{"):
            data = safeio.loads_json(text, path, ImportError_)
            rows.extend(_damo_json(path, data))
        else:
            rows.extend(_damo_binary(path, text))
    if not rows:
        raise ImportError_(f"{', '.join(map(str, files))}: no regions found")
    import pandas as pd

    df = pd.DataFrame(rows)
    t0 = int(df["time_ns"].min())
    df["time_ns"] -= t0
    df["end_ns"] -= t0
    snapshots = df.groupby(["target", "time_ns"]).ngroups
    with RecordingWriter(
        out,
        source="damo (tierlab import)",
        parameters={"imported_from": [str(f) for f in files], "format": "damo"},
        overwrite=overwrite,
    ) as w:
        w.append_regions(df[["time_ns", "end_ns", "target", "start", "end", "nr_accesses", "age"]])
    return ImportResult(out, {"regions": len(df), "snapshots": snapshots})
