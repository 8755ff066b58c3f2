"""Interleave, written in Python: the built-in ``interleave`` placement policy
(``crates/tierlab-sim/src/agents/placement/interleave.rs``): new pages go round-robin over the
nodes (``numactl --interleave=all``). A run with it gives the built-in's statistics exactly.

    [placement]
    kind = "python"
    path = "examples/interleave.py"
    class = "Interleave"
"""

from __future__ import annotations

from tierlab.agents import Context, Placement


class Interleave(Placement):
    def prepare(self, ctx: Context) -> None:
        ctx.set_placement("interleave")
        ctx.set_plan([], [], [])
