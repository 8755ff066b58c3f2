"""The fuzz harness of issue 18: Hypothesis property tests of every reader on the
Python/live side (recordings, the mapping history, the viewer, placement plans, the perf
script, McKernel and damo importers) and of the native ones Python calls (the streaming view
of full traces, the raw, CSV, oracleGeneral and lackey trace importers), run for a bounded
number of examples in `make test`.

Property: whatever the input, a reader either returns a valid result or raises its own
error type (`RecordingError`, `PlaceError`, `ImportError_`, the native `TraceFormatError`)
with a message naming the file;
never another exception. The mapping history is also checked against a page-by-page
reference model.

`TIERLAB_FUZZ_EXAMPLES=N` runs N examples per test instead of the default (a few seconds
each); the corpus of the issue's cases is in tests/test_hostile.py, and each test here
starts from a valid input that the strategies mutate.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO
from tierlab.live import imports
from tierlab.place import PlaceError
from tierlab.place.plan import PlanOptions, load, make_plan, save
from tierlab.recording import Recording, RecordingError, RecordingWriter
from tierlab.view import history, pagesize
from tierlab.view.analysis import ViewOptions, analyze

FIX = REPO / "tests" / "fixtures"
PAGE = 4096
EXAMPLES = int(os.environ.get("TIERLAB_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def _mutate(data: bytes, edits: list[tuple[int, int, int]]) -> bytes:
    """Apply (kind, position, value) edits: flip a bit, set a byte, cut, or duplicate."""
    b = bytearray(data)
    for kind, pos, value in edits:
        if not b:
            break
        pos %= len(b)
        if kind == 0:
            b[pos] ^= 1 << (value % 8)
        elif kind == 1:
            b[pos] = value % 256
        elif kind == 2:
            del b[pos : pos + 1 + value % 64]
        else:
            b[pos:pos] = b[pos : pos + 1 + value % 64]
    return bytes(b)


edits = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 2**31), st.integers(0, 2**16)), max_size=6
)


def _small_recording(path: Path) -> None:
    with RecordingWriter(path, source="fuzz") as w:
        w.append_mappings(
            time_ns=[0, 5],
            event=["map", "unmap"],
            start=[PAGE, PAGE],
            length=[8 * PAGE] * 2,
            name=["x", "x"],
        )
        w.append_samples(
            time_ns=np.arange(16),
            tid=np.ones(16),
            cpu=np.zeros(16),
            addr=PAGE + np.arange(16) * 512,
            ip=np.zeros(16),
            weight=np.zeros(16),
            data_src=np.zeros(16),
            event=["e"] * 16,
            drain=np.zeros(16),
        )
        w.append_accesses(time_ns=[1, 2], tid=[1, 1], addr=[PAGE, 2 * PAGE], kind=[0, 1])
        w.append_drains(time_ns=[3], cpu=[0], drain=[0], records=[16])


def _read_everything(path: Path) -> None:
    """Open and read every table, view and plan it: only the readers' own errors may come
    out."""
    try:
        rec = Recording.open(path)
        for table in ("accesses", "samples", "mappings", "drains", "regions"):
            rec.table(table)
        v = analyze(rec, ViewOptions(max_mappings=4))
        t = v.totals
        assert t["assigned"] + t["unassigned"] == t[v.points] or v.points == "regions"
    except RecordingError as e:
        assert str(path) in str(e)
        return
    with contextlib.suppress(PlaceError):
        make_plan(rec, PlanOptions(cpu_nodes={0: [0]}))


# -- recordings -----------------------------------------------------------------------------------


@FUZZ
@given(meta=json_values, keep=st.booleans())
def test_any_meta_json(meta, keep: bool) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "r"
        _small_recording(path)
        doc = json.loads((path / "meta.json").read_text())
        if keep and isinstance(meta, dict):
            doc.update(meta)  # the format's own fields stay valid; others vary
            meta = doc
        (path / "meta.json").write_text(json.dumps(meta, allow_nan=True))
        _read_everything(path)


def _trace_recording(path: Path) -> None:
    """A full trace (accesses, no samples): viewed by the native streaming aggregation."""
    n = 64
    with RecordingWriter(path, source="fuzz") as w:
        w.append_mappings(time_ns=[0], event=["map"], start=[PAGE], length=[16 * PAGE], name=["x"])
        w.append_accesses(
            time_ns=np.arange(n),
            tid=np.arange(n) % 3,
            addr=PAGE + np.arange(n) * 1000,
            kind=np.arange(n) % 2,
        )


@FUZZ
@given(table=st.sampled_from(["accesses", "mappings"]), ed=edits)
def test_mutated_full_trace_parts(table: str, ed) -> None:
    from tierlab import _native

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "r"
        _trace_recording(path)
        part = path / table / "part-00000.parquet"
        part.write_bytes(_mutate(part.read_bytes(), ed))
        _read_everything(path)
        try:  # the native reader on its own (as the replay workload uses it)
            _native.survey_accesses(str(path), 1 << 20)
        except _native.TraceFormatError as e:
            assert str(path) in str(e)


@FUZZ
@given(table=st.sampled_from(["samples", "mappings", "accesses", "drains"]), ed=edits)
def test_mutated_parquet_parts(table: str, ed) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "r"
        _small_recording(path)
        part = path / table / "part-00000.parquet"
        part.write_bytes(_mutate(part.read_bytes(), ed))
        _read_everything(path)


ints = st.integers(min_value=-(2**64), max_value=2**65)
column_values = st.one_of(
    st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.none(), max_size=6).map(
        lambda v: pa.array(v, pa.int64())
    ),
    st.lists(st.integers(min_value=0, max_value=2**64 - 1) | st.none(), max_size=6).map(
        lambda v: pa.array(v, pa.uint64())
    ),
    st.lists(st.text(max_size=6) | st.none(), max_size=6).map(lambda v: pa.array(v, pa.string())),
    st.lists(st.floats(allow_nan=True), max_size=6).map(lambda v: pa.array(v, pa.float64())),
    st.lists(st.sampled_from(["map", "unmap", "remap"]), max_size=6).map(
        lambda v: pa.array(v).dictionary_encode()
    ),
)


@FUZZ
@given(
    table=st.sampled_from(["samples", "mappings", "accesses", "drains", "regions"]),
    columns=st.dictionaries(
        st.sampled_from(
            [
                "time_ns",
                "tid",
                "cpu",
                "addr",
                "ip",
                "weight",
                "data_src",
                "event",
                "drain",
                "start",
                "length",
                "name",
                "kind",
                "records",
                "end_ns",
                "target",
                "end",
                "nr_accesses",
                "age",
                "other",
            ]
        ),
        column_values,
        max_size=10,
    ),
    n=st.integers(0, 6),
)
def test_parts_with_any_columns(table: str, columns, n: int) -> None:
    """Parts written by someone else, with any columns, types, nulls and values."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "r"
        _small_recording(path)
        (path / table).mkdir(exist_ok=True)
        cols = {k: v.slice(0, n) if len(v) >= n else v for k, v in columns.items()}
        lengths = {len(v) for v in cols.values()}
        if len(lengths) > 1:
            cols = {k: v.slice(0, min(lengths)) for k, v in cols.items()}
        pq.write_table(
            pa.table(cols) if cols else pa.table({"x": []}), path / table / "part-00000.parquet"
        )
        _read_everything(path)


