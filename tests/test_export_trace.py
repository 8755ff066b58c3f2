"""``tierlab export-trace``: a recording written as libCacheSim (oracleGeneral, lcs, valpin),
Ramulator 2, ChampSim and CSV traces. Round trips through the importers, libCacheSim's own
reader replaying the exports of a real program's trace to tierlab's miss counts, the byte
layouts, and the errors."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import REPO, assert_user_error, tierlab
from tierlab.policies import libcachesim_cache, tierlab_misses
from tierlab.recording import Recording

FIXTURES = Path(__file__).parent / "fixtures" / "traces"
#: A real program's recording shipped with tierlab (kv_zipf.c traced: one thread, 491,722
#: accesses).
KV = REPO / "crates" / "tierlab-sim" / "scenarios" / "traces" / "kv-zipf"
OMP = REPO / "crates" / "tierlab-sim" / "scenarios" / "traces" / "omp-stencil"


def accesses(rec: Path) -> pd.DataFrame:
    df = Recording.open(rec).accesses()
    cols = ["tid", "time_ns", "addr", "kind"]
    return df[cols].sort_values(["tid", "time_ns"], kind="stable").reset_index(drop=True)


def export(rec: Path, fmt: str, out: Path, *extra: str) -> dict[str, int]:
    res = tierlab("export-trace", rec, "--format", fmt, "-o", out, "--json", *extra)
    assert res.returncode == 0, res.stderr
    counts = res.json()
    assert isinstance(counts, dict)
    return counts


def oracle_records(path: Path, header: int = 0) -> np.ndarray:
    dt = np.dtype([("t", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
    return np.fromfile(path, dtype=dt, offset=header)


def naive_next(ids: np.ndarray) -> list[int]:
    """1-based position of each request's next request of the same object, -1 for none."""
    nxt: list[int] = [-1] * len(ids)
    last: dict[int, int] = {}
    for i in range(len(ids) - 1, -1, -1):
        nxt[i] = last.get(int(ids[i]), -1)
        last[int(ids[i])] = i + 1
    return nxt


def test_csv_round_trip(tmp_path: Path) -> None:
    rec = tmp_path / "rec"
    assert tierlab("import", "csv", FIXTURES / "trace.csv", "-o", rec).returncode == 0
    out = tmp_path / "t.csv"
    counts = export(rec, "csv", out)
    assert counts["accesses"] == 6 and counts["threads"] == 2
    # Merged in time order, ties by thread.
    lines = out.read_text().splitlines()
    assert lines[0] == "tid,time,addr,kind,size"
    assert [int(x.split(",")[1]) for x in lines[1:]] == [0, 0, 5, 10, 20, 30]
    back = tmp_path / "back"
    assert tierlab("import", "csv", out, "-o", back).returncode == 0
    pd.testing.assert_frame_equal(accesses(rec), accesses(back))


def test_oracle_general_round_trip_and_next_access(tmp_path: Path) -> None:
    src = FIXTURES / "trace.oracleGeneral.bin"
    rec = tmp_path / "rec"
    assert tierlab("import", "oracle-general", src, "-o", rec).returncode == 0
    out = tmp_path / "t.oracleGeneral"
    export(rec, "oracle-general", out)
    theirs, ours = oracle_records(src), oracle_records(out)
    assert np.array_equal(theirs["id"], ours["id"])
    assert list(ours["next"]) == naive_next(ours["id"])
    back = tmp_path / "back"
    assert tierlab("import", "oracle-general", out, "-o", back).returncode == 0
    pd.testing.assert_frame_equal(accesses(rec), accesses(back))


