"""Counts per key, merged batch by batch: what the streaming passes of ``tierlab view`` keep
of a table too large to hold (memory grows with the distinct keys, not with the rows)."""

from __future__ import annotations

import numpy as np


class Counts:
    """How many times each ``uint64`` key was seen. :meth:`add` takes a batch's keys (or
    keys with their counts); :meth:`result` gives the distinct keys, sorted, and their
    counts. Batches are merged once their keys outnumber what is already merged, so the
    work is linear in the rows plus a log factor in the distinct keys."""

    def __init__(self) -> None:
        self.keys = np.empty(0, dtype=np.uint64)
        self.counts = np.empty(0, dtype=np.int64)
        self._keys: list[np.ndarray] = []
        self._counts: list[np.ndarray] = []
        self._pending = 0

    def add(self, keys: np.ndarray, counts: np.ndarray | None = None) -> None:
        keys = np.asarray(keys, dtype=np.uint64)
        if keys.size == 0:
            return
        if counts is None:
            keys, counts = np.unique(keys, return_counts=True)
        self._keys.append(keys)
        self._counts.append(np.asarray(counts, dtype=np.int64))
        self._pending += keys.size
        if self._pending > max(1 << 20, self.keys.size):
            self._merge()

    def _merge(self) -> None:
        if not self._keys:
            return
        k = np.concatenate([self.keys, *self._keys])
        c = np.concatenate([self.counts, *self._counts])
        self._keys, self._counts, self._pending = [], [], 0
        order = np.argsort(k, kind="stable")
        k, c = k[order], c[order]
        first = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
        self.keys, self.counts = k[first], np.add.reduceat(c, first)

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct keys (sorted) and their counts."""
        self._merge()
        return self.keys, self.counts

    def __len__(self) -> int:
        return int(self.result()[0].size)


class RowCounts:
    """:class:`Counts` of rows of several ``uint64`` columns (e.g. (IP, mapping, level)):
    :meth:`add` takes a batch's columns, :meth:`result` gives the distinct rows (a 2-D array,
    one column per row) and their counts."""

    def __init__(self, width: int) -> None:
        self.rows = np.empty((width, 0), dtype=np.uint64)
        self.counts = np.empty(0, dtype=np.int64)
        self._rows: list[np.ndarray] = []
        self._counts: list[np.ndarray] = []
        self._pending = 0

    def add(self, *columns: np.ndarray) -> None:
        if not columns or np.asarray(columns[0]).size == 0:
            return
        stacked = np.stack([np.asarray(c).astype(np.uint64) for c in columns])
        rows, counts = np.unique(stacked, axis=1, return_counts=True)
        self._rows.append(rows)
        self._counts.append(counts.astype(np.int64))
        self._pending += rows.shape[1]
        if self._pending > max(1 << 18, self.rows.shape[1]):
            self._merge()

    def _merge(self) -> None:
        if not self._rows:
            return
        r = np.concatenate([self.rows, *self._rows], axis=1)
        c = np.concatenate([self.counts, *self._counts])
        self._rows, self._counts, self._pending = [], [], 0
        rows, inverse = np.unique(r, axis=1, return_inverse=True)
        self.rows = rows
        self.counts = np.bincount(inverse.reshape(-1), weights=c, minlength=rows.shape[1]).astype(
            np.int64
        )

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct rows (one per column of the 2-D array) and their counts."""
        self._merge()
        return self.rows, self.counts


__all__ = ["Counts", "RowCounts"]
