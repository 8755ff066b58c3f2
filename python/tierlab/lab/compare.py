"""``tierlab lab compare damon``: the guest kernel's DAMON and tierlab's simulated DAMON on the
same masim configs with the same attributes, compared per aggregation interval.

In the guest, ``masim_run`` (``masim_run.c``, built on the host) runs the config and
``tierlab.lab.damon_guest`` drives the guest kernel's DAMON (``vaddr``, sysfs) on it, writing
every aggregation's regions as ``damo record`` JSON. On the host the simulator runs the same
config (a ``masim`` workload, a ``damon`` telemetry with the same intervals and region limits,
``record = true``). Both records are read with tierlab's damo importer
(``tierlab.live.imports.import_damo``). Addresses differ (the kernel's mmap places the regions
where it likes, the simulator from its own base), so both are mapped onto the masim regions
laid end to end (offset within the config), and regions outside them (the runner's code,
libraries, stack: the kernel monitors the whole address space) are left out.

Per aggregation (the kernel's snapshots matched to the simulator's by guest time: snapshot
``k`` covers ``[k x aggr, (k + 1) x aggr)``):

- ``regions``: DAMON regions that overlap the masim regions;
- ``wss``: bytes of the masim regions in regions with ``nr_accesses > 0``;
- ``hot``: the bytes in regions whose ``nr_accesses`` is at least half the snapshot's
  maximum; ``hot_jaccard`` = |kernel hot & simulated hot| / |kernel hot | simulated hot|;
- ``hot_region``: the masim region with the most hot bytes; ``same_hot_region`` whether both
  name the same one.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tierlab.live.units import parse_size

if TYPE_CHECKING:
    import pandas as pd

#: Built-in masim configs for the comparison (``tierlab/lab/masim/``).
MASIM_DIR = Path(__file__).parent / "masim"
RUNNER_SOURCE = Path(__file__).parent / "masim_run.c"


@dataclass(frozen=True)
class Attrs:
    sample_us: int = 5000
    aggr_us: int = 100_000
    update_us: int = 1_000_000
    min_nr_regions: int = 10
    max_nr_regions: int = 1000

    def argv(self) -> list[str]:
        return [
            str(v)
            for v in (
                self.sample_us,
                self.aggr_us,
                self.update_us,
                self.min_nr_regions,
                self.max_nr_regions,
            )
        ]


def builtin_configs() -> list[str]:
    return sorted(p.stem for p in MASIM_DIR.glob("*.cfg"))


def resolve_config(name: str) -> Path:
    p = Path(name)
    if p.is_file():
        return p
    q = MASIM_DIR / f"{name}.cfg"
    if q.is_file():
        return q
    raise ValueError(
        f"{name!r}: no such masim config (built-in: {', '.join(builtin_configs())}; or a file)"
    )


def region_sizes(config: Path) -> list[tuple[str, int]]:
    """The config's regions (name, bytes), from its first paragraph."""
    out = []
    for line in config.read_text().split("\n\n", 1)[0].splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, size = (f.strip() for f in line.split(",")[:2])
        out.append((name, parse_size(size)))
    return out


def build_runner(dest: Path) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("no C compiler (cc) to build the lab's masim runner")
    out = dest / "masim_run"
    subprocess.run([cc, "-O2", "-o", str(out), str(RUNNER_SOURCE)], check=True)
    return out


