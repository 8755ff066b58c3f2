"""``tierlab run tiering-kv``: one JSON record per tiering configuration, the table and the
plot (the built-in scenario shrunk to a 218 MB store and 2 simulated seconds)."""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path
from typing import Any

from conftest import tierlab

SMALL = [
    "--set",
    "workload.keys=200000",
    "--set",
    'duration="2s"',
    "--set",
    'window="500ms"',
    "--set",
    'machine.nodes[0].capacity="32MiB"',
    "--set",
    'machine.nodes[1].capacity="1GiB"',
]

POLICIES = {
    "baseline",
    "DAMON-MOD",
    "PMU-AGG",
    "TS-BND",
    "TS-FLX",
    "HeMem",
    "Memtis",
    "NUMA-tiering",
    "DAMON-mtier",
    "DAMON-mtier-temporal",
    "Colloid",
    "HybridTier",
    "NOMAD",
    "ARMS",
    "pghot",
    "kmmscand",
    "klruscand",
    "M5",
    "PACT",
    "baseline/interleaved",
    "NUMA-tiering/interleaved",
    "DAMON-mtier/interleaved",
    "DAMON-mtier-temporal/interleaved",
    "NOMAD/interleaved",
}


def test_json_has_one_record_per_policy(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = tierlab("run", "tiering-kv", "--json", "--out", out, "--jobs", "2", *SMALL, timeout=300)
    assert res.returncode == 0, res.stderr
    recs = json.loads(res.stdout)
    assert {r["policy"] for r in recs} == POLICIES
    by = {r["policy"]: r for r in recs}
    for r in recs:
        for k in (
            "fast_tier_bytes",
            "slow_tier_bytes",
            "run_time_s",
            "throughput_rps",
            "p95_us",
            "fast_hot_bytes",
            "migrations",
        ):
            assert k in r, (r["policy"], k)
        assert r["fast_tier_bytes"] == 32 << 20
        assert r["slow_tier_bytes"] == 1 << 30
        # The application's clock: shootdown interrupts a migration thread sends at the
        # last instant (klruscand's kmigrated promoting what its second walk marked) land on
        # the application cores after 2 s.
        assert abs(r["run_time_s"] - 2.0) < 0.03, r["policy"]
        assert r["throughput_rps"] > 0 and r["p95_us"] > 0
    base = by["baseline"]
    assert base["kind"] == "none" and base["migrations"] == 0
    assert by["TS-BND"]["kind"] == "hottest-first" and by["TS-BND"]["telemetry"] == "TS-BND"
    assert by["TS-BND"]["migrations"] > 0 and by["TS-BND"]["fast_hot_bytes"] > 0
    assert by["TS-BND"]["throughput_rps"] > base["throughput_rps"]
    # Distance from the optimum: the baseline's bound is above every policy, and each
    # policy's share of the possible gain is below 100%.
    assert base["optimum_throughput_rps"] > base["throughput_rps"] and base["run_fast_share"] == 0
    for r in recs:
        assert r["optimum_fast_share"] >= r["run_fast_share"], r["policy"]
        assert r["throughput_rps"] <= base["optimum_throughput_rps"], r["policy"]
        assert r["share_of_optimum"] < 1.0, r["policy"]
    assert base["share_of_optimum"] == 0
    assert by["TS-BND"]["share_of_optimum"] > 0
    assert by["DAMON-mtier"]["kind"] == "damon-mtier"
    assert by["Colloid"]["kind"] == "colloid" and by["Colloid"]["migrations"] > 0
    # The store loaded interleaved: the fast tier starts full; NUMA tiering demotes.
    assert by["baseline/interleaved"]["fast_used_bytes"] == 32 << 20
    assert by["NUMA-tiering/interleaved"]["demoted_bytes"] > 0
    assert by["DAMON-mtier-temporal/interleaved"]["kind"] == "damon-mtier"
    # Shares are taken against the group's own baseline.
    assert by["baseline/interleaved"]["share_of_optimum"] == 0
    # One counter schema for every policy.
    from tierlab.tiering import COUNTERS

    for r in recs:
        assert set(COUNTERS) <= set(r), (r["policy"], set(COUNTERS) - set(r))
        assert r["migrated_bytes"] == r["promoted_bytes"] + r["demoted_bytes"], r["policy"]
        assert 0 <= r["wasted_promotions"] <= r["promoted_pages"], r["policy"]
        assert 0 <= r["ping_pong"] <= r["promoted_pages"] + r["demoted_pages"], r["policy"]
        assert 0 <= r["shootdown_s"] <= r["migration_s"], r["policy"]
        if r["migrated_bytes"]:
            assert r["migration_s"] > 0 and r["migration_mbps"] > 0, r["policy"]
    assert base["policy_cpu_s"] == 0 and base["telemetry_cpu_s"] == 0
    assert by["HeMem"]["telemetry_cpu_s"] > 0 and by["HeMem"]["policy_cpu_s"] > 0
    assert by["HybridTier"]["kind"] == "hybridtier" and by["HybridTier"]["migrations"] > 0
    # The table and the plot.
    names = {p.name for p in out.iterdir()}
    assert {"records.json", "tiering.csv", "tiering_timeseries.csv", "tiering.png"} <= names
    table = (out / "tiering.csv").read_text().splitlines()
    assert len(table) == 1 + len(POLICIES)
    series = (out / "tiering_timeseries.csv").read_text().splitlines()
    assert len(series) == 1 + 4 * len(POLICIES), "four 500 ms windows per policy"


def test_ablations_have_the_counter_schema() -> None:
    # tiering-ablations (docs/tiering-systems.md "Ablations"): each switch changed in turn
    # against its baseline on the replayed key-value trace (about 9 s of two cores); one
    # shootdown per page or per 8 pages costs more shootdown time than one per batch of 512.
    from tierlab.tiering import COUNTERS

    res = tierlab("run", "tiering-ablations", "--json", timeout=300)
    assert res.returncode == 0, res.stderr
    by = {r["policy"]: r for r in json.loads(res.stdout)}
    assert set(by) == {
        "baseline",
        "NOMAD",
        "NOMAD-async",
        "NOMAD-sync",
        "no-shadow",
        "rate-limit-2",
        "NUMA-tiering",
        "NUMA-tiering-async",
        "NUMA-tiering-per-page-shootdown",
        "NUMA-tiering-batch-8",
        "Memtis",
        "Memtis-transactional",
        "Memtis-exchange",
        "PMU-AGG",
        "PMU-AGG-exchange",
        "PMU-AGG-2M",
        "PMU-AGG-2M-split",
    }
    for r in by.values():
        assert set(COUNTERS) <= set(r), r["policy"]
    assert by["NOMAD"]["promoted_pages"] > 0 and by["NOMAD"]["demoted_pages"] > 0
    numa = by["NUMA-tiering"]
    assert by["NUMA-tiering-per-page-shootdown"]["shootdown_s"] > numa["shootdown_s"]
    assert by["NUMA-tiering-batch-8"]["shootdown_s"] > numa["shootdown_s"]
    assert by["rate-limit-2"]["promoted_pages"] < by["NOMAD"]["promoted_pages"]
    # Exchanges: one shootdown per batch of pairs instead of one for the demotions and one
    # for the promotions.
    hot, ex = by["PMU-AGG"], by["PMU-AGG-exchange"]
    assert ex["demoted_pages"] > 0 and ex["shootdown_s"] < hot["shootdown_s"]
    # Copy modes: NUMA tiering's sync promotions are copied by the faulting thread, the
    # async ones by the policy's thread (its CPU time); NOMAD's transactional copies flush
    # each page, so they take more migration time than the same promotions made async.
    assert by["NUMA-tiering-async"]["policy_cpu_s"] > numa["policy_cpu_s"]
    assert by["NOMAD"]["migration_s"] > by["NOMAD-async"]["migration_s"]
    # Huge pages: two 2 MiB pages fill the 4 MiB DRAM; split, the hot 4 KiB pages do.
    whole, split = by["PMU-AGG-2M"], by["PMU-AGG-2M-split"]
    assert split["promoted_bytes"] / split["promoted_pages"] < whole["promoted_bytes"] / max(
        whole["promoted_pages"], 1
    )
    assert split["run_fast_share"] > whole["run_fast_share"]


def test_points_filter_and_bad_override(tmp_path: Path) -> None:
    res = tierlab("run", "tiering-kv", "--json", "--points", "TS-*", *SMALL, timeout=300)
    assert res.returncode == 0, res.stderr
    assert [r["policy"] for r in json.loads(res.stdout)] == ["TS-BND", "TS-FLX"]
    res = tierlab("run", "tiering-kv", "--points", "HeMem", *SMALL, "--set", "tiering.kind=nope")
    assert res.returncode != 0
    assert "Traceback" not in res.stderr, res.stderr
    assert "nope" in res.stderr, res.stderr


def test_replay_sweep_writes_the_table_and_plot(tmp_path: Path) -> None:
    # A replayed trace has no request metrics (throughput, p95): the table and the plot are
    # still written, and the share of the optimum gain uses the run time (one pass of the
    # trace; the baseline and Colloid).
    out = tmp_path / "rp"
    res = tierlab(
        "run",
        "tiering-replay",
        "--points",
        "[bC]*",
        "--set",
        "workload.repeat=1",
        "--out",
        str(out),
        "--no-progress",
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    names = {p.name for p in out.iterdir()}
    assert {"records.json", "tiering.csv", "tiering.png"} <= names
    recs = json.loads((out / "records.json").read_text())
    by = {r["policy"]: r for r in recs}
    assert set(by) == {"baseline", "Colloid"}
    for r in recs:
        tput = r["throughput_rps"]
        assert tput is None or math.isnan(tput), "a replay has no request throughput"
    base, col = by["baseline"], by["Colloid"]
    assert base["share_of_optimum"] == 0
    bound_rate = base["optimum_speedup"] / base["run_time_s"]
    want = (1 / col["run_time_s"] - 1 / base["run_time_s"]) / (bound_rate - 1 / base["run_time_s"])
    assert math.isclose(col["share_of_optimum"], want, rel_tol=1e-9)


def test_replay_of_a_kv_trace_promotes_and_demotes(tmp_path: Path) -> None:
    # tiering-replay-kv (docs/placement.md "A key-value trace"): a real trace, the store
    # loaded in PMem; NUMA tiering and DAMON-mtier (temporal tuner, fixed intervals) both
    # promote and demote; mtier.c as it is never applies its schemes on this trace (the
    # intervals auto-tuning re-arms the apply timer every 300 ms).
    pts = ["--points", "[bND]*", "--jobs", "2", "--no-progress"]
    res = tierlab("run", "tiering-replay-kv", "--json", *pts, timeout=300)
    assert res.returncode == 0, res.stderr
    by = {r["policy"]: r for r in json.loads(res.stdout)}
    base = by["baseline"]
    assert base["run_fast_share"] == 0, "the store starts in PMem"
    for p in ("NUMA-tiering", "DAMON-mtier-temporal-fixed"):
        assert by[p]["promoted_pages"] > 0 and by[p]["demoted_pages"] > 0, (p, by[p])
        assert by[p]["run_time_s"] < base["run_time_s"], p
        assert 0 < by[p]["share_of_optimum"] < 1, p
    assert by["DAMON-mtier"]["promoted_pages"] == by["DAMON-mtier"]["demoted_pages"] == 0
    assert by["DAMON-mtier-temporal"]["migrations"] == 0


def test_replay_node_needs_populate(tmp_path: Path) -> None:
    sc = tmp_path / "r.toml"
    sc.write_text('name = "r"\n[workload]\nkind = "replay"\npath = "builtin:kv-zipf"\nnode = 1\n')
    res = tierlab("run", sc, "--json")
    assert res.returncode != 0
    assert "workload.node" in res.stderr and "populate" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


def test_tiering_kv_long_is_tiering_kv_with_a_small_dram_and_a_longer_run() -> None:
    # docs/placement.md ("A long run"): nothing but DRAM's capacity, the length and the
    # points differs from tiering-kv; its policies' settings are tiering-kv's.
    def exported(name: str) -> dict[str, Any]:
        res = tierlab("export", name)
        assert res.returncode == 0, res.stderr
        return tomllib.loads(res.stdout)

    kv, long = exported("tiering-kv"), exported("tiering-kv-long")
    assert long["machine"]["nodes"][0]["capacity"] == "1GiB"
    assert kv["machine"]["nodes"][0]["capacity"] == "32GiB"
    assert (long["duration"], kv["duration"]) == ("150s", "1min")
    kv_sets = {p["label"]: p["set"] for p in kv.pop("sweep")}
    long_sets = {p["label"]: p["set"] for p in long.pop("sweep")}
    assert list(long_sets) == ["baseline", "NUMA-tiering", "DAMON-mtier"]
    assert all(long_sets[k] == kv_sets[k] for k in long_sets)
    for sc in (kv, long):
        for k in ("name", "description", "duration"):
            del sc[k]
        del sc["machine"]["nodes"][0]["capacity"]
    assert long == kv
