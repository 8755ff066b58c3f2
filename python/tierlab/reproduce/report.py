"""The report of ``tierlab reproduce``: one interactive page (the layout of
:mod:`tierlab.reporters.page`) and the same content as data.

Files written into the output directory:

- ``index.html``: per paper, the claims table (claim | paper | tierlab | holds?), each figure
  (tierlab's interactive plots, the paper's values with their source, tierlab's table, the
  expanded scenario and the command that reruns each point) and the parameters (sourced,
  calibrated or assumed, with the values the runs used);
- ``report.json``: the same, machine-readable (claims with verdicts, figures' tables,
  parameters, how the run went);
- ``PAPER/FIGURE.csv`` (and ``FIGURE-timeseries.csv`` for telemetry figures): each figure's
  table.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from tierlab.outdir import atomic_output
from tierlab.reporters import page as pg
from tierlab.reproduce import views
from tierlab.reproduce.checks import ERROR, FAILS, HOLDS, NA
from tierlab.reproduce.runner import ClaimResult, FigureRun, PaperRun, SensitivityRun

PROFILE_BANNER = {
    "quick": "Quick run (--quick): every figure is scaled down (fewer points, shorter runs, see "
    "each figure's note), so the numbers are not the full reproduction's and some claims may "
    "come out differently. Run without --quick for the full reproduction.",
    "smoke": "Smoke run (--profile smoke): a tiny run that only checks the pipeline end to "
    "end; its numbers mean nothing.",
}


@dataclass
class RunInfo:
    """How the reproduction was run (shown in the report)."""

    command: str
    profile: str
    executor: str
    wall_seconds: float
    version: str
    seed: int | None = None
    interrupted: bool = False


def _counts(claims: Sequence[ClaimResult]) -> dict[str, int]:
    """Verdicts of the counted claims (evidence), and how many are not counted."""
    out = {HOLDS: 0, FAILS: 0, NA: 0, ERROR: 0, "construction": 0, "uninformative": 0}
    for c in claims:
        if c.claim.counted:
            out[c.outcome.verdict] += 1
        else:
            out[c.claim.basis] += 1
    return out


def tally(pr: PaperRun) -> str:
    """One line: the counted claims' verdicts and the claims not counted."""
    n = _counts(pr.claims)
    counted = sum(1 for c in pr.claims if c.claim.counted)
    text = f"{n[HOLDS]} of {counted} counted claims hold ({n[FAILS]} do not"
    text += f", {n[NA]} not run" if n[NA] else ""
    text += f", {n[ERROR]} errors" if n[ERROR] else ""
    text += f"); not counted: {n['construction']} by construction"
    return text + f", {n['uninformative']} uninformative"


def _verdict_text(v: str) -> str:
    return {HOLDS: "holds", FAILS: "does not hold", NA: "n/a (not run)", ERROR: "error"}.get(v, v)


def _table_block(fr: FigureRun) -> pg.Table:
    view = views.VIEWS[fr.spec.view]
    df = fr.table
    cols = [(name, col) for name, col in view.columns if name in df.columns]
    if "label" in df.columns:
        df = df.sort_values("label", key=lambda s: s.map(views.natural_key))
    rows = [[_cell(r[name]) for name, _ in cols] for _, r in df.iterrows()]
    return pg.Table([c for _, c in cols], rows)


def _cell(v: Any) -> Any:
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _paper_values(fr: FigureRun) -> list[pg.Block]:
    blocks: list[pg.Block] = []
    for v in fr.spec.paper_values:
        # As transcribed: integers with separators, other numbers as written (20, 2.7).
        cols = [pg.Column(c.replace("_", " "), format="text") for c in v.columns]
        rows: list[list[object]] = [
            [
                f"{x:,}"
                if isinstance(x, int) and not isinstance(x, bool)
                else (f"{x:,g}" if isinstance(x, float) else x)
                for x in r
            ]
            for r in v.rows
        ]
        blocks.append(pg.Table(cols, rows, caption=f"{v.title}. Source: {v.source}"))
    if not blocks:
        blocks.append(pg.Paragraph("The paper gives no numbers for this figure."))
    return blocks


