"""The sweep engine: every kind of sweep runs through it, a failed point is one line naming
it, Ctrl-C keeps the points done, ``--points`` selects, executors and the worker's results
are plain data."""

from __future__ import annotations

import json
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Watched, tierlab
from tierlab.sweep import LocalExecutor, Point, PointError, PointResult, execute
from tierlab.sweep import engine as sweep_engine
from tierlab.sweep.engine import SweepProgress, SweepState

#: A plain sweep (no kind of its own): three short points, one with a bad key.
PLAIN = """
name = "tiny-plain"
duration = "20ms"
window = "5ms"
[workload]
kind = "uniform"
footprint = "8MiB"
[[sweep]]
label = "small"
set = []
[[sweep]]
label = "big"
set = ['workload.footprint = "16MiB"']
"""

BAD_POINT = """
[[sweep]]
label = "bad/point"
set = ['machine.corez = 4']
"""

#: A short point, then one that runs for an hour of simulated time.
SHORT_THEN_LONG = """
name = "short-then-long"
duration = "20ms"
window = "5ms"
[workload]
kind = "uniform"
footprint = "8MiB"
[[sweep]]
label = "short"
set = []
[[sweep]]
label = "long"
set = ['duration = "3600s"', 'window = "1s"']
"""


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    path = tmp_path / "plain.toml"
    path.write_text(PLAIN)
    return path


# -- one line per failed point -----------------------------------------------------------------


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_failed_point_is_one_line_naming_it(tmp_path: Path, jobs: str) -> None:
    spec = tmp_path / "bad.toml"
    spec.write_text(PLAIN + BAD_POINT)
    res = tierlab("run", spec, "--json", "--jobs", jobs)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr
    # Besides the start and progress lines ("tierlab run: ..."), one line: the failure.
    lines = [x for x in res.stderr.splitlines() if x.strip() and not x.startswith("tierlab run:")]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("tierlab: point 'bad/point': "), lines
    assert "corez" in lines[0]
    # The other points ran and are reported.
    assert [r["label"] for r in json.loads(res.stdout)] == ["small", "big"]


def test_point_error_pickles_and_names_the_point() -> None:
    from tierlab import _native

    err = PointError.from_exception("bt/8/fifo", _native.SimulationError("out of memory"))
    back = pickle.loads(pickle.dumps(err))
    assert isinstance(back, PointError)
    assert (back.label, back.message, back.kind) == ("bt/8/fifo", "out of memory", "simulation")
    assert str(back) == "point 'bt/8/fifo': out of memory"
    scen = PointError.from_exception("x", _native.ScenarioError("bad key\n  at line 3"))
    assert scen.kind == "scenario" and scen.message == "bad key at line 3"
    bug = PointError.from_exception("y", KeyError("k"))
    assert bug.kind == "error" and bug.message.startswith("KeyError") and "KeyError" in bug.detail


def test_worker_returns_errors_as_values(plain: Path) -> None:
    from tierlab.sweep.worker import run_point

    out = run_point(Point("p", str(plain), ("machine.corez = 4",)))
    assert isinstance(out, PointError) and out.label == "p" and out.kind == "scenario"
    ok = run_point(Point("q", str(plain)))
    assert isinstance(ok, PointResult)
    # Plain data: it pickles and survives JSON.
    assert pickle.loads(pickle.dumps(ok)) == ok
    assert ok.stats_flat["machine.accesses"] > 0 and ok.timeseries["t_end_s"]


# -- Ctrl-C ------------------------------------------------------------------------------------


