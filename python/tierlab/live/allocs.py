"""Allocation events of a traced or recorded program: the interposer's raw files into the
recording's ``allocations`` and ``alloc_sites`` tables.

The interposer (``tracer/tierlab_alloc_rt.c``, linked into a ``tierlab trace --cc`` program or
preloaded by ``tierlab record --alloc-sites``) writes ``allocs.bin`` (112-byte records,
:data:`RAW_DTYPE`) and ``allocmaps.txt`` (``/proc/self/maps`` at the start and at exit). Here:

- **times**: in a traced program an event carries its thread's access index; its time is the
  time the trace's own clock (the thread's ``.time`` checkpoints, interpolated exactly as the
  importer interpolates the accesses) gives that index, so the thread's accesses before the
  event are never later than it and those after never earlier. Preloaded, the event's
  CLOCK_MONOTONIC time is shifted to the recording's start;
- **sites**: a site is one distinct call stack (innermost return address first). Each return
  address is put in the file mapped there (``allocmaps.txt``), turned into the file's link
  address, and symbolised with the DWARF line table by ``addr2line`` (binutils) at the call
  instruction (the return address - 1): ``function file:line``; without line info the ELF
  symbol (``function+0xOFF``, :mod:`tierlab.view.symbols`). Symbolising happens while the
  recording is made, when the program's files are certainly there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

RAW_DTYPE = np.dtype(
    [
        ("ns", "<u8"),
        ("index", "<u8"),
        ("addr", "<u8"),
        ("size", "<u8"),
        ("old", "<u8"),
        ("frames", "<u8", (8,)),
        ("tid", "<u4"),
        ("kind", "<u2"),
        ("nframes", "<u2"),
    ]
)
assert RAW_DTYPE.itemsize == 112

#: ``allocations.kind`` codes (tierlab-core's schema, ``ALLOCATION_KINDS``).
KINDS = (
    "malloc",
    "calloc",
    "realloc",
    "free",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "new",
    "new[]",
    "delete",
    "delete[]",
    "mmap",
    "munmap",
    "mremap",
)
FREE_KINDS = frozenset({3, 9, 10, 12})
REALLOC_KINDS = frozenset({2, 13})
NO_INDEX = (1 << 64) - 1


class AllocError(ValueError):
    """A raw allocation file that cannot be read (the message names it)."""


@dataclass
class FileMap:
    lo: int
    hi: int
    offset: int
    path: str


def read_raw(path: Path) -> np.ndarray:
    size = path.stat().st_size
    if size % RAW_DTYPE.itemsize:
        raise AllocError(
            f"{path}: {size} bytes, not a whole number of {RAW_DTYPE.itemsize}-byte records"
        )
    return np.fromfile(path, dtype=RAW_DTYPE)


def read_maps(path: Path) -> list[FileMap]:
    """The file mappings of every snapshot in ``allocmaps.txt`` (the exit snapshot's first:
    they are looked up in order)."""
    snaps: list[list[FileMap]] = []
    cur: list[FileMap] | None = None
    if not path.is_file():
        return []
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("snapshot "):
                cur = []
                snaps.append(cur)
                continue
            if line.startswith("end"):
                cur = None
                continue
            if cur is None:
                continue
            parts = line.split(None, 5)
            if len(parts) < 6 or "-" not in parts[0] or not parts[5].startswith("/"):
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-", 1))
            cur.append(FileMap(lo, hi, int(parts[2], 16), parts[5].strip()))
    out: list[FileMap] = []
    for s in reversed(snaps):
        out += s
    return out


def thread_clock(time_file: Path) -> tuple[np.ndarray, np.ndarray] | None:
    if not time_file.is_file():
        return None
    cp = np.fromfile(time_file, dtype="<u8")
    if cp.size < 2:
        return None
    cp = cp[: cp.size // 2 * 2].reshape(-1, 2)
    return cp[:, 0].copy(), cp[:, 1].copy()


def clock_at(idx: np.ndarray, ns: np.ndarray, i: int) -> int:
    """Time of access index ``i`` from checkpoints: the importer's interpolation (linear
    between checkpoints, floored; before the first, the first; after the last, the last)."""
    k = int(np.searchsorted(idx, np.uint64(i), side="right")) - 1
    if k < 0:
        return int(ns[0])
    i0, t0 = int(idx[k]), int(ns[k])
    if k + 1 >= idx.size:
        return t0
    i1, t1 = int(idx[k + 1]), int(ns[k + 1])
    return t0 + (t1 - t0) * (i - i0) // (i1 - i0)


def event_times(raw: np.ndarray, trace_dir: Path | None, origin_ns: int | None) -> np.ndarray:
    """Recording times of the events: by access index on the thread's trace clock when the
    event has one, else its own time (shifted by ``origin_ns`` when given)."""
    out = raw["ns"].astype(np.uint64).copy()
    if origin_ns is not None:
        out = np.where(out >= np.uint64(origin_ns), out - np.uint64(origin_ns), np.uint64(0))
    if trace_dir is None:
        return out
    clocks: dict[int, tuple[np.ndarray, np.ndarray] | None] = {}
    for j in range(raw.size):
        i = int(raw["index"][j])
        if i == NO_INDEX:
            continue
        tid = int(raw["tid"][j])
        if tid not in clocks:
            clocks[tid] = thread_clock(trace_dir / f"t{tid}.time")
        c = clocks[tid]
        if c is not None:
            out[j] = clock_at(c[0], c[1], i)
    return out


def _addr2line(path: str, vaddrs: list[int]) -> list[tuple[str, str]] | None:
    tool = shutil.which("addr2line")
    if tool is None or not vaddrs:
        return None
    try:
        res = subprocess.run(
            [tool, "-f", "-C", "-e", path, *(hex(v) for v in vaddrs)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = res.stdout.splitlines()
    if res.returncode != 0 or len(lines) != 2 * len(vaddrs):
        return None
    return [
        (lines[2 * k], lines[2 * k + 1].split(" (discriminator")[0]) for k in range(len(vaddrs))
    ]


def symbolise(addrs: list[int], maps: list[FileMap]) -> dict[int, tuple[str, str]]:
    """Return address -> (``PATH+0xOFF`` of the call's file, ``function file:line``)."""
    from tierlab.view import symbols

    out: dict[int, tuple[str, str]] = {a: ("?", "?") for a in addrs}
    by_file: dict[str, list[tuple[int, int]]] = {}
    for a in addrs:
        for m in maps:
            if m.lo <= a < m.hi:
                off = a - m.lo + m.offset
                by_file.setdefault(m.path, []).append((a, off))
                out[a] = (f"{m.path}+{off:#x}", "?")
                break
    for path, items in by_file.items():
        try:
            elf = symbols.read_elf(path)
        except (OSError, symbols.ElfError):
            continue
        vaddrs = []
        for _a, off in items:
            v = None
            for s in elf.segments:
                if s.offset <= off < s.offset + max(s.filesz, 1):
                    v = off - s.offset + s.vaddr
                    break
            vaddrs.append(v if v is not None else off)
        lines = _addr2line(path, [max(v - 1, 0) for v in vaddrs])
        names = symbols.demangle(list(elf.names))
        idx = elf.lookup(np.array([max(v - 1, 0) for v in vaddrs], dtype=np.uint64))
        for k, (a, _off) in enumerate(items):
            obj = out[a][0]
            sym = "?"
            if idx[k] >= 0:
                raw_name = elf.names[int(idx[k])]
                sym = names.get(raw_name, raw_name)
                sym_off = vaddrs[k] - int(elf.starts[int(idx[k])])
                sym_text = f"{sym}+{sym_off:#x}"
            else:
                sym_text = f"{Path(path).name}+{vaddrs[k]:#x}"
            loc = sym_text
            if lines is not None:
                func, fl = lines[k]
                if not fl.startswith("??"):
                    loc = f"{func if func != '??' else sym} {fl}"
            out[a] = (obj, loc)
    return out


def tables(
    raw: np.ndarray,
    times: np.ndarray,
    maps: list[FileMap],
    rename: dict[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``allocations`` and ``alloc_sites`` columns of raw events."""
    n = raw.size
    keys: dict[tuple[int, ...], int] = {}
    site = np.zeros(n, dtype=np.uint32)
    for j in range(n):
        k = int(raw["nframes"][j])
        t = tuple(int(x) for x in raw["frames"][j][: max(1, min(k, 8))])
        site[j] = keys.setdefault(t, len(keys))
    stacks = sorted(keys, key=keys.__getitem__)
    resolved = symbolise(sorted({a for s in stacks for a in s}), maps)

    def renamed(text: str) -> str:
        for old, new in (rename or {}).items():
            if text.startswith(old):
                return new + text[len(old) :]
        return text

    alloc_cols = {
        "time_ns": times.astype(np.uint64),
        "tid": raw["tid"].astype(np.uint32),
        "seq": np.arange(n, dtype=np.uint64),
        "index": raw["index"].astype(np.uint64),
        "kind": raw["kind"].astype(np.uint8),
        "addr": raw["addr"].astype(np.uint64),
        "size": raw["size"].astype(np.uint64),
        "old_addr": raw["old"].astype(np.uint64),
        "site": site,
    }
    site_cols = {
        "site": np.arange(len(stacks), dtype=np.uint32),
        "frames": [" ".join(f"{a:#x}" for a in s) for s in stacks],
        "objects": ["\n".join(renamed(resolved[a][0]) for a in s) for s in stacks],
        "locations": ["\n".join(resolved[a][1] for a in s) for s in stacks],
    }
    return alloc_cols, site_cols


def add_tables(rec: Path, columns: dict[str, dict[str, Any]]) -> None:
    """Write ``columns`` (table -> columns) as one part each into the recording at ``rec``
    and count them in its ``meta.json``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tierlab.recording import SCHEMAS

    meta_path = rec / "meta.json"
    meta = json.loads(meta_path.read_text())
    for name, cols in columns.items():
        schema = SCHEMAS[name]
        t = pa.table({f.name: pa.array(cols[f.name], type=f.type) for f in schema}, schema=schema)
        d = rec / name
        d.mkdir(exist_ok=True)
        tmp = d / ".part-00000.parquet.tmp"
        pq.write_table(t, tmp, compression="zstd")
        os.replace(tmp, d / "part-00000.parquet")
        meta.setdefault("tables", {})[name] = t.num_rows
    tmp_meta = rec / ".meta.json.tmp"
    tmp_meta.write_text(json.dumps(meta, indent=2) + "\n")
    os.replace(tmp_meta, meta_path)


def import_allocs(
    raw_dir: Path,
    rec: Path,
    *,
    trace_dir: Path | None,
    origin_ns: int | None = None,
    rename: dict[str, str] | None = None,
) -> dict[str, int]:
    """``raw_dir``'s allocs.bin and allocmaps.txt into the recording at ``rec``; counts."""
    path = raw_dir / "allocs.bin"
    raw = read_raw(path)
    times = event_times(raw, trace_dir, origin_ns)
    alloc_cols, site_cols = tables(raw, times, read_maps(raw_dir / "allocmaps.txt"), rename)
    add_tables(rec, {"allocations": alloc_cols, "alloc_sites": site_cols})
    return {"allocation_events": int(raw.size), "allocation_sites": len(site_cols["site"])}
