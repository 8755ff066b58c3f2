"""`tierlab record` on real child programs (tests/programs/*.c, compiled with `cc`), with the
page-faults backend, which works without a hardware PMU (VMs). Also: SIGKILL and Ctrl-C
safety, attaching with --pid, and the errors on machines without the needed PMU."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, assert_user_error, tierlab
from tierlab.recording import Recording

PROGRAMS = REPO / "tests" / "programs"
PAGE = 4096


@pytest.fixture(scope="session")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The test programs, compiled once per session."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc) to build the test programs")
    out = tmp_path_factory.mktemp("programs")
    built = {}
    for src in sorted(PROGRAMS.glob("*.c")):
        exe = out / src.stem
        subprocess.run([cc, "-O1", "-pthread", "-o", exe, src], check=True, capture_output=True)
        built[src.stem] = exe
    return built


@pytest.fixture(scope="session")
def can_record(programs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> None:
    """Skip when this machine forbids perf_event_open altogether (some containers)."""
    rec = tmp_path_factory.mktemp("probe") / "r"
    res = tierlab(
        "record", "--backend", "page-faults", "-o", rec, "--", programs["touch_pages"], "1"
    )
    if res.returncode != 0 and "perf_event_open" in res.stderr:
        pytest.skip(f"perf_event_open is not allowed here: {res.stderr.strip()}")
    assert res.returncode == 0, res.stderr


def record(rec: Path, *cmd: object, extra: tuple[str, ...] = ()) -> tuple[str, str]:
    res = tierlab("record", "--backend", "page-faults", *extra, "-o", rec, "--", *cmd)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    return res.stdout, res.stderr


def test_every_page_written_appears(programs, can_record, tmp_path: Path) -> None:
    rec = tmp_path / "r"
    n = 1536  # 6 MiB: a fresh mapping (the recorder keeps every mapping by default)
    out, err = record(rec, programs["touch_pages"], n)
    addr_hex, count = out.split()
    base = int(addr_hex, 16)
    assert int(count) == n
    r = Recording.open(rec)
    assert r.meta["complete"] is True
    s = r.samples()
    assert (s["event"] == "page-faults").all()
    inside = s[(s["addr"] >= base) & (s["addr"] < base + n * PAGE)]
    pages = set(((inside["addr"] - base) // PAGE).tolist())
    assert pages == set(range(n))  # every page written, none missing
    acc = r.meta["accounting"]
    assert acc["samples"] == len(s)
    assert acc["lost"] == 0
    assert acc["target_exit"] == {"how": "exit", "value": 0}
    # Every sample names a drain of the drains table, with consistent counts.
    d = r.drains()
    assert set(s["drain"]) <= set(d["drain"])
    assert int(d["records"].sum()) == len(s)
    # The mapping is in the history, and the viewer assigns the pages to it.
    m = r.mappings()
    assert (
        (m["event"] == "map") & (m["start"] <= base) & (m["start"] + m["length"] >= base + n * PAGE)
    ).any()
    res = tierlab("view", rec, "--json")
    assert res.returncode == 0, res.stderr
    view = res.json()
    mine = [x for x in view["mappings"] if x["start"] <= base < x["start"] + x["length"]]
    assert len(mine) == 1
    assert mine[0]["pages_touched"] >= n
    assert view["totals"]["samples"] == len(s)
    assert "samples from 1 thread" in err


def test_an_option_of_another_backend_is_noted(programs, can_record, tmp_path: Path) -> None:
    # --l3-miss-only (amd-ibs only) was ignored without a word on the page-faults backend.
    _, err = record(tmp_path / "r", programs["touch_pages"], 1, extra=("--l3-miss-only",))
    assert "--l3-miss-only applies to amd-ibs only" in err, err


def test_every_thread_appears(programs, can_record, tmp_path: Path) -> None:
    rec = tmp_path / "r"
    out, _ = record(rec, programs["threads"], 4)
    tids = {int(x) for x in out.split()}
    assert len(tids) == 4
    s = Recording.open(rec).samples()
    seen = set(s["tid"].tolist())
    assert tids <= seen
    # Each thread faulted in its own 256 pages (plus its stack and libc's).
    per_tid = s["tid"].value_counts()
    assert all(per_tid[t] >= 256 for t in tids)


def test_map_and_unmap_history(programs, can_record, tmp_path: Path) -> None:
    rec = tmp_path / "r"
    out, _ = record(rec, programs["map_unmap"])
    lines = dict(line.split(" ", 1) for line in out.strip().splitlines())
    a, a_len = (int(x, 16) if i == 0 else int(x) for i, x in enumerate(lines["A"].split()))
    b, b_len = (int(x, 16) if i == 0 else int(x) for i, x in enumerate(lines["B"].split()))
    m = Recording.open(rec).mappings().sort_values("time_ns", kind="stable")

    def covered(kind: str, lo: int, hi: int, after: int = 0) -> list[int]:
        sel = m[
            (m["event"] == kind)
            & (m["start"] <= lo)
            & (m["start"] + m["length"] >= hi)
            & (m["time_ns"] >= after)
        ]
        return sel["time_ns"].tolist()

    a_maps = covered("map", a, a + a_len)
    assert a_maps, m
    a_unmaps = covered("unmap", a, a + a_len, after=a_maps[0])
    assert a_unmaps, m
    b_maps = covered("map", b, b + b_len, after=a_maps[0])
    assert b_maps, m
    # B's upper half was unmapped after B was mapped; its lower half never was.
    assert covered("unmap", b + b_len // 2, b + b_len, after=b_maps[0]), m
    lower = m[
        (m["event"] == "unmap")
        & (m["time_ns"] >= b_maps[0])
        & (m["start"] < b + b_len // 2)
        & (m["start"] + m["length"] > b)
    ]
    assert lower.empty, lower
    # The viewer puts A's and B's pages in two mapping instances; A ended, B lives on.
    view = tierlab("view", rec, "--json").json()
    a_view = next(
        x
        for x in view["mappings"]
        if x["start"] <= a < x["start"] + x["length"] and x["map_time_ns"] == a_maps[0]
    )
    assert a_view["pages_touched"] >= a_len // PAGE
    assert a_view["unmap_time_ns"] is not None
    b_view = next(x for x in view["mappings"] if x["map_time_ns"] == b_maps[0])
    assert b_view["pages_touched"] >= b_len // PAGE
    assert b_view["unmap_time_ns"] is None  # half of it is still mapped


def _wait_for(predicate, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def _parts(rec: Path) -> list[Path]:
    return sorted((rec / "samples").glob("part-*.parquet")) if (rec / "samples").is_dir() else []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is not running either.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def test_sigkill_leaves_a_readable_recording_and_a_running_target(
    programs, can_record, tmp_path: Path
) -> None:
    rec = tmp_path / "r"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tierlab",
            "record",
            "--backend",
            "page-faults",
            "--flush-interval",
            "100ms",
            "-o",
            str(rec),
            "--",
            str(programs["busy"]),
            "60",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    target = 0
    try:
        _wait_for(lambda: len(_parts(rec)) >= 2, "two chunks of samples")

        def target_known() -> bool:
            nonlocal target
            meta = json.loads((rec / "meta.json").read_text())
            target = (meta.get("accounting") or {}).get("target_pid", 0)
            return target > 0

        _wait_for(target_known, "the target's pid in meta.json")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert _alive(target), "the target died with the recorder"
        r = Recording.open(rec)
        assert r.meta["complete"] is False
        n = len(r.samples())
        assert n > 0
        view = tierlab("view", rec, "--json")
        assert view.returncode == 0, view.stderr
        assert view.json()["totals"]["samples"] == n
        assert view.json()["totals"]["complete"] is False
    finally:
        if proc.poll() is None:
            proc.kill()
        if target and _alive(target):
            os.kill(target, signal.SIGKILL)


def test_attach_and_ctrl_c_keeps_data_and_target(programs, can_record, tmp_path: Path) -> None:
    target = subprocess.Popen([str(programs["busy"]), "60"], stdout=subprocess.PIPE)
    rec = tmp_path / "r"
    try:
        assert target.stdout is not None
        assert target.stdout.readline().strip() == b"ready"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tierlab",
                "record",
                "--backend",
                "page-faults",
                "--pid",
                str(target.pid),
                "--flush-interval",
                "100ms",
                "-o",
                str(rec),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _wait_for(lambda: len(_parts(rec)) >= 1, "a chunk of samples")
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert "interrupted; kept what was recorded" in err
        assert "Traceback" not in err
        assert target.poll() is None, "the attached target must keep running"
        r = Recording.open(rec)
        assert r.meta["complete"] is True
        assert r.meta["parameters"]["target"] == {"pid": target.pid}
        s = r.samples()
        assert len(s) > 0
        assert set(s["tid"]) == {target.pid}
        # The 64 MiB buffer mapped before attaching is in the history (from /proc/PID/maps).
        m = r.mappings()
        assert ((m["event"] == "map") & (m["length"] >= 64 << 20) & (m["time_ns"] == 0)).any()
        # Nothing handed over by the kernel is dropped by the interrupt: the accounting and the
        # tables agree.
        acc = r.meta["accounting"]
        assert acc["mapping_events"] == len(m)
        assert acc["samples"] == len(s)
        v = tierlab("view", rec, "--json").json()
        big = [x for x in v["mappings"] if x["length"] >= 64 << 20]
        assert big and big[0]["samples"] > 0
    finally:
        target.kill()
        target.wait()


def test_missing_pmu_says_what_is_missing_and_what_works(can_record, tmp_path: Path) -> None:
    if Path("/sys/bus/event_source/devices/cpu").exists():
        pytest.skip("this machine has a core PMU")
    res = tierlab("record", "--backend", "intel-pebs", "-o", tmp_path / "r", "--", "true")
    err = assert_user_error(res)
    assert "intel-pebs: no PMU: /sys/bus/event_source/devices/cpu missing" in err
    assert "use --backend page-faults" in err
    res = tierlab("record", "--backend", "amd-ibs", "-o", tmp_path / "r", "--", "true")
    err = assert_user_error(res)
    assert "ibs_op/type missing" in err and "use --backend page-faults" in err
    res = tierlab("record", "--list-backends")
    assert res.returncode == 0
    assert "page-faults  yes" in res.stdout
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["-o", "R", "--", "tierlab-no-such-command"],
            "tierlab-no-such-command: command not found",
        ),
        (["-o", "R", "--pid", "999999999"], "--pid 999999999: no such process"),
        (["--", "true"], "-o/--out REC is required"),
        (["-o", "R"], "nothing to record"),
        (["-o", "R", "--period", "0", "--", "true"], "argument --period: 0: expected a period"),
        (["-o", "R", "--buffer-size", "lots", "--", "true"], "expected a size"),
        (["-o", "R", "--backend", "amd-ibs", "--period", "100", "--", "true"], "amd-ibs"),
    ],
)
def test_usage_errors(args: list[str], message: str, tmp_path: Path) -> None:
    backend = [] if "--backend" in args else ["--backend", "page-faults"]
    res = tierlab("record", *backend, *args, cwd=tmp_path)
    err = assert_user_error(res)
    assert message in err


def test_existing_recording_is_not_overwritten(programs, can_record, tmp_path: Path) -> None:
    rec = tmp_path / "r"
    record(rec, programs["touch_pages"], 8)
    before = len(Recording.open(rec).samples())
    res = tierlab(
        "record", "--backend", "page-faults", "-o", rec, "--", programs["touch_pages"], "9"
    )
    assert "already exists" in assert_user_error(res)
    assert len(Recording.open(rec).samples()) == before


def test_buffer_size_sets_the_drain_rate(programs, can_record, tmp_path: Path) -> None:
    # 3000 faults are ~144 KB of 48-byte records: an 8 KiB watermark wakes the drain thread
    # many times; a 256 KiB one never (only the flush timer and the end drain).
    small, big = tmp_path / "s", tmp_path / "b"
    record(small, programs["touch_pages"], 3000, extra=("--buffer-size", "8KiB"))
    record(big, programs["touch_pages"], 3000, extra=("--buffer-size", "256KiB"))
    rs, rb = Recording.open(small), Recording.open(big)
    assert rs.meta["accounting"]["watermark_drains"] >= 1
    assert rb.meta["accounting"]["watermark_drains"] == 0
    assert len(rs.drains()) >= len(rb.drains())
    assert rs.meta["parameters"]["watermark_bytes"] == 8192
    assert rs.meta["parameters"]["ring_bytes"] == 512 << 10


def test_overhead_reports_an_interval(programs, can_record) -> None:
    res = tierlab(
        "overhead",
        "-n",
        "2",
        "--warmup",
        "0",
        "--backend",
        "page-faults",
        "--json",
        "--",
        programs["touch_pages"],
        "64",
    )
    assert res.returncode == 0, res.stderr
    d = res.json()
    assert d["runs"] == 2 and len(d["baseline_s"]) == 2 and len(d["recorded_s"]) == 2
    assert all(n >= 64 for n in d["samples"])
    lo, hi = d["ci95"]
    assert lo <= hi
    assert d["parameters"]["backend"] == "page-faults"
    err = assert_user_error(tierlab("overhead", "-n", "1", "--", "true"))
    assert "--runs must be at least 2" in err


def test_bootstrap_interval_of_constant_runs_is_exact() -> None:
    from tierlab.live.overhead import bootstrap_ci

    lo, hi = bootstrap_ci([1.0, 1.0, 1.0], [1.1, 1.1, 1.1])
    assert lo == pytest.approx(0.1) and hi == pytest.approx(0.1)
    lo, hi = bootstrap_ci([1.0, 1.2, 0.8, 1.0], [1.5, 1.5, 1.4, 1.6])
    assert 0.2 < lo < 0.5 < hi < 0.8


# -- issue 18: live recordings that count right ------------------------------------------------


def _view(rec: Path, *extra: str) -> dict:
    res = tierlab("view", rec, "--json", "--max-mappings", "1000", *extra)
    assert res.returncode == 0, res.stderr
    return res.json()


def _holding(view: dict, addr: int) -> list[dict]:
    return [m for m in view["mappings"] if m["start"] <= addr < m["start"] + m["length"]]


def _thp_enabled() -> str | None:
    """Why THP cannot back a madvise()d mapping here, or None when it can."""
    try:
        mode = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return "this kernel has no transparent huge pages (/sys/kernel/mm/transparent_hugepage)"
    if "[never]" in mode:
        return f"transparent huge pages are disabled here ({mode.strip()})"
    return None


def test_thp_backed_array_shows_all_its_bytes_touched(programs, can_record, tmp_path) -> None:
    """A 512 MiB array backed by transparent huge pages: one page-fault sample per 2 MiB, and
    the view counts 512 MiB touched (not 256 x 4 KiB)."""
    reason = _thp_enabled()
    if reason:
        pytest.skip(reason)
    rec = tmp_path / "r"
    out, _ = record(rec, programs["thp_touch"], 512)
    addr_hex, size, huge = out.split()
    base, size, huge = int(addr_hex, 16), int(size), int(huge)
    if huge == 0:
        pytest.skip("the kernel gave the array no huge page (memory too fragmented?)")
    view = _view(rec)
    (m,) = _holding(view, base)
    # Every byte written is touched; pages the kernel could not back with a huge page were
    # faulted 4 KiB at a time, and count the same.
    assert m["bytes_touched"] == size, (m["bytes_touched"], size, huge)
    assert m["huge_pages_touched"] == huge // (2 << 20)
    assert m["page_size"] == 2 << 20
    sizes = Recording.open(rec).meta["accounting"]["page_sizes"]
    assert any(p["start"] <= base < p["end"] and p["anon_huge_bytes"] >= huge for p in sizes)
    text = tierlab("view", rec, "-o", tmp_path / "v", "--max-mappings", "1").stdout
    assert "512 MiB of 514 MiB touched" in text, text


def test_small_mappings_are_kept_and_shown(programs, can_record, tmp_path: Path) -> None:
    rec = tmp_path / "r"
    out, _ = record(rec, programs["touch_pages"], 100)  # 400 KiB: dropped before issue 18
    base = int(out.split()[0], 16)
    view = _view(rec)
    (m,) = _holding(view, base)
    assert m["small"] is True and m["pages_touched"] >= 100
    assert view["totals"]["unassigned"] == 0
    text = tierlab("view", rec, "-o", tmp_path / "v", "--max-mappings", "1").stdout
    assert "(small)" in text


def test_a_growing_heap_is_one_mapping(programs, can_record, tmp_path: Path) -> None:
    rec = tmp_path / "r"
    out, _ = record(rec, programs["grow_heap"])
    start, size = int(out.split()[0], 16), int(out.split()[1])
    view = _view(rec)
    heaps = [m for m in view["mappings"] if m["name"] == "[heap]"]
    assert len(heaps) == 1, heaps
    (h,) = heaps
    assert h["start"] == start and h["length"] >= size
    assert h["samples"] >= size // PAGE
    assert _holding(view, start) == [h]


def test_plan_of_an_exited_program_uses_its_mapping_history(programs, can_record, tmp_path):
    """The mapping was unmapped before the program exited: `place plan` plans its pages from
    the history (not 0 pages with every sample unused)."""
    rec, plan = tmp_path / "r", tmp_path / "plan.json"
    out, _ = record(rec, programs["map_touch_unmap"], 512)
    base = int(out.split()[0], 16)
    res = tierlab("place", "plan", rec, "-o", plan, "--json")
    assert res.returncode == 0, res.stderr
    s = res.json()["summary"]
    assert s["mappings_from"] == "history"
    assert s["points_in_unmapped_mappings"] == 0
    doc = json.loads(plan.read_text())
    pages = {p["addr"] for p in doc["pages"]}
    assert {base + i * PAGE for i in range(512)} <= pages
    # Only the mappings live at the end (libc, the stack, ...): none of those pages.
    res = tierlab("place", "plan", rec, "-o", tmp_path / "live.json", "--mappings", "live")
    assert res.returncode == 0, res.stderr
    live = json.loads((tmp_path / "live.json").read_text())
    assert not {base + i * PAGE for i in range(512)} & {p["addr"] for p in live["pages"]}
    assert live["summary"]["points_in_unmapped_mappings"] >= 512


def test_record_message_names_the_backend_once(programs, can_record, tmp_path: Path) -> None:
    _, err = record(tmp_path / "r", programs["touch_pages"], 4)
    assert "tierlab record: page-faults, period 1," in err


def test_force_replaces_only_a_recording(programs, can_record, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    res = tierlab(
        "record", "--backend", "page-faults", "--force", "-o", mine, "--", programs["touch_pages"]
    )
    assert "is not a tierlab recording" in assert_user_error(res)
    assert (mine / "thesis.tex").read_text() == "years of work"
    rec = tmp_path / "r"
    record(rec, programs["touch_pages"], 8)
    (rec / "samples" / "part-00007.parquet").write_bytes(b"stale")  # must not survive
    record(rec, programs["touch_pages"], 16, extra=("--force",))
    assert not (rec / "samples" / "part-00007.parquet").exists()
    assert not list(tmp_path.glob(".r.tierlab-*"))
    assert len(Recording.open(rec).samples()) >= 16


SHOW_EVENTS = ("--show-mmap-events", "--show-task-events")


def _perf() -> str:
    exe = shutil.which("perf")
    if exe is None:
        pytest.skip("perf is not installed (Debian: linux-perf; make install installs it)")
    probe = subprocess.run([exe, "--version"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"perf does not run here: {probe.stderr.strip()[:200]}")
    return exe


@pytest.mark.parametrize("cpu", [True, False], ids=["with-cpu", "without-cpu"])
def test_perf_script_import_of_real_perf(programs, can_record, tmp_path, cpu: bool) -> None:
    """The commands of docs/recording.md against real perf: a page-fault recording, printed
    with the mapping history, imported with every page and the mapping's name."""
    perf = _perf()
    data, text, rec = tmp_path / "pf.data", tmp_path / "pf.txt", tmp_path / "r"
    rec_args = [perf, "record", "-e", "page-faults", "-c", "1", "-d", "-o", data]
    if cpu:
        rec_args.append("--sample-cpu")
    res = subprocess.run(
        [*rec_args, "--", programs["touch_pages"], "1536"], capture_output=True, text=True
    )
    if res.returncode != 0:
        pytest.skip(f"perf record cannot record here: {res.stderr.strip()[-300:]}")
    base = int(res.stdout.split()[0], 16)
    fields = "comm,pid,tid," + ("cpu," if cpu else "") + "time,period,event,addr,ip"
    with open(text, "w") as f:
        subprocess.run(
            [perf, "script", "-i", data, "-F", fields, "--ns", *SHOW_EVENTS],
            stdout=f,
            stderr=subprocess.PIPE,
            check=True,
        )
    res = tierlab("import", "perf-script", text, "-o", rec)
    assert res.returncode == 0, res.stderr
    r = Recording.open(rec)
    s = r.samples()
    inside = s[(s["addr"] >= base) & (s["addr"] < base + 1536 * PAGE)]
    assert set(((inside["addr"] - base) // PAGE).tolist()) == set(range(1536))
    assert len(r.mappings()) > 0
    view = _view(rec)
    (m,) = _holding(view, base)
    assert m["name"] == "[anon]" and m["samples"] >= 1536
    assert any(x["name"].endswith("touch_pages") for x in view["mappings"])
