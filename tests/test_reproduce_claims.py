"""tierlab reproduce: claims that can fail, every figure of each paper accounted for, free
settings swept, and sourced parameters that quote their source.

The claims are evaluated on stored result tables (``tests/data/reproduce/PAPER/FIGURE.csv``,
the tables of a ``tierlab reproduce all --quick`` run), so these tests run no simulation.
"""

from __future__ import annotations

import functools
import math
import re
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from tierlab import _native
from tierlab.reproduce import checks, load, names, provenance
from tierlab.reproduce.model import Paper
from tierlab.reproduce.runner import SensitivityRun, lookup, plan_figure, sensitivity_plan

DATA = Path(__file__).parent / "data" / "reproduce"
SHARED = Path(__file__).resolve().parents[1].parent / "shared"


@functools.cache
def _table(paper: str, figure: str) -> pd.DataFrame:
    path = DATA / paper / f"{figure}.csv"
    assert path.is_file(), f"no stored results for {paper}/{figure}: {path}"
    return pd.read_csv(path)


@pytest.mark.parametrize("name", ["pebs", "cmcp", "telescope", "numa"])
def test_every_counted_claim_flips_under_its_perturbation(name: str) -> None:
    """Each claim counted as evidence that holds fails when its inputs are perturbed (its
    column shuffled across the points, or the opposite pattern); one that fails shows by
    failing that it can. Each claim marked uninformative does not flip (so the label is
    honest)."""
    paper = load(name)
    bad = []
    for c in paper.claims:
        table = _table(name, c.figure)
        verdict = checks.evaluate(c.check, table).verdict
        assert verdict in (checks.HOLDS, checks.FAILS), f"{name}/{c.id}: {verdict}"
        if c.basis == "construction" or verdict == checks.FAILS:
            continue  # true whatever the results; or already failing on them
        flip = checks.flip_rate(c.check, table, c.perturb)
        if c.basis == "evidence" and not flip.can_fail:
            bad.append(f"{c.id} ({flip.verdict}, {c.perturb}: {flip.text()})")
        if c.basis == "uninformative" and flip.can_fail:
            bad.append(f"{c.id} is marked uninformative but {flip.text()}")
    assert not bad, f"{name}: claims whose verdict does not depend on the results: {bad}"


def test_papers_count_evidence_and_mark_the_rest() -> None:
    for name in names():
        paper = load(name)
        assert any(c.counted for c in paper.claims), name
    pebs = {c.id: c for c in load("pebs").claims}
    # samples = events / R and overhead = assists + interrupts: true by construction
    for cid in ("halving-r-doubles-samples", "overhead-falls-with-r", "overhead-falls-with-b"):
        assert pebs[cid].basis == "construction"
    assert pebs["overhead-bounded"].basis == "uninformative"


def test_a_claim_naming_a_missing_column_is_an_error() -> None:
    table = _table("pebs", "pebs-minife")
    out = checks.evaluate(
        {"kind": "compare", "value": "overhead_pc", "op": "<", "threshold": 1.0}, table
    )
    assert out.verdict == checks.ERROR and "overhead_pc" in out.observed
    out = checks.evaluate(
        {
            "kind": "compare",
            "value": "overhead_pct",
            "op": "<",
            "threshold": 1.0,
            "where": {"buffer": 8},
        },
        table,
    )
    assert out.verdict == checks.ERROR and "'buffer'" in out.observed
    # an empty table (the figure did not run) is still n/a
    assert (
        checks.evaluate(
            {"kind": "compare", "value": "x", "op": "<", "threshold": 1}, pd.DataFrame()
        ).verdict
        == checks.NA
    )


def test_perturbations() -> None:
    t = pd.DataFrame(
        {"g": ["a", "a", "a", "b", "b", "b"], "x": [1, 2, 3, 1, 2, 3], "y": [1.0, 2, 3, 5, 6, 9]}
    )
    rising = {
        "kind": "monotonic",
        "value": "y",
        "order": "x",
        "by": ["g"],
        "direction": "increasing",
    }
    m = checks.mirrored(t, rising)
    assert m["y"].tolist() == [3.0, 2, 1, 9, 8, 5]
    assert checks.evaluate(rising, t).verdict == checks.HOLDS
    assert checks.evaluate(rising, m).verdict == checks.FAILS
    assert checks.flip_rate(rising, t, "mirror").can_fail
    f = checks.flip_rate(rising, t, "shuffle")
    assert f.trials == checks.SHUFFLES and f.rate > 0.5 and f.can_fail
    bound = {"kind": "compare", "value": "y", "op": "<", "threshold": 100.0}
    assert not checks.flip_rate(bound, t, "shuffle").can_fail
    # the same seed, the same shuffles
    assert checks.flip_rate(rising, t).rate == f.rate


# -- every figure and table of the paper is in the report or listed with a reason -------------


