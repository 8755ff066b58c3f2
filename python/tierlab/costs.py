"""What a built-in scenario costs to run, measured, and what any sweep will cost, estimated.

``scenario_costs.json`` (beside this module, checked in) holds, for every built-in scenario,
the CPU time and the peak resident memory of the command that runs it (``tierlab run NAME``
or ``tierlab telemetry NAME``, with ``--out``, two jobs), measured on the reference machine
(the 2-core VM of docs/benchmarks.md) by ``tierlab bench costs --write`` (``make costs``).
A measured command's CPU time is split into what any run of the command costs (``fixed``:
starting, drawing and writing, measured once per command with a run of a few simulated
milliseconds) and its points', shared among them in proportion to their run times. A
scenario may be measured in its ``--quick`` form (``measured_as = "quick"``); its full cost
is then extrapolated as below.

:func:`estimate` prices any list of sweep points: a point measured under the same label
costs its measured CPU time scaled by what its cost grows with (:func:`point_driver`: the
simulated seconds, or the iterations of a workload that runs to its end), another point of
the scenario its mean point so scaled; each scenario adds its command's fixed cost once.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tierlab.sweep.point import Point

#: The checked-in measurements.
COSTS_FILE = Path(__file__).with_name("scenario_costs.json")

#: A scenario whose measured run takes longer than this many CPU seconds is marked long in
#: ``tierlab scenarios`` (and its command's ``--quick`` suggested).
LONG_CPU_SECONDS = 120.0

#: Points at a time of the measured commands (the sweep commands' default).
MEASURE_JOBS = 2


@dataclass
class ScenarioCost:
    """One scenario's measured run: ``command`` (``run`` or ``telemetry``), CPU seconds (user
    + system, the command and its worker processes), peak resident bytes (of the largest
    process), wall seconds, points run and what their cost grows with."""

    name: str
    command: str
    cpu_seconds: float
    peak_rss_bytes: int
    wall_seconds: float
    points: int
    #: the points' drivers in all (see :func:`point_driver`)
    driver: float
    #: CPU seconds of any run of the command (start, drawing, writing), in cpu_seconds
    fixed_cpu_seconds: float = 0.0
    #: "full" or "quick": the form of the command measured by ``tierlab bench costs``;
    #: "docs": the full command's CPU time and peak RSS as docs/benchmarks.md records them
    #: (``measured`` says on which machine and commit; 0 bytes: not recorded)
    measured_as: str = "full"
    #: CPU seconds of the full command: measured, or, measured as quick, at most this (the
    #: quick form's points scaled linearly by their drivers; a point's setup, which does not
    #: grow with the simulated time, makes the full run cheaper than that)
    full_cpu_seconds: float = 0.0
    #: CPU seconds each point spends before it simulates (building its address space: the
    #: page tables of telescope-5tb's 5 TiB heap), which does not grow with the driver;
    #: included in ``cpu_seconds`` and ``per_point``
    setup_cpu_seconds: float = 0.0
    #: share of each measured point's CPU spent writing its samples as recordings with
    #: their views (``telemetry --out`` keeps them); a point that keeps no samples
    #: (``tierlab reproduce``'s) costs the rest
    samples_share: float = 0.0
    #: label -> (CPU seconds, driver) of each point: the total CPU time shared among the
    #: points in proportion to their wall times
    per_point: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: label -> (CPU seconds, driver) of points measured keeping no samples (run by
    #: ``tierlab reproduce``, e.g. the PEBS paper's Fig. 3 runs of ``pebs-minife``)
    per_point_bare: dict[str, tuple[float, float]] = field(default_factory=dict)
    measured: dict[str, str] = field(default_factory=dict)

    @property
    def long(self) -> bool:
        return self.full_cpu_seconds > LONG_CPU_SECONDS

    def cpu_per_point(self) -> float:
        return max(self.cpu_seconds - self.fixed_cpu_seconds, 0.0) / max(self.points, 1)


def load(path: Path = COSTS_FILE) -> dict[str, ScenarioCost]:
    """The measured costs by scenario name (empty when the file is missing)."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    fields = set(ScenarioCost.__dataclass_fields__)
    out = {}
    for name, entry in doc.get("scenarios", {}).items():
        c = ScenarioCost(name=name, **{k: v for k, v in entry.items() if k in fields})
        c.per_point = {k: (float(v[0]), float(v[1])) for k, v in c.per_point.items()}
        c.per_point_bare = {k: (float(v[0]), float(v[1])) for k, v in c.per_point_bare.items()}
        out[name] = c
    return out


