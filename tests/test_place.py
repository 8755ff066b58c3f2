"""`tierlab place plan|apply|show`: live placement with move_pages(2).

Real processes: tests/programs/place_target.c maps 8 MiB, touches part of it on command and
waits; `place show` and `place apply` run against it (on this one-node VM every move to node 0
is "already there" and every move to node 1 fails with ENODEV). The plan algorithm is tested
on synthetic recordings with several nodes, and the apply logic (moves, busy retries, errors,
batches, never touching pages outside the plan) against a model of the kernel with two nodes.
"""

from __future__ import annotations

import errno
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

from conftest import REPO, assert_user_error, cli, tierlab
from tierlab.place import PlaceError
from tierlab.place.apply import ApplyOptions, apply_plan, check_mappings
from tierlab.place.numa import (
    MPOL_MF_MOVE_ALL,
    UNWRITTEN,
    LinuxKernel,
    Topology,
    parse_cpulist,
    topology,
)
from tierlab.place.plan import Plan, PlanMapping, PlanOptions, load, make_plan, save
from tierlab.place.proc import Vma, parse_numa_maps
from tierlab.place.show import show
from tierlab.recording import Recording, RecordingWriter

PAGE = 4096
TARGET_PAGES = 2048  # 8 MiB: kept by the recorder's default 4 MiB mapping filter
TOUCHED = 1024


# -- the target process -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def target_exe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc) to build tests/programs/place_target.c")
    exe = tmp_path_factory.mktemp("place") / "place_target"
    src = REPO / "tests" / "programs" / "place_target.c"
    subprocess.run([cc, "-O1", "-o", exe, src], check=True, capture_output=True)
    return exe


