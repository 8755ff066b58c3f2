"""Terabyte scale: the built-in heap-5tb scenario (a fully populated 5 TiB heap of 4 KiB
pages, 1.34 billion PTEs) fits in well under 4 GiB of RSS.

The run is shortened to a few simulated seconds: what costs memory (page tables of the
populated heap, ground truth of the 10 GB hot set) is all there after the first window.
The full 60-second run's figures are in docs/benchmarks.md.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys

GiB = 1 << 30


def test_heap_5tb_fits_in_4_gib() -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    proc = subprocess.run(
        [sys.executable, "-m", "tierlab", "run", "heap-5tb", "--set", 'duration="3s"', "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert peak_kib >= before
    stats = json.loads(proc.stdout)
    pt = stats["machine"]["pagetable"]
    # Fully populated: every 4 KiB page of the 5 TiB heap is present...
    assert pt["present_4k"] == (5 << 40) // 4096
    # ...and only the hot region's PTE tables were materialized (10 GB / 2 MiB, +1 for an
    # unaligned end), the rest stays in bulk PMD entries.
    assert pt["pte_tables"] <= 10_000_000_000 // (2 << 20) + 2
    assert stats["machine"]["accesses"] > 0
    assert peak_kib * 1024 < 4 * GiB, f"peak RSS {peak_kib / 1024:.0f} MiB"
