"""Issue 38, "every input survives": the data-loss path of `reproduce --out`, the tracebacks,
killed writers and full disks, inputs accepted silently, and outputs that misled. One test
(or more) per finding; the Ctrl-C/SIGTERM/SIGHUP runs are in test_cli.py and test_sweep.py
(`test_ctrl_c_keeps_what_was_done`, `test_ctrl_c_keeps_the_points_done`)."""

from __future__ import annotations

import json
import math
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import SHORT, assert_user_error, cli, tierlab

if TYPE_CHECKING:
    from tierlab.tiering import TieringRecord

# -- data loss: reproduce --out follows run's output-directory rules ---------------------------


def test_reproduce_refuses_a_users_directory(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "index.html").write_text("<p>my page</p>")
    (out / "report.json").write_text('{"mine": true}')
    err = assert_user_error(cli("reproduce", "cmcp", "--figures", "cmcp-p", "--out", out))
    assert str(out) in err and "refusing" in err
    assert (out / "index.html").read_text() == "<p>my page</p>"
    assert (out / "report.json").read_text() == '{"mine": true}'
    assert sorted(p.name for p in out.iterdir()) == ["index.html", "report.json"]


def test_reproduce_refuses_a_run_out_directory(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert cli("run", "demo", *SHORT, "--out", out).returncode == 0
    before = sorted(p.name for p in out.iterdir())
    err = assert_user_error(cli("reproduce", "cmcp", "--figures", "cmcp-p", "--out", out))
    assert "tierlab run --out" in err
    assert sorted(p.name for p in out.iterdir()) == before


def test_reproduce_reuses_its_own_directory(tmp_path: Path) -> None:
    """Its own earlier report is not refused (the smoke profile of one figure)."""
    out = tmp_path / "rep"
    args = ("reproduce", "numa", "--profile", "smoke", "--figures", "numa-placement")
    res = cli(*args, "--jobs", "1", "--out", out, "--no-progress")
    assert res.returncode == 0, res.stderr
    res = cli(*args, "--jobs", "1", "--out", out, "--no-progress")
    assert res.returncode == 0, res.stderr
    assert "reused" in res.stderr


# -- tracebacks --------------------------------------------------------------------------------


def test_object_bytes_past_64_bits_is_a_usage_error(tmp_path: Path) -> None:
    trace = tmp_path / "t.oracle"
    trace.write_bytes(struct.pack("<IQIhH", 1, 7, 4096, 0, 0)[:24].ljust(24, b"\0"))
    res = cli(
        "import", "oracle-general", trace, "-o", tmp_path / "r",
        "--object-bytes", "18446744073709551616",
    )  # fmt: skip
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "--object-bytes" in res.stderr
    assert not (tmp_path / "r").exists()


def test_reproduce_negative_seed_is_a_usage_error() -> None:
    res = cli("reproduce", "cmcp", "--seed", "-1", "--dry-run")
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "seed" in res.stderr


def test_tune_refuses_a_huge_grid_before_making_it(tmp_path: Path) -> None:
    # The grid of 10^8 trials would fill the memory (MemoryError after 40 s): refused first.
    err = assert_user_error(
        cli("tune", "demo", "--param", "seed=0:100000000", "--objective", "machine.accesses")
    )
    assert "100,000,001" in err and "bayes" in err


@pytest.mark.parametrize("command", ["run", "tune"])
def test_an_empty_ray_address_is_a_usage_error(tmp_path: Path, command: str) -> None:
    spec = tmp_path / "sw.toml"
    spec.write_text(
        'name = "sw"\nduration = "10ms"\nwindow = "5ms"\n[workload]\nkind = "uniform"\n'
        'footprint = "4MiB"\n[[sweep]]\nlabel = "a"\nset = []\n'
    )
    extra = ["--param", "seed=1:2", "--objective", "machine.accesses"] if command == "tune" else []
    res = cli(command, spec, *extra, "--executor", "ray", "--address", "")
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "--address" in res.stderr


# -- killed writers, full disks ----------------------------------------------------------------


def _dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_leftovers_of_killed_writers_are_cleaned_by_the_next_run(tmp_path: Path) -> None:
    out = tmp_path / "O"
    dead = tmp_path / f".O.tierlab-new-{_dead_pid()}-abc12345"
    old = tmp_path / f".O.tierlab-old-{_dead_pid()}-xyz_9876"
    live = tmp_path / f".O.tierlab-new-{os.getpid()}-live0000"  # a writer still running
    other = tmp_path / f".P.tierlab-new-{_dead_pid()}-other000"  # another path's
    for d in (dead, old, live, other):
        d.mkdir()
        (d / "timeseries.csv").write_text("partial")
    assert cli("run", "demo", *SHORT, "--out", out).returncode == 0
    assert not dead.exists() and not old.exists()
    assert live.exists() and other.exists()
    # A recording replaced with --force: the same for its writer's hidden directory.
    rec = tmp_path / "rec"
    trace = tmp_path / "t1.bin"
    trace.write_bytes(struct.pack("<Q", 0x10000))
    assert cli("import", "raw", trace, "-o", rec).returncode == 0
    partial = tmp_path / f".rec.tierlab-new-{_dead_pid()}-part0000"
    partial.mkdir()
    (partial / "meta.json").write_text("{}")
    assert cli("import", "raw", trace, "-o", rec, "--force").returncode == 0
    assert not partial.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".rec")) == []