class Target:
    """A running place_target: ``addr`` of its mapping, ``cmd()`` sends one command."""

    def __init__(self, exe: Path, pages: int = TARGET_PAGES) -> None:
        self.proc = subprocess.Popen(
            [str(exe), str(pages)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        word, addr, n = self.proc.stdout.readline().split()
        assert word == "ready"
        self.addr = int(addr, 16)
        self.pages = int(n)
        self.pid = self.proc.pid

    def cmd(self, text: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def page(self, i: int) -> int:
        return self.addr + i * PAGE

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


@pytest.fixture
def targets(target_exe: Path):
    started: list[Target] = []

    def start(pages: int = TARGET_PAGES, touch: int | None = TOUCHED) -> Target:
        t = Target(target_exe, pages)
        started.append(t)
        if touch is not None:
            assert t.cmd(f"touch {touch}") == f"touched {touch}"
        return t

    yield start
    for t in started:
        t.close()


@pytest.fixture(scope="module")
def one_node() -> Topology:
    topo = topology()
    if not topo.single_node or topo.memory != [0]:
        pytest.skip("these checks are for a machine with one NUMA node (node 0)")
    return topo


def synthetic_recording(
    path: Path,
    mappings: list[tuple[int, str, int, int, str]],
    samples: list[tuple[int, int, int, int]],
    machine: dict | None = None,
    parameters: dict | None = None,
) -> Path:
    """mappings: (time_ns, event, start, length, name); samples: (time_ns, cpu, addr, weight)."""
    with RecordingWriter(path, source="test", machine=machine or {}, parameters=parameters) as w:
        if mappings:
            t, ev, start, length, name = zip(*mappings, strict=True)
            w.append_mappings(time_ns=t, event=ev, start=start, length=length, name=name)
        if samples:
            t, cpu, addr, weight = zip(*samples, strict=True)
            n = len(samples)
            w.append_samples(
                time_ns=t,
                tid=[1] * n,
                cpu=cpu,
                addr=addr,
                ip=[0] * n,
                weight=weight,
                data_src=[0] * n,
                event=["page-faults"] * n,
                drain=[0] * n,
            )
    return path


def target_recording(path: Path, t: Target, pages: list[int], cpu: int = 0) -> Path:
    """A recording of ``t``'s mapping with one sample on each of ``pages``."""
    return synthetic_recording(
        path,
        [(0, "map", t.addr, t.pages * PAGE, "[anon]")],
        [(10 + i, cpu, t.page(p) + 8, 0) for i, p in enumerate(pages)],
        parameters={"target": {"pid": t.pid}},
    )


def show_json(pid: int) -> dict:
    """`place show --pid PID --json`, in this process."""
    return json.loads(json.dumps(show(pid).to_json()))


def write_plan(rec: Path, path: Path, **options) -> Plan:
    """`place plan REC -o PATH`, in this process."""
    plan = make_plan(Recording.open(rec), PlanOptions(**options))
    save(plan, path)
    return plan


def mapping_of(show_json: dict, start: int) -> dict:
    found = [m for m in show_json["mappings"] if m["start"] <= start < m["end"]]
    assert len(found) == 1, show_json["mappings"]
    return found[0]


# -- show ---------------------------------------------------------------------------------------


def test_show_reports_touched_pages_on_node0_and_untouched_as_not_present(
    targets, one_node, tmp_path: Path
) -> None:
    t = targets()
    res = tierlab("place", "show", "--pid", t.pid, "--json")
    assert res.returncode == 0, res.stderr
    doc = res.json()
    assert doc["pid"] == t.pid
    assert doc["machine"]["single_node"] is True
    assert "one NUMA node" in doc["machine"]["note"]
    m = mapping_of(doc, t.addr)
    assert m["name"] == "[anon]" and m["length"] >= TARGET_PAGES * PAGE
    # Only our mapping's pages, if the kernel merged it with a neighbour.
    assert m["nodes"].get("0", 0) >= TOUCHED
    assert m["not_present"] >= TARGET_PAGES - TOUCHED
    if m["start"] == t.addr and m["length"] == TARGET_PAGES * PAGE:
        assert m["nodes"] == {"0": TOUCHED}
        assert m["not_present"] == TARGET_PAGES - TOUCHED
    assert m["method"] == "move_pages"
    assert m["agree"] is True  # numa_maps says the same
    assert doc["totals"]["present"] >= TOUCHED
    # The table says the same, and that the machine has one node.
    text = tierlab("place", "show", "--pid", t.pid, "--min-size", "4MiB")
    assert text.returncode == 0, text.stderr
    assert "one NUMA node" in text.stdout
    assert f"{m['start']:#x}" in text.stdout
    assert "[anon]" in text.stdout


def test_show_errors_for_a_dead_pid(tmp_path: Path) -> None:
    err = assert_user_error(tierlab("place", "show", "--pid", "999999999"))
    assert "--pid 999999999: no such process" in err


# -- record -> plan -> apply on a real process --------------------------------------------------


def _samples_in(rec: Path, lo: int, hi: int) -> int:
    """Samples in [lo, hi) of the parts the recording at ``rec`` has flushed so far (each
    part is renamed into place whole)."""
    import pyarrow.parquet as pq

    n = 0
    for part in sorted((rec / "samples").glob("part-*.parquet")):
        addr = pq.read_table(part, columns=["addr"]).column("addr").to_numpy()
        n += int(((addr >= lo) & (addr < hi)).sum())
    return n


def _wait_for(cond, what: str, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_record_plan_apply_on_a_live_process(targets, one_node, tmp_path: Path) -> None:
    t = targets(touch=None)
    rec = tmp_path / "rec"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tierlab",
            "record",
            "--backend",
            "page-faults",
            "--pid",
            str(t.pid),
            "--flush-interval",
            "100ms",
            "-o",
            str(rec),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: (rec / "meta.json").exists() or proc.poll() is not None, "recording")
        if proc.poll() is not None:
            err = proc.communicate()[1]
            if "perf_event_open" in err:
                pytest.skip(f"perf_event_open is not allowed here: {err.strip()}")
            raise AssertionError(err)
        assert t.cmd(f"touch {TOUCHED}") == f"touched {TOUCHED}"
        # Wait until the recorder has stored the faults (it flushes every 100 ms and counts
        # the rows in meta.json), not for a time.
        end = t.addr + TARGET_PAGES * PAGE
        _wait_for(lambda: _samples_in(rec, t.addr, end) >= TOUCHED, "the faults to be recorded")
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    r = Recording.open(rec)
    s = r.samples()
    inside = s[(s["addr"] >= t.addr) & (s["addr"] < t.addr + TARGET_PAGES * PAGE)]
    assert len(inside) >= TOUCHED

    plan_path = tmp_path / "plan.json"
    res = tierlab("place", "plan", rec, "-o", plan_path)
    assert res.returncode == 0, res.stderr
    assert "wrote" in res.stdout
    plan = load(plan_path)
    assert plan.process["pid"] == t.pid
    assert plan.process["command"] and plan.process["command"][0].endswith("place_target")
    assert set(plan.target.tolist()) == {0}
    ours = plan.addr[(plan.addr >= t.addr) & (plan.addr < t.addr + TARGET_PAGES * PAGE)]
    assert set(ours.tolist()) == {t.page(i) for i in range(TOUCHED)}
    assert plan.evidence.shape == (len(plan), len(plan.nodes))

    before = mapping_of(show_json(t.pid), t.addr)
    res = tierlab("place", "apply", "--pid", t.pid, plan_path, "--json")
    assert res.returncode == 0, res.stderr  # everything placed
    doc = res.json()
    assert doc["complete"] is True
    counts = doc["counts"]
    assert counts["moved"] + counts["already there"] + counts["not present"] == len(plan)
    assert counts["already there"] >= TOUCHED
    assert counts["failed"] == counts["mismatch"] == counts["busy"] == 0
    assert {p["addr"] for p in doc["pages"]} == set(plan.addr.tolist())
    by_addr = {p["addr"]: p for p in doc["pages"]}
    assert all(by_addr[t.page(i)]["outcome"] == "already there" for i in range(TOUCHED))
    after = mapping_of(show_json(t.pid), t.addr)
    assert after["nodes"] == before["nodes"]
    # The table form: counts, and the one-node note.
    text = tierlab("place", "apply", "--pid", t.pid, plan_path)
    assert text.returncode == 0, text.stderr
    assert "already there" in text.stdout and "one NUMA node" in text.stdout


def test_apply_reports_already_there_and_not_present(targets, one_node, tmp_path: Path) -> None:
    t = targets()
    # Half the plan's pages were touched (present), half never were.
    pages = list(range(TOUCHED - 100, TOUCHED + 100))
    rec = target_recording(tmp_path / "rec", t, pages)
    plan_path = tmp_path / "plan.json"
    write_plan(rec, plan_path)
    res = tierlab("place", "apply", "--pid", t.pid, plan_path, "--json", "--batch", "16")
    assert res.returncode == 0, res.stderr
    doc = res.json()
    assert doc["counts"]["already there"] == 100
    assert doc["counts"]["not present"] == 100
    for p in doc["pages"]:
        i = (p["addr"] - t.addr) // PAGE
        if i < TOUCHED:
            assert (p["outcome"], p["before"], p["after"]) == ("already there", 0, 0)
        else:
            assert p["outcome"] == "not present" and p["errno"] == "ENOENT"
    assert doc["move_pages_calls"] >= 200 // 16


def test_plan_naming_node_1_fails_with_enodev_and_changes_nothing(
    targets, one_node, tmp_path: Path
) -> None:
    t = targets()
    pages = list(range(0, 64)) + list(range(TOUCHED, TOUCHED + 16))
    rec = target_recording(tmp_path / "rec", t, pages, cpu=0)
    plan_path = tmp_path / "plan.json"
    # Pretend CPU 0 was on node 1 when the recording was made.
    res = tierlab("place", "plan", rec, "-o", plan_path, "--cpu-nodes", "1=0-63")
    assert res.returncode == 0, res.stderr
    assert set(load(plan_path).target.tolist()) == {1}
    before = mapping_of(show_json(t.pid), t.addr)

    res = tierlab("place", "apply", "--pid", t.pid, plan_path, "--json")
    assert res.returncode == 1, res.stderr  # not applied: exit status 1
    doc = res.json()
    assert doc["complete"] is False
    assert doc["counts"]["failed"] == len(pages)
    assert doc["failures"] == {
        "ENODEV": {"pages": len(pages), "message": "target node does not exist or has no memory"}
    }
    assert all(p["errno"] == "ENODEV" for p in doc["pages"])
    assert any("one NUMA node" in n for n in doc["notes"])
    after = mapping_of(show_json(t.pid), t.addr)
    assert after["nodes"] == before["nodes"] and after["not_present"] == before["not_present"]

    text = tierlab("place", "apply", "--pid", t.pid, plan_path)
    assert text.returncode == 1
    assert "ENODEV" in text.stdout and "target node does not exist" in text.stdout
    assert "one NUMA node" in text.stdout
    assert "Traceback" not in text.stderr

    # A dry run predicts the same and moves nothing.
    dry = tierlab("place", "apply", "--pid", t.pid, plan_path, "--dry-run", "--json")
    assert dry.returncode == 1
    assert dry.json()["dry_run"] is True
    assert dry.json()["failures"]["ENODEV"]["pages"] == len(pages)


def test_dry_run_changes_nothing(targets, one_node, tmp_path: Path) -> None:
    t = targets()
    rec = target_recording(tmp_path / "rec", t, list(range(0, 2 * TOUCHED, 2)))
    plan_path = tmp_path / "plan.json"
    write_plan(rec, plan_path)
    before = show_json(t.pid)
    res = tierlab("place", "apply", "--pid", t.pid, plan_path, "--dry-run", "--json")
    assert res.returncode == 0, res.stderr
    doc = res.json()
    assert doc["dry_run"] is True
    assert doc["counts"]["already there"] == TOUCHED // 2
    assert doc["counts"]["not present"] == TOUCHED // 2
    assert doc["counts"]["moved"] == 0
    after = show_json(t.pid)
    assert mapping_of(after, t.addr) == mapping_of(before, t.addr)
    text = tierlab("place", "apply", "--pid", t.pid, plan_path, "--dry-run")
    assert text.returncode == 0 and "dry run: nothing moved" in text.stdout


def test_stale_plans_report_mismatches_and_apply_nothing(targets, one_node, tmp_path) -> None:
    t = targets()
    pages = list(range(0, TARGET_PAGES, 8))
    rec = target_recording(tmp_path / "rec", t, pages)
    plan_path = tmp_path / "plan.json"
    write_plan(rec, plan_path)
    n = len(pages)

    # Another run of the same program: the mapping is elsewhere.
    other = targets()
    res = tierlab("place", "apply", "--pid", other.pid, plan_path, "--json")
    assert res.returncode == 1
    doc = res.json()
    assert doc["counts"]["mismatch"] == n and doc["move_pages_calls"] == 0
    assert doc["mappings"][0]["status"] == "mismatch"

    # The same process, after unmapping half of the mapping.
    assert t.cmd("unmap") == "unmapped"
    res = tierlab("place", "apply", "--pid", t.pid, plan_path, "--json")
    assert res.returncode == 1
    doc = res.json()
    assert doc["counts"]["mismatch"] == n
    assert doc["move_pages_calls"] == 0  # nothing applied, not even the half still mapped
    reason = doc["mappings"][0]["reason"]
    assert reason.startswith("partly unmapped") or reason.startswith("changed"), reason
    assert all(p["outcome"] == "mismatch" for p in doc["pages"])
    text = tierlab("place", "apply", "--pid", t.pid, plan_path)
    assert text.returncode == 1 and "mismatch" in text.stdout

    # A process whose mapping now holds a file.
    third = targets()
    rec3 = target_recording(tmp_path / "rec3", third, pages)
    plan3 = tmp_path / "plan3.json"
    write_plan(rec3, plan3)
    assert third.cmd("remap") == "remapped"
    doc = tierlab("place", "apply", "--pid", third.pid, plan3, "--json").json()
    assert doc["counts"]["mismatch"] == n
    assert "/dev/zero" in doc["mappings"][0]["reason"]


def test_only_plan_pages_are_reported(targets, one_node, tmp_path: Path) -> None:
    t = targets()
    pages = [3, 5, 700, 1500]
    rec = target_recording(tmp_path / "rec", t, pages)
    plan_path = tmp_path / "plan.json"
    write_plan(rec, plan_path)
    doc = tierlab("place", "apply", "--pid", t.pid, plan_path, "--json").json()
    assert [p["addr"] for p in doc["pages"]] == [t.page(p) for p in pages]


def test_dead_pid_gives_a_clear_error(targets, tmp_path: Path) -> None:
    t = targets()
    rec = target_recording(tmp_path / "rec", t, [0, 1])
    plan_path = tmp_path / "plan.json"
    write_plan(rec, plan_path)
    t.close()
    err = assert_user_error(tierlab("place", "apply", "--pid", t.pid, plan_path))
    assert f"--pid {t.pid}: " in err


# -- bad input ------------------------------------------------------------------------------------


def _good_plan_doc() -> dict:
    return {
        "format": "tierlab-placement-plan",
        "version": 1,
        "process": {"pid": None, "command": None},
        "page_size": 4096,
        "policy": {"name": "affinity"},
        "nodes": [0, 1],
        "mappings": [{"id": 0, "start": 0x10000000, "length": 65536, "name": "[anon]"}],
        "pages": [
            {"addr": 0x10000000, "mapping": 0, "node": 1, "evidence": [1, 2]},
            {"addr": 0x10001000, "mapping": 0, "node": 0, "evidence": [2, 0]},
        ],
    }


def _set(doc: dict, path: str, value: object) -> dict:
    keys = path.split(".")
    d: object = doc
    for k in keys[:-1]:
        d = d[int(k)] if isinstance(d, list) else d[k]  # type: ignore[index]
    last = keys[-1]
    if value is _DELETE:
        del d[last]  # type: ignore[union-attr]
    elif isinstance(d, list):
        d[int(last)] = value
    else:
        d[last] = value  # type: ignore[index]
    return doc


_DELETE = object()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("format", "other"), "field `format`: is 'other', expected 'tierlab-placement-plan'"),
        (("version", 2), "field `version`: plan format version 2 is newer"),
        (("pages", _DELETE), "field `pages`: missing"),
        (("pages.1.node", "x"), "field `pages[1].node`: expected an integer, got the string 'x'"),
        (("pages.0.node", -1), "field `pages[0].node`: must be at least 0"),
        (("pages.0.node", 2**40), "field `pages[0].node`: must be at most 2147483647"),
        (("pages.0.addr", 2**70), "field `pages[0].addr`: must be at most"),
        (("nodes", "0,1"), "field `nodes`: expected a list of node numbers"),
        (("mappings.0", [1]), "field `mappings[0]`: expected an object, got a list"),
        (("pages.1.addr", 0x20000000), "field `pages[1].addr`: 0x20000000 is outside its mapping"),
        (("pages.1.addr", 0x10000010), "is not a multiple of the page size"),
        (("pages.1.addr", 0x10000000), "field `pages[1].addr`: page 0x10000000 appears more"),
        (("pages.0.mapping", 7), "field `pages[0].mapping`: no mapping has id 7"),
        (("pages.0.evidence", [1]), "field `pages[0].evidence`: expected a list of 2 counts"),
        (("mappings.0.length", 0), "field `mappings[0].length`: must be at least 1"),
        (("mappings.0.name", _DELETE), "field `mappings[0].name`: missing"),
        (("page_size", 3000), "field `page_size`: must be a power of two"),
    ],
)
def test_bad_plan_file_names_file_and_field(tmp_path: Path, change, message) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_set(_good_plan_doc(), *change)))
    with pytest.raises(PlaceError) as e:
        load(path)
    assert str(e.value).startswith(f"{path}: ") and message in str(e.value), str(e.value)


