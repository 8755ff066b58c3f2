"""``decisions/``: a simulated tiering policy's decision log as a recording that ``tierlab
view`` shows like the live loop's (``tierlab tier``): the ``tier`` table (one ``decide`` row
per page a promotion or demotion named, one ``move`` row per page that moved, outcome
``moved``; see :mod:`tierlab.tier.log`), the run's mapping history, no samples. Written when
the run had a tiering policy that asked for a move."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from tierlab import stats_keys as sk
from tierlab.reporters.base import Reporter
from tierlab.reporters.samples import mappings_frame

if TYPE_CHECKING:
    from tierlab.api import Result

NAME = "decisions"


def write_decisions(result: Result, out_dir: Path) -> list[Path]:
    """Write ``out_dir/decisions`` (see the module docs); nothing when the run has no
    decision."""
    from tierlab.recording import RecordingWriter
    from tierlab.tier.log import DecisionLog

    d = result.decisions
    if not d or not len(d.get("addr", [])):
        return []
    addr = np.asarray(d["addr"], dtype=np.uint64)
    time_ns = np.asarray(d["time_ns"], dtype=np.uint64)
    call = np.asarray(d["call"], dtype=np.int64)
    action = np.asarray(d["action"])
    node = np.asarray(d["node"], dtype=np.int32)
    moved = np.asarray(d["moved"], dtype=bool)
    mappings = mappings_frame(result)
    stats = result.stats_flat
    path = out_dir / NAME
    # A step is a call's time (a policy's hook); a batch is a call.
    _, step = np.unique(time_ns, return_inverse=True)
    with RecordingWriter(
        path,
        source="tierlab-sim",
        parameters={
            "scenario": result.name,
            "seed": result.seed,
            "policy": stats.get("tiering.policy"),
        },
        machine={"simulated": True, "cores": stats.get(sk.RUN_THREADS)},
        overwrite=True,
    ) as w:
        w.append_mappings(mappings)
        dl = DecisionLog(w._dir)
        for c in np.unique(call):
            sel = call == c
            t, st, a, nd = (
                int(time_ns[sel][0]),
                int(step[sel][0]),
                str(action[sel][0]),
                int(node[sel][0]),
            )
            dl.add(t, st, -1, "decide", a, addr[sel], nd)
            mv = sel & moved
            if mv.any():
                dl.add(t, st, int(c), "move", a, addr[mv], nd, outcome="moved")
        dl.flush()
        w.update_meta_or_warn(
            tier={
                "policy": stats.get("tiering.policy"),
                "kind": stats.get("tiering.kind"),
                "simulated": True,
                "stop": {
                    "reason": "interrupted" if result.interrupted else "end of run",
                    "batches": int(call.max()) + 1,
                },
            }
        )
    return [path]


class DecisionsReporter(Reporter):
    """``decisions/``: the tiering policy's decision log (see module docs)."""

    name = "decisions"
    patterns: ClassVar[tuple[str, ...]] = (NAME,)

    def write(self, result: Result, out_dir: Path) -> list[Path]:
        return write_decisions(result, out_dir)
