"""Python-side pieces that need no native engine: overrides, results, reporters."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from rich.console import Console

from tierlab.api import Result, build_overrides, heatmap_frame, toml_value
from tierlab.cli.run import interrupted_message
from tierlab.reporters import reporters, write_all
from tierlab.reporters.summary import SummaryReporter


def fake_raw(interrupted: bool = False) -> SimpleNamespace:
    """A stand-in for the native ``RunOutput`` (every attribute it has), with 3 windows and 4
    bins."""
    counts = [[5, 0, 100, 1], [0, 0, 7, 3000], [1, 2, 3, 4]]
    return SimpleNamespace(
        scenario='name = "fake"\nseed = 3\n',
        name="fake",
        seed=3,
        interrupted=interrupted,
        error=None,
        wall_seconds=0.25,
        stats={"machine": {"accesses": 3123, "core": {"0": {"tlb": {"misses": 4}}}}},
        stats_flat={"machine.accesses": 3123, "machine.core.0.tlb.misses": 4},
        timeseries={
            "window": [0, 1, 2],
            "t_start_s": [0.0, 0.01, 0.02],
            "t_end_s": [0.01, 0.02, 0.03],
            "accesses": [106, 3007, 10],
            "node.dram.accesses": [100, 3000, 10],
        },
        heatmap={
            "t_start_s": [0.0, 0.01, 0.02],
            "t_end_s": [0.01, 0.02, 0.03],
            "bin_start": [0x1000_0000, 0x1010_0000, 0x4000_0000, 0x4010_0000],
            "bin_bytes": [1 << 20] * 4,
            "bin_mapping": ["a", "a", "b", "b"],
            "counts": counts,
        },
        mappings=[
            {"name": "a", "start": 0x1000_0000, "length": 2 << 20, "page_size": 4096},
            {"name": "b", "start": 0x4000_0000, "length": 2 << 20, "page_size": 4096},
        ],
        mapping_log=[],
        samples={},
        plan=None,
        core_nodes=[0],
        damo_records={},
        decisions={},
        stages=[],
        summary=[("accesses", "3,123"), ("simulated time", "30 ms")],
    )


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        (4, "4"),
        (True, "true"),
        (0.5, "0.5"),
        ("10s", '"10s"'),
        ('a "q"', '"a \\"q\\""'),
        ([1, "x"], '[1, "x"]'),
        ({"kind": "dram", "size": "4GiB"}, '{ kind = "dram", size = "4GiB" }'),
    ],
)
def test_toml_value(value: object, literal: str) -> None:
    assert toml_value(value) == literal
    assert tomllib.loads(f"v = {literal}")["v"] == value


def test_build_overrides() -> None:
    ov = build_overrides({"machine__cores": 4, "duration": "20ms"}, ["workload.threads=2"])
    assert ov == ["workload.threads=2", "machine.cores=4", 'duration="20ms"']
    with pytest.raises(ValueError, match="key=value"):
        build_overrides(None, ["oops"])


def test_result_from_native() -> None:
    r = Result.from_native(fake_raw(), progress=(25_000_000, 30_000_000, 3000))
    assert isinstance(r.timeseries, pd.DataFrame)
    assert r.timeseries["accesses"].sum() == 3123
    assert r.summary == [("accesses", "3,123"), ("simulated time", "30 ms")]
    assert r.sim_ns_done == 30_000_000  # the last window's end is later than the last tick
    assert r.sim_ns_total == 30_000_000
    assert r.stats_table().set_index("name").loc["machine.accesses", "value"] == "3123"


def test_heatmap_frame() -> None:
    frame = heatmap_frame(fake_raw().heatmap)
    assert len(frame) == 12
    assert frame["accesses"].sum() == 3123 + 0
    row = frame[(frame["window"] == 1) & (frame["bin"] == 3)].iloc[0]
    assert row["accesses"] == 3000 and row["mapping"] == "b" and row["bin_start"] == 0x4010_0000
    assert heatmap_frame({}).columns.tolist()[-1] == "accesses"


def test_reporters_write_every_file(tmp_path: Path) -> None:
    result = Result.from_native(fake_raw())
    written = write_all(result, tmp_path / "out")
    expected = {name for rep in reporters() for name in rep.files}
    assert {p.name for p in written} == expected  # no sampling technique: no samples-* dirs
    assert {p.name for p in (tmp_path / "out").iterdir()} == expected  # no temporary leftovers
    out = tmp_path / "out"
    assert pd.read_parquet(out / "timeseries.parquet").equals(result.timeseries)
    assert pd.read_csv(out / "timeseries.csv")["accesses"].tolist() == [106, 3007, 10]
    assert json.loads((out / "stats.json").read_text()) == result.stats
    assert json.loads((out / "run.json").read_text())["interrupted"] is False
    assert tomllib.loads((out / "scenario.toml").read_text())["seed"] == 3
    assert pd.read_parquet(out / "heatmap.parquet")["accesses"].sum() == 3123
    assert (out / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in (out / "heatmap.svg").read_bytes()[:1000]
    assert pd.read_csv(out / "summary.csv")["stat"].tolist() == ["accesses", "simulated time"]


def test_reporters_handle_empty_results(tmp_path: Path) -> None:
    raw = fake_raw(interrupted=True)
    raw.timeseries, raw.heatmap, raw.summary, raw.stats = {}, {}, [], {}
    written = write_all(Result.from_native(raw), tmp_path)
    assert all(p.stat().st_size > 0 or p.suffix == ".csv" for p in written)


def test_summary_render_and_interrupted_message() -> None:
    result = Result.from_native(fake_raw(interrupted=True), (12_500_000_000, 60_000_000_000, 5))
    console = Console(record=True, width=100)
    SummaryReporter().render(result, console)
    text = console.export_text()
    assert "fake (seed 3)" in text and "interrupted" in text and "3,123" in text
    assert interrupted_message(result) == "interrupted at 12.500 s of 60 s (simulated time)"


def test_reporters_write_sample_recordings(tmp_path: Path) -> None:
    from fnmatch import fnmatch

    from tierlab.recording import Recording

    raw = fake_raw()
    raw.mapping_log = [(0, "map", 0x1000_0000, 2 << 20, "a")]
    raw.samples = {
        "PEBS R=64": {
            "time_ns": [10, 10, 20],
            "tid": [0, 0, 1],
            "cpu": [0, 0, 1],
            "addr": [0x1000_0000, 0x1000_1000, 0x1000_2000],
            "ip": [0, 0, 0],
            "weight": [0, 0, 0],
            "data_src": [0, 0, 0],
            "event": ["loads"] * 3,
            "drain": [0, 0, 1],
        }
    }
    written = write_all(Result.from_native(raw), tmp_path / "out")
    fixed = {name for rep in reporters() for name in rep.files}
    patterns = [pat for rep in reporters() for pat in rep.patterns]
    extra = {p.name for p in written} - fixed
    assert extra == {"samples-PEBS_R_64"}
    assert all(any(fnmatch(name, pat) for pat in patterns) for name in extra)
    rec = Recording.open(tmp_path / "out" / "samples-PEBS_R_64")
    assert rec.samples()["addr"].tolist() == [0x1000_0000, 0x1000_1000, 0x1000_2000]
    assert rec.drains()["records"].tolist() == [2, 1]
    assert rec.mappings()["name"].tolist() == ["a"]


def test_telemetry_table_cells() -> None:
    from tierlab.telemetry import fmt_cell as _fmt

    assert _fmt(None) == "-"
    assert _fmt(float("nan")) == "-"
    assert _fmt(1249959.0) == "1,249,959"  # a count stored as a float
    assert _fmt(305.988) == "305.988"
    assert _fmt(2.0) == "2.000"  # seconds keep their decimals
    assert _fmt(0.000161) == "0.000161"
    assert _fmt(7) == "7"


def test_worker_writes_kept_samples_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``Point.samples_dir`` the worker writes the samples (recording + view) and only
    their paths come back: what the parent holds does not grow with the samples (issue 16)."""
    from tierlab import _native
    from tierlab.recording import Recording
    from tierlab.sweep.point import Point, PointResult
    from tierlab.sweep.worker import run_point

    raw = fake_raw()
    raw.mapping_log = [(0, "map", 0x1000_0000, 2 << 20, "a")]
    n = 5000
    raw.samples = {
        "PEBS": {
            "time_ns": list(range(n)),
            "tid": [0] * n,
            "cpu": [0] * n,
            "addr": [0x1000_0000 + 64 * i for i in range(n)],
            "ip": [0] * n,
            "weight": [0] * n,
            "data_src": [0] * n,
            "event": ["loads"] * n,
            "drain": [i // 100 for i in range(n)],
        }
    }
    monkeypatch.setattr(_native, "run", lambda *a, **k: raw)
    out = tmp_path / "pt"
    res = run_point(
        Point("p", "fake", techniques=("PEBS",), keep_samples=True, samples_dir=str(out))
    )
    assert isinstance(res, PointResult)
    assert res.samples is None and res.mapping_log is None
    assert res.written is not None
    names = {Path(p).name for p in res.written}
    assert "samples-PEBS" in names and "index.html" in names
    assert len(Recording.open(out / "samples-PEBS").samples()) == n
    # Without samples_dir they come back, as before.
    back = run_point(Point("p", "fake", techniques=("PEBS",), keep_samples=True))
    assert isinstance(back, PointResult) and back.written is None
    assert back.samples is not None and len(back.samples["PEBS"]["addr"]) == n