class _InterruptAfter(SweepProgress):
    """Raises KeyboardInterrupt (as Ctrl-C would) once ``n`` points finished."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.final: SweepState | None = None

    def point_done(self, state: SweepState, point: Point, result: PointResult) -> None:
        if state.done >= self.n:
            raise KeyboardInterrupt

    def finished(self, state: SweepState, interrupted: bool) -> None:
        self.final = state


@pytest.mark.parametrize("jobs", [1, 2])
def test_interrupt_keeps_points_done(plain: Path, jobs: int) -> None:
    points = [Point(f"p{i}", str(plain), (f"seed = {i + 1}",)) for i in range(5)]
    progress = _InterruptAfter(1)
    run = execute(points, LocalExecutor(jobs), progress)
    assert run.interrupted
    done = run.finished()
    assert 1 <= len(done) < 5
    assert progress.final is not None and progress.final.done == len(done)


@pytest.mark.parametrize(
    ("jobs", "sig"), [("1", signal.SIGINT), ("2", signal.SIGINT), ("2", signal.SIGTERM)]
)
def test_ctrl_c_keeps_the_points_done(tmp_path: Path, jobs: str, sig: signal.Signals) -> None:
    spec = tmp_path / "sl.toml"
    spec.write_text(SHORT_THEN_LONG)
    out = tmp_path / "out"
    w = Watched("run", spec, "--json", "--jobs", jobs, "--out", out)
    # The signal goes once the short point's result is stored (the long one never ends).
    w.wait_for(lambda: any((out / "points").glob("[0-9a-f]*.json")), "the short point")
    res = w.finish(sig)
    assert res.returncode == 128 + sig, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr
    assert "tierlab: interrupted; kept the points done" in res.stderr, res.stderr
    assert [r["label"] for r in json.loads(res.stdout)] == ["short"]
    assert not list((out / "points").glob(".*")), "no temporary file left"


# -- --points ----------------------------------------------------------------------------------


def test_points_glob_selects(plain: Path) -> None:
    res = tierlab("run", plain, "--json", "--points", "b*")
    assert res.returncode == 0, res.stderr
    assert [r["label"] for r in res.json()] == ["big"]
    res = tierlab("run", plain, "--json", "--points", "nothing*")
    assert res.returncode == 2 and "matches no sweep point" in res.stderr


def test_plan_selects_and_orders_points(plain: Path) -> None:
    from tierlab.sweep import kinds

    plan = kinds.get("records").plan(str(plain), ["seed=3"], 7, "*")
    assert [p.label for p in plan.points] == ["small", "big"]
    big = plan.points[1]
    assert big.overrides == ('workload.footprint = "16MiB"', "seed=3"), "user's last"
    assert big.seed == 7 and big.sweep_label == "big"
    assert kinds.get("records").plan(str(plain), only="sm*").labels == ["small"]


def test_duplicate_labels_are_refused(plain: Path) -> None:
    with pytest.raises(ValueError, match="labelled 'a'"):
        execute([Point("a", str(plain)), Point("a", str(plain))])


# -- every kind through the one engine ---------------------------------------------------------


@pytest.fixture
def engine_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The labels of the points the engine's worker ran (in this process: jobs=1)."""
    calls: list[str] = []
    real = sweep_engine.run_point

    def counting(point: Point) -> object:
        calls.append(point.label)
        return real(point)

    monkeypatch.setattr(sweep_engine, "run_point", counting)
    yield calls


SMALL_KV = [
    "--set", "workload.keys=20000", "--set", 'duration="200ms"', "--set", 'window="100ms"',
    "--set", 'machine.nodes[0].capacity="8MiB"', "--set", 'machine.nodes[1].capacity="256MiB"',
]  # fmt: skip

SMALL_NUMA = [
    "--set",
    'workload={ kind = "omp-kernel", kernel = "stream", init = "serial", '
    'array_size = "256KiB", iterations = 4, threads = 8 }',
    "--set",
    'machine.cache.size="32KiB"',
]


def _cli(*args: str | Path) -> int:
    from tierlab.cli.main import main

    return main([str(a) for a in args])


