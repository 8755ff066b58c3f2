"""tierlab reproduce: the papers' data files, the claim predicates, a whole (smoke-sized)
reproduction of every paper through the CLI, resuming it, and the quick profile's points."""

from __future__ import annotations

import dataclasses
import functools
import json
import shutil
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from conftest import tierlab
from tierlab import _native
from tierlab.reproduce import checks, load, names, provenance
from tierlab.reproduce.runner import lookup, plan_figure
from tierlab.reproduce.spec import SpecError, load_paper
from tierlab.sweep.point import scenario_points


@functools.cache
def _expanded(scenario: str) -> list[dict[str, object]]:
    """The scenario and each of its sweep points, expanded (distinct point overrides only:
    the CMCP sweeps repeat a few workload tables)."""
    docs = [tomllib.loads(_native.export(scenario, [], None))]
    _, pts = scenario_points(scenario)
    seen: set[tuple[str, ...]] = set()
    for _, ov in pts:
        key = tuple(x for x in ov if x.startswith(("workload", "placement", "policies")))
        if key not in seen:
            seen.add(key)
            docs.append(tomllib.loads(_native.export(scenario, ov, None)))
    return docs


def _has(scenario: str, key: str) -> bool:
    for d in _expanded(scenario):
        try:
            lookup(d, key)
            return True
        except (KeyError, IndexError, TypeError):
            continue
    return False


def test_papers_load_and_every_parameter_is_a_scenario_key() -> None:
    assert names() == ["pebs", "cmcp", "telescope", "numa", "tiering"]
    for name in names():
        paper = load(name)
        assert paper.figures and paper.claims and paper.parameters
        for p in paper.parameters:
            for scenario in p.scenarios:
                assert _has(scenario, p.key), f"{name}: {p.key} is not a key of {scenario}"


GOOD = """
id = "x"
title = "t"
citation = "c"
text = "papers/x.txt"
docs = "docs/x.md"
[[figures]]
id = "f"
title = "t"
paper_ref = "Table 1"
scenario = "numa-placement"
command = "run"
view = "numa-placement"
[[claims]]
id = "c"
figure = "f"
claim = "c"
paper = "p"
source = "s"
check = { kind = "compare", value = "savings_pct", op = ">", threshold = 20.0 }
[[parameters]]
key = "machine.remote_factor"
scenarios = ["numa-placement"]
status = "sourced"
source = "somewhere"
"""


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("", "colour = 1\n"), "`colour`: unknown field"),
        (('status = "sourced"', 'status = "guessed"'), "`parameters[0].status`: 'guessed'"),
        (('source = "somewhere"', 'reason = "x"'), "`parameters[0].source`: a sourced"),
        (('kind = "compare"', 'kind = "vibes"'), "`claims[0].check`: kind 'vibes'"),
        (('figure = "f"', 'figure = "g"'), "`claims[0].figure`: no figure 'g'"),
        (('view = "numa-placement"', 'view = "pie"'), "`figures[0].view`: no view 'pie'"),
        (('op = ">"', 'op = "!="'), "op '!='"),
        ((", threshold = 20.0 }", " }"), "missing argument threshold"),
        (('scenarios = ["numa-placement"]', 'scenarios = ["demo"]'), "'demo' is not a scenario"),
        (('status = "sourced"\n', ""), "`parameters[0].source`: without `status`"),
    ],
)
def test_paper_file_errors_name_file_and_field(change: tuple[str, str], message: str) -> None:
    load_paper(GOOD, "x.toml")
    old, new = change
    text = new + GOOD if not old else GOOD.replace(old, new, 1)
    with pytest.raises(SpecError) as e:
        load_paper(text, "x.toml")
    assert str(e.value).startswith("x.toml: "), e.value
    assert message in str(e.value), e.value


