"""Decode perf's ``data_src`` word (PERF_SAMPLE_DATA_SRC, ``union perf_mem_data_src`` in
``include/uapi/linux/perf_event.h``) into the memory level that served the access, as
``perf mem report`` shows it.

Layout (bit offsets): ``mem_op`` 0-4, ``mem_lvl`` 5-18, ``mem_snoop`` 19-23, ``mem_lock``
24-25, ``mem_dtlb`` 26-32, ``mem_lvl_num`` 33-36, ``mem_remote`` 37. Newer kernels (and AMD
IBS) fill ``mem_lvl_num`` (+ ``mem_remote``), older ones only the ``mem_lvl`` bit mask; the
level number is used when present, as perf does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

LVL_SHIFT = 5
LVLNUM_SHIFT = 33
REMOTE_SHIFT = 37

# PERF_MEM_LVL_* (bit mask, deprecated but still filled by Intel PEBS)
LVL_NA = 0x01
LVL_HIT = 0x02
LVL_MISS = 0x04
_LVL_BITS = (
    (0x08, "L1"),
    (0x10, "LFB"),
    (0x20, "L2"),
    (0x40, "L3"),
    (0x80, "local DRAM"),
    (0x100, "remote DRAM"),  # REM_RAM1 (1 hop)
    (0x200, "remote DRAM"),  # REM_RAM2 (2 hops)
    (0x400, "remote cache"),  # REM_CCE1
    (0x800, "remote cache"),  # REM_CCE2
    (0x1000, "I/O"),
    (0x2000, "uncached"),
)

# PERF_MEM_LVLNUM_* (a number)
_LVLNUM = {
    0x01: "L1",
    0x02: "L2",
    0x03: "L3",
    0x04: "L4",
    0x05: "L2 MHB",
    0x06: "memory-side cache",
    0x07: "L0",
    0x08: "uncached",
    0x09: "CXL",
    0x0A: "I/O",
    0x0B: "any cache",
    0x0C: "LFB",
    0x0D: "DRAM",
    0x0E: "PMEM",
}
LVLNUM_NA = 0x0F

#: The levels in the order reports list them (nearest first).
ORDER = (
    "L0", "L1", "LFB", "L2", "L2 MHB", "L3", "L4", "any cache", "memory-side cache",
    "remote cache", "local DRAM", "remote DRAM", "PMEM", "remote PMEM", "CXL", "remote CXL",
    "I/O", "uncached", "unknown",
)  # fmt: skip


def level(data_src: int) -> str:
    """The memory level that served the access (``unknown`` for 0 or N/A)."""
    v = int(data_src)
    if v == 0:
        return "unknown"
    num = (v >> LVLNUM_SHIFT) & 0xF
    remote = (v >> REMOTE_SHIFT) & 1
    if num and num != LVLNUM_NA:
        name = _LVLNUM.get(num, "unknown")
        if name == "DRAM":
            return "remote DRAM" if remote else "local DRAM"
        if name in ("PMEM", "CXL") and remote:
            return f"remote {name}"
        if remote and name in ("L1", "L2", "L3", "L4", "any cache"):
            return "remote cache"
        return name
    lvl = (v >> LVL_SHIFT) & 0x3FFF
    for bit, name in _LVL_BITS:
        if lvl & bit:
            return name
    return "unknown"


def hit(data_src: int) -> bool | None:
    """Whether the level was a hit (``mem_lvl`` HIT/MISS), None if not stated."""
    lvl = (int(data_src) >> LVL_SHIFT) & 0x3FFF
    if lvl & LVL_HIT:
        return True
    if lvl & LVL_MISS:
        return False
    return None


def levels(values: Iterable[int], counts: Iterable[int] | None = None) -> dict[str, int]:
    """Samples per memory level, nearest level first; empty if no sample has a data source.
    Each distinct data-source word is decoded once (a run has few of them). With ``counts``,
    ``values`` are distinct words and ``counts`` their samples."""
    import numpy as np

    if counts is None:
        words, counts = np.unique(np.asarray(values, dtype=np.uint64), return_counts=True)
    else:
        words, counts = np.asarray(values, dtype=np.uint64), np.asarray(counts, dtype=np.int64)
    c: Counter[str] = Counter()
    for w, n in zip(words.tolist(), counts.tolist(), strict=True):
        c[level(w)] += n
    if set(c) <= {"unknown"}:
        return {}
    return {k: c[k] for k in ORDER if c.get(k)}
