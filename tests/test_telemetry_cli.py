"""`tierlab telemetry`: the JSON shape of the issue, tables and plots, per-footprint results,
and errors."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from conftest import assert_user_error, cli, tierlab

KEYS = {
    "time_to_precision_0_9",
    "time_to_recall_0_9",
    "mean_precision",
    "mean_recall",
    "observer_cpu_seconds",
}


def test_footprints_json_and_outputs(tmp_path: Path) -> None:
    out = tmp_path / "fp"
    res = tierlab(
        "telemetry", "telescope-footprints", "--techniques", "DAMON,TS-FLX", "--json",
        "--out", out, "--set", 'duration="2s"', "--no-baseline",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    doc = res.json()
    assert list(doc) == ["footprints"]
    assert list(doc["footprints"]) == ["1GB", "10GB", "100GB", "5TB"]
    for point in doc["footprints"].values():
        techs = point["techniques"]
        assert set(techs) == {"DAMON", "TS-FLX"}
        for figures in techs.values():
            assert set(figures) >= KEYS
    fp = doc["footprints"]
    # DAMON finds the 100 MB hot set of 1 GB but nothing of 10 GB hot in 5 TiB; Telescope
    # finds both.
    assert fp["1GB"]["techniques"]["DAMON"]["mean_recall"] > 0.5
    assert fp["5TB"]["techniques"]["DAMON"]["mean_recall"] < 0.05
    assert fp["5TB"]["techniques"]["TS-FLX"]["time_to_recall_0_9"] is not None
    table = pd.read_csv(out / "telemetry.csv")
    assert len(table) == 8 and set(table["footprints"]) == {"1GB", "10GB", "100GB", "5TB"}
    ts = pd.read_parquet(out / "telemetry_timeseries.parquet")
    assert {"precision", "recall", "truth_bytes", "technique"} <= set(ts.columns)
    for ext in ("png", "svg"):
        assert (out / f"precision_recall.{ext}").stat().st_size > 1000
    assert json.loads((out / "telemetry.json").read_text()) == doc


def test_unknown_technique_and_scenario_without_telemetry() -> None:
    err = assert_user_error(cli("telemetry", "telescope-5tb", "--techniques", "NOPE"))
    assert "NOPE" in err and "TS-FLX" in err
    err = assert_user_error(cli("telemetry", "demo"))
    assert "no [[telemetry]]" in err


def test_baseline_runs_count_no_ground_truth() -> None:
    """The baseline of each point only times the application (`report.ground_truth = false`:
    the engine's test `a_run_without_ground_truth_simulates_the_same` shows that this changes
    nothing simulated); the techniques' runs count ground truth to be scored."""
    from tierlab.telemetry import NO_TRUTH, TelemetryKind

    plan = TelemetryKind(["TS-FLX"]).plan("telescope-footprints", ['duration="1s"'], only="1GB")
    base = [p for p in plan.points if p.techniques == ()]
    techs = [p for p in plan.points if p.techniques]
    assert len(base) == 1 and len(techs) == 1
    assert base[0].overrides[-1] == NO_TRUTH and 'duration="1s"' in base[0].overrides
    assert NO_TRUTH not in techs[0].overrides
    assert base[0].overrides[:-1] == techs[0].overrides


def test_a_run_without_ground_truth(tmp_path: Path) -> None:
    """`report.ground_truth = false` from the command line: the outputs say that nothing was
    counted (no touched-page columns, a heatmap that says why it is empty), and a scenario
    whose techniques are scored by the accessed rule is refused naming the field."""
    out = tmp_path / "run"
    res = cli(
        "run",
        "demo",
        "--set",
        "report.ground_truth=false",
        "--set",
        'duration="30ms"',
        "--out",
        out,
    )
    assert res.returncode == 0, res.stderr
    stats = json.loads((out / "stats.json").read_text())
    assert stats["machine"]["accesses"] > 0 and "ground_truth_accesses" not in stats["run"]
    ts = pd.read_parquet(out / "timeseries.parquet")
    assert "accesses" in ts.columns and "pages_touched" not in ts.columns
    assert "no ground truth counted" in (out / "heatmap.svg").read_text()
    err = assert_user_error(cli("run", "pebs-minife", "--set", "report.ground_truth=false"))
    assert "report.ground_truth" in err and "declared" in err
