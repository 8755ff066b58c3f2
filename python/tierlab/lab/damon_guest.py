"""Runs in the lab's guest: the guest kernel's DAMON (``vaddr``, its sysfs interface under
the guest's ``/sys/kernel/mm/damon/admin``) monitors a masim workload (``masim_run``), and
every aggregation's regions are written in the JSON ``damo record`` writes.

    python -m tierlab.lab.damon_guest RUNNER CONFIG OUT SAMPLE_US AGGR_US UPDATE_US MIN MAX

The regions come from the ``damon:damon_aggregated`` tracepoint (one event per region per
aggregation, as ``damo record`` reads them), through the guest's tracefs: every
aggregation is there, with the kernel's own timestamp. Standard library only (it runs under
emulation).
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
from pathlib import Path

ADMIN = Path("/sys/kernel/mm/damon/admin")
U64_MAX = 2**64 - 1


def put(path: Path, value: object) -> None:
    path.write_text(f"{value}\n")


def get(path: Path) -> str:
    return path.read_text().strip()


def setup(pid: int, attrs: list[int]) -> Path:
    sample_us, aggr_us, update_us, min_nr, max_nr = attrs
    kd = ADMIN / "kdamonds"
    put(kd / "nr_kdamonds", 1)
    k = kd / "0"
    put(k / "contexts" / "nr_contexts", 1)
    c = k / "contexts" / "0"
    put(c / "operations", "vaddr")
    iv = c / "monitoring_attrs" / "intervals"
    put(iv / "sample_us", sample_us)
    put(iv / "aggr_us", aggr_us)
    put(iv / "update_us", update_us)
    nr = c / "monitoring_attrs" / "nr_regions"
    put(nr / "min", min_nr)
    put(nr / "max", max_nr)
    put(c / "targets" / "nr_targets", 1)
    put(c / "targets" / "0" / "pid_target", pid)
    put(k / "state", "on")
    return k


TRACING = Path("/sys/kernel/tracing")
EVENT = TRACING / "events" / "damon" / "damon_aggregated"
# kdamond.0-63 [000] ..... 12.345678: damon_aggregated: target_id=0 nr_regions=11 A-B: N AGE
LINE = re.compile(
    r"\s(\d+\.\d+): damon_aggregated: target_id=(\d+) nr_regions=(\d+) "
    r"(\d+)-(\d+): (\d+) (\d+)"
)


def trace_on() -> None:
    if not (TRACING / "trace").exists():
        subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACING)], check=True)
    put(TRACING / "tracing_on", 0)
    put(TRACING / "buffer_size_kb", 16384)
    # The events' times on the clock DAMON's intervals run on: the default trace clock is
    # the TSC's, whose rate under emulation is calibrated at boot and can be off by a factor.
    put(TRACING / "trace_clock", "mono")
    put(TRACING / "trace", "")
    put(EVENT / "enable", 1)
    put(TRACING / "tracing_on", 1)


def trace_off() -> list[dict[str, object]]:
    """The snapshots in the trace: one per aggregation (the events of one aggregation share
    its timestamp's neighbourhood; a new one starts when the region count restarts)."""
    put(TRACING / "tracing_on", 0)
    put(EVENT / "enable", 0)
    snaps: list[dict[str, object]] = []
    regions: list[dict[str, object]] = []
    expect = 0
    t = 0
    for line in (TRACING / "trace").read_text().splitlines():
        m = LINE.search(line)
        if m is None:
            continue
        if not regions:
            t = int(float(m.group(1)) * 1e9)
            expect = int(m.group(3))
        regions.append(
            {
                "start": int(m.group(4)),
                "end": int(m.group(5)),
                "nr_accesses": {"samples": int(m.group(6))},
                "age": {"aggr_intervals": int(m.group(7))},
            }
        )
        if len(regions) == expect:
            snaps.append({"start_time": t, "end_time": t, "regions": regions})
            regions = []
    return snaps


def main() -> int:
    runner, config, out = sys.argv[1:4]
    attrs = [int(a) for a in sys.argv[4:9]]
    proc = subprocess.Popen(
        [runner, config], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdin is not None and proc.stdout is not None
    bases = {}
    while True:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"masim_run ended before it was ready ({config})")
        words = line.split()
        if words[0] == "region":
            bases[words[1]] = (int(words[2], 16), int(words[3]))
        if words[0] == "ready":
            break
    trace_on()
    k = setup(proc.pid, attrs)
    proc.stdin.write("go\n")
    proc.stdin.flush()
    try:
        proc.wait()
    finally:
        # A vaddr kdamond stops by itself when its target exits (then "off" is refused).
        with contextlib.suppress(OSError):
            put(k / "state", "off")
    snaps = trace_off()
    if not snaps:
        raise SystemExit("no damon_aggregated events in the guest's trace")
    # The aggregations' times from the first one, as damo's record does.
    t0 = int(str(snaps[0]["start_time"])) - attrs[1] * 1000
    for sn in snaps:
        sn["start_time"] = int(str(sn["start_time"])) - t0 - attrs[1] * 1000
        sn["end_time"] = int(str(sn["end_time"])) - t0
    phases = proc.stdout.read()
    record = [
        {
            "kdamond_idx": 0,
            "context_idx": 0,
            "scheme_idx": 0,
            "target_id": 0,
            "intervals": {"sample_us": attrs[0], "aggr_us": attrs[1], "ops_update_us": attrs[2]},
            "snapshots": snaps,
        }
    ]
    Path(out).write_text(json.dumps(record))
    Path(out + ".regions").write_text(json.dumps({"bases": bases, "phases": phases}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