@FUZZ
@given(
    names=st.lists(
        st.sampled_from(
            [
                "part-00000.parquet",
                "part-00001.parquet",
                "part-00003.parquet",
                "part-000001.parquet",
                "part-1.parquet",
                ".part-00002.parquet.tmp",
                "x.parquet",
                "README",
                "sub/",
            ]
        ),
        max_size=5,
        unique=True,
    )
)
def test_any_part_names(names) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "r"
        _small_recording(path)
        good = (path / "samples" / "part-00000.parquet").read_bytes()
        (path / "samples" / "part-00000.parquet").unlink()
        for name in names:
            if name.endswith("/"):
                (path / "samples" / name).mkdir()
            else:
                (path / "samples" / name).write_bytes(good)
        _read_everything(path)


# -- the mapping history, against a page-by-page model --------------------------------------------

event_rows = st.lists(
    st.tuples(
        st.integers(0, 12),  # time
        st.sampled_from(["map", "map", "unmap"]),
        st.integers(0, 20),  # first page
        st.integers(1, 6),  # pages
        st.sampled_from(["", "[anon]", "[heap]", "f", "g"]),
    ),
    max_size=14,
)


def _reference(rows, points):
    """Page-granular model of history.build + assign: for each point, the id of the mapping
    holding its page at its time (events at a time come before points at that time)."""
    anon = history.ANON_NAMES
    ev = sorted(enumerate(rows), key=lambda x: (x[1][0], x[0]))
    pages: dict[int, int] = {}
    names: list[str] = []
    starts: list[int] = []
    created: list[int] = []
    snapshots = []  # (time, pages dict) after the events of each time
    for _, (t, kind, first, n, name) in ev:
        lo, hi = first, first + n
        if kind == "map":
            touching = name not in anon
            ids = {pages[p] for p in range(lo, hi) if p in pages}
            if touching:  # a neighbour grows only when mapped earlier
                ids |= {pages[p] for p in (lo - 1, hi) if p in pages and created[pages[p]] < t}
            grown = False
            if len(ids) == 1:
                mid = ids.pop()
                same = names[mid] == name or (
                    name == "[heap]" and names[mid] in anon and starts[mid] == lo
                )
                if same:
                    names[mid] = name
                    starts[mid] = min(starts[mid], lo)
                    for p in range(lo, hi):
                        pages[p] = mid
                    grown = True
            if not grown:
                for p in range(lo, hi):
                    pages.pop(p, None)
                names.append(name)
                starts.append(lo)
                created.append(t)
                for p in range(lo, hi):
                    pages[p] = len(names) - 1
        else:
            for p in range(lo, hi):
                pages.pop(p, None)
        snapshots.append((t, dict(pages)))
    out = []
    for t, page in points:
        state: dict[int, int] = {}
        for st_t, snap in snapshots:
            if st_t <= t:
                state = snap
        out.append(state.get(page, -1))
    return out