def _entry(c: ScenarioCost) -> dict[str, Any]:
    """A scenario's fields for the file: those measured, without the ones left at their
    defaults (so writing one scenario's cost leaves the others' entries as they were)."""
    required = ("command", "cpu_seconds", "peak_rss_bytes", "wall_seconds", "points", "driver")
    blank = ScenarioCost(c.name, *(getattr(c, k) for k in required))
    keep = {*required, "measured_as", "full_cpu_seconds", "fixed_cpu_seconds", "per_point"}
    return {
        k: v for k, v in asdict(c).items() if k != "name" and (k in keep or v != getattr(blank, k))
    }


def save(costs: dict[str, ScenarioCost], path: Path = COSTS_FILE) -> None:
    doc = {
        "about": "Measured cost of every built-in scenario's command on the reference machine "
        "(tierlab bench costs --write); read by tierlab scenarios and --dry-run.",
        "scenarios": {name: _entry(c) for name, c in sorted(costs.items())},
    }
    path.write_text(json.dumps(doc, indent=1) + "\n")


# ---------------------------------------------------------------------------------------
# Human units


def human_seconds(s: float) -> str:
    """``0.4 s``, ``12 s``, ``3 min 48 s``, ``1 h 02 min``."""
    if s < 10:
        return f"{s:.1f} s"
    if s < 60:
        return f"{s:.0f} s"
    m, sec = divmod(round(s), 60)
    if m < 60:
        return f"{m} min {sec:02d} s"
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min"


def short_seconds(s: float) -> str:
    """``45 s``, ``3.8 min``, ``22 min``, ``1.5 h``: a coarse duration for a table."""
    if s < 60:
        return f"{s:.0f} s" if s >= 10 else f"{s:.1f} s"
    if s < 3600:
        m = s / 60
        return f"{m:.1f} min" if m < 10 else f"{m:.0f} min"
    h = s / 3600
    return f"{h:.1f} h" if h < 10 else f"{h:.0f} h"


def cost_text(cost: ScenarioCost) -> str:
    """The CPU time of a scenario's command for a table: ``3.5 s``; measured as quick, the
    range it lies in: ``3.8 min .. 22 min``."""
    if cost.measured_as == "full":
        return short_seconds(cost.cpu_seconds)
    if cost.measured_as == "docs":
        return f"{short_seconds(cost.cpu_seconds)} (b)"
    return f"{short_seconds(cost.cpu_seconds)} .. {short_seconds(cost.full_cpu_seconds)}"


def human_bytes(n: float) -> str:
    """``232 MiB``, ``1.9 GiB`` (two or three significant digits)."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v >= 10 else f"{v:.1f} {unit}"
    return f"{n:.0f} B"


# ---------------------------------------------------------------------------------------
# Estimating

_DURATION = re.compile(r'^duration\s*=\s*"([^"]+)"', re.M)
_ITERATIONS = re.compile(r"^iterations\s*=\s*(\d+)", re.M)
_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}


def _seconds(text: str) -> float | None:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", text)
    if m is None or m.group(2) not in _UNITS:
        return None
    return float(m.group(1)) * _UNITS[m.group(2)]


@functools.lru_cache(maxsize=4096)
def expanded(spec: str, overrides: tuple[str, ...], seed: int | None) -> str:
    """A point's expanded scenario (``_native.export``), kept: a dry run prices and checks
    the same points, and the sensitivity sweeps repeat the figures' own."""
    from tierlab import _native

    return str(_native.export(spec, list(overrides), seed))


