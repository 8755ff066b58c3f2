"""`tierlab tier`: the live tiering loop.

- against a model of the kernel with two nodes (tierlab.tier.model): the loop promotes the
  hottest pages to the fast node with the same decisions as the binding of the simulator's
  policy, demotes colder ones to make room, drops pages unmapped between decision and batch,
  and with --dry-run decides without a single move;
- on this machine (real perf_event page-fault sampling and move_pages, one NUMA node: every
  move is "already there"): an LD_PRELOAD shim logs every move_pages call with the target's
  maps at that moment, while the target unmaps memory mid-run; Ctrl-C stops within one batch
  and leaves a readable recording with its decision log, which `tierlab view` summarizes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, assert_user_error, tierlab
from tierlab import _native
from tierlab.place.numa import Topology
from tierlab.place.proc import Vma
from tierlab.tier import TierError
from tierlab.tier import log as tlog
from tierlab.tier.loop import Loop, TierOptions, check_nodes, inside
from tierlab.tier.model import ModelKernel, ModelProcess, ScriptedTelemetry

PAGE = 4096
A = 0x7F00_0000_0000


def pg(i: int) -> int:
    return A + i * PAGE


def u64(values) -> bytes:
    return np.asarray(values, dtype="<u8").tobytes()


def decision(d: dict) -> tuple[list[int], list[int]]:
    return (
        np.frombuffer(d["promote"], dtype="<u8").tolist(),
        np.frombuffer(d["demote"], dtype="<u8").tolist(),
    )


# -- the decision binding -------------------------------------------------------------------


def test_binding_decides_as_the_engine_core_on_a_fixed_input() -> None:
    # The same input as the Rust test `decide_promotes_hottest_and_demotes_only_colder_pages`
    # (hottest_first.rs), where the simulated policy's own ranking is checked against decide.
    d = _native.hottest_first_decide(
        u64([pg(2), pg(5), pg(6), pg(7), pg(8)]),
        u64([1, 9, 8, 7, 2]),
        u64([pg(1), pg(2)]),
        4 * PAGE,
        fill=1.0,
    )
    assert decision(d) == ([pg(5), pg(6), pg(7), pg(8)], [pg(1), pg(2)])
    assert np.frombuffer(d["promote_score"], dtype="<f8").tolist() == [9, 8, 7, 2]
    assert d["plan_pages"] == 4 and not d["blocked"]
    # The stateful core gives the same answer from the same samples.
    core = _native.HottestFirstCore(fill=1.0)
    core.add_samples(u64([pg(2)] + [pg(5)] * 9 + [pg(6)] * 8 + [pg(7)] * 7 + [pg(8)] * 2))
    assert decision(core.decide(u64([pg(1), pg(2)]), 4 * PAGE)) == decision(d)
    # Halving: page 2 (1 sample) drops to 0.5, pages under 0.5 are forgotten next time.
    core.halve()
    core.halve()
    assert len(core) == 4
    with pytest.raises(ValueError, match="fill"):
        _native.HottestFirstCore(fill=1.5)


def test_memtis_binding_decides_as_the_engine_core_on_a_fixed_input() -> None:
    # The input of the Rust test `decide_promotes_pages_above_the_threshold_and_demotes_cold_ones`
    # (memtis.rs): pages 1..4 sampled 8 times (bin 3), 10..13 once (bin 0), 20 twice (bin 1).
    core = _native.MemtisCore(fill=1.0)
    core.add_samples(u64([pg(v) for v in range(1, 5)] * 8 + [pg(v) for v in range(10, 14)]))
    core.add_samples(u64([pg(20)] * 2))
    d = core.decide(u64([pg(10), pg(11), pg(12), pg(1)]), 5 * PAGE)
    assert d["threshold_bin"] == 1
    assert decision(d) == ([pg(2), pg(3), pg(4), pg(20)], [pg(10), pg(11), pg(12)])


# -- the loop against the two-node model ----------------------------------------------------


def model_loop(script, ranges, capacity_pages, *, actions=None, **opts):
    proc = ModelProcess(pid=4242, ranges=ranges)
    kernel = ModelKernel(proc, memory=(0, 1), first_touch=1)
    tel = ScriptedTelemetry(proc, script, kernel, actions=actions)
    log_dir = opts.pop("log_dir", None)
    log = tlog.DecisionLog(log_dir) if log_dir else None
    o = TierOptions(
        fast_node=0,
        slow_node=1,
        interval_s=0.1,
        fast_capacity=capacity_pages * PAGE,
        fill=1.0,
        **opts,
    )
    loop = Loop(
        tel,
        o,
        kernel=kernel,
        topo=kernel.topology(),
        maps=proc.maps,
        log=log,
        sleep=lambda s: False,
    )
    return loop, kernel, proc


def test_loop_promotes_hottest_to_the_fast_node_and_demotes_colder(tmp_path: Path) -> None:
    # Step 1: pages 0..7 sampled once, 8..11 three times; fast node holds 6 pages.
    s1 = [pg(i) for i in range(8)] + [pg(i) for i in range(8, 12)] * 3
    # Step 2: pages 20..23 become the hottest (5 samples).
    s2 = [pg(i) for i in range(20, 24)] * 5
    loop, kernel, _ = model_loop(
        [s1, [], s2, []], [(A, A + 64 * PAGE)], 6, log_dir=tmp_path, sample_decay_s=100.0
    )
    res = loop.run()
    assert res.stop_reason == "target exited" and res.steps == 4  # one poll per step
    on_fast = sorted(a for a, n in kernel.where.items() if n == 0)
    # The four hottest, then the two lowest addresses among the rest of the plan.
    assert on_fast == sorted([pg(i) for i in (20, 21, 22, 23, 8, 9)])
    df = tlog.read(tmp_path)
    assert df is not None
    first = df[(df.step == 0) & (df.kind == "decide") & (df.action == "promote")]
    # Step 0 decided what the binding decides from the same samples on an empty fast node.
    want = _native.hottest_first_decide(
        u64(sorted(set(s1))), u64([s1.count(a) for a in sorted(set(s1))]), b"", 6 * PAGE, fill=1.0
    )
    assert first.addr.tolist() == decision(want)[0]
    # Room for 20..23: the pages scored 0 (0, 1 and 10, 11, planned no more), coldest first
    # then by address; never 8 and 9 (score 3, still planned).
    demoted = df[(df.kind == "move") & (df.action == "demote")]
    assert demoted.addr.tolist() == [pg(0), pg(1), pg(10), pg(11)]
    assert set(demoted.outcome) == {"moved"}
    assert not kernel.outside


def test_memtis_loop_fills_the_fast_node_with_pages_above_its_threshold() -> None:
    # 4 hot pages (8 samples) and 12 cold ones (1 sample); the fast node holds 6 pages.
    script = [[pg(i) for i in range(4)] * 8 + [pg(i) for i in range(4, 16)]]
    loop, kernel, _ = model_loop(script, [(A, A + 16 * PAGE)], 6, policy="memtis")
    loop.run()
    assert sorted(a for a, n in kernel.where.items() if n == 0) == [pg(i) for i in range(4)]
    assert not kernel.outside


def test_pages_unmapped_between_decision_and_query_are_not_queried() -> None:
    # The target unmaps its second mapping right after the step's first read of its maps
    # (the one that filters the samples): the query reads them again first.
    ranges = [(A, A + 16 * PAGE), (A + 32 * PAGE, A + 48 * PAGE)]
    script = [[pg(i) for i in range(16)] + [pg(i) for i in range(32, 48)] * 2]
    loop, kernel, proc = model_loop(script, ranges, 64, batch_pages=4)
    reads = 0

    def maps() -> list[Vma]:
        nonlocal reads
        reads += 1
        v = proc.maps()
        if reads == 1:
            proc.unmap(A + 32 * PAGE, A + 48 * PAGE)
        return v

    loop._maps = maps
    loop.run()
    queries = [a for a, n in kernel.calls if n is None]
    assert queries and not kernel.outside, kernel.outside[:4]
    assert all(x < A + 16 * PAGE for q in queries for x in q)


def test_pages_unmapped_between_decision_and_batch_are_dropped() -> None:
    ranges = [(A, A + 16 * PAGE), (A + 32 * PAGE, A + 48 * PAGE)]
    script = [[pg(i) for i in range(16)] + [pg(i) for i in range(32, 48)] * 2]
    loop, kernel, proc = model_loop(script, ranges, 64, batch_pages=4)

    def unmap_after_first_batch(lp: Loop) -> None:
        if lp.res.batches == 1:
            proc.unmap(A + 32 * PAGE, A + 48 * PAGE)

    loop.on_batch = unmap_after_first_batch
    res = loop.run()
    assert res.batches >= 2
    # The first batch (pages 32..35) moved; the rest of that mapping was dropped, never passed.
    assert res.dropped_unmapped == 12
    assert not kernel.outside
    for addrs, _ in kernel.move_calls:
        assert all(a < A + 16 * PAGE or a < A + 36 * PAGE for a in addrs)


def test_dry_run_decides_and_never_moves(tmp_path: Path) -> None:
    script = [[pg(i) for i in range(10)] * 2]
    loop, kernel, _ = model_loop(script, [(A, A + 16 * PAGE)], 4, dry_run=True, log_dir=tmp_path)
    res = loop.run()
    assert res.decided["promote"] == 4 and res.batches >= 1
    assert kernel.move_calls == []
    assert all(n == 1 for n in kernel.where.values())
    df = tlog.read(tmp_path)
    assert df is not None and set(df[df.kind == "move"].outcome) == {"dry-run"}


def test_a_node_refusing_moves_ends_the_loop_with_the_kernels_reason() -> None:
    # The topology lists node 0, but the kernel has no memory there: ENODEV on the first move.
    loop, kernel, _ = model_loop([[pg(i) for i in range(4)]], [(A, A + 16 * PAGE)], 4)
    kernel.memory = (1,)
    with pytest.raises(TierError, match="move_pages to node 0 of pid 4242: ENODEV"):
        loop.run()
    assert len(kernel.move_calls) == 1


def test_missing_nodes_say_what_the_machine_lacks() -> None:
    one = Topology(online=[0], memory=[0], cpus={0: [0]})
    with pytest.raises(TierError, match="node 1 not present: this machine has 1 NUMA node"):
        check_nodes(TierOptions(fast_node=0, slow_node=1), one)
    assert check_nodes(TierOptions(fast_node=0, slow_node=0), one)  # a note, no error
    two = Topology(online=[0, 2], memory=[0, 2], cpus={})
    with pytest.raises(TierError, match=r"--fast-node 1: node 1 not present: .* 2 NUMA nodes"):
        check_nodes(TierOptions(fast_node=1, slow_node=2), two)


def test_inside_needs_the_whole_page_in_one_mapping() -> None:
    v = [
        Vma(A, A + 2 * PAGE, "rw-p", 0, "", 0, ""),
        Vma(A + 4 * PAGE, A + 5 * PAGE, "", 0, "", 0, ""),
    ]
    got = inside(np.array([A - PAGE, A, A + PAGE, A + 2 * PAGE, A + 4 * PAGE], dtype=np.uint64), v)
    assert got.tolist() == [False, True, True, False, True]


# -- on this machine ------------------------------------------------------------------------

#: Touches A (2 MiB) once and B (4 MiB) four times (madvise DONTNEED between: every round
#: faults again, so B's pages are the most sampled), waits, unmaps B, waits, exits or sleeps.
TARGET = """
import mmap, sys, time
A = mmap.mmap(-1, 2 << 20)
B = mmap.mmap(-1, 4 << 20)
for i in range(0, 2 << 20, 4096):
    A[i] = 1
