"""``tierlab lab compare tiering``: the guest kernel's tiering mechanisms and tierlab's
simulated ones on the same masim configs, pages promoted and demoted over time.

In the guest (``tierlab.lab.tiering_guest``) ``masim_run`` populates the config's regions on
the slow node and runs it under DAMOS ``migrate_hot``/``migrate_cold`` (``damos``: two
``paddr`` kdamonds, one per node, as ``samples/damon/mtier.c`` sets them up) or NUMA balancing
in tiering mode (``numa-balancing``: ``numa_balancing = 2``, demotion enabled), sampling the
runner's pages per node and masim region (``/proc/PID/numa_maps``) and ``/proc/vmstat`` every
``period_ms`` of the guest's clock. On the host the simulator runs the same config on the lab
machine's nodes (sizes, latencies, bandwidths from the machine file) with the pages populated
on the slow node and the matching policy: ``damon-mtier`` with the guest's two schemes
(intervals, access patterns, quotas, ``young`` filters; no quota goals and no interval
auto-tuning, which 6.12 lacks), or ``numa-tiering`` with the scanner and promotion settings
read back from the guest.

Both sides are reduced to the same quantity: the workload's pages on the fast node per masim
region at each of the guest's sample times (the simulator's from its decision log). Per
interval, ``promoted`` is the sum over regions of the regions' gains on the fast node and
``demoted`` the sum of their losses (net moves per region and interval; the pages are all
populated before the start, so nothing else changes a region's count).
"""

from __future__ import annotations

import itertools
import json
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tierlab.lab.compare import region_sizes
from tierlab.live.units import parse_size

if TYPE_CHECKING:
    import pandas as pd

    from tierlab.lab.machine import Machine

MODES = ("damos", "numa-balancing")
#: The built-in configs the tiering comparison runs by default (one phase-changing).
DEFAULT_CONFIGS = ("zigzag", "hot-cold")
#: vmstat counters reported per interval.
VMSTAT = (
    "pgmigrate_success",
    "pgpromote_success",
    "pgdemote_kswapd",
    "pgdemote_direct",
    "numa_hint_faults",
    "numa_pages_migrated",
)


@dataclass(frozen=True)
class Settings:
    """What the guest sets and the simulator mirrors. DAMOS defaults: mtier.c's monitoring
    attributes, apply interval and size quota (reference/damon-modern.md section 7), with a
    1 s ops update (mtier.c's 60 s only matters for ``vaddr``'s address-space updates)."""

    period_ms: int = 250
    sample_us: int = 5000
    aggr_us: int = 100_000
    update_us: int = 1_000_000
    min_nr_regions: int = 10
    max_nr_regions: int = 1000
    apply_us: int = 1_000_000
    quota_bytes: int = 200 << 20
    quota_reset_ms: int = 1000
    hot_min_nr_accesses: int = 1
    cold_min_age: int = 0
    fast: int = 0
    slow: int = 1

    def guest(self) -> dict[str, Any]:
        return {**asdict(self), "page": parse_size("4KiB")}


def _duration(ms: float) -> str:
    return f"{round(ms * 1000)}us"