def point_driver(
    spec: str, overrides: Sequence[str], seed: int | None, toml: str | None = None
) -> float:
    """What a point's cost grows with: its simulated seconds (the expanded scenario's
    ``duration``), or, for a workload that runs to its natural end, its iterations (1 when it
    has neither). ``toml``: the point's expanded scenario, when the caller has it."""

    if toml is None:
        toml = expanded(spec, tuple(overrides), seed)
    m = _DURATION.search(toml)
    if m is not None:
        seconds = _seconds(m.group(1))
        if seconds:
            return seconds
    m = _ITERATIONS.search(toml)
    return float(m.group(1)) if m is not None and int(m.group(1)) > 0 else 1.0


@dataclass
class Estimate:
    """A sweep's estimated cost: CPU seconds, the largest process's peak memory, how many
    points, and the scenarios without a measured cost (their points are not counted)."""

    cpu_seconds: float = 0.0
    peak_rss_bytes: int = 0
    points: int = 0
    unpriced: list[str] = field(default_factory=list)

    def add(self, other: Estimate) -> None:
        self.cpu_seconds += other.cpu_seconds
        self.peak_rss_bytes = max(self.peak_rss_bytes, other.peak_rss_bytes)
        self.points += other.points
        self.unpriced.extend(u for u in other.unpriced if u not in self.unpriced)

    def text(self, jobs: int = MEASURE_JOBS) -> str:
        """``~4 min 10 s of CPU (~2 min 05 s with 2 jobs), peak ~232 MiB per process``."""
        if not self.points:
            return "nothing to run"
        if self.unpriced and not self.cpu_seconds:
            return f"cost unknown (no measured cost for {', '.join(self.unpriced)})"
        used = max(min(jobs, self.points), 1)
        out = (
            f"~{human_seconds(self.cpu_seconds)} of CPU (~{human_seconds(self.cpu_seconds / used)}"
            f" with {used} job{'s' if used != 1 else ''})"
        )
        if self.peak_rss_bytes:
            out += f", peak ~{human_bytes(self.peak_rss_bytes)} per process"
        if self.unpriced:
            out += f"; no measured cost for {', '.join(self.unpriced)} (not counted)"
        return out


def point_cost(cost: ScenarioCost, label: str, driver: float, samples: bool = True) -> float:
    """One point's estimated CPU seconds: its setup (:attr:`ScenarioCost.setup_cpu_seconds`)
    plus the rest of the measured point of the same label scaled by the driver (see
    :func:`point_driver`), else of the scenario's mean point so scaled."""
    setup = cost.setup_cpu_seconds
    per = cost.per_point.get(label)
    bare = cost.per_point_bare.get(label)
    if bare is not None:
        cpu, measured_driver = bare
    elif per is not None:
        cpu, measured_driver = per
    else:
        cpu, measured_driver = cost.cpu_per_point(), cost.driver / max(cost.points, 1)
    if not samples and bare is None:
        cpu *= 1.0 - cost.samples_share
    rest = max(cpu - setup, 0.0)
    return setup + (rest * driver / measured_driver if measured_driver > 0 else rest)


def estimate(
    points: Iterable[Point],
    costs: dict[str, ScenarioCost] | None = None,
    done: set[tuple[Any, ...]] | None = None,
) -> Estimate:
    """The estimated cost of running ``points`` (see the module docs). ``done``: the points
    priced already (their expanded scenario, techniques and seed), shared between calls: a
    point that runs the same simulation as one of them is reused, not priced again (as the
    sweep engine's store reuses it), and each new one is added."""

    costs = load() if costs is None else costs
    est = Estimate()
    seen: set[str] = set()
    from tierlab import _native

    for pt in points:
        est.points += 1
        cost = costs.get(pt.spec)
        if cost is None:
            if pt.spec not in est.unpriced:
                est.unpriced.append(pt.spec)
            continue
        try:
            toml = expanded(pt.spec, tuple(pt.overrides), pt.seed)
        except _native.ScenarioError:
            # A point that does not build is reported by the run itself (one line naming
            # it, the other points going on): here it is only left unpriced.
            if pt.spec not in est.unpriced:
                est.unpriced.append(pt.spec)
            continue
        if done is not None:
            key = (toml, pt.techniques, pt.seed, pt.keep_samples)
            if key in done:
                continue
            done.add(key)
        if pt.spec not in seen:
            seen.add(pt.spec)
            est.cpu_seconds += cost.fixed_cpu_seconds
        driver = point_driver(pt.spec, pt.overrides, pt.seed, toml)
        samples = bool(pt.keep_samples or pt.samples_dir)
        est.cpu_seconds += point_cost(cost, pt.label, driver, samples)
        est.peak_rss_bytes = max(est.peak_rss_bytes, cost.peak_rss_bytes)
    return est


