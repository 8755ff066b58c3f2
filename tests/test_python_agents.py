"""Agents written in Python (``kind = "python"``, ``tierlab.agents``): the re-implementations
in ``examples/`` give their built-in counterparts' statistics exactly, user errors stop a run
with one message naming the user's file and line, and the same tiering policy runs live."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tierlab
from tierlab import _native

REPO = Path(__file__).resolve().parent.parent
EX = REPO / "examples"
HOTTEST = f'path = "{EX / "hottest_first.py"}", class = "HottestFirst"'
PTE = f'path = "{EX / "pte_scan.py"}", class = "PteScan"'
FIFO = f'path = "{EX / "fifo.py"}", class = "Fifo"'
INTERLEAVE = f'path = "{EX / "interleave.py"}", class = "Interleave"'

#: Stats that name the implementation (its kind, label, or a stat prefix made of its kind).
NAMING = ("tiering.kind", "tiering.policy", "hmem.policy", "placement.policy", "placement.mode")


def run(scenario: str, *sets: str) -> Any:
    r = tierlab.run(scenario, set=["sweep=[]", *sets])
    assert r.error is None, r.error
    return r


def same_stats(a: Any, b: Any, rename: tuple[str, str] = ("", "")) -> None:
    fa = {k: v for k, v in a.stats_flat.items() if not k.endswith(".kind") and k not in NAMING}
    fb = {
        k.replace(rename[1], rename[0]) if rename[1] else k: v
        for k, v in b.stats_flat.items()
        if not k.endswith(".kind") and k not in NAMING
    }
    diff = {k: (fa.get(k), fb.get(k)) for k in set(fa) | set(fb) if fa.get(k) != fb.get(k)}
    assert not diff, sorted(diff.items())[:10]


# -- identical statistics ------------------------------------------------------------------------

TIERING_CASES = [
    # (scenario, telemetry of the point, duration): the synthetic key-value store with PEBS
    # samples, a masim config with DAMON regions, two replayed real traces.
    ("tiering-kv", '{name = "T", kind = "pebs", event = "all", frequency_hz = 10000.0}', "1s"),
    # (interleaved: the fast tier starts full, so promotions need demotions)
    ("demo", '{name = "T", kind = "damon"}', "interleave"),
    ("tiering-replay-kv", '{name = "T", kind = "telescope", variant = "bounded"}', None),
    # (the store loaded in the slow tier, as tiering-replay-kv does)
    (
        "tiering-replay",
        '{name = "T", kind = "pebs", event = "all", frequency_hz = 10000.0}',
        "slow",
    ),
]


@pytest.mark.parametrize(("scenario", "telemetry", "duration"), TIERING_CASES)
def test_python_hottest_first_gives_the_built_in_policys_statistics(
    scenario: str, telemetry: str, duration: str | None
) -> None:
    sets = [f"telemetry=[{telemetry}]"]
    if duration == "interleave":
        sets += ['machine.placement="interleave"', "duration=1s"]
    elif duration == "slow":
        sets += ["workload.node=1", "workload.populate=true", "duration=1s"]
    elif duration:
        sets.append(f"duration={duration}")
    a = run(scenario, *sets, 'tiering={kind = "hottest-first", telemetry = "T"}')
    b = run(scenario, *sets, f'tiering={{kind = "python", {HOTTEST}, telemetry = "T"}}')
    assert a.stats_flat["tiering.promoted_pages"] > 0, "the comparison must move pages"
    if duration == "interleave":
        assert a.stats_flat["tiering.demoted_pages"] > 0
    same_stats(a, b)
    assert b.stats_flat["tiering.kind"] == "python"
    # The decision logs are the same too.
    assert a.decisions["addr"] == b.decisions["addr"]
    assert a.decisions["moved"] == b.decisions["moved"]


PTE_CASES = [
    # (the demo shortened to 2 s, 6 and 10 passes; the replay to its first second)
    ("demo", 'interval = "300ms", chunk_ptes = 4096'),
    ("demo", 'interval = "200ms", chunk_ptes = 1024, flush = true, report = "last-pass"'),
    ("tiering-replay", 'interval = "5ms", chunk_ptes = 512'),
    ("tiering-replay-kv", 'interval = "2ms", chunk_ptes = 256'),
]


@pytest.mark.parametrize(("scenario", "params"), PTE_CASES)
def test_python_pte_scan_gives_the_built_in_techniques_statistics(
    scenario: str, params: str
) -> None:
    sets = {"demo": ["duration=2s"], "tiering-replay": ["duration=1s"]}.get(scenario, [])
    a = run(scenario, *sets, f'telemetry=[{{name = "T", kind = "pte-scan", {params}}}]')
    b = run(scenario, *sets, f'telemetry=[{{name = "T", kind = "python", {PTE}, {params}}}]')
    assert a.stats_flat["telemetry.T.passes"] > 0
    same_stats(a, b)


@pytest.mark.parametrize("scenario", ["cmcp-replay", "cmcp-memory"])
def test_python_fifo_gives_the_built_in_policys_statistics(scenario: str) -> None:
    sets = ["duration=50ms"] if scenario == "cmcp-memory" else []
    a = run(scenario, *sets, 'policies=[{kind = "fifo"}]')
    b = run(scenario, *sets, f'policies=[{{kind = "python", {FIFO}}}]')
    assert a.stats_flat["machine.page_faults"] > 1000
    same_stats(a, b, rename=("hmem.fifo.", "hmem.python."))
    c = run(
        scenario, *sets, f'policies=[{{kind = "python", {FIFO.replace("Fifo", "FifoBatched")}}}]'
    )
    assert c.stats_flat["machine.page_faults"] == a.stats_flat["machine.page_faults"]


def test_python_interleave_gives_the_built_in_placements_statistics() -> None:
    a = run("numa-placement", 'placement={kind = "interleave"}')
    b = run("numa-placement", f'placement={{kind = "python", {INTERLEAVE}}}')
    assert 0 < a.stats_flat["placement.local_access_fraction"] < 1
    same_stats(a, b)


SAMPLER = """\
import numpy as np
from tierlab.agents import PagesReport, Param, Telemetry


