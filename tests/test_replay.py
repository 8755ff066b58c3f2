"""Replaying a recording written by RecordingWriter through the engine."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import tierlab as tl
from conftest import tierlab
from tierlab.recording import RecordingWriter

HEAP = 0x5000_0000
N = 20_000


def make_recording(path: Path) -> np.ndarray:
    rng = np.random.default_rng(5)
    addr = HEAP + rng.integers(0, (4 << 20) // 64, N, dtype=np.uint64) * 64
    with RecordingWriter(path, source="test", parameters={"synthetic": True}) as w:
        w.append_mappings(time_ns=[0], event=["map"], start=[HEAP], length=[4 << 20], name=["heap"])
        for part in np.array_split(np.arange(N), 3):  # several parts
            w.append_accesses(
                time_ns=part * 100,
                tid=part % 2,
                addr=addr[part],
                kind=(part % 3 == 0).astype(np.uint8),
            )
            w.flush()
    return addr


def replay_scenario(dir: Path) -> Path:
    scenario = dir / "replay.toml"
    scenario.write_text(
        'name = "replay-test"\n\n'
        "[machine]\ncores = 2\n\n"
        '[workload]\nkind = "replay"\npath = "rec"\n'
    )
    return scenario


def test_replay_via_cli(tmp_path: Path) -> None:
    make_recording(tmp_path / "rec")
    scenario = replay_scenario(tmp_path)
    # run from elsewhere: the recording path is relative to the scenario file
    res = tierlab("run", scenario, "--json", cwd=tmp_path.parent)
    assert res.returncode == 0, res.stderr
    stats = json.loads(res.stdout)
    assert stats["machine"]["accesses"] == N


def test_replay_via_api(tmp_path: Path) -> None:
    make_recording(tmp_path / "rec")
    r = tl.run(replay_scenario(tmp_path))
    assert r.stats["machine"]["accesses"] == N
    assert r.timeseries["writes"].sum() == len(range(0, N, 3))
    assert {m["name"] for m in r.mappings} == {"heap"}


def test_replay_of_bad_recording_is_a_clean_error(tmp_path: Path) -> None:
    (tmp_path / "rec").mkdir()  # no meta.json
    res = tierlab("run", replay_scenario(tmp_path))
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert "meta.json" in res.stderr


def test_replay_of_a_sampled_recording_says_it_holds_samples_only(tmp_path: Path) -> None:
    # A perf-script import holds samples, no accesses: replaying it ran 0 accesses and
    # reported success.
    fixture = Path(__file__).parent / "fixtures" / "perf-script-mem-loads.txt"
    res = tierlab("import", "perf-script", fixture, "-o", tmp_path / "rec")
    assert res.returncode == 0, res.stderr
    res = tierlab("run", replay_scenario(tmp_path))
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert "no accesses" in res.stderr and "samples" in res.stderr, res.stderr


def test_a_stage_override_of_a_zero_duration_is_refused(tmp_path: Path) -> None:
    # `set = ["duration=\"0s\""]` in a stage skipped the file's checks and ran forever.
    path = tmp_path / "st.toml"
    path.write_text(
        'name = "t"\nduration = "20ms"\n[workload]\nkind = "uniform"\nfootprint = "16MiB"\n'
        '[[stages]]\nname = "a"\nset = [\'duration="0s"\']\n'
    )
    res = tierlab("run", path, "--no-progress", timeout=60)
    assert res.returncode == 2, res.stderr
    assert "stages[0].set" in res.stderr and "duration" in res.stderr, res.stderr