def test_every_kind_runs_through_the_engine(
    engine_calls: list[str], plain: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tierlab.policies import HmemRecord, PlainRecord
    from tierlab.sweep import kinds

    assert _cli("run", plain, "--json", "--no-progress", "--jobs", "1") == 0
    assert engine_calls == ["small", "big"]
    recs = json.loads(capsys.readouterr().out)
    assert recs[0]["label"] == "small" and recs[0]["workload"] == "uniform"
    engine_calls.clear()

    assert _cli("run", "tiering-kv", "--json", "--points", "TS-BND", *SMALL_KV) == 0
    assert engine_calls == ["TS-BND"]
    assert json.loads(capsys.readouterr().out)[0]["policy"] == "TS-BND"
    engine_calls.clear()

    glob = "stream/2-nodes/first-touch"
    assert _cli("run", "numa-placement", "--json", "--points", glob, *SMALL_NUMA) == 0
    assert engine_calls == [glob]
    assert json.loads(capsys.readouterr().out)[0]["policy"] == "first-touch"
    engine_calls.clear()

    tele = ["--techniques", "R64-B8K", "--json", "--jobs", "1", "--set", 'duration="5ms"']
    assert _cli("telemetry", "pebs-minife", *tele, "--set", 'window="1ms"') == 0
    assert engine_calls == ["(baseline)", "R64-B8K"]
    assert "R64-B8K" in json.loads(capsys.readouterr().out)["techniques"]
    engine_calls.clear()

    cmcp = kinds.for_sweep("p")
    assert cmcp.name == "p"
    from tierlab.sweep.api import run_kind

    out = run_kind("cmcp-p", cmcp, only="lu/56/p=0.0", set=['duration="2ms"', 'window="1ms"'])
    assert engine_calls == ["lu/56/p=0.0"]
    assert isinstance(out.report.records[0], HmemRecord)
    assert out.report.records[0].policy == "cmcp" and out.report.records[0].p == 0.0
    assert not isinstance(out.report.records[0], PlainRecord)


def test_registry_names_a_kind_per_sweep_name() -> None:
    from tierlab.sweep import kinds

    assert kinds.for_sweep("tiering").name == "tiering"
    assert kinds.for_sweep("placement").name == "placement"
    assert kinds.for_sweep("table1").name == "table1"
    assert kinds.for_sweep("footprints").name == "records"  # no kind of its own
    for name in kinds.names():
        assert kinds.get(name).name == name


# -- stored results: reuse, --fresh, a killed sweep --------------------------------------------

#: Six points of a few tenths of a second each.
SIX = """
name = "six"
duration = "400ms"
window = "100ms"
[workload]
kind = "uniform"
footprint = "8MiB"
""" + "".join(f'[[sweep]]\nlabel = "s{i}"\nset = ["seed = {i}"]\n' for i in range(1, 7))


def test_cache_reuses_finished_points(engine_calls: list[str], plain: Path, tmp_path: Path) -> None:
    from tierlab.sweep import kinds
    from tierlab.sweep.api import run_kind

    cache = tmp_path / "points"
    first = run_kind(plain, kinds.get("records"), cache_dir=cache)
    assert engine_calls == ["small", "big"] and first.run.reused == 0
    assert len(list(cache.glob("*.json"))) == 2
    engine_calls.clear()
    again = run_kind(plain, kinds.get("records"), cache_dir=cache)
    assert engine_calls == [] and again.run.reused == 2
    assert [r.to_json() for r in again.report.records] == [
        r.to_json() for r in first.report.records
    ]
    # Another seed is another point; --fresh recomputes.
    run_kind(plain, kinds.get("records"), cache_dir=cache, seed=9, only="big")
    assert engine_calls == ["big"]
    engine_calls.clear()
    fresh = run_kind(plain, kinds.get("records"), cache_dir=cache, fresh=True)
    assert engine_calls == ["small", "big"] and fresh.run.reused == 0


def test_killed_sweep_resumes_with_the_missing_points(tmp_path: Path) -> None:
    spec = tmp_path / "six.toml"
    spec.write_text(SIX)
    out = tmp_path / "out"
    points = out / "points"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tierlab", "run", str(spec), "--json", "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while len(list(points.glob("*.json"))) < 2:
            assert proc.poll() is None, "the sweep ended before it was killed"
            assert time.monotonic() < deadline, "no point finished in time"
            time.sleep(0.02)
        proc.kill()  # SIGKILL: no chance to clean up
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    stored = len(list(points.glob("*.json")))
    assert 2 <= stored < 6, stored
    res = tierlab("run", spec, "--json", "--out", out)
    assert res.returncode == 0, res.stderr
    assert f"reused {stored} of 6 points" in res.stderr, res.stderr
    recs = res.json()
    assert [r["label"] for r in recs] == [f"s{i}" for i in range(1, 7)]
    assert len(list(points.glob("*.json"))) == 6
    # The same records as a sweep computed from scratch.
    fresh = tierlab("run", spec, "--json", "--out", out, "--fresh")
    assert fresh.returncode == 0 and "reused" not in fresh.stderr, fresh.stderr
    assert fresh.stdout == res.stdout