class Sampler(Telemetry):
    interval = Param("20ms", kind="duration")
    period = Param(97, range=(1, None))

    def __init__(self):
        self.pages = np.zeros(0, np.uint64)
        self.n = 0

    def start(self, ctx):
        ctx.pebs_enable(self.period)
        return None

    def on_interval(self, ctx):
        s = ctx.pebs_take(poll=True)
        self.n += s.addr.size
        self.pages = np.union1d(self.pages, s.addr >> np.uint64(12))

    def hot_set(self, start, end, ctx):
        p, self.pages = self.pages, np.zeros(0, np.uint64)
        return PagesReport(p)

    def stats(self):
        return {"samples": self.n}
"""


def test_a_python_technique_samples_with_the_pebs_like_sampler_and_is_scored(
    tmp_path: Path,
) -> None:
    (tmp_path / "sampler.py").write_text(SAMPLER)
    path = tmp_path / "sampler.py"
    t = f'telemetry=[{{name = "S", kind = "python", path = "{path}", class = "Sampler"}}]'
    r = run("demo", "duration=2s", t)
    f = r.stats_flat
    assert f["telemetry.S.samples"] > 1000
    # Scored against ground truth like a built-in technique; the sampler's interrupts are
    # charged to the sampled cores (the run is slower than without it).
    assert 0 < f["telemetry.S.mean_precision"] <= 1, {k: v for k, v in f.items() if ".S." in k}
    assert 0 < f["telemetry.S.mean_recall"] <= 1
    base = run("demo", "duration=2s", "telemetry=[]")
    assert f["run.app_seconds"] > base.stats_flat["run.app_seconds"]


# -- a scenario names a class ----------------------------------------------------------------

SCENARIO = """\
duration = "600ms"
seed = 7
[workload]
kind = "uniform"
footprint = "64MiB"
[machine]
cores = 2
placement = "interleave"
[[machine.nodes]]
name = "dram"
capacity = "96MiB"
latency_ns = 90.0
[[machine.nodes]]
name = "slow"
capacity = "1GiB"
latency_ns = 300.0
[[telemetry]]
name = "T"
kind = "pebs"
event = "all"
frequency_hz = 20000.0
[tiering]
kind = "python"
path = "policy.py"
class = "Policy"
telemetry = "T"
{extra}
"""

POLICY = """\
import numpy as np
from tierlab.agents import Param, TieringPolicy