# ---------------------------------------------------------------------------------------
# Measuring


def command_for(name: str) -> str:
    """The command that runs a built-in scenario: ``telemetry`` for a comparison of telemetry
    techniques (techniques and neither a tiering policy nor a sweep kind of its own), ``run``
    otherwise."""
    from tierlab import _native
    from tierlab.sweep.point import scenario_points

    toml = _native.export(name, [], None)
    sweep_name, _ = scenario_points(name, [])
    techniques = _native.techniques(name, [])
    from tierlab.sweep.kinds import REGISTRY

    if techniques and "[tiering]" not in toml and sweep_name not in REGISTRY:
        return "telemetry"
    return "run"


def plan_points(
    name: str,
    command: str,
    overrides: Sequence[str] = (),
    keep: Callable[[str], bool] | None = None,
) -> list[Point]:
    """The points ``tierlab COMMAND NAME`` runs (with ``overrides``, those ``keep`` keeps)."""
    from tierlab.sweep import kinds
    from tierlab.sweep.api import plan_kind
    from tierlab.sweep.point import Point, scenario_points

    sweep_name, pts = scenario_points(name, list(overrides))
    if command == "telemetry":
        from tierlab.telemetry import TelemetryKind

        kind: Any = TelemetryKind(None)
    elif not pts:
        return [Point("", name, tuple(overrides))]
    else:
        kind = kinds.for_sweep(sweep_name)
    return list(plan_kind(name, kind, set=overrides, keep=keep).points)


def _measure_command(argv: list[str]) -> tuple[float, int, float]:
    """Run ``tierlab ARGV`` in a child process: its CPU seconds and peak RSS (with the
    worker processes it waited for, from ``wait4``) and its wall seconds."""
    argv = [sys.executable, "-m", "tierlab", *argv, "--no-progress"]
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stderr.close()
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise RuntimeError(f"tierlab {' '.join(argv[3:])} failed ({proc.returncode}): {err}")
    return usage.ru_utime + usage.ru_stime, int(usage.ru_maxrss) * 1024, wall


#: The runs that measure a command's fixed cost: a few simulated milliseconds.
FIXED_RUNS = {
    "run": ["run", "demo", "--set", 'duration="10ms"', "--set", 'window="5ms"'],
    "telemetry": [
        "telemetry",
        "telescope-footprints",
        "--points",
        "1GB",
        "--set",
        'duration="10ms"',
        "--set",
        'window="5ms"',
    ],
}


def measure_fixed(command: str) -> float:
    """CPU seconds of any run of ``command`` (see :data:`FIXED_RUNS`)."""
    with tempfile.TemporaryDirectory(prefix="tierlab-cost-") as tmp:
        cpu, _, _ = _measure_command([*FIXED_RUNS[command], "--out", str(Path(tmp) / "out")])
    return round(cpu, 2)


