"""Terabyte scale: the built-in heap-5tb scenario (a fully populated 5 TiB heap of 4 KiB
pages, 1.34 billion PTEs) fits in well under 4 GiB of RSS.

The run is shortened to a few simulated seconds: what costs memory (page tables of the
populated heap, ground truth of the 10 GB hot set) is all there after the first window.
The full 60-second run's figures are in docs/benchmarks.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import IO

GiB = 1 << 30


def run_measured(args: list[str], timeout: float) -> tuple[int, str, str, int]:
    """Run ``args`` and return (exit status, stdout, stderr, peak RSS in KiB) of that one
    process: its own rusage from wait4(2) (``RUSAGE_CHILDREN`` would be the largest of every
    child this test process ever waited for)."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out: dict[str, str] = {}

    def drain(name: str, stream: IO[str]) -> None:
        out[name] = stream.read()

    readers = [
        threading.Thread(target=drain, args=("out", proc.stdout)),
        threading.Thread(target=drain, args=("err", proc.stderr)),
    ]
    for t in readers:
        t.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        for t in readers:
            t.join(timeout)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, out.get("out", ""), out.get("err", ""), usage.ru_maxrss


def test_heap_5tb_fits_in_4_gib() -> None:
    code, stdout, stderr, peak_kib = run_measured(
        [sys.executable, "-m", "tierlab", "run", "heap-5tb", "--set", 'duration="3s"', "--json"],
        timeout=600,
    )
    assert code == 0, stderr
    stats = json.loads(stdout)
    pt = stats["machine"]["pagetable"]
    # Fully populated: every 4 KiB page of the 5 TiB heap is present...
    assert pt["present_4k"] == (5 << 40) // 4096
    # ...and only the hot region's PTE tables were materialized (10 GB / 2 MiB, +1 for an
    # unaligned end), the rest stays in bulk PMD entries.
    assert pt["pte_tables"] <= 10_000_000_000 // (2 << 20) + 2
    assert stats["machine"]["accesses"] > 0
    assert peak_kib * 1024 < 4 * GiB, f"peak RSS {peak_kib / 1024:.0f} MiB"