@FUZZ
@given(
    rows=event_rows,
    points=st.lists(st.tuples(st.integers(0, 14), st.integers(0, 27)), max_size=20),
)
def test_history_matches_a_page_by_page_model(rows, points) -> None:
    frame = pd.DataFrame(
        [(t, k, p * PAGE, n * PAGE, name) for t, k, p, n, name in rows],
        columns=["time_ns", "event", "start", "length", "name"],
    )
    maps = history.build(frame)
    t = np.asarray([p[0] for p in points], dtype=np.uint64)
    addr = np.asarray([p[1] * PAGE + 100 for p in points], dtype=np.uint64)
    got = history.assign(maps, t, addr).tolist()
    assert got == _reference(rows, points), (rows, points)
    for m in maps:  # every piece lies inside its mapping's extent
        assert all(m.start <= lo < hi <= m.end for lo, hi, _, _ in m.segments)


@FUZZ
@given(
    obs=st.lists(
        st.fixed_dictionaries(
            {
                "start": st.integers(0, 2**40),
                "end": st.integers(0, 2**40),
                "kernel_page_size": st.sampled_from([0, 4096, 2 << 20, 1 << 30, 3]),
                "anon_huge_bytes": st.integers(-5, 2**31),
            }
        ),
        max_size=4,
    ),
    addr=st.lists(st.integers(0, 2**40), min_size=1, max_size=30),
    faults=st.booleans(),
)
def test_page_sizes_and_bytes_touched(obs, addr, faults) -> None:
    meta = {"accounting": {"page_sizes": obs}, "machine": {"page_size": 4096}}
    a = np.asarray(addr, dtype=np.uint64)
    ev = np.asarray(["page-faults" if faults else "x"] * a.size)
    sizes = pagesize.point_page_sizes(meta, a, ev)
    assert set(sizes.tolist()) <= {4096, 2 << 20, 1 << 30}
    lo, hi = int(a.min()), int(a.max()) + 1
    covered, units, huge = pagesize.touched_bytes(a, sizes, lo, hi)
    assert 0 < covered <= hi - lo + (1 << 30) and units >= 1 and 0 <= huge <= units
    assert covered <= hi - lo


