"""Streaming trace importers (raw, csv, oracle-general, lackey): exact contents of small
fixtures, errors naming file, record and field, and import -> replay in bounded memory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, assert_user_error, cli, tierlab
from tierlab.recording import Recording

FIX = REPO / "tests" / "fixtures" / "traces"
S = 1 << 63


def test_raw_import_keeps_program_order_per_thread(tmp_path: Path) -> None:
    rec = tmp_path / "r"
    res = tierlab("import", "raw", FIX / "raw" / "t102.bin", FIX / "raw" / "t101.bin", "-o", rec)
    assert res.returncode == 0, res.stderr
    assert "10 accesses (6 loads, 4 stores) of 2 thread(s)" in res.stdout
    r = Recording.open(rec)
    assert r.meta["time_unit"] == "accesses" and r.meta["complete"]
    a = r.accesses()
    t101 = np.fromfile(FIX / "raw" / "t101.bin", dtype="<u8")
    got = a[a["tid"] == 101]
    assert got["addr"].tolist() == (t101 & np.uint64(S - 1)).tolist()
    assert got["kind"].tolist() == (t101 >> np.uint64(63)).tolist()
    assert got["time_ns"].tolist() == list(range(6))  # the record index
    assert a["tid"].tolist()[:6] == [101] * 6  # threads in tid order, one block each


def test_csv_import_groups_threads_and_keeps_sizes(tmp_path: Path) -> None:
    rec = tmp_path / "r"
    res = tierlab("import", "csv", FIX / "trace.csv", "-o", rec, "--time-unit", "instructions")
    assert res.returncode == 0, res.stderr
    r = Recording.open(rec)
    assert r.meta["time_unit"] == "instructions"
    a = r.accesses()
    assert a["tid"].tolist() == [1, 1, 1, 2, 2, 2]
    assert a["addr"].tolist() == [0x10000, 0x10008, 0x11000, 0x20000, 0x20008, 0x20000]
    assert a["kind"].tolist() == [0, 1, 0, 1, 0, 1]
    assert a["time_ns"].tolist() == [0, 10, 20, 0, 5, 30]
    import pandas as pd

    assert pd.read_parquet(rec / "accesses")["size"].tolist() == [8, 8, 8, 4, 4, 4]


def test_oracle_general_and_lackey_imports(tmp_path: Path) -> None:
    res = tierlab("import", "oracle-general", FIX / "trace.oracleGeneral.bin", "-o", tmp_path / "o")
    assert res.returncode == 0, res.stderr
    a = Recording.open(tmp_path / "o").accesses()
    assert a["addr"].tolist() == [3 * 4096, 7 * 4096, 3 * 4096, 9 * 4096, 7 * 4096]
    assert set(a["kind"]) == {0} and a["time_ns"].tolist() == list(range(5))
    res = tierlab("import", "lackey", FIX / "lackey.log", "-o", tmp_path / "l")
    assert res.returncode == 0, res.stderr
    r = Recording.open(tmp_path / "l")
    a = r.accesses()
    assert a["addr"].tolist() == [0x1FFEFFFD98, 0x422CAC0, 0x421F8F0, 0x421F8F0, 0x1FFEFFFD98]
    assert a["kind"].tolist() == [1, 0, 0, 1, 0]
    assert a["time_ns"].tolist() == [1, 2, 2, 2, 3]
    assert set(a["tid"]) == {4242} and r.meta["time_unit"] == "instructions"


@pytest.mark.parametrize(
    ("fmt", "path", "expect"),
    [
        ("csv", "bad.csv", 'bad.csv: record 4: field `addr`: "0xzz" is not an address'),
        ("raw", "raw-truncated/t7.bin", "t7.bin: record 1: field `addr`: truncated record"),
        ("raw", "trace.csv", "a raw trace file is named t<TID>.bin"),
        ("lackey", "trace.csv", "trace.csv: record 1"),
        ("oracle-general", "lackey.log", "lackey.log: record 9: field `obj_id`: truncated"),
    ],
)
def test_bad_records_are_one_line_errors(tmp_path: Path, fmt: str, path: str, expect: str) -> None:
    err = assert_user_error(cli("import", fmt, FIX / path, "-o", tmp_path / "r"))
    assert expect in err, err
    assert len(err.strip().splitlines()) == 1


def test_csv_times_must_not_decrease_per_thread(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("1,10,0x1000,L\n2,0,0x1000,L\n1,5,0x1000,L\n")
    err = assert_user_error(cli("import", "csv", f, "-o", tmp_path / "r"))
    assert "record 3: field `time`: 5 is before the previous access of thread 1" in err


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("# a comment\n\n   \n# another\n", "blank lines or a header in its 4 lines)"),
        ("tid,time,addr,kind\n", "(only comments, blank lines or a header in its 1 line)"),
        ("", "empty: no accesses found"),
    ],
)
def test_csv_without_accesses_is_an_error(tmp_path: Path, text: str, expect: str) -> None:
    """Not a silent import of 0 accesses: one line naming the file, exit 2."""
    f = tmp_path / "t.csv"
    f.write_text(text)
    err = assert_user_error(cli("import", "csv", f, "-o", tmp_path / "r"))
    assert f"{f}: " in err and "no accesses found" in err and expect in err, err
    assert len(err.strip().splitlines()) == 1


def test_raw_time_file_is_bounded_by_its_trace(tmp_path: Path) -> None:
    """A `.time` side file holds at most one checkpoint (16 bytes) per record of its trace,
    one at its end and 1024 a stopped tracer may leave: a larger one is refused before it
    is read; a truncated one names its record."""
    d = tmp_path / "raw"
    d.mkdir()
    np.array([0x7F0000001000, 0x7F0000001008 | S], "<u8").tofile(d / "t7.bin")

    def checkpoints(n: int) -> None:
        i = np.arange(n, dtype=np.uint64)
        np.stack([i * np.uint64(4096), i * np.uint64(1000)], axis=1).astype("<u8").tofile(
            d / "t7.time"
        )

    from tierlab import _native

    checkpoints(2 + 1 + 1024)  # the most a trace of 2 records may have
    c = _native.import_trace("raw", [str(d / "t7.bin")], str(tmp_path / "ok"))
    assert c["accesses"] == 2 and c["time_unit"] == "ns"
    (d / "t7.time").write_bytes(bytes(16 + 7))
    with pytest.raises(_native.TraceFormatError, match="record 1: field `time`: truncated"):
        _native.import_trace("raw", [str(d / "t7.bin")], str(tmp_path / "r1"))
    checkpoints(2 + 1 + 1024 + 1)
    err = assert_user_error(cli("import", "raw", d / "t7.bin", "-o", tmp_path / "r2"))
    assert (
        f"{d / 't7.time'}: 16448 bytes, more than the time checkpoints of the 2 records of "
        "t7.bin can take (16432 bytes: 16 each, their record indices increasing); "
        "refusing to read it" in err
    ), err
    assert len(err.strip().splitlines()) == 1


# Peak RSS from VmHWM (this process's own address space: ru_maxrss would carry the
# parent's peak over fork + exec).
_REPLAY = """
import json, sys
import tierlab as tl
r = tl.run(sys.argv[1])
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
print(json.dumps({"accesses": r.stats["machine"]["accesses"],
                  "writes": r.stats["machine"]["writes"],
                  "rss_kb": int(hwm.split()[1])}))