def test_bad_plan_file_on_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_set(_good_plan_doc(), "pages.1.node", "x")))
    err = assert_user_error(tierlab("place", "apply", "--pid", os.getpid(), path))
    assert f"{path}: field `pages[1].node`: expected an integer, got the string 'x'" in err


def test_plan_file_that_is_not_json_or_missing(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"format": "tierlab-placement-plan",\n  "version": 1,,\n}')
    with pytest.raises(PlaceError, match=f"{path}:2:.*not valid JSON"):
        load(path)
    err = assert_user_error(tierlab("place", "apply", "--pid", os.getpid(), tmp_path / "none"))
    assert "no such file" in err
    # A good plan file loads.
    path.write_text(json.dumps(_good_plan_doc()))
    assert len(load(path)) == 2


def test_plan_command_errors(tmp_path: Path) -> None:
    rec = synthetic_recording(
        tmp_path / "rec", [(0, "map", 0x10000000, 65536, "[anon]")], [(1, 7, 0x10000000, 0)]
    )
    out = tmp_path / "plan.json"
    err = assert_user_error(cli("place", "plan", rec, "-o", out, "--cpu-nodes", "0=0-3"))
    assert "CPU(s) 7 took samples but are on no node" in err
    err = assert_user_error(cli("place", "plan", rec, "-o", out, "--cpu-nodes", "zero"))
    assert "--cpu-nodes 'zero': expected NODE=CPULIST" in err
    assert not out.exists()
    with pytest.raises(PlaceError, match="needs --fast-node N and --fast-capacity BYTES"):
        make_plan(Recording.open(rec), PlanOptions(policy="hot-fast"))
    with pytest.raises(PlaceError, match="every sample has weight 0"):
        make_plan(Recording.open(rec), PlanOptions(by="weight", cpu_nodes={0: [7]}))
    assert tierlab("place", "plan", rec, "-o", out, "--cpu-nodes", "0=0-7").returncode == 0
    err = assert_user_error(cli("place", "plan", rec, "-o", out, "--cpu-nodes", "0=0-7"))
    assert "already exists" in err