# -- placement plans ----------------------------------------------------------------------------


def _plan_text() -> str:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "r"
        _small_recording(path)
        plan = make_plan(Recording.open(path), PlanOptions(cpu_nodes={0: [0]}, mappings="history"))
        save(plan, Path(d) / "p.json")
        return (Path(d) / "p.json").read_text()


PLAN = _plan_text()


@FUZZ
@given(doc=json_values)
def test_any_json_as_a_plan(doc) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "p.json"
        path.write_text(json.dumps(doc, allow_nan=True))
        try:
            load(path)
        except PlaceError as e:
            assert str(path) in str(e)


@FUZZ
@given(ed=edits)
def test_mutated_plans(ed) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "p.json"
        path.write_bytes(_mutate(PLAN.encode(), ed))
        try:
            plan = load(path)
        except PlaceError as e:
            assert str(path) in str(e)
            return
        save(plan, Path(d) / "again.json")  # what loads, saves and loads again
        assert len(load(Path(d) / "again.json")) == len(plan)


# -- importers ----------------------------------------------------------------------------------

PERF_LINES = [
    line
    for name in ("perf-script-mem-loads.txt", "perf-script-page-faults-ns.txt")
    for line in (FIX / name).read_text().splitlines()
]
TOKENS = [
    "abc",
    "-43",
    "zz",
    "0x",
    "",
    "[000]",
    "1:",
    "ffffffffffffffffffff",
    "12.5:",
    "|OP",
    "PERF_RECORD_MMAP2",
    "//anon",
    "\t",
    "9" * 30,
]


@FUZZ
@given(
    picks=st.lists(st.integers(0, len(PERF_LINES) - 1), min_size=1, max_size=8),
    changes=st.lists(
        st.tuples(st.integers(0, 7), st.integers(0, 40), st.sampled_from(TOKENS)), max_size=4
    ),
    raw=st.lists(st.text(max_size=60), max_size=2),
)
def test_perf_script_text(picks, changes, raw) -> None:
    lines = [PERF_LINES[i] for i in picks]
    for li, ti, tok in changes:
        words = lines[li % len(lines)].split(" ")
        words[ti % len(words)] = tok
        lines[li % len(lines)] = " ".join(words)
    lines += raw
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "in.txt"
        path.write_text("\n".join(lines) + "\n", errors="surrogateescape")
        try:
            res = imports.import_perf_script([path], Path(d) / "r")
        except imports.ImportError_ as e:
            assert str(path) in str(e)
            return
        s = Recording.open(res.path).samples()
        assert len(s) == res.counts["samples"]


@FUZZ
@given(
    words=st.lists(
        st.sampled_from([0, 1, 8, 4096, 2**63, 2**64 - 1, 2**64 - 1, 0x7F0000000000]), max_size=40
    ),
    tail=st.binary(max_size=7),
    rate=st.sampled_from([1e9, 1.0, 1e-300, 1e300, float("nan"), float("inf"), -1.0, 0.0]),
)
def test_mckernel_dumps(words, tail, rate) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "pebs.7"
        path.write_bytes(struct.pack(f"<{len(words)}Q", *words) + tail)
        try:
            imports.import_mckernel([path], Path(d) / "r", ticks_per_second=rate)
        except imports.ImportError_ as e:
            assert str(path) in str(e) or "ticks-per-second" in str(e)


@FUZZ
@given(doc=json_values, compress=st.booleans(), ed=edits)
def test_damo_records(doc, compress, ed) -> None:
    base = json.loads((FIX / "damo-record.json").read_text())
    data = json.dumps(doc if not isinstance(doc, dict) else [{**base[0], **doc}], allow_nan=True)
    raw = data.encode()
    raw = zlib.compress(raw) if compress else raw
    raw = _mutate(raw, ed)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "damo.data"
        path.write_bytes(raw)
        try:
            imports.import_damo([path], Path(d) / "r")
        except imports.ImportError_ as e:
            assert str(path) in str(e)


