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

import contextlib
import json
import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tierlab import outdir, safeio
from tierlab.api import native

# numpy, pandas and pyarrow are imported where a table is read or written, not with the
# module: opening a recording's meta.json, checking an output path and the commands' error
# paths (`tierlab view MISSING`, `tierlab import ... -o EXISTING`) stay free of their ~0.5 s
# import.
if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

# The format is declared once, in tierlab-core (`crates/tierlab-core/src/schema.rs`): its
# tables, columns, types, codes and meta.json fields come from there through the binding.
_SPEC: dict[str, Any] = native().recording_schema()

FORMAT_NAME: str = _SPEC["format"]
FORMAT_VERSION: int = _SPEC["version"]
META_FILE: str = _SPEC["meta_file"]


@cache
def _schemas() -> dict[str, pa.Schema]:
    import pyarrow as pa

    return {
        t["name"]: pa.schema([(c["name"], pa.type_for_alias(c["type"])) for c in t["columns"]])
        for t in _SPEC["tables"]
    }


if TYPE_CHECKING:
    #: Column schemas of every table (the core tables, then the optional ones), in column
    #: order (made on first use, by the module's ``__getattr__``: it needs pyarrow).
    SCHEMAS: dict[str, pa.Schema]


def __getattr__(name: str) -> Any:
    if name == "SCHEMAS":
        return _schemas()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


def check_overwritable(path: str | os.PathLike[str], overwrite: bool) -> bool:
    """Whether writing a recording at ``path`` replaces an existing one. Raises
    :class:`RecordingError` when ``path`` holds something that must not be replaced:
    anything without ``overwrite``, and anything but a tierlab recording with it."""
    p = Path(path)
    if not os.path.lexists(p) or outdir.is_empty_dir(p):
        return False
    if not overwrite:
        raise RecordingError(f"{p}: already exists (pass overwrite=True, or --force)")
    return outdir.check_replaceable(p, ("recording",), RecordingError)


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
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = _schemas()[table]
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
                    value = _as_unsigned(_integer_array(value))
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
    t = pa.Table.from_arrays(arrays, schema=schema)
    problem = _value_problem(table, t)
    if problem is not None:
        raise RecordingError(f"append_{table}: {problem}")
    return t


def _integer_array(value: Any) -> np.ndarray:
    """``value`` as an array; a sequence of Python integers stays integers (numpy makes a list
    that mixes small integers with ones of 2^63 or more float64, rounding them, or object)."""
    import numpy as np

    arr = np.asarray(value)
    if isinstance(value, np.ndarray) or arr.dtype.kind not in "fO" or arr.ndim != 1:
        return arr
    seq = list(value)
    if not seq or not all(
        isinstance(x, int | np.integer) and not isinstance(x, bool | np.bool_) for x in seq
    ):
        return arr
    ints = [int(x) for x in seq]
    if min(ints) < 0:
        raise ValueError("values must not be negative")
    if max(ints) >= 1 << 64:
        raise ValueError(f"{max(ints)} does not fit in 64 bits")
    return np.array(ints, dtype=np.uint64)


def _as_unsigned(values: np.ndarray) -> np.ndarray:
    """Integers (or integral floats, as ``np.zeros`` gives) checked to be non-negative.

    A float is taken only when it is exactly a non-negative integer below 2^64 (then the
    conversion is exact); NaN, infinities, negative, fractional and too large floats are
    refused with the first such value and its row, never wrapped or clamped. (Above 2^53 a
    float64 cannot hold every integer: one there is taken as the integer it exactly is.)"""
    import numpy as np

    if values.dtype.kind == "f":
        flat = values.reshape(-1)
        with np.errstate(invalid="ignore"):
            finite = np.isfinite(flat)
            checks = (
                (~finite, "is not a finite number"),
                (finite & (flat < 0), "is negative"),
                (finite & (flat != np.floor(flat)), "is not an integer"),
                (finite & (flat >= 2.0**64), "does not fit in 64 bits (2^64 or more)"),
            )
        for bad, what in checks:
            if bad.any():
                row = int(np.argmax(bad))
                raise ValueError(
                    f"values must be integers from 0 to 2^64-1: {float(flat[row])!r} at row "
                    f"{row} {what}"
                )
        values = values.astype(np.uint64)
    elif values.dtype.kind not in "iub":
        raise ValueError(f"values must be integers, got {values.dtype}")
    if values.dtype.kind == "i" and (values < 0).any():
        raise ValueError("values must not be negative")
    return values


