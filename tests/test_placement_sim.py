"""Simulated ccNUMA placement from the CLI: ``tierlab run numa-placement --json`` prints one
record per sweep point (policy, nodes, run time, savings, overhead), ``--out`` writes the
table and the plot, and the same seed gives the same records. Points are run small
(``--set`` replaces the workload with a 1 MiB-per-array STREAM and shrinks the cache model)."""

from __future__ import annotations

import math
from pathlib import Path

from conftest import tierlab

SMALL = [
    "--set",
    'workload={ kind = "omp-kernel", kernel = "stream", init = "serial", '
    'array_size = "1MiB", iterations = 40, threads = 8 }',
    "--set",
    'machine.cache.size="32KiB"',
]


def run_points(glob: str, *extra: str) -> list[dict]:
    r = tierlab("run", "numa-placement", "--json", "--points", glob, *SMALL, *extra)
    assert r.returncode == 0, r.stderr
    recs = r.json()
    assert isinstance(recs, list)
    return recs


def test_json_records_show_profile_guided_saving_and_overhead(tmp_path: Path) -> None:
    recs = run_points("stream/2-nodes/*", "--out", str(tmp_path))
    by = {r["policy"]: r for r in recs}
    assert set(by) == {"first-touch", "interleave", "profile-guided", "profile-guided-migrate"}
    for r in recs:
        assert r["kernel"] == "stream" and r["nodes"] == 2
        assert r["label"].startswith("stream/2-nodes/")
        for k in ("run_time_s", "savings_pct", "overhead_pct"):
            assert isinstance(r[k], float) and math.isfinite(r[k]), (r["label"], k)
    ft, il, pg = by["first-touch"], by["interleave"], by["profile-guided"]
    assert ft["savings_pct"] == 0.0 and ft["overhead_pct"] == 0.0
    assert pg["run_time_s"] < il["run_time_s"] < ft["run_time_s"]
    expect = 100 * (ft["run_time_s"] - pg["run_time_s"]) / ft["run_time_s"]
    assert abs(pg["savings_pct"] - expect) < 1e-2
    assert pg["savings_pct"] > 10.0
    assert 0.0 < pg["overhead_pct"] < 20.0
    assert pg["profile_samples"] > 0 and pg["pages_with_affinity"] > 0
    # The paper's numbers in the records are those of the paper file `tierlab reproduce`
    # checks against, whose source quotes the abstract.
    paper = _paper_values()
    assert (pg["paper_savings_pct"], pg["paper_overhead_pct"]) == (
        paper["saving"],
        paper["overhead"],
    )
    mg = by["profile-guided-migrate"]
    assert mg["pages_migrated"] > 0 and mg["run_time_s"] < ft["run_time_s"]
    # --out: the records, the table and the plot.
    for name in ("records.json", "records.csv", "placement.csv", "placement.png", "placement.svg"):
        assert (tmp_path / name).stat().st_size > 0, name
    header = (tmp_path / "placement.csv").read_text().splitlines()[0]
    for col in ("policy", "nodes", "run_time_s", "savings_pct", "overhead_pct"):
        assert col in header.split(",")


def test_same_seed_same_records() -> None:
    a = run_points("stream/4-nodes/profile-guided", "--seed", "5")
    b = run_points("stream/4-nodes/profile-guided", "--seed", "5")
    assert a == b
    assert a[0]["nodes"] == 4 and a[0]["seed"] == 5


def test_bad_placement_field_is_reported() -> None:
    r = tierlab(
        "run",
        "numa-placement",
        "--json",
        "--points",
        "stream/2-nodes/profile-guided",
        "--set",
        "placement.period=0",
    )
    assert r.returncode != 0
    assert "placement.period" in r.stderr