def simulate(config: Path, attrs: Attrs, seed: int = 1) -> tuple[str, list[int]]:
    """The simulator's damo record (JSON) of ``config``, and the regions' base addresses."""
    import tierlab

    text = config.read_text()
    scenario = f"""name = "lab-damon"
seed = {seed}
window = "{attrs.aggr_us}us"
[machine]
cores = 1
[workload]
kind = "masim"
text = {json.dumps(text)}
[[telemetry]]
name = "DAMON"
kind = "damon"
sample_interval = "{attrs.sample_us}us"
aggr_interval = "{attrs.aggr_us}us"
ops_update_interval = "{attrs.update_us}us"
min_nr_regions = {attrs.min_nr_regions}
max_nr_regions = {attrs.max_nr_regions}
record = true
"""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "lab-damon.toml"
        path.write_text(scenario)
        r = tierlab.run(str(path))
    record = r.damo_records["DAMON"]
    # The simulator maps the masim regions in order, each from a 2 MiB boundary, with a
    # 2 MiB gap after it (os::Machine::mmap); the first at the lowest region start.
    snaps = json.loads(record)[0]["snapshots"]
    base0 = min(int(x["start"]) for x in snaps[0]["regions"])
    huge = parse_size("2MiB")
    page = parse_size("4KiB")
    bases = []
    at = base0
    for _name, size in region_sizes(config):
        bases.append(at)
        end = at + -(-size // page) * page
        at = -(-end // huge) * huge + huge
    return record, bases


def load_regions(record_json: str, work: Path, label: str) -> pd.DataFrame:
    """A damo record, read with tierlab's damo importer: one row per region per snapshot."""
    from tierlab.live.imports import import_damo
    from tierlab.recording import Recording

    src = work / f"{label}.json"
    src.write_text(record_json)
    out = work / f"{label}.rec"
    import_damo([src], out, overwrite=True)
    return Recording.open(out).regions()


def normalise(df: pd.DataFrame, bases: list[int], sizes: list[int]) -> pd.DataFrame:
    """Regions clipped to the masim regions, as offsets in the regions laid end to end."""
    import numpy as np
    import pandas as pd

    rows = []
    cum = np.cumsum([0, *sizes]).tolist()
    cols = (df[c].tolist() for c in ("time_ns", "start", "end", "nr_accesses"))
    for t, start, end, nr in zip(*cols, strict=True):
        for i, (b, s) in enumerate(zip(bases, sizes, strict=True)):
            lo, hi = max(int(start), b), min(int(end), b + s)
            if lo < hi:
                rows.append((int(t), cum[i] + lo - b, cum[i] + hi - b, int(nr), i))
    return pd.DataFrame(rows, columns=["time_ns", "lo", "hi", "nr_accesses", "region"])


def _hot(snap: pd.DataFrame) -> list[tuple[int, int]]:
    top = snap.nr_accesses.max() if len(snap) else 0
    if top <= 0:
        return []
    h = snap[snap.nr_accesses * 2 >= top]
    return sorted(zip(h.lo.tolist(), h.hi.tolist(), strict=True))


def _overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    n = 0
    for lo, hi in a:
        for lo2, hi2 in b:
            n += max(0, min(hi, hi2) - max(lo, lo2))
    return n


def _hot_region(snap: pd.DataFrame) -> int:
    top = snap.nr_accesses.max() if len(snap) else 0
    if top <= 0:
        return -1
    h = snap[snap.nr_accesses * 2 >= top]
    import numpy as np

    per_region = (h.hi - h.lo).groupby(h.region).sum()
    return int(per_region.index.tolist()[int(np.argmax(per_region.to_numpy()))])


def compare_snapshots(kernel: pd.DataFrame, sim: pd.DataFrame, aggr_ns: int) -> pd.DataFrame:
    """One row per kernel snapshot with the simulated snapshot of the same aggregation."""
    import pandas as pd

    sim_snaps = {int(str(t)) // aggr_ns: g for t, g in sim.groupby("time_ns")}
    rows = []
    for t, k in kernel.groupby("end_ns"):
        idx = max(0, round(int(str(t)) / aggr_ns) - 1)
        s = sim_snaps.get(idx)
        if s is None:
            continue
        hk, hs = _hot(k), _hot(s)
        inter = _overlap(hk, hs)
        union = sum(h - lo for lo, h in hk) + sum(h - lo for lo, h in hs) - inter
        rows.append(
            {
                "aggregation": idx,
                "kernel_regions": len(k),
                "sim_regions": len(s),
                "kernel_wss": int((k.hi - k.lo)[k.nr_accesses > 0].sum()),
                "sim_wss": int((s.hi - s.lo)[s.nr_accesses > 0].sum()),
                "kernel_max_nr": int(k.nr_accesses.max()),
                "sim_max_nr": int(s.nr_accesses.max()),
                "hot_jaccard": inter / union if union else 1.0,
                "kernel_hot_region": _hot_region(k),
                "sim_hot_region": _hot_region(s),
            }
        )
    out = pd.DataFrame(rows)
    if len(out):
        out["same_hot_region"] = out.kernel_hot_region == out.sim_hot_region
    return out


def summary(table: pd.DataFrame) -> dict[str, Any]:
    if not len(table):
        return {"aggregations": 0}
    return {
        "aggregations": len(table),
        "kernel_regions": float(table.kernel_regions.mean()),
        "sim_regions": float(table.sim_regions.mean()),
        "kernel_wss_mib": float(table.kernel_wss.mean() / (1 << 20)),
        "sim_wss_mib": float(table.sim_wss.mean() / (1 << 20)),
        "hot_jaccard": float(table.hot_jaccard.mean()),
        "same_hot_region": float(table.same_hot_region.mean()),
    }


def run_guest(
    lab: Any, runner: Path, config: Path, attrs: Attrs, out: Path
) -> tuple[str, list[int]]:
    """Runs the config under the guest kernel's DAMON; its damo record and region bases."""
    import sys

    res = lab.run(
        [
            sys.executable,
            "-m",
            "tierlab.lab.damon_guest",
            str(runner),
            str(config),
            str(out),
            *attrs.argv(),
        ],
        timeout=900,
    )
    if res.code != 0:
        raise RuntimeError(f"the guest's DAMON run of {config} failed:\n{res.stderr[-3000:]}")
    info = json.loads(Path(str(out) + ".regions").read_text())
    names = [n for n, _ in region_sizes(config)]
    bases = [int(info["bases"][n][0]) for n in names]
    return out.read_text(), bases


def compare(lab: Any, config: Path, attrs: Attrs, work: Path, runner: Path) -> pd.DataFrame:
    """Kernel vs simulator on one masim config (``lab``: a booted :class:`Lab` whose results
    directory is ``work``)."""
    sizes = [s for _n, s in region_sizes(config)]
    guest_cfg = work / config.name
    if guest_cfg.resolve() != config.resolve():
        shutil.copyfile(config, guest_cfg)
    krec, kbases = run_guest(lab, runner, guest_cfg, attrs, work / f"{config.stem}.kernel.json")
    srec, sbases = simulate(config, attrs)
    kt = load_regions(krec, work, f"{config.stem}.kernel")
    k = normalise(kt, kbases, sizes)
    s = normalise(load_regions(srec, work, f"{config.stem}.sim"), sbases, sizes)
    # The snapshot's end (the guest's time when the aggregation ended) names it.
    ends = dict(zip(kt.time_ns.tolist(), kt.end_ns.tolist(), strict=True))
    k["end_ns"] = k.time_ns.map(ends)
    return compare_snapshots(k, s, attrs.aggr_us * 1000)


def add_parser(what: argparse._SubParsersAction) -> argparse.ArgumentParser:
    c = what.add_parser(
        "compare",
        help="the guest kernel's DAMON and tiering against tierlab's simulated ones",
        description="damon: runs masim configs under the guest kernel's DAMON (vaddr, sysfs) "
        "and under tierlab's simulated DAMON with the same attributes, and compares them per "
        "aggregation: regions, working set size, hot regions. tiering: runs masim configs "
        "whose pages start on the slow node under the guest's DAMOS migrate_hot/migrate_cold "
        "and NUMA balancing in tiering mode, and under the simulator's damon-mtier and "
        "numa-tiering with the same settings: pages promoted and demoted per interval. "
        "See docs/lab.md.",
    )
    c.add_argument("mechanism", choices=("damon", "tiering"), help="what to compare")
    c.add_argument("machine", help="built-in machine name or machine file")
    c.add_argument(
        "--config",
        action="append",
        metavar="MASIM",
        help=f"masim config file or built-in name (default: damon: all of "
        f"{', '.join(builtin_configs())}; tiering: zigzag, hot-cold)",
    )
    from tierlab.cli.common import int_in

    us = int_in(1, 10**9, "microseconds")
    nr = int_in(3, 1 << 20, "a number of regions")
    c.add_argument("--sample-us", type=us, default=5000, help="sampling interval (5000)")
    c.add_argument("--aggr-us", type=us, default=100_000, help="aggregation interval (100000)")
    c.add_argument("--update-us", type=us, default=1_000_000, help="ops update (1000000)")
    c.add_argument("--min-nr-regions", type=nr, default=10, help="min_nr_regions (10)")
    c.add_argument("--max-nr-regions", type=nr, default=1000, help="max_nr_regions (1000)")
    t = c.add_argument_group("tiering")
    t.add_argument(
        "--mode",
        choices=("damos", "numa-balancing", "both"),
        default="both",
        help="the kernel mechanism: DAMOS migrate_hot/migrate_cold (damon-mtier), NUMA "
        "balancing in tiering mode (numa-tiering), or both (default)",
    )
    ms = int_in(1, 10**7, "milliseconds")
    t.add_argument(
        "--period-ms", type=ms, default=250, help="guest sampling period and sim window (250)"
    )
    t.add_argument("--apply-us", type=us, default=1_000_000, help="DAMOS apply interval (1000000)")
    t.add_argument(
        "--quota", type=_size, default="200MiB", help="DAMOS size quota per window (200MiB)"
    )
    t.add_argument("--quota-reset-ms", type=ms, default=1000, help="DAMOS quota window (1000)")
    t.add_argument(
        "--hot-min-nr-accesses",
        type=int_in(1, 10**6, "samples"),
        default=1,
        help="migrate_hot's smallest nr_accesses (1)",
    )
    t.add_argument(
        "--cold-min-age",
        type=int_in(0, 10**6, "aggregations"),
        default=0,
        help="migrate_cold's smallest age (0)",
    )
    c.add_argument(
        "--results",
        type=Path,
        default=Path("lab-compare"),
        help="directory shared read-write with the guest: the kernel's and the simulator's "
        "records and the comparison tables (default: lab-compare)",
    )
    c.add_argument("--json", action="store_true", help="print the summaries as JSON")
    c.set_defaults(func=main, parser=c)
    return c  # type: ignore[no-any-return]


def _size(text: str) -> int:
    try:
        v = parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a size > 0")
    return v


def main(args: argparse.Namespace) -> int:
    """`tierlab lab compare damon` (`tierlab lab compare tiering` is
    :func:`tierlab.lab.tiering_compare.main`)."""
    from tierlab.cli.common import EXIT_USAGE, print_error
    from tierlab.lab import machine as mm
    from tierlab.lab.kernel import LabSetupError
    from tierlab.lab.vm import Lab, LabError

    try:
        configs = [resolve_config(c) for c in (args.config or builtin_configs())]
        mach = mm.load(args.machine)
    except (ValueError, mm.MachineError) as e:
        print_error(str(e))
        return EXIT_USAGE
    if args.min_nr_regions > args.max_nr_regions or args.sample_us > args.aggr_us:
        print_error("need --min-nr-regions <= --max-nr-regions and --sample-us <= --aggr-us")
        return EXIT_USAGE
    attrs = Attrs(
        args.sample_us, args.aggr_us, args.update_us, args.min_nr_regions, args.max_nr_regions
    )
    work = args.results.resolve()
    work.mkdir(parents=True, exist_ok=True)
    runner = build_runner(work)
    results = {}
    try:
        with Lab(mach, work) as lab:
            for cfg in configs:
                table = compare(lab, cfg, attrs, work, runner)
                table.to_csv(work / f"{cfg.stem}.compare.csv", index=False)
                results[cfg.stem] = summary(table)
    except (LabSetupError, LabError, RuntimeError) as e:
        print_error(str(e))
        return EXIT_USAGE
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for name, s in results.items():
            print(f"{name}: " + ", ".join(f"{k} {v:.3g}" for k, v in s.items()))
    return 0