"""


def _raw_trace(d: Path, n: int) -> None:
    """Two threads of `n` accesses each over 64 MiB, every 4th a store."""
    d.mkdir()
    for t in (1, 2):
        i = np.arange(n, dtype=np.uint64)
        a = np.uint64(0x7F00_0000_0000 + t * (1 << 30)) + (i * np.uint64(4160)) % np.uint64(1 << 26)
        a |= (i % np.uint64(4) == 0).astype(np.uint64) << np.uint64(63)
        a.astype("<u8").tofile(d / f"t{t}.bin")


def test_import_then_replay_in_bounded_memory(tmp_path: Path) -> None:
    """Peak memory of a replay does not grow with the trace: 4x the accesses, (almost) the
    same peak RSS. (The 100 M-access measurement is in docs/benchmarks.md.)"""
    rss = {}
    for n in (500_000, 2_000_000):
        raw = tmp_path / f"raw{n}"
        _raw_trace(raw, n)
        rec = tmp_path / f"rec{n}"
        files = sorted(raw.glob("t*.bin"))
        assert tierlab("import", "raw", *files, "-o", rec).returncode == 0
        scen = tmp_path / f"s{n}.toml"
        scen.write_text(
            f'name = "r"\n[machine]\ncores = 2\n[workload]\nkind = "replay"\npath = "{rec.name}"\n'
        )
        out = subprocess.run(
            [sys.executable, "-c", _REPLAY, str(scen)], capture_output=True, text=True, check=True
        )
        got = json.loads(out.stdout)
        assert got["accesses"] == 2 * n
        assert got["writes"] == 2 * ((n + 3) // 4)
        rss[n] = got["rss_kb"]
    assert rss[2_000_000] - rss[500_000] < 16 * 1024, rss  # < 16 MiB for 3 M more accesses


def test_view_of_a_trace_keeps_neighbouring_mappings_and_labels_its_clock(tmp_path: Path) -> None:
    """Two adjacent mappings with the same name stay two; a raw trace's time axis counts
    accesses; the page histogram of a page with many accesses gets log bins."""
    from tierlab.recording import RecordingWriter

    base = 0x7F00_0000_0000
    rec = tmp_path / "r"
    with RecordingWriter(rec, source="test") as w:
        w.append_mappings(
            time_ns=[0, 0],
            event=["map", "map"],
            start=[base, base + (1 << 20)],
            length=[1 << 20, 1 << 20],
            name=["lib.so", "lib.so"],
        )
        n = 5000
        addr = base + (np.arange(n, dtype=np.uint64) % 512) * 4096
        addr[:2000] = base + (1 << 20)  # one hot page in the second mapping
        w.append_accesses(time_ns=np.arange(n), tid=np.zeros(n), addr=addr, kind=np.zeros(n))
        w.update_meta(time_unit="accesses")
    res = tierlab("view", rec, "-o", tmp_path / "v", "--json")
    assert res.returncode == 0, res.stderr
    v = res.json()
    assert v["time_unit"] == "accesses"
    maps = sorted(v["mappings"], key=lambda m: m["start"])
    assert [(m["start"], m["length"], m["name"]) for m in maps] == [
        (base, 1 << 20, "lib.so"),
        (base + (1 << 20), 1 << 20, "lib.so"),
    ]
    assert sum(m["samples"] for m in maps) == n
    assert max(maps[1]["histogram"]["samples_per_page"]) >= 2000
    # The page (its static picture and its interactive figure) says accesses too.
    page = (tmp_path / "v" / "index.html").read_text()
    assert page.count("accesses of the thread (millions)") >= 2
    assert "time (ms)" not in page
    res = tierlab("view", rec, "-o", tmp_path / "v", "--images")
    assert res.returncode == 0, res.stderr
    svg = (tmp_path / "v" / f"mapping-{maps[0]['id']}-heatmap.svg").read_text()
    assert "accesses of the thread (millions)" in svg
