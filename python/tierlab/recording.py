"""The tierlab recording format, version 1.

A recording is a directory::

    REC/
      meta.json                  identity, version, provenance, row counts
      accesses/part-00000.parquet ...   full access streams
      samples/part-00000.parquet  ...   telemetry samples (PEBS records, sampled faults, ...)
      mappings/part-00000.parquet ...   mapping events (map / unmap)
      drains/part-00000.parquet   ...   buffer drains (PEBS interrupts, wake-ups)

Every table is a plain set of Parquet parts, so pandas (``pd.read_parquet("REC/accesses")``),
polars (``pl.read_parquet("REC/accesses/*.parquet")``) and DuckDB
(``read_parquet('REC/accesses/*.parquet')``) read it without tierlab. The full specification
is in ``docs/formats.md``.

Crash safety: :class:`RecordingWriter` writes every part to a hidden temporary file and
renames it into place, then rewrites ``meta.json`` the same way, so a writer killed at any
moment leaves a readable recording holding every part flushed so far.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tierlab.api import native

# The format is declared once, in tierlab-core (`crates/tierlab-core/src/schema.rs`): its
# tables, columns, types, codes and meta.json fields come from there through the binding.
_SPEC: dict[str, Any] = native().recording_schema()

FORMAT_NAME: str = _SPEC["format"]
FORMAT_VERSION: int = _SPEC["version"]
META_FILE: str = _SPEC["meta_file"]

#: Column schemas of every table (the core tables, then the optional ones), in column order.
SCHEMAS: dict[str, pa.Schema] = {
    t["name"]: pa.schema([(c["name"], pa.type_for_alias(c["type"])) for c in t["columns"]])
    for t in _SPEC["tables"]
}
#: The core tables: every recording has them (possibly empty).
TABLES: tuple[str, ...] = tuple(t["name"] for t in _SPEC["tables"] if not t["optional"])
#: Optional tables: present only in recordings whose source produces them (``regions``:
#: DAMON-style region snapshots from ``tierlab import damo``).
OPTIONAL_TABLES: tuple[str, ...] = tuple(t["name"] for t in _SPEC["tables"] if t["optional"])
ALL_TABLES: tuple[str, ...] = TABLES + OPTIONAL_TABLES

#: Coded columns: (table, column) -> {value: name}; any other value is refused on append.
CODES: dict[tuple[str, str], dict[int | str, str]] = {
    (ct["table"], ct["column"]): {c["value"]: c["name"] for c in ct["codes"]}
    for ct in _SPEC["codes"]
}
_KINDS = {name: value for value, name in CODES[("accesses", "kind")].items()}
#: Codes of the ``kind`` column of ``accesses``.
KIND_LOAD: int = int(_KINDS["load"])
KIND_STORE: int = int(_KINDS["store"])
#: Values of the ``event`` column of ``mappings``.
MAPPING_EVENTS: tuple[str, ...] = tuple(str(v) for v in CODES[("mappings", "event")])
#: ``meta.json`` fields the writer maintains (``update_meta`` cannot set them).
META_MANAGED: frozenset[str] = frozenset(f["name"] for f in _SPEC["meta_fields"] if f["managed"])

#: Mappings are widened to base pages for replay (4 KiB, tierlab-core's ``PAGE_SIZE``).
_PAGE: int = native().PAGE_SIZE


class RecordingError(ValueError):
    """A recording is missing, malformed, or of an unsupported version."""


def _part_name(index: int) -> str:
    return f"part-{index:05d}.parquet"


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _to_table(table: str, data: Any = None, **columns: Any) -> pa.Table:
    """Convert what a caller appends (a DataFrame, a mapping of columns, a pyarrow Table, or
    keyword columns) into a table of exactly the format's schema."""
    schema = SCHEMAS[table]
    if data is not None and columns:
        raise TypeError(f"append_{table}: pass either a table or keyword columns, not both")
    if data is None:
        data = columns
    if isinstance(data, pa.Table):
        src = {name: data.column(name) for name in data.column_names}
    elif isinstance(data, pd.DataFrame):
        src = {name: data[name].to_numpy() for name in data.columns}
    elif isinstance(data, Mapping):
        src = dict(data)
    else:
        raise TypeError(
            f"append_{table}: expected a DataFrame, a pyarrow Table or a mapping of columns, "
            f"got {type(data).__name__}"
        )
    missing = [f.name for f in schema if f.name not in src]
    if missing:
        raise RecordingError(f"append_{table}: missing column(s) {', '.join(missing)}")
    extra = [name for name in src if name not in schema.names]
    if extra:
        raise RecordingError(
            f"append_{table}: unknown column(s) {', '.join(extra)} "
            f"(columns are {', '.join(schema.names)})"
        )
    arrays = []
    for f in schema:
        value = src[f.name]
        try:
            if isinstance(value, pa.ChunkedArray | pa.Array):
                arr = value.cast(f.type)
            else:
                if f.type != pa.string():
                    value = _as_unsigned(np.asarray(value))
                arr = pa.array(value, type=f.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, TypeError, OverflowError) as e:
            raise RecordingError(f"append_{table}: column `{f.name}` ({f.type}): {e}") from e
        arrays.append(arr)
    lengths = {len(a) for a in arrays}
    if len(lengths) > 1:
        raise RecordingError(f"append_{table}: columns have different lengths {sorted(lengths)}")
    for i, f in enumerate(schema):
        codes = CODES.get((table, f.name))
        if codes is None or not len(arrays[i]):
            continue
        bad = sorted(set(pc.unique(arrays[i]).to_pylist()) - set(codes))
        if bad:
            allowed = " or ".join(
                f"{v} ({name})" if isinstance(v, int) else repr(v) for v, name in codes.items()
            )
            raise RecordingError(f"append_{table}: column `{f.name}` must be {allowed}, got {bad}")
    return pa.Table.from_arrays(arrays, schema=schema)


