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

The package is split by concern: :mod:`~tierlab.recording.schema` (the format's tables,
columns and codes, declared in tierlab-core), :mod:`~tierlab.recording.writer`,
:mod:`~tierlab.recording.reader`, :mod:`~tierlab.recording.validate` (the checks both share)
and :mod:`~tierlab.recording.replay` (a recording as the engine replays it); every public name
is importable from ``tierlab.recording``.

Crash safety: :class:`RecordingWriter` writes every part to a hidden temporary file and
renames it into place, then rewrites ``meta.json`` the same way, so a writer killed at any
moment leaves a readable recording holding every part flushed so far.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tierlab.recording.reader import Recording
from tierlab.recording.replay import to_replay
from tierlab.recording.schema import (
    ALL_TABLES,
    CODES,
    FORMAT_NAME,
    FORMAT_VERSION,
    KIND_LOAD,
    KIND_STORE,
    MAPPING_EVENTS,
    META_FILE,
    META_MANAGED,
    OPTIONAL_TABLES,
    TABLES,
    RecordingError,
    arrow_schemas,
)
from tierlab.recording.validate import check_meta
from tierlab.recording.writer import RecordingWriter, check_overwritable, write_recording

if TYPE_CHECKING:
    import pyarrow as pa

    #: Column schemas of every table (the core tables, then the optional ones), in column
    #: order (made on first use, by the module's ``__getattr__``: it needs pyarrow).
    SCHEMAS: dict[str, pa.Schema]


def __getattr__(name: str) -> Any:
    if name == "SCHEMAS":
        return arrow_schemas()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__: Sequence[str] = [
    "ALL_TABLES",
    "CODES",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "KIND_LOAD",
    "KIND_STORE",
    "MAPPING_EVENTS",
    "META_FILE",
    "META_MANAGED",
    "OPTIONAL_TABLES",
    "SCHEMAS",
    "TABLES",
    "Recording",
    "RecordingError",
    "RecordingWriter",
    "check_meta",
    "check_overwritable",
    "to_replay",
    "write_recording",
]
