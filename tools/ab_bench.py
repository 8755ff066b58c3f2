"""Engine throughput of two builds of the native extension, alternated in one run.

    .venv/bin/python tools/ab_bench.py OLD.so NEW.so [--rounds 3] [--quick]

Each round runs `bench_engine` of the old build, then of the new one, each in a fresh
process (so one build's allocations cannot slow the other), and prints every figure with
the ratio new / old per round and the median ratio. Speed is never a test assertion: this
is a measurement for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("tierlab._native", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
print(json.dumps({k: float(v) for k, v in mod.bench_engine(sys.argv[2] == "1").items()}))
"""


def run(so: str, quick: bool) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, so, "1" if quick else "0"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    ratios: dict[str, list[float]] = {}
    rows = []
    for r in range(a.rounds):
        old = run(a.old, a.quick)
        new = run(a.new, a.quick)
        for k in old:
            if k in new and old[k] > 0:
                ratios.setdefault(k, []).append(new[k] / old[k])
                rows.append((r, k, old[k], new[k]))
    for r, k, o, n in rows:
        print(
            f"round {r}  {k:<24} old {o / 1e6:8.2f} M/s  new {n / 1e6:8.2f} M/s"
            f"  new/old {n / o:5.3f}"
        )
    print()
    for k, v in ratios.items():
        print(
            f"{k:<24} median new/old {statistics.median(v):5.3f}"
            f"  (rounds: {', '.join(f'{x:.3f}' for x in v)})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
