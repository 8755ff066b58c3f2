"""The page size behind each sample: base pages, transparent huge pages, hugetlbfs.

A page-fault sample is the first touch of a page; with transparent huge pages (THP) one fault
maps 2 MiB, so counting samples x 4 KiB undercounts a THP-backed array 512 times. The live
recorder reads ``/proc/PID/smaps`` while it records and stores, per mapping, its
``KernelPageSize`` and ``AnonHugePages`` in ``meta.json`` (``accounting.page_sizes``, a list
of ``{"start", "end", "name", "kernel_page_size", "anon_huge_bytes", "time_ns"}``, with
``accounting.thp_size``). From them, per sample:

- in a mapping whose ``KernelPageSize`` is larger than the base page (hugetlbfs): that size;
- in a mapping with ``AnonHugePages`` > 0 (THP): a page fault alone in its aligned huge-page
  block (the block lying inside the mapping) mapped the whole block, so its page size is the
  THP size; for other samples (PEBS, IBS), the THP size when most of the mapping was huge;
- anything else: the base page size (``machine.page_size``, else 4 KiB).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tierlab.view.counts import Counts

BASE_PAGE = 4096
THP_SIZE = 2 << 20


def observations(meta: dict[str, Any]) -> tuple[list[tuple[int, int, int, int]], int]:
    """``[(start, end, kernel_page_size, anon_huge_bytes)]`` (largest seen per range) and the
    THP size, from a recording's metadata; malformed entries are skipped."""
    acc = meta.get("accounting") or {}
    thp = acc.get("thp_size")
    thp = thp if isinstance(thp, int) and thp > 0 and not thp & (thp - 1) else THP_SIZE
    best: dict[tuple[int, int], tuple[int, int]] = {}
    for o in acc.get("page_sizes") or []:
        if not isinstance(o, dict):
            continue
        vals: list[int] = []
        for key in ("start", "end", "kernel_page_size", "anon_huge_bytes"):
            v = o.get(key)
            if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
                vals.append(v)
        if len(vals) != 4:
            continue
        start, end, kps, huge = vals
        if end <= start:
            continue
        k, h = best.get((start, end), (0, 0))
        best[(start, end)] = (max(k, kps), max(h, huge))
    return sorted((s, e, k, h) for (s, e), (k, h) in best.items()), thp


def base_page(meta: dict[str, Any]) -> int:
    machine = meta.get("machine") or {}
    p = machine.get("page_size")
    return p if isinstance(p, int) and p > 0 and not p & (p - 1) else BASE_PAGE


def huge_block_ranges(meta: dict[str, Any]) -> list[tuple[int, int]]:
    """The ranges (``[start, end)``) whose page-fault points need their huge-page block's
    count of points over the whole recording (THP mappings, see the module docstring)."""
    base = base_page(meta)
    obs, thp = observations(meta)
    return [(s, e) for s, e, kps, huge in obs if kps <= base and huge > 0 and thp > base]


