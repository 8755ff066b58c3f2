"""One run for the Python-agent speed figures of docs/benchmarks.md (timed whole by
farm-bench, the Python and built-in forms alternated):

    farm-bench -n 5 --timeout 600 -- .venv/bin/python bench/python_agents.py tiering python \\
        --vs '.venv/bin/python bench/python_agents.py tiering builtin'

``tiering``: hottest-first following PEBS on tiering-kv (10 simulated seconds); ``pte``: a
PTE scan of the demo every 100 ms; ``fifo``: FIFO on cmcp-replay (``batched``: the
Python policy choosing 64 victims per call). Prints the run's wall seconds and key counts.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import tierlab

EX = Path(__file__).resolve().parent.parent / "examples"
PEBS = '{name = "T", kind = "pebs", event = "all", frequency_hz = 10000.0}'


def sets(what: str, form: str) -> tuple[str, list[str]]:
    if what == "tiering":
        pol = (
            f'{{kind = "python", path = "{EX / "hottest_first.py"}", class = "HottestFirst", '
            'telemetry = "T"}'
            if form == "python"
            else '{kind = "hottest-first", telemetry = "T"}'
        )
        return "tiering-kv", ["sweep=[]", "duration=10s", f"telemetry=[{PEBS}]", f"tiering={pol}"]
    if what == "pte":
        p = 'interval = "100ms", chunk_ptes = 4096'
        kind = (
            f'kind = "python", path = "{EX / "pte_scan.py"}", class = "PteScan"'
            if form == "python"
            else 'kind = "pte-scan"'
        )
        return "demo", ["sweep=[]", f'telemetry=[{{name = "T", {kind}, {p}}}]']
    cls = {"python": "Fifo", "batched": "FifoBatched"}.get(form)
    pol = (
        f'{{kind = "python", path = "{EX / "fifo.py"}", class = "{cls}"}}'
        if cls
        else '{kind = "fifo"}'
    )
    return "cmcp-replay", ["sweep=[]", f"policies=[{pol}]"]


def main() -> None:
    what, form = sys.argv[1], sys.argv[2]
    scenario, s = sets(what, form)
    t = time.monotonic()
    r = tierlab.run(scenario, set=s)
    f = r.stats_flat
    keys = ("tiering.promoted_pages", "telemetry.T.ptes_scanned", "machine.page_faults")
    print(f"{what} {form}: {time.monotonic() - t:.2f} s", {k: f[k] for k in keys if k in f})


if __name__ == "__main__":
    main()
