"""Command-line options that must be refused clearly (what, where), and output directories
that must not be written into without the rules of tierlab.outdir: ``--jobs``, ``--address``,
``coremap --out``, ``telemetry --out``, ``tune --out``, ``overhead --keep``, ``bench tracer``'s
sizes, ``--techniques``, ``tune --points``, ``place plan``."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from conftest import assert_user_error, cli, tierlab

#: A tiny sweep: two points of a uniform workload.
SWEEP = """
name = "tiny-sweep"
duration = "5ms"
window = "5ms"
[workload]
kind = "uniform"
footprint = "4MiB"
[[sweep]]
label = "a"
set = []
[[sweep]]
label = "b"
set = ['workload.footprint = "8MiB"']
"""

#: A tiny scenario without a sweep.
ONE = """
name = "one"
duration = "5ms"
window = "5ms"
[workload]
kind = "uniform"
footprint = "4MiB"
"""

#: Two telemetry techniques, one sample-based (its samples are kept with --out).
TELEMETRY = (
    ONE
    + """
[[telemetry]]
name = "PEBS"
kind = "pebs"
period = 101
[[telemetry]]
name = "DAMON"
kind = "damon"
"""
)


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    p = tmp_path / "sw.toml"
    p.write_text(SWEEP)
    return p


@pytest.fixture
def one(tmp_path: Path) -> Path:
    p = tmp_path / "one.toml"
    p.write_text(ONE)
    return p


@pytest.fixture
def tel(tmp_path: Path) -> Path:
    p = tmp_path / "tel.toml"
    p.write_text(TELEMETRY)
    return p


def foreign_dir(path: Path) -> Path:
    """A directory of the user's (not tierlab output)."""
    path.mkdir()
    (path / "notes.md").write_text("mine\n")
    return path


def a_recording(path: Path) -> Path:
    from tierlab.recording import RecordingWriter

    with RecordingWriter(path, source="test", machine={}):
        pass
    assert (path / "meta.json").is_file()
    return path