def _figure_section(parent: pg.Section, fr: FigureRun, info: RunInfo) -> None:
    spec = fr.spec
    prof = spec.profile(fr.profile)
    badge = fr.profile if fr.profile != "full" else ""
    sec = parent.section(f"{spec.title}", id=spec.id, badge=badge)
    sec.add(
        pg.Paragraph(
            f"<b>Paper:</b> {_e(spec.paper_ref)}. <b>Scenario:</b> <code>{_e(spec.scenario)}"
            f"</code> (<code>tierlab {spec.command}</code>).",
            markup=True,
        )
    )
    if spec.about:
        sec.add(pg.Paragraph(spec.about))
    if fr.profile != "full":
        note = prof.note or "as in the full run"
        sec.add(pg.Paragraph(f"{fr.profile.capitalize()} run: {note}.", css="note"))
    run = fr.run
    done = len(run.finished())
    status = (
        f"{done:,} of {len(run.points):,} points finished ({run.reused:,} reused from earlier "
        f"runs), {pg.fmt_seconds(fr.wall_seconds)} of wall time"
    )
    if run.failures:
        status += f"; {len(run.failures)} failed"
    if run.interrupted:
        status += "; interrupted (Ctrl-C)"
    sec.add(pg.Paragraph(status + "."))
    view = views.VIEWS[spec.view]
    from tierlab.reproduce.views import FigureData

    try:
        figures = view.plot(FigureData(spec, fr.table, fr.extra))
    except Exception as exc:  # a partial table (an interrupted run): say so, keep the rest
        figures = []
        sec.add(pg.Paragraph(f"The plot could not be drawn from these results: {exc}"))
    for fig in figures:
        sec.add(fig)
    sec.add(pg.Details("The paper's values", _paper_values(fr), open=True))
    if not fr.table.empty:
        sec.add(pg.Details(f"tierlab's numbers ({len(fr.table):,} rows)", [_table_block(fr)]))
    for failure in run.failures:
        sec.add(pg.Paragraph(f"Point failed: {failure}"))
    cmds = fr.commands(info.seed)
    rerun = pg.Details(
        f"Rerun: the expanded scenario and the command of each of the {len(cmds):,} points",
        [
            pg.Paragraph(
                "Each command reruns one point alone (the same expanded scenario, so the same "
                "numbers); `tierlab export` with the same arguments prints its scenario."
            ),
            pg.Table(
                [pg.Column("point", format="text"), pg.Column("command", format="text")],
                [[label or "(the scenario)", cmd] for label, cmd in cmds],
            ),
            pg.Details(
                f"Expanded scenario of the first point ({cmds[0][0] if cmds else '-'}); every "
                f"point's is in {fr.spec.id}-scenarios/ beside this page",
                [pg.Code(fr.scenario)],
            ),
        ],
    )
    sec.add(rerun)


def _e(s: str) -> str:
    import html

    return html.escape(s)


def _claims_table(claims: Sequence[ClaimResult], counted: bool) -> pg.Table:
    rows: list[list[object]] = []
    classes: list[str] = []
    for c in claims:
        paper = c.claim.paper
        if c.paper_outcome is not None and c.paper_outcome.verdict != NA:
            paper += f" [paper's table: {c.paper_outcome.observed}]"
        rows.append(
            [
                c.claim.claim,
                paper,
                c.outcome.observed,
                _verdict_text(c.outcome.verdict),
                "; ".join(c.sensitivity) or "-",
                (c.flip.text() if c.flip is not None else "-")
                if counted
                else f"{c.claim.basis}: {c.claim.basis_note}",
                f"{c.claim.figure}; {c.claim.source}",
            ]
        )
        classes.append({HOLDS: "holds", FAILS: "fails"}.get(c.outcome.verdict, "na"))
    return pg.Table(
        [
            pg.Column("claim", format="text"),
            pg.Column("paper", format="text"),
            pg.Column("tierlab", format="text"),
            pg.Column("holds?", format="text"),
            pg.Column("over the free settings' range", "Sensitivity", "text"),
            pg.Column(
                "can it fail?" if counted else "why not counted",
                "the verdict with the claim's column shuffled across the points, or the "
                "opposite pattern"
                if counted
                else "",
                format="text",
            ),
            pg.Column("figure; source", format="text"),
        ],
        rows,
        classes=classes,
        css="claims",
    )


