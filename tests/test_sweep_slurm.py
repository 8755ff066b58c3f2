"""The SLURM executor against a real single-node SLURM cluster that this file starts and
stops (``slurm_cluster.py``): a sweep of 8 points submitted as one job array, cancelled
half-way, each lost point reported on one line, then run again: only the missing points are
submitted, and the final report is byte-identical to a local run's."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import tierlab
from slurm_cluster import Cluster, ClusterUnavailable

#: numa-placement's 8 stream points (4 policies x 2 and 4 nodes), each a fraction of a second.
SWEEP = [
    "run",
    "numa-placement",
    "--points",
    "stream/*",
    "--set",
    'workload={ kind = "omp-kernel", kernel = "stream", init = "serial", '
    'array_size = "256KiB", iterations = 4, threads = 8 }',
    "--set",
    'machine.cache.size="32KiB"',
    "--no-progress",
]
REPORT = ("records.json", "records.csv", "placement.csv", "placement.png", "placement.svg")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("slurm"))
    try:
        c.check()
    except ClusterUnavailable as e:
        pytest.skip(f"no SLURM cluster can run here: {e}")
    mp = pytest.MonkeyPatch()
    try:
        c.start()  # a daemon that does not come up fails the test, with its log
        mp.setenv("SLURM_CONF", c.env["SLURM_CONF"])
        yield c
    finally:
        mp.undo()
        c.stop()


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sweep's report from local processes."""
    out = tmp_path_factory.mktemp("local") / "out"
    res = tierlab(*SWEEP, "--out", out, "--jobs", "2")
    assert res.returncode == 0, res.stderr
    return out


def test_sweep_cancelled_half_way_resumes_to_the_local_report(
    cluster: Cluster, local: Path, tmp_path: Path
) -> None:
    from tierlab.sweep.api import run_kind
    from tierlab.sweep.kinds import for_sweep
    from tierlab.sweep.slurm_executor import SlurmExecutor

    out = tmp_path / "slurm"
    args = SWEEP[1:]
    sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
    executor = SlurmExecutor(out / "slurm", jobs=2, poll_seconds=0.5)
    cancelled: list[str] = []

    def on_done(done: int, total: int, label: str, wall: float) -> None:
        # Half-way: cancel the array (its pending and running tasks).
        if done >= total // 2 and not cancelled:
            job = executor.submitted[0][0]
            subprocess.run(["scancel", job], check=True, env=cluster.env)
            cancelled.append(job)

    first = run_kind(
        "numa-placement",
        for_sweep("placement"),
        set=sets,
        only="stream/*",
        executor=executor,
        on_done=on_done,
        cache_dir=out / "points",
    )
    assert executor.submitted == [(cancelled[0], 8)], "one array of 8 tasks"
    finished = len(first.run.finished())
    lost = {e.label: e.message for e in first.run.failures}
    assert 4 <= finished < 8 and finished + len(lost) == 8, (finished, lost)
    for label, message in lost.items():
        assert re.fullmatch(
            rf"SLURM array task {cancelled[0]}_\d ended without a result \(cancelled\).*"
            r"\(log: .*\.log\)",
            message,
        ), (label, message)

    # The rerun, as a user types it: only the missing points are submitted.
    res = tierlab(*SWEEP, "--out", out, "--executor", "slurm", "--jobs", "2", timeout=600)
    assert res.returncode == 0, res.stderr
    assert f"reused {finished} of 8 points" in res.stderr, res.stderr
    m = re.search(r"submitted (\d+) points? as SLURM job array (\d+)", res.stderr)
    assert m and int(m.group(1)) == 8 - finished, res.stderr
    for name in REPORT:
        assert (out / name).read_bytes() == (local / name).read_bytes(), name
    # Every stored point says where it ran.
    import json

    for p in (out / "points").glob("*.json"):
        prov = json.loads(p.read_text())["result"]["provenance"]
        assert prov["executor"].startswith("slurm") or prov["executor"].startswith("local")
        assert prov["host"]["cpus"] and prov["scenario_sha256"]


def test_a_failing_task_is_one_line_naming_the_point(cluster: Cluster, tmp_path: Path) -> None:
    """A submission SLURM refuses (an unknown partition) is one error line, and an array task
    whose command fails (its interpreter is not a program) ends without a result, reported
    as that point's failure naming the array task."""
    out = tmp_path / "oom"
    res = tierlab(
        *SWEEP[:3],
        "stream/2-nodes/first-touch",
        *SWEEP[4:],
        "--out",
        out,
        "--executor",
        "slurm",
        "--slurm-time",
        "1",
        "--slurm-partition",
        "nope",
    )
    assert res.returncode == 2, res.stderr
    assert "submitting the sweep's job array failed: sbatch:" in res.stderr
    assert "partition" in res.stderr.lower(), res.stderr
    assert "Traceback" not in res.stderr
    # A task whose command fails: a broken interpreter path in its script.
    from tierlab.sweep.api import run_kind
    from tierlab.sweep.kinds import for_sweep
    from tierlab.sweep.slurm_executor import SlurmExecutor

    ex = SlurmExecutor(out / "slurm", poll_seconds=0.5, python=os.devnull)
    outcome = run_kind(
        "numa-placement",
        for_sweep("placement"),
        set=[a for i, a in enumerate(SWEEP) if i and SWEEP[i - 1] == "--set"],
        only="stream/2-nodes/first-touch",
        executor=ex,
        cache_dir=out / "points",
    )
    [err] = outcome.run.failures
    assert err.label == "stream/2-nodes/first-touch"
    assert re.match(r"SLURM array task \d+_0 ended without a result \(failed\)", err.message), (
        err.message
    )


def next_line(stream: Any, word: str) -> str:
    """The first line of ``stream`` holding ``word`` (the command's start and progress lines
    come before it); blocks until it comes, empty at the end."""
    for line in stream:
        if word in line:
            return str(line)
    return ""


def test_a_killed_submitter_leaves_its_array_and_the_rerun_waits_for_it(
    cluster: Cluster, local: Path, tmp_path: Path
) -> None:
    """The submitting process is killed (SIGKILL) while its array is queued: the array goes
    on, and running the command again submits nothing but waits for those tasks. The
    partition is held down until each step is seen, so nothing depends on timing."""
    import signal
    import sys

    def scontrol(state: str) -> None:
        subprocess.run(
            ["scontrol", "update", "PartitionName=debug", f"State={state}"],
            check=True,
            env=cluster.env,
        )

    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "tierlab", *SWEEP, "--out", str(out), "--executor", "slurm"]
    scontrol("DOWN")
    try:
        first = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=cluster.env)
        assert first.stderr is not None
        line = next_line(first.stderr, "submitted")  # blocks until the array is submitted
        m = re.search(r"submitted 8 points as SLURM job array (\d+)", line)
        assert m, line
        first.send_signal(signal.SIGKILL)
        first.wait()
        second = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=cluster.env)
        assert second.stderr is not None
        line = next_line(second.stderr, "queued")  # the earlier array's tasks are found
        assert f"8 points are still queued or running in earlier SLURM job arrays ({m[1]})" in (
            line
        ), line
        scontrol("UP")
        rest = second.stderr.read()
        assert second.wait(timeout=600) == 0, rest
    finally:
        scontrol("UP")
    assert "submitted" not in rest, rest
    for name in REPORT:
        assert (out / name).read_bytes() == (local / name).read_bytes(), name
