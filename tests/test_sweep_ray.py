"""The Ray executor: a sweep on a local Ray cluster (started and stopped here) gives the
local executor's results, number for number."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import tierlab

SMALL_NUMA = [
    "--set",
    'workload={ kind = "omp-kernel", kernel = "stream", init = "serial", '
    'array_size = "256KiB", iterations = 4, threads = 8 }',
    "--set",
    'machine.cache.size="32KiB"',
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def ray_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A one-node Ray cluster on this machine (2 CPUs); its address. Teardown runs
    ``ray stop --force``, which ends every Ray instance of this machine's user."""
    try:
        import ray  # noqa: F401
    except ImportError:
        pytest.skip("Ray is not installed (pip install 'tierlab[ray]'; the test extra has it)")
    ray_cli = Path(sys.executable).with_name("ray")
    if not ray_cli.exists():
        ray_cli = Path(shutil.which("ray") or "ray")
    port = _free_port()
    temp = tmp_path_factory.mktemp("ray")
    # Ray's token authentication off for this cluster and its clients (the tierlab commands
    # below inherit the environment): a token file left in ~/.ray by another local Ray made
    # every client here fail with InvalidAuthToken.
    mp = pytest.MonkeyPatch()
    mp.setenv("RAY_AUTH_MODE", "disabled")
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    start = [
        str(ray_cli), "start", "--head", "--node-ip-address", "127.0.0.1", "--num-cpus", "2",
        "--port", str(port), "--include-dashboard=false", "--disable-usage-stats",
        f"--temp-dir={temp}",
    ]  # fmt: skip
    try:
        res = subprocess.run(start, capture_output=True, text=True, env=env, timeout=180)
        assert res.returncode == 0, res.stdout + res.stderr
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([str(ray_cli), "stop", "--force"], capture_output=True, env=env, timeout=120)
        mp.undo()


def test_ray_results_equal_local(ray_address: str, tmp_path: Path) -> None:
    args = ["run", "numa-placement", "--json", "--points", "stream/2-nodes/*", *SMALL_NUMA]
    local = tierlab(*args, "--jobs", "2", timeout=300)
    assert local.returncode == 0, local.stderr
    on_ray = tierlab(*args, "--executor", "ray", "--address", ray_address, timeout=300)
    assert on_ray.returncode == 0, on_ray.stderr
    assert on_ray.stdout == local.stdout  # byte for byte
    recs = json.loads(on_ray.stdout)
    assert {r["policy"] for r in recs} == {
        "first-touch",
        "interleave",
        "profile-guided",
        "profile-guided-migrate",
    }


def test_ray_point_results_equal_local(ray_address: str) -> None:
    """Through the API: every point's stats and time series, on Ray and locally."""
    from tierlab.sweep import LocalExecutor, kinds
    from tierlab.sweep.api import run_kind
    from tierlab.sweep.ray_executor import RayExecutor

    kind = kinds.get("telemetry", techniques=["R64-B8K"])
    small = ['duration="5ms"', 'window="1ms"']
    with RayExecutor(ray_address) as ex:
        assert ex.slots == 2
        remote = run_kind("pebs-minife", kind, set=small, executor=ex)
    local = run_kind("pebs-minife", kind, set=small, executor=LocalExecutor(2))
    assert not remote.run.failures and not remote.run.interrupted
    assert len(remote.run.finished()) == len(local.run.finished()) == 2

    def comparable(out: object) -> list[tuple[str, dict[str, object], dict[str, object]]]:
        rows = []
        for p, r in out.run.finished():  # type: ignore[attr-defined]
            stats = {k: v for k, v in r.stats_flat.items() if "wall" not in k and "host" not in k}
            rows.append((p.label, stats, r.timeseries))
        return rows

    assert comparable(remote) == comparable(local)


def test_ray_failed_point_is_one_line(ray_address: str, tmp_path: Path) -> None:
    spec = tmp_path / "bad.toml"
    spec.write_text(
        'name = "bad"\nduration = "10ms"\nwindow = "5ms"\n[workload]\nkind = "uniform"\n'
        'footprint = "4MiB"\n[[sweep]]\nlabel = "ok"\nset = []\n'
        '[[sweep]]\nlabel = "bad/point"\nset = ["machine.corez = 4"]\n'
    )
    res = tierlab("run", spec, "--json", "--executor", "ray", "--address", ray_address)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert [x for x in res.stderr.splitlines() if x.startswith("tierlab:")] == [
        next(x for x in res.stderr.splitlines() if x.startswith("tierlab: point 'bad/point': "))
    ]
    assert [r["label"] for r in res.json()] == ["ok"]


def test_reproduce_on_ray_equals_local(
    ray_address: str, smoke_report: Path, tmp_path: Path
) -> None:
    """`tierlab reproduce` runs its figures on the executor asked for: the same tables. The
    local tables are the numa paper's in the smoke report (`reproduce all --profile smoke`,
    made once per test run for test_reproduce), not a second local run of the same points."""
    args = ["reproduce", "numa", "--profile", "smoke", "--no-progress"]
    ray = tierlab(
        *args, "--out", tmp_path / "ray", "--executor", "ray", "--address", ray_address, timeout=300
    )
    assert ray.returncode == 0, ray.stderr

    def tables(d: Path) -> list[object]:
        doc = json.loads((d / "report.json").read_text())
        numa = next(p for p in doc["papers"] if p["id"] == "numa")
        return [f["table"] for f in numa["figures"]]

    on_ray = tables(tmp_path / "ray")
    assert on_ray and on_ray == tables(smoke_report)