def _full_disk(tmp_path: Path, kib: int) -> Path:
    """A directory for :func:`on_full` to mount a small tmpfs on."""
    d = tmp_path / "small"
    d.mkdir()
    return d


def on_full(mount: Path, kib: int, *args: object, setup: str = "") -> subprocess.CompletedProcess:
    """Run ``python -m tierlab ARGS`` in a mount namespace where ``mount`` is a tmpfs of
    ``kib`` KiB (a disk that fills up); ``setup`` runs in it first (a shell command)."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=16k none {mount}"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        pytest.skip(f"no mount namespace here: {probe.stderr.strip()}")
    cmd = " ".join(f"'{a}'" for a in map(str, [sys.executable, "-m", "tierlab", *args]))
    script = f"mount -t tmpfs -o size={kib}k none {mount} && cd {mount} && {setup} {cmd}"
    script += f"; rc=$?; ls -aR {mount} > {mount.parent}/listing.txt; exit $rc"
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=300
    )


def test_a_full_disk_names_the_path_and_keeps_what_was_there(tmp_path: Path) -> None:
    mount = _full_disk(tmp_path, 64)
    # run --out: the run fits nowhere; the error names the directory, no traceback, nothing
    # half-written stays.
    res = on_full(mount, 64, "run", "demo", *SHORT, "--out", "out")
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert f"{mount}/out" in res.stderr and "no space left on device" in res.stderr
    listing = (tmp_path / "listing.txt").read_text().split()
    assert not [n for n in listing if "tierlab-new" in n], listing
    # An earlier run's output is kept as it was when the next one does not fit.
    earlier = f"{sys.executable} -m tierlab run demo --set 'duration=\"5ms\"' --out out"
    res = on_full(
        mount, 8192, "run", "demo", *SHORT, "--out", "out",
        setup=f"{earlier} >/dev/null && cp out/run.json keep.json && "
        "(dd if=/dev/zero of=filler bs=1k 2>/dev/null; true) &&",
    )  # fmt: skip
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert f"{mount}/out" in res.stderr and "no space left on device" in res.stderr
    assert f"{mount}/out is left as it was" in res.stderr, res.stderr
    listing = (tmp_path / "listing.txt").read_text().split()
    assert "out" in listing and not [n for n in listing if "tierlab-new" in n], listing


def test_a_full_disk_while_importing_names_the_recording(tmp_path: Path) -> None:
    mount = _full_disk(tmp_path, 64)
    trace = tmp_path / "t1.bin"
    rng = np.random.default_rng(1)
    (rng.integers(0, 1 << 40, 400_000, dtype=np.uint64)).astype("<u8").tofile(trace)
    res = on_full(mount, 64, "import", "raw", trace, "-o", "rec")
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "panicked" not in res.stderr
    assert "rec/" in res.stderr and "no space left on device" in res.stderr.lower(), res.stderr
    assert not (tmp_path / "listing.txt").read_text().split().count("rec")


def test_a_full_disk_during_a_sweep_leaves_no_partial_point(tmp_path: Path) -> None:
    mount = _full_disk(tmp_path, 24)
    spec = tmp_path / "sw.toml"
    spec.write_text(
        'name = "sw"\nduration = "10ms"\nwindow = "5ms"\n[workload]\nkind = "uniform"\n'
        'footprint = "4MiB"\n[[sweep]]\nlabel = "a"\nset = []\n[[sweep]]\nlabel = "b"\n'
        "set = ['seed = 3']\n"
    )
    res = on_full(
        mount, 24, "run", spec, "--json", "--jobs", "1", "--out", "out",
        setup="dd if=/dev/zero of=filler bs=1k count=24 2>/dev/null;",
    )  # fmt: skip
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
    assert "no space left on device" in res.stderr and "out/points/" in res.stderr, res.stderr
    listing = (tmp_path / "listing.txt").read_text().split()
    assert "out" in listing and not [n for n in listing if n.endswith(".tmp")], listing


def _recording(path: Path, complete: bool = True, **extra: object) -> None:
    from tierlab.recording import RecordingWriter

    with RecordingWriter(path) as w:
        n = 64
        w.append_samples(
            time_ns=np.arange(n, dtype=np.uint64) * 1000,
            tid=np.ones(n, dtype=np.uint32),
            cpu=np.zeros(n, dtype=np.uint32),
            addr=0x7F0000000000 + np.arange(n, dtype=np.uint64) * 4096,
            ip=np.zeros(n, dtype=np.uint64),
            weight=np.zeros(n, dtype=np.uint64),
            data_src=np.zeros(n, dtype=np.uint64),
            event=["mem-loads"] * n,
            drain=np.arange(n, dtype=np.uint64) // 8,
        )
        w.append_mappings(
            time_ns=[0],
            event=["map"],
            start=[0x7F0000000000],
            length=[64 * 4096],
            name=["[anon]"],
        )
    if not complete:
        meta = json.loads((path / "meta.json").read_text())
        meta["complete"] = False
        (path / "meta.json").write_text(json.dumps(meta))


def test_an_incomplete_recording_is_viewed_saying_so(tmp_path: Path) -> None:
    rec = tmp_path / "rec"
    _recording(rec, complete=False)
    res = cli("view", rec, "-o", tmp_path / "v")
    assert res.returncode == 0, res.stderr
    assert "incomplete" in res.stderr
    page = (tmp_path / "v" / "index.html").read_text()
    assert "This recording is incomplete" in page


# -- silent accepts ----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["raw", "csv", "oracle-general", "lackey"])
def test_a_non_canonical_address_is_refused_at_import(tmp_path: Path, fmt: str) -> None:
    bad = 0x7F0000001000 | (1 << 52)  # a flipped bit above the 48 address bits
    if fmt == "raw":
        trace = tmp_path / "t7.bin"
        trace.write_bytes(struct.pack("<QQQ", 0x7F0000000000, bad, 0x7F0000002000))
        where = "record 1"
    elif fmt == "csv":
        trace = tmp_path / "t.csv"
        trace.write_text(f"tid,time,addr,kind\n1,0,{0x7F0000000000},0\n1,1,{bad},1\n")
        where = "record 3"  # (the line)
    elif fmt == "oracle-general":
        trace = tmp_path / "t.oracle"
        trace.write_bytes(struct.pack("<IQIhHxxxx", 0, (1 << 44) + 1, 1, 0, 0))
        where = "record 0"
    else:
        trace = tmp_path / "t.lackey"
        trace.write_text(f"==1== Lackey\nI  04001000,3\n L {0x7F0000000000:08x},8\n S {bad:x},8\n")
        where = "access 2"
    res = cli("import", fmt, trace, "-o", tmp_path / "r")
    err = assert_user_error(res)
    assert str(trace) in err and where in err, err
    assert "canonical" in err or "47-bit" in err, err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("fmt", ["raw", "oracle-general", "lackey"])
def test_an_empty_trace_is_refused(tmp_path: Path, fmt: str) -> None:
    trace = tmp_path / ("t1.bin" if fmt == "raw" else "t.trace")
    if fmt == "lackey":
        trace.write_text("==12== Lackey, an example Valgrind tool\n==12== Command: ./x\n")
    else:
        trace.write_bytes(b"")
    err = assert_user_error(cli("import", fmt, trace, "-o", tmp_path / "r"))
    assert (str(trace) in err and "no accesses" in err) or "no requests" in err, err
    assert not (tmp_path / "r").exists()


def test_a_duplicated_part_is_refused(tmp_path: Path) -> None:
    from tierlab.recording import Recording, RecordingError

    rec = tmp_path / "rec"
    _recording(rec)
    parts = rec / "samples"
    shutil.copy(parts / "part-00000.parquet", parts / "part-00001.parquet")
    with pytest.raises(RecordingError, match="counts 64"):
        Recording.open(rec).samples()
    err = assert_user_error(cli("view", rec, "--json"))
    assert "part" in err and "meta.json" in err


def test_a_garbage_regions_table_fails_view(tmp_path: Path) -> None:
    import pyarrow as pa

    from tierlab.recording.schema import arrow_schemas

    rec = tmp_path / "rec"
    _recording(rec)
    schema = arrow_schemas()["regions"]
    cols = {f.name: pa.array([5, 1], f.type) if f.name in ("start", "time_ns") else None
            for f in schema}  # fmt: skip
    cols = {n: (c if c is not None else pa.array([0, 0], schema.field(n).type))
            for n, c in cols.items()}  # fmt: skip
    (rec / "regions").mkdir()
    pq.write_table(pa.table(cols, schema=schema), rec / "regions" / "part-00000.parquet")
    meta = json.loads((rec / "meta.json").read_text())
    meta["tables"]["regions"] = 2
    (rec / "meta.json").write_text(json.dumps(meta))
    err = assert_user_error(cli("view", rec, "--json"))
    assert "regions" in err and "row 0" in err, err


@pytest.mark.parametrize(
    ("start", "length", "field"),
    [(0, 2**64 - 1, "length"), (8192, 2**64 - 4096, "length"), (0x7F0000000123, 4096, "start")],
)
def test_a_plan_mapping_past_the_address_space_or_unaligned_is_refused(
    tmp_path: Path, start: int, length: int, field: str
) -> None:
    from tierlab.place import PlaceError
    from tierlab.place.plan import load

    rec = tmp_path / "rec"
    _recording(rec)
    plan = tmp_path / "plan.json"
    assert cli("place", "plan", rec, "-o", plan, "--nodes", "0,1").returncode == 0
    doc = json.loads(plan.read_text())
    doc["mappings"][0]["start"], doc["mappings"][0]["length"] = start, length
    doc["pages"] = []
    plan.write_text(json.dumps(doc))
    with pytest.raises(PlaceError, match=rf"mappings\[0\]\.{field}"):
        load(plan)


def test_points_on_a_scenario_without_sweep_points_is_refused() -> None:
    err = assert_user_error(cli("run", "demo", *SHORT, "--points", "x"))
    assert "--points" in err and "no sweep points" in err


def test_an_error_quotes_a_piece_of_a_long_line(tmp_path: Path) -> None:
    cfg = tmp_path / "huge.cfg"
    cfg.write_text("#regions\na, 4096\n\n#phases\nphase\n100\na, 0, 4096, " + "9" * 5_000_000)
    res = cli("run", f"masim:{cfg}")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert str(cfg) in res.stderr and len(res.stderr) < 3000, len(res.stderr)


def test_the_same_run_writes_the_same_svg(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        assert cli("run", "demo", *SHORT, "--out", out).returncode == 0
    assert (a / "heatmap.svg").read_bytes() == (b / "heatmap.svg").read_bytes()


# -- outputs that misled -----------------------------------------------------------------------


def _tiering_record(policy: str, kind: str, run_time_s: float) -> TieringRecord:
    from tierlab.tiering import TieringRecord

    nan = math.nan
    return TieringRecord(
        policy, kind, "-", nan, nan, run_time_s, nan, nan, nan, nan, nan, nan, nan, 0, 0, 0, 0.1
    )


def test_records_json_has_no_bare_nan(tmp_path: Path) -> None:
    from tierlab.tiering import TieringSweep, write

    rec = _tiering_record("none", "none", 1.0)
    assert math.isnan(rec.share_of_optimum)
    write(TieringSweep("s", records=[rec]), tmp_path)
    text = (tmp_path / "records.json").read_text()

    def refuse(name: str) -> None:
        raise AssertionError(f"bare {name} in records.json")

    doc = json.loads(text, parse_constant=refuse)
    assert doc[0]["share_of_optimum"] is None


def test_a_pte_scan_longer_than_the_run_says_no_scan_ran(tmp_path: Path) -> None:
    spec = tmp_path / "pte.toml"
    spec.write_text(
        'name = "pte-long"\nduration = "200ms"\nwindow = "100ms"\n[workload]\n'
        'kind = "uniform"\nfootprint = "8MiB"\n[[telemetry]]\nkind = "pte-scan"\n'
        'interval = "10s"\n'
    )
    res = tierlab("telemetry", spec, "--no-baseline")
    assert res.returncode == 0, res.stderr
    assert "no scan ran" in res.stdout
    doc = cli("telemetry", spec, "--no-baseline", "--json").json()
    figures = doc["techniques"]["pte-scan"]
    assert figures["mean_precision"] is None and figures["mean_recall"] is None
    assert "no scan ran" in figures["note"]


def _trace_recording(tmp_path: Path) -> Path:
    trace = tmp_path / "t3.bin"
    rng = np.random.default_rng(0)
    addr = 0x7F0000000000 + rng.integers(0, 256, 20_000, dtype=np.uint64) * 4096
    addr[:5000] = 0x7F0000000000  # one page far hotter than the rest
    addr.astype("<u8").tofile(trace)
    rec = tmp_path / "rec"
    assert cli("import", "raw", trace, "-o", rec).returncode == 0
    return rec


def test_the_view_page_of_a_trace_speaks_of_accesses(tmp_path: Path) -> None:
    from tierlab.recording import Recording
    from tierlab.view.analysis import analyze
    from tierlab.view.render import heatmap_spec, histogram_spec

    rec = _trace_recording(tmp_path)
    view = analyze(Recording.open(rec))
    assert view.time_unit == "accesses"
    v = view.mappings[0]
    heat = heatmap_spec(v, view.points, view.time_unit)
    assert heat["layout"]["xaxis"]["title"]["text"] == "accesses of the thread (millions)"
    # Counts per page up to 5,000: log-spaced bins on a log axis, as the PNG.
    hist = histogram_spec(v, view.points)
    assert hist["layout"]["xaxis"]["type"] == "log"
    assert len(hist["data"][0]["x"]) < 45
    assert sum(hist["data"][0]["y"]) == v.pages_touched
    out = tmp_path / "v"
    assert cli("view", rec, "-o", out).returncode == 0
    page = (out / "index.html").read_text()
    assert "20,000 accesses" in page  # the duration, in accesses (not "ms")
    # A full trace has no drains, PMU or throttling: none of those rows.
    for row in ("time between drains", "samples lost by the PMU", "throttled"):
        assert row not in page, row


def test_per_core_averages_are_whole_and_labelled() -> None:
    import io

    from rich.console import Console

    from tierlab.policies import render_records

    buf = io.StringIO()
    render_records(
        [{"label": "p", "policy": "fifo", "page_faults": 49514.5, "dtlb_misses": 3.25}],
        Console(file=buf, width=200),
        "cmcp-replay",
    )
    text = buf.getvalue()
    assert ("49514.5" not in text and "49,514" in text) or "49,515" in text, text
    assert "page faults per core" in text


def test_a_plan_of_a_trace_does_not_print_pid_none(tmp_path: Path) -> None:
    from tierlab.recording import RecordingWriter

    # A trace names its program (`tierlab trace` writes its argv) but no process id.
    rec = tmp_path / "rec"
    with RecordingWriter(rec, parameters={"target": {"argv": ["./Main", "8"]}}) as w:
        n = 5000
        w.append_accesses(
            time_ns=np.arange(n, dtype=np.uint64),
            tid=np.ones(n, dtype=np.uint32),
            addr=0x7F0000000000 + (np.arange(n, dtype=np.uint64) % 64) * 4096,
            kind=np.zeros(n, dtype=np.uint8),
        )
    res = tierlab(
        "place", "plan", rec, "-o", tmp_path / "plan.json", "--policy", "hot-fast",
        "--fast-node", "0", "--fast-capacity", "64KiB", "--slow-node", "1",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "pid None" not in res.stdout
    assert "`./Main 8`" in res.stdout


def test_a_share_of_the_optimum_by_run_time_is_explained() -> None:
    import io

    from rich.console import Console

    from tierlab.tiering import TieringKind, TieringSweep

    base = _tiering_record("none", "none", 1.0)
    slow = _tiering_record("x", "hemem", 2.0)
    slow.share_of_optimum = -5.464
    buf = io.StringIO()
    TieringKind().render(
        TieringSweep("s", records=[base, slow]), Console(file=buf, width=300), "trace"
    )
    text = buf.getvalue()
    assert "-546.4% *" in text
    assert "no request throughput" in text and "run_time_s" in text


# -- memory bounded by the samples' count ------------------------------------------------------

PEBS_RUN = """name = "pebs-mem"
window = "100ms"
[workload]
kind = "uniform"
footprint = "64MiB"
[[telemetry]]
kind = "pebs"
period = 64
"""


def test_memory_per_sample_is_a_few_bytes(tmp_path: Path) -> None:
    """A run with PEBS holds its samples compactly (about 9 bytes each, beside the 8 the
    technique keeps while it runs): peak RSS grows by well under 60 bytes a sample (it was
    ~350 with --json). Writing them (--out) streams them in chunks; its figures against the
    sample count are in docs/benchmarks.md."""
    from test_scale import run_measured

    spec = tmp_path / "pebs.toml"
    spec.write_text(PEBS_RUN)
    peaks, samples = {}, {}
    for duration in ("0.5s", "2.5s"):
        code, out, err, peak_kib = run_measured(
            [sys.executable, "-m", "tierlab", "run", str(spec), "--set",
             f'duration="{duration}"', "--json"],
            timeout=300,
        )  # fmt: skip
        assert code == 0, err
        samples[duration] = json.loads(out)["telemetry"]["pebs"]["samples"]
        peaks[duration] = peak_kib * 1024
    more = samples["2.5s"] - samples["0.5s"]
    assert more > 200_000, samples
    per_sample = (peaks["2.5s"] - peaks["0.5s"]) / more
    assert per_sample < 60, f"{per_sample:.0f} bytes of peak RSS per sample ({peaks}, {samples})"


def test_samples_written_in_chunks_are_the_samples(tmp_path: Path) -> None:
    """The chunked writer gives the same table as the rows the engine took."""
    import tierlab as tl
    from tierlab import sampleset
    from tierlab.recording import Recording

    spec = tmp_path / "pebs.toml"
    spec.write_text(PEBS_RUN.replace("period = 64", "period = 997"))
    r = tl.run(spec, duration="300ms")
    s = r.samples["pebs"]
    assert s.rows > 1000
    out = tmp_path / "out"
    from tierlab.reporters.samples import write_sample_recordings

    old = sampleset.CHUNK_ROWS
    sampleset.CHUNK_ROWS = 333  # many chunks, one not full
    try:
        write_sample_recordings(r, out)
    finally:
        sampleset.CHUNK_ROWS = old
    rec = Recording.open(out / "samples-pebs")
    table = rec.samples()
    assert len(rec.parts("samples")) == -(-s.rows // 333)
    for name in ("time_ns", "cpu", "addr", "drain", "event"):
        assert list(table[name]) == list(s[name]), name
    drains = rec.drains()
    assert int(drains["records"].sum()) == s.rows
    assert list(drains["drain"]) == sorted(set(s["drain"].tolist()))


def test_figures_drawn_in_workers_are_the_serial_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The view draws its mappings' figures in worker processes: the same files, byte for
    byte (SVG), as drawn one after the other."""
    from tierlab.recording import Recording, RecordingWriter
    from tierlab.view import render
    from tierlab.view.analysis import analyze

    rec = tmp_path / "rec"
    starts = [0x7F0000000000 + k * (1 << 30) for k in range(2)]
    with RecordingWriter(rec) as w:
        n = 400
        addr = np.concatenate([s + (np.arange(n, dtype=np.uint64) % 50) * 4096 for s in starts])
        m = addr.size
        w.append_samples(
            time_ns=np.arange(m, dtype=np.uint64) * 1000,
            tid=np.ones(m, dtype=np.uint32),
            cpu=np.zeros(m, dtype=np.uint32),
            addr=addr,
            ip=np.zeros(m, dtype=np.uint64),
            weight=np.zeros(m, dtype=np.uint64),
            data_src=np.zeros(m, dtype=np.uint64),
            event=["mem-loads"] * m,
            drain=np.arange(m, dtype=np.uint64) // 16,
        )
        w.append_mappings(
            time_ns=[0] * 2, event=["map"] * 2, start=starts, length=[50 * 4096] * 2,
            name=["m0", "m1"],
        )  # fmt: skip
    outs = {}
    for label, least in (("serial", 10**9), ("workers", 1)):
        monkeypatch.setattr(render, "PARALLEL_MIN_MAPPINGS", least)
        outs[label] = tmp_path / label
        render.write(analyze(Recording.open(rec)), outs[label], images=True)
    names = sorted(p.name for p in outs["serial"].iterdir())
    assert names == sorted(p.name for p in outs["workers"].iterdir())
    assert len([n for n in names if n.startswith("mapping-")]) == 2 * 4
    for name in names:
        if name.endswith(".svg"):
            assert (outs["serial"] / name).read_bytes() == (outs["workers"] / name).read_bytes()