def test_every_parameter_is_labelled_once() -> None:
    """A paper file states the provenance of the values its scenarios choose; a value at the
    engine's declared default takes the declaration's label (one declaration each)."""
    for name in names():
        assert provenance.problems(load(name)) == [], name


_PROV_SCENARIO = """
duration = "10ms"
[workload]
kind = "uniform"
[[telemetry]]
kind = "pebs"
[tiering]
kind = "hottest-first"
telemetry = "pebs"
fill = 0.5
"""


def test_declared_labels_and_their_rules(tmp_path: Path) -> None:
    sc = tmp_path / "s.toml"
    sc.write_text(_PROV_SCENARIO)
    text = GOOD.replace(
        """key = "machine.remote_factor"
scenarios = ["numa-placement"]
status = "sourced"
source = "somewhere"
""",
        f"""key = "tiering.ns_per_item"
scenarios = ["{sc}"]
[[parameters]]
key = "tiering.fill"
scenarios = ["{sc}"]
[[parameters]]
key = "tiering.ns_per_item"
scenarios = ["{sc}"]
status = "assumed"
reason = "restated"
[[parameters]]
key = "tiering.fill"
scenarios = ["{sc}"]
status = "assumed"
reason = "half, for the test"
""",
    )
    # Loaded against a scenario of the figure, then pointed at the test's scenario file.
    paper = load_paper(text.replace(str(sc), "numa-placement"), "x.toml")
    paper = dataclasses.replace(
        paper,
        parameters=tuple(dataclasses.replace(p, scenarios=(str(sc),)) for p in paper.parameters),
    )
    found = provenance.problems(paper)
    assert len(found) == 2, found
    assert "sets a value other than the declared default (0.95)" in found[0], found
    assert "parameters[2] `tiering.ns_per_item`" in found[1] and "drop `status`" in found[1]
    resolved = provenance.resolve(paper).parameters
    assert (resolved[0].status, resolved[0].declared) == ("assumed", True)
    assert resolved[0].provenance == "ranking cost per reported region or page"
    assert (resolved[3].status, resolved[3].declared) == ("assumed", False)


def test_predicates() -> None:
    t = pd.DataFrame(
        {
            "workload": ["a", "a", "a", "b", "b", "b"],
            "policy": ["fifo", "lru", "cmcp"] * 2,
            "faults": [10.0, 8.0, 7.0, 10.0, 12.0, 9.0],
            "perf": [0.5, 0.4, 0.7, 0.5, 0.6, 0.55],
        }
    )
    r = checks.evaluate(
        {
            "kind": "ratio",
            "value": "faults",
            "column": "policy",
            "numerator": "lru",
            "denominator": "fifo",
            "by": ["workload"],
            "op": "<",
            "threshold": 1.0,
        },
        t,
    )
    assert r.verdict == "fails" and "1 of 2" in r.observed and "not at b" in r.observed
    r = checks.evaluate(
        {
            "kind": "argbest",
            "value": "perf",
            "column": "policy",
            "expect": "cmcp",
            "by": ["workload"],
        },
        t,
    )
    assert (r.verdict, r.observed) == ("fails", "cmcp in 1, lru in 1; not at b: lru")
    r = checks.evaluate(
        {"kind": "compare", "value": "perf", "op": ">", "threshold": 0.3, "agg": "mean"}, t
    )
    assert r.verdict == "holds" and r.observed.startswith("mean 0.54")
    # Rows that were not run: n/a, not a verdict.
    r = checks.evaluate(
        {"kind": "compare", "value": "perf", "op": ">", "threshold": 0, "where": {"policy": "x"}},
        t,
    )
    assert r.verdict == "n/a"
    r = checks.evaluate(
        {"kind": "monotonic", "value": "faults", "order": "perf", "by": ["workload"]}, t
    )
    assert r.verdict == "fails"
    r = checks.evaluate(
        {
            "kind": "close",
            "value": "faults",
            "key": "policy",
            "targets": {"fifo": 10.5},
            "rel_tol": 0.1,
            "where": {"workload": "a"},
        },
        t,
    )
    assert r.verdict == "holds" and "10 vs 10.5 (-5%)" in r.observed


