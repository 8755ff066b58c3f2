"""`tierlab trace --cc` across processes (fork, exec), with windows and a region of interest:
the counts of every process's stores are known from the program
(`tests/programs/traced/fork_roi.c`), and the runtime's raw files and the recordings must hold
exactly those."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from conftest import REPO, assert_user_error, cli, tierlab
from tierlab.live import cctrace

SRC = REPO / "tests" / "programs" / "traced" / "fork_roi.c"
PARENT, CHILD, EXEC, OFF, ROI, PLAIN = 1000, 3000, 700, 500, 200, 1000


@pytest.fixture(scope="module")
def exe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("no gcc")
    out = tmp_path_factory.mktemp("fork_roi") / "fork_roi"
    cctrace.build([SRC], out, ["-O1", f"-I{cctrace.RUNTIME_SOURCE.parent}"])
    return out


def raw_run(exe: Path, raw: Path, args: list[str], **env: str) -> dict[str, int]:
    """Records of each process's directory after a run (``.`` or ``p<PID>[-N]``)."""
    raw.mkdir()
    cctrace.run_traced([str(exe), *args], raw, env)
    return {
        p.dir: sum(f.stat().st_size // 8 for f in (raw / p.dir).glob("t*.bin"))
        for p in cctrace.traced_processes(raw)
    }


def stores(rec: Path) -> int:
    return int((pd.read_parquet(rec / "accesses", columns=["kind"])["kind"] == 1).sum())


def test_fork_and_exec_write_recordings_of_their_own(exe: Path, tmp_path: Path) -> None:
    rec = tmp_path / "rec"
    res = tierlab("trace", "--instrumented", "-o", rec, "--", exe)
    assert res.returncode == 0, res.stderr
    assert "3 processes" in res.stderr
    meta = json.loads((rec / "meta.json").read_text())
    procs = meta["processes"]
    assert [p["how"] for p in procs] == ["start", "fork", "exec"]
    root, child, execd = procs
    assert child["parent"] == root["pid"] and execd["pid"] == child["pid"]
    # Without --roi, recording starts on and STOP/START switch it: OFF is not recorded.
    assert root["path"] == "." and stores(rec) == PARENT + ROI
    assert stores(rec / child["path"]) == CHILD and child["path"].endswith(f"p{child['pid']}")
    assert stores(rec / execd["path"]) == EXEC and execd["path"].endswith("-2")
    assert [p["accesses"] for p in procs] == [PARENT + ROI, CHILD, EXEC]
    assert 0 < child["start_ns"] <= execd["start_ns"]
    out = cli("view", rec, "--json", "--no-symbols")
    assert out.returncode == 0, out.stderr
    assert [p["pid"] for p in out.json()["processes"]] == [p["pid"] for p in procs]  # type: ignore[index]
    one = cli("view", rec, "--process", str(execd["pid"]), "--json", "--no-symbols")
    assert one.returncode == 0, one.stderr
    err = assert_user_error(cli("view", rec, "--process", "1", "--json"))
    assert "not a process of" in err


def test_region_of_interest(exe: Path, tmp_path: Path) -> None:
    got = raw_run(exe, tmp_path / "raw", [], TIERLAB_TRACE_ROI="1")
    # Off until START: the children, forked and exec'd before it, record nothing.
    assert got["."] == ROI and sorted(got.values()) == [0, 0, ROI]


@pytest.mark.parametrize(
    "window, want",
    [
        ("10:5:100", 10 * 5),  # windows at 10, 110, ..., 910 of 1000 stores
        ("990:100", 10),
        ("0.1k:0.2k", 200),
        ("0s:1000s", PLAIN),
        ("1000s:1s", 0),
    ],
)
def test_windows_are_exact(exe: Path, tmp_path: Path, window: str, want: int) -> None:
    got = raw_run(exe, tmp_path / "raw", ["a", "b"], TIERLAB_TRACE_WINDOW=window)
    assert got == {".": want}
    if want:
        t = next((tmp_path / "raw").glob("t*.time")).read_bytes()
        idx = [int.from_bytes(t[i : i + 8], "little") for i in range(0, len(t), 16)]
        assert idx == sorted(set(idx))  # strictly increasing record indices


def test_window_option_errors() -> None:
    for spec, msg in [
        ("5i:10i", "instructions cannot be counted"),
        ("1s:10", "mixes accesses and times"),
        ("0:0", "LENGTH must be more than 0"),
        ("0:10:5", "EVERY must be at least LENGTH"),
        ("x:1", "is not a number"),
    ]:
        err = assert_user_error(
            cli("trace", "--instrumented", "--window", spec, "-o", "r", "--", "x")
        )
        assert msg in err, err
    assert cctrace.parse_window("1M:500k:10M") == ("accesses", 10**6, 500_000, 10**7)
    assert cctrace.parse_window("2s:100ms") == ("ns", 2 * 10**9, 10**8, 0)


def test_raw_files_go_to_memory_when_it_has_room(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERLAB_RAW_DIR", "/somewhere")
    assert cctrace.raw_tmp_dir() == "/somewhere"
    monkeypatch.delenv("TIERLAB_RAW_DIR")
    shm = os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK)
    free = os.statvfs("/dev/shm").f_bavail * os.statvfs("/dev/shm").f_frsize if shm else 0
    want = "/dev/shm" if shm and free >= cctrace.RAW_SHM_MIN_FREE else None
    assert cctrace.raw_tmp_dir() == want


def test_a_program_with_the_marks_links_without_the_runtime(tmp_path: Path) -> None:
    if shutil.which("gcc") is None:
        pytest.skip("no gcc")
    plain = tmp_path / "plain"
    subprocess.run(
        ["gcc", "-O1", f"-I{cctrace.RUNTIME_SOURCE.parent}", str(SRC), "-o", str(plain)], check=True
    )
    assert subprocess.run([str(plain), "a", "b"]).returncode == 0


def test_bench_tracer_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table of `tierlab bench tracer` from a result (the bench itself is not a test)."""
    row = {
        "what": "x",
        "args": ["10", "2"],
        "native": {"wall": 0.5, "cpu": 0.0},
        "instrumented": {"wall": 2.0, "cpu": 1.0, "accesses": 1000},
        "command": {"wall": 4.0, "cpu": 3.0, "accesses": 1000, "bytes": 50,
                    "bytes_per_access": 0.05, "accesses_per_second": 250.0},
        "lackey": {"args": ["1", "2"], "native_wall": 0.01, "native_cpu": 0.0, "wall": 3.0,
                   "cpu": 2.9, "accesses": 990},
        "slowdown": {"instrumented_wall": 4.0, "command_wall": 8.0, "instrumented_cpu": None,
                     "command_cpu": None, "lackey_wall": 300.0, "lackey_cpu": None},
    }  # fmt: skip
    monkeypatch.setattr(
        cctrace, "bench_tracer", lambda *a, **k: {"threads": 4, "programs": {"triad": row}}
    )
    out = cli("bench", "tracer", "--programs", "triad", "--lackey-scale", "0.01")
    assert out.returncode == 0, out.stderr
    assert "triad" in out.stdout and "8.0x (n/a)" in out.stdout and "300x" in out.stdout
