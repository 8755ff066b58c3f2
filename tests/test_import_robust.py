"""Robustness of `tierlab import` and `tierlab trace` against damaged or unusual input: every
bad input is refused with a message naming the file, line and field (never a traceback, a
silent default or a silently dropped row), and a failed command leaves nothing behind."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from conftest import REPO, assert_user_error, cli
from tierlab.recording import Recording, RecordingError, RecordingWriter

FIX = REPO / "tests" / "fixtures"
BOM = b"\xef\xbb\xbf"


def _write(path: Path, data: bytes | str) -> Path:
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def _accesses(rec: Path) -> list[tuple[int, int, int, int]]:
    a = Recording.open(rec).accesses()
    return list(zip(a["tid"], a["time_ns"], a["addr"], a["kind"], strict=True))


# -- tierlab trace --------------------------------------------------------------------------


def _fake_valgrind(tmp_path: Path, said: str, status: int) -> Path:
    exe = _write(tmp_path / "valgrind", f"#!/bin/sh\necho '{said}' >&2\nexit {status}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def test_trace_fails_when_valgrind_never_starts_lackey(tmp_path: Path) -> None:
    """Valgrind that could not run the program (its launcher's `Permission denied`, status
    126) or that is not Valgrind at all: an error quoting what it said, no recording."""
    target = _write(tmp_path / "a.c", "int main(void) { return 0; }\n")
    exe = _fake_valgrind(tmp_path, "valgrind: ./a.c: Permission denied", 126)
    out = tmp_path / "tr11"
    res = cli("trace", "-o", out, "--valgrind", exe, "--", target)
    err = assert_user_error(res)
    assert "did not run lackey" in err and "exit status 126" in err, err
    assert "valgrind: ./a.c: Permission denied" in err, err
    assert not os.path.lexists(out)
    res = cli("trace", "-o", out, "--valgrind", "/bin/false", "--", target)
    err = assert_user_error(res)
    assert "exit status 1" in err and "it said: nothing" in err, err
    assert not os.path.lexists(out)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_user_error(cli("trace", "-o", empty, "--valgrind", "/bin/false", "--", target))
    assert empty.is_dir() and not list(empty.iterdir())  # given empty, left empty


# -- a failed import leaves nothing ---------------------------------------------------------


def test_failed_import_removes_the_directory_it_created(tmp_path: Path) -> None:
    trunc = _write(tmp_path / "trunc.csv", "1,10,0x1000,L\n1,20,0x10")
    out = tmp_path / "r3"
    err = assert_user_error(cli("import", "csv", trunc, "-o", out))
    assert "trunc.csv: record 2" in err, err
    assert not os.path.lexists(out)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_user_error(cli("import", "csv", trunc, "-o", empty))
    assert empty.is_dir() and not list(empty.iterdir())
    bad = _write(tmp_path / "bad.txt", "not perf script\n")
    assert_user_error(cli("import", "perf-script", bad, "-o", out))
    assert not os.path.lexists(out)
    # The corrected rerun is not blocked.
    _write(trunc, "1,10,0x1000,L\n1,20,0x1008,S\n")
    res = cli("import", "csv", trunc, "-o", out)
    assert res.returncode == 0, res.stderr
    # A recording --force was to replace stays as it was.
    _write(trunc, "1,10,0x1000,L\n1,5,0x1000,L\n")
    assert_user_error(cli("import", "csv", trunc, "-o", out, "--force"))
    assert len(_accesses(out)) == 2


# -- CSV ------------------------------------------------------------------------------------


def test_csv_several_files_keep_each_threads_time_order(tmp_path: Path) -> None:
    ma = _write(tmp_path / "ma.csv", "1,10,0x1000,L\n1,20,0x2000,L\n")
    mb = _write(tmp_path / "mb.csv", "1,5,0x3000,S\n1,6,0x4000,S\n")
    err = assert_user_error(cli("import", "csv", ma, mb, "-o", tmp_path / "mm1"))
    assert "mb.csv: record 1: field `time`" in err and "ma.csv" in err, err
    err = assert_user_error(cli("import", "csv", ma, ma, "-o", tmp_path / "mm2"))
    assert "ma.csv: given twice" in err, err
    assert not os.path.lexists(tmp_path / "mm1") and not os.path.lexists(tmp_path / "mm2")
    # Files that go on where the others stopped: one thread of 4 accesses, counted once.
    mc = _write(tmp_path / "mc.csv", "1,20,0x3000,S\n2,1,0x4000,S\n")
    res = cli("import", "csv", ma, mc, "-o", tmp_path / "mm3")
    assert res.returncode == 0, res.stderr
    assert "of 2 thread(s)" in res.stdout, res.stdout
    assert [t for t, *_ in _accesses(tmp_path / "mm3")].count(1) == 3
    res = cli(
        "import", "csv", ma, _write(tmp_path / "md.csv", "1,30,0x5000,S\n"), "-o", tmp_path / "mm4"
    )
    assert "of 1 thread(s)" in res.stdout, res.stdout


def test_csv_bom_and_header_detection(tmp_path: Path) -> None:
    """A UTF-8 BOM is not part of the first field; line 1 is a header only when it cannot be
    a data row (no field of it is a number)."""
    f = _write(tmp_path / "bom.csv", BOM + b"1,10,0x1000,L\n1,20,0x2000,S\n")
    res = cli("import", "csv", f, "-o", tmp_path / "r1")
    assert res.returncode == 0, res.stderr
    assert _accesses(tmp_path / "r1") == [(1, 10, 0x1000, 0), (1, 20, 0x2000, 1)]
    f = _write(tmp_path / "bomh.csv", BOM + b"tid,time,addr,kind\n1,10,0x1000,L\n")
    res = cli("import", "csv", f, "-o", tmp_path / "r2")
    assert res.returncode == 0, res.stderr
    assert _accesses(tmp_path / "r2") == [(1, 10, 0x1000, 0)]
    # A damaged first data row is an error, not a header skipped in silence.
    f = _write(tmp_path / "bad1.csv", "1x,10,0x1000,L\n1,20,0x2000,S\n")
    err = assert_user_error(cli("import", "csv", f, "-o", tmp_path / "r3"))
    assert "bad1.csv: record 1: field `tid`" in err, err


def test_csv_invalid_utf8(tmp_path: Path) -> None:
    f = _write(tmp_path / "c.csv", b"# caf\xe9 comment\n1,10,0x1000,L\n")
    res = cli("import", "csv", f, "-o", tmp_path / "r1")
    assert res.returncode == 0, res.stderr
    assert len(_accesses(tmp_path / "r1")) == 1
    f = _write(tmp_path / "d.csv", b"1,10,0x1000,L\n1,20,0x2000,\xff\n")
    err = assert_user_error(cli("import", "csv", f, "-o", tmp_path / "r2"))
    assert "d.csv: record 2" in err and "UTF-8" in err, err


@pytest.mark.parametrize(
    ("sep", "ok"),
    [
        (";", True),
        ("\\t", True),
        ("\t", True),
        (" ", True),
        ("ab", False),
        ("é", False),
        ("", False),
    ],
)
def test_csv_separator_is_one_ascii_character(sep: str, ok: bool, tmp_path: Path) -> None:
    s = {"\\t": "\t"}.get(sep, sep if sep.isascii() and len(sep) == 1 else ",")
    f = _write(tmp_path / "s.csv", s.join(["1", "10", "0x1000", "L"]) + "\n")
    res = cli("import", "csv", f, "--sep", sep, "-o", tmp_path / "r")
    if ok:
        assert res.returncode == 0, res.stderr
        assert _accesses(tmp_path / "r") == [(1, 10, 0x1000, 0)]
    else:  # argparse's usage error
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert "--sep" in res.stderr and "one ASCII character" in res.stderr, res.stderr
        assert not os.path.lexists(tmp_path / "r")
        from tierlab import _native  # the extension's own check, for API callers

        with pytest.raises(ValueError, match="one ASCII character"):
            _native.import_trace("csv", [str(f)], str(tmp_path / "r"), sep=sep)
        assert not os.path.lexists(tmp_path / "r")


# -- lackey, perf script, damo: a BOM ---------------------------------------------------------


def test_bom_in_lackey_perf_script_and_damo(tmp_path: Path) -> None:
    log = _write(tmp_path / "l.log", BOM + (FIX / "traces" / "lackey.log").read_bytes())
    res = cli("import", "lackey", log, "-o", tmp_path / "l")
    assert res.returncode == 0, res.stderr
    want = _accesses(tmp_path / "l")
    res = cli("import", "lackey", FIX / "traces" / "lackey.log", "-o", tmp_path / "l0")
    assert want == _accesses(tmp_path / "l0")
    perf = _write(tmp_path / "p.txt", BOM + (FIX / "perf-script-mem-loads.txt").read_bytes())
    res = cli("import", "perf-script", perf, "-o", tmp_path / "p")
    assert res.returncode == 0, res.stderr
    assert len(Recording.open(tmp_path / "p").samples()) == 4
    damo = _write(tmp_path / "d.json", BOM + (FIX / "damo-record.json").read_bytes())
    res = cli("import", "damo", damo, "-o", tmp_path / "d")
    assert res.returncode == 0, res.stderr


# -- perf script: a last line cut short -----------------------------------------------------


def test_perf_script_last_line_without_newline(tmp_path: Path) -> None:
    """perf script ends every line with a newline: a last line without one may have been cut
    short. Cut in the middle of the instruction pointer it still parses (with a wrong ip):
    left out, with a warning; cut inside the weight it does not: refused."""
    text = (FIX / "perf-script-mem-loads.txt").read_bytes().rstrip(b"\n")
    last = text.splitlines()[-1]
    head = text[: len(text) - len(last)]
    cut = _write(tmp_path / "cut.txt", head + last[: -len(b"01300 matvec_std")])
    res = cli("import", "perf-script", cut, "-o", tmp_path / "r1")
    assert res.returncode == 0, res.stderr
    assert "warning: " in res.stderr and "cut.txt:7" in res.stderr, res.stderr
    assert "no final newline" in res.stderr and "left out" in res.stderr, res.stderr
    s = Recording.open(tmp_path / "r1").samples()
    assert s["weight"].tolist() == [43, 57, 312]
    cut = _write(tmp_path / "cut2.txt", head + last[: last.index(b" 35 ") + 2])
    err = assert_user_error(cli("import", "perf-script", cut, "-o", tmp_path / "r2"))
    assert "cut2.txt:7" in err and "no final newline" in err, err
    assert not os.path.lexists(tmp_path / "r2")
    # With its final newline the same text imports every line, without a warning.
    res = cli(
        "import", "perf-script", _write(tmp_path / "ok.txt", text + b"\n"), "-o", tmp_path / "r3"
    )
    assert res.returncode == 0 and "warning" not in res.stderr, res.stderr
    assert len(Recording.open(tmp_path / "r3").samples()) == 4


# -- raw ------------------------------------------------------------------------------------


def test_raw_size_file_must_match_its_trace(tmp_path: Path) -> None:
    import numpy as np

    np.array([0x1000, 0x2000 | 1 << 63], "<u8").tofile(tmp_path / "t7.bin")
    for sizes, what in ((b"\x08\x08\x08", "more"), (b"\x08", "fewer")):
        _write(tmp_path / "t7.size", sizes)
        err = assert_user_error(cli("import", "raw", tmp_path / "t7.bin", "-o", tmp_path / "r"))
        assert "t7.size" in err and "t7.bin" in err and what in err, err
        assert not os.path.lexists(tmp_path / "r")
    _write(tmp_path / "t7.size", b"\x08\x04")
    res = cli("import", "raw", tmp_path / "t7.bin", "-o", tmp_path / "r")
    assert res.returncode == 0, res.stderr


# -- the recording format -------------------------------------------------------------------


def test_mapping_may_end_at_the_end_of_the_address_space(tmp_path: Path) -> None:
    rec = tmp_path / "r"
    with RecordingWriter(rec) as w:
        w.append_mappings(
            time_ns=[0], event=["map"], start=[2**64 - 4096], length=[4096], name=["[top]"]
        )
    assert Recording.open(rec).mappings()["length"].tolist() == [4096]
    with (
        pytest.raises(RecordingError, match="ends past the end of the address space"),
        RecordingWriter(tmp_path / "r2") as w,
    ):
        w.append_mappings(
            time_ns=[0], event=["map"], start=[2**64 - 4096], length=[4097], name=["x"]
        )
    # The engine's reader agrees: a Rust unit test (recording::tests, in tierlab-core).


def test_meta_page_size_zero_is_not_a_power_of_two(tmp_path: Path) -> None:
    rec = tmp_path / "r"
    with RecordingWriter(rec, machine={"page_size": 4096}):
        pass
    meta = json.loads((rec / "meta.json").read_text())
    meta["machine"]["page_size"] = 0
    (rec / "meta.json").write_text(json.dumps(meta))
    err = assert_user_error(cli("view", rec))
    assert "field `machine.page_size`: 0 is not a power of two" in err, err