def _parameters_table(pr: PaperRun) -> pg.Table:
    rows: list[list[object]] = []
    classes: list[str] = []
    for p, values in zip(pr.paper.parameters, pr.parameter_values or [], strict=False):
        shown = ", ".join(values[:6]) + (f", ... ({len(values)} values)" if len(values) > 6 else "")
        rows.append(
            [
                p.key,
                shown or "(not in the points run)",
                p.status + (" (declared in the code)" if p.declared else ""),
                p.provenance + (f" ({p.note})" if p.note else ""),
                ", ".join(p.scenarios),
            ]
        )
        classes.append(p.status)
    return pg.Table(
        [
            pg.Column("parameter", format="text"),
            pg.Column("value in these runs", format="text"),
            pg.Column("status", format="text"),
            pg.Column("source / calibrated to / reason", format="text"),
            pg.Column("scenarios", format="text"),
        ],
        rows,
        classes=classes,
        css="parameters",
    )


def build_page(runs: Sequence[PaperRun], info: RunInfo) -> pg.Page:
    """The report page of the papers run."""
    title = (
        "tierlab reproduce: " + runs[0].paper.title
        if len(runs) == 1
        else f"tierlab reproduce: {len(runs)} papers"
    )
    page = pg.Page(
        title,
        subtitle=f"{info.command} (tierlab {info.version})",
        banner=PROFILE_BANNER.get(info.profile, ""),
        footer="Written by tierlab reproduce. Verdicts are computed from the results by each "
        "claim's predicate (python/tierlab/reproduce/checks.py); claims, figures and "
        "parameters are data (python/tierlab/reproduce/papers/).",
    )
    summary = page.section("Summary", id="summary")
    rows = []
    for pr in runs:
        n = _counts(pr.claims)
        sweeps = [fr for sr in pr.sensitivity for _, fr, _ in sr.runs]
        pts = sum(len(f.run.points) for f in [*pr.figures, *sweeps])
        reused = sum(f.run.reused for f in [*pr.figures, *sweeps])
        rows.append(
            [
                pr.paper.title,
                len(pr.figures),
                pts,
                reused,
                n[HOLDS],
                n[FAILS],
                n[NA] + n[ERROR],
                n["construction"],
                n["uninformative"],
                sum(f.wall_seconds for f in [*pr.figures, *sweeps]),
            ]
        )
    summary.add(
        pg.Table(
            [
                pg.Column("paper", format="text"),
                pg.Column("figures", format="int"),
                pg.Column("points", format="int"),
                pg.Column("reused", "from earlier runs", "int"),
                pg.Column("counted claims holding", format="int"),
                pg.Column("not holding", format="int"),
                pg.Column("not run or error", format="int"),
                pg.Column("by construction", "not counted", "int"),
                pg.Column("uninformative", "not counted", "int"),
                pg.Column("wall time", format="seconds"),
            ],
            rows,
        ),
        pg.KeyValues(
            [
                ("command", info.command),
                ("profile", info.profile),
                ("executor", info.executor),
                ("wall time", pg.fmt_seconds(info.wall_seconds)),
                ("tierlab", info.version),
                ("seed", "each scenario's" if info.seed is None else str(info.seed)),
                (
                    "interrupted",
                    "yes: the report holds what finished" if info.interrupted else "no",
                ),
            ]
        ),
    )
    summary.add(
        pg.Paragraph(
            "Counted claims are evidence: a test shuffles each one's column across the points "
            "(or applies the opposite pattern) and requires the verdict to change. Claims "
            "true by construction of the model, and bounds that hold for almost any "
            "arrangement of the results, are shown but not counted."
        )
    )
    for pr in runs:
        summary.add(
            pg.Paragraph(f"<b>{_e(pr.paper.id)}</b>: {_e(tally(pr))}.", markup=True),
            _inventory_table(pr),
        )
    for pr in runs:
        p = pr.paper
        sec = page.section(p.title, id=p.id, badge=info.profile if info.profile != "full" else "")
        sec.add(
            pg.Paragraph(
                f"{_e(p.citation)}. Text: <code>../shared/{_e(p.text)}</code>; tierlab's page: "
                f"<code>{_e(p.docs)}</code>.",
                markup=True,
            )
        )
        claims = sec.section("Claims", id=f"{p.id}-claims")
        counted = [c for c in pr.claims if c.claim.counted]
        others = [c for c in pr.claims if not c.claim.counted]
        claims.add(
            pg.Paragraph(
                tally(pr) + ". The range column says whether a claim holds over the whole "
                "plausible range of a free setting it depends on, or only at the value the "
                "scenarios chose (see Sensitivity)."
            ),
            _claims_table(counted, True),
        )
        if others:
            claims.add(
                pg.Paragraph(
                    "Not counted as evidence: true by construction of the model, or holding "
                    "for almost any arrangement of the results."
                ),
                _claims_table(others, False),
            )
        if pr.sensitivity:
            sens = sec.section("Sensitivity to free settings", id=f"{p.id}-sensitivity")
            for sr in pr.sensitivity:
                sens.add(*_sensitivity_blocks(pr, sr))
        for fr in pr.figures:
            _figure_section(sec, fr, info)
        params = sec.section("Parameters", id=f"{p.id}-parameters")
        counts = {
            s: sum(1 for x in p.parameters if x.status == s)
            for s in ("sourced", "calibrated", "assumed", "setting")
        }
        declared = sum(1 for x in p.parameters if x.declared)
        params.add(
            pg.Paragraph(
                f"{counts['sourced']} sourced (the value comes from the paper or a cited "
                f"measurement), {counts['calibrated']} calibrated (fitted to a number of the "
                f"paper, named), {counts['assumed']} assumed (no source gives the value; the "
                f"reason is given), {counts['setting']} settings of the experiment. "
                f"{declared} are the engine's declared defaults, labelled as the code declares "
                "them (`tierlab params`); the others are values the scenarios set, labelled by "
                "the paper file."
            ),
            _parameters_table(pr),
        )
    return page