def measure(
    name: str, fixed: dict[str, float], quick_form: bool = False, jobs: int = MEASURE_JOBS
) -> ScenarioCost:
    """Measure ``tierlab COMMAND NAME --out TMP --jobs JOBS`` (``--quick`` too with
    ``quick_form``; see the module docs). ``fixed``: each command's fixed cost, measured
    here when missing."""
    import platform

    from tierlab._version import VERSION as __version__
    from tierlab.sweep.cache import ResultCache

    command = command_for(name)
    if command not in fixed:
        fixed[command] = measure_fixed(command)
    full_points = plan_points(name, command)
    overrides: list[str] = []
    points = full_points
    if quick_form:
        q = quick(name, command)
        overrides = list(q.set)
        points = plan_points(name, command, overrides, q.keeps)
    drivers = {pt.label: point_driver(pt.spec, pt.overrides, pt.seed) for pt in points}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="tierlab-cost-") as tmp:
        out = Path(tmp) / "out"
        argv = [command, name, "--out", str(out), "--jobs", str(jobs)]
        cpu, rss, wall = _measure_command(argv + (["--quick"] if quick_form else []))
        store = ResultCache(out / "points")
        walls = {}
        if command == "telemetry":
            # The command's points keep their samples in OUT (part of their stored keys).
            from tierlab.sweep.api import plan_kind
            from tierlab.telemetry import TelemetryKind

            kind = TelemetryKind(None, keep_samples=True, samples_dir=out)
            keep = quick(name, command).keeps if quick_form else None
            points = list(plan_kind(name, kind, set=overrides, keep=keep).points)
        for pt in points:
            result = store.load(pt)
            if result is not None:
                walls[pt.label] = result.wall_seconds
    total_wall = sum(walls.values())
    points_cpu = max(cpu - fixed[command], 0.0)
    per_point = {
        label: (round(points_cpu * w / total_wall, 3), drivers[label])
        for label, w in walls.items()
        if total_wall > 0
    }
    cost = ScenarioCost(
        name=name,
        command=command,
        cpu_seconds=round(cpu, 1),
        peak_rss_bytes=rss,
        wall_seconds=round(wall, 1),
        points=len(points),
        driver=round(sum(drivers.values()), 3),
        per_point=per_point,
        fixed_cpu_seconds=fixed[command],
        measured_as="quick" if quick_form else "full",
        measured={
            "tierlab": str(__version__),
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "cpus": str(os.cpu_count()),
            "machine": platform.machine(),
            "jobs": str(jobs),
            "load_before": f"{load_before:.1f}",
        },
    )
    full = estimate(full_points, {name: cost}).cpu_seconds if quick_form else cost.cpu_seconds
    cost.full_cpu_seconds = round(full, 1)
    return cost


# ---------------------------------------------------------------------------------------
# --quick

#: ``--quick`` of a scenario no paper figure scales down: the run is cut to this share of its
#: simulated time (a workload that runs to its natural end: one iteration).
QUICK_SHARE = 0.1

#: ... but never below this many simulated seconds.
QUICK_MIN_SECONDS = 1.0


@dataclass(frozen=True)
class Quick:
    """What ``--quick`` does to a scenario: the labels of the sweep points it keeps (globs;
    none: every point), the overrides it adds (before the user's) and a sentence saying so."""

    points: tuple[str, ...]
    set: tuple[str, ...]
    note: str

    def keeps(self, label: str) -> bool:
        import fnmatch

        return (
            not self.points or not label or any(fnmatch.fnmatchcase(label, g) for g in self.points)
        )


def quick(spec: str, command: str, overrides: Sequence[str] = ()) -> Quick:
    """``--quick`` of ``tierlab COMMAND SPEC``: the quick profile of the paper figure that
    runs this scenario with this command (``tierlab reproduce --quick`` runs the same), else
    a tenth of the simulated time (at least 1 s) or one iteration of a workload that runs to
    its natural end."""
    from tierlab.reproduce import load as load_paper
    from tierlab.reproduce import names

    for paper in names():
        for fig in load_paper(paper).figures:
            if fig.scenario == spec and fig.command == command and "quick" in fig.profiles:
                prof = fig.profile("quick")
                return Quick(tuple(prof.points), tuple(prof.set), prof.note or "scaled down")
    from tierlab import _native

    toml = _native.export(spec, list(overrides), None)
    m = _DURATION.search(toml)
    seconds = _seconds(m.group(1)) if m is not None else None
    if seconds:
        short = max(QUICK_MIN_SECONDS, seconds * QUICK_SHARE)
        if short >= seconds:
            return Quick((), (), "already short: run as it is")
        return Quick(
            (),
            (f'duration="{short:g}s"',),
            f"{short:g} s of simulated time instead of {seconds:g} s",
        )
    m = _ITERATIONS.search(toml)
    if m is not None and int(m.group(1)) > 1:
        return Quick((), ("workload.iterations=1",), f"one iteration instead of {m.group(1)}")
    return Quick((), (), "no shorter form: run as it is")
