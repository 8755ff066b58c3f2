"""Allocation sites, site-based placement and what a `tierlab trace --cc` recording covers.

- A C++ program with three allocation sites of known sizes and access counts (malloc,
  calloc, new[]): `tierlab view` gives each site exactly its bytes allocated, bytes touched,
  loads and stores, at the right file:line.
- A `--by site` plan for a capacity that holds two of them, run with the interposer on the
  same program built natively: the interposer's log shows one mbind to the fast node for each
  chosen site's allocation and none for the others; the plan applied to the recording's
  accesses gives the predicted fast-tier share.
- A GUPS-style kernel (x ^= y on the heap, x++ and an atomic on globals) traced built with gcc
  and with clang: the same loads and stores to the heap and the globals.
- memset, memcpy and a copy loop: N bytes read and N bytes written, by interposition.

  The program forks one child that allocates and touches a block of its own: `tierlab view
  --process PID` gives that site exactly its bytes and accesses, at its file:line, and the
  parent's sites hold none of the child's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from conftest import REPO, Completed, cli

PROGRAMS = REPO / "tests" / "programs" / "sites"


def tierlab(*args: str) -> Completed:
    """``tierlab ARGS`` in this process (no interpreter start-up per command)."""
    res = cli(*args)
    assert res.returncode == 0, res.stderr[-3000:]
    return res


def trace(tmp: Path, src: str, cflags: str, *args: str, compiler: str | None = None) -> Path:
    rec = tmp / f"{Path(src).stem}-{compiler or 'default'}.rec"
    cmd = ["trace", "--cc", str(PROGRAMS / src), f"--cflags={cflags}", "-o", str(rec)]
    if compiler:
        cmd += ["--compiler", compiler]
    tierlab(*cmd, "--", *args)
    return rec


def line_of(src: str, text: str) -> int:
    for i, line in enumerate((PROGRAMS / src).read_text().splitlines(), 1):
        if text in line and not line.lstrip().startswith("//"):
            return i
    raise AssertionError(text)


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("g++") is None:
        pytest.skip("no g++")
    return trace(tmp_path_factory.mktemp("sites"), "three_sites.cpp", "-O1")


def where(location: str) -> str:
    """``file:line`` (the file's basename) of a ``function /path/file:line`` location."""
    return Path(location.rsplit(" ", 1)[-1]).name


def sites_of(rec: Path) -> tuple[dict[str, dict], dict]:
    """The per-site rows of ``tierlab view --json``, by ``file:line``, and the whole output."""
    res = tierlab("view", str(rec), "--json")
    doc = json.loads(res.stdout)
    return {where(r["location"]): r for r in doc["sites"]["sites"]}, doc


def site_rows(rec: Path) -> dict[str, Any]:
    """The same rows, from the site analysis alone (in process, no view of the mappings)."""
    from tierlab.recording import Recording
    from tierlab.view import sites as site_view

    rep = site_view.analyze(Recording.open(rec))
    assert rep is not None
    return {where(r.location): r for r in rep.rows}


def test_three_sites_exact(three: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sites, doc = sites_of(three)
    src = "three_sites.cpp"
    want = {
        line_of(src, "malloc(n * sizeof(long))"): (32768, 32768, 3 * 4096, 4096),
        line_of(src, "calloc(1000"): (4000, 2000, 1, 500),
        line_of(src, "new double[512]"): (4096, 4096, 1, 512),
    }
    for line, (allocated, touched, loads, stores) in want.items():
        row = sites[f"{src}:{line}"]
        got = (row["bytes_allocated"], row["bytes_touched"], row["loads"], row["stores"])
        assert got == (allocated, touched, loads, stores), (line, row)
        assert row["allocations"] == 1
        assert row["accesses_per_byte"] == pytest.approx((loads + stores) / allocated)
    # The new[] site is the program's line, not libstdc++'s malloc call.
    allocs = pd.read_parquet(three / "allocations")
    assert (allocs["kind"] == 8).sum() == 1  # new[]
    assert (allocs["kind"] == 10).sum() == 1  # delete[]
    # The coverage is stated.
    cov = doc["coverage"]
    assert "g++" in (cov["compiler"] or "").lower() or "gcc" in (cov["compiler"] or "").lower()
    assert cov["not_covered"]
    from tierlab.cli.view import _print_coverage, _print_sites
    from tierlab.recording import Recording
    from tierlab.view import sites as site_view

    rec = Recording.open(three)
    _print_sites(site_view.analyze(rec))
    _print_coverage(rec.meta)
    text = capsys.readouterr().out
    assert "allocation sites:" in text and "not recorded:" in text


def test_child_process_site_exact(three: Path) -> None:
    """The forked child's allocation is in the child's own part of the recording."""
    meta = json.loads((three / "meta.json").read_text())
    procs = meta["processes"]
    assert [p["how"] for p in procs] == ["start", "fork"], procs
    child = procs[1]
    assert child["path"] == f"processes/p{child['pid']}"
    res = tierlab("view", str(three), "--process", str(child["pid"]), "--json")
    doc = json.loads(res.stdout)
    sites = {where(r["location"]): r for r in doc["sites"]["sites"]}
    src = "three_sites.cpp"
    row = sites[f"{src}:{line_of(src, 'malloc(1000 * sizeof(long))')}"]
    got = (row["bytes_allocated"], row["bytes_touched"], row["loads"], row["stores"])
    assert got == (8000, 8000, 2 * 1000, 1000), row
    assert row["allocations"] == 1
    # The child holds no allocation of its parent's sites, nor the parent one of the child's.
    parent = {where(r["location"]) for r in sites_of(three)[1]["sites"]["sites"]}
    assert f"{src}:{line_of(src, 'malloc(n * sizeof(long))')}" not in sites
    assert f"{src}:{line_of(src, 'malloc(1000 * sizeof(long))')}" not in parent
    allocs = pd.read_parquet(three / child["path"] / "allocations")
    assert set(allocs["tid"]) == {child["pid"]}


def test_site_plan_run_and_simulate(three: Path, tmp_path: Path) -> None:
    src = "three_sites.cpp"
    plan = tmp_path / "plan.json"
    # 40 KiB: the malloc site (9 pages with its header) and the calloc site (1 page) fit,
    # the new[] site (2 pages) does not.
    tierlab(
        "place", "plan", "--by", "site", str(three), "--fast-capacity", "40KiB",
        "--fast-node", "0", "--slow-node", "0", "-o", str(plan),
    )  # fmt: skip
    doc = json.loads(plan.read_text())
    fast = {where(s["location"]): s for s in doc["sites"] if s["fast"]}
    a, b = line_of(src, "malloc(n * sizeof(long))"), line_of(src, "calloc(1000")
    assert set(fast) == {f"{src}:{a}", f"{src}:{b}"}
    assert doc["prediction"]["fast_footprint"] == 40 * 1024
    # The same program built natively (no instrumentation), run with the interposer.
    exe = tmp_path / "three_sites"
    subprocess.run(
        ["g++", "-O1", "-g", str(PROGRAMS / src), "-o", str(exe)], check=True, capture_output=True
    )
    log = tmp_path / "shim.log"
    res = tierlab("place", "run", "--plan", str(plan), "--log", str(log), "--json", "--", str(exe))
    rep = json.loads(res.stdout)
    assert rep["exit_code"] == 0
    ids = {where(s["location"]): s["site"] for s in doc["sites"]}
    chosen = {ids[f"{src}:{a}"], ids[f"{src}:{b}"]}
    assert {int(k) for k, v in rep["mbind"].items() if v["calls"]} == chosen
    mb = [ln.split() for ln in log.read_text().splitlines() if ln.startswith("mbind")]
    assert len(mb) == 2
    fields = [dict(x.split("=", 1) for x in w[1:]) for w in mb]
    assert {int(f["site"]) for f in fields} == chosen
    assert {int(f["size"]) for f in fields} == {32768, 4000}
    assert all(f["rc"] == "0" and f["node"] == "0" for f in fields)
    assert rep["set_mempolicy"]["rc"] == 0
    # In simulation: the plan's fast-tier share is the predicted one (within 1%), and the
    # hottest pages of the same capacity are compared.
    sim = json.loads(tierlab("place", "simulate", "--plan", str(plan), str(three), "--json").stdout)
    sp = sim["site_plan"]
    assert abs(sp["fast_share"] - sp["predicted_fast_share"]) <= 0.01
    assert sp["fast_accesses"] == 3 * 4096 + 4096 + 501
    assert 0 < sim["page_placement"]["fast_share"] <= 1


def test_preloaded_interposer_on_an_unmodified_program(tmp_path: Path) -> None:
    """The LD_PRELOAD build (`record --alloc-sites`, `place run`) on a natively built program:
    the same three sites, new[] at the program's line, symbolised from the binary."""
    import os

    from tierlab.live import allocs, cctrace

    if shutil.which("g++") is None:
        pytest.skip("no g++")
    src = "three_sites.cpp"
    exe = tmp_path / "three_sites"
    subprocess.run(
        ["g++", "-O1", "-g", str(PROGRAMS / src), "-o", str(exe)], check=True, capture_output=True
    )
    out = tmp_path / "raw"
    out.mkdir()
    env = {**os.environ, "LD_PRELOAD": str(cctrace.preload_object()), "TIERLAB_ALLOC_DIR": str(out)}
    subprocess.run([str(exe)], env=env, check=True, capture_output=True)
    raw = allocs.read_raw(out / "allocs.bin")
    cols, sites = allocs.tables(
        raw, allocs.event_times(raw, None, None), allocs.read_maps(out / "allocmaps.txt")
    )
    where_of = {
        int(s): where(loc.split("\n")[0])
        for s, loc in zip(sites["site"], sites["locations"], strict=True)
    }
    got = {
        (where_of[int(site)], allocs.KINDS[int(kind)], int(size))
        for site, kind, size in zip(cols["site"], cols["kind"], cols["size"], strict=True)
        if where_of[int(site)].startswith(src) and int(kind) not in allocs.FREE_KINDS
    }
    assert got == {
        (f"{src}:{line_of(src, 'malloc(n * sizeof(long))')}", "malloc", 32768),
        (f"{src}:{line_of(src, 'calloc(1000')}", "calloc", 4000),
        (f"{src}:{line_of(src, 'new double[512]')}", "new[]", 4096),
    }
    # The forked child records into p<PID> (listed in processes.log): its own site only.
    (line,) = (out / "processes.log").read_text().splitlines()
    w = line.split()
    assert w[0] == "process" and w[4] == "fork" and w[5] == f"p{w[1]}" and w[6] == str(exe)
    child = out / w[5]
    raw = allocs.read_raw(child / "allocs.bin")
    assert set(raw["tid"]) == {int(w[1])}
    cols, sites = allocs.tables(
        raw, allocs.event_times(raw, None, None), allocs.read_maps(child / "allocmaps.txt")
    )
    locs = [where(loc.split("\n")[0]) for loc in sites["locations"]]
    got = {
        (locs[int(site)], allocs.KINDS[int(kind)], int(size))
        for site, kind, size in zip(cols["site"], cols["kind"], cols["size"], strict=True)
        if locs[int(site)].startswith(src) and int(kind) not in allocs.FREE_KINDS
    }
    assert got == {(f"{src}:{line_of(src, 'malloc(1000 * sizeof(long))')}", "malloc", 8000)}


def heap_and_globals(rec: Path) -> tuple[int, int, int, int]:
    """Loads and stores to the heap (the allocations) and to the program's globals."""
    rows = site_rows(rec).values()
    heap_loads = sum(r.loads for r in rows)
    heap_stores = sum(r.stores for r in rows)
    acc = pd.read_parquet(rec / "accesses", columns=["addr", "kind"])
    maps = pd.read_parquet(rec / "mappings")
    exe = maps[maps["name"].str.startswith("gups ") & (maps["event"] == "map")]
    addr = acc["addr"].to_numpy(dtype=np.uint64)
    inside = np.zeros(addr.size, dtype=bool)
    for lo, n in zip(exe["start"], exe["length"], strict=True):
        inside |= (addr >= np.uint64(lo)) & (addr < np.uint64(lo + n))
    kind = acc["kind"].to_numpy()
    return (
        heap_loads,
        heap_stores,
        int((inside & (kind == 0)).sum()),
        int((inside & (kind == 1)).sum()),
    )


def test_gups_gcc_and_clang_agree(tmp_path: Path) -> None:
    if shutil.which("gcc") is None or shutil.which("clang") is None:
        pytest.skip("needs gcc and clang (Debian: apt-get install clang)")
    g = heap_and_globals(trace(tmp_path, "gups.c", "-O1", compiler="gcc"))
    c = heap_and_globals(trace(tmp_path, "gups.c", "-O1", compiler="clang"))
    n, steps = 4096, 20000
    # Heap: n stores, steps read-modify-writes, n loads; globals: two per step each, and
    # printf reads both once.
    assert g == (steps + n, n + steps, 2 * steps + 2, 2 * steps), g
    assert c == g


def test_memcpy_memset_and_copy_loop(tmp_path: Path) -> None:
    if shutil.which("gcc") is None:
        pytest.skip("no gcc")
    n = 3000
    rec = trace(tmp_path, "copies.c", "-O2", str(n))
    allocs = pd.read_parquet(rec / "allocations")
    blocks = allocs[allocs["kind"] == 0].sort_values("seq")["addr"].to_numpy()[:4]
    acc = pd.read_parquet(rec / "accesses", columns=["addr", "kind", "size"])
    addr = acc["addr"].to_numpy(dtype=np.uint64)

    def bytes_in(block: int, kind: int) -> int:
        m = (addr >= np.uint64(block)) & (addr < np.uint64(block + n)) & (acc["kind"] == kind)
        return int(acc["size"][m].sum())

    src, dst, buf, dst2 = (int(x) for x in blocks)
    assert (bytes_in(src, 1), bytes_in(src, 0)) == (n, n)  # memset, then memcpy's read
    assert (bytes_in(dst, 1), bytes_in(dst, 0)) == (n, 1)  # memcpy's write, printf's dst[n-1]
    assert (bytes_in(buf, 0), bytes_in(dst2, 1)) == (n, n)  # the copy loop


def test_fortran_allocate_is_a_site(tmp_path: Path) -> None:
    if shutil.which("gfortran") is None:
        pytest.skip("no gfortran (Debian: apt-get install gfortran)")
    src = "allocate.f90"
    row = site_rows(trace(tmp_path, src, "-O1"))[f"{src}:{line_of(src, 'allocate(a(1000))')}"]
    assert (row.bytes_allocated, row.bytes_touched) == (8000, 8000)
    assert (row.loads, row.stores) == (1000, 1000)
