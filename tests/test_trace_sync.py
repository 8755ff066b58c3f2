"""Synchronisation in replays of traced programs (`tierlab trace --cc` records the program's
barriers, locks and condition variables in the recording's `sync` table; replay makes
threads wait for each other in simulated time).

The expected run times are computed here, independently of the engine's synchronisation:
the cost model is set so that every access costs the same (`C_NS`: CPU time plus a cache
hit, every access a hit), the recorded accesses are cut into phases at the recorded
events' access indices (read straight from the Parquet files), and each phase lasts as
long as its slowest thread (a barrier) or as all its threads one after the other (one
mutex). The replay without synchronisation (`sync = false`) must miss that figure by far,
so the check can fail."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import tierlab as tl
from conftest import REPO
from tierlab.recording import CODES

PROGRAMS = REPO / "tests" / "programs" / "traced"
#: Every access costs cpu_ns_per_access + cache_hit_ns (cache_hit_fraction = 1).
CPU_NS, HIT_NS = 1.0, 5.0
C_NS = CPU_NS + HIT_NS


THREADS, PHASES, WORKERS = 4, 4, 3


@pytest.fixture(scope="module")
def recs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The two programs traced once for the module."""
    tmp = tmp_path_factory.mktemp("sync")
    return {
        "omp": trace(
            tmp,
            "omp_phases.c",
            "-O1 -fopenmp",
            [str(PHASES), "3000"],
            {"OMP_NUM_THREADS": str(THREADS)},
        ),
        "pthread": trace(tmp, "pthread_sync.c", "-O1", [str(WORKERS), "2048"], {}),
    }


def trace(tmp: Path, src: str, cflags: str, args: list[str], env: dict[str, str]) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("no gcc")
    rec = tmp / (Path(src).stem + ".rec")
    cmd = [sys.executable, "-m", "tierlab", "trace", "--cc", str(PROGRAMS / src)]
    cmd += [f"--cflags={cflags}", "-o", str(rec), "--", *args]
    res = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, **env}, timeout=300
    )
    assert res.returncode == 0, res.stderr
    return rec


def replay(tmp: Path, rec: Path, cores: int, sync: bool) -> dict:
    sc = tmp / f"replay-{sync}.toml"
    sc.write_text(
        'name = "sync"\n'
        f"[machine]\ncores = {cores}\n"
        f"[machine.cost]\ncpu_ns_per_access = {CPU_NS}\ncache_hit_ns = {HIT_NS}\n"
        "cache_hit_fraction = 1.0\n"
        f'[workload]\nkind = "replay"\npath = "{rec}"\nsync = {str(sync).lower()}\n'
    )
    return tl.run(sc).stats


def accesses_per_thread(rec: Path) -> dict[int, int]:
    acc = pd.read_parquet(rec / "accesses", columns=["tid"])
    return acc["tid"].value_counts().to_dict()


def test_openmp_barriers_hold_each_phase_to_its_slowest_thread(
    tmp_path: Path, recs: dict[str, Path]
) -> None:
    threads, phases, rec = THREADS, PHASES, recs["omp"]
    sync = pd.read_parquet(rec / "sync").sort_values("seq")
    kinds = CODES[("sync", "kind")]
    sync["name"] = sync["kind"].map(kinds)
    counts = accesses_per_thread(rec)
    assert len(counts) == threads
    # The region's fork, each thread's start, its `phases` barriers and the region's end.
    assert (sync["name"] == "omp-fork").sum() == 1
    assert (sync["name"] == "omp-start").sum() == threads
    bars = sync[sync["name"] == "omp-barrier"]
    assert (bars.groupby("tid").size() == phases + 1).all()
    assert (bars["arg"] == threads).all()
    # Phase k of thread t: its accesses between its (k-1)-th and k-th barrier (the first
    # from its start of the region); before the fork and after the region only the
    # encountering thread runs.
    starts = sync[sync["name"] == "omp-start"].set_index("tid")["index"]
    phase_len = {}
    for tid, b in bars.groupby("tid"):
        cuts = [int(starts[tid]), *b["index"].astype(int)]
        phase_len[tid] = [hi - lo for lo, hi in itertools.pairwise(cuts)]
    fork = sync[sync["name"] == "omp-fork"].iloc[0]
    master = int(fork["tid"])
    serial = int(fork["index"]) + counts[master] - int(bars[bars["tid"] == master]["index"].max())
    # Unequal work: in each of the first `phases` phases one thread does 8x the others.
    for k in range(phases):
        lens = sorted(p[k] for p in phase_len.values())
        assert lens[-1] > 6 * lens[0], lens
    expected_ns = C_NS * (
        serial + sum(max(p[k] for p in phase_len.values()) for k in range(phases + 1))
    )
    with_sync = replay(tmp_path, rec, threads, True)
    without = replay(tmp_path, rec, threads, False)
    got_ns = with_sync["run"]["app_seconds"] * 1e9
    assert abs(got_ns - expected_ns) <= 0.10 * expected_ns, (got_ns, expected_ns)
    assert with_sync["workload"]["sync_points"] == len(sync)
    assert with_sync["workload"]["sync_forced"] == 0
    # Deterministic: the same replay gives the same simulated figures.
    again = replay(tmp_path, rec, threads, True)
    assert again["run"]["app_seconds"] == with_sync["run"]["app_seconds"]
    assert again["workload"] == with_sync["workload"]
    # Without the synchronisation each thread runs its phases back to back: far shorter.
    free_ns = without["run"]["app_seconds"] * 1e9
    assert free_ns < 0.6 * expected_ns, (free_ns, expected_ns)
    assert without["workload"]["sync_points"] == 0
    # The slowest thread alone bounds the unsynchronised run from below (same cost model).
    assert free_ns >= C_NS * max(counts.values())