def _inventory_table(pr: PaperRun) -> pg.Table:
    """Every figure and table of the paper: reproduced (with the counted verdicts of the
    report's figure that covers it) or not (with the reason)."""
    rows: list[list[object]] = []
    classes: list[str] = []
    ran = {f.spec.id for f in pr.figures}
    for spec in pr.paper.figures:
        mine = [c for c in pr.claims if c.claim.figure == spec.id and c.claim.counted]
        held = sum(c.outcome.verdict == HOLDS for c in mine)
        if spec.id not in ran:
            verdict = "not run (--figures)"
        elif mine:
            verdict = f"{held} of {len(mine)} counted claims hold"
        else:
            verdict = "no counted claim"
        rows.append([", ".join(spec.covers) or spec.paper_ref, f"{spec.id}: {spec.title}", verdict])
        classes.append("holds" if mine and held == len(mine) else "fails" if mine else "na")
    for n in pr.paper.not_reproduced:
        why = "not reproduced: " + n.reason
        if n.command:
            why += f" (see `{n.command}`)"
        rows.append([n.id, n.title, why])
        classes.append("na")
    return pg.Table(
        [
            pg.Column("the paper's", format="text"),
            pg.Column("in this report", format="text"),
            pg.Column("verdict", format="text"),
        ],
        rows,
        classes=classes,
        css="inventory",
    )


def _sensitivity_blocks(pr: PaperRun, sr: SensitivityRun) -> list[pg.Block]:
    s = sr.spec
    by_id = {c.claim.id: c.claim for c in pr.claims}
    rows: list[list[object]] = []
    for value, fr, outcomes in sr.runs:
        mark = " (chosen)" if value == s.chosen else ""
        rows.append(
            [f"{value}{mark}"]
            + [
                f"{_verdict_text(outcomes[c].verdict)}: {outcomes[c].observed}"
                if c in outcomes
                else "-"
                for c in s.claims
            ]
            + [len(fr.run.finished())]
        )
    cols = [pg.Column(s.key, format="text")]
    cols += [pg.Column(c, by_id[c].claim if c in by_id else "", "text") for c in s.claims]
    cols += [pg.Column("points", format="int")]
    summary = "; ".join(f"{c}: {sr.summary(c)}" for c in s.claims)
    return [
        pg.Paragraph(
            f"<b>{_e(s.key)}</b> on {_e(s.figure)}, chosen value {_e(s.chosen)}, swept over "
            f"{_e(', '.join(s.values))}: {_e(s.range_note)}",
            markup=True,
        ),
        pg.Table(cols, rows, caption=summary),
    ]


