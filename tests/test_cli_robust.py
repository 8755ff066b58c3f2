"""Robustness of the command line against inputs a probe found mishandled: a recording named
`.` or `..`, addresses in the top page of the address space, the table of a generic sweep,
size units, non-positive counts of `tune`, `reproduce --dry-run` of unknown figures, a
directory given as a scenario."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, assert_user_error, cli, tierlab
from tierlab.view import history, pagesize

FIX = REPO / "tests" / "fixtures"
TOP_PAGE = 0xFFFF_FFFF_FFFF_F000


@pytest.fixture()
def perf_rec(tmp_path: Path) -> Path:
    rec = tmp_path / "rec"
    res = cli("import", "perf-script", FIX / "perf-script-mem-loads.txt", "-o", rec)
    assert res.returncode == 0, res.stderr
    return rec


# -- view: where its output goes ----------------------------------------------------------------


def test_view_of_dot_writes_beside_the_recording(
    perf_rec: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(perf_rec)
    res = cli("view", ".")
    assert res.returncode == 0, res.stderr
    assert (perf_rec.parent / "rec.view" / "index.html").is_file()


def test_view_of_dotdot_does_not_write_inside_the_recording(
    perf_rec: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inner = perf_rec / "samples"
    assert inner.is_dir()
    monkeypatch.chdir(inner)
    res = cli("view", "..")
    assert res.returncode == 0, res.stderr
    assert (perf_rec.parent / "rec.view" / "view.json").is_file()
    assert not list(inner.glob("*.view")), list(inner.iterdir())


def test_view_refuses_its_output_before_the_analysis(
    perf_rec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "notes"
    other.mkdir()
    (other / "mine.txt").write_text("keep me\n")
    from tierlab.view import analysis

    def fail(*_args: object, **_kw: object) -> None:
        raise AssertionError("the analysis ran before the output was checked")

    monkeypatch.setattr(analysis, "analyze", fail)
    err = assert_user_error(cli("view", perf_rec, "-o", other))
    assert "notes" in err and "refusing to replace it" in err
    assert (other / "mine.txt").read_text() == "keep me\n"


# -- the top page of the address space ----------------------------------------------------------


def _plan_hot_fast(rec: Path, plan: Path, fast_capacity: str) -> subprocess.CompletedProcess:
    """`tierlab place plan` of ``rec`` with hot-fast on node 0 (8 CPUs), into ``plan``."""
    return cli(
        "place", "plan", rec, "-o", plan, "--policy", "hot-fast", "--fast-node", "0",
        "--fast-capacity", fast_capacity, "--cpu-nodes", "0=0-7",
    )  # fmt: skip


def test_samples_at_the_last_address_are_viewed_and_planned(tmp_path: Path) -> None:
    text = (FIX / "perf-script-mem-loads.txt").read_text()
    assert "7f3a00001040" in text
    src = tmp_path / "top.txt"
    src.write_text(text.replace("7f3a00001040", "ffffffffffffffff", 1))
    rec = tmp_path / "pf1"
    assert cli("import", "perf-script", src, "-o", rec).returncode == 0
    res = cli("view", rec, "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["totals"]["unassigned"] == 0, doc["totals"]
    top = [m for m in doc["mappings"] if m["start"] == TOP_PAGE]
    assert len(top) == 1 and top[0]["length"] == 4096 and top[0]["samples"] == 1, top
    assert top[0]["bytes_touched"] == 4096
    assert cli("view", rec, "-o", tmp_path / "v").returncode == 0
    plan = tmp_path / "p.json"
    res = _plan_hot_fast(rec, plan, "1GiB")
    assert res.returncode == 0, res.stderr
    maps = json.loads(plan.read_text())["mappings"]
    assert {"start": TOP_PAGE, "length": 4096} in [
        {"start": m["start"], "length": m["length"]} for m in maps
    ], maps


def test_accesses_in_the_top_page_are_not_lost(tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text(
        "tid,time,addr,kind\n1,100,0x1000,r\n1,200,0xfffffffffffff000,r\n"
        "1,300,0xfffffffffffff008,w\n"
    )
    rec = tmp_path / "c1"
    assert cli("import", "csv", csv, "-o", rec).returncode == 0
    res = cli("view", rec, "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["totals"]["assigned"] == 3 and doc["totals"]["unassigned"] == 0, doc["totals"]
    top = [m for m in doc["mappings"] if m["start"] == TOP_PAGE]
    assert len(top) == 1 and top[0]["samples"] == 2 and top[0]["length"] == 4096, top


def test_history_handles_the_end_of_the_address_space() -> None:
    import pandas as pd

    ev = pd.DataFrame(
        {
            "time_ns": np.asarray([0], dtype=np.uint64),
            "event": ["map"],
            "start": np.asarray([TOP_PAGE - 4096], dtype=np.uint64),
            "length": np.asarray([8192], dtype=np.uint64),
            "name": ["top"],
        }
    )
    maps = history.build(ev)
    assert len(maps) == 1 and maps[0].end == 1 << 64
    addr = np.asarray([TOP_PAGE - 4096, TOP_PAGE, (1 << 64) - 1, 0x1000], dtype=np.uint64)
    owner = history.assign(maps, np.zeros(addr.size, dtype=np.uint64), addr)
    assert owner.tolist() == [0, 0, 0, -1]
    derived = history.from_runs([(0x1000, 0x2000), (TOP_PAGE, 0)])  # the native survey's wrap
    assert [(m.start, m.end) for m in derived] == [(0x1000, 0x2000), (TOP_PAGE, 1 << 64)]


def test_touched_bytes_of_the_top_page() -> None:
    addr = np.asarray([TOP_PAGE + 8, (1 << 64) - 1, TOP_PAGE - 4096], dtype=np.uint64)
    sizes = np.full(addr.size, 4096, dtype=np.uint64)
    assert pagesize.touched_bytes(addr, sizes, TOP_PAGE - 4096, 1 << 64) == (8192, 2, 0)
    assert pagesize.touched_bytes(addr, sizes, TOP_PAGE, 1 << 64) == (4096, 2, 0)
    # Overlapping pages of different sizes are counted once, clipped to the range.
    big = np.asarray([0x200000, 0x201000], dtype=np.uint64)
    both = np.asarray([0x200000, 4096], dtype=np.uint64)
    assert pagesize.touched_bytes(big, both, 0x200000, 0x300000, 4096) == (0x100000, 2, 1)


# -- the table of a generic sweep ---------------------------------------------------------------


SWEEP = """\
name = "uniform-sweep"
description = "uniform random loads over cores"
duration = "50ms"
[workload]
kind = "uniform"
footprint = "16MiB"
[[sweep]]
label = "one-core"
set = ['machine.cores = 1']
[[sweep]]
label = "two-cores"
set = ['machine.cores = 2']
"""


def test_generic_sweep_table_shows_the_stats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")  # both points side by side
    sc = tmp_path / "a-rather-long-scenario-file-name-for-the-title.toml"
    sc.write_text(SWEEP)
    res = cli("run", sc, "--jobs", "1")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == f"{sc}: 2 points", lines[:3]
    head = lines[1].split()
    assert head == ["stat", "one-core", "two-cores"], lines[1]
    rows = {ln.split()[0]: ln.split()[1:] for ln in lines[2:] if ln.strip()}
    assert rows["workload"] == ["uniform", "uniform"]
    assert rows["machine.cores"] == ["1", "2"]
    assert "machine.accesses" in rows and "machine.page_faults" in rows


def test_plain_records_fit_the_width() -> None:
    from rich.console import Console

    from tierlab.policies import render_records

    rows = [
        {"label": f"point-{i}", "workload": "uniform", "machine.accesses": 123456789 + i}
        for i in range(9)
    ]
    buf = io.StringIO()
    render_records(rows, Console(file=buf, width=60), "a title that is longer than the table")
    lines = buf.getvalue().splitlines()
    assert lines[0] == "a title that is longer than the table"
    assert all(len(ln) <= 60 for ln in lines), lines
    text = buf.getvalue()
    for i in range(9):
        assert f"point-{i}" in text and str(123456789 + i) in text
    assert sum(ln.split()[:1] == ["stat"] for ln in lines) > 1  # split into several tables


# -- size units ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("4096", 4096),
        ("64k", 64 << 10),
        ("4MiB", 4 << 20),
        ("1GiB", 1 << 30),
        ("1GB", 10**9),
        ("1gb", 10**9),
        ("10KB", 10_000),
        ("2MB", 2_000_000),
        ("1T", 1 << 40),
        ("1TiB", 1 << 40),
        ("3TB", 3 * 10**12),
        ("1.5GiB", 3 << 29),
    ],
)
def test_size_units_are_the_scenarios(text: str, value: int) -> None:
    from tierlab.live.units import parse_size

    assert parse_size(text) == value


@pytest.mark.parametrize(
    ("text", "says"),
    [("1XB", "unknown size unit 'XB'"), ("-4MiB", "negative"), ("0.3B", "whole number")],
)
def test_bad_sizes_say_why(text: str, says: str) -> None:
    from tierlab.live.units import parse_size

    with pytest.raises(ValueError, match=says):
        parse_size(text)


def test_size_options_use_the_scenario_units(perf_rec: Path, tmp_path: Path) -> None:
    plan = tmp_path / "p.json"
    res = _plan_hot_fast(perf_rec, plan, "1GB")
    assert res.returncode == 0, res.stderr
    assert json.loads(plan.read_text())["policy"]["fast_capacity"] == 10**9
    res = cli("view", perf_rec, "--json", "--min-mapping", "1TiB")
    assert res.returncode == 0, res.stderr
    err = assert_user_error(cli("view", perf_rec, "--json", "--min-mapping", "1PiB"))
    assert "--min-mapping" in err and "unknown size unit 'PiB'" in err


# -- tune, reproduce, run -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value"),
    [("--trials", "0"), ("--trials", "-3"), ("--grid-points", "0"), ("--jobs", "0")],
)
def test_tune_refuses_non_positive_counts(option: str, value: str) -> None:
    res = cli(
        "tune", "demo", "--method", "bayes", option, value, "--param", "seed=1:3",
        "--objective", "machine.accesses",
    )  # fmt: skip
    err = assert_user_error(res)
    assert f"argument {option}: {value}:" in err, err
    assert res.stdout == ""


def test_tune_api_refuses_non_positive_trials() -> None:
    from tierlab import tune
    from tierlab.sweep import LocalExecutor

    with pytest.raises(tune.TuneError, match="--trials 0"):
        tune.run_search(
            "demo",
            [tune.Param.parse("seed=1:3")],
            "machine.accesses",
            method="bayes",
            trials=0,
            executor=LocalExecutor(1),
        )


def test_reproduce_dry_run_refuses_unknown_figures() -> None:
    res = cli("reproduce", "all", "--dry-run", "--figures", "zzz")
    err = assert_user_error(res)
    assert "--figures 'zzz' matches no figure" in err
    assert "every scenario valid" not in res.stdout


def test_run_of_a_directory_says_so(tmp_path: Path) -> None:
    err = assert_user_error(cli("run", tmp_path))
    assert f"{tmp_path}: is a directory, not a scenario file" in err
    (tmp_path / "mine.toml").write_text(SWEEP)
    err = assert_user_error(cli("run", tmp_path))
    assert "it holds mine.toml" in err


def _covered(addr: list[int], sizes: list[int], lo: int, hi: int) -> int:
    """Bytes of ``[lo, hi)`` in the union of the points' pages (Python integers)."""
    spans = sorted({(a // z * z, a // z * z + z) for a, z in zip(addr, sizes, strict=True)})
    total, reach = 0, lo
    for s, e in spans:
        s, e = max(s, reach, lo), min(e, hi)
        if e > s:
            total += e - s
            reach = e
    return total


@pytest.mark.parametrize("seed", range(20))
def test_touched_bytes_is_the_union_of_pages(seed: int) -> None:
    rng = np.random.default_rng(seed)
    base = [0, 1 << 40, (1 << 64) - (1 << 32)][seed % 3]
    addr = [base + int(x) for x in rng.integers(0, 1 << 31, size=int(rng.integers(1, 40)))]
    sizes = [int(rng.choice([4096, 2 << 20, 1 << 30])) for _ in addr]
    lo = base + int(rng.integers(0, 1 << 30))
    hi = min(1 << 64, lo + int(rng.integers(1, 1 << 32)))
    got = pagesize.touched_bytes(
        np.asarray(addr, dtype=np.uint64), np.asarray(sizes, dtype=np.uint64), lo, hi
    )
    assert got[0] == _covered(addr, sizes, lo, hi)


def test_damon_regions_near_the_top_are_viewed(tmp_path: Path) -> None:
    """DAMON regions above 2^63 give the numbers the same regions low in memory give."""
    doc = json.loads((FIX / "damo-record.json").read_text())
    shift = (1 << 64) - (1 << 26) - 139637976727552
    for target in doc:
        for snap in target["snapshots"]:
            for r in snap["regions"]:
                for k in ("start", "end"):
                    r[k] = int(str(r[k]).replace(",", "")) + shift
    src = tmp_path / "top.json"
    src.write_text(json.dumps(doc))
    views = []
    for name, path in (("low", FIX / "damo-record.json"), ("top", src)):
        assert cli("import", "damo", path, "-o", tmp_path / name).returncode == 0
        res = cli("view", tmp_path / name, "--json")
        assert res.returncode == 0, res.stderr
        views.append(json.loads(res.stdout))
    low, top = views
    assert low["totals"] == top["totals"]
    drop = ("start", "files")
    assert [{k: v for k, v in m.items() if k not in drop} for m in low["mappings"]] == [
        {k: v for k, v in m.items() if k not in drop} for m in top["mappings"]
    ]
    assert top["mappings"][0]["start"] == low["mappings"][0]["start"] + shift


SMALL_RUN = 'name = "t"\nduration = "5ms"\n[workload]\nkind = "uniform"\nfootprint = "4MiB"\n'


def test_run_out_dot_fills_an_empty_working_directory(tmp_path: Path) -> None:
    # `--out .` in an empty directory was refused: the staging directory was made inside it.
    sc = tmp_path / "s.toml"
    sc.write_text(SMALL_RUN)
    out = tmp_path / "out"
    out.mkdir()
    for _ in range(2):  # an empty directory, then the run directory it became
        res = tierlab("run", sc, "--out", ".", "--no-progress", cwd=out)
        assert res.returncode == 0, res.stderr
        assert (out / "stats.json").is_file() and (out / "run.json").is_file()
        assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_run_out_where_nothing_can_be_made_names_the_directory(tmp_path: Path) -> None:
    sc = tmp_path / "s.toml"
    sc.write_text(SMALL_RUN)
    (tmp_path / "f").write_text("a file")
    res = tierlab("run", sc, "--out", tmp_path / "f" / "sub", "--no-progress")
    assert res.returncode != 0
    assert "Traceback" not in res.stderr and "tierlab-new" not in res.stderr, res.stderr
    assert str(tmp_path / "f" / "sub") in res.stderr, res.stderr
