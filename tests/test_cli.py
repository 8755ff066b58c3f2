"""The `tierlab` command line, run as a subprocess (`python -m tierlab`)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from conftest import SHORT, Watched, assert_user_error, tierlab


def test_scenarios_lists_demo() -> None:
    res = tierlab("scenarios")
    assert res.returncode == 0, res.stderr
    assert "demo" in res.stdout
    listed = json.loads(tierlab("scenarios", "--json").stdout)
    assert "demo" in {row["name"] for row in listed}
    assert all(row["description"] for row in listed)
    # Piped output keeps every cell whole (no 80-column wrapping or "..." truncation).
    for row in listed:
        assert row["description"] in res.stdout, row["name"]
    assert "\u2026" not in res.stdout


def test_run_prints_summary() -> None:
    res = tierlab("run", "demo", *SHORT, "--no-progress")
    assert res.returncode == 0, res.stderr
    assert "demo" in res.stdout
    assert "Traceback" not in res.stderr


def test_run_json_is_the_only_stdout() -> None:
    res = tierlab("run", "demo", *SHORT, "--json")
    assert res.returncode == 0, res.stderr
    stats = json.loads(res.stdout)  # the whole of stdout is one JSON document
    assert stats["machine"]["accesses"] > 0


def test_startup_and_run_json_import_no_table_library() -> None:
    """Every command's parser and a `run --json` load neither pandas nor numpy (they cost
    ~0.35 s of every invocation's start): the tables are made where they are needed."""
    code = (
        "import sys\n"
        "from tierlab.cli.main import main\n"
        "main(['run', 'demo', '--set', 'duration=\"5ms\"', '--set', 'window=\"5ms\"', '--json'])\n"
        "sys.stderr.write('loaded: ' + ' '.join(m for m in ('pandas', 'numpy', 'pyarrow',"
        " 'matplotlib') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["machine"]["accesses"] > 0
    # Only the start line ("tierlab run: demo: 1 run, ...") before the modules' list.
    assert proc.stderr.startswith("tierlab run: demo"), proc.stderr
    loaded = proc.stderr.rsplit("loaded: ", 1)[1]
    assert loaded == "", f"loaded at start-up: {loaded}"


def test_view_and_import_errors_import_no_table_library(tmp_path: Path) -> None:
    """The error paths of `view` (no such recording, not a recording) and `import` (no such
    input, an output that is not a recording) report their one-line error without loading
    pandas, numpy or pyarrow: recording.py and the importers load them where a table is read
    or written."""
    not_rec = tmp_path / "not-a-recording"
    not_rec.mkdir()
    (not_rec / "x").write_text("x")
    code = (
        "import sys\n"
        "from tierlab.cli.main import main\n"
        f"missing, not_rec = {str(tmp_path / 'missing')!r}, {str(not_rec)!r}\n"
        "codes = [main(a) for a in (['view', missing], ['view', not_rec],\n"
        "    ['import', 'perf-script', missing, '-o', sys.argv[1]],\n"
        "    ['import', 'damo', missing, '-o', not_rec, '--force'])]\n"
        "print(codes)\n"
        "print(' '.join(m for m in ('pandas', 'numpy', 'pyarrow', 'matplotlib')"
        " if m in sys.modules))\n"
    )
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(out)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    codes, loaded = proc.stdout.split("\n")[:2]
    assert codes == "[2, 2, 2, 2]", proc.stderr
    # Each command's start line ("tierlab view: starting ..."), then its error.
    errors = [e for e in proc.stderr.splitlines() if ": starting" not in e]
    assert len(errors) == 4 and all(e.startswith("tierlab: error: ") for e in errors), errors
    assert "Traceback" not in proc.stderr
    assert not out.exists()
    assert loaded == "", f"loaded on an error path: {loaded}"


def test_run_out_writes_readable_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = tierlab("run", "demo", *SHORT, "--out", out, "--json")
    assert res.returncode == 0, res.stderr
    stats = json.loads(res.stdout)
    for name in (
        "timeseries.parquet",
        "timeseries.csv",
        "stats.json",
        "scenario.toml",
        "heatmap.parquet",
        "heatmap.png",
        "heatmap.svg",
    ):
        assert (out / name).is_file(), name
        assert (out / name).stat().st_size > 0, name
    ts = pd.read_parquet(out / "timeseries.parquet")
    for column in ("window", "t_start_s", "t_end_s", "accesses", "reads", "writes"):
        assert column in ts.columns, column
    assert len(ts) > 0
    assert pd.read_csv(out / "timeseries.csv").shape == ts.shape
    assert json.loads((out / "stats.json").read_text()) == stats
    heat = pd.read_parquet(out / "heatmap.parquet")
    assert heat["accesses"].sum() > 0
    assert tomllib.loads((out / "scenario.toml").read_text())


def test_export_round_trip(tmp_path: Path) -> None:
    res = tierlab("export", "demo", *SHORT, "--seed", "7")
    assert res.returncode == 0, res.stderr
    exported = tmp_path / "exported.toml"
    exported.write_text(res.stdout)
    assert tomllib.loads(res.stdout)["seed"] == 7
    original = tierlab("run", "demo", *SHORT, "--seed", "7", "--json")
    again = tierlab("run", exported, "--json")
    assert original.returncode == 0, original.stderr
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == json.loads(original.stdout)
    # exporting the export changes nothing
    assert tierlab("export", exported).stdout == res.stdout


def test_run_out_scenario_reproduces(tmp_path: Path, rand_masim: Path) -> None:
    first = tierlab("run", f"masim:{rand_masim}", "--seed", "11", "--out", tmp_path, "--json")
    assert first.returncode == 0, first.stderr
    again = tierlab("run", tmp_path / "scenario.toml", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == json.loads(first.stdout)


def test_determinism(rand_masim: Path) -> None:
    def stats(seed: int) -> dict:
        res = tierlab("run", f"masim:{rand_masim}", "--seed", str(seed), "--json")
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)

    a, b, c = stats(1), stats(1), stats(2)
    assert a == b
    assert a != c


def test_masim_config_from_shared_data(shared_dir: Path) -> None:
    cfg = shared_dir / "data" / "masim" / "zigzag.cfg"
    res = tierlab("run", f"masim:{cfg}", *SHORT, "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["machine"]["accesses"] > 0


# -- errors ------------------------------------------------------------------------------------


def first_table_line(text: str) -> int:
    """1-based number of the first `[table]` header line."""
    for i, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("["):
            return i
    raise AssertionError("no table in scenario")


def test_unknown_top_level_key_names_file_and_line(tmp_path: Path, demo_toml: Path) -> None:
    lines = demo_toml.read_text().splitlines()
    at = first_table_line(demo_toml.read_text())  # insert before it: a top-level key
    lines.insert(at - 1, "bogus_key = 1")
    bad = tmp_path / "bad.toml"
    bad.write_text("\n".join(lines) + "\n")
    err = assert_user_error(tierlab("run", bad))
    assert f"bad.toml:{at}" in err
    assert "bogus_key" in err


def test_unknown_nested_key_names_file_and_line(tmp_path: Path, demo_toml: Path) -> None:
    lines = demo_toml.read_text().splitlines()
    header = lines.index("[machine]") + 1
    lines.insert(header, "corez = 4")
    bad = tmp_path / "bad.toml"
    bad.write_text("\n".join(lines) + "\n")
    err = assert_user_error(tierlab("run", bad))
    assert f"bad.toml:{header + 1}" in err
    assert "corez" in err


def test_unknown_override_key() -> None:
    err = assert_user_error(tierlab("run", "demo", "--set", "machine.corez=4"))
    assert "corez" in err


def test_bad_override_syntax() -> None:
    err = assert_user_error(tierlab("run", "demo", "--set", "no-equals-sign"))
    assert "KEY=VALUE" in err


MASIM_BAD = {
    # name: (config text, lines the error may point at, words the message must contain)
    "missing_field": ("#regions\na, 1048576\nb\n\n#phases\np0\n10\na, 0, 64, 1\n", {3}, ["b"]),
    "unknown_region": (
        "#regions\na, 1048576\n\n#phases\np0\n10\na, 0, 64, 1\nc, 0, 64, 1\n",
        {8},
        ["c"],
    ),
    # (on the second region line: a first line that is not a region is not quoted, the file
    # may not be a masim config at all; see test_engine_inputs.py)
    "bad_number": (
        "#regions\na, 1048576\nb, 1O48576\n\n#phases\np0\n10\na, 0, 64, 1\n",
        {3},
        ["1O48576"],
    ),
    "bad_duration": ("#regions\na, 1048576\n\n#phases\np0\nten\na, 0, 64, 1\n", {6}, ["ten"]),
    "empty_phase": (
        "#regions\na, 1048576\n\np0\n10\n\np1\n10\na, 0, 64, 1\n",
        {4, 5},
        ["p0"],
    ),
}


@pytest.mark.parametrize("case", sorted(MASIM_BAD))
def test_bad_masim_config_names_file_and_line(tmp_path: Path, case: str) -> None:
    text, lines, words = MASIM_BAD[case]
    cfg = tmp_path / f"{case}.cfg"
    cfg.write_text(text)
    err = assert_user_error(tierlab("run", f"masim:{cfg}"))
    found = {int(n) for n in re.findall(rf"{case}\.cfg:(\d+)", err)}
    assert found & lines, f"expected {case}.cfg:<one of {sorted(lines)}> in: {err}"
    for word in words:
        assert word in err


@pytest.mark.parametrize(
    "spec", ["does/not/exist.toml", "masim:does/not/exist.cfg", "no-such-builtin"]
)
def test_missing_scenario(tmp_path: Path, spec: str) -> None:
    err = assert_user_error(tierlab("run", spec, cwd=tmp_path))
    assert spec.removeprefix("masim:") in err


def test_export_error() -> None:
    err = assert_user_error(tierlab("export", "demo", "--set", "machine.corez=4"))
    assert "corez" in err


# -- Ctrl-C ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]
)
def test_ctrl_c_keeps_what_was_done(tmp_path: Path, sig: signal.Signals, code: int) -> None:
    """Ctrl-C, SIGTERM (a scheduler, `kill`) and SIGHUP (a closed terminal) stop a run the
    same way: what was simulated is written, the exit status is 128 + the signal."""
    out = tmp_path / "out"
    # zipf-tiered's workload never ends by itself; the run stops only at the signal, sent once
    # the progress bar shows the simulation running (not after a guessed time).
    w = Watched("run", "zipf-tiered", "--set", 'duration="3600s"', "--out", out)
    w.wait_for_text(r"[0-9.]+ M acc/s")
    res = w.finish(sig)
    assert res.returncode == code, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    assert re.search(r"interrupted at [0-9.]+ s of 3600 s", res.stderr), res.stderr
    run = json.loads((out / "run.json").read_text())
    assert run["interrupted"] is True
    assert 0 < run["sim_seconds_done"] < 3600
    assert len(pd.read_parquet(out / "timeseries.parquet")) > 0
    assert json.loads((out / "stats.json").read_text())["machine"]["accesses"] > 0
    assert not list(tmp_path.glob(".out.*")), "no staging directory left"


def test_ctrl_c_while_loading(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """A Ctrl-C while the subcommands' modules load (pandas, pyarrow: a second or more on a
    fresh clone) ends like one during a command, not with a traceback."""
    from tierlab.cli import main as cli_main

    def interrupted() -> tuple:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main, "subcommands", interrupted)
    assert cli_main.main(["run", "demo"]) == 130
    assert capsys.readouterr().err == "tierlab: interrupted\n"


# -- bench -------------------------------------------------------------------------------------


def test_bench_engine_quick_json() -> None:
    res = tierlab("bench", "engine", "--quick", "--repeat", "2", "--json", timeout=300)
    assert res.returncode == 0, res.stderr
    rates = json.loads(res.stdout)
    for key in ("generate", "machine_1core", "machine_16core"):
        assert rates[key] > 0, key
        assert len(rates["runs"][key]) == 2
        assert rates[key] == max(rates["runs"][key])
    bad = tierlab("bench", "engine", "--repeat", "0")
    assert bad.returncode == 2 and "--repeat must be at least 1" in bad.stderr
