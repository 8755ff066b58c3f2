"""Every command that takes a scenario works on a replay scenario (a trace imported from raw
per-thread files): ``run`` with ``[[sweep]]``, replacement-policy sweeps and ``coremap``,
``telemetry``, tiering sweeps, placement stages and ``tune``; a failing point is one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import tierlab

N = 60_000  # accesses per thread


@pytest.fixture(scope="module")
def rec_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding ``rec``: two threads' raw traces (every 4th access a store),
    imported with ``tierlab import raw``. Scenarios written beside it replay ``rec``."""
    d = tmp_path_factory.mktemp("replay-cmds")
    raw = d / "raw"
    raw.mkdir()
    for t in range(2):
        i = np.arange(N, dtype=np.uint64)
        a = np.uint64(0x7F00_0000_0000 + t * (1 << 30)) + (i * np.uint64(4160 * 7)) % np.uint64(
            1 << 24
        )
        a |= (i % np.uint64(4) == 0).astype(np.uint64) << np.uint64(63)
        a.astype("<u8").tofile(raw / f"t{t}.bin")
    res = tierlab("import", "raw", raw / "t0.bin", raw / "t1.bin", "-o", d / "rec")
    assert res.returncode == 0, res.stderr
    return d


def scenario(d: Path, name: str, body: str) -> Path:
    path = d / f"{name}.toml"
    path.write_text(
        f'name = "{name}"\nwindow = "1ms"\n'
        + body
        + '\n[workload]\nkind = "replay"\npath = "rec"\nmappings = "touched"\n'
        + SWEEPS.get(name, "")
    )
    return path


TWO_NODES = """
[machine]
cores = 2
[[machine.nodes]]
name = "dram"
capacity = "2MiB"
latency_ns = 90.0
bandwidth_gbps = 100.0
cores = [0]
[[machine.nodes]]
name = "slow"
capacity = "1GiB"
latency_ns = 300.0
bandwidth_gbps = 40.0
cores = [1]
tier = 1
"""

SWEEPS = {
    "tlb": """
[[sweep]]
label = "small-tlb"
set = ["machine.tlb.l2_entries=768"]
[[sweep]]
label = "large-tlb"
set = ["machine.tlb.l2_entries=1536"]
""",
    "policies": """
[[policies]]
kind = "cmcp"
[[sweep]]
label = "fifo"
set = ['policies = [{ kind = "fifo" }]']
[[sweep]]
label = "lru"
set = ['policies = [{ kind = "lru" }]']
[[sweep]]
label = "cmcp"
set = []
""",
    "tiering": """
[[telemetry]]
name = "pebs"
kind = "pebs"
period = 101
[[telemetry]]
name = "ts"
kind = "telescope"
sample_interval = "100us"
aggr_interval = "1ms"
[[sweep]]
label = "baseline"
set = []
[[sweep]]
label = "hemem"
set = ['tiering={kind = "hemem", telemetry = "pebs"}']
[[sweep]]
label = "numa-tiering"
set = ['tiering={kind = "numa-tiering", scan_period = "1ms", scan_delay = "1ms"}']
""",
    "placement": """
[[sweep]]
label = "first-touch"
set = ['placement={kind = "first-touch"}']
[[sweep]]
label = "profile-guided"
set = ['placement={kind = "profile-guided", period = 11}']
[[sweep]]
label = "migrate"
set = ['placement={kind = "profile-guided", period = 11, mode = "migrate", interval = "1ms"}']
""",
}


def records(res: object) -> dict[str, dict[str, object]]:
    out = json.loads(res.stdout)  # type: ignore[attr-defined]
    return {r["label"]: r for r in out}


def test_run_with_sweep_on_a_replay(rec_dir: Path) -> None:
    s = scenario(rec_dir, "tlb", "[machine]\ncores = 2\n")
    res = tierlab("run", s, "--json", "--jobs", "2")
    assert res.returncode == 0, res.stderr
    recs = records(res)
    assert set(recs) == {"small-tlb", "large-tlb"}
    for r in recs.values():
        assert r["machine.accesses"] == 2 * N
    # A smaller TLB misses more on the same trace.
    assert recs["small-tlb"]["machine.tlb.misses"] >= recs["large-tlb"]["machine.tlb.misses"]


def test_policy_sweep_and_coremap_on_a_replay(rec_dir: Path) -> None:
    s = scenario(rec_dir, "policies", '[machine]\ncores = 2\n[machine.hmem]\nfast_memory = "50%"\n')
    res = tierlab("run", s, "--json", "--jobs", "2")
    assert res.returncode == 0, res.stderr
    recs = records(res)
    assert set(recs) == {"fifo", "lru", "cmcp"}
    for label, r in recs.items():
        assert r["policy"] == label
        # Half the touched pages fit: the policy evicts.
        assert r["page_faults"] > 0 and r["evictions"] > 0, r
    cm = tierlab("coremap", s, "--points", "fifo", "--json")
    assert cm.returncode == 0, cm.stderr
    shares = cm.json()["fifo"]  # type: ignore[index]
    # The two threads touch disjoint pages: every page is mapped by one core.
    assert set(shares) == {"1"} and shares["1"] > 0


def test_telemetry_and_tiering_sweep_on_a_replay(rec_dir: Path) -> None:
    s = scenario(rec_dir, "tiering", TWO_NODES)
    res = tierlab("run", s, "--json", "--jobs", "2")
    assert res.returncode == 0, res.stderr
    recs = records(res)
    assert set(recs) == {"baseline", "hemem", "numa-tiering"}
    assert recs["hemem"]["tiering.policy"] == "hemem"
    tel = tierlab("telemetry", s, "--points", "baseline", "--json")
    assert tel.returncode == 0, tel.stderr
    techniques = tel.json()["points"]["baseline"]["techniques"]  # type: ignore[index]
    assert set(techniques) == {"pebs", "ts"}


def test_placement_stages_on_a_replay(rec_dir: Path) -> None:
    s = scenario(rec_dir, "placement", TWO_NODES)
    res = tierlab("run", s, "--json", "--jobs", "2")
    assert res.returncode == 0, res.stderr
    recs = records(res)
    assert {r["placement.policy"] for r in recs.values()} == {"first-touch", "profile-guided"}
    assert recs["profile-guided"]["placement.mode"] == "next-run"
    assert recs["migrate"]["placement.mode"] == "migrate"


def test_tune_on_a_replay(rec_dir: Path) -> None:
    s = scenario(rec_dir, "tlb", "[machine]\ncores = 2\n")
    res = tierlab(
        "tune", s, "--points", "large-tlb", "--param", "machine.tlb.l2_entries=[768,1536]",
        "--objective", "machine.tlb.misses", "--minimize", "--json",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    doc = res.json()
    assert len(doc["trials"]) == 2  # type: ignore[index]


def test_a_failing_point_of_a_replay_sweep_is_one_line(rec_dir: Path) -> None:
    s = rec_dir / "bad.toml"
    s.write_text(
        'name = "bad"\n[machine]\ncores = 2\n[workload]\nkind = "replay"\npath = "rec"\n'
        '[[sweep]]\nlabel = "ok"\nset = []\n'
        '[[sweep]]\nlabel = "broken"\nset = ["machine.tlb.l2_entries=500"]\n'
    )
    res = tierlab("run", s, "--json", "--jobs", "2")
    assert res.returncode != 0
    assert "Traceback" not in res.stderr
    lines = [x for x in res.stderr.splitlines() if "broken" in x]
    assert len(lines) == 1 and "l2_entries" in lines[0], res.stderr