class Policy(TieringPolicy):
    interval = Param("50ms", kind="duration")
    limit = Param(64, range=(1, 4096), doc="pages promoted per step")

    def __init__(self):
        self.seen = np.zeros(0, np.uint64)
        self.draws = []

    def on_feed(self, feed, ctx):
        self.seen = np.union1d(self.seen, feed.addr & ~np.uint64(4095))

    def on_interval(self, ctx):
        self.draws.append(int(self.rng.integers(1 << 30)))
        pages = [int(p) for p in self.seen if ctx.node_of(int(p)) == ctx.slow_node]
        ctx.promote(pages[: self.limit])
{body}

    def stats(self):
        return {{"first_draw": self.draws[0] if self.draws else 0, "steps": len(self.draws)}}
"""


def scenario(tmp_path: Path, body: str = "", extra: str = "") -> Path:
    (tmp_path / "policy.py").write_text(POLICY.format(body=body))
    s = tmp_path / "s.toml"
    s.write_text(SCENARIO.format(extra=extra))
    return s


def test_a_scenario_names_its_class_relative_to_its_folder_and_sets_its_parameters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = scenario(tmp_path, extra="limit = 8")
    monkeypatch.chdir(REPO)  # not the scenario's folder
    r = tierlab.run(s)
    assert r.error is None
    assert 0 < r.stats_flat["tiering.promoted_pages"] <= 8 * r.stats_flat["tiering.steps"]
    # The seed drives the class's generator: same seed, same draw; another, another.
    assert tierlab.run(s).stats_flat["tiering.first_draw"] == r.stats_flat["tiering.first_draw"]
    other = tierlab.run(s, seed=8).stats_flat["tiering.first_draw"]
    assert other != r.stats_flat["tiering.first_draw"]


def error_of(s: Path) -> str:
    with pytest.raises((_native.ScenarioError, ValueError)) as e:
        tierlab.run(s)
    return str(e.value)


def test_unknown_or_bad_parameters_name_the_scenario_file_line_and_key(tmp_path: Path) -> None:
    msg = error_of(scenario(tmp_path, extra="limt = 8"))
    assert "s.toml:27:" in msg and "tiering.limt" in msg, msg
    assert "unknown parameter of Policy" in msg and "limit" in msg
    msg = error_of(scenario(tmp_path, extra="limit = 0"))
    assert "tiering.limit" in msg and "outside [1, 4096]" in msg, msg
    msg = error_of(scenario(tmp_path, extra='limit = "many"'))
    assert "tiering.limit" in msg and "not an integer" in msg, msg


def test_a_missing_file_or_class_is_named(tmp_path: Path) -> None:
    s = scenario(tmp_path)
    s.write_text(s.read_text().replace('class = "Policy"', 'class = "Polcy"'))
    msg = error_of(s)
    assert "tiering.class" in msg and "no class `Polcy`" in msg and "Policy" in msg, msg
    s.write_text(s.read_text().replace('path = "policy.py"', 'path = "nope.py"'))
    assert "tiering.path" in error_of(s)
    (tmp_path / "syntax.py").write_text("class Policy(:\n")
    s.write_text(s.read_text().replace('path = "nope.py"', 'path = "syntax.py"'))
    msg = error_of(s)
    assert "syntax.py:1: SyntaxError" in msg, msg


def user_error(tmp_path: Path, body: str) -> Any:
    r = tierlab.run(scenario(tmp_path, body=body))
    assert r.error is not None, "the run must stop with the user's error"
    # What was simulated before the error is kept.
    assert r.stats_flat["run.simulated_seconds"] > 0
    return r


def test_an_exception_in_a_hook_names_the_users_file_and_line(tmp_path: Path) -> None:
    body = """
    def on_interval(self, ctx):
        if ctx.now_ps > 100_000_000_000:
            raise ZeroDivisionError("no room to think")
