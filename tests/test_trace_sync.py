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


def trace(
    tmp: Path,
    src: str,
    cflags: str,
    args: list[str],
    env: dict[str, str],
    compiler: str = "gcc",
) -> Path:
    if shutil.which(compiler) is None:
        pytest.skip(f"no {compiler}")
    rec = tmp / (Path(src).stem + ".rec")
    cmd = [sys.executable, "-m", "tierlab", "trace", "--cc", str(PROGRAMS / src)]
    cmd += [f"--cflags={cflags}", "--compiler", compiler, "-o", str(rec), "--", *args]
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


#: Acquires and releases of each family (the replay's `SyncRole`): an acquire waits for the
#: latest release of the same family and object before it, if there is one.
ACQUIRE = {"mutex-lock": "mutex", "cond-wake": "cond", "omp-start": "fork", "omp-lock": "omp"}
RELEASE = {"mutex-unlock": "mutex", "cond-signal": "cond", "omp-fork": "fork", "omp-unlock": "omp"}


def sync_points(sync: pd.DataFrame) -> int:
    """The events a replay applies: all but acquires with no release before them."""
    released, skipped = set(), 0
    for name, obj in zip(sync["name"], sync["object"], strict=True):
        if name in ACQUIRE and (ACQUIRE[name], obj) not in released:
            skipped += 1
        if name in RELEASE:
            released.add((RELEASE[name], obj))
    return len(sync) - skipped


def check_openmp_phases(
    tmp_path: Path, rec: Path, threads: int, phases: int, full: bool = True
) -> pd.DataFrame:
    """The recording of omp_phases.c or omp_critical_phases.c (one region, `phases`
    barriers, one thread 8x the others' work in each phase): the events per thread, and the
    replay with synchronisation within 10% of the sum over phases of the slowest thread's
    accesses (read from the raw recording); `full`: also the same replay again (the same
    figures) and one without synchronisation (far shorter). Returns the sync table, with
    names."""
    sync = pd.read_parquet(rec / "sync").sort_values("seq")
    kinds = CODES[("sync", "kind")]
    sync["name"] = sync["kind"].map(kinds)
    counts = accesses_per_thread(rec)
    assert len(counts) == threads
    # The region's fork, each thread's start, its `phases` barriers and the region's end.
    assert (sync["name"] == "omp-fork").sum() == 1
    assert (sync["name"] == "omp-start").sum() == threads
    bars = sync[sync["name"] == "omp-barrier"]
    assert sorted(bars["tid"].unique()) == sorted(counts)
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
    got_ns = with_sync["run"]["app_seconds"] * 1e9
    assert abs(got_ns - expected_ns) <= 0.10 * expected_ns, (got_ns, expected_ns)
    assert with_sync["workload"]["sync_points"] == sync_points(sync)
    assert with_sync["workload"]["sync_forced"] == 0
    if not full:
        return sync
    without = replay(tmp_path, rec, threads, False)
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
    return sync


def test_openmp_barriers_hold_each_phase_to_its_slowest_thread(
    tmp_path: Path, recs: dict[str, Path]
) -> None:
    check_openmp_phases(tmp_path, recs["omp"], THREADS, PHASES)


def clang_openmp_links() -> bool:
    """Whether clang -fopenmp links a program (clang and LLVM's libomp are installed)."""
    if shutil.which("clang") is None:
        return False
    res = subprocess.run(
        ["clang", "-fopenmp", "-x", "c", "-", "-o", os.devnull],
        input="int main(void) { return 0; }\n",
        capture_output=True,
        text=True,
    )
    return res.returncode == 0


def test_libomp_barriers_and_critical_sections(tmp_path: Path) -> None:
    """The same check for a program built with clang and LLVM's libomp (__kmpc_* entry
    points), with a critical section in every phase."""
    if not clang_openmp_links():
        pytest.skip("clang -fopenmp does not link (Debian: apt-get install clang libomp-dev)")
    threads, phases = THREADS, PHASES
    rec = trace(
        tmp_path,
        "omp_critical_phases.c",
        "-O1 -fopenmp",
        [str(phases), "2000"],
        {"OMP_NUM_THREADS": str(threads)},
        compiler="clang",
    )
    sync = check_openmp_phases(tmp_path, rec, threads, phases, full=False)
    # Every thread enters the (unnamed) critical section once per phase, always the same
    # name, and leaves it before the next thread enters.
    locks = sync[sync["name"] == "omp-lock"]
    unlocks = sync[sync["name"] == "omp-unlock"]
    assert (locks.groupby("tid").size() == phases).all() and len(locks) == threads * phases
    assert locks["object"].nunique() == 1 and len(unlocks) == len(locks)
    order = sync[sync["name"].isin(["omp-lock", "omp-unlock"])]["name"].tolist()
    assert order == ["omp-lock", "omp-unlock"] * (threads * phases)


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
