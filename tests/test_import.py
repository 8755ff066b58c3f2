"""`tierlab import`: perf script text, McKernel PEBS dumps and damo records, from fixture
files written to the documented formats (tests/fixtures/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import REPO, assert_user_error, cli, tierlab
from tierlab.live.imports import parse_perf_script_line
from tierlab.recording import Recording

FIX = REPO / "tests" / "fixtures"


def test_perf_script_mem_loads(tmp_path: Path) -> None:
    rec = tmp_path / "r"
    res = tierlab("import", "perf-script", FIX / "perf-script-mem-loads.txt", "-o", rec)
    assert res.returncode == 0, res.stderr
    s = Recording.open(rec).samples()
    assert s["time_ns"].tolist() == [0, 249_900, 499_900, 749_900]
    assert s["tid"].tolist() == [4242, 4243, 4243, 78]
    assert s["cpu"].tolist() == [3, 1, 1, 0]
    assert s["addr"].tolist() == [0x7F3A00001040, 0x7F3A00002080, 0x7F3A00403000, 0x7F3A00403008]
    assert s["data_src"].tolist() == [0x68100142, 0x68100242, 0x2104080142, 0x68100142]
    assert s["weight"].tolist() == [43, 57, 312, 35]
    assert s["ip"].tolist() == [0x55D0C0A01234, 0x55D0C0A01240, 0x55D0C0A01300, 0x55D0C0A01300]
    assert set(s["event"]) == {"cpu/mem-loads,ldlat=30/P"}
    assert (s["drain"] == 0).all()
    meta = Recording.open(rec).meta
    assert meta["parameters"]["periods"] == [100]
    assert len(Recording.open(rec).drains()) == 0


@pytest.mark.parametrize(
    ("name", "rows", "first_ns"),
    [("perf-script-page-faults-ns.txt", 60, 0), ("perf-script-page-faults-us.txt", 65, 0)],
)
def test_perf_script_real_output(name: str, rows: int, first_ns: int, tmp_path: Path) -> None:
    """Text printed by perf 6.1 for software page faults (with and without --ns, data_src)."""
    rec = tmp_path / "r"
    res = tierlab("import", "perf-script", FIX / name, "-o", rec)
    assert res.returncode == 0, res.stderr
    s = Recording.open(rec).samples()
    assert len(s) == rows
    assert int(s["time_ns"].iloc[0]) == first_ns
    assert (s["time_ns"].diff().dropna() >= 0).all()
    assert set(s["event"]) == {"page-faults"}
    assert (s["weight"] == 0).all()
    assert (s["addr"] > 0).all() and (s["ip"] > 0).all()
    v = tierlab("view", rec, "--json").json()
    assert v["totals"]["samples"] == rows and v["totals"]["mappings_derived"]


def test_perf_script_line_fields() -> None:
    line = (
        "  a b  1/2 [3] 4.000000005:  7 ev:  ff  12 |OP LOAD|LVL L1 hit|SNP None|TLB L1 or L2 hit"
        "|LCK No|BLK  Data Addr   9  10 sym"
    )
    row = parse_perf_script_line(line)
    assert row == {
        "time_ns": 4_000_000_005,
        "tid": 2,
        "cpu": 3,
        "addr": 0xFF,
        "ip": 0x10,
        "weight": 9,
        "data_src": 0x12,
        "event": "ev",
        "period": 7,
    }
    assert parse_perf_script_line("# comment") is None
    assert parse_perf_script_line("") is None
    # Without cpu, period, data_src: pid only.
    row = parse_perf_script_line("prog 12 5.5: page-faults: 7f00 0 4010 main")
    assert row is not None
    assert (row["tid"], row["cpu"], row["addr"], row["ip"], row["time_ns"]) == (
        12,
        0,
        0x7F00,
        0x4010,
        5_500_000_000,
    )


def test_perf_script_errors_name_file_and_line(tmp_path: Path) -> None:
    res = tierlab("import", "perf-script", FIX / "perf-script-bad.txt", "-o", tmp_path / "r")
    err = assert_user_error(res)
    assert "perf-script-bad.txt:2: field `addr`: 'zz3a00001040' is not hexadecimal" in err
    bad = tmp_path / "x.txt"
    bad.write_text("hello\n")
    err = assert_user_error(cli("import", "perf-script", bad, "-o", tmp_path / "r2"))
    assert "x.txt:1: not `perf script` output: expected 'COMM PID/TID [CPU] SECONDS" in err
    assert "hello" not in err
    err = assert_user_error(cli("import", "perf-script", tmp_path / "nope", "-o", tmp_path / "r3"))
    assert "nope: no such file" in err


def test_mckernel_dump(tmp_path: Path) -> None:
    rec = tmp_path / "r"
    files = [FIX / "mckernel" / "pebs.1001", FIX / "mckernel" / "pebs.1002"]
    res = tierlab("import", "mckernel", *files, "-o", rec, "--ticks-per-second", "1e6")
    assert res.returncode == 0, res.stderr
    r = Recording.open(rec)
    d = r.drains()
    # Four interrupts (batches) in time order across the two threads; ticks are microseconds.
    assert d["time_ns"].tolist() == [1_000_000, 1_500_000, 2_000_000, 5_000_000]
    assert d["records"].tolist() == [3, 1, 2, 2]
    assert d["drain"].tolist() == [0, 1, 2, 3]
    s = r.samples()
    assert len(s) == 8
    assert s.groupby("drain")["tid"].first().tolist() == [1001, 1002, 1001, 1002]
    assert s["addr"].iloc[0] == 0x7F0000000040
    assert set(s["event"]) == {"pebs-mckernel"}
    m = r.mappings()
    assert m["event"].tolist() == ["map", "map", "unmap"]  # one copy of the per-process log
    assert m["time_ns"].tolist() == [0, 500_000, 4_000_000]
    assert m["length"].tolist() == [8 << 20, 16 << 20, 8 << 20]
    v = tierlab("view", rec, "--json").json()
    assert v["totals"]["drains"] == 4
    by_start = {x["start"]: x for x in v["mappings"]}
    assert by_start[0x7F0000000000]["samples"] == 3
    assert by_start[0x7F0000000000]["unmap_time_ns"] == 4_000_000
    assert by_start[0x7F0001000000]["samples"] == 5
    assert by_start[0x7F0001000000]["threads"] == 2


def test_mckernel_truncated_and_bad(tmp_path: Path) -> None:
    res = tierlab("import", "mckernel", FIX / "mckernel-truncated.9", "-o", tmp_path / "r")
    assert res.returncode == 0, res.stderr
    assert "word 12: batch of 5 addresses holds only 2 (file cut short); kept them" in res.stderr
    assert len(Recording.open(tmp_path / "r").samples()) == 3
    err = assert_user_error(cli("import", "mckernel", FIX / "mckernel-bad.9", "-o", tmp_path / "b"))
    assert "mckernel-bad.9: expected the mmap and munmap sections" in err
    odd = tmp_path / "odd.1"
    odd.write_bytes(b"\x00" * 12)
    err = assert_user_error(cli("import", "mckernel", odd, "-o", tmp_path / "c"))
    assert "12 bytes is not a whole number of u64 words" in err
    sep = (0xFFFF_FFFF_FFFF_FFFF).to_bytes(8, "little")
    word = (5).to_bytes(8, "little")
    wrong = tmp_path / "wrong.1"
    wrong.write_bytes(sep + sep + word)
    err = assert_user_error(cli("import", "mckernel", wrong, "-o", tmp_path / "d"))
    assert "word 2: expected the batch separator 0xffffffffffffffff, got 0x5" in err


@pytest.mark.parametrize("name", ["damo-record.json", "damo-record.json.zlib"])
def test_damo_json(name: str, tmp_path: Path) -> None:
    rec = tmp_path / "r"
    res = tierlab("import", "damo", FIX / name, "-o", rec)
    assert res.returncode == 0, res.stderr
    g = Recording.open(rec).regions()
    assert len(g) == 4
    assert g["time_ns"].tolist() == [0, 0, 100_000_000, 100_000_000]
    assert g["end_ns"].tolist() == [100_000_000, 100_000_000, 200_000_000, 200_000_000]
    assert g["nr_accesses"].tolist() == [5, 0, 20, 1]
    assert g["age"].tolist() == [1, 0, 2, 0]
    assert int(g["start"].iloc[1]) == 139_637_985_116_160  # "139,637,985,116,160"
    v = tierlab("view", rec, "--json").json()
    assert v["points"] == "regions"
    (m,) = v["mappings"]
    assert m["histogram"] == {"samples_per_page": [1, 25], "pages": [1024, 2048]}


def test_damo_binary_and_errors(tmp_path: Path) -> None:
    rec = tmp_path / "r"
    res = tierlab("import", "damo", FIX / "damo-record-v2.bin", "-o", rec)
    assert res.returncode == 0, res.stderr
    g = Recording.open(rec).regions()
    assert g["target"].tolist() == [42, 42, 42]
    assert g["time_ns"].tolist() == [0, 0, 100_000_000]
    assert g["nr_accesses"].tolist() == [3, 0, 7]
    err = assert_user_error(cli("import", "damo", FIX / "damo-bad.json", "-o", tmp_path / "b"))
    assert "record 0: snapshots[0]: regions[0]: field `nr_accesses.samples`" in err
    cut = tmp_path / "cut.bin"
    cut.write_bytes((FIX / "damo-record-v2.bin").read_bytes()[:-3])
    err = assert_user_error(cli("import", "damo", cut, "-o", tmp_path / "c"))
    assert "file ends inside a region" in err


def test_import_refuses_to_overwrite(tmp_path: Path) -> None:
    rec = tmp_path / "r"
    assert tierlab("import", "damo", FIX / "damo-record.json", "-o", rec).returncode == 0
    err = assert_user_error(cli("import", "damo", FIX / "damo-record.json", "-o", rec))
    assert "already exists" in err
    assert tierlab("import", "damo", FIX / "damo-record.json", "-o", rec, "--force").returncode == 0


def test_data_src_decodes_memory_levels(tmp_path: Path) -> None:
    """`data_src` words (perf_event.h's union perf_mem_data_src) to memory levels, as
    `perf mem report` shows them; and `tierlab view` counts samples per level."""
    from tierlab.view import datasrc

    load = 0x02  # PERF_MEM_OP_LOAD

    def lvl(bits: int) -> int:  # old-style mem_lvl mask, with HIT
        return load | ((0x02 | bits) << 5)

    def num(n: int, remote: int = 0) -> int:  # mem_lvl_num (+ mem_remote)
        return load | (0x02 << 5) | (n << 33) | (remote << 37)

    # perf's own text for two fixture words: "LVL L1 hit" and "LVL LFB/MAB hit".
    assert datasrc.level(0x68100142) == "L1" and datasrc.hit(0x68100142) is True
    assert datasrc.level(0x68100242) == "LFB"
    cases = {
        lvl(0x20): "L2",
        lvl(0x40): "L3",
        lvl(0x80): "local DRAM",
        lvl(0x100): "remote DRAM",
        num(0x0D): "local DRAM",
        num(0x0D, 1): "remote DRAM",
        num(0x0E): "PMEM",
        num(0x09): "CXL",
        num(0x03): "L3",
        num(0x0F): "unknown",
        0: "unknown",
    }
    for word, want in cases.items():
        assert datasrc.level(word) == want, hex(word)
    assert datasrc.levels([0, 0]) == {}
    assert datasrc.levels([num(0x0E), lvl(0x08), num(0x0E)]) == {"L1": 1, "PMEM": 2}

    rec = tmp_path / "rec"
    assert (
        tierlab("import", "perf-script", FIX / "perf-script-mem-loads.txt", "-o", rec).returncode
        == 0
    )
    res = tierlab("view", rec, "-o", tmp_path / "v")
    assert res.returncode == 0, res.stderr
    assert "memory levels (data_src): L1 3 (75.0%), LFB 1 (25.0%)" in res.stdout, res.stdout