def _captions(paper: Paper) -> list[str]:
    """Every figure and table the paper's text names ("Figure 3a" is Figure 3)."""
    text = (SHARED / paper.text).read_text(encoding="utf-8", errors="replace")
    found = re.findall(r"\b(Figure|Table) (\d+)", text)
    return sorted({f"{k} {n}" for k, n in found}, key=lambda s: (s[0], int(s.split()[1])))


def _listed(paper: Paper) -> set[str]:
    out: set[str] = set()
    entries = [*(c for f in paper.figures for c in f.covers), *(n.id for n in paper.not_reproduced)]
    for e in entries:
        m = re.match(r"(Figures?|Tables?) (\d+)(?:-(\d+))?", e)
        if m:
            kind = "Figure" if m.group(1).startswith("Figure") else "Table"
            lo = int(m.group(2))
            hi = int(m.group(3) or lo)
            out |= {f"{kind} {i}" for i in range(lo, hi + 1)}
    return out


def test_every_figure_of_the_paper_is_reproduced_or_listed() -> None:
    assert SHARED.is_dir(), f"../shared (the papers) is missing: {SHARED}"
    for name in ("pebs", "cmcp"):
        paper = load(name)
        caps = _captions(paper)
        assert len(caps) >= 7, (name, caps)
        missing = [c for c in caps if c not in _listed(paper)]
        assert not missing, f"{name}: neither reproduced nor listed as not reproduced: {missing}"
    for name in names():
        paper = load(name)
        for f in paper.figures:
            assert f.covers or f.paper_ref.startswith("not in the paper"), (name, f.id)
        for n in paper.not_reproduced:
            assert n.reason.strip(), (name, n.id)
    pebs = {n.id for n in load("pebs").not_reproduced}
    assert {"Figure 6", "Figure 7"} <= pebs
    # Figure 3 at scale and the Telescope Redis runs are figures with verdicts
    assert "Figure 3" in load("pebs").figure("pebs-scale").covers
    redis = load("telescope").figure("telescope-redis")
    assert any("Real World Benchmark" in c for c in redis.covers)
    assert "Figure 6" in {n.id for n in load("cmcp").not_reproduced}


# -- sensitivity -----------------------------------------------------------------------------------


def test_sensitivity_sweeps_are_valid_overrides() -> None:
    want = {
        ("pebs", "workload.iterations"),
        ("numa", "placement.period"),
        ("telescope", "workload.needles"),
        ("cmcp", "machine.hmem.fault_ns"),
        ("cmcp", "policies[0].p"),
        ("cmcp", "machine.cost.shootdown_target_ns"),
        ("cmcp", "machine.cost.shootdown_base_ns"),
    }
    seen = set()
    for name in names():
        paper = load(name)
        for s in paper.sensitivity:
            seen.add((name, s.key))
            fig, sets = sensitivity_plan(s, paper.figure(s.figure), "quick")
            assert [v for v, _ in sets] == list(s.values)
            for _, extra in sets:
                _, plan, _ = plan_figure(fig, "quick", (), None, extra, s.apply_to)
                assert any(p.overrides[-len(extra) :] == tuple(extra) for p in plan.points)
                for p in plan.points[:12]:  # raises on a bad key or value
                    _native.export(p.spec, list(p.overrides), None)
            # the chosen value is the scenario's own (its runs are the report's)
            first = next(p for p in plan.points if p.overrides[-len(extra) :] == tuple(extra))
            own = list(first.overrides[: -len(extra)])
            doc = tomllib.loads(_native.export(first.spec, own, None))
            for k in s.keys or (s.key,):
                assert float(lookup(doc, k)) == float(s.chosen), (name, k)
    assert want <= seen


def test_sensitivity_summary() -> None:
    from tierlab.reproduce.model import Sensitivity

    s = Sensitivity("k", "f", ("1", "2", "3"), "2", ("c",), "r")
    sr = SensitivityRun(s)

    def run(verdicts: list[str]) -> str:
        sr.runs = [
            (v, None, {"c": checks.Outcome(x, "")}) for v, x in zip(s.values, verdicts, strict=True)
        ]  # type: ignore[misc]
        return sr.summary("c")

    assert run([checks.HOLDS] * 3).startswith("holds over the whole range")
    assert run([checks.FAILS, checks.HOLDS, checks.FAILS]).startswith(
        "holds only at the chosen k = 2"
    )
    assert run([checks.FAILS] * 3).startswith("fails over the whole range")
    assert run([checks.HOLDS, checks.HOLDS, checks.FAILS]) == "holds at k = 1, 2 of 1, 2, 3"


# -- sourced parameters quote their source -------------------------------------------------------


def _norm(s: str) -> str:
    return " ".join(s.replace("\u2019", "'").split()).lower()