def _json_value(value: Any, where: str) -> Any:
    """``value`` (a field of ``meta.json``) as plain JSON data: numpy scalars and arrays become
    Python numbers and lists, tuples lists; anything JSON cannot hold is refused, naming the
    field (``where``)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):  # np.str_ is a str subclass
        return str(value)
    if isinstance(value, int):  # int subclasses (IntEnum, ...) as plain integers
        return int(value)
    if isinstance(value, float):  # np.float64 is a float subclass
        return float(value)
    tolist = getattr(value, "tolist", None)
    module = type(value).__module__.split(".")[0]
    if module == "numpy" and callable(tolist):  # numpy scalars and arrays
        return _json_value(tolist(), where)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = _json_value(k, f"{where} (a key)")
            if isinstance(key, list | dict):
                raise TypeError(
                    f"{where}: key {_short_repr(k)} is {type(k).__name__}; meta.json keys are "
                    "strings (numbers, booleans and None are written as strings)"
                )
            if not isinstance(key, str):  # as json.dumps writes them
                key = json.dumps(key)
            out[key] = _json_value(v, f"{where}.{key}")
        return out
    if isinstance(value, list | tuple):
        return [_json_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise TypeError(
        f"{where}: cannot store {type(value).__name__} {_short_repr(value)} in meta.json "
        "(use strings, numbers, booleans, None, lists and dicts)"
    )


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _meta_json(meta: dict[str, Any]) -> str:
    """The text of ``meta.json``."""
    return json.dumps(meta, indent=2, sort_keys=False) + "\n"


def _meta_text(meta: dict[str, Any], where: str) -> str:
    """``meta`` checked as the reader checks it (:func:`check_meta`, its size and depth), as
    the text of ``meta.json``."""
    check_meta(meta, where)
    if safeio.json_depth(meta) > safeio.MAX_JSON_DEPTH:
        raise RecordingError(
            f"{where}: nested more than {safeio.MAX_JSON_DEPTH} levels deep (readers refuse it)"
        )
    text = _meta_json(meta)
    if len(text.encode()) > safeio.MAX_META_BYTES:
        raise RecordingError(
            f"{where}: {META_FILE} would be larger than {safeio.MAX_META_BYTES} bytes "
            "(readers refuse it)"
        )
    return text


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
        # meta.json is made and checked (as a reader would) before anything is created, so
        # bad arguments leave nothing behind.
        for name, value in (("parameters", parameters), ("machine", machine)):
            if value is not None and not isinstance(value, Mapping):
                raise TypeError(
                    f"RecordingWriter: `{name}` must be a mapping (dict), "
                    f"got {type(value).__name__}"
                )
        self._meta: dict[str, Any] = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "source": source,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "complete": False,
            "parameters": _json_value(dict(parameters or {}), "parameters"),
            "machine": _json_value(dict(machine or {}), "machine"),
            "tables": {table: 0 for table in TABLES},
        }
        _meta_text(self._meta, "RecordingWriter")
        #: Where the parts are written: the recording itself, or (when it replaces an
        #: existing recording) a hidden directory beside it, swapped in by :meth:`close`.
        self._dir = self.path
        if check_overwritable(self.path, overwrite):
            self._dir = outdir.staging_dir(self.path)
        existed = os.path.lexists(self._dir)
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
            for table in TABLES:
                (self._dir / table).mkdir(exist_ok=True)
            self.flush_rows = flush_rows
            self._parts = {table: 0 for table in ALL_TABLES}
            self._buffers: dict[str, list[pa.Table]] = {table: [] for table in ALL_TABLES}
            self._buffered = {table: 0 for table in ALL_TABLES}
            self._closed = False
            self._write_meta()
        except BaseException:
            self._undo_create(existed)
            raise

    def _undo_create(self, existed: bool) -> None:
        """Remove what a failed constructor made: a staging directory, or the recording's
        directory (or, when it was an empty directory already, what was made in it)."""
        if self._dir != self.path or not existed:
            shutil.rmtree(self._dir, ignore_errors=True)
            return
        for table in TABLES:
            with contextlib.suppress(OSError):
                (self._dir / table).rmdir()
        for name in (META_FILE, f".{META_FILE}.tmp"):
            with contextlib.suppress(OSError):
                (self._dir / name).unlink()

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
        converted = {k: _json_value(v, f"update_meta: {k}") for k, v in fields.items()}
        meta = {**self._meta, **converted}
        # Checked as the reader will check meta.json, so a bad value is refused here rather
        # than making a recording that does not open.
        _meta_text(meta, "update_meta")
        self._meta = meta

    def update_meta_or_warn(self, **fields: Any) -> bool:
        """:meth:`update_meta` for a recorder that must go on: a value the format refuses is
        left out with a warning on stderr (``meta.json`` keeps the earlier value, and the
        recording stays readable); ``False`` then. Recording never stops over its metadata."""
        try:
            self.update_meta(**fields)
        except RecordingError as e:
            print(f"tierlab: warning: {e}; meta.json keeps the earlier value", file=sys.stderr)
            return False
        return True

    # -- writing ---------------------------------------------------------------------------
    def _write_part(self, table: str, data: pa.Table) -> None:
        import pyarrow.parquet as pq

        (self._dir / table).mkdir(exist_ok=True)
        final = self._dir / table / _part_name(self._parts[table])
        # Hidden name: pyarrow/pandas skip dot-files and the `*.parquet` glob does not match.
        tmp = final.with_name(f".{final.name}.tmp")
        pq.write_table(data, tmp, compression="zstd")
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, final)
        self._parts[table] += 1
        self._meta["tables"][table] = self._meta["tables"].get(table, 0) + data.num_rows

    def _flush_table(self, table: str) -> None:
        import pyarrow as pa

        if not self._buffers[table]:
            return
        data = pa.concat_tables(self._buffers[table])
        self._buffers[table] = []
        self._buffered[table] = 0
        self._write_part(table, data)

    def _write_meta(self) -> None:
        _atomic_write_bytes(self._dir / META_FILE, _meta_json(self._meta).encode())

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
                self._write_part(table, _schemas()[table].empty_table())
        self._meta["complete"] = True
        self._write_meta()
        self._closed = True
        if self._dir != self.path:
            outdir.install(self._dir, self.path)
            self._dir = self.path

    def abandon(self) -> None:
        """Stop writing without completing: a recording written in place keeps what was
        flushed (``complete: false``); one that was to replace an existing recording is
        deleted and the old one stays."""
        if self._closed:
            return
        self._closed = True
        if self._dir != self.path:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = self.path

    def __enter__(self) -> RecordingWriter:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abandon()


_PART = re.compile(r"part-(\d{5,})\.parquet")
_U64 = 2**64

#: Counters of ``meta.json``'s ``accounting`` (live recordings, traces): non-negative
#: integers when present.
_ACCOUNTING_COUNTS = (
    "samples",
    "lost_records",
    "lost",
    "lost_samples",
    "throttled",
    "unthrottled",
    "drains",
    "watermark_drains",
    "timer_drains",
    "samples_without_addr",
    "other_process_samples",
    "corrupt_rings",
    "unparsed_records",
    "maps_snapshots",
    "max_snapshot_gap_ns",
    "mapping_events",
    "threads",
    "duration_ns",
    "target_pid",
    "loads",
    "stores",
    "modifies",
    "accesses",
    "instructions",
)


def _kind(value: Any) -> str:
    """A value from a file, described without echoing much of it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        if abs(value) < 10**30:
            return f"the integer {value}"
        return f"an integer of {value.bit_length()} bits"
    if isinstance(value, float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}" + ("..." if len(value) > 40 else "")
    if isinstance(value, list):
        return "a list"
    return "an object"


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _U64