def scenario(
    mach: Machine, config: Path, mode: str, st: Settings, nb: dict[str, Any] | None = None
) -> str:
    """The simulator's scenario for one guest run (``nb``: NUMA balancing's settings as the
    guest reported them)."""
    cpus = sum(n.cpus for n in mach.nodes) or 1
    nodes = []
    for n in mach.nodes:
        if n.latency_ns is None:
            raise ValueError(
                f"{mach.source}: node {n.index} has no latency_ns: the tiering comparison "
                "needs each node's latency (an hmat machine)"
            )
        # The workload's cores sit on the slow node, so that first touch (masim's
        # populate) places every page there, as the guest's runner does with
        # MPOL_PREFERRED; CPU-less nodes' latency is the same from any core.
        cores = list(range(cpus)) if n.index == st.slow else []
        bw = (n.bandwidth or 100_000_000_000) / 1e9
        nodes.append(
            f"""[[machine.nodes]]
name = "node{n.index}"
capacity = {n.memory}
latency_ns = {float(n.latency_ns)}
bandwidth_gbps = {bw}
cores = {cores}
tier = {0 if n.index == st.fast else 1}
"""
        )
    if mode == "damos":
        max_nr = st.aggr_us // st.sample_us
        schemes = []
        for hot in (True, False):
            schemes.append(
                f"""[[tiering.schemes]]
action = "{"migrate_hot" if hot else "migrate_cold"}"
target_nid = {st.fast if hot else st.slow}
min_size = "4KiB"
min_nr_accesses = {st.hot_min_nr_accesses if hot else 0}
max_nr_accesses = {max_nr if hot else 0}
min_age = {0 if hot else st.cold_min_age}
apply_interval = "{st.apply_us}us"
[tiering.schemes.quota]
sz = {st.quota_bytes}
reset_interval = "{st.quota_reset_ms}ms"
weight_nr_accesses = 100
weight_age = 100
[[tiering.schemes.filters]]
type = "young"
matching = true
allow = {"true" if hot else "false"}
"""
            )
        policy = f"""[tiering]
kind = "damon-mtier"
fast_node = {st.fast}
slow_node = {st.slow}
sample_interval = "{st.sample_us}us"
aggr_interval = "{st.aggr_us}us"
ops_update_interval = "{st.update_us}us"
min_nr_regions = {st.min_nr_regions}
max_nr_regions = {st.max_nr_regions}
auto_tune = false
apply_interval = "{st.apply_us}us"
quota_reset_interval = "{st.quota_reset_ms}ms"
""" + "".join(schemes)
    elif mode == "numa-balancing":
        nb = nb or {}
        policy = f"""[tiering]
kind = "numa-tiering"
fast_node = {st.fast}
slow_node = {st.slow}
scan_size = "{nb.get("scan_size_mb", 256)}MiB"
scan_period = "{_duration(nb.get("scan_period_min_ms", 1000))}"
scan_delay = "{_duration(nb.get("scan_delay_ms", 1000))}"
scan_period_max = "{_duration(nb.get("scan_period_max_ms", 60000))}"
hot_threshold = "{_duration(nb.get("hot_threshold_ms", 1000))}"
rate_limit_mbps = {float(nb.get("promote_rate_limit_MBps", 65536))}
"""
    else:
        raise ValueError(f"unknown mode {mode!r} (one of {', '.join(MODES)})")
    return f"""name = "lab-tiering-{mode}"
seed = 1
window = "{st.period_ms}ms"
[machine]
cores = {cpus}
{"".join(nodes)}
[workload]
kind = "masim"
populate = true
text = {json.dumps(config.read_text())}

{policy}"""


def simulate(
    mach: Machine, config: Path, mode: str, st: Settings, nb: dict[str, Any] | None = None
) -> tuple[list[tuple[int, str, int]], dict[str, Any]]:
    """The simulated moves ``(time_ns, region, +1 promoted | -1 demoted)`` and the run's
    totals."""
    import tierlab

    text = scenario(mach, config, mode, st, nb)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "lab-tiering.toml"
        path.write_text(text)
        r = tierlab.run(str(path))
    if r.error:
        raise RuntimeError(f"the simulation of {config.name} ({mode}) failed: {r.error}")
    names = {n for n, _ in region_sizes(config)}
    maps = [(m["start"], m["start"] + m["length"], m["name"]) for m in r.mappings]
    maps = [m for m in maps if m[2] in names]
    dec = r.decisions
    moves = []
    cols = (dec.get(k, []) for k in ("time_ns", "action", "addr", "node", "moved"))
    for t, _action, addr, node, moved in zip(*cols, strict=True):
        if not moved:
            continue
        for lo, hi, name in maps:
            if lo <= int(addr) < hi:
                moves.append((int(t), name, 1 if int(node) == st.fast else -1))
                break
    flat = r.stats_flat
    totals: dict[str, Any] = {
        k: float(str(flat[k]))
        for k in ("tiering.promoted_pages", "tiering.demoted_pages")
        if k in flat
    }
    return moves, totals