@FUZZ
@given(ed=edits)
def test_damo_binary(ed) -> None:
    raw = _mutate((FIX / "damo-record-v2.bin").read_bytes(), ed)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "damo.bin"
        path.write_bytes(raw)
        try:
            imports.import_damo([path], Path(d) / "r")
        except imports.ImportError_ as e:
            assert str(path) in str(e)


def _import_trace(fmt: str, files: list[Path], out: Path, **kw) -> None:
    """Import with the native trace importer: a recording the reader accepts, or
    `TraceFormatError` naming one of the files (or a side file beside them)."""
    from tierlab import _native

    try:
        c = _native.import_trace(fmt, [str(f) for f in files], str(out), **kw)
    except _native.TraceFormatError as e:
        assert str(files[0].parent) in str(e), str(e)
        # An error quotes a piece of its input, never a whole line of any length.
        assert len(str(e)) < 1000, len(str(e))
        return
    rec = Recording.open(out)
    acc = rec.accesses()
    assert len(acc) == c["accesses"]
    # Issue 38: nothing imports empty, and no address that is not canonical (bits 63-47
    # equal) gets past the import to fail only at replay.
    assert c["accesses"] > 0
    top = acc["addr"].to_numpy(dtype=np.uint64) >> np.uint64(47)
    assert bool(((top == 0) | (top == 0x1FFFF)).all()), hex(int(acc["addr"].max()))


TRACE_TOKENS = ["abc", "-1", "0x", "", "L", "S", "W", "9" * 25, "0xffffffffffffffffff", "256"]


@FUZZ
@given(
    changes=st.lists(
        st.tuples(st.integers(0, 10), st.integers(0, 5), st.sampled_from(TRACE_TOKENS)),
        max_size=4,
    ),
    raw=st.lists(st.text(max_size=40), max_size=2),
    sep=st.sampled_from([",", " "]),
)
def test_csv_traces(changes, raw, sep: str) -> None:
    lines = (FIX / "traces" / "trace.csv").read_text().splitlines()
    for li, fi, tok in changes:
        fields = lines[li % len(lines)].split(",")
        fields[fi % len(fields)] = tok
        lines[li % len(lines)] = ",".join(fields)
    lines += raw
    text = "\n".join(lines) + "\n"
    if sep == " ":
        text = text.replace(",", " ")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.csv"
        path.write_text(text, errors="surrogateescape")
        _import_trace("csv", [path], Path(d) / "r", sep=sep, with_size=True)


@FUZZ
@given(ed=edits, time=st.binary(max_size=48), size=st.booleans())
def test_raw_traces(ed, time: bytes, size: bool) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t101.bin"
        path.write_bytes(_mutate((FIX / "traces" / "raw" / "t101.bin").read_bytes(), ed))
        if time:
            (Path(d) / "t101.time").write_bytes(time)
        if size:
            (Path(d) / "t101.size").write_bytes(bytes(range(1, 9)))
        _import_trace("raw", [path], Path(d) / "r")


@FUZZ
@given(ed=edits, object_bytes=st.sampled_from([1, 64, 4096, 2**40, 2**63]))
def test_oracle_general_traces(ed, object_bytes: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.oracleGeneral.bin"
        raw = (FIX / "traces" / "trace.oracleGeneral.bin").read_bytes()
        path.write_bytes(_mutate(raw, ed))
        _import_trace("oracle-general", [path], Path(d) / "r", object_bytes=object_bytes)


@FUZZ
@given(ed=edits, raw=st.lists(st.text(max_size=40), max_size=3))
def test_lackey_logs(ed, raw) -> None:
    text = (FIX / "traces" / "lackey.log").read_bytes() + "\n".join(raw).encode(
        errors="surrogateescape"
    )
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "lackey.log"
        path.write_bytes(_mutate(text, ed))
        _import_trace("lackey", [path], Path(d) / "r")