def test_pthread_condition_barriers_and_mutex(tmp_path: Path, recs: dict[str, Path]) -> None:
    workers, rec = WORKERS, recs["pthread"]
    sync = pd.read_parquet(rec / "sync").sort_values("seq")
    kinds = CODES[("sync", "kind")]
    sync["name"] = sync["kind"].map(kinds)
    counts = accesses_per_thread(rec)
    assert len(counts) == workers + 1
    signal = sync[sync["name"] == "cond-signal"]
    assert len(signal) == 1
    main = int(signal["tid"].iloc[0])
    names = set(sync["name"])
    assert {"mutex-lock", "mutex-unlock", "barrier", "cond-signal"} <= names
    bars = sync[sync["name"] == "barrier"]
    assert (bars["arg"] == workers).all() and len(bars) == 3 * workers
    # The main thread's accesses up to its broadcast come first (the workers wait for it
    # on the condition variable, or take the mutex after it); then three barrier phases;
    # then the mutex phase, one worker after the other.
    init = int(signal["index"].iloc[0])
    phases = []
    last_lock = {}
    for tid, b in bars.groupby("tid"):
        mine = sync[sync["tid"] == tid]
        # Released: its unlock of the mutex after it saw the flag (the last before phase 1).
        before = mine[(mine["name"] == "mutex-unlock") & (mine["seq"] < b["seq"].min())]
        go = int(before["index"].iloc[-1])
        cuts = [go, *b["index"].astype(int)]
        phases.append([hi - lo for lo, hi in itertools.pairwise(cuts)])
        locks = mine[mine["name"] == "mutex-lock"]
        unlocks = mine[mine["name"] == "mutex-unlock"]
        last_lock[tid] = int(unlocks["index"].iloc[-1]) - int(locks["index"].iloc[-1])
    barrier_ns = sum(max(p[k] for p in phases) for k in range(3))
    expected_ns = C_NS * (init + barrier_ns + sum(last_lock.values()))
    with_sync = replay(tmp_path, rec, workers + 1, True)
    without = replay(tmp_path, rec, workers + 1, False)
    got_ns = with_sync["run"]["app_seconds"] * 1e9
    assert abs(got_ns - expected_ns) <= 0.10 * expected_ns, (got_ns, expected_ns)
    assert with_sync["workload"]["sync_forced"] == 0
    free_ns = without["run"]["app_seconds"] * 1e9
    assert free_ns < 0.6 * expected_ns, (free_ns, expected_ns)
    assert main in counts


def test_a_synchronised_recording_needs_a_core_per_thread(
    tmp_path: Path, recs: dict[str, Path]
) -> None:
    rec = recs["pthread"]
    sc = tmp_path / "few.toml"
    sc.write_text(f'[machine]\ncores = 2\n[workload]\nkind = "replay"\npath = "{rec}"\n')
    with pytest.raises(Exception, match=r"workload\.sync.*sync = false"):
        tl.run(sc)
    # Without the synchronisation it folds as any replay.
    stats = tl.run(sc, set=["workload.sync=false"]).stats
    assert stats["workload"]["sync_events"] == len(pd.read_parquet(rec / "sync"))
    assert stats["workload"]["sync_points"] == 0
