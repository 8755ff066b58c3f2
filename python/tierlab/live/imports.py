"""Importers into the recording format: ``perf script`` text of memory samples, the McKernel
PEBS dump, and damo (DAMON) records. Every error names the file and the line, word or field.

- ``perf script`` (fields as ``perf script -F comm,pid,tid,cpu,time,period,event,addr,
  data_src,weight,ip,sym [--ns]`` prints them; only time, event and addr are required):
  one sample per line. perf script says nothing about drains: ``drain`` is 0 and the drains
  table stays empty. Times are made relative to the first sample.
- McKernel PEBS dump (``docs/recording.md``): one file per thread of little-endian u64 words:
  mmap triples ``(ts, addr, len)``, ``0xFFFF_FFFF_FFFF_FFFF``, munmap triples, the separator,
  then batches ``[separator, ts, n, addr x n]``. A batch is one interrupt: one drain.
- damo: the JSON record (optionally zlib-compressed) or the older binary format; regions go
  into the optional ``regions`` table, one row per region per snapshot.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from tierlab.recording import RecordingWriter

SEP = 0xFFFF_FFFF_FFFF_FFFF


class ImportError_(ValueError):
    """An input file that does not follow its documented format (message names where)."""


@dataclass
class ImportResult:
    path: Path
    counts: dict[str, int]
    warnings: list[str] = field(default_factory=list)


def _constant_strings(value: str, n: int) -> pa.Array:
    return pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(n, dtype=np.int32)), pa.array([value])
    ).cast(pa.string())


# -- perf script ---------------------------------------------------------------------------

_HEAD = re.compile(
    r"^\s*(?P<comm>.*?)\s+(?P<pid>\d+)(?:/(?P<tid>\d+))?\s+(?:\[(?P<cpu>\d+)\]\s+)?"
    r"(?P<sec>\d+)\.(?P<frac>\d+):\s*(?P<rest>.*)$"
)
_DECODED = re.compile(r"\|OP\b.*\|BLK\s+(?:(?:N/A|Data|Addr)\s?)+")
_HEX = re.compile(r"^(?:0x)?[0-9a-fA-F]+$")


def _time_ns(sec: str, frac: str) -> int:
    return int(sec) * 1_000_000_000 + int((frac + "000000000")[:9])


def parse_perf_script_line(line: str) -> dict[str, Any] | None:
    """One sample from a ``perf script`` line; ``None`` for blank and comment lines. Raises
    ``ValueError`` saying which field is wrong."""
    if not line.strip() or line.lstrip().startswith("#"):
        return None
    m = _HEAD.match(line)
    if not m:
        raise ValueError("expected 'COMM PID/TID [CPU] SECONDS.FRACTION: ...'")
    rest = m.group("rest")
    tokens = rest.split()
    period = 1
    if tokens and tokens[0].isdigit() and len(tokens) > 1 and tokens[1].endswith(":"):
        period = int(tokens.pop(0))
    if not tokens or not tokens[0].endswith(":"):
        raise ValueError("field `event`: expected an event name ending with ':' after the time")
    event = tokens.pop(0)[:-1]
    after_event = rest.split(event + ":", 1)[1]
    decoded = _DECODED.search(after_event)
    weight = ip = data_src = 0
    if decoded:
        before = after_event[: decoded.start()].split()
        after = after_event[decoded.end() :].split()
        if len(before) < 2:
            raise ValueError("fields `addr` and `data_src`: expected two hex numbers before '|OP'")
        addr_tok, src_tok = before[0], before[-1]
        if not _HEX.match(src_tok):
            raise ValueError(f"field `data_src`: {src_tok!r} is not hexadecimal")
        data_src = int(src_tok, 16)
    else:
        before = after_event.split()
        if not before:
            raise ValueError("field `addr`: missing")
        addr_tok, after = before[0], before[1:]
    if not _HEX.match(addr_tok):
        raise ValueError(f"field `addr`: {addr_tok!r} is not hexadecimal")
    # After the address (and data source): [symbol of addr] weight ip [symbol ...].
    for i, tok in enumerate(after):
        if tok.isdigit():
            weight = int(tok)
            if i + 1 < len(after) and _HEX.match(after[i + 1]):
                ip = int(after[i + 1], 16)
            break
    pid = int(m.group("pid"))
    return {
        "time_ns": _time_ns(m.group("sec"), m.group("frac")),
        "tid": int(m.group("tid") or pid),
        "cpu": int(m.group("cpu") or 0),
        "addr": int(addr_tok, 16),
        "ip": ip,
        "weight": weight,
        "data_src": data_src,
        "event": event,
        "period": period,
    }


def import_perf_script(
    files: Sequence[Path], out: Path, *, overwrite: bool = False, chunk_rows: int = 1_000_000
) -> ImportResult:
    rows: list[dict[str, Any]] = []
    for path in files:
        try:
            text = path.open("r", errors="replace")
        except OSError as e:
            raise ImportError_(f"{path}: {e.strerror}") from e
        with text:
            for lineno, line in enumerate(text, 1):
                try:
                    row = parse_perf_script_line(line.rstrip("\n"))
                except (ValueError, OverflowError) as e:
                    raise ImportError_(f"{path}:{lineno}: {e}: {line.strip()[:120]!r}") from e
                if row is not None:
                    rows.append(row)
    if not rows:
        raise ImportError_(f"{', '.join(map(str, files))}: no samples found")
    df = pd.DataFrame(rows)
    t0 = int(df["time_ns"].min())
    df["time_ns"] = df["time_ns"] - t0
    df = df.sort_values("time_ns", kind="stable")
    events = sorted(df["event"].unique().tolist())
    periods = sorted(df["period"].unique().tolist())
    with RecordingWriter(
        out,
        source="perf script (tierlab import)",
        parameters={
            "imported_from": [str(f) for f in files],
            "format": "perf-script",
            "events": events,
            "periods": periods,
            "time_origin_s": t0 / 1e9,
            "drains": "unknown (perf script does not report them): drain is 0, no drain rows",
        },
        overwrite=overwrite,
    ) as w:
        cols = ["time_ns", "tid", "cpu", "addr", "ip", "weight", "data_src", "event"]
        w.append_samples(df[cols].assign(drain=0).reset_index(drop=True))
    return ImportResult(out, {"samples": len(df), "events": len(events)})


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


def parse_mckernel(path: Path, index: int = 0) -> McKernelDump:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ImportError_(f"{path}: {e.strerror}") from e
    if len(raw) % 8:
        raise ImportError_(f"{path}: {len(raw)} bytes is not a whole number of u64 words")
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
        return [tuple(int(x) for x in w[i : i + 3]) for i in range(lo, hi, 3)]  # type: ignore[misc]

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

    def ns(t: int) -> int:
        return round((t - t0) * scale)

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


def _num(value: Any, where: str) -> int:
    if isinstance(value, bool):
        raise ImportError_(f"{where}: expected a number, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.replace(",", "").strip()
        if re.fullmatch(r"-?\d+", text):
            return int(text)
    raise ImportError_(f"{where}: expected a number, got {value!r}")


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
        target = _num(target, f"{where}: field `target_id`") if target is not None else i
        for j, snap in enumerate(record["snapshots"]):
            sw = f"{where}: snapshots[{j}]"
            if not isinstance(snap, dict):
                raise ImportError_(f"{sw}: expected an object")
            for key in ("start_time", "end_time", "regions"):
                if key not in snap:
                    raise ImportError_(f"{sw}: missing field `{key}`")
            t0 = _num(snap["start_time"], f"{sw}: field `start_time`")
            t1 = _num(snap["end_time"], f"{sw}: field `end_time`")
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
                rows.append(
                    {
                        "time_ns": t0,
                        "end_ns": t1,
                        "target": target,
                        "start": _num(reg["start"], f"{rw}: field `start`"),
                        "end": _num(reg["end"], f"{rw}: field `end`"),
                        "nr_accesses": _num(nr, f"{rw}: field `nr_accesses.samples`"),
                        "age": _num(age, f"{rw}: field `age.aggr_intervals`"),
                    }
                )
    return rows


def _damo_binary(path: Path, raw: bytes) -> list[dict[str, Any]]:
    magic = b"damon_recfmt_ver"
    if not raw.startswith(magic):
        raise ImportError_(f"{path}: not damo JSON and no `damon_recfmt_ver` magic")
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
    rows = []
    while pos < len(raw):
        sec, nsec = take("=qq", "a snapshot time")
        (nr_tasks,) = take("=I", "a task count")
        t = sec * 1_000_000_000 + nsec
        for _ in range(nr_tasks):
            (target,) = take("=i" if version == 1 else "=Q", "a target id")
            (nr_regions,) = take("=I", "a region count")
            for _ in range(nr_regions):
                start, end, nr = take("=QQI", "a region")
                rows.append(
                    {
                        "time_ns": t,
                        "end_ns": t,
                        "target": target,
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
        try:
            raw = path.read_bytes()
        except OSError as e:
            raise ImportError_(f"{path}: {e.strerror}") from e
        text = raw
        if raw[:1] not in (b"[", b"{", b" ", b"\n") and not raw.startswith(b"damon_recfmt_ver"):
            try:
                text = zlib.decompress(raw)
            except zlib.error:
                text = raw
        if text.lstrip()[:1] in (b"[", b"{"):
            try:
                data = json.loads(text)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise ImportError_(f"{path}: invalid JSON: {e}") from e
            rows.extend(_damo_json(path, data))
        else:
            rows.extend(_damo_binary(path, text))
    if not rows:
        raise ImportError_(f"{', '.join(map(str, files))}: no regions found")
    df = pd.DataFrame(rows)
    bad = df[df["end"] < df["start"]]
    if len(bad):
        raise ImportError_(
            f"a region ends before it starts: start {int(bad['start'].iloc[0]):#x}, "
            f"end {int(bad['end'].iloc[0]):#x}"
        )
    t0 = int(df["time_ns"].min())
    df["time_ns"] -= t0
    df["end_ns"] = (df["end_ns"] - t0).clip(lower=0)
    snapshots = df.groupby(["target", "time_ns"]).ngroups
    with RecordingWriter(
        out,
        source="damo (tierlab import)",
        parameters={"imported_from": [str(f) for f in files], "format": "damo"},
        overwrite=overwrite,
    ) as w:
        w.append_regions(df[["time_ns", "end_ns", "target", "start", "end", "nr_accesses", "age"]])
    return ImportResult(out, {"regions": len(df), "snapshots": snapshots})