def check_meta(meta: Any, where: Path | str) -> dict[str, Any]:
    """Validate a parsed ``meta.json``: the format's fields must have their documented
    types (others are free-form). Errors name the file and the field."""

    def fail(field: str, what: str) -> RecordingError:
        return RecordingError(f"{where}: field `{field}`: {what}")

    if not isinstance(meta, dict):
        raise RecordingError(f"{where}: expected a JSON object, got {_kind(meta)}")
    if meta.get("format") != FORMAT_NAME:
        got = "missing" if "format" not in meta else f"is {_kind(meta.get('format'))}"
        raise RecordingError(
            f"{where}: field `format` {got}, expected {FORMAT_NAME!r}: not a tierlab recording"
        )
    version = meta.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise fail("version", f"must be a positive integer, got {_kind(version)}")
    if version > FORMAT_VERSION:
        raise RecordingError(
            f"{where}: recording format version {version} is newer than this tierlab "
            f"reads (up to {FORMAT_VERSION}); upgrade tierlab"
        )
    for key in ("source", "created"):
        if key in meta and not isinstance(meta[key], str):
            raise fail(key, f"expected a string, got {_kind(meta[key])}")
    if "complete" in meta and not isinstance(meta["complete"], bool):
        raise fail("complete", f"expected true or false, got {_kind(meta['complete'])}")
    for key in ("parameters", "machine", "tables", "accounting"):
        if key in meta and meta[key] is not None and not isinstance(meta[key], dict):
            raise fail(key, f"expected an object, got {_kind(meta[key])}")
    for table, rows in (meta.get("tables") or {}).items():
        if not _is_count(rows):
            raise fail(f"tables.{table}", f"expected a row count, got {_kind(rows)}")
    machine = meta.get("machine") or {}
    page = machine.get("page_size")
    if page is not None and (not _is_count(page) or page < 1 or page & (page - 1)):
        if _is_count(page):  # 0, 3000: the number is said not to be one
            raise fail("machine.page_size", f"{page} is not a power of two (bytes per page)")
        raise fail("machine.page_size", f"expected a power of two, got {_kind(page)}")
    acc = meta.get("accounting") or {}
    for key in _ACCOUNTING_COUNTS:
        if acc.get(key) is not None and not _is_count(acc[key]):
            raise fail(
                f"accounting.{key}", f"expected a non-negative integer, got {_kind(acc[key])}"
            )
    if acc.get("interrupted") is not None and not isinstance(acc["interrupted"], bool):
        raise fail(
            "accounting.interrupted", f"expected true or false, got {_kind(acc['interrupted'])}"
        )
    exit_ = acc.get("target_exit")
    if exit_ is not None and not (
        isinstance(exit_, dict)
        and exit_.get("how") in ("exit", "signal", "gone")
        and isinstance(exit_.get("value"), int)
        and not isinstance(exit_.get("value"), bool)
    ):
        raise fail(
            "accounting.target_exit",
            'expected null or {"how": "exit"|"signal"|"gone", "value": N}',
        )
    for key in ("drain_intervals", "page_sizes"):
        if acc.get(key) is not None and not isinstance(acc[key], dict | list):
            raise fail(f"accounting.{key}", f"expected an object, got {_kind(acc[key])}")
    return meta


