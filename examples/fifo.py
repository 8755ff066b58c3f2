"""FIFO replacement, written in Python: the built-in ``fifo`` policy of the hierarchical
memory mode (``crates/tierlab-sim/src/os/replacement/fifo.rs``) re-implemented against the
Python API; a run with it gives the built-in policy's statistics exactly
(``tests/test_python_agents.py`` checks it).

The victim is the page resident the longest; references are ignored, so FIFO tests no
Accessed bit. ``Fifo`` is called at every fault that needs a frame; ``FifoBatched`` chooses
64 victims at a time (one call into Python per 64 evictions; victims unmapped meanwhile are
skipped).

    [[policies]]
    kind = "python"
    path = "examples/fifo.py"
    class = "Fifo"
"""

from __future__ import annotations

from collections import OrderedDict
from typing import ClassVar

from tierlab.agents import Context, Replacement


class Fifo(Replacement):
    def __init__(self) -> None:
        # Resident pages, oldest first.
        self.queue: OrderedDict[int, None] = OrderedDict()

    def on_fault_in(self, page: int, ctx: Context) -> None:
        self.queue[page] = None

    def evict(self, ctx: Context) -> int:
        page, _ = self.queue.popitem(last=False)
        return page

    def remove(self, page: int) -> None:
        self.queue.pop(page, None)

    def stats(self) -> dict[str, float]:
        return {"resident_pages": len(self.queue)}


class FifoBatched(Fifo):
    batch: ClassVar[int] = 64

    def evict_batch(self, n: int, ctx: Context) -> list[int]:
        out = []
        while self.queue and len(out) < n:
            out.append(self.queue.popitem(last=False)[0])
        return out
