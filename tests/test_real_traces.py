"""Real multi-threaded programs under the compiler-instrumentation tracer (`tierlab trace
--cc`): three OpenMP kernels of ours and an LZ4 codec (a small implementation of the LZ4
block format shipped in tests/programs/traced/lz4_mini, so nothing is downloaded).
tierlab's counts (accesses, stores, distinct pages, the per-page thread-sharing histogram,
the pages every-R-th-load sampling sees) must equal counts computed here, with numpy, from
the tracer's raw per-thread files."""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tierlab as tl
from conftest import REPO, tierlab
from tierlab.policies import coremap

PROGRAMS = REPO / "tests" / "programs" / "traced"
THREADS = 3
R = 997
MASK = np.uint64((1 << 63) - 1)

KERNELS = {
    "omp_triad": (["omp_triad.c"], ["30000", "3"]),
    "omp_stencil": (["omp_stencil.c"], ["160", "3"]),
    "omp_spmv": (["omp_spmv.c"], ["12000", "8", "2"]),
}


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """program -> (recording, raw directory), traced with THREADS OpenMP threads."""
    if shutil.which("gcc") is None:
        pytest.skip("no gcc")
    base = tmp_path_factory.mktemp("real")
    jobs = {
        k: ([str(PROGRAMS / s) for s in srcs], args, "-O2 -fopenmp")
        for k, (srcs, args) in KERNELS.items()
    }
    lz4 = PROGRAMS / "lz4_mini"
    jobs["lz4"] = (
        [str(PROGRAMS / "lz4_omp.c"), str(lz4 / "lz4.c")],
        ["6", "32768"],
        f"-O2 -fopenmp -I{lz4}",
    )
    out = {}
    env = {**os.environ, "OMP_NUM_THREADS": str(THREADS)}
    for name, (srcs, args, cflags) in jobs.items():
        rec, raw = base / f"{name}.rec", base / f"{name}.raw"
        cmd = [sys.executable, "-m", "tierlab", "trace", *[a for s in srcs for a in ("--cc", s)]]
        cmd += ["--cflags", cflags, "--keep-raw", str(raw), "-o", str(rec), "--", *args]
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        assert res.returncode == 0, res.stderr
        out[name] = (rec, raw)
    return out


def independent(raw: Path) -> dict:
    """The counts, straight from the t<TID>.bin files."""
    acc = stores = 0
    owners: dict[int, set[int]] = collections.defaultdict(set)
    sampled: set[int] = set()
    for f in sorted(raw.glob("t*.bin")):
        tid = int(f.stem[1:])
        a = np.fromfile(f, dtype="<u8")
        acc += a.size
        stores += int((a >> np.uint64(63)).sum())
        for p in np.unique((a & MASK) >> np.uint64(12)).tolist():
            owners[p].add(tid)
        loads = a[(a >> np.uint64(63)) == 0]
        sampled |= set((loads[R - 1 :: R] >> np.uint64(12)).tolist())  # every R-th load
    sharing = collections.Counter(len(t) for t in owners.values())
    return {"accesses": acc, "stores": stores, "pages": len(owners), "sharing": dict(sharing),
            "sampled": sampled, "threads": len(list(raw.glob("t*.bin")))}  # fmt: skip


def scenario(rec: Path, extra: str) -> Path:
    s = rec.with_suffix(".toml")
    s.write_text(
        f'name = "real"\n[machine]\ncores = {THREADS}\n{extra}\n'
        f'[workload]\nkind = "replay"\npath = "{rec.name}"\n'
    )
    return s


HMEM = """[[machine.nodes]]
name = "card"
capacity = "8GiB"
latency_ns = 100.0
bandwidth_gbps = 100.0
[machine.hmem]
fast_memory = "100%"
page_tables = "pspt"
page_size = "4KiB"
[[policies]]
kind = "fifo"
"""


