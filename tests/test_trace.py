"""`tierlab trace`: a real program under Valgrind lackey, streamed into the accesses table;
exactly as many accesses as lackey's own trace holds."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import assert_user_error, tierlab
from test_record import programs  # noqa: F401  (the compiled test programs fixture)
from tierlab.recording import Recording


@pytest.fixture(scope="module")
def valgrind() -> str:
    exe = shutil.which("valgrind")
    if exe is None:
        pytest.skip("valgrind is not installed (make install installs it when run as root)")
    return exe


def test_trace_has_exactly_lackeys_accesses(programs, valgrind, tmp_path: Path) -> None:  # noqa: F811
    prog = programs["lackey_small"]
    rec = tmp_path / "r"
    env = {**os.environ, "COLUMNS": "120"}
    res = subprocess.run(
        [sys.executable, "-m", "tierlab", "trace", "-o", rec, "--", prog],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(sum(range(512)))  # the program's own output is untouched
    # The same program, same environment, lackey writing its trace to a file.
    log = tmp_path / "lackey.log"
    subprocess.run(
        [valgrind, "--tool=lackey", "--trace-mem=yes", f"--log-file={log}", "--", prog],
        capture_output=True,
        env=env,
        check=True,
        timeout=300,
    )
    text = log.read_text()
    loads = len(re.findall(r"^ L ", text, re.M))
    stores = len(re.findall(r"^ S ", text, re.M))
    modifies = len(re.findall(r"^ M ", text, re.M))
    instructions = len(re.findall(r"^I ", text, re.M))
    r = Recording.open(rec)
    acc = r.accesses()
    assert len(acc) == loads + stores + 2 * modifies
    assert int((acc["kind"] == 0).sum()) == loads + modifies
    assert int((acc["kind"] == 1).sum()) == stores + modifies
    a = r.meta["accounting"]
    assert (a["loads"], a["stores"], a["modifies"]) == (loads, stores, modifies)
    assert a["instructions"] == instructions == a["lackey_guest_instrs"]
    # time_ns is the instruction clock: non-decreasing, ending below the instruction count.
    t = acc["time_ns"].to_numpy()
    assert (t[1:] >= t[:-1]).all() and t[-1] <= instructions
    assert "(= lackey's count)" in res.stderr
    # The viewer draws it with the program's mappings, named: its file, libc, its stack.
    v = tierlab("view", rec, "--json", "--max-mappings", "100").json()
    assert v["points"] == "accesses"
    assert v["totals"]["accesses"] == len(acc)
    assert v["totals"]["mappings_derived"] is False
    # Mappings are read from /proc/PID/maps at every chunk: one living only between two
    # readings (e.g. the loader's ld.so.cache at start-up) leaves its few accesses unassigned.
    unassigned = v["totals"]["unassigned"]
    assert unassigned <= len(acc) // 1000, unassigned
    assert sum(m["samples"] for m in v["mappings"]) == len(acc) - unassigned
    names = {m["name"] for m in v["mappings"]}
    assert str(prog) in names and "[stack]" in names, names
    assert any(n.endswith(".so.6") or "libc" in n for n in names), names


def test_trace_follow_children(programs, valgrind, tmp_path: Path) -> None:  # noqa: F811
    """--follow-children: the parent, a forked child and the program it execs, each in its own
    part of the recording with exactly its stores to its array, its mappings named."""
    prog = programs["lackey_fork"]
    rec = tmp_path / "r"
    res = tierlab("trace", "--follow-children", "-o", rec, "--", prog, timeout=300)
    assert res.returncode == 0, res.stderr
    said = {
        w[0]: (int(w[1]), int(w[2], 16), int(w[3])) for w in map(str.split, res.stdout.splitlines())
    }
    assert set(said) == {"parent", "child", "exec"}, res.stdout
    top = Recording.open(rec)
    procs = top.meta["processes"]
    assert [(p["pid"], p["how"], p["path"]) for p in procs] == [
        (said["parent"][0], "start", "."),
        (said["child"][0], "fork", f"processes/p{said['child'][0]}"),
        (said["exec"][0], "exec", f"processes/p{said['exec'][0]}-2"),
    ]
    assert procs[1]["parent"] == procs[2]["parent"] == said["parent"][0]
    for role, p in zip(("parent", "child", "exec"), procs, strict=True):
        _, addr, n = said[role]
        r = Recording.open(rec / p["path"])
        acc = r.accesses()
        assert len(acc) == p["accesses"] > 0
        inside = (acc["addr"] >= addr) & (acc["addr"] < addr + 8 * 512)
        assert int((inside & (acc["kind"] == 1)).sum()) == n, role
        a = r.meta["accounting"]
        if role != "child":  # the child's part ends at its exec: Valgrind prints no summary
            assert a["instructions"] == a["lackey_guest_instrs"], (role, a)
        assert set(acc["tid"]) == {p["pid"]}
    assert top.meta["accounting"]["exit_code"] == 0
    # view: the processes, and one of them on its own with its mappings named.
    v = tierlab("view", rec, "--process", f"{said['exec'][0]}-2", "--json").json()
    assert v["totals"]["accesses"] == procs[2]["accesses"]
    names = {m["name"] for m in v["mappings"]}
    assert str(prog) in names, names
    assert v["totals"]["unassigned"] <= procs[2]["accesses"] // 1000


def test_trace_errors(tmp_path: Path) -> None:
    res = tierlab("trace", "-o", tmp_path / "r", "--valgrind", tmp_path / "nope", "--", "true")
    assert "valgrind not found" in assert_user_error(res)
    res = tierlab("trace", "-o", tmp_path / "r")
    assert "nothing to trace" in assert_user_error(res)
    if shutil.which("valgrind"):
        res = tierlab("trace", "-o", tmp_path / "r2", "--", "tierlab-no-such-cmd")
        assert "tierlab-no-such-cmd: command not found" in assert_user_error(res)
