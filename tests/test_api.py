"""The Python API (`tierlab.run`, `export`, `scenarios`) against the native engine."""

from __future__ import annotations

import pandas as pd
import pytest

import tierlab


def test_version() -> None:
    assert tierlab.__version__ and tierlab.__version__[0].isdigit()


def test_scenarios() -> None:
    names = [name for name, _ in tierlab.scenarios()]
    assert "demo" in names


def test_run_result_shapes() -> None:
    r = tierlab.run("demo", duration="20ms")
    assert isinstance(r, tierlab.Result)
    assert r.name and not r.interrupted
    assert r.stats["machine"]["accesses"] == r.stats_flat["machine.accesses"] > 0
    assert isinstance(r.timeseries, pd.DataFrame) and len(r.timeseries) > 0
    for column in ("window", "t_start_s", "t_end_s", "accesses", "reads", "writes"):
        assert column in r.timeseries.columns
    assert any(c.startswith("node.") for c in r.timeseries.columns)
    assert (r.timeseries["reads"] + r.timeseries["writes"] == r.timeseries["accesses"]).all()
    # ground truth is exact: windows and heatmap bins add up to the machine's total
    assert r.timeseries["accesses"].sum() == r.stats["machine"]["accesses"]
    heat = r.heatmap_frame()
    assert heat["accesses"].sum() == r.stats["machine"]["accesses"]
    assert set(heat["mapping"]) <= {m["name"] for m in r.mappings}
    assert r.summary and all(isinstance(v, str) for _, v in r.summary)
    assert "[workload]" in r.scenario


def test_overrides_two_ways_agree() -> None:
    a = tierlab.export("demo", duration="20ms", machine__cores=2)
    b = tierlab.export("demo", set=['duration="20ms"', "machine.cores=2"])
    assert a == b
    assert "cores = 2" in a


def test_scenario_error_is_value_error() -> None:
    with pytest.raises(ValueError, match="corez"):
        tierlab.run("demo", machine__corez=2)


def test_progress_callback_can_stop_the_run() -> None:
    calls: list[tuple[int, int, int]] = []

    def progress(done: int, total: int, accesses: int) -> None:
        calls.append((done, total, accesses))
        raise KeyboardInterrupt

    r = tierlab.run("demo", duration="3600s", progress=progress)
    assert calls, "progress was never called"
    assert r.interrupted
    assert calls[0][1] == 3600 * 10**9
    assert r.stats["machine"]["accesses"] > 0
    assert r.sim_ns_done is not None and r.sim_ns_done < 3600 * 10**9