def snapshot(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


# -- 1. --jobs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("jobs", ["0", "-1"])
def test_jobs_below_one_is_an_argument_error(sweep: Path, tel: Path, jobs: str) -> None:
    for args in (
        ("run", sweep, "--jobs", jobs),
        ("run", sweep, "--executor", "ray", "--jobs", jobs),
        ("telemetry", tel, "--jobs", jobs),
        ("tune", sweep, "--param", "machine.cores=1:2", "--objective", "x", "--jobs", jobs),
        ("reproduce", "--jobs", jobs),
    ):
        err = assert_user_error(cli(*args))
        assert "argument --jobs" in err and f"{jobs}:" in err, (args, err)


def test_executors_refuse_fewer_than_one_job() -> None:
    from tierlab.sweep import LocalExecutor
    from tierlab.sweep.ray_executor import RayExecutor

    with pytest.raises(ValueError, match="jobs=0"):
        LocalExecutor(0)
    with pytest.raises(ValueError, match="jobs=-1"):
        RayExecutor(None, -1)


# -- 2. --address -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_ray_address_is_one_error(sweep: Path) -> None:
    pytest.importorskip("ray")
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    res = tierlab("run", sweep, "--executor", "ray", "--address", address, timeout=90)
    err = assert_user_error(res)
    assert f"cannot reach the Ray cluster at {address}" in err
    assert err.count("\n") <= 2, err


def test_ray_address_check() -> None:
    from tierlab.sweep.ray_executor import RayConnectError, check_reachable

    check_reachable(None)
    check_reachable("auto")
    with pytest.raises(RayConnectError, match="expected HOST:PORT"):
        check_reachable("127.0.0.1:zz")
    with pytest.raises(RayConnectError, match="cannot reach"):
        check_reachable(f"ray://127.0.0.1:{free_port()}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        check_reachable(f"127.0.0.1:{s.getsockname()[1]}")


# -- 3. output directories ----------------------------------------------------------------------


def test_coremap_out_refuses_a_foreign_directory_and_a_recording(one: Path, tmp_path: Path):
    mine = foreign_dir(tmp_path / "mine")
    before = snapshot(mine)
    err = assert_user_error(cli("coremap", one, "--out", mine))
    assert f"{mine}: exists and is not a `tierlab coremap --out` directory" in err
    assert snapshot(mine) == before
    rec = a_recording(tmp_path / "rec")
    before = snapshot(rec)
    err = assert_user_error(cli("coremap", one, "--out", rec))
    assert "it is a tierlab recording" in err
    assert snapshot(rec) == before


def test_coremap_out_replaces_its_own_output(tmp_path: Path) -> None:
    from tierlab import outdir
    from tierlab.cli.coremap import write

    out = tmp_path / "cm"
    write({"run": {1: 3, 2: 1}}, out)
    assert outdir.kind_of(out) == "coremap"
    with outdir.replacing(out, ("coremap",), outdir.OutputError) as staged:
        write({"other": {1: 1}}, staged)
    assert "other" in json.loads((out / "coremap.json").read_text())


def test_telemetry_out_refuses_a_foreign_directory_and_a_recording(tel: Path, tmp_path: Path):
    mine = foreign_dir(tmp_path / "mine")
    before = snapshot(mine)
    err = assert_user_error(cli("telemetry", tel, "--out", mine, "--no-progress"))
    assert f"{mine}: exists and is not a `tierlab telemetry --out` directory" in err
    assert snapshot(mine) == before
    rec = a_recording(tmp_path / "rec")
    before = snapshot(rec)
    err = assert_user_error(cli("telemetry", tel, "--out", rec, "--no-progress"))
    assert "it is a tierlab recording" in err
    assert snapshot(rec) == before


def test_telemetry_rerun_removes_samples_of_techniques_not_run(tel: Path, tmp_path: Path):
    out = tmp_path / "t"
    res = tierlab("telemetry", tel, "--out", out, "--no-progress")
    assert res.returncode == 0, res.stderr
    assert (out / "samples-PEBS").is_dir() and (out / "view-PEBS").is_dir()
    keep = tmp_path / "pebs-copy"
    shutil.copytree(out / "samples-PEBS", keep)
    # Fewer techniques: the PEBS outputs are not part of the new table.
    res = tierlab("telemetry", tel, "--out", out, "--no-progress", "--techniques", "DAMON")
    assert res.returncode == 0, res.stderr
    assert "PEBS" not in (out / "telemetry.csv").read_text()
    assert not (out / "samples-PEBS").exists() and not (out / "view-PEBS").exists()
    # What an interrupted run leaves: samples of a technique missing from telemetry.csv.
    shutil.copytree(keep, out / "samples-PEBS")
    res = tierlab("telemetry", tel, "--out", out, "--no-progress", "--techniques", "DAMON")
    assert res.returncode == 0, res.stderr
    assert not (out / "samples-PEBS").exists()
    # A directory of the user's inside is not tierlab's: kept.
    (out / "samples-notes").mkdir()
    (out / "samples-notes" / "a.txt").write_text("mine")
    res = tierlab("telemetry", tel, "--out", out, "--no-progress", "--techniques", "DAMON")
    assert res.returncode == 0, res.stderr
    assert (out / "samples-notes" / "a.txt").read_text() == "mine"


def test_tune_out_refuses_a_foreign_directory_and_a_recording(sweep: Path, tmp_path: Path):
    args = ("tune", sweep, "--points", "a", "--param", "machine.cores=1:2", "--objective", "x")
    mine = foreign_dir(tmp_path / "mine")
    before = snapshot(mine)
    err = assert_user_error(cli(*args, "--out", mine, "--no-progress"))
    assert f"{mine}: exists and is not a `tierlab tune --out` directory" in err
    assert snapshot(mine) == before
    rec = a_recording(tmp_path / "rec")
    before = snapshot(rec)
    err = assert_user_error(cli(*args, "--out", rec, "--no-progress"))
    assert "it is a tierlab recording" in err
    assert snapshot(rec) == before


def test_interrupted_sweep_points_are_resumable(tmp_path: Path) -> None:
    from tierlab import outdir

    d = tmp_path / "d"
    (d / "points").mkdir(parents=True)
    (d / "points" / ("ab" * 32 + ".json")).write_text("{}")
    assert outdir.kind_of(d) == "points"
    (d / "points" / "notes.txt").write_text("mine")
    assert outdir.kind_of(d) is None


def test_overhead_keep_refuses_a_foreign_directory_and_a_recording(tmp_path: Path) -> None:
    mine = foreign_dir(tmp_path / "mine")
    before = snapshot(mine)
    err = assert_user_error(cli("overhead", "-n", "2", "--keep", mine, "--", "true"))
    assert f"{mine}: exists and is not a `tierlab overhead --keep` directory" in err
    assert snapshot(mine) == before
    rec = a_recording(tmp_path / "rec")
    before = snapshot(rec)
    err = assert_user_error(cli("overhead", "-n", "2", "--keep", rec, "--", "true"))
    assert "it is a tierlab recording" in err
    assert snapshot(rec) == before


def test_overhead_keep_replaces_its_own_output(tmp_path: Path) -> None:
    keep = tmp_path / "keep"
    args = ("overhead", "-n", "2", "--warmup", "0", "--backend", "page-faults", "--keep", keep)
    res = tierlab(*args, "--", "true")
    if res.returncode != 0 and "perf_event_open" in res.stderr:
        pytest.skip(f"perf_event_open is not allowed here: {res.stderr.strip()}")
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in keep.iterdir()) == ["overhead.json", "run-0", "run-1"]
    first = json.loads((keep / "overhead.json").read_text())
    assert first["format"] == "tierlab-overhead" and first["runs"] == 2
    res = tierlab(*args, "--", "true")
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in keep.iterdir()) == ["overhead.json", "run-0", "run-1"]