def report_json(runs: Sequence[PaperRun], info: RunInfo) -> dict[str, Any]:
    """Everything in the report, as JSON."""
    papers = []
    for pr in runs:
        p = pr.paper
        papers.append(
            {
                "id": p.id,
                "title": p.title,
                "citation": p.citation,
                "claims": [
                    {
                        "id": c.claim.id,
                        "figure": c.claim.figure,
                        "claim": c.claim.claim,
                        "paper": c.claim.paper,
                        "source": c.claim.source,
                        "check": c.claim.check,
                        "verdict": c.outcome.verdict,
                        "observed": c.outcome.observed,
                        "paper_observed": c.paper_outcome.observed if c.paper_outcome else None,
                        "counted": c.claim.counted,
                        "basis": c.claim.basis,
                        "basis_note": c.claim.basis_note,
                        "perturbation": c.claim.perturb,
                        "flip_rate": c.flip.rate if c.flip is not None else None,
                        "can_fail": c.flip.can_fail if c.flip is not None else None,
                        "sensitivity": c.sensitivity,
                    }
                    for c in pr.claims
                ],
                "figures": [
                    {
                        "id": f.spec.id,
                        "title": f.spec.title,
                        "scenario": f.spec.scenario,
                        "command": f.spec.command,
                        "profile": f.profile,
                        "overrides": f.overrides,
                        "points": len(f.run.points),
                        "finished": len(f.run.finished()),
                        "reused": f.run.reused,
                        "failed": [str(e) for e in f.run.failures],
                        "interrupted": f.run.interrupted,
                        "wall_seconds": f.wall_seconds,
                        "commands": [
                            {"point": lab, "command": c} for lab, c in f.commands(info.seed)
                        ],
                        "table": pg.clean_json(
                            json.loads(f.table.to_json(orient="records", default_handler=str))
                        )
                        if not f.table.empty
                        else [],
                    }
                    for f in pr.figures
                ],
                "tally": tally(pr),
                "not_reproduced": [
                    {"id": n.id, "title": n.title, "reason": n.reason, "command": n.command}
                    for n in p.not_reproduced
                ],
                "sensitivity": [
                    {
                        "key": sr.spec.key,
                        "figure": sr.spec.figure,
                        "chosen": sr.spec.chosen,
                        "range_note": sr.spec.range_note,
                        "values": [
                            {
                                "value": v,
                                "claims": {
                                    c: {"verdict": o.verdict, "observed": o.observed}
                                    for c, o in outcomes.items()
                                },
                            }
                            for v, _, outcomes in sr.runs
                        ],
                        "summary": {c: sr.summary(c) for c in sr.spec.claims},
                    }
                    for sr in pr.sensitivity
                ],
                "parameters": [
                    {
                        "key": x.key,
                        "scenarios": list(x.scenarios),
                        "status": x.status,
                        "provenance": x.provenance,
                        "declared": x.declared,
                        "values": vals,
                    }
                    for x, vals in zip(p.parameters, pr.parameter_values, strict=False)
                ],
            }
        )
    return {
        "command": info.command,
        "profile": info.profile,
        "executor": info.executor,
        "wall_seconds": info.wall_seconds,
        "version": info.version,
        "seed": info.seed,
        "interrupted": info.interrupted,
        "papers": papers,
    }


def write(runs: Sequence[PaperRun], info: RunInfo, out_dir: Path) -> list[Path]:
    """Write the report's files (see the module docs) into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for pr in runs:
        d = out_dir / pr.paper.id
        d.mkdir(exist_ok=True)
        for f in pr.figures:
            if not f.table.empty:
                path = d / f"{f.spec.id}.csv"
                f.table.to_csv(path, index=False)
                written.append(path)
            sd = d / f"{f.spec.id}-scenarios"
            for p, r in f.run.finished():
                sd.mkdir(exist_ok=True)
                name = (p.label or f.spec.scenario).replace("/", "_").replace("%", "pct")
                path = sd / f"{name}.toml"
                path.write_text(r.scenario)
                written.append(path)
            ts = f.extra.get("timeseries")
            if isinstance(ts, pd.DataFrame) and not ts.empty:
                path = d / f"{f.spec.id}-timeseries.csv"
                ts.to_csv(path, index=False)
                written.append(path)
    js = out_dir / "report.json"
    with atomic_output(js) as tmp:
        tmp.write_text(json.dumps(pg.clean_json(report_json(runs, info)), indent=2) + "\n")
    written.append(js)
    written.append(build_page(runs, info).write(out_dir / "index.html"))
    return written
