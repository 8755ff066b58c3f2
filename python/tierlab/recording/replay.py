"""A recording as the engine replays it: the ``replay`` argument of the native ``run``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from tierlab.api import native
from tierlab.recording.reader import Recording

if TYPE_CHECKING:
    import pandas as pd

#: Mappings are widened to base pages for replay (4 KiB, tierlab-core's ``PAGE_SIZE``).
_PAGE: int = native().PAGE_SIZE


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
