"""Writing a recording: :class:`RecordingWriter` (incremental, crash safe: every part is
written to a hidden temporary file and renamed into place, then ``meta.json`` is rewritten
the same way), :func:`write_recording` (all at once) and :func:`check_overwritable`."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tierlab import outdir, safeio
from tierlab.recording.schema import (
    ALL_TABLES,
    CODES,
    FORMAT_NAME,
    FORMAT_VERSION,
    META_FILE,
    META_MANAGED,
    TABLES,
    RecordingError,
    arrow_schemas,
    part_name,
)
from tierlab.recording.validate import check_meta, value_problem

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa


def check_overwritable(path: str | os.PathLike[str], overwrite: bool) -> bool:
    """Whether writing a recording at ``path`` replaces an existing one. Raises
    :class:`RecordingError` when ``path`` holds something that must not be replaced:
    anything without ``overwrite``, and anything but a tierlab recording with it."""
    p = Path(path)
    outdir.clean_leftovers(p)
    if not os.path.lexists(p) or outdir.is_empty_dir(p):
        return False
    if not overwrite:
        raise RecordingError(f"{p}: already exists (pass overwrite=True, or --force)")
    return outdir.check_replaceable(p, ("recording",), RecordingError)


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

    schema = arrow_schemas()[table]
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
    problem = value_problem(table, t)
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

    def append_sync(self, data: Any = None, **columns: Any) -> None:
        """Append synchronisation events (optional table): the columns of ``SCHEMAS["sync"]``
        (``tierlab trace --cc`` writes them; replay obeys them, docs/formats.md)."""
        self._append("sync", data, columns)

    def append_allocations(self, data: Any = None, **columns: Any) -> None:
        """Append allocation events (optional table): the columns of
        ``SCHEMAS["allocations"]`` (docs/formats.md)."""
        self._append("allocations", data, columns)

    def append_alloc_sites(self, data: Any = None, **columns: Any) -> None:
        """Append allocation call stacks (optional table): the columns of
        ``SCHEMAS["alloc_sites"]``."""
        self._append("alloc_sites", data, columns)

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
        final = self._dir / table / part_name(self._parts[table])
        # Hidden name: pyarrow/pandas skip dot-files and the `*.parquet` glob does not match.
        tmp = final.with_name(f".{final.name}.tmp")
        try:
            pq.write_table(data, tmp, compression="zstd")
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            os.replace(tmp, final)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise self._write_error(e, final) from None
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
        path = self._dir / META_FILE
        try:
            _atomic_write_bytes(path, _meta_json(self._meta).encode())
        except OSError as e:
            path.with_name(f".{path.name}.tmp").unlink(missing_ok=True)
            raise self._write_error(e, path) from None

    def _write_error(self, e: OSError, where: Path) -> RecordingError:
        """A write that failed (a full disk): the recording's path and what is kept."""
        if self._dir != self.path:
            where = self.path / where.relative_to(self._dir)
            kept = f"{self.path} (the recording it replaces) is left as it was"
        else:
            kept = f"{self.path} keeps the parts written before (complete: false)"
        return RecordingError(f"{where}: cannot write: {(e.strerror or str(e)).lower()}; {kept}")

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
                self._write_part(table, arrow_schemas()[table].empty_table())
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