for r in range(4):
    B.madvise(mmap.MADV_DONTNEED)
    for i in range(0, 4 << 20, 4096):
        B[i] = 1
time.sleep(float(sys.argv[1]))
B.close()
time.sleep(float(sys.argv[2]))
"""


@pytest.fixture(scope="module")
def one_node() -> None:
    from tierlab.place.numa import topology

    if topology().memory != [0]:
        pytest.skip("these checks are for a machine with one NUMA node (node 0)")
    info = _native.live_backends()  # it reports what is missing; it does not raise
    if info.get("auto") is None:
        pytest.skip("no live recording backend on this machine")


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc) to build tests/programs/preload/move_pages_shim.c")
    out = tmp_path_factory.mktemp("shim") / "move_pages_shim.so"
    src = REPO / "tests" / "programs" / "preload" / "move_pages_shim.c"
    subprocess.run([cc, "-O1", "-shared", "-fPIC", "-o", out, src, "-ldl"], check=True)
    return out


def target_program(tmp_path: Path) -> Path:
    p = tmp_path / "target.py"
    p.write_text(TARGET)
    return p


def test_live_moves_stay_inside_the_mappings_while_the_target_unmaps(
    one_node, shim: Path, tmp_path: Path
) -> None:
    rec = tmp_path / "tier.rec"
    shim_log = tmp_path / "calls.txt"
    env = {**os.environ, "LD_PRELOAD": str(shim), "TIER_SHIM_LOG": str(shim_log)}
    # fmt: off
    res = subprocess.run(
        [sys.executable, "-m", "tierlab", "tier", "-o", rec, "--fast-node", "0", "--slow-node",
         "0", "--interval", "100ms", "--rate-limit-mbps", "2", "--batch-pages", "16",
         "--fast-capacity", "2MiB", "--json", "--", sys.executable, target_program(tmp_path),
         "0.5", "0.3"],
        capture_output=True, text=True, env=env, timeout=60,
    )
    # fmt: on
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    # On page-fault telemetry (a machine without a PMU, as CI's) the run says that its
    # ranking carries no information; with a PMU's samples it does not.
    faults = "tierlab tier: page-faults telemetry" in res.stderr
    assert faults == ("carries no information on which pages are hot" in res.stderr), res.stderr
    assert faults == any("carries no information" in n for n in out["notes"])
    calls = [line.split() for line in shim_log.read_text().splitlines()]
    moves = [c for c in calls if c[0] == "move"]
    assert moves, calls[:3]
    # Every address of every call lay inside the target's mappings when the call was made.
    assert all(c[3] == "0" for c in calls), [c[:4] for c in calls if c[3] != "0"]
    assert all(int(c[1]) == out["pid"] for c in calls)
    assert len(moves) == out["move_calls"]
    # One node: every page the loop moved was already there (or appeared there since the
    # loop's query: the target faults its pages in while the loop runs).
    assert set(out["outcomes"]["promote"]) <= {"there", "placed", "absent"}
    # The moved addresses are the ones the decision log lists for those batches.
    df = tlog.read(rec)
    assert df is not None
    logged = set(df[df.kind == "move"].addr.tolist())
    assert {int(a, 16) for c in moves for a in c[4:]} <= logged
    # The recording saw the unmap of B.
    from tierlab.recording import Recording

    maps = Recording.open(rec).mappings()
    assert (maps.event == "unmap").any()


def test_ctrl_c_stops_within_one_batch_and_leaves_a_readable_log(
    one_node, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = tmp_path / "tier.rec"
    # Files, not pipes: the target inherits them and outlives tierlab (it is not signalled).
    out_f = open(tmp_path / "out.txt", "w+")  # noqa: SIM115
    err_f = open(tmp_path / "err.txt", "w+")  # noqa: SIM115
    # fmt: off
    proc = subprocess.Popen(
        [sys.executable, "-m", "tierlab", "tier", "-o", rec, "--fast-node", "0", "--slow-node",
         "0", "--interval", "100ms", "--rate-limit-mbps", "0.5", "--batch-pages", "8",
         "--fast-capacity", "4MiB", "--", sys.executable, target_program(tmp_path), "30", "0"],
        stdout=out_f, stderr=err_f, text=True,
    )
    # fmt: on
    target_pid = None
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            parts = list((rec / "tier").glob("part-*.parquet")) if (rec / "tier").is_dir() else []
            if len(parts) >= 2:
                break
            time.sleep(0.05)
        assert proc.poll() is None, (tmp_path / "err.txt").read_text()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        err = (tmp_path / "err.txt").read_text()
        assert proc.returncode == 130, err
        assert "stopped (interrupted)" in err
        from tierlab.recording import Recording

        r = Recording.open(rec)
        assert r.meta["complete"]
        target_pid = r.meta["accounting"]["target_pid"]
        stop = r.meta["tier"]["stop"]
        assert stop["reason"] == "interrupted"
        assert stop["batches_at_stop_request"] is not None
        assert stop["batches"] - stop["batches_at_stop_request"] <= 1
        df = tlog.read(rec)
        assert df is not None and (df.kind == "decide").any() and (df.kind == "move").any()
        assert df.batch.max() + 1 == stop["batches"]
        # `tierlab view` shows the decision log.
        from tierlab.cli.main import main

        assert main(["view", str(rec), "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)["tier"]
        assert summary["decided"]["promote"] > 0 and summary["batches"] == stop["batches"]
        # The HTML view shows the decision log's picture (next to one mapping's figures: the
        # default 12 mappings' figures take most of this test's time and show nothing of it).
        vdir = rec.with_name("view")
        assert main(["view", str(rec), "-o", str(vdir), "--max-mappings", "1"]) == 0
        assert not (vdir / "tier.png").exists()  # one file: the picture is in the page
        assert 'src="data:image/png;base64,' in (vdir / "index.html").read_text()
        assert main(["view", str(rec), "-o", str(vdir), "--max-mappings", "1", "--images"]) == 0
        assert (vdir / "tier.png").is_file()
        assert 'src="tier.png"' in (vdir / "index.html").read_text()
    finally:
        out_f.close()
        err_f.close()
        if proc.poll() is None:
            proc.kill()
        if target_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(target_pid, signal.SIGKILL)


def test_cli_errors(tmp_path: Path) -> None:
    res = tierlab("tier", "-o", tmp_path / "r", "--slow-node", "7", "--", "true")
    msg = assert_user_error(res)
    assert "--slow-node 7: node 7 not present" in msg