def test_claims_evaluated_on_the_papers_own_numbers() -> None:
    """Table 1 transcribed: the paper's own numbers satisfy the claims made of them."""
    from tierlab.reproduce.runner import evaluate_claims

    paper = load("cmcp")
    results = {c.claim.id: c for c in evaluate_claims(paper, [])}
    assert results["lru-fewer-faults"].outcome.verdict == "n/a"  # nothing ran
    po = results["lru-fewer-faults"].paper_outcome
    assert po is not None and po.verdict == "holds" and "28 of 28" in po.observed
    po = results["lru-more-invalidations"].paper_outcome
    assert po is not None and po.verdict == "holds" and po.observed.startswith("1.75-24.0x")


def test_quick_points_valid() -> None:
    """Every point of `reproduce all --quick` expands to a valid scenario (the quick run
    itself takes minutes; docs/reproduce.md gives its time)."""
    res = tierlab("reproduce", "all", "--quick", "--dry-run")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "every scenario valid" in res.stdout
    for name in names():
        for spec in load(name).figures:
            _, full, _ = plan_figure(spec, "full")
            _, quick, _ = plan_figure(spec, "quick")
            assert 0 < len(quick.points) <= len(full.points), spec.id
            assert f"{name}/{spec.id}: {len(quick.points)} points" in res.stdout


def test_smoke_report(smoke_report: Path) -> None:
    doc = json.loads((smoke_report / "report.json").read_text())
    assert doc["profile"] == "smoke"
    assert [p["id"] for p in doc["papers"]] == names()
    for paper in doc["papers"]:
        spec = load(paper["id"])
        assert len(paper["figures"]) == len(spec.figures)
        for f in paper["figures"]:
            assert f["finished"] == f["points"] > 0, f["id"]
            assert f["table"], f["id"]
            assert all(c["command"].startswith("tierlab ") for c in f["commands"])
            assert (smoke_report / paper["id"] / f"{f['id']}.csv").is_file()
        assert len(paper["claims"]) == len(spec.claims)
        assert {c["verdict"] for c in paper["claims"]} <= {"holds", "fails", "n/a"}
        assert any(c["verdict"] != "n/a" for c in paper["claims"])
        assert all(p["status"] in ("sourced", "calibrated", "assumed") for p in paper["parameters"])
    html = (smoke_report / "index.html").read_text()
    assert "Smoke run" in html and "class='claims'" in html


def test_rerun_reuses_every_point(smoke_report: Path, tmp_path: Path) -> None:
    out = tmp_path / "again"
    shutil.copytree(smoke_report / "points", out / "points")
    res = tierlab("reproduce", "numa", "--profile", "smoke", "--out", out, "--no-progress")
    assert res.returncode == 0, res.stderr
    # numa's smoke points: numa-placement 2, numa-sources 3, numa-opteron 4; and the
    # sensitivity sweep's, numa-placement's 2 at each of its 2 smoke values.
    assert "reused 13 points" in res.stderr


def test_point_command_reruns_the_same_point(smoke_report: Path) -> None:
    doc = json.loads((smoke_report / "report.json").read_text())
    numa = next(p for p in doc["papers"] if p["id"] == "numa")
    fig = numa["figures"][0]
    cmd = next(c for c in fig["commands"] if c["point"] == "stream/2-nodes/profile-guided")
    args = cmd["command"].split()[1:]
    assert args[:4] == ["run", "numa-placement", "--points", "stream/2-nodes/profile-guided"]
    res = tierlab(*args, "--json")
    assert res.returncode == 0, res.stderr
    rec = res.json()[0]
    row = next(r for r in fig["table"] if r["label"] == "stream/2-nodes/profile-guided")
    assert rec["run_time_s"] == row["run_time_s"]
