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
from tierlab.reproduce.checks import FAILS, HOLDS, NA
from tierlab.reproduce.runner import FigureRun, PaperRun

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


def _counts(pr: PaperRun) -> dict[str, int]:
    out = {HOLDS: 0, FAILS: 0, NA: 0}
    for c in pr.claims:
        out[c.outcome.verdict] += 1
    return out


def _verdict_text(v: str) -> str:
    return {HOLDS: "holds", FAILS: "does not hold", NA: "n/a (not run)"}.get(v, v)


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


def _claims_table(pr: PaperRun) -> pg.Table:
    rows: list[list[object]] = []
    classes: list[str] = []
    for c in pr.claims:
        paper = c.claim.paper
        if c.paper_outcome is not None and c.paper_outcome.verdict != NA:
            paper += f" [paper's table: {c.paper_outcome.observed}]"
        rows.append(
            [
                c.claim.claim,
                paper,
                c.outcome.observed,
                _verdict_text(c.outcome.verdict),
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
        n = _counts(pr)
        pts = sum(len(f.run.points) for f in pr.figures)
        reused = sum(f.run.reused for f in pr.figures)
        rows.append(
            [
                pr.paper.title,
                len(pr.figures),
                pts,
                reused,
                n[HOLDS],
                n[FAILS],
                n[NA],
                sum(f.wall_seconds for f in pr.figures),
            ]
        )
    summary.add(
        pg.Table(
            [
                pg.Column("paper", format="text"),
                pg.Column("figures", format="int"),
                pg.Column("points", format="int"),
                pg.Column("reused", "from earlier runs", "int"),
                pg.Column("claims holding", format="int"),
                pg.Column("not holding", format="int"),
                pg.Column("not run", format="int"),
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
        n = _counts(pr)
        claims.add(
            pg.Paragraph(
                f"{n[HOLDS]} of {len(pr.claims)} claims hold, {n[FAILS]} do not, {n[NA]} could "
                "not be evaluated (their points did not run)."
            ),
            _claims_table(pr),
        )
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