def table(guest: dict[str, Any], moves: list[tuple[int, str, int]]) -> pd.DataFrame:
    """One row per guest sample interval: promoted/demoted pages (net per region), real and
    simulated, the guest's vmstat deltas and each region's fast-node pages on both sides."""
    import pandas as pd

    fast = f"N{guest['settings']['fast']}"
    regions = guest["regions"]
    samples = guest["samples"]
    rows = []
    prev_real = {r: samples[0]["pages"].get(r, {}).get(fast, 0) for r in regions}
    prev_sim = dict.fromkeys(regions, 0)
    sim_at = dict.fromkeys(regions, 0)
    moves = sorted(moves)
    j = 0
    for a, b in itertools.pairwise(samples):
        t_ns = int(b["t"] * 1e9)
        while j < len(moves) and moves[j][0] <= t_ns:
            sim_at[moves[j][1]] += moves[j][2]
            j += 1
        real = {r: b["pages"].get(r, {}).get(fast, prev_real[r]) for r in regions}
        row: dict[str, Any] = {"t_s": round(b["t"], 3)}
        dr = [real[r] - prev_real[r] for r in regions]
        ds = [sim_at[r] - prev_sim[r] for r in regions]
        row["real_promoted"] = sum(d for d in dr if d > 0)
        row["real_demoted"] = -sum(d for d in dr if d < 0)
        row["sim_promoted"] = sum(d for d in ds if d > 0)
        row["sim_demoted"] = -sum(d for d in ds if d < 0)
        for k in VMSTAT:
            row[k] = b["vmstat"].get(k, 0) - a["vmstat"].get(k, 0)
        for r in regions:
            row[f"real_fast_{r}"] = real[r]
            row[f"sim_fast_{r}"] = sim_at[r]
        rows.append(row)
        prev_real, prev_sim = real, dict(sim_at)
    return pd.DataFrame(rows)


def _first(tab: pd.DataFrame, side: str, regions: list[str]) -> tuple[float | None, str | None]:
    """When the first promotion shows on a side, and the region with most fast pages then."""
    prev = dict.fromkeys(regions, 0)
    for _, row in tab.iterrows():
        gain = {r: row[f"{side}_fast_{r}"] - prev[r] for r in regions}
        if max(gain.values()) > 0:
            return float(row.t_s), max(gain, key=lambda r: gain[r])
        prev = {r: row[f"{side}_fast_{r}"] for r in regions}
    return None, None


def summary(tab: pd.DataFrame, guest: dict[str, Any], sim_totals: dict[str, Any]) -> dict[str, Any]:
    regions = guest["regions"]
    out: dict[str, Any] = {"intervals": len(tab)}
    if not len(tab):
        return out
    for k in ("real_promoted", "real_demoted", "sim_promoted", "sim_demoted"):
        out[k] = int(tab[k].sum())
    for side in ("real", "sim"):
        t, r = _first(tab, side, regions)
        out[f"{side}_first_promotion_s"] = t
        out[f"{side}_first_promoted_region"] = r
        last = tab.iloc[-1]
        out[f"{side}_fast_at_end"] = {r: int(last[f"{side}_fast_{r}"]) for r in regions}
    for k in VMSTAT:
        out[f"vmstat_{k}"] = int(tab[k].sum())
    out["sim_gross_promoted"] = int(sim_totals.get("tiering.promoted_pages", 0))
    out["sim_gross_demoted"] = int(sim_totals.get("tiering.demoted_pages", 0))
    if "scheme_stats" in guest:
        out["damos_sz_applied_mib"] = [
            round(s.get("sz_applied", 0) / (1 << 20), 1) for s in guest["scheme_stats"]
        ]
    if "page_idle" in guest:
        out["page_idle"] = guest["page_idle"]
    for comm, aggs in sorted(guest.get("aggregations", {}).items()):
        # One kdamond per node (kdamond.0: the slow node's, migrate_hot): how long its
        # aggregations took in the guest, and how many saw any access in the slow node.
        span = aggs[-1][0] - aggs[0][0] if len(aggs) > 1 else 0.0
        out[f"{comm}_aggregations"] = len(aggs)
        out[f"{comm}_aggr_ms"] = round(1000 * span / (len(aggs) - 1), 1) if len(aggs) > 1 else None
        out[f"{comm}_accessed_aggregations"] = sum(1 for a in aggs if a[2] > 0)
    if "numa_balancing" in guest:
        out["numa_balancing"] = guest["numa_balancing"]
    return out


