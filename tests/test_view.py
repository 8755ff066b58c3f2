"""`tierlab view` on recordings built here with exact contents (the shape a simulated PEBS run
writes: samples + drains + mappings), and the mapping history rules."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import assert_user_error, cli, tierlab
from tierlab.recording import RecordingWriter
from tierlab.view import history

PAGE = 4096
A = 0x7F00_0000_0000
B = 0x7F10_0000_0000


def _samples(t, addr, drain, tid=1, cpu=0, event="pebs-model"):
    n = len(addr)
    return {
        "time_ns": np.asarray(t, dtype=np.uint64),
        "tid": np.full(n, tid, dtype=np.uint32),
        "cpu": np.full(n, cpu, dtype=np.uint32),
        "addr": np.asarray(addr, dtype=np.uint64),
        "ip": np.zeros(n, dtype=np.uint64),
        "weight": np.zeros(n, dtype=np.uint64),
        "data_src": np.zeros(n, dtype=np.uint64),
        "event": [event] * n,
        "drain": np.asarray(drain, dtype=np.uint64),
    }


@pytest.fixture()
def simulated(tmp_path: Path) -> Path:
    """Two CPUs, 10 drains each alternating; mapping A (64 pages) sampled page p (p+1) times
    over the drains; mapping B (16 pages) unmapped at t=500: later samples there are in no
    mapping; one sample outside everything."""
    rec = tmp_path / "sim"
    with RecordingWriter(rec, source="tierlab-sim test") as w:
        w.append_mappings(
            time_ns=[0, 0, 500],
            event=["map", "map", "unmap"],
            start=[A, B, B],
            length=[64 * PAGE, 16 * PAGE, 16 * PAGE],
            name=["a", "b", "b"],
        )
        t, addr, drain = [], [], []
        for p in range(64):
            for k in range(p + 1):
                d = (p + k) % 20
                t.append(d * 50 + 1)
                addr.append(A + p * PAGE + 8 * k)
                drain.append(d)
        w.append_samples(_samples(t, addr, drain))
        # B: 3 samples before its unmap (drains 2, 4, 8), 2 after (drains 12, 16) -> dropped.
        w.append_samples(_samples([101, 201, 401, 601, 801], [B] * 5, [2, 4, 8, 12, 16], tid=2))
        w.append_samples(_samples([5], [0x1000], [0], tid=3))
        w.append_drains(
            time_ns=[d * 50 + 40 for d in range(20)],
            cpu=[d % 2 for d in range(20)],
            drain=list(range(20)),
            records=[0] * 20,
        )
    return rec


def test_view_numbers(simulated: Path) -> None:
    res = tierlab("view", simulated, "--json")
    assert res.returncode == 0, res.stderr
    v = res.json()
    assert v["points"] == "samples"
    t = v["totals"]
    n_a = sum(p + 1 for p in range(64))
    assert t["samples"] == n_a + 5 + 1
    assert t["assigned"] == n_a + 3
    assert t["unassigned"] == 3  # two in B after its unmap, one outside every mapping
    assert t["drains"] == 20
    # Drains alternate CPUs: each CPU drains every 100 ns.
    assert t["drain_interval"]["count"] == 18
    assert t["drain_interval"]["mean_ns"] == pytest.approx(100.0)
    a, b = sorted(v["mappings"], key=lambda m: m["start"])
    assert (a["name"], a["pages"], a["samples"], a["pages_touched"]) == ("a", 64, n_a, 64)
    assert a["histogram"] == {"samples_per_page": list(range(1, 65)), "pages": [1] * 64}
    assert a["heatmap"] == {
        "x": "drain",
        "columns": 20,
        "rows": 16,
        "block_pages": 4,
        "drains_per_column": 1,
    }
    assert (b["samples"], b["pages_touched"], b["threads"]) == (3, 1, 1)
    assert b["unmap_time_ns"] == 500
    assert set(a) >= {"start", "length", "samples", "pages_touched"}
    assert set(t) >= {"samples", "lost", "drains"}


def test_view_files_and_html(simulated: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ("view", simulated, "-o", out, "--group", "8", "--x", "time", "--bins", "10")
    # By default one page (and its numbers), nothing else.
    res = tierlab(*args)
    assert res.returncode == 0, res.stderr
    assert "wrote 2 files" in res.stdout
    assert sorted(p.name for p in out.iterdir()) == ["index.html", "view.json"]
    # Every figure's static picture is in the page, with its words.
    html = (out / "index.html").read_text()
    assert html.count("class='static-figure'") == 6
    assert "blocks of 8 pages" in html.split("id='figure-spec-")[0]
    # With --images, every figure as PNG and SVG too.
    res = tierlab(*args, "--images")
    assert res.returncode == 0, res.stderr
    for name in (
        "index.html",
        "view.json",
        "drain-intervals.png",
        "drain-intervals.svg",
        "pages-touched.png",
        "pages-touched.svg",
    ):
        assert (out / name).stat().st_size > 0, name
    pngs = sorted(p.name for p in out.glob("mapping-*.png"))
    assert pngs == [
        "mapping-0-heatmap.png",
        "mapping-0-histogram.png",
        "mapping-1-heatmap.png",
        "mapping-1-histogram.png",
    ]
    assert (out / "mapping-0-heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The page is interactive: one Plotly figure per plot (pages touched, drain intervals,
    # a heatmap and a histogram per mapping), its data inline, plotly.js embedded, no URL
    # to fetch anything from.
    html = (out / "index.html").read_text()
    specs = re.findall(r"<script type='application/json' id='figure-spec-\d+'>(.*?)</script>", html)
    assert len(specs) == 6
    kinds = [json.loads(s)["data"][0]["type"] for s in specs]
    assert kinds == ["bar", "bar", "heatmap", "bar", "heatmap", "bar"]
    assert "id='plotly-gz'" in html and "cdn." not in html and "https://" not in html
    assert "Contents" in html
    v = pd.read_json(out / "view.json", typ="series")
    heat = v["mappings"][0]["heatmap"]
    assert (heat["x"], heat["columns"], heat["block_pages"]) == ("time", 10, 8)
    # The default output directory sits beside the recording (drawn with one mapping: the
    # figures were checked above, the directory is what is checked here).
    res = tierlab("view", simulated, "--max-mappings", "1")
    assert res.returncode == 0, res.stderr
    assert (simulated.parent / "sim.view" / "index.html").is_file()


def test_view_options(simulated: Path) -> None:
    v = tierlab("view", simulated, "--json", "--min-mapping", "128KiB", "--group", "1").json()
    assert [m["name"] for m in v["mappings"]] == ["a"]
    assert v["mappings"][0]["heatmap"]["rows"] == 64
    v = tierlab("view", simulated, "--json", "--max-mappings", "1").json()
    assert [m["name"] for m in v["mappings"]] == ["a"]


def test_many_drains_are_merged_into_columns(tmp_path: Path) -> None:
    rec = tmp_path / "r"
    n = 1500
    with RecordingWriter(rec) as w:
        w.append_mappings(time_ns=[0], event=["map"], start=[A], length=[1 << 30], name=["big"])
        w.append_samples(_samples(np.arange(n), A + np.arange(n) * PAGE * 100, np.arange(n)))
        w.append_drains(
            time_ns=np.arange(n), cpu=np.zeros(n), drain=np.arange(n), records=np.ones(n)
        )
    m = tierlab("view", rec, "--json").json()["mappings"][0]
    assert m["heatmap"]["drains_per_column"] == 3
    assert m["heatmap"]["columns"] == 500
    assert m["heatmap"]["rows"] <= 512  # 262144 pages in blocks large enough
    assert m["pages"] == 262144 and m["pages_touched"] == n


def test_empty_and_missing_recordings(tmp_path: Path) -> None:
    rec = tmp_path / "empty"
    with RecordingWriter(rec):
        pass
    res = tierlab("view", rec, "-o", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    v = tierlab("view", rec, "--json").json()
    assert v["mappings"] == [] and v["totals"]["samples"] == 0
    err = assert_user_error(cli("view", tmp_path / "nope"))
    assert "no such recording" in err
    err = assert_user_error(cli("view", rec, "--group", "0"))
    assert "--group" in err


def _events(rows):
    return pd.DataFrame(rows, columns=["time_ns", "event", "start", "length", "name"])


def test_history_split_and_replace() -> None:
    maps = history.build(
        _events(
            [
                (0, "map", 0x10000, 0x8000, "x"),
                (10, "unmap", 0x12000, 0x2000, ""),  # a hole in the middle: x is split
                (20, "map", 0x14000, 0x1000, "y"),  # replaces part of x at t=20
            ]
        )
    )
    assert [m.name for m in maps] == ["x", "y"]
    addr = np.array([0x12000, 0x12000, 0x14000, 0x14000, 0x17000, 0x30000], dtype=np.uint64)
    t = np.array([5, 15, 15, 25, 25, 25], dtype=np.uint64)
    assert history.assign(maps, t, addr).tolist() == [0, -1, 0, 1, 0, -1]
    assert maps[0].unmap_time_ns is None  # parts of x live on


def test_history_order_of_equal_times_and_full_unmap() -> None:
    maps = history.build(
        _events([(7, "map", 0x1000, 0x1000, "x"), (9, "unmap", 0x1000, 0x1000, "")])
    )
    assert maps[0].unmap_time_ns == 9
    owner = history.assign(
        maps, np.array([7, 8, 9], dtype=np.uint64), np.full(3, 0x1800, dtype=np.uint64)
    )
    assert owner.tolist() == [0, 0, -1]


def test_derived_regions() -> None:
    addr = np.array([0x1000, 0x3000, 0x1000 + (2 << 20), 0x10_0000_0000], dtype=np.uint64)
    regions = history.derive(addr)
    assert [(r.start, r.length) for r in regions] == [
        (0x1000, 0x3000),
        (0x1000 + (2 << 20), PAGE),
        (0x10_0000_0000, PAGE),
    ]


def test_history_growth_is_one_mapping() -> None:
    """A map of the same name over or beside one live mapping extends it (a heap, a stack, a
    file's segments); `[heap]` over an anonymous mapping at the same start too; an unmap
    before the map (a replacement) makes a new mapping."""
    maps = history.build(
        _events(
            [
                (0, "map", 0x10000, 0x1000, ""),  # the heap's first extension, as perf names it
                (5, "map", 0x10000, 0x3000, "[heap]"),
                (9, "map", 0x10000, 0x5000, "[heap]"),
                (1, "map", 0x7F000, 0x1000, "[stack]"),
                (6, "map", 0x7E000, 0x2000, "[stack]"),  # grew down
                (2, "map", 0x40000, 0x2000, "/lib.so"),
                (3, "map", 0x42000, 0x1000, "/lib.so"),  # the next segment, beside it
                (4, "map", 0x50000, 0x2000, "[anon]"),
                (7, "unmap", 0x50000, 0x2000, "[anon]"),
                (7, "map", 0x50000, 0x3000, "[anon]"),  # replaced, not grown
            ]
        )
    )
    assert [(m.name, m.start, m.length) for m in maps] == [
        ("[heap]", 0x10000, 0x5000),
        ("[stack]", 0x7E000, 0x2000),
        ("/lib.so", 0x40000, 0x3000),
        ("[anon]", 0x50000, 0x2000),
        ("[anon]", 0x50000, 0x3000),
    ]
    addr = np.array([0x10000, 0x14000, 0x14000, 0x7E000, 0x42000, 0x50000], dtype=np.uint64)
    t = np.array([1, 8, 9, 7, 3, 8], dtype=np.uint64)
    assert history.assign(maps, t, addr).tolist() == [0, -1, 0, 1, 2, 4]


def test_view_of_an_incomplete_recording_says_so(tmp_path: Path) -> None:
    # A recording whose recorder was killed (complete: false) was viewed without a word.
    w = RecordingWriter(tmp_path / "rec", source="test")
    w.append_mappings(
        time_ns=[0], event=["map"], start=[0x50000000], length=[1 << 22], name=["heap"]
    )
    w.append_accesses(
        time_ns=np.arange(100), tid=np.zeros(100), addr=0x50000000 + np.arange(100) * 64,
        kind=np.zeros(100),
    )  # fmt: skip
    w.flush()  # never closed, as after a SIGKILL
    res = tierlab("view", tmp_path / "rec", "--json")
    assert res.returncode == 0, res.stderr
    assert "incomplete" in res.stderr, res.stderr
    json.loads(res.stdout)  # --json output stays clean


@pytest.mark.parametrize("with_mappings", [True, False])
def test_view_of_samples_streams_in_batches(tmp_path: Path, with_mappings: bool) -> None:
    """A sampled recording is read a batch at a time (memory for a batch, whatever the number
    of samples): any batch size gives the same view, THP page sizes (a fault alone in its
    2 MiB block maps the block: a count over the whole recording), memory levels and symbols
    included."""
    from tierlab.recording import Recording
    from tierlab.view import analysis

    thp = 2 << 20
    base = 0x7F00_0000_0000  # 2 MiB aligned
    rec = tmp_path / "rec"
    rng = np.random.default_rng(7)
    with RecordingWriter(rec, source="test") as w:
        if with_mappings:
            w.append_mappings(
                time_ns=[0, 0], event=["map", "map"], start=[base, B], length=[8 * thp, 64 * PAGE],
                name=["[anon]", "[heap]"],
            )  # fmt: skip
        # Block 0: one fault (a whole huge page); block 1: three faults (base pages); block 2:
        # a fault, then (much later, in another batch) a second one: not alone.
        faults = [base + 5, base + thp, base + thp + PAGE, base + thp + 2 * PAGE, base + 2 * thp]
        late = [base + 2 * thp + 3 * PAGE]
        pebs = (B + rng.integers(0, 64, 200) * PAGE).tolist()
        addr = faults + pebs + late
        n = len(addr)
        s = _samples(range(n), addr, np.arange(n) // 10, event="pebs-model")
        s["event"] = ["page-faults"] * len(faults) + ["pebs-model"] * len(pebs) + ["page-faults"]
        s["tid"] = (np.arange(n) % 3 + 1).astype(np.uint32)
        s["ip"] = (0x40_0000 + (np.arange(n) % 5) * 16).astype(np.uint64)
        s["data_src"] = np.where(np.arange(n) % 2 == 0, 0x68100142, 0x44100142).astype(np.uint64)
        w.append_samples(s)
        w.update_meta(accounting={
            "thp_size": thp,
            "page_sizes": [{"start": base, "end": base + 8 * thp, "name": "[anon]",
                            "kernel_page_size": PAGE, "anon_huge_bytes": 3 * thp, "time_ns": 0}],
        })  # fmt: skip

    def view(rows: int) -> tuple[dict, list[np.ndarray]]:
        v = analysis.analyze(Recording.open(rec), batch_rows=rows)
        return v.to_json(), [m.counts for m in v.mappings]

    whole, counts = view(1 << 20)
    for rows in (1, 3, 64):
        j, c = view(rows)
        assert j == whole, rows
        assert all(np.array_equal(x, y) for x, y in zip(c, counts, strict=True)), rows
    t = whole["totals"]
    assert t["samples"] == 206 and t["threads"] == 3
    assert t["huge_page_samples"] == 1  # only block 0's fault was alone in its block
    assert sum(t["memory_levels"].values()) == 206
    # Block 0 whole (2 MiB) + block 1's three base pages + block 2's two base pages (one
    # mapping, or the regions derived from the data, clipped to the pages they span).
    near = [m for m in whole["mappings"] if base <= m["start"] < base + 8 * thp]
    assert sum(m["bytes_touched"] for m in near) == (thp if with_mappings else PAGE) + 5 * PAGE
    assert whole["symbols"] and sum(r["samples"] for r in whole["symbols"]) == 206