PROFILE_SCENARIO = """
name = "plan-equality"
duration = "30ms"
window = "10ms"
[machine]
cores = 4
[[machine.nodes]]
name = "n0"
capacity = "1GiB"
latency_ns = 90.0
cores = [0, 1]
[[machine.nodes]]
name = "n1"
capacity = "1GiB"
latency_ns = 90.0
cores = [2, 3]
[workload]
kind = "stream"
array_size = "8MiB"
threads = 4
[placement]
kind = "profile-guided"
mode = "profile"
period = 40
"""


def test_simulated_profile_and_place_plan_give_the_same_plan(tmp_path: Path) -> None:
    """The simulator's placement decision (profile-guided, `profile` stage) and `tierlab place
    plan` on the recording of the same samples run the same rule (tierlab-core's affinity),
    so they place every page on the same node."""
    import json

    from tierlab.api import run
    from tierlab.reporters import write_all

    spec = tmp_path / "profile.toml"
    spec.write_text(PROFILE_SCENARIO)
    result = run(spec)
    out = tmp_path / "out"
    write_all(result, out)
    rec = out / "samples-placement"
    assert (rec / "meta.json").is_file(), sorted(p.name for p in out.iterdir())
    plan_file = tmp_path / "plan.json"
    r = tierlab("place", "plan", str(rec), "--policy", "affinity", "-o", str(plan_file))
    assert r.returncode == 0, r.stderr
    plan = json.loads(plan_file.read_text())
    live = {p["addr"]: p["node"] for p in plan["pages"]}
    sim: dict[int, int] = {}
    for start, end, node in result.plan or []:
        for addr in range(start, end, 4096):
            sim[addr] = node
    assert sim, "the simulated profile produced a plan"
    assert live == sim


def test_savings_are_against_first_touch_on_the_same_machine() -> None:
    """numa-opteron: two machines (remote 2x and 1.5x) in one sweep; each saving is against
    the first-touch run of its own kernel, node count and remote factor, and the records
    carry the profile's source and period (read from the point's scenario)."""
    from tierlab.placement_sim import add_savings, record

    def stats(policy: str, t: float) -> dict[str, object]:
        return {
            "placement.policy": policy,
            "placement.mode": "next-run",
            "placement.nodes": 2,
            "placement.run_time_s": t,
            "workload.kernel": "stream",
            "placement.profile.source": "tlb-misses",
        }

    def sc(rf: float, period: int | None = None) -> dict[str, object]:
        pl: dict[str, object] = {"kind": "profile-guided"}
        if period is not None:
            pl["period"] = period
        return {"machine": {"remote_factor": rf}, "placement": pl}

    recs = [
        record("a/ft", "w", stats("first-touch", 4.0), sc(2.0)),  # type: ignore[arg-type]
        record("a/pg", "w", stats("profile-guided", 3.0), sc(2.0, 10)),  # type: ignore[arg-type]
        record("b/ft", "w", stats("first-touch", 2.0), sc(1.5)),  # type: ignore[arg-type]
        record("b/pg", "w", stats("profile-guided", 1.8), sc(1.5)),  # type: ignore[arg-type]
    ]
    rs = [r for r in recs if r is not None]
    add_savings(rs)
    assert [r.savings_pct for r in rs] == [0.0, 25.0, 0.0, 10.0]
    assert [r.remote_factor for r in rs] == [2.0, 2.0, 1.5, 1.5]
    assert rs[1].source == "tlb-misses" and rs[1].period == 10
    assert rs[3].period == 1000  # the policy's default when the scenario leaves it out
    assert rs[0].period is None and "period" not in rs[0].to_json()


def _paper_values() -> dict[str, float]:
    """The numa-placement figure's paper values (figure -> value_pct) from the paper file,
    checked against the quotation of the abstract it gives as their source."""
    import tomllib

    from conftest import REPO

    doc = tomllib.loads((REPO / "python/tierlab/reproduce/papers/numa.toml").read_text())
    fig = next(f for f in doc["figures"] if f["id"] == "numa-placement")
    table = fig["paper_values"][0]
    values = {name: float(v) for name, v in table["rows"]}
    for v in values.values():
        assert f"{v:g}%" in table["source"], (v, table["source"])
    return values