"""
    r = user_error(tmp_path, body)
    path = tmp_path / "policy.py"
    assert r.error.startswith(f"{path}:23: in on_interval: ZeroDivisionError: no room to think"), (
        r.error
    )
    assert "tierlab/" not in r.error.split("\n")[0]
    assert r.stats_flat["run.simulated_seconds"] < 0.6


def test_a_wrong_return_type_is_an_error_naming_the_method(tmp_path: Path) -> None:
    r = user_error(tmp_path, '\n    def on_interval(self, ctx):\n        return "soon"\n')
    assert "Policy.on_interval returned 'soon'" in r.error and "ps" in r.error, r.error


def test_an_impossible_page_is_an_error_at_the_users_line(tmp_path: Path) -> None:
    body = "\n    def on_interval(self, ctx):\n        ctx.promote([0x7000_0000_0000])\n"
    r = user_error(tmp_path, body)
    assert f"{tmp_path / 'policy.py'}:22: in on_interval: ValueError: promote: page" in r.error, (
        r.error
    )
    assert "in no mapping" in r.error
    body = "\n    def on_interval(self, ctx):\n        ctx.promote([1.5])\n"
    assert "expected integers" in user_error(tmp_path, body).error


def test_a_context_kept_after_its_hook_cannot_be_used(tmp_path: Path) -> None:
    body = """
    def start(self, ctx):
        self.kept = ctx

    def on_interval(self, ctx):
        self.kept.fast_free()
"""
    r = user_error(tmp_path, body)
    assert "valid only during the hook" in r.error and ":25: in on_interval" in r.error, r.error


def test_a_replacement_policy_choosing_a_page_that_is_not_resident_stops_the_run(
    tmp_path: Path,
) -> None:
    (tmp_path / "bad.py").write_text(
        "from tierlab.agents import Replacement\n\n"
        "class Bad(Replacement):\n"
        "    def evict(self, ctx):\n"
        "        return 10**9\n"
    )
    r = tierlab.run(
        "cmcp-replay",
        set=[
            "sweep=[]",
            f'policies=[{{kind = "python", path = "{tmp_path / "bad.py"}", class = "Bad"}}]',
        ],
    )
    assert (
        r.error is not None and "evict chose page 1000000000, which is not resident" in r.error
    ), r.error


def test_a_bad_hot_set_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text(
        "from tierlab.agents import RegionsReport, Telemetry\n\n"
        "class T(Telemetry):\n"
        "    def hot_set(self, start, end, ctx):\n"
        "        return RegionsReport([8192, 0], [12288, 4096])\n"
    )
    t = (
        f'telemetry=[{{name = "U", kind = "python", path = "{tmp_path / "t.py"}", class = "T", '
        'interval = "50ms"}]'
    )
    r = tierlab.run("demo", set=["sweep=[]", t])
    assert r.error is not None and "not sorted and disjoint" in r.error, r.error


# -- the decision log ------------------------------------------------------------------------


def test_run_out_writes_the_decision_log_that_view_shows(tmp_path: Path) -> None:
    s = scenario(tmp_path)
    out = tmp_path / "out"
    res = subprocess.run(
        [sys.executable, "-m", "tierlab", "run", str(s), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    from tierlab.tier import log as tlog

    df = tlog.read(out / "decisions")
    assert df is not None and len(df)
    assert list(df.columns) == tlog.COLUMNS.names
    stats = json.loads((out / "stats.json").read_text())
    promoted = stats["tiering"]["promoted_pages"]
    moved = df[(df.kind == "move") & (df.action == "promote")]
    assert len(moved) == promoted and set(moved.outcome) == {"moved"}
    v = subprocess.run(
        [sys.executable, "-m", "tierlab", "view", str(out / "decisions"), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert v.returncode == 0, v.stderr
    tier = json.loads(v.stdout)["tier"]
    assert tier["moves"]["promote"] == {"moved": promoted}


# -- the same class, live ------------------------------------------------------------------------

TARGET = """
import mmap, time
A = mmap.mmap(-1, 4 << 20)
for r in range(4):
    A.madvise(mmap.MADV_DONTNEED)
    for i in range(0, 4 << 20, 4096):
        A[i] = 1
    time.sleep(0.15)