def test_libcachesim_replays_the_exports_of_a_real_trace_with_tierlabs_misses(
    tmp_path: Path,
) -> None:
    """kv_zipf's trace exported at page granularity: libCacheSim's own readers (oracleGeneral,
    lcs, valpin) give its FIFO and LRU the miss counts of tierlab's fifo and exact lru on the
    recording's page numbers, at three capacities."""
    lcs = pytest.importorskip("libcachesim")
    files = {
        "oracle-general": (tmp_path / "kv.oracleGeneral", lcs.TraceType.ORACLE_GENERAL_TRACE),
        "lcs": (tmp_path / "kv.lcs", lcs.TraceType.LCS_TRACE),
        "valpin": (tmp_path / "kv.valpin", lcs.TraceType.VALPIN_TRACE),
    }
    for fmt, (path, _) in files.items():
        counts = export(KV, fmt, path, "--granularity", "page")
        assert counts["accesses"] == 491_722
    pages = Recording.open(KV).accesses()["addr"].to_numpy(dtype=np.uint64) >> np.uint64(12)
    n_pages = len(np.unique(pages))
    recs = oracle_records(files["oracle-general"][0])
    assert np.array_equal(recs["id"], pages)
    assert list(recs["next"][:2000]) == naive_next(recs["id"])[:2000]
    assert n_pages == counts_objects(files["lcs"][0])
    for capacity in (16, n_pages // 2):
        for kind in ("fifo", "lru-exact"):
            ours, _ = tierlab_misses(kind, pages, capacity)
            for fmt, (path, ttype) in files.items():
                # valpin requests are 1-byte objects: the cache's size counts objects.
                unit = 1 if fmt == "valpin" else 4096
                cache = libcachesim_cache(kind, capacity * unit)
                ratio, _ = cache.process_trace(lcs.TraceReader(str(path), ttype))
                assert round(ratio * len(pages)) == ours, (fmt, kind, capacity)


def counts_objects(lcs_path: Path) -> int:
    """n_obj of an lcs header (after the start magic, version and the stat's version and
    n_req)."""
    data = lcs_path.read_bytes()[:8192]
    magic, version, _stat_version, n_req, n_obj = struct.unpack_from("<QQqqq", data)
    assert magic == 0x123456789ABCDEF0 and version == 1
    assert struct.unpack_from("<Q", data, 8192 - 8)[0] == magic
    assert n_req == (lcs_path.stat().st_size - 8192) // 24
    return int(n_obj)


def four_threads(path: Path) -> None:
    """A recording of 4 threads, 20,000 accesses each, their times interleaved and tied (a
    time shared by two threads is merged by thread id)."""
    from tierlab.recording import RecordingWriter

    rng = np.random.default_rng(3)
    with RecordingWriter(path, source="test") as w:
        for tid in (7, 3, 11, 5):
            n = 20_000
            w.append_accesses(
                time_ns=np.sort(rng.integers(0, 50_000, n)),
                tid=np.full(n, tid),
                addr=0x7F00_0000_0000 + rng.integers(0, 1 << 24, n) * 8,
                kind=rng.integers(0, 2, n),
            )


def test_ramulator_and_champsim_layouts_of_a_multithreaded_trace(tmp_path: Path) -> None:
    """Four threads merged by time: Ramulator's LD/ST lines and ChampSim's records carry each
    access's address and kind, in the CSV export's order."""
    rec = tmp_path / "rec"
    four_threads(rec)
    csv, ram, champ = tmp_path / "t.csv", tmp_path / "t.ramulator", tmp_path / "t.champsim"
    c = export(rec, "csv", csv)
    assert c["threads"] == 4 and c["accesses"] == 80_000
    export(rec, "ramulator", ram)
    export(rec, "champsim", champ)
    rows = pd.read_csv(csv, converters={"addr": lambda x: int(x, 16)})
    assert len(rows) == c["accesses"]
    order = rows[["time", "tid"]].to_records(index=False).tolist()
    assert order == sorted(order)  # by time, ties by thread
    mine = accesses(rec)
    assert sorted(zip(mine["tid"], mine["time_ns"], mine["addr"], strict=True)) == sorted(
        zip(rows["tid"], rows["time"], rows["addr"], strict=True)
    )
    lines = ram.read_text().splitlines()
    assert len(lines) == len(rows)
    kinds, addrs = rows["kind"], rows["addr"]
    want = [("ST" if k else "LD") + f" 0x{a:x}" for k, a in zip(kinds, addrs, strict=True)]
    assert lines == want
    rec = np.fromfile(
        champ,
        dtype=np.dtype(
            [
                ("ip", "<u8"),
                ("br", "u1", 2),
                ("regs", "u1", 6),
                ("dst", "<u8", 2),
                ("src", "<u8", 4),
            ]
        ),
    )
    assert rec.itemsize == 64 and len(rec) == len(rows)
    store = rows["kind"].to_numpy() == 1
    addr = rows["addr"].to_numpy(dtype=np.uint64)
    assert np.array_equal(rec["dst"][store, 0], addr[store])
    assert np.array_equal(rec["src"][~store, 0], addr[~store])
    assert not rec["dst"][~store].any() and not rec["src"][store].any()
    assert np.array_equal(rec["ip"], 0x400000 + 64 * rows["tid"].to_numpy(dtype=np.uint64))
    assert not rec["br"].any() and not rec["regs"].any()


def test_one_thread_and_line_granularity(tmp_path: Path) -> None:
    out = tmp_path / "t.lcs"
    tids = sorted(set(Recording.open(OMP).accesses()["tid"]))
    c = export(OMP, "lcs", out, "--threads", str(tids[1]), "--granularity", "line")
    df = Recording.open(OMP).accesses()
    mine = df[df["tid"] == tids[1]]
    assert c["threads"] == 1 and c["accesses"] == len(mine)
    recs = oracle_records(out, header=8192)
    assert np.array_equal(recs["id"], mine["addr"].to_numpy(dtype=np.uint64) >> np.uint64(6))
    assert set(recs["size"]) == {64}
    assert c["objects"] == counts_objects(out) == len(np.unique(recs["id"]))


def test_errors_name_what_is_wrong(tmp_path: Path) -> None:
    out = tmp_path / "t.bin"
    nope = tmp_path / "nope"
    err = assert_user_error(tierlab("export-trace", nope, "--format", "csv", "-o", out))
    assert "nope" in err and "no such recording" in err
    err = assert_user_error(
        tierlab("export-trace", KV, "--format", "lcs", "-o", out, "--granularity", "100")
    )
    assert "power of two" in err
    err = assert_user_error(
        tierlab("export-trace", KV, "--format", "csv", "-o", out, "--threads", "12345")
    )
    assert "has no thread 12345" in err
    out.write_text("mine")
    err = assert_user_error(tierlab("export-trace", KV, "--format", "csv", "-o", out))
    assert "exists; give --force" in err and out.read_text() == "mine"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    bad = tmp_path / "bad"
    assert tierlab("import", "csv", FIXTURES / "trace.csv", "-o", bad).returncode == 0
    (bad / "meta.json").write_text(json.dumps({"format": "something-else"}))
    err = assert_user_error(tierlab("export-trace", bad, "--format", "csv", "-o", out, "--force"))
    assert "meta.json" in err and "format" in err
