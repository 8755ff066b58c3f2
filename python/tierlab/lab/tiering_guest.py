"""Runs in the lab's guest: a masim workload whose pages start on the slow node, under one of
the guest kernel's tiering mechanisms, sampled over time.

    python -m tierlab.lab.tiering_guest RUNNER CONFIG OUT MODE SETTINGS_JSON

``MODE``:

- ``damos``: DAMOS as ``samples/damon/mtier.c`` sets it up, on what 6.12 has: two kdamonds
  through the **guest's** ``/sys/kernel/mm/damon/admin``, each with one ``paddr`` context over
  one node's physical memory (6.12 implements ``migrate_hot``/``migrate_cold`` in the
  ``paddr`` operations only; ``vaddr`` gained them in 6.16): ``migrate_hot`` to the fast node
  of the slow node's regions with ``nr_accesses >= hot_min_nr_accesses`` (a ``young`` filter
  keeps the pages found accessed), ``migrate_cold`` to the slow node of the fast node's
  regions with ``nr_accesses == 0`` and age >= ``cold_min_age`` (a ``young`` filter drops the
  accessed ones); a size quota per reset interval, priority weights ``nr_accesses`` and age
  100 each; no quota goals (6.12's goals have no node memory metrics). The runner runs in a
  memory cgroup of its own and both schemes filter out the pages of other cgroups (the
  guest's page cache and processes share node 0 with it), as the simulator's address space
  holds only the workload.
- ``numa-balancing``: ``kernel.numa_balancing = 2`` (tiering mode) and
  ``/sys/kernel/mm/numa/demotion_enabled = 1``, the scanner's and promotion's settings read
  back (debugfs ``sched/numa_balancing/``, ``numa_balancing_promote_rate_limit_MBps``) and
  restored afterwards.

Every ``period_ms`` of the guest's clock: ``/proc/vmstat`` (migration, promotion, demotion and
NUMA-balancing counters) and the runner's pages per node in each masim region
(``/proc/PID/numa_maps``); with DAMOS, every aggregation of both kdamonds from the
``damon:damon_aggregated`` tracepoint (time, regions, largest ``nr_accesses``, bytes seen
accessed) and the schemes' stats at the end. Standard library only (it runs under
emulation).
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ADMIN = Path("/sys/kernel/mm/damon/admin")
NODES = Path("/sys/devices/system/node")
DEBUG_NB = Path("/sys/kernel/debug/sched/numa_balancing")
VMSTAT_PREFIXES = ("pgmigrate", "pgpromote", "pgdemote", "numa_", "pgsteal", "pgscan")


def put(path: Path, value: object) -> None:
    path.write_text(f"{value}\n")


def vmstat() -> dict[str, int]:
    out = {}
    for line in Path("/proc/vmstat").read_text().splitlines():
        k, v = line.split()
        if k.startswith(VMSTAT_PREFIXES):
            out[k] = int(v)
    return out


def node_range(nid: int) -> tuple[int, int]:
    """The physical address range of a node's memory blocks."""
    block = int(Path("/sys/devices/system/memory/block_size_bytes").read_text(), 16)
    idx = [int(p.name[len("memory") :]) for p in (NODES / f"node{nid}").glob("memory[0-9]*")]
    if not idx:
        raise SystemExit(f"node {nid} has no memory blocks")
    return min(idx) * block, (max(idx) + 1) * block


def pages_per_node(pid: int, starts: dict[int, str]) -> dict[str, dict[str, int]]:
    """{region: {"N0": pages, ...}} from /proc/PID/numa_maps (the mappings at ``starts``)."""
    out: dict[str, dict[str, int]] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/numa_maps").read_text().splitlines():
            words = line.split()
            name = starts.get(int(words[0], 16))
            if name is None:
                continue
            out[name] = {
                w.split("=")[0]: int(w.split("=")[1])
                for w in words[1:]
                if w[:1] == "N" and "=" in w
            }
    return out


CGROUP = Path("/sys/fs/cgroup")
MEMCG = "tierlab-masim"


def memcg() -> Path | None:
    """A memory cgroup for the runner (cgroup v2), or None where the guest has none."""
    try:
        if not (CGROUP / "cgroup.controllers").exists():
            subprocess.run(["mount", "-t", "cgroup2", "none", str(CGROUP)], check=True)
        if "memory" not in (CGROUP / "cgroup.subtree_control").read_text():
            put(CGROUP / "cgroup.subtree_control", "+memory")
        cg = CGROUP / MEMCG
        cg.mkdir(exist_ok=True)
        return cg
    except (OSError, subprocess.CalledProcessError):
        return None


PAGE_IDLE = Path("/sys/kernel/mm/page_idle/bitmap")


