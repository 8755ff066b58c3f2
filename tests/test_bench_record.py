"""``tierlab bench engine --record DIR --calibrate C_FILE`` (``make bench``): a record per run
with the commit, the machine, every benchmark's figures and the calibration against the naive
C model, compared with the previous record."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import REPO, assert_user_error, tierlab

MODEL = REPO.parent / "shared" / "bench" / "engine-calibration.c"


@pytest.fixture
def model() -> Path:
    if not MODEL.is_file():
        pytest.skip("../shared/bench/engine-calibration.c is absent")
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler to build the calibration model")
    return MODEL


def test_record_calibration_and_comparison(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "results"
    args = ["bench", "engine", "--quick", "--repeat", "1", "--calibrate", model, "--record", out]
    first = tierlab(*args, cwd=REPO)
    assert first.returncode == 0, first.stderr
    assert "calibration machine_1core_random_over_model_random" in first.stdout
    assert "against" not in first.stdout  # nothing to compare with yet
    second = tierlab(*args, cwd=REPO)
    assert second.returncode == 0, second.stderr
    files = sorted(out.glob("engine-*.json"))
    assert len(files) == 2
    rec = json.loads(files[-1].read_text())
    assert rec["kind"] == "tierlab bench engine" and rec["quick"] is True
    assert len(rec["commit"]) == 40  # measured in the repository: its commit
    assert rec["machine"]["cores"] >= 1 and rec["machine"]["memory_bytes"] > 0
    for name in ("generate", "machine_1core", "machine_16core", "machine_1core_random"):
        b = rec["benchmarks"][name]
        assert 0 < b["worst"] <= b["median"] <= b["best"]
    cal = rec["calibration"]["machine_1core_random_over_model_random"]
    runs = rec["runs"]["machine_1core_random"]
    model_runs = rec["calibration"]["runs"]["model_random"]
    assert cal["per_round"] == [a / b for a, b in zip(runs, model_runs, strict=True)]
    # The second run names the first record and gives new / old for every benchmark.
    assert "against engine-" in second.stdout
    for name in rec["benchmarks"]:
        assert f"  {name} " in second.stdout


def test_bad_model_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.c"
    bad.write_text("this is not C\n")
    err = assert_user_error(
        tierlab("bench", "engine", "--quick", "--repeat", "1", "--calibrate", bad)
    )
    assert "does not compile" in err
    err = assert_user_error(
        tierlab("bench", "engine", "--quick", "--repeat", "1", "--calibrate", tmp_path / "no.c")
    )
    assert "no.c" in err