def _as_unsigned(values: np.ndarray) -> np.ndarray:
    """Integers (or integral floats, as ``np.zeros`` gives) checked to be non-negative."""
    if values.dtype.kind == "f":
        if not np.isfinite(values).all() or (values != np.floor(values)).any():
            raise ValueError("values must be integers")
        values = values.astype(np.int64) if (values < 2**63).all() else values.astype(np.uint64)
    elif values.dtype.kind not in "iub":
        raise ValueError(f"values must be integers, got {values.dtype}")
    if values.dtype.kind == "i" and (values < 0).any():
        raise ValueError("values must not be negative")
    return values


class RecordingWriter:
    """Write a recording (format v1) incrementally.

    ``append_*`` buffer rows; :meth:`flush` writes each non-empty buffer as a new Parquet part
    and rewrites ``meta.json``; a buffer also flushes by itself once it holds ``flush_rows``
    rows. :meth:`close` flushes, writes an empty part for every table that has none (so every
    table is readable by every Parquet reader) and marks the recording complete. Usable as a
    context manager.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        source: str = "python",
        parameters: Mapping[str, Any] | None = None,
        machine: Mapping[str, Any] | None = None,
        overwrite: bool = False,
        flush_rows: int = 4_000_000,
    ) -> None:
        self.path = Path(path)
        if self.path.exists() and (not self.path.is_dir() or any(self.path.iterdir())):
            if not overwrite:
                raise RecordingError(f"{self.path}: already exists (pass overwrite=True)")
            if self.path.is_dir():
                shutil.rmtree(self.path)
            else:
                self.path.unlink()
        self.path.mkdir(parents=True, exist_ok=True)
        for table in TABLES:
            (self.path / table).mkdir(exist_ok=True)
        self.flush_rows = flush_rows
        self._meta: dict[str, Any] = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "source": source,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "complete": False,
            "parameters": dict(parameters or {}),
            "machine": dict(machine or {}),
            "tables": {table: 0 for table in TABLES},
        }
        self._parts = {table: 0 for table in ALL_TABLES}
        self._buffers: dict[str, list[pa.Table]] = {table: [] for table in ALL_TABLES}
        self._buffered = {table: 0 for table in ALL_TABLES}
        self._closed = False
        self._write_meta()

    # -- appending -------------------------------------------------------------------------
    def _append(self, table: str, data: Any, columns: dict[str, Any]) -> None:
        if self._closed:
            raise RecordingError(f"{self.path}: recording is closed")
        t = _to_table(table, data, **columns)
        if t.num_rows == 0:
            return
        self._buffers[table].append(t)
        self._buffered[table] += t.num_rows
        if self._buffered[table] >= self.flush_rows:
            self._flush_table(table)
            self._write_meta()

    def append_accesses(self, data: Any = None, **columns: Any) -> None:
        """Append accesses: the columns of ``SCHEMAS["accesses"]`` (``kind``: 0 load, 1 store)."""
        self._append("accesses", data, columns)

    def append_samples(self, data: Any = None, **columns: Any) -> None:
        """Append samples: the columns of ``SCHEMAS["samples"]``."""
        self._append("samples", data, columns)

    def append_mappings(self, data: Any = None, **columns: Any) -> None:
        """Append mapping events: the columns of ``SCHEMAS["mappings"]`` (``event``: map or
        unmap)."""
        self._append("mappings", data, columns)

    def append_drains(self, data: Any = None, **columns: Any) -> None:
        """Append drains: the columns of ``SCHEMAS["drains"]``."""
        self._append("drains", data, columns)

    def append_regions(self, data: Any = None, **columns: Any) -> None:
        """Append region snapshots (optional table): the columns of ``SCHEMAS["regions"]``."""
        self._append("regions", data, columns)

    def update_meta(self, **fields: Any) -> None:
        """Set top-level fields of ``meta.json`` (``parameters``, ``machine``, or fields of the
        writer's own such as ``accounting``); written at the next :meth:`flush` or
        :meth:`close`. The format's own fields cannot be set."""
        bad = sorted(META_MANAGED & set(fields))
        if bad:
            raise RecordingError(f"update_meta: {', '.join(bad)} cannot be set")
        self._meta.update(fields)

    # -- writing ---------------------------------------------------------------------------
    def _write_part(self, table: str, data: pa.Table) -> None:
        (self.path / table).mkdir(exist_ok=True)
        final = self.path / table / _part_name(self._parts[table])
        # Hidden name: pyarrow/pandas skip dot-files and the `*.parquet` glob does not match.
        tmp = final.with_name(f".{final.name}.tmp")
        pq.write_table(data, tmp, compression="zstd")
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, final)
        self._parts[table] += 1
        self._meta["tables"][table] = self._meta["tables"].get(table, 0) + data.num_rows

    def _flush_table(self, table: str) -> None:
        if not self._buffers[table]:
            return
        data = pa.concat_tables(self._buffers[table])
        self._buffers[table] = []
        self._buffered[table] = 0
        self._write_part(table, data)

    def _write_meta(self) -> None:
        text = json.dumps(self._meta, indent=2, sort_keys=False) + "\n"
        _atomic_write_bytes(self.path / META_FILE, text.encode())

    def flush(self) -> None:
        """Write every buffered row as new parts, then rewrite ``meta.json``."""
        if self._closed:
            return
        for table in ALL_TABLES:
            self._flush_table(table)
        self._write_meta()

    def close(self) -> None:
        """Flush, give every empty table one empty part, and mark the recording complete."""
        if self._closed:
            return
        for table in ALL_TABLES:
            self._flush_table(table)
            if self._parts[table] == 0 and table in TABLES:
                self._write_part(table, SCHEMAS[table].empty_table())
        self._meta["complete"] = True
        self._write_meta()
        self._closed = True

    def __enter__(self) -> RecordingWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Recording:
    """A recording opened for reading. Use :meth:`Recording.open`."""

    path: Path
    meta: dict[str, Any]
    _cache: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Recording:
        """Open and validate a recording directory (format and version from ``meta.json``;
        the columns of every part are checked when a table is read)."""
        p = Path(path)
        if not p.exists():
            raise RecordingError(f"{p}: no such recording (directory not found)")
        if not p.is_dir():
            raise RecordingError(f"{p}: a recording is a directory holding {META_FILE}")
        meta_path = p / META_FILE
        if not meta_path.is_file():
            raise RecordingError(f"{meta_path}: missing; {p} is not a tierlab recording")
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise RecordingError(f"{meta_path}: unreadable: {e}") from e
        if not isinstance(meta, dict):
            raise RecordingError(f"{meta_path}: expected a JSON object")
        if meta.get("format") != FORMAT_NAME:
            raise RecordingError(
                f"{meta_path}: field `format` is {meta.get('format')!r}, expected {FORMAT_NAME!r}"
            )
        version = meta.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise RecordingError(f"{meta_path}: field `version` must be a positive integer")
        if version > FORMAT_VERSION:
            raise RecordingError(
                f"{meta_path}: recording format version {version} is newer than this tierlab "
                f"reads (up to {FORMAT_VERSION}); upgrade tierlab"
            )
        return cls(path=p, meta=meta)

    def parts(self, table: str) -> list[Path]:
        """The Parquet parts of ``table``, in order."""
        if table not in SCHEMAS:
            raise KeyError(f"unknown table {table!r} (tables: {', '.join(ALL_TABLES)})")
        d = self.path / table
        if not d.is_dir():
            return []
        return sorted(f for f in d.glob("*.parquet") if not f.name.startswith("."))

    def table(self, table: str) -> pa.Table:
        """Read ``table`` as a pyarrow Table with the format's schema (columns a newer writer
        added are dropped; a missing column or an incompatible type is an error naming the
        part and the column)."""
        schema = SCHEMAS[table]
        pieces = []
        for part in self.parts(table):
            try:
                have = pq.read_schema(part)
            except (OSError, pa.ArrowInvalid) as e:
                raise RecordingError(f"{part}: not a readable Parquet file: {e}") from e
            missing = [name for name in schema.names if name not in have.names]
            if missing:
                raise RecordingError(
                    f"{part}: missing column `{missing[0]}` "
                    f"(table {table} needs {', '.join(schema.names)})"
                )
            for f in schema:
                got = have.field(f.name).type
                if not _castable(got, f.type):
                    raise RecordingError(
                        f"{part}: column `{f.name}` has type {got}, expected {f.type}"
                    )
            t = pq.read_table(part, columns=schema.names)
            try:
                t = t.cast(schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise RecordingError(f"{part}: values do not fit the format's types: {e}") from e
            pieces.append(t)
        if not pieces:
            return schema.empty_table()
        return pa.concat_tables(pieces)

    def _frame(self, table: str) -> pd.DataFrame:
        if table not in self._cache:
            self._cache[table] = self.table(table).to_pandas()
        return self._cache[table]

    def accesses(self) -> pd.DataFrame:
        """All accesses (the columns of ``SCHEMAS["accesses"]``)."""
        return self._frame("accesses")

    def samples(self) -> pd.DataFrame:
        """All samples (the columns of ``SCHEMAS["samples"]``)."""
        return self._frame("samples")

    def mappings(self) -> pd.DataFrame:
        """All mapping events (the columns of ``SCHEMAS["mappings"]``)."""
        return self._frame("mappings")

    def drains(self) -> pd.DataFrame:
        """All drains (the columns of ``SCHEMAS["drains"]``)."""
        return self._frame("drains")

    def regions(self) -> pd.DataFrame:
        """Region snapshots, an optional table (the columns of ``SCHEMAS["regions"]``); empty
        when the recording has none."""
        return self._frame("regions")


def _castable(src: pa.DataType, dst: pa.DataType) -> bool:
    if src == dst:
        return True
    if pa.types.is_integer(dst):
        return pa.types.is_integer(src)
    if pa.types.is_string(dst):
        return pa.types.is_string(src) or pa.types.is_large_string(src)
    return False


def _mapping_ranges(mappings: pd.DataFrame) -> list[tuple[int, int, str]]:
    """Every range ever mapped, page-aligned outwards, overlapping ranges merged (the name of
    the earliest mapping wins)."""
    maps = mappings[mappings["event"] == "map"].sort_values("time_ns", kind="stable")
    ranges: list[tuple[int, int, str]] = []
    for start, length, name in zip(maps["start"], maps["length"], maps["name"], strict=True):
        lo = int(start) // _PAGE * _PAGE
        hi = -(-(int(start) + int(length)) // _PAGE) * _PAGE
        if hi > lo:
            ranges.append((lo, hi, str(name)))
    ranges.sort(key=lambda r: r[0])
    merged: list[list[Any]] = []
    for lo, hi, name in ranges:
        if merged and lo < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi, name])
    return [(lo, hi - lo, name) for lo, hi, name in merged]