def mark_idle(pid: int, starts: dict[int, str], page: int) -> bool:
    """Marks the runner's populated pages idle (``/sys/kernel/mm/page_idle/bitmap``: the
    Accessed bits of their mappings cleared and the folios' idle flag set), as if DAMON had
    just checked each. paddr's ``young`` filter counts a folio without the idle flag as
    young, so without this every page DAMON never sampled (most of them: it samples one page
    per region) passes it, accessed or not; the simulator's populate leaves no page
    accessed. Falls back to clearing the Accessed bits (``clear_refs``) where the kernel has
    no idle page tracking; False then."""
    if not PAGE_IDLE.exists():
        put(Path(f"/proc/{pid}/clear_refs"), 1)
        return False
    words: dict[int, int] = {}
    with open(f"/proc/{pid}/pagemap", "rb") as pm:
        for start in starts:
            end = start
            for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
                lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                if lo == start:
                    end = hi
            pm.seek(start // page * 8)
            data = pm.read((end - start) // page * 8)
            for i in range(0, len(data), 8):
                entry = int.from_bytes(data[i : i + 8], "little")
                if entry >> 63:  # present
                    pfn = entry & ((1 << 55) - 1)
                    words[pfn // 64] = words.get(pfn // 64, 0) | 1 << (pfn % 64)
    with open(PAGE_IDLE, "r+b", buffering=0) as bm:
        for w, bits in sorted(words.items()):
            bm.seek(w * 8)
            bm.write(bits.to_bytes(8, "little"))
    return True


def setup_damos(s: dict[str, Any], memcg_path: str | None) -> list[Path]:
    """Two kdamonds (one paddr context each): migrate_hot over the slow node, migrate_cold
    over the fast node."""
    kd = ADMIN / "kdamonds"
    put(kd / "nr_kdamonds", 2)
    out = []
    for i, hot in enumerate((True, False)):
        k = kd / str(i)
        put(k / "contexts" / "nr_contexts", 1)
        c = k / "contexts" / "0"
        put(c / "operations", "paddr")
        iv = c / "monitoring_attrs" / "intervals"
        put(iv / "sample_us", s["sample_us"])
        put(iv / "aggr_us", s["aggr_us"])
        put(iv / "update_us", s["update_us"])
        nr = c / "monitoring_attrs" / "nr_regions"
        put(nr / "min", s["min_nr_regions"])
        put(nr / "max", s["max_nr_regions"])
        put(c / "targets" / "nr_targets", 1)
        regions = c / "targets" / "0" / "regions"
        put(regions / "nr_regions", 1)
        lo, hi = node_range(s["slow"] if hot else s["fast"])
        put(regions / "0" / "start", lo)
        put(regions / "0" / "end", hi)
        put(c / "schemes" / "nr_schemes", 1)
        sc = c / "schemes" / "0"
        put(sc / "action", "migrate_hot" if hot else "migrate_cold")
        put(sc / "target_nid", s["fast"] if hot else s["slow"])
        put(sc / "apply_interval_us", s["apply_us"])
        ap = sc / "access_pattern"
        # Every range is 0..0 in a new scheme directory: set both ends.
        put(ap / "sz" / "min", s["page"])
        put(ap / "sz" / "max", 2**64 - 1)
        put(ap / "age" / "max", 2**32 - 1)
        max_nr = s["aggr_us"] // s["sample_us"]
        put(ap / "nr_accesses" / "min", s["hot_min_nr_accesses"] if hot else 0)
        put(ap / "nr_accesses" / "max", max_nr if hot else 0)
        put(ap / "age" / "min", 0 if hot else s["cold_min_age"])
        q = sc / "quotas"
        put(q / "ms", 0)
        put(q / "bytes", s["quota_bytes"])
        put(q / "reset_interval_ms", s["quota_reset_ms"])
        put(q / "weights" / "sz_permil", 0)
        put(q / "weights" / "nr_accesses_permil", 100)
        put(q / "weights" / "age_permil", 100)
        put(sc / "watermarks" / "metric", "none")
        # 6.12's filters filter out what they match (``matching``): hot keeps young pages.
        f = sc / "filters"
        put(f / "nr_filters", 2 if memcg_path else 1)
        put(f / "0" / "type", "young")
        put(f / "0" / "matching", "N" if hot else "Y")
        if memcg_path:
            put(f / "1" / "type", "memcg")
            put(f / "1" / "memcg_path", memcg_path)
            put(f / "1" / "matching", "N")
        out.append(k)
    for k in out:
        put(k / "state", "on")
    return out


# kdamond.0-63 [000] ..... 12.345678: damon_aggregated: target_id=0 nr_regions=11 A-B: N AGE
AGGREGATED = re.compile(
    r"^\s*(kdamond\.\d+)-\d+\s.*?(\d+\.\d+): damon_aggregated: target_id=\d+ "
    r"nr_regions=(\d+) (\d+)-(\d+): (\d+) \d+"
)


def aggregations() -> dict[str, list[list[float]]]:
    """Per kdamond, its aggregations from the guest's ``damon:damon_aggregated`` trace:
    ``[time_s, regions, max nr_accesses, bytes with nr_accesses > 0]``."""
    from tierlab.lab.damon_guest import EVENT, TRACING

    put(TRACING / "tracing_on", 0)
    put(EVENT / "enable", 0)
    out: dict[str, list[list[float]]] = {}
    left: dict[str, int] = {}
    for line in (TRACING / "trace").read_text().splitlines():
        m = AGGREGATED.search(line)
        if m is None:
            continue
        comm, nr, size = m.group(1), int(m.group(6)), int(m.group(5)) - int(m.group(4))
        if not left.get(comm):
            out.setdefault(comm, []).append([float(m.group(2)), int(m.group(3)), 0, 0])
            left[comm] = int(m.group(3))
        agg = out[comm][-1]
        agg[2] = max(agg[2], nr)
        agg[3] += size if nr > 0 else 0
        left[comm] -= 1
    return out


def scheme_stats(kdamonds: list[Path]) -> list[dict[str, int]]:
    out = []
    for k in kdamonds:
        put(k / "state", "update_schemes_stats")
        st = k / "contexts" / "0" / "schemes" / "0" / "stats"
        out.append({f.name: int(f.read_text()) for f in st.iterdir() if f.is_file()})
    return out


def numa_balancing_on() -> tuple[dict[str, Any], dict[Path, str]]:
    """Tiering mode on; the settings in force, and the files' old values to restore."""
    if not DEBUG_NB.exists():
        with contextlib.suppress(subprocess.CalledProcessError):
            subprocess.run(["mount", "-t", "debugfs", "none", "/sys/kernel/debug"], check=True)
    nb = Path("/proc/sys/kernel/numa_balancing")
    dem = Path("/sys/kernel/mm/numa/demotion_enabled")
    old = {nb: nb.read_text().strip(), dem: dem.read_text().strip()}
    put(nb, 2)
    put(dem, 1)
    settings: dict[str, Any] = {
        "numa_balancing": int(nb.read_text()),
        "demotion_enabled": dem.read_text().strip(),
    }
    rate = Path("/proc/sys/kernel/numa_balancing_promote_rate_limit_MBps")
    if rate.exists():
        settings["promote_rate_limit_MBps"] = int(rate.read_text())
    for f in ("scan_delay_ms", "scan_period_min_ms", "scan_period_max_ms", "scan_size_mb"):
        if (DEBUG_NB / f).exists():
            settings[f] = int((DEBUG_NB / f).read_text())
    if (DEBUG_NB / "hot_threshold_ms").exists():
        settings["hot_threshold_ms"] = int((DEBUG_NB / "hot_threshold_ms").read_text())
    return settings, old


def main() -> int:
    runner, config, out, mode = sys.argv[1:5]
    s = json.loads(sys.argv[5])
    cg = memcg() if mode == "damos" else None

    def join() -> None:
        if cg is not None:
            put(cg / "cgroup.procs", 0)

    proc = subprocess.Popen(
        [runner, config, str(s["slow"])],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=join,
    )
    assert proc.stdin is not None and proc.stdout is not None
    starts: dict[int, str] = {}
    while True:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"masim_run ended before it was ready ({config})")
        words = line.split()
        if words[0] == "region":
            starts[int(words[2], 16)] = words[1]
        if words[0] == "ready":
            break
    result: dict[str, Any] = {"mode": mode, "settings": s, "regions": list(starts.values())}
    result["page_idle"] = mark_idle(proc.pid, starts, s["page"])
    result["memcg"] = cg is not None
    kdamonds: list[Path] = []
    restore: dict[Path, str] = {}
    samples: list[dict[str, Any]] = []

    def sample(t0: float) -> None:
        samples.append(
            {
                "t": time.monotonic() - t0,
                "vmstat": vmstat(),
                "pages": pages_per_node(proc.pid, starts),
            }
        )

    try:
        if mode == "damos":
            from tierlab.lab.damon_guest import trace_on

            trace_on()
            kdamonds = setup_damos(s, f"/{MEMCG}" if cg is not None else None)
        elif mode == "numa-balancing":
            result["numa_balancing"], restore = numa_balancing_on()
        else:
            raise SystemExit(f"unknown mode {mode!r}")
        t0 = time.monotonic()
        result["t0"] = t0
        sample(t0)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        period = s["period_ms"] / 1000
        while proc.poll() is None:
            time.sleep(max(0.0, period - (time.monotonic() - t0 - samples[-1]["t"])))
            sample(t0)
        if kdamonds:
            result["scheme_stats"] = scheme_stats(kdamonds)
            result["kdamond_pids"] = [int((k / "pid").read_text()) for k in kdamonds]
            result["aggregations"] = aggregations()
    finally:
        for k in kdamonds:
            with contextlib.suppress(OSError):
                put(k / "state", "off")
        for path, value in restore.items():
            put(path, value)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if cg is not None:
            with contextlib.suppress(OSError):
                cg.rmdir()
    result["phases"] = proc.stdout.read()
    result["samples"] = samples
    Path(out).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