# -- the plan algorithm (synthetic recordings, several nodes) -------------------------------------

A = 0x10000000  # [anon], live to the end
F = 0x20000000  # a file mapping unmapped before the end
CPU_NODES = {0: [0, 1], 1: [2, 3]}


@pytest.fixture
def two_node_rec(tmp_path: Path) -> Recording:
    samples = []
    t = 100

    def add(page: int, cpu: int, times: int = 1, weight: int = 1, base: int = A) -> None:
        nonlocal t
        for _ in range(times):
            samples.append((t, cpu, base + page * PAGE + 64, weight))
            t += 1

    add(0, 0, 3)
    add(0, 2, 1)  # page 0: node 0 (3 vs 1)
    add(1, 3, 2)
    add(1, 1, 1)  # page 1: node 1 (2 vs 1)
    add(2, 1, 1)
    add(2, 2, 1)  # page 2: tie -> node 0
    add(3, 0, 2, weight=1)
    add(3, 2, 1, weight=100)  # page 3: node 0 by samples, node 1 by weight
    add(4, 1, 1)  # page 4: only node 0
    add(0, 2, 5, base=F)  # in the file mapping, unmapped at 10_000: dropped
    samples.append((t, 0, 0x5000, 1))  # in no mapping
    path = synthetic_recording(
        tmp_path / "rec",
        [
            (0, "map", A, 16 * PAGE, "[anon]"),
            (0, "map", F, 4 * PAGE, "/data/file"),
            (10_000, "unmap", F, 4 * PAGE, ""),
        ],
        samples,
        machine={"page_size": PAGE},
    )
    return Recording.open(path)