def run_guest(
    lab: Any, runner: Path, config: Path, mode: str, st: Settings, out: Path
) -> dict[str, Any]:
    res = lab.run(
        [
            sys.executable,
            "-m",
            "tierlab.lab.tiering_guest",
            str(runner),
            str(config),
            str(out),
            mode,
            json.dumps(st.guest()),
        ],
        timeout=900,
    )
    if res.code != 0:
        raise RuntimeError(f"the guest's {mode} run of {config.name} failed:\n{res.stderr[-3000:]}")
    guest: dict[str, Any] = json.loads(out.read_text())
    if len(guest["samples"]) < 2:
        raise RuntimeError(f"the guest's {mode} run of {config.name} took fewer than 2 samples")
    return guest


def compare(
    lab: Any, mach: Machine, config: Path, mode: str, st: Settings, work: Path, runner: Path
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Kernel vs simulator on one masim config and one mechanism (``lab``: a booted
    :class:`Lab` whose results directory is ``work``): the per-interval table and its
    summary."""
    import shutil

    guest_cfg = work / config.name
    if guest_cfg.resolve() != config.resolve():
        shutil.copyfile(config, guest_cfg)
    guest = run_guest(lab, runner, guest_cfg, mode, st, work / f"{config.stem}.{mode}.guest.json")
    moves, totals = simulate(mach, config, mode, st, guest.get("numa_balancing"))
    tab = table(guest, moves)
    return tab, summary(tab, guest, totals)


def main(args: Any) -> int:
    """``tierlab lab compare tiering`` (the options of :func:`tierlab.lab.compare.add_parser`)."""
    from tierlab.cli.common import EXIT_USAGE, print_error
    from tierlab.lab import machine as mm
    from tierlab.lab.compare import build_runner, resolve_config
    from tierlab.lab.kernel import LabSetupError
    from tierlab.lab.vm import Lab, LabError

    try:
        configs = [resolve_config(c) for c in (args.config or DEFAULT_CONFIGS)]
        mach = mm.load(args.machine)
    except (ValueError, mm.MachineError) as e:
        print_error(str(e))
        return EXIT_USAGE
    if args.min_nr_regions > args.max_nr_regions or args.sample_us > args.aggr_us:
        print_error("need --min-nr-regions <= --max-nr-regions and --sample-us <= --aggr-us")
        return EXIT_USAGE
    if len(mach.nodes) < 2 or mach.slow_tier == "none":
        print_error(f"{mach.source}: the tiering comparison needs a machine with a slow tier")
        return EXIT_USAGE
    st = Settings(
        period_ms=args.period_ms,
        sample_us=args.sample_us,
        aggr_us=args.aggr_us,
        update_us=args.update_us,
        min_nr_regions=args.min_nr_regions,
        max_nr_regions=args.max_nr_regions,
        apply_us=args.apply_us,
        quota_bytes=args.quota,
        quota_reset_ms=args.quota_reset_ms,
        hot_min_nr_accesses=args.hot_min_nr_accesses,
        cold_min_age=args.cold_min_age,
        fast=0,
        slow=len(mach.nodes) - 1,
    )
    modes = MODES if args.mode == "both" else (args.mode,)
    work = args.results.resolve()
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    try:
        runner = build_runner(work)
        scenario(mach, configs[0], modes[0], st)  # refuses a machine without latencies early
        with Lab(mach, work) as lab:
            for cfg in configs:
                for mode in modes:
                    tab, summ = compare(lab, mach, cfg, mode, st, work, runner)
                    tab.to_csv(work / f"{cfg.stem}.{mode}.compare.csv", index=False)
                    results[f"{cfg.stem}/{mode}"] = summ
    except (LabSetupError, LabError, RuntimeError, ValueError) as e:
        print_error(str(e))
        return EXIT_USAGE
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for name, s in results.items():
            print(
                f"{name}: promoted real {s.get('real_promoted')} / sim {s.get('sim_promoted')}, "
                f"demoted real {s.get('real_demoted')} / sim {s.get('sim_demoted')}, first "
                f"promoted region real {s.get('real_first_promoted_region')} "
                f"({s.get('real_first_promotion_s')} s) / sim "
                f"{s.get('sim_first_promoted_region')} ({s.get('sim_first_promotion_s')} s)"
            )
    return 0
