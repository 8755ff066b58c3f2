"""tierlab tune: ranges, a grid search through the CLI (ranked trials, files, resuming from
the stored trials), a Bayesian search, and the errors a user can make."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from conftest import assert_user_error, cli, tierlab
from tierlab.tune import Param, TuneError

KV = [
    "tiering-kv",
    "--points",
    "HeMem",
    "--objective",
    "workload.kv.throughput",
    "--set",
    'duration="1s"',
    "--set",
    "workload.keys=10000000",
]


def test_param_ranges() -> None:
    p = Param.parse("tiering.read_hot_threshold=2:8:2")
    assert (p.kind, p.grid()) == ("int", [2, 4, 6, 8])
    p = Param.parse('tiering.interval=["10ms", "50ms"]')
    assert (p.kind, p.grid()) == ("choice", ["10ms", "50ms"])
    p = Param.parse("policies[0].p=0:1")
    assert p.kind == "int" and p.grid() == [0, 1]
    p = Param.parse("policies[0].p=0.0:1.0")
    assert p.kind == "float" and p.grid(3) == [0.0, 0.5, 1.0]
    p = Param.parse("x=1:100:log")
    assert p.log and p.grid(3) == [1, 10, 100]
    assert Param.parse("x=0.1:0.3:0.1").grid() == pytest.approx([0.1, 0.2, 0.3])
    assert Param.parse("x=fifo").choices == ("fifo",)
    for bad in ("x", "=1:2", "x=5:1", "x=0:10:log", "x=[]", "x=1:2:0"):
        with pytest.raises(TuneError):
            Param.parse(bad)


def test_grid_search_ranked_written_and_resumed(tmp_path: Path) -> None:
    out = tmp_path / "t"
    args = [
        "tune",
        *KV,
        "--param",
        "tiering.read_hot_threshold=4:8:4",
        "--param",
        'tiering.interval=["10ms","50ms"]',
        "--out",
        out,
    ]
    res = tierlab(*args, "--json")
    assert res.returncode == 0, res.stderr
    doc = res.json()
    assert isinstance(doc, dict)
    trials = doc["trials"]
    assert len(trials) == 4
    assert {
        (t["params"]["tiering.read_hot_threshold"], t["params"]["tiering.interval"]) for t in trials
    } == {
        (4, "10ms"),
        (4, "50ms"),
        (8, "10ms"),
        (8, "50ms"),
    }
    best = doc["best"]
    assert best["value"] == max(t["value"] for t in trials)
    assert best["command"].startswith("tierlab run tiering-kv --points HeMem ")
    for name in ("tune.json", "trials.csv", "index.html"):
        assert (out / name).stat().st_size > 0
    # The best trial's command reruns it: the same objective value.
    rerun = tierlab(*shlex.split(best["command"])[1:], "--json")
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.json()[0]["throughput_rps"] == best["value"]
    # Resuming: every trial comes from the store.
    res = tierlab(*args)
    assert res.returncode == 0, res.stderr
    assert "reused 4 trials" in res.stderr
    assert "best: tierlab run tiering-kv" in res.stdout


def test_bayes_search(tmp_path: Path) -> None:
    pytest.importorskip("optuna")
    args = [
        "tune",
        *KV,
        "--param",
        "tiering.read_hot_threshold=2:16",
        "--method",
        "bayes",
        "--trials",
        "2",
        "--minimize",
        "--seed",
        "3",
        "--json",
    ]
    a = tierlab(*args)
    assert a.returncode == 0, a.stderr
    doc = a.json()
    assert isinstance(doc, dict) and len(doc["trials"]) == 2
    assert doc["best"]["value"] == min(t["value"] for t in doc["trials"])
    # Seeded: the same search proposes the same settings.
    b = tierlab(*args)
    assert [t["params"] for t in b.json()["trials"]] == [t["params"] for t in doc["trials"]]  # type: ignore[index]


def test_tune_errors() -> None:
    res = cli("tune", "tiering-kv", "--param", "x=1:2", "--objective", "y")
    assert "choose one with --points (baseline, DAMON-MOD" in assert_user_error(res)
    res = tierlab(
        "tune",
        *KV[:3],
        "--objective",
        "workload.kv.thruput",
        "--param",
        'tiering.interval=["10ms"]',
        "--set",
        'duration="1s"',
        "--set",
        "workload.keys=10000000",
    )
    assert "close: workload.kv.throughput" in assert_user_error(res)
    res = cli("tune", *KV, "--param", "tiering.no_such_key=1:2")
    assert "no_such_key" in assert_user_error(res)
    res = cli("tune", *KV, "--param", "tiering.interval=5:1")
    assert "ends below its start" in assert_user_error(res)