def _targets(plan: Plan) -> dict[int, int]:
    return {(int(a) - A) // PAGE: int(n) for a, n in zip(plan.addr, plan.target, strict=True)}


def test_affinity_is_the_node_sampling_most(two_node_rec: Recording) -> None:
    plan = make_plan(two_node_rec, PlanOptions(cpu_nodes=CPU_NODES))
    assert _targets(plan) == {0: 0, 1: 1, 2: 0, 3: 0, 4: 0}
    assert plan.nodes == [0, 1]
    ev = {(int(a) - A) // PAGE: e for a, e in zip(plan.addr, plan.evidence.tolist(), strict=True)}
    assert ev == {0: [3, 1], 1: [1, 2], 2: [1, 1], 3: [2, 1], 4: [1, 0]}
    assert len(plan.mappings) == 1 and plan.mappings[0].name == "[anon]"
    assert plan.mappings[0].start == A and plan.mappings[0].length == 16 * PAGE
    assert plan.summary["points_in_unmapped_mappings"] == 5
    assert plan.summary["points_in_no_mapping"] == 1
    assert plan.cpu_nodes_source == "--cpu-nodes"


def test_affinity_by_weight_nodes_and_min_samples(two_node_rec: Recording) -> None:
    by_weight = make_plan(two_node_rec, PlanOptions(cpu_nodes=CPU_NODES, by="weight"))
    assert _targets(by_weight)[3] == 1
    only1 = make_plan(two_node_rec, PlanOptions(cpu_nodes=CPU_NODES, nodes=[1]))
    assert _targets(only1) == {0: 1, 1: 1, 2: 1, 3: 1}  # page 4 has no node-1 evidence
    assert only1.summary["skipped_pages"] == {"no evidence from the allowed nodes": 1}
    busy = make_plan(two_node_rec, PlanOptions(cpu_nodes=CPU_NODES, min_samples=3))
    assert _targets(busy) == {0: 0, 1: 1, 3: 0}


def test_cpu_node_map_from_the_recording(tmp_path: Path, two_node_rec: Recording) -> None:
    meta = json.loads((two_node_rec.path / "meta.json").read_text())
    meta["machine"]["cpu_nodes"] = {"0": "0-1", "1": "2-3"}
    (two_node_rec.path / "meta.json").write_text(json.dumps(meta))
    plan = make_plan(Recording.open(two_node_rec.path))
    assert plan.cpu_nodes_source == "recording"
    assert _targets(plan) == {0: 0, 1: 1, 2: 0, 3: 0, 4: 0}
    meta["machine"]["cpu_nodes"] = {"0": "0-1", "1": "1-3"}
    (two_node_rec.path / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(PlaceError, match="CPU 1 is on both node 0 and node 1"):
        make_plan(Recording.open(two_node_rec.path))


def test_hot_fast_fills_the_fast_node_with_the_hottest_pages(two_node_rec: Recording) -> None:
    # Totals: page 0: 4, page 1: 3, page 2: 2, page 3: 3, page 4: 1.
    opts = PlanOptions(policy="hot-fast", fast_node=1, fast_capacity=2 * PAGE + 100)
    plan = make_plan(two_node_rec, opts)
    assert _targets(plan) == {0: 1, 1: 1}  # 1 and 3 tie at 3 samples: lower address first
    opts.slow_node = 0
    plan = make_plan(two_node_rec, opts)
    assert _targets(plan) == {0: 1, 1: 1, 2: 0, 3: 0, 4: 0}
    opts.fast_capacity = 0
    assert set(make_plan(two_node_rec, opts).target.tolist()) == {0}


def test_plan_round_trips_through_its_file(two_node_rec: Recording, tmp_path: Path) -> None:
    plan = make_plan(two_node_rec, PlanOptions(cpu_nodes=CPU_NODES))
    path = tmp_path / "p.json"
    save(plan, path)
    back = load(path)
    assert np.array_equal(back.addr, plan.addr)
    assert np.array_equal(back.target, plan.target)
    assert np.array_equal(back.evidence, plan.evidence)
    assert back.mappings == plan.mappings
    assert back.cpu_nodes == plan.cpu_nodes
    # One page per line, so plans diff well.
    assert sum(1 for line in path.read_text().splitlines() if '"addr"' in line) == len(plan)


def test_cpulist_parsing() -> None:
    assert parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert parse_cpulist("") == []
    with pytest.raises(ValueError):
        parse_cpulist("3-1")


def test_numa_maps_parsing() -> None:
    text = (
        "7f0000000000 default anon=3 dirty=3 N0=2 N1=1 kernelpagesize_kB=4\n"
        "7f0000400000 bind:1 file=/x huge dirty=1 N1=1 kernelpagesize_kB=2048\n"
    )
    got = parse_numa_maps(text)
    assert got[0x7F0000000000].nodes == {0: 2, 1: 1}
    assert got[0x7F0000400000].kernel_page_kib == 2048
    assert got[0x7F0000400000].policy == "bind:1"


# -- the apply logic against a model kernel with two nodes --------------------------------------


class FakeKernel:
    """move_pages on a machine with nodes ``memory``: ``where`` maps present pages to nodes."""

    def __init__(
        self,
        where: dict[int, int],
        memory: tuple[int, ...] = (0, 1),
        busy: dict[int, int] | None = None,
        stuck: dict[int, int] | None = None,
        shared: set[int] | None = None,
        deny: bool = False,
    ) -> None:
        self.where = dict(where)
        self.memory = memory
        self.busy = dict(busy or {})  # addr -> times it answers -EBUSY
        self.stuck = dict(stuck or {})  # addr -> times migration fails (positive return)
        self.shared = shared or set()
        self.deny = deny
        self.calls: list[tuple[list[int], list[int] | None, int]] = []

    def move_pages(self, pid, addrs, nodes, flags):
        addrs = [int(a) for a in addrs]
        self.calls.append((addrs, None if nodes is None else [int(n) for n in nodes], flags))
        status = np.full(len(addrs), UNWRITTEN, dtype=np.int32)
        if self.deny:
            return -1, errno.EPERM, status
        for i, a in enumerate(addrs):
            if nodes is None:
                status[i] = self.where.get(a, -errno.ENOENT)
                continue
            node = int(nodes[i])
            if node not in self.memory:
                return -1, errno.ENODEV, status
            if a not in self.where:
                status[i] = -errno.ENOENT
            elif a in self.shared and not flags & MPOL_MF_MOVE_ALL:
                status[i] = -errno.EACCES
            elif self.busy.get(a, 0) > 0:
                self.busy[a] -= 1
                status[i] = -errno.EBUSY
            elif self.stuck.get(a, 0) > 0:
                self.stuck[a] -= 1
                return len(addrs) - i, 0, status
            else:
                self.where[a] = node
                status[i] = node
        return 0, 0, status


TWO = Topology(online=[0, 1], memory=[0, 1], cpus={0: [0, 1], 1: [2, 3]})


def _plan(targets: dict[int, int], length: int = 64 * PAGE, start: int = A) -> Plan:
    pages = sorted(targets)
    return Plan(
        page_size=PAGE,
        process={"pid": None, "command": None},
        policy={"name": "affinity"},
        nodes=[0, 1],
        mappings=[PlanMapping(0, start, length, "[anon]")],
        addr=np.array([start + p * PAGE for p in pages], dtype=np.uint64),
        mapping=np.zeros(len(pages), dtype=np.int64),
        target=np.array([targets[p] for p in pages], dtype=np.int64),
        evidence=np.zeros((len(pages), 2), dtype=np.int64),
    )


def _vmas(*ranges: tuple[int, int, str]) -> list[Vma]:
    return [Vma(a, b, "rw-p", 0, "00:00", 0, "" if n == "[anon]" else n) for a, b, n in ranges]


def _outcomes(report) -> dict[int, tuple[str, str | None]]:
    return {(r["addr"] - A) // PAGE: (r["outcome"], r.get("errno")) for r in report.page_records()}


def test_apply_outcomes_with_retries_and_errors() -> None:
    pg = lambda i: A + i * PAGE  # noqa: E731
    kernel = FakeKernel(
        where={pg(0): 0, pg(1): 1, pg(3): 0, pg(4): 0, pg(5): 0, pg(6): 0, pg(7): 0, pg(8): 0},
        busy={pg(3): 2, pg(4): 100},
        stuck={pg(7): 1},
        shared={pg(5)},
    )
    plan = _plan({0: 1, 1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 3, 7: 1, 8: 0})
    report = apply_plan(
        plan,
        1234,
        ApplyOptions(retries=3, retry_delay_s=0),
        kernel=kernel,
        topo=TWO,
        vmas=_vmas((A, A + 64 * PAGE, "[anon]")),
    )
    assert _outcomes(report) == {
        0: ("moved", None),
        1: ("already there", None),
        2: ("not present", "ENOENT"),
        3: ("moved", None),  # busy twice, moved on the third try
        4: ("busy", "EBUSY"),  # busy every time
        5: ("failed", "EACCES"),  # shared with another process
        6: ("failed", "ENODEV"),  # node 3 does not exist
        7: ("moved", None),  # the kernel gave up once (positive return), then moved it
        8: ("already there", None),
    }
    assert report.attempts.tolist()[3] == 3 and report.attempts.tolist()[4] == 4
    assert kernel.where[pg(0)] == 1 and kernel.where[pg(3)] == 1 and kernel.where[pg(4)] == 0
    assert report.complete is False
    assert report.failures()["ENODEV"]["message"] == "target node does not exist or has no memory"
    # Moving shared pages needs MPOL_MF_MOVE_ALL.
    k2 = FakeKernel(where={pg(5): 0}, shared={pg(5)})
    r2 = apply_plan(
        _plan({5: 1}),
        1234,
        ApplyOptions(move_all=True),
        kernel=k2,
        topo=TWO,
        vmas=_vmas((A, A + 64 * PAGE, "[anon]")),
    )
    assert _outcomes(r2) == {5: ("moved", None)} and r2.complete


def test_apply_never_passes_pages_outside_the_plan_and_respects_batches() -> None:
    where = {A + i * PAGE: i % 2 for i in range(64)}
    kernel = FakeKernel(where=where, busy={A + 10 * PAGE: 1})
    plan = _plan({i: 1 for i in range(0, 64, 3)} | {i: 0 for i in range(1, 64, 3)})
    apply_plan(
        plan,
        1,
        ApplyOptions(batch=5, retry_delay_s=0),
        kernel=kernel,
        topo=TWO,
        vmas=_vmas((A - PAGE, A + 65 * PAGE, "[anon]")),
    )
    planned = set(plan.addr.tolist())
    assert kernel.calls
    for addrs, nodes, _flags in kernel.calls:
        assert set(addrs) <= planned
        assert len(addrs) <= 5
        if nodes is not None:
            assert len(set(nodes)) == 1  # one target node per call
    untouched = {a: n for a, n in where.items() if a not in planned}
    assert all(kernel.where[a] == n for a, n in untouched.items())
    assert all(kernel.where[int(a)] == int(t) for a, t in zip(plan.addr, plan.target, strict=True))


def test_dry_run_only_queries() -> None:
    kernel = FakeKernel(where={A: 0, A + PAGE: 1})
    plan = _plan({0: 1, 1: 1, 2: 0, 3: 5})
    report = apply_plan(
        plan,
        1,
        ApplyOptions(dry_run=True),
        kernel=kernel,
        topo=TWO,
        vmas=_vmas((A, A + 64 * PAGE, "[anon]")),
    )
    assert all(nodes is None for _a, nodes, _f in kernel.calls)
    assert kernel.where == {A: 0, A + PAGE: 1}
    assert _outcomes(report) == {
        0: ("would move", None),
        1: ("already there", None),
        2: ("not present", "ENOENT"),
        3: ("failed", "ENODEV"),
    }


def test_permission_denied_fails_every_page() -> None:
    kernel = FakeKernel(where={A: 0}, deny=True)
    report = apply_plan(
        _plan({0: 1, 1: 1}),
        1,
        kernel=kernel,
        topo=TWO,
        vmas=_vmas((A, A + 64 * PAGE, "[anon]")),
    )
    assert _outcomes(report) == {0: ("failed", "EPERM"), 1: ("failed", "EPERM")}
    assert "CAP_SYS_PTRACE" in report.failures()["EPERM"]["message"]


def test_mapping_checks() -> None:
    plan = _plan({0: 1}, length=16 * PAGE)
    ok = check_mappings(plan, _vmas((A, A + 16 * PAGE, "[anon]")))
    assert ok[0].ok and ok[0].reason == "ok"
    # Merged with a neighbour by the kernel: still the same pages.
    bigger = _vmas((A - 4 * PAGE, A + 16 * PAGE, "[anon]"))
    assert check_mappings(plan, bigger)[0].ok
    assert not check_mappings(plan, bigger, strict=True)[0].ok
    assert "changed: the mapping is now" in check_mappings(plan, bigger, strict=True)[0].reason
    # Split by mprotect into two VMAs: fine, even strict.
    split = _vmas((A, A + 4 * PAGE, "[anon]"), (A + 4 * PAGE, A + 16 * PAGE, "[anon]"))
    assert check_mappings(plan, split, strict=True)[0].ok
    gone = check_mappings(plan, _vmas((A + 32 * PAGE, A + 40 * PAGE, "[anon]")))[0]
    assert not gone.ok and gone.reason.startswith("gone")
    half = check_mappings(plan, _vmas((A, A + 8 * PAGE, "[anon]")))[0]
    assert not half.ok and half.reason.startswith("partly unmapped")
    hole = check_mappings(plan, _vmas((A + PAGE, A + 16 * PAGE, "[anon]")))[0]
    assert not hole.ok and hole.reason.startswith("partly unmapped")
    other = check_mappings(plan, _vmas((A, A + 16 * PAGE, "/lib/x.so")))[0]
    assert not other.ok and "'/lib/x.so'" in other.reason
    plan.mappings[0] = PlanMapping(0, A, 16 * PAGE, "/data/f", inode=42)
    v = [Vma(A, A + 16 * PAGE, "rw-p", 0, "08:01", 43, "/data/f")]
    assert "inode 43" in check_mappings(plan, v)[0].reason


def test_mismatched_pages_are_not_passed_to_the_kernel() -> None:
    kernel = FakeKernel(where={A: 0, A + 100 * PAGE: 0})
    plan = _plan({0: 1})
    plan.mappings.append(PlanMapping(1, A + 100 * PAGE, 8 * PAGE, "[anon]"))
    plan.addr = np.append(plan.addr, np.uint64(A + 100 * PAGE))
    plan.mapping = np.append(plan.mapping, 1)
    plan.target = np.append(plan.target, 1)
    plan.evidence = np.zeros((2, 2), dtype=np.int64)
    report = apply_plan(plan, 1, kernel=kernel, topo=TWO, vmas=_vmas((A, A + 64 * PAGE, "[anon]")))
    assert report.counts()["mismatch"] == 1 and report.counts()["moved"] == 1
    assert all(A + 100 * PAGE not in addrs for addrs, _n, _f in kernel.calls)
    assert kernel.where[A + 100 * PAGE] == 0


def test_real_kernel_query_of_own_pages() -> None:
    """The ctypes wrapper on this machine: a touched page is on a node, an untouched one is
    not present, an unmapped address is EFAULT."""
    import mmap

    buf = mmap.mmap(-1, 4 * PAGE)
    buf[0:1] = b"x"
    import ctypes

    base = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    try:
        ret, err, st = LinuxKernel().move_pages(
            0, np.array([base, base + PAGE, 0x1000], dtype=np.uint64), None, 0
        )
    finally:
        del base
    assert ret == 0 and err == 0
    assert st[0] >= 0
    assert st[1] == -errno.ENOENT
    assert st[2] == -errno.EFAULT
