"""One task of a SLURM job array (:mod:`tierlab.sweep.slurm_executor`):
``python -m tierlab.sweep.slurm_task WORK KEYS INDEX`` runs the item whose key is line
``INDEX`` (from 0) of the file ``KEYS`` and writes its value to ``WORK/results/KEY.pkl``
(atomically: a temporary file renamed into place, so a task killed half-way leaves none)."""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m tierlab.sweep.slurm_task WORK KEYS INDEX", file=sys.stderr)
        return 2
    work, listing, index = Path(argv[0]), Path(argv[1]), int(argv[2])
    keys = listing.read_text().split()
    if not 0 <= index < len(keys):
        print(f"{listing}: no line {index} (it has {len(keys)} keys)", file=sys.stderr)
        return 2
    key = keys[index]
    fn, item = pickle.loads((work / "tasks" / f"{key}.pkl").read_bytes())
    value = fn(item)
    out = work / "results" / f"{key}.pkl"
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.write_bytes(pickle.dumps(value, protocol=4))
    os.replace(tmp, out)
    print(f"tierlab: task {index} ({key[:12]}) done", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
