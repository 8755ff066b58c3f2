"""What a person at a terminal or in a notebook meets: costs before running, progress, tables
that fit, the command line's conventions, notebook representations, noise flags."""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

import pytest

from conftest import SHORT, tierlab

# -- costs -------------------------------------------------------------------------------


def test_every_built_in_scenario_has_a_measured_cost() -> None:
    from tierlab import costs
    from tierlab.api import scenarios

    table = costs.load()
    missing = [n for n, _ in scenarios() if n not in table]
    assert not missing, f"no measured cost (tierlab bench costs --write): {missing}"
    for c in table.values():
        assert c.cpu_seconds > 0 and c.full_cpu_seconds >= c.cpu_seconds, c.name
        # Figures taken from docs/benchmarks.md may lack the peak memory; a measured one not.
        assert c.peak_rss_bytes > 0 or c.measured_as == "docs", c.name
    res = tierlab("scenarios", env={"COLUMNS": "100"})
    assert res.returncode == 0, res.stderr
    rows = json.loads(tierlab("scenarios", "--json").stdout)
    assert all(r["cpu_seconds"] for r in rows)
    assert not re.search(r" \? +\? ", res.stdout), res.stdout  # a scenario without a cost


def test_costs_file_round_trips_unchanged(tmp_path) -> None:
    """Writing the costs (what `tierlab bench costs --write NAME` does after measuring NAME)
    leaves every other scenario's entry byte for byte as it was."""
    from tierlab import costs

    out = tmp_path / "costs.json"
    costs.save(costs.load(), out)
    assert out.read_text() == costs.COSTS_FILE.read_text()


def test_estimate_scales_a_measured_point_by_its_driver() -> None:
    from tierlab import costs
    from tierlab.sweep.point import Point

    cost = costs.ScenarioCost(
        name="demo",
        command="run",
        cpu_seconds=12.0,
        peak_rss_bytes=1 << 28,
        wall_seconds=7.0,
        points=1,
        driver=8.0,
        per_point={"": (10.0, 8.0)},
        fixed_cpu_seconds=2.0,
    )
    half = Point("", "demo", ('duration="4s"',))
    est = costs.estimate([half], {"demo": cost})
    assert est.cpu_seconds == pytest.approx(2.0 + 5.0)
    assert est.peak_rss_bytes == 1 << 28
    other = costs.estimate([Point("x", "demo", ('duration="16s"',))], {"demo": cost})
    assert other.cpu_seconds == pytest.approx(2.0 + 20.0)  # the mean point, scaled
    unknown = costs.estimate([Point("", "cg-16core")], {"demo": cost})
    assert unknown.unpriced == ["cg-16core"] and "cost unknown" in unknown.text()