@pytest.mark.parametrize("name", [*KERNELS, "lz4"])
def test_tierlab_counts_equal_independent_counts(traced, name: str) -> None:
    rec, raw = traced[name]
    want = independent(raw)
    assert want["threads"] >= 2  # really multi-threaded
    # Replay on per-core page tables: counts, touched pages, and pages by sharing cores.
    r = tl.run(scenario(rec, HMEM))
    st = r.stats
    assert st["machine"]["accesses"] == want["accesses"]
    assert st["machine"]["writes"] == want["stores"]
    assert st["workload"]["touched_pages"] == want["pages"]
    assert st["workload"]["recorded_threads"] == want["threads"]
    # (the engine's histogram runs from 1 to the widest sharing, with empty buckets as 0)
    assert {k: v for k, v in coremap(r.stats_flat).items() if v} == want["sharing"]
    # PEBS on loads with reset value R: the pages of every R-th load of each thread.
    r = tl.run(scenario(rec.with_name(rec.name), ""), set=[
        f'telemetry=[{{kind = "pebs", event = "loads", period = {R}}}]'])  # fmt: skip
    s = r.samples["pebs"]
    assert (
        set((np.asarray(s["addr"], dtype=np.uint64) >> np.uint64(12)).tolist()) == want["sampled"]
    )
    # The viewer, streaming in Rust.
    v = tierlab("view", rec, "--json").json()
    assert v["totals"]["accesses"] == want["accesses"]
    assert v["totals"]["touched_pages"] == want["pages"]
    assert v["totals"]["threads"] == want["threads"]
    assert v["time_unit"] == "ns"


def test_mappings_name_the_program_by_its_sources_and_the_workers_stacks(traced) -> None:
    """The program built in a temporary directory is named by its sources (not ./NAME), and
    each OpenMP worker's stack is named as one: a mapping no other thread touches."""
    from tierlab.recording import Recording

    rec, raw = traced["omp_stencil"]
    maps = Recording.open(rec).mappings()
    names = set(maps.name)
    assert "omp_stencil (built from omp_stencil.c)" in names, sorted(names)
    assert not any(n.startswith("./") for n in names), sorted(names)
    stacks = maps[(maps.name == "[thread stack]") & (maps.event == "map")]
    assert len(stacks) >= THREADS - 1, sorted(names)  # the workers' (the main thread: [stack])
    touched_by: dict[int, set[int]] = collections.defaultdict(set)
    for f in raw.glob("t*.bin"):
        a = np.fromfile(f, dtype="<u8") & MASK
        for i, (lo, n) in enumerate(zip(stacks.start, stacks.length, strict=True)):
            if ((a >= lo) & (a < lo + n)).any():
                touched_by[i].add(int(f.stem[1:]))
    # (The instrumentation skips locals that do not escape, so a stack may see no access.)
    assert all(len(t) == 1 for t in touched_by.values()), touched_by


def test_builtin_kv_trace_is_what_its_command_records(tmp_path: Path) -> None:
    # `builtin:kv-zipf` (tiering-replay-kv) is `tierlab trace --cc kv_zipf.c` with the
    # arguments in its meta.json; `-lm` among the flags is linked after the objects.
    if shutil.which("gcc") is None:
        pytest.skip("no gcc")
    shipped = Path(__file__).parents[1] / "crates/tierlab-sim/scenarios/traces/kv-zipf/meta.json"
    meta = json.loads(shipped.read_text())
    args = meta["parameters"]["target"]["argv"][1:]
    rec = tmp_path / "kv.rec"
    cmd = [sys.executable, "-m", "tierlab", "trace", "--cc", str(PROGRAMS / "kv_zipf.c")]
    cmd += ["--cflags", " ".join(meta["parameters"]["cflags"]), "-o", str(rec), "--", *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    got = json.loads((rec / "meta.json").read_text())
    assert got["tables"]["accesses"] == meta["tables"]["accesses"]
