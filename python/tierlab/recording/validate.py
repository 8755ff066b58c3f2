"""Checks of what a recording holds: ``meta.json``'s fields (:func:`check_meta`), the
values of a table (:func:`value_problem`), a Parquet footer (:func:`check_extents`) and the
column types a reader converts (:func:`castable`). Shared by the writer (which refuses what a
reader would refuse) and the reader; every message names the field, column or row."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tierlab.recording.schema import (
    FORMAT_NAME,
    FORMAT_VERSION,
    KIND_STORE,
    MAPPING_EVENTS,
    RecordingError,
    arrow_schemas,
)

if TYPE_CHECKING:
    import pyarrow as pa

U64 = 2**64

#: Counters of ``meta.json``'s ``accounting`` (live recordings, traces): non-negative
#: integers when present.
ACCOUNTING_COUNTS = (
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


def describe(value: Any) -> str:
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


def is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < U64


def check_meta(meta: Any, where: Path | str) -> dict[str, Any]:
    """Validate a parsed ``meta.json``: the format's fields must have their documented
    types (others are free-form). Errors name the file and the field."""

    def fail(field: str, what: str) -> RecordingError:
        return RecordingError(f"{where}: field `{field}`: {what}")

    if not isinstance(meta, dict):
        raise RecordingError(f"{where}: expected a JSON object, got {describe(meta)}")
    if meta.get("format") != FORMAT_NAME:
        got = "missing" if "format" not in meta else f"is {describe(meta.get('format'))}"
        raise RecordingError(
            f"{where}: field `format` {got}, expected {FORMAT_NAME!r}: not a tierlab recording"
        )
    version = meta.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise fail("version", f"must be a positive integer, got {describe(version)}")
    if version > FORMAT_VERSION:
        raise RecordingError(
            f"{where}: recording format version {version} is newer than this tierlab "
            f"reads (up to {FORMAT_VERSION}); upgrade tierlab"
        )
    for key in ("source", "created"):
        if key in meta and not isinstance(meta[key], str):
            raise fail(key, f"expected a string, got {describe(meta[key])}")
    if "complete" in meta and not isinstance(meta["complete"], bool):
        raise fail("complete", f"expected true or false, got {describe(meta['complete'])}")
    for key in ("parameters", "machine", "tables", "accounting"):
        if key in meta and meta[key] is not None and not isinstance(meta[key], dict):
            raise fail(key, f"expected an object, got {describe(meta[key])}")
    for table, rows in (meta.get("tables") or {}).items():
        if not is_count(rows):
            raise fail(f"tables.{table}", f"expected a row count, got {describe(rows)}")
    machine = meta.get("machine") or {}
    page = machine.get("page_size")
    if page is not None and (not is_count(page) or page < 1 or page & (page - 1)):
        if is_count(page):  # 0, 3000: the number is said not to be one
            raise fail("machine.page_size", f"{page} is not a power of two (bytes per page)")
        raise fail("machine.page_size", f"expected a power of two, got {describe(page)}")
    acc = meta.get("accounting") or {}
    for key in ACCOUNTING_COUNTS:
        if acc.get(key) is not None and not is_count(acc[key]):
            raise fail(
                f"accounting.{key}", f"expected a non-negative integer, got {describe(acc[key])}"
            )
    if acc.get("interrupted") is not None and not isinstance(acc["interrupted"], bool):
        raise fail(
            "accounting.interrupted", f"expected true or false, got {describe(acc['interrupted'])}"
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
            raise fail(f"accounting.{key}", f"expected an object, got {describe(acc[key])}")
    return meta


def first_true(mask: pa.ChunkedArray | pa.Array) -> int:
    """Index of the first true value of a boolean array."""
    import pyarrow.compute as pc

    return int(pc.index(mask, True).as_py())


def value_problem(table: str, t: pa.Table) -> str | None:
    """The first value of ``t`` (a table of the format's schema) the format does not allow,
    described with its column and row; ``None`` when every value is valid."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for name in t.column_names:
        col = t.column(name)
        if col.null_count:
            row = first_true(pc.is_null(col))
            return f"column `{name}`: null at row {row} (nulls are not allowed)"
    if table == "accesses" and t.num_rows:
        bad = pc.greater(t.column("kind"), KIND_STORE)
        if pc.any(bad).as_py():
            row = first_true(bad)
            value = t.column("kind")[row].as_py()
            return f"column `kind`: {value} at row {row} is not a kind (0 load, 1 store)"
    if table == "mappings" and t.num_rows:
        ok = pc.is_in(t.column("event"), value_set=pa.array(MAPPING_EVENTS))
        if not pc.all(ok).as_py():
            row = first_true(pc.invert(ok))
            value = str(t.column("event")[row].as_py())
            return (
                f"column `event`: {describe(value)} at row {row} is not an event ('map' or 'unmap')"
            )
        start, length = t.column("start"), t.column("length")
        # start + length must not pass 2^64 (the address space ends there; a mapping may end
        # at 2^64 exactly): length - 1 <= 2^64 - 1 - start, both sides within 64 bits.
        room = pc.subtract(pa.scalar(U64 - 1, pa.uint64()), start)
        bad = pc.and_(
            pc.greater(length, room),
            pc.greater(pc.subtract(length, pa.scalar(1, pa.uint64())), room),
        )
        if pc.any(bad).as_py():
            row = first_true(bad)
            return (
                f"row {row}: mapping at {start[row].as_py():#x} of length "
                f"{t.column('length')[row].as_py()} ends past the end of the address space"
            )
    if table == "regions" and t.num_rows:
        for lo, hi in (("start", "end"), ("time_ns", "end_ns")):
            bad = pc.less(t.column(hi), t.column(lo))
            if pc.any(bad).as_py():
                row = first_true(bad)
                return f"row {row}: `{hi}` is before `{lo}`"
    return None


def with_all_columns(table: str, t: pa.Table) -> pa.Table:
    """``t`` (some columns of ``table``) with the others filled with valid zeros, for
    :func:`value_problem`."""
    import numpy as np
    import pyarrow as pa

    schema = arrow_schemas()[table]
    cols = []
    for fld in schema:
        if fld.name in t.column_names:
            cols.append(t.column(fld.name))
        elif pa.types.is_string(fld.type):
            cols.append(pa.array(["map"] * t.num_rows, fld.type))
        else:
            cols.append(pa.array(np.zeros(t.num_rows, dtype=np.uint64), pa.uint64()).cast(fld.type))
    return pa.Table.from_arrays(cols, schema=schema)


def shift_row(problem: str, offset: int) -> str:
    """A problem's row number counted from the part's start instead of the batch's."""
    return re.sub(r"\brow (\d+)", lambda m: f"row {int(m.group(1)) + offset}", problem, count=1)


def check_extents(md: Any, where: str) -> None:
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


def castable(src: pa.DataType, dst: pa.DataType) -> bool:
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