def test_dry_run_and_quick_say_what_they_would_do() -> None:
    res = tierlab("run", "cmcp-replay", "--dry-run")
    assert res.returncode == 0, res.stderr
    assert re.search(r"4 points: .*of CPU", res.stdout), res.stdout
    q = tierlab("run", "demo", "--quick", "--dry-run")
    assert q.returncode == 0 and "--quick: 1 s of simulated time instead of 8 s" in q.stderr
    r = tierlab("reproduce", "numa", "--quick", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert re.search(r"estimated cost: ~.* of CPU", r.stdout), r.stdout
    for cmd in ("run", "telemetry", "tune"):
        assert "--quick" in tierlab(cmd, "--help").stdout, cmd


# -- progress ----------------------------------------------------------------------------


def test_plain_progress_when_stderr_is_not_a_terminal() -> None:
    res = tierlab(
        "run",
        "demo",
        "--set",
        'duration="400ms"',
        env={"TIERLAB_PROGRESS_INTERVAL": "0.001"},
    )
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    assert lines[0].startswith("tierlab run: demo: 1 run"), lines[:2]
    assert any(re.match(r"tierlab run: simulating \d+%", x) for x in lines), res.stderr


def test_plain_progress_of_a_run_of_unknown_length(monkeypatch, capsys) -> None:
    # A replay's simulated duration is not known in advance: the engine reports total 0.
    from tierlab import progress

    monkeypatch.setenv("TIERLAB_PROGRESS_INTERVAL", "0.001")
    with progress.progress_bar(plain=True) as update:
        import time

        time.sleep(0.01)
        update(5_000_000, 0, 1000)
    err = capsys.readouterr().err
    assert "tierlab run: simulating 5.0 ms simulated," in err, err


def test_phase_prints_plain_lines_when_slow(monkeypatch, capsys) -> None:
    import time

    from tierlab import progress

    monkeypatch.setenv("TIERLAB_PROGRESS_INTERVAL", "0.02")
    monkeypatch.setattr(progress, "is_terminal", lambda: False)
    with progress.phase("drawing plots", "view"):
        time.sleep(0.1)
    err = capsys.readouterr().err
    assert "tierlab view: drawing plots (0:00 so far)" in err
    assert "tierlab view: drawing plots: done in 0:00" in err
    # A phase that fails (raises, or reports its own error) says no "done" after the error.
    with pytest.raises(KeyError), progress.phase("importing x", "import"):
        time.sleep(0.1)
        raise KeyError("x")
    with progress.phase("importing y", "import") as state:
        time.sleep(0.1)
        state.failed = True
    err = capsys.readouterr().err
    assert "importing x (0:00 so far)" in err and "importing y (0:00 so far)" in err
    assert "done" not in err, err


# -- tables ------------------------------------------------------------------------------


def _fits(text: str, width: int) -> None:
    for line in text.splitlines():
        assert len(line) <= width, f"{len(line)} > {width}: {line!r}"


def _headers_unambiguous(header_line: str) -> None:
    heads = header_line.split()
    assert not any(h.endswith("\u2026") for h in heads), header_line


def test_tables_fit_100_columns_with_unique_headers() -> None:
    import io

    from rich.console import Console

    from tierlab import tables
    from tierlab.policies import TABLE_COLUMNS
    from tierlab.tiering import TABLE

    heads = [c.head for c in tables.COLUMNS.values()]
    assert len(heads) == len(set(heads)), "two columns share a header"
    row = {k: 123456.789 for k in tables.COLUMNS}
    row.update(policy="Telescope flex", technique="TS-FLX", label="bt/56/cmcp", kind="telescope")
    for keys in (TABLE, TABLE_COLUMNS, list(tables.COLUMNS)[:15]):
        buf = io.StringIO()
        console = Console(file=buf, width=100)
        tables.render([row, row], list(keys), console, "title")
        text = buf.getvalue()
        _fits(text, 100)
        _headers_unambiguous(text.splitlines()[1])
        assert "e+" not in text
    # --raw: every column, raw values, full keys
    buf = io.StringIO()
    with tables.options(raw=True):
        tables.render([row], list(TABLE), Console(file=buf, width=100))
    assert buf.getvalue().splitlines()[0].split("\t") == list(TABLE)
    # --columns chooses by key or header
    buf = io.StringIO()
    with tables.options(columns="policy,req/s"):
        tables.render([row], list(TABLE), Console(file=buf, width=100))
    assert buf.getvalue().splitlines()[0].split() == ["policy", "req/s"]


def test_human_cells() -> None:
    from tierlab import tables

    assert tables.cell(tables.col("slowdown"), 0.0417) == "4.2%"
    assert tables.cell(tables.col("time_to_recall_s"), None) == "never"
    assert tables.cell(tables.col("fast_tier_bytes"), 4 << 20) == "4 MiB"
    assert tables.cell(tables.col("throughput_rps"), 287520.4) == "287,520"
    assert tables.number(13599.446) == "13,599"


def test_commands_print_tables_that_fit_100_columns() -> None:
    env = {"COLUMNS": "100"}
    for args in (
        ("scenarios",),
        ("run", "demo", *SHORT, "--no-progress"),
        ("run", "cmcp-replay", "--points", "fifo", "--no-progress"),
        ("telemetry", "telescope-footprints", "--points", "1GB", *SHORT, "--no-progress"),
    ):
        res = tierlab(*args, env=env)
        assert res.returncode == 0, (args, res.stderr)
        _fits(res.stdout, 100)
        assert "\u2026" not in res.stdout, (args, res.stdout)


# -- command-line conventions ------------------------------------------------------------


def _parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    from tierlab.cli.main import build_parser

    out = []

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        out.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, p in action.choices.items():
                    walk(f"{name} {sub}".strip(), p)

    walk("", build_parser())
    return out


#: Options that mean the same everywhere: their value form (metavar).
SAME_FORM = {
    "--fast-capacity": "SIZE",
    "--page-size": "SIZE",
    "--jobs": "N",
    "--seed": "SEED",
    "--set": "KEY=VALUE",
    "--points": None,  # GLOB or LABEL (tune picks one point)
    "--pid": "PID",
}


def test_every_subcommand_follows_the_conventions() -> None:
    seen: dict[str, set[str]] = {}
    for name, parser in _parsers():
        for action in parser._actions:
            longs = [s for s in action.option_strings if s.startswith("--")]
            for opt in longs:
                if SAME_FORM.get(opt):
                    seen.setdefault(opt, set()).add(str(action.metavar or action.dest.upper()))
            if "--out" in action.option_strings:
                assert "-o" in action.option_strings, f"tierlab {name}: --out without -o"
            if action.required and action.option_strings:
                usage = parser.format_usage()
                opt = action.option_strings[0]
                assert re.search(rf"(^|[^\[]){re.escape(opt)}\s", usage), (name, usage)
        if name in ("record", "trace", "tier"):
            assert re.search(r"[^\[]-o REC", parser.format_usage()), parser.format_usage()
    for opt, forms in seen.items():
        assert forms == {SAME_FORM[opt]}, (opt, forms)


def test_one_rule_for_output_folders() -> None:
    """Every -o/--out follows the one rule (docs/scenarios.md#where-commands-write): required
    where the product is a file, optional with nothing written without it where the command
    computes results, or a report's default folder INPUT.COMMAND."""
    from tierlab.cli.common import OUT_OPTIONAL

    kinds: dict[str, str] = {}
    for name, parser in _parsers():
        for action in parser._actions:
            if "--out" not in action.option_strings:
                continue
            help_text = " ".join(str(action.help or "").split())
            usage = parser.format_usage()
            command = name.split()[-1]
            default = re.search(r"default: ([A-Z]+)\.([\w-]+)", help_text)
            if action.required or re.search(r"(^|[^\[])-o [A-Z]+", usage):
                kinds[name] = "required"
            elif OUT_OPTIONAL in help_text:
                kinds[name] = "optional"
            elif default and default.group(2) == command:
                kinds[name] = "report"
            else:
                pytest.fail(f"tierlab {name}: -o/--out follows no rule: {help_text!r}")
            assert "default:" not in help_text or kinds[name] == "report", (name, help_text)
    assert kinds["view"] == kinds["reproduce"] == "report", kinds
    assert {kinds[c] for c in ("run", "telemetry", "tune", "coremap", "rerun")} == {"optional"}
    assert {kinds[c] for c in ("record", "trace", "tier", "import", "export-trace")} == {"required"}


def test_reports_default_to_input_dot_command() -> None:
    from tierlab.cli import reproduce, view

    assert view.default_out(Path("data/rec1")) == Path("data/rec1.view")
    assert reproduce.default_out("numa") == Path("numa.reproduce")


@pytest.mark.parametrize(
    ("args", "suggestion"),
    [
        (("run", "dmeo"), "did you mean demo?"),
        (("rnu", "demo"), "did you mean run?"),
        (("reproduce", "cmpc", "--dry-run"), "did you mean cmcp?"),
        (("reproduce", "cmcp", "--figures", "cmcp-tabel1", "--dry-run"), "cmcp-table1"),
        (("telemetry", "telescope-5tb", "--techniques", "TS-BDN", "--dry-run"), "TS-BND"),
    ],
)
def test_did_you_mean(args: tuple[str, ...], suggestion: str) -> None:
    res = tierlab(*args)
    assert res.returncode == 2, res.stderr
    assert suggestion in res.stderr, res.stderr


def test_a_misplaced_option_shows_the_subcommands_usage() -> None:
    res = tierlab("run", "--frobnicate", "demo")
    assert res.returncode == 2
    assert res.stderr.startswith("usage: tierlab run"), res.stderr


# -- notebook ----------------------------------------------------------------------------


def test_notebook_representations_and_polars(tmp_path: Path) -> None:
    import polars as pl

    import tierlab
    from tierlab.recording import Recording, RecordingWriter

    r = tierlab.run("demo", duration="20ms", window="5ms")
    text = repr(r)
    assert text.startswith("<Result demo seed 1:") and "\n" not in text and len(text) < 200
    assert "<table>" in r._repr_html_()
    assert isinstance(r.frame("timeseries", "polars"), pl.DataFrame)
    with RecordingWriter(tmp_path / "rec", source="test") as w:
        w.append_mappings(time_ns=[0], event=["map"], start=[1 << 30], length=[1 << 22], name=["h"])
        w.append_accesses(time_ns=[1, 2], tid=[0, 0], addr=[1 << 30, (1 << 30) + 64], kind=[0, 1])
    rec = Recording.open(tmp_path / "rec")
    assert "2 accesses" in repr(rec) and "<table>" in rec._repr_html_()
    assert isinstance(rec.frame("accesses", "polars"), pl.DataFrame)
    for name in ("sweep", "telemetry", "reproduce", "tune"):
        assert callable(getattr(tierlab, name)), name
    import tierlab.sweep.api  # the module's names stay reachable

    s = tierlab.sweep("cmcp-replay", only="fifo", jobs=1)
    assert repr(s).startswith("<SweepOutcome cmcp-replay") and "<pre" in s._repr_html_()
    assert len(s.frame()) == 1


# -- noise -------------------------------------------------------------------------------


def test_noise_flags() -> None:
    from tierlab import noise

    assert noise.notes((-0.02, 0.415), 0.5, 2) == ["the interval spans zero: not significant"]
    assert noise.notes((0.01, 0.02), 5.2, 2) == ["machine busy: load 5.2 on 2 cores"]
    assert noise.flag((0.01, 0.02), 1.0, 2) == ""
    assert "spans zero" in noise.flag((-0.1, 0.1), None, 2)


def test_environment_does_not_leak() -> None:
    assert "TIERLAB_PROGRESS_INTERVAL" not in os.environ