def _first(mask: pa.ChunkedArray | pa.Array) -> int:
    """Index of the first true value of a boolean array."""
    import pyarrow.compute as pc

    return int(pc.index(mask, True).as_py())


def _value_problem(table: str, t: pa.Table) -> str | None:
    """The first value of ``t`` (a table of the format's schema) the format does not allow,
    described with its column and row; ``None`` when every value is valid."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for name in t.column_names:
        col = t.column(name)
        if col.null_count:
            row = _first(pc.is_null(col))
            return f"column `{name}`: null at row {row} (nulls are not allowed)"
    if table == "accesses" and t.num_rows:
        bad = pc.greater(t.column("kind"), KIND_STORE)
        if pc.any(bad).as_py():
            row = _first(bad)
            value = t.column("kind")[row].as_py()
            return f"column `kind`: {value} at row {row} is not a kind (0 load, 1 store)"
    if table == "mappings" and t.num_rows:
        ok = pc.is_in(t.column("event"), value_set=pa.array(MAPPING_EVENTS))
        if not pc.all(ok).as_py():
            row = _first(pc.invert(ok))
            value = str(t.column("event")[row].as_py())
            return f"column `event`: {_kind(value)} at row {row} is not an event ('map' or 'unmap')"
        start, length = t.column("start"), t.column("length")
        # start + length must not pass 2^64 (the address space ends there; a mapping may end
        # at 2^64 exactly): length - 1 <= 2^64 - 1 - start, both sides within 64 bits.
        room = pc.subtract(pa.scalar(_U64 - 1, pa.uint64()), start)
        bad = pc.and_(
            pc.greater(length, room),
            pc.greater(pc.subtract(length, pa.scalar(1, pa.uint64())), room),
        )
        if pc.any(bad).as_py():
            row = _first(bad)
            return (
                f"row {row}: mapping at {start[row].as_py():#x} of length "
                f"{t.column('length')[row].as_py()} ends past the end of the address space"
            )
    if table == "regions" and t.num_rows:
        for lo, hi in (("start", "end"), ("time_ns", "end_ns")):
            bad = pc.less(t.column(hi), t.column(lo))
            if pc.any(bad).as_py():
                row = _first(bad)
                return f"row {row}: `{hi}` is before `{lo}`"
    return None


@dataclass
class Recording:
    """A recording opened for reading. Use :meth:`Recording.open`."""

    path: Path
    meta: dict[str, Any]
    _cache: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Recording:
        """Open and validate a recording directory (``meta.json``'s fields; the part names,
        columns and values of a table are checked when it is read)."""
        p = Path(path)
        if not p.exists():
            raise RecordingError(f"{p}: no such recording (directory not found)")
        if not p.is_dir():
            raise RecordingError(f"{p}: a recording is a directory holding {META_FILE}")
        meta_path = p / META_FILE
        if not os.path.lexists(meta_path):
            raise RecordingError(f"{meta_path}: missing; {p} is not a tierlab recording{_hint(p)}")
        raw = safeio.read_bytes(meta_path, safeio.MAX_META_BYTES, RecordingError, META_FILE)
        meta = safeio.loads_json(raw, meta_path, RecordingError)
        return cls(path=p, meta=check_meta(meta, meta_path))

    def parts(self, table: str) -> list[Path]:
        """The Parquet parts of ``table``, in order. Checks their names: parts are
        ``part-NNNNN.parquet`` numbered from 0 without gaps; files starting with ``.`` are
        ignored; anything else in the table's directory is an error."""
        if table not in ALL_TABLES:
            raise KeyError(f"unknown table {table!r} (tables: {', '.join(ALL_TABLES)})")
        d = self.path / table
        if not os.path.lexists(d):
            return []
        if not d.is_dir():
            what = safeio.file_kind(d.stat().st_mode) if d.exists() else "a broken link"
            if d.exists() and d.is_file():
                what = "a file"
            raise RecordingError(
                f"{d}: expected the directory of table `{table}` (Parquet parts), found {what}"
            )
        numbered: dict[int, Path] = {}
        for entry in sorted(d.iterdir()):
            name = entry.name
            if name.startswith("."):
                continue
            m = _PART.fullmatch(name)
            if m is None:
                raise RecordingError(
                    f"{entry}: unexpected in table `{table}` (its parts are named "
                    "part-NNNNN.parquet)"
                )
            index = int(m.group(1))
            if index in numbered:
                raise RecordingError(
                    f"{entry}: part number {index} also used by {numbered[index].name}"
                )
            numbered[index] = entry
        order = sorted(numbered)
        for expected, index in enumerate(order):
            if index != expected:
                raise RecordingError(
                    f"{d / _part_name(expected)}: missing (table `{table}` goes on with "
                    f"{numbered[index].name}; parts are numbered from 00000 without gaps)"
                )
        return [numbered[i] for i in order]

    def _read_part(self, table: str, part: Path, index: int) -> pa.Table:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        schema = _schemas()[table]
        where = str(part)
        fd, _size = safeio.open_regular(part, RecordingError, "Parquet part")
        try:
            with os.fdopen(fd, "rb") as f:
                pf = pq.ParquetFile(f)
                have = pf.schema_arrow
                _check_extents(pf.metadata, where)
                missing = [name for name in schema.names if name not in have.names]
                if missing:
                    raise RecordingError(
                        f"{where}: missing column `{missing[0]}` "
                        f"(table {table} needs {', '.join(schema.names)})"
                    )
                for fld in schema:
                    got = have.field(fld.name).type
                    if not _castable(got, fld.type):
                        raise RecordingError(
                            f"{where}: column `{fld.name}` has type {got}, expected {fld.type}"
                        )
                t = pf.read(columns=schema.names)
        except RecordingError:
            raise
        except (pa.ArrowException, OSError, ValueError, IndexError, MemoryError) as e:
            text = str(e).strip()
            msg = text.splitlines()[0] if text else type(e).__name__
            raise RecordingError(f"{where}: not a readable Parquet file: {msg[:200]}") from None
        # Column by column: nulls, then integers that do not fit the format's types.
        for fld in schema:
            col = t.column(fld.name)
            if col.null_count:
                row = _first(pc.is_null(col))
                raise RecordingError(
                    f"{where}: column `{fld.name}`: null at row {row} (nulls are not allowed)"
                )
            if pa.types.is_integer(fld.type) and col.type != fld.type and len(col):
                lo, hi = pc.min_max(col).values()
                top = 2**fld.type.bit_width - 1
                if lo.as_py() < 0 or hi.as_py() > top:
                    bad = pc.less(col, pa.scalar(0, col.type))
                    if hi.as_py() > top:
                        bad = pc.or_(bad, pc.greater(col, pa.scalar(top, pa.uint64())))
                    row = _first(bad)
                    raise RecordingError(
                        f"{where}: column `{fld.name}`: {col[row].as_py()} at row {row} does "
                        f"not fit {fld.type}"
                    )
        try:
            t = t.cast(schema)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise RecordingError(f"{where}: values do not fit the format's types: {e}") from None
        problem = _value_problem(table, t)
        if problem is not None:
            raise RecordingError(f"{where}: {problem}")
        return t

    def _footer(self, table: str, part: Path) -> pq.FileMetaData:
        """A part's footer, checked without decoding its data: a regular file, a readable
        Parquet footer whose row groups have the schema's columns, and the table's columns
        with types the format converts."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = _schemas()[table]
        where = str(part)
        fd, _size = safeio.open_regular(part, RecordingError, "Parquet part")
        try:
            with os.fdopen(fd, "rb") as f:
                pf = pq.ParquetFile(f)
                md = pf.metadata
                _check_extents(md, where)
                have = pf.schema_arrow
        except RecordingError:
            raise
        except (pa.ArrowException, OSError, ValueError, IndexError, MemoryError) as e:
            text = str(e).strip()
            msg = text.splitlines()[0] if text else type(e).__name__
            raise RecordingError(f"{where}: not a readable Parquet file: {msg[:200]}") from None
        for fld in schema:
            if fld.name not in have.names:
                raise RecordingError(
                    f"{where}: missing column `{fld.name}` "
                    f"(table {table} needs {', '.join(schema.names)})"
                )
            got = have.field(fld.name).type
            if not _castable(got, fld.type):
                raise RecordingError(
                    f"{where}: column `{fld.name}` has type {got}, expected {fld.type}"
                )
        return md

    def table_rows(self, table: str) -> int:
        """Rows of ``table`` from its parts' footers (each part checked as a file and a
        Parquet footer with the table's columns; nothing decoded). Readers that stream a large
        table themselves (the native view of full traces) check it with this first."""
        return sum(self._footer(table, part).num_rows for part in self.parts(table))

    def check_streaming(self, table: str, columns: Sequence[str]) -> None:
        """Check ``columns`` of ``table`` part by part and batch by batch (memory bounded by
        a batch, not the table): no nulls, and the values the format allows (``kind`` 0/1).
        For readers that stream a large table themselves."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        for index, part in enumerate(self.parts(table)):
            self._footer(table, part)
            fd, _size = safeio.open_regular(part, RecordingError, "Parquet part")
            row = 0
            try:
                with os.fdopen(fd, "rb") as f:
                    for batch in pq.ParquetFile(f).iter_batches(
                        batch_size=1 << 20, columns=list(columns)
                    ):
                        t = pa.Table.from_batches([batch]).cast(
                            pa.schema([_schemas()[table].field(c) for c in columns])
                        )
                        problem = _value_problem(table, _with_all_columns(table, t))
                        if problem is not None:
                            raise RecordingError(f"{part}: {_shift_row(problem, row)}")
                        row += batch.num_rows
            except RecordingError:
                raise
            except (pa.ArrowException, OSError, ValueError, IndexError, MemoryError) as e:
                text = str(e).strip()
                msg = text.splitlines()[0] if text else type(e).__name__
                raise RecordingError(
                    f"{part}: not a readable Parquet file (part {index}): {msg[:200]}"
                ) from None

    def table(self, table: str) -> pa.Table:
        """Read ``table`` as a pyarrow Table with the format's schema (columns a newer writer
        added are dropped). Every part is checked: its name, that it is a regular file and a
        readable Parquet file whose data lies inside it, the columns and their types, and the
        values (no nulls, ``kind`` 0/1, ``event`` map/unmap, mappings inside the 64-bit
        address space, regions that end after they start); an error names the part, the
        column and the row."""
        import pyarrow as pa

        schema = _schemas()[table]
        pieces = [self._read_part(table, part, i) for i, part in enumerate(self.parts(table))]
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