def count_blocks(
    meta: dict[str, Any], addr: np.ndarray, acc: dict[tuple[int, int], Counts]
) -> None:
    """Add the points ``addr`` of one batch to ``acc``: per range of
    :func:`huge_block_ranges`, the points per huge-page block. A streaming reader passes the
    totals to :func:`point_page_sizes` so that each batch's sizes are those of the whole."""
    ranges = huge_block_ranges(meta)
    if not ranges or addr.size == 0:
        return
    _obs, thp = observations(meta)
    sa = np.sort(addr.astype(np.uint64))
    for start, end in ranges:
        a, b = np.searchsorted(sa, [np.uint64(start), np.uint64(end)], side="left")
        if b > a:
            acc.setdefault((start, end), Counts()).add(sa[a:b] // np.uint64(thp))


def point_page_sizes(
    meta: dict[str, Any],
    addr: np.ndarray,
    event: np.ndarray | None,
    blocks: dict[tuple[int, int], Counts] | None = None,
    faults: np.ndarray | None = None,
) -> np.ndarray:
    """The page size (bytes) behind each point (see the module docstring). ``blocks``: the
    points per huge-page block over the whole recording (:func:`count_blocks`), when
    ``addr`` is one batch of it; by default those of ``addr``. ``faults``: which points are
    page faults, when known without the event names."""
    base = base_page(meta)
    sizes = np.full(addr.size, base, dtype=np.uint64)
    obs, thp = observations(meta)
    if not obs or addr.size == 0:
        return sizes
    addr = addr.astype(np.uint64)
    if faults is None:
        faults = (
            np.asarray(event == "page-faults", dtype=bool)
            if event is not None
            else np.zeros(addr.size, dtype=bool)
        )
    order = np.argsort(addr, kind="stable")
    sa = addr[order]
    for start, end, kps, huge in obs:
        a, b = np.searchsorted(sa, [np.uint64(start), np.uint64(end)], side="left")
        if b <= a:
            continue
        idx = order[a:b]
        if kps > base:
            sizes[idx] = kps
            continue
        if huge <= 0 or thp <= base:
            continue
        blk = sa[a:b] // np.uint64(thp)
        lo_blk = -(-start // thp)  # first block wholly inside the mapping
        hi_blk = end // thp  # blocks below this end inside it
        inside = (blk >= np.uint64(lo_blk)) & (blk < np.uint64(hi_blk))
        f = faults[idx]
        if f.any():
            total = None if blocks is None else blocks.get((start, end))
            per_point: np.ndarray
            if total is None:
                _u, inv, counts = np.unique(blk, return_inverse=True, return_counts=True)
                per_point = counts[inv.reshape(-1)]
            else:  # one batch of a recording: the whole recording's points per block
                keys, totals = total.result()
                at = np.minimum(np.searchsorted(keys, blk), max(0, keys.size - 1))
                per_point = (
                    np.where(keys[at] == blk, totals[at], 0)
                    if keys.size
                    else np.zeros(blk.size, dtype=np.int64)
                )
            alone = (per_point == 1) & inside & f
            sizes[idx[alone]] = thp
        whole_blocks = max(0, hi_blk - lo_blk) * thp
        if whole_blocks and huge * 2 >= whole_blocks:
            sizes[idx[inside & ~f]] = thp
    return sizes


def touched_bytes(
    addr: np.ndarray, sizes: np.ndarray, lo: int, hi: int, base: int = BASE_PAGE
) -> tuple[int, int, int]:
    """Bytes of ``[lo, hi)`` covered by the pages the points touched (each point's page of its
    own size, clipped to the range; overlaps counted once), the number of those pages, and
    how many of them are larger than the base page."""
    if addr.size == 0:
        return 0, 0, 0
    a = addr.astype(np.uint64)
    z = sizes.astype(np.uint64)
    units = np.unique(np.stack([a // z * z, z]), axis=1)  # distinct (page start, size)
    return covered_bytes(units[0], units[1], lo, hi, base)


def covered_bytes(
    starts: np.ndarray, sizes: np.ndarray, lo: int, hi: int, base: int = BASE_PAGE
) -> tuple[int, int, int]:
    """:func:`touched_bytes` of distinct pages (``starts``, each of its ``sizes``)."""
    starts = np.asarray(starts, dtype=np.uint64)
    sizes = np.asarray(sizes, dtype=np.uint64)
    n_units, n_huge = int(starts.size), int((sizes > np.uint64(base)).sum())
    if n_units == 0:
        return 0, 0, 0
    if hi <= lo:
        return 0, n_units, n_huge
    # Inclusive last bytes: a range or a page may end at 2^64 (the top page), one past uint64.
    lasts = np.minimum(starts + (sizes - np.uint64(1)), np.uint64(hi - 1))
    starts = np.maximum(starts, np.uint64(lo))
    inside = lasts >= starts
    starts, lasts = starts[inside], lasts[inside]
    order = np.argsort(starts, kind="stable")
    starts, lasts = starts[order], lasts[order]
    reach = np.maximum.accumulate(lasts)
    prev = reach[:-1]  # the last byte covered before each page but the first
    new = np.ones(starts.size, dtype=bool)
    new[1:] = lasts[1:] > prev
    first = starts.copy()
    first[1:] = np.where(new[1:], np.maximum(starts[1:], np.minimum(prev, lasts[1:]) + 1), 0)
    covered = int(np.where(new, lasts - first + np.uint64(1), np.uint64(0)).sum(dtype=np.uint64))
    return covered, n_units, n_huge