def to_replay(rec: Recording | str | os.PathLike[str]) -> dict[str, Any]:
    """The ``replay`` argument of the native ``run`` for a recording: accesses in time order
    (stable, so equal times keep their recorded order) as little-endian byte arrays, and the
    ranges ever mapped."""
    if not isinstance(rec, Recording):
        rec = Recording.open(rec)
    acc = rec.table("accesses")
    order = pc.sort_indices(acc, sort_keys=[("time_ns", "ascending")])
    acc = acc.take(order)

    def raw(name: str, dtype: str) -> bytes:
        return np.ascontiguousarray(acc.column(name).to_numpy(), dtype=dtype).tobytes()

    return {
        "addr": raw("addr", "<u8"),
        "tid": raw("tid", "<u4"),
        "kind": raw("kind", "u1"),
        "mappings": _mapping_ranges(rec.mappings()),
    }


def write_recording(
    path: str | os.PathLike[str],
    *,
    accesses: Any = None,
    samples: Any = None,
    mappings: Any = None,
    drains: Any = None,
    overwrite: bool = False,
    **meta: Any,
) -> Path:
    """Write a whole recording at once (a convenience over :class:`RecordingWriter`)."""
    with RecordingWriter(path, overwrite=overwrite, **meta) as w:
        for name, data in (
            ("accesses", accesses),
            ("samples", samples),
            ("mappings", mappings),
            ("drains", drains),
        ):
            if data is not None:
                w._append(name, data, {})
    return Path(path)


__all__: Sequence[str] = [
    "ALL_TABLES",
    "CODES",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "KIND_LOAD",
    "KIND_STORE",
    "MAPPING_EVENTS",
    "META_FILE",
    "OPTIONAL_TABLES",
    "SCHEMAS",
    "TABLES",
    "Recording",
    "RecordingError",
    "RecordingWriter",
    "to_replay",
    "write_recording",
]