def _with_all_columns(table: str, t: pa.Table) -> pa.Table:
    """``t`` (some columns of ``table``) with the others filled with valid zeros, for
    :func:`_value_problem`."""
    import numpy as np
    import pyarrow as pa

    schema = _schemas()[table]
    cols = []
    for fld in schema:
        if fld.name in t.column_names:
            cols.append(t.column(fld.name))
        elif pa.types.is_string(fld.type):
            cols.append(pa.array(["map"] * t.num_rows, fld.type))
        else:
            cols.append(pa.array(np.zeros(t.num_rows, dtype=np.uint64), pa.uint64()).cast(fld.type))
    return pa.Table.from_arrays(cols, schema=schema)


def _shift_row(problem: str, offset: int) -> str:
    """A problem's row number counted from the part's start instead of the batch's."""
    return re.sub(r"\brow (\d+)", lambda m: f"row {int(m.group(1)) + offset}", problem, count=1)


def _check_extents(md: Any, where: str) -> None:
    """What can be checked of the footer before reading: row counts, and that every row group
    has the schema's columns (pyarrow aborts the whole process when asked for a column's
    metadata that does not decode, so the column chunks are left to the reader, which checks
    each chunk's range against the file's size and reports a corrupt one as an error)."""
    for rg in range(md.num_row_groups):
        g = md.row_group(rg)
        if g.num_rows < 0:
            raise RecordingError(f"{where}: row group {rg} claims {g.num_rows} rows: corrupt")
        if g.num_columns != md.num_columns:
            raise RecordingError(
                f"{where}: row group {rg} has {g.num_columns} columns, the file's schema "
                f"{md.num_columns}: corrupt"
            )


def _hint(path: Path) -> str:
    """What a directory that is not a recording is, when tierlab can tell."""
    kind = outdir.kind_of(path)
    samples = sorted(q.name for q in path.glob("samples-*") if (q / META_FILE).is_file())
    if kind == "run":
        text = " (it is the output of `tierlab run --out`"
        if samples:
            text += "; the recordings in it: " + ", ".join(str(path / s) for s in samples)
        else:
            text += (
                "; a run writes a recording only for sampling techniques (PEBS), as "
                "DIR/samples-LABEL, and this one had none"
            )
        return text + ")"
    if kind == "view":
        return " (it is the output of `tierlab view`: view the recording it was made from)"
    return ""


def _castable(src: pa.DataType, dst: pa.DataType) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(src):
        src = src.value_type
    if src == dst:
        return True
    if pa.types.is_integer(dst):
        return bool(pa.types.is_integer(src))
    if pa.types.is_string(dst):
        return bool(pa.types.is_string(src) or pa.types.is_large_string(src))
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
    import numpy as np
    import pyarrow.compute as pc

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