def test_overhead_names_the_signal_that_killed_the_target(tmp_path: Path) -> None:
    script = tmp_path / "segv.sh"
    script.write_text("#!/bin/sh\nkill -SEGV $$\n")
    script.chmod(0o755)
    err = assert_user_error(cli("overhead", "-n", "2", "--warmup", "0", "--", script))
    assert "killed by signal SIGSEGV (baseline run)" in err
    assert "status -11" not in err


# -- 4. bench tracer ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, option",
    [
        (("--scale", "-1"), "argument --scale"),
        (("--scale", "0"), "argument --scale"),
        (("--scale", "nan"), "argument --scale"),
        (("--lackey-scale", "2"), "argument --lackey-scale"),
        (("--threads", "0"), "argument --threads"),
        (("--threads", "-2"), "argument --threads"),
        (("--programs", "triad,nope"), "--programs: 'nope'"),
        (("--programs", ","), "--programs: give"),
    ],
)
def test_bench_tracer_sizes_are_argument_errors(args: tuple[str, ...], option: str) -> None:
    err = assert_user_error(cli("bench", "tracer", *args))
    assert option in err


def test_bench_tracer_child_that_dies_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from tierlab.live import cctrace

    def dies(*args: object, **kw: object) -> dict:
        raise subprocess.CalledProcessError(-11, ["/tmp/x/triad-traced", "10", "5"], b"", b"")

    monkeypatch.setattr(cctrace, "bench_tracer", dies)
    err = assert_user_error(cli("bench", "tracer", "--scale", "0.5"), code=1)
    assert "triad-traced killed by signal SIGSEGV" in err and "--scale 0.5" in err
    # Past the start line ("tierlab bench tracer: starting"), the error: one line.
    assert len(err.strip().splitlines()) == 1, err


# -- 5. smaller ones ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [",", "", " , ", "DAMON,"])
def test_empty_technique_list_is_an_error(tel: Path, value: str) -> None:
    err = assert_user_error(cli("telemetry", tel, "--techniques", value, "--no-progress"))
    assert f"--techniques {value!r}" in err


def test_tune_points_that_match_nothing_are_named(sweep: Path) -> None:
    args = ("tune", sweep, "--param", "machine.cores=1:2", "--objective", "x")
    err = assert_user_error(cli(*args, "--points", "zzz", "--no-progress"))
    assert "--points 'zzz' matches none" in err and "a, b" in err


def test_error_outside_a_sweep_has_no_empty_point_label(one: Path) -> None:
    err = assert_user_error(cli("coremap", one, "--set", "machine.corez=3"))
    assert "point ''" not in err
    assert "corez" in err


def test_place_plan_refuses_an_empty_plan(tmp_path: Path) -> None:
    from tierlab.recording import RecordingWriter

    rec = tmp_path / "rec"
    with RecordingWriter(rec, source="test", machine={}) as w:
        w.append_mappings(
            time_ns=[0], event=["map"], start=[0x10000000], length=[65536], name=["[anon]"]
        )
        w.append_samples(
            time_ns=[1],
            tid=[1],
            cpu=[0],
            addr=[0x10000000],
            ip=[0],
            weight=[0],
            data_src=[0],
            event=["page-faults"],
            drain=[0],
        )
    out = tmp_path / "plan.json"
    err = assert_user_error(
        cli("place", "plan", rec, "-o", out, "--cpu-nodes", "0=0-3", "--nodes", "99")
    )
    assert "--nodes 99" in err and "nodes with CPUs 0" in err
    assert not out.exists()
    err = assert_user_error(
        cli(
            "place",
            "plan",
            rec,
            "-o",
            out,
            "--policy",
            "hot-fast",
            "--fast-node",
            "0",
            "--fast-capacity",
            "0",
        )
    )
    assert "--fast-capacity 0" in err
    assert not out.exists()
    # A good plan still works.
    res = cli("place", "plan", rec, "-o", out, "--cpu-nodes", "0=0-3", "--nodes", "0,99")
    assert res.returncode == 0, res.stderr


def test_sweep_out_refuses_a_foreign_directory_and_resumes_its_own(
    sweep: Path, tmp_path: Path
) -> None:
    # `run --out` of a scenario with [[sweep]] wrote into any directory.
    mine = foreign_dir(tmp_path / "mine")
    before = snapshot(mine)
    err = assert_user_error(tierlab("run", sweep, "--out", mine, "--no-progress"))
    assert str(mine) in err
    assert snapshot(mine) == before
    rec = a_recording(tmp_path / "rec")
    assert_user_error(tierlab("run", sweep, "--out", rec, "--no-progress"))
    out = tmp_path / "out"
    for _ in range(2):  # a new directory, then its own output (the points are reused)
        res = tierlab("run", sweep, "--out", out, "--no-progress")
        assert res.returncode == 0, res.stderr
        assert (out / "records.json").is_file()
    assert "reused 2 of 2 points" in res.stderr, res.stderr
