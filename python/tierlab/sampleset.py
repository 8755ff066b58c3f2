"""A run's samples, column by column, in bounded memory.

The engine hands a sampler's samples over in a compact form (``tierlab._native.SampleSet``:
about 9 bytes a sample; a row of Python objects would take some 350). :class:`Samples` reads
them as the recording format's ``samples`` columns (numpy arrays): a whole column on demand
(``samples["addr"]``), or a range of rows at a time (:meth:`Samples.chunks`), which is how
the recordings of a run's samples are written, so that writing them needs memory for one
chunk, whatever the number of samples.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

#: The ``samples`` columns and their numpy types (``event``: strings).
COLUMNS: dict[str, Any] = {
    "time_ns": np.uint64,
    "tid": np.uint32,
    "cpu": np.uint32,
    "addr": np.uint64,
    "ip": np.uint64,
    "weight": np.uint64,
    "data_src": np.uint64,
    "event": object,
    "drain": np.uint64,
}

#: Rows per chunk when samples are streamed (about 15 MB of columns).
CHUNK_ROWS = 1 << 18


class Samples(Mapping[str, np.ndarray]):
    """The samples of one technique: a mapping of column name -> numpy array (made when
    asked), over the engine's compact set or over plain columns (a sweep point's result
    read back from disk)."""

    def __init__(self, native: Any = None, columns: Mapping[str, Any] | None = None) -> None:
        if (native is None) == (columns is None):
            raise ValueError("Samples: give the native set or the columns")
        self._native = native
        self._columns = None if columns is None else dict(columns)

    @property
    def rows(self) -> int:
        """Number of samples."""
        if self._native is not None:
            return len(self._native)
        return len(next(iter(self._columns.values()), [])) if self._columns else 0

    def __len__(self) -> int:
        return len(COLUMNS)

    def __iter__(self) -> Iterator[str]:
        return iter(COLUMNS)

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in COLUMNS:
            raise KeyError(name)
        if self._columns is not None:
            dtype = COLUMNS[name]
            return np.asarray(self._columns.get(name, []), dtype=dtype)
        return self.chunk(0, self.rows, (name,))[name]

    def chunk(
        self, start: int, end: int, names: tuple[str, ...] | None = None
    ) -> dict[str, np.ndarray]:
        """Rows ``start..end`` as columns (``names``, default all)."""
        names = tuple(COLUMNS) if names is None else names
        if self._columns is not None:
            return {n: self[n][start:end] for n in names}
        out: dict[str, np.ndarray] = {}
        for n in names:
            raw = self._native.columns(start, end, [n])
            if n == "event":
                events = np.asarray(self._native.events, dtype=object)
                codes = np.frombuffer(raw["event"], dtype=np.uint8)
                out[n] = events[codes] if len(events) else np.asarray([], dtype=object)
            else:
                out[n] = np.frombuffer(raw[n], dtype=np.dtype(COLUMNS[n]).newbyteorder("<"))
        return out

    def chunks(self, rows: int | None = None) -> Iterator[dict[str, np.ndarray]]:
        """Every sample, ``rows`` (default :data:`CHUNK_ROWS`) at a time, as columns."""
        rows = rows or CHUNK_ROWS
        for start in range(0, self.rows, rows):
            yield self.chunk(start, min(start + rows, self.rows))

    def drains(self) -> dict[str, np.ndarray]:
        """One row per drain: ``time_ns, cpu, drain, records`` (the ``drains`` table)."""
        if self._native is not None:
            raw = self._native.drains()
            return {
                "time_ns": np.frombuffer(raw["time_ns"], dtype="<u8"),
                "cpu": np.frombuffer(raw["cpu"], dtype="<u4"),
                "drain": np.frombuffer(raw["drain"], dtype="<u8"),
                "records": np.frombuffer(raw["records"], dtype="<u8").astype(np.uint32),
            }
        drain = self["drain"]
        if not drain.size:
            empty = np.zeros(0, dtype=np.uint64)
            return {"time_ns": empty, "cpu": empty.astype(np.uint32), "drain": empty,
                    "records": empty.astype(np.uint32)}  # fmt: skip
        order = np.argsort(drain, kind="stable")
        d = drain[order]
        first = np.flatnonzero(np.r_[True, d[1:] != d[:-1]])
        counts = np.diff(np.r_[first, d.size])
        return {
            "time_ns": self["time_ns"][order][first],
            "cpu": self["cpu"][order][first],
            "drain": d[first],
            "records": counts.astype(np.uint32),
        }

    def to_lists(self) -> dict[str, list[Any]]:
        """Plain columns (lists), for JSON and pickling."""
        return {n: self[n].tolist() for n in COLUMNS}

    def __reduce__(self) -> tuple[Any, ...]:
        # The native set does not cross a process boundary: its columns do.
        return (Samples, (None, self.to_lists()))

    def __repr__(self) -> str:
        return f"Samples({self.rows} rows)"


def of_all(values: Mapping[str, Any]) -> dict[str, Samples]:
    """:func:`of` of every value of a mapping (label -> samples)."""
    return {k: of(v) for k, v in values.items()}


def of(value: Any) -> Samples:
    """``value`` (a native set, plain columns, or already :class:`Samples`) as Samples."""
    if isinstance(value, Samples):
        return value
    if isinstance(value, Mapping):
        return Samples(columns=value)
    return Samples(native=value)


__all__ = ["CHUNK_ROWS", "COLUMNS", "Samples", "of", "of_all"]