_SCALES = (1.0, 1e-3, 1e3, 1e-6, 1e-9, 1e-12, 2.0**-10, 2.0**-20, 2.0**-30, 2.0**-40, 100.0)


def _numbers(text: str) -> list[float]:
    out = []
    for m in re.finditer(r"(\d[\d,]*(?:\.\d+)?)\s*(thousand)?", text):
        v = float(m.group(1).replace(",", ""))
        out.append(v * 1000 if m.group(2) else v)
    return out


def _in_quote(value: object, quote: str) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        nums = _numbers(quote)
        return any(math.isclose(float(value) * k, n, rel_tol=1e-3) for k in _SCALES for n in nums)
    if isinstance(value, str):
        from tierlab.live.units import parse_duration_ns, parse_size

        for parse in (parse_size, parse_duration_ns):
            try:
                return _in_quote(parse(value), quote)
            except (ValueError, TypeError):
                pass
        v = value.lower().replace("-", "").replace("_", "")
        return v in quote.lower().replace("-", "").replace("_", "").replace(" ", "")
    return False


@functools.cache
def _docs(scenario: str) -> list[dict[str, object]]:
    """The scenario and each of its distinct sweep points, expanded."""
    from tierlab.sweep.point import scenario_points

    docs = [tomllib.loads(_native.export(scenario, [], None))]
    _, pts = scenario_points(scenario)
    seen: set[tuple[str, ...]] = set()
    for _, ov in pts:
        key = tuple(
            x
            for x in ov
            if x.startswith(("workload", "placement", "policies", "machine.remote_factor"))
        )
        if key not in seen:
            seen.add(key)
            docs.append(tomllib.loads(_native.export(scenario, ov, None)))
    return docs


def _values(scenario: str, key: str) -> list[object]:
    """The values of ``key`` in a scenario and its sweep points (a telemetry key: of every
    technique that has it)."""
    out = []
    for d in _docs(scenario):
        keys = [key]
        if key.startswith("telemetry[0]"):
            keys = [f"telemetry[{i}]" + key[12:] for i in range(len(d.get("telemetry", [])))]
        for k in keys:
            try:
                out.append(lookup(d, k))
            except (KeyError, IndexError, TypeError):
                continue
    return out


def test_every_sourced_parameter_quotes_a_file_that_holds_its_value() -> None:
    assert SHARED.is_dir(), (
        f"../shared is missing ({SHARED}): the sources of the papers' parameters cannot be "
        "checked; CI always has it"
    )
    problems = []
    for name in names():
        paper = load(name)
        raw = {(p.key, p.scenarios): p for p in paper.parameters}
        for p in provenance.resolve(paper).parameters:
            if p.status != "sourced":
                continue
            q = raw[(p.key, p.scenarios)]
            where = f"{name}: {p.key} ({', '.join(p.scenarios)})"
            if not q.quote:
                problems.append(f"{where}: sourced but quotes nothing (`quote`, `quote_in`)")
                continue
            path = SHARED / q.quote_in
            if not path.is_file():
                problems.append(f"{where}: no file ../shared/{q.quote_in}")
                continue
            if _norm(q.quote) not in _norm(path.read_text(encoding="utf-8", errors="replace")):
                problems.append(f"{where}: ../shared/{q.quote_in} does not contain {q.quote!r}")
                continue
            values = [v for s in p.scenarios for v in _values(s, p.key)]
            if not values:
                problems.append(f"{where}: no value in the scenarios")
            for v in dict.fromkeys(map(str, values)):
                orig = next(x for x in values if str(x) == v)
                if not _in_quote(orig, q.quote):
                    problems.append(f"{where}: the value {v} is not in the quote {q.quote!r}")
    assert not problems, "\n".join(problems)


def test_fig3_and_redis_verdicts_are_computed_from_their_tables() -> None:
    """PEBS Fig. 3 (pebs-scale) and Telescope's Redis runs (telescope-redis) have claims
    evaluated on their results: GeoFEM the worst and MiniFE rising hold on the stored quick
    tables and flip when the overheads are shuffled; the ordering claims of the Redis runs
    flip when the throughputs are shuffled."""
    scale = _table("pebs", "pebs-scale")
    claims = {c.id: c for c in load("pebs").claims}
    for cid in ("scale-geofem-worst", "scale-minife-rises"):
        assert checks.evaluate(claims[cid].check, scale).verdict == checks.HOLDS, cid
    assert claims["scale-range-within-papers"].basis == "uninformative"
    redis = _table("telescope", "telescope-redis")
    tele = {c.id: c for c in load("telescope").claims}
    for cid in ("redis-telescope-flex-above-pebs", "redis-telescope-bounded-above-pebs"):
        c = tele[cid]
        out = checks.evaluate(c.check, redis)
        assert out.verdict in (checks.HOLDS, checks.FAILS), (cid, out)
        assert checks.flip_rate(c.check, redis, c.perturb).can_fail, cid