time.sleep(0.3)
"""


def test_the_same_policy_file_runs_live_and_logs_in_the_same_format(tmp_path: Path) -> None:
    from tierlab.place.numa import topology
    from tierlab.tier import log as tlog

    nodes = topology().memory
    if not nodes:
        pytest.skip("no NUMA node with memory is visible")
    if _native.live_backends().get("auto") is None:
        pytest.skip("no live recording backend on this machine")
    prog = tmp_path / "target.py"
    prog.write_text(TARGET)
    rec = tmp_path / "live.rec"
    node = str(nodes[0])
    # fmt: off
    res = subprocess.run(
        [sys.executable, "-m", "tierlab", "tier", "-o", str(rec), "--fast-node", node,
         "--slow-node", nodes and str(nodes[-1]), "--policy",
         f"{EX / 'hottest_first.py'}:HottestFirst", "--set", 'interval="50ms"',
         "--fast-capacity", "2MiB", "--json", "--", sys.executable, str(prog)],
        capture_output=True, text=True, timeout=120, env={**os.environ},
    )
    # fmt: on
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["samples"] > 0 and out["steps"] > 0
    df = tlog.read(rec)
    assert df is not None and list(df.columns) == tlog.COLUMNS.names
    decided = df[(df.kind == "decide") & (df.action == "promote")]
    assert len(decided) == out["decided"]["promote"] > 0
    assert len(df[df.kind == "move"]) > 0
    meta = json.loads((rec / "meta.json").read_text())
    assert meta["tier"]["policy"].endswith("hottest_first.py:HottestFirst")


def test_a_live_policy_error_names_the_users_line_and_keeps_the_log(tmp_path: Path) -> None:
    from tierlab.place.numa import topology

    nodes = topology().memory
    if not nodes or _native.live_backends().get("auto") is None:
        pytest.skip("no live recording here")
    (tmp_path / "boom.py").write_text(
        "from tierlab.agents import Param, TieringPolicy\n\n"
        "class Boom(TieringPolicy):\n"
        '    interval = Param("20ms", kind="duration")\n\n'
        "    def on_interval(self, ctx):\n"
        "        raise KeyError('gone')\n"
    )
    prog = tmp_path / "target.py"
    prog.write_text(TARGET)
    n = str(nodes[0])
    # fmt: off
    res = subprocess.run(
        [sys.executable, "-m", "tierlab", "tier", "-o", str(tmp_path / "r"), "--fast-node", n,
         "--slow-node", n, "--policy", f"{tmp_path / 'boom.py'}:Boom", "--", sys.executable,
         str(prog)],
        capture_output=True, text=True, timeout=120,
    )
    # fmt: on
    assert res.returncode == 2
    assert f"{tmp_path / 'boom.py'}:7: in on_interval: KeyError: 'gone'" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    assert (tmp_path / "r" / "meta.json").exists()
    bad = subprocess.run(
        [sys.executable, "-m", "tierlab", "tier", "-o", str(tmp_path / "r2"), "--policy",
         f"{tmp_path / 'boom.py'}:Boom", "--set", "intervall=1", "--", "true"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2 and "--set intervall: unknown parameter of Boom" in bad.stderr


def test_examples_are_importable_without_tierlab_internals() -> None:
    for f in ("hottest_first.py", "pte_scan.py", "fifo.py"):
        text = (EX / f).read_text()
        assert "_native" not in text and "tierlab.agents" in text, f
    assert shutil.which(sys.executable)


def test_a_sweep_ships_the_policy_source_and_reruns_a_point_whose_file_changed(
    tmp_path: Path,
) -> None:
    from tierlab.sweep.cache import point_key
    from tierlab.sweep.engine import _shipping
    from tierlab.sweep.point import Point, PointResult
    from tierlab.sweep.worker import run_point

    s = scenario(tmp_path)
    s.write_text(
        s.read_text()
        + "\n[[sweep]]\nlabel = \"few\"\nset = ['tiering.limit = 4']\n"
        + "\n[[sweep]]\nlabel = \"more\"\nset = ['tiering.limit = 32']\n"
    )
    res = subprocess.run(
        [sys.executable, "-m", "tierlab", "run", str(s), "--jobs", "2", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert res.returncode == 0, res.stderr
    point = Point("few", str(s), ("tiering.limit = 4",))
    before = point_key(point)
    shipped = _shipping(point)
    policy = tmp_path / "policy.py"
    assert shipped.sources == ((str(policy), policy.read_text()),)
    policy.write_text(policy.read_text() + "\n# changed\n")
    assert point_key(point) != before, "a changed policy file makes a new point"
    # The worker runs the shipped source, with no file at its path.
    policy.unlink()
    out = run_point(shipped)
    assert isinstance(out, PointResult), out
