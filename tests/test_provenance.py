"""Provenance: what ``run.json`` and every stored sweep point record about where a result came
from, and ``tierlab rerun``, which runs an output directory again and compares."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import assert_user_error, tierlab
from tierlab.provenance import digest, referenced_paths

FIXTURES = Path(__file__).parent / "fixtures" / "traces"

REPLAY = """
name = "replay-mine"
duration = "1ms"
[workload]
kind = "replay"
path = "rec"
"""


def test_rerun_of_the_demo_reports_identical_results(tmp_path: Path) -> None:
    out = tmp_path / "demo-out"
    res = tierlab("run", "demo", "--out", out)
    assert res.returncode == 0, res.stderr
    prov = json.loads((out / "run.json").read_text())["provenance"]
    assert prov["executor"] == "local" and prov["inputs"] == []
    assert len(prov["scenario_sha256"]) == 64
    assert prov["host"]["cpus"] >= 1 and prov["host"]["kernel"]
    sw = prov["software"]
    assert sw["tierlab_version"] and sw["python"] and sw["libraries"]["numpy"]
    assert sw["git"] is None or len(sw["git"]["commit"]) == 40
    res = tierlab("rerun", out, "--json")
    assert res.returncode == 0, res.stderr
    doc = res.json()
    assert isinstance(doc, dict) and doc["identical"] is True
    assert doc["files"] == {
        "scenario.toml": "identical",
        "stats.json": "identical",
        "timeseries.csv": "identical",
        "timeseries.parquet": "identical",
        "heatmap.parquet": "identical",
    }
    assert doc["provenance_changes"] == []


def test_inputs_are_hashed_and_a_changed_input_is_named(tmp_path: Path) -> None:
    rec = tmp_path / "rec"
    assert tierlab("import", "csv", FIXTURES / "trace.csv", "-o", rec).returncode == 0
    spec = tmp_path / "replay.toml"
    spec.write_text(REPLAY)
    out = tmp_path / "out"
    res = tierlab("run", spec, "--out", out)
    assert res.returncode == 0, res.stderr
    [inp] = json.loads((out / "run.json").read_text())["provenance"]["inputs"]
    assert inp["key"] == "workload.path"
    assert inp["path"] == str(rec.absolute()) and inp["sha256"] == digest(rec)
    # Something of the recording changes that the run does not read: the results are the
    # same, and rerun says which input is not what it was.
    meta = json.loads((rec / "meta.json").read_text())
    meta["note"] = "edited"
    (rec / "meta.json").write_text(json.dumps(meta))
    res = tierlab("rerun", out)
    assert res.returncode == 0, res.stderr
    assert "identical results" in res.stdout
    assert f"input workload.path ({rec.absolute()}): its content changed" in res.stdout


def test_every_path_like_key_is_an_input() -> None:
    doc = {
        "workload": {"kind": "replay", "path": "a"},
        "tiering": {"kind": "python", "path": "policy.py", "threshold": 3},
        "agents": [{"kind": "python", "path": "x.py"}, {"kind": "toy"}],
        "telemetry": [{"kind": "damon", "schemes_file": "s.json", "name": "d"}],
        "machine": {"masim": {"config": "z.cfg"}},
    }
    assert referenced_paths(doc) == [
        ("workload.path", "a"),
        ("tiering.path", "policy.py"),
        ("agents[0].path", "x.py"),
        ("telemetry[0].schemes_file", "s.json"),
        ("machine.masim.config", "z.cfg"),
    ]


def test_sweep_points_record_their_provenance_and_executor(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    res = tierlab(
        "run",
        "numa-placement",
        "--points",
        "stream/2-nodes/first-touch",
        "--set",
        'workload={ kind = "omp-kernel", kernel = "stream", init = "serial", '
        'array_size = "256KiB", iterations = 2, threads = 8 }',
        "--out",
        out,
        "--jobs",
        "1",
    )
    assert res.returncode == 0, res.stderr
    [point] = list((out / "points").glob("*.json"))
    prov = json.loads(point.read_text())["result"]["provenance"]
    assert prov["executor"] == "local, 1 at a time"
    assert prov["software"]["tierlab_version"]


def test_rerun_refuses_what_is_not_a_run_output(tmp_path: Path) -> None:
    err = assert_user_error(tierlab("rerun", tmp_path))
    assert "not the output of `tierlab run --out`" in err
