"""Running a paper's figures through the sweep engine.

Each figure is a sweep of its scenario (``tierlab run`` or ``tierlab telemetry``): the
figure's profile (``full``, ``quick``, ``smoke``) keeps some of the points and adds
overrides, then every point runs on the executor given, with the result store of the
output directory (a rerun reuses finished points; points shared by two figures, with the
same expanded scenario, are computed once). The kind of the sweep makes its typed report,
the figure's view its tidy table; the claims are evaluated on that table.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from tierlab.reproduce import checks, views
from tierlab.reproduce.model import Claim, FigureSpec, Paper, Sensitivity
from tierlab.sweep.engine import ResultStore, SweepProgress, SweepRun, execute
from tierlab.sweep.executor import Executor
from tierlab.sweep.kinds import SweepKind, SweepPlan
from tierlab.sweep.point import Point


@dataclass
class ClaimResult:
    claim: Claim
    outcome: checks.Outcome
    #: The same check on the paper's own numbers (``on_paper``), if any.
    paper_outcome: checks.Outcome | None = None
    #: how the verdict responds to the claim's perturbation (its column shuffled across the
    #: points, or the opposite pattern)
    flip: checks.Flip | None = None
    #: the verdict over the range of each free parameter swept for this claim
    sensitivity: list[str] = field(default_factory=list)


@dataclass
class SensitivityRun:
    """A free parameter swept: the figure at each value, and the verdicts of the claims it
    moves at each."""

    spec: Sensitivity
    #: per value: the figure's run at that value and the outcome of each claim
    runs: list[tuple[str, FigureRun, dict[str, checks.Outcome]]] = field(default_factory=list)

    def summary(self, claim: str) -> str:
        """Whether ``claim`` holds over the whole range, only at the chosen value, or at some
        of the values."""
        verdicts = [(v, o[claim].verdict) for v, _, o in self.runs if claim in o]
        held = [v for v, x in verdicts if x == checks.HOLDS]
        run = [v for v, x in verdicts if x in (checks.HOLDS, checks.FAILS)]
        key, chosen = self.spec.key, self.spec.chosen
        if not run:
            return f"{key}: not run"
        if len(held) == len(run) and len(run) == len(self.spec.values):
            return f"holds over the whole range of {key} ({', '.join(run)})"
        if not held:
            return f"fails over the whole range of {key} ({', '.join(run)})"
        if held == [chosen]:
            others = ", ".join(v for v in run if v != chosen)
            return f"holds only at the chosen {key} = {chosen} (not at {others})"
        return f"holds at {key} = {', '.join(held)} of {', '.join(run)}"


@dataclass
class FigureRun:
    """One figure's sweep: what ran, how it went, and its tidy table."""

    spec: FigureSpec
    profile: str
    overrides: list[str]
    plan: SweepPlan
    run: SweepRun
    table: pd.DataFrame
    extra: dict[str, pd.DataFrame]
    #: the expanded scenario of the first point
    scenario: str
    wall_seconds: float

    def commands(self, seed: int | None = None) -> list[tuple[str, str]]:
        """``(label, command)`` that reruns each point alone."""
        return [(p.label, point_command(self.spec, p, seed)) for p in self.plan.points]


@dataclass
class PaperRun:
    paper: Paper
    figures: list[FigureRun] = field(default_factory=list)
    claims: list[ClaimResult] = field(default_factory=list)
    #: per parameter (in the paper's order): the values seen in the points that ran
    parameter_values: list[list[str]] = field(default_factory=list)
    sensitivity: list[SensitivityRun] = field(default_factory=list)

    @property
    def interrupted(self) -> bool:
        return any(f.run.interrupted for f in self.figures) or any(
            fr.run.interrupted for sr in self.sensitivity for _, fr, _ in sr.runs
        )


def figure_kind(spec: FigureSpec, profile: str) -> SweepKind[Any]:
    """The sweep kind that runs ``spec`` (with the profile's technique selection)."""
    if spec.command == "pebs-scale":
        from tierlab.pebs_scale import PebsScaleKind

        return PebsScaleKind()
    if spec.command == "telemetry":
        from tierlab.telemetry import TelemetryKind

        prof = spec.profile(profile)
        techniques = prof.techniques if prof.techniques is not None else spec.techniques
        baseline = prof.baseline if prof.baseline is not None else spec.baseline
        return TelemetryKind(techniques, baseline=baseline, keep_samples=False)
    from tierlab.sweep import kinds
    from tierlab.sweep.point import scenario_points

    name, _ = scenario_points(spec.scenario)
    return kinds.for_sweep(name)


def plan_figure(
    spec: FigureSpec,
    profile: str,
    user_set: Sequence[str] = (),
    seed: int | None = None,
    extra: Sequence[str] = (),
    extra_points: Sequence[str] = (),
) -> tuple[SweepKind[Any], SweepPlan, list[str]]:
    """The kind, the plan (the profile's points) and the overrides of a figure; ``extra``
    overrides go last on the points whose label matches a glob of ``extra_points`` (every
    point when it is empty)."""
    prof = spec.profile(profile)
    overrides = [*prof.set, *user_set]
    kind = figure_kind(spec, profile)
    plan = kind.plan(spec.scenario, list(user_set), seed, None)
    # The profile's overrides go after each point's own (they may name keys only some
    # points' workloads have) and before the user's.
    n_user = len(user_set)
    points = [
        dataclasses.replace(
            p,
            overrides=(
                *p.overrides[: len(p.overrides) - n_user],
                *prof.set,
                *p.overrides[len(p.overrides) - n_user :],
            ),
        )
        for p in plan.points
    ]
    plan = dataclasses.replace(plan, points=points)
    if prof.points:
        keep = [
            p
            for p in plan.points
            if not p.sweep_label or any(fnmatch.fnmatchcase(p.sweep_label, g) for g in prof.points)
        ]
        labels = [
            x for x in plan.labels if not x or any(fnmatch.fnmatchcase(x, g) for g in prof.points)
        ]
        plan = dataclasses.replace(plan, points=keep, labels=labels)
    if extra:
        plan = dataclasses.replace(
            plan,
            points=[
                dataclasses.replace(p, overrides=(*p.overrides, *extra))
                if not extra_points
                or any(fnmatch.fnmatchcase(p.sweep_label, g) for g in extra_points)
                else p
                for p in plan.points
            ],
        )
    return kind, plan, overrides


def point_command(spec: FigureSpec, point: Point, seed: int | None = None) -> str:
    """The ``tierlab`` command that reruns ``point`` alone (same expanded scenario)."""
    q = shlex.quote
    if spec.command == "pebs-scale":  # a single-node run of the scenario, every override
        sets = [x for o in point.overrides for x in ("--set", q(o))]
        seed_arg = ["--seed", str(seed)] if seed is not None else []
        return " ".join(["tierlab", "run", spec.scenario, *sets, *seed_arg])
    sets = []
    # The point's own overrides come from its [[sweep]] entry (--points selects it); the
    # rest are the profile's and the user's.
    n_own = 0
    if point.sweep_label:
        from tierlab.sweep.point import scenario_points

        _, sweep = scenario_points(spec.scenario)
        own = dict(sweep).get(point.sweep_label, [])
        n_own = len(own)
    extra = list(point.overrides[n_own:])
    if n_own and extra and not valid_on_base(spec.scenario, tuple(extra)):
        # `tierlab run --points` checks --set against the scenario before the point's own
        # overrides: repeat those first (the same values, so the same expanded scenario).
        extra = list(point.overrides)
    for s in extra:
        sets += ["--set", q(s)]
    seed_arg = ["--seed", str(seed)] if seed is not None else []
    pts = ["--points", q(point.sweep_label)] if point.sweep_label else []
    if spec.command == "telemetry":
        if point.techniques:
            cmd = ["tierlab", "telemetry", spec.scenario, *pts, "--techniques"]
            cmd += [q(",".join(point.techniques)), "--no-baseline"]
        else:
            cmd = ["tierlab", "run", spec.scenario, *pts, "--set", q("telemetry=[]")]
        return " ".join([*cmd, *sets, *seed_arg])
    return " ".join(["tierlab", "run", spec.scenario, *pts, *sets, *seed_arg])


@functools.cache
def valid_on_base(scenario: str, overrides: tuple[str, ...]) -> bool:
    """Whether ``overrides`` apply to ``scenario`` itself (before any sweep point's)."""
    from tierlab import _native

    try:
        _native.sweep_points(scenario, list(overrides))
        return True
    except Exception:
        return False


def run_figure(
    spec: FigureSpec,
    profile: str,
    executor: Executor,
    *,
    store: ResultStore | None = None,
    progress: SweepProgress | None = None,
    user_set: Sequence[str] = (),
    seed: int | None = None,
    extra: Sequence[str] = (),
    extra_points: Sequence[str] = (),
) -> FigureRun:
    """Run one figure (see the module docs; ``extra``: :func:`plan_figure`)."""
    from tierlab import _native

    kind, plan, overrides = plan_figure(spec, profile, user_set, seed, extra, extra_points)
    start = time.monotonic()
    run = execute(plan.points, executor, progress, store)
    wall = time.monotonic() - start
    report = kind.report(plan, run)
    view = views.VIEWS[spec.view]
    table, tables = view.table(report, run)
    first = plan.points[0] if plan.points else None
    scenario = (
        _native.export(first.spec, list(first.overrides), first.seed) if first is not None else ""
    )
    return FigureRun(spec, profile, overrides, plan, run, table, tables, scenario, wall)


def paper_table(spec: FigureSpec) -> pd.DataFrame | None:
    v = spec.paper_table()
    if v is None:
        return None
    return pd.DataFrame([list(r) for r in v.rows], columns=list(v.columns))


def evaluate_claims(paper: Paper, figures: Sequence[FigureRun]) -> list[ClaimResult]:
    """Every claim of ``paper`` evaluated on its figure's table (``n/a`` when the figure
    did not run)."""
    by_id = {f.spec.id: f for f in figures}
    out = []
    for c in paper.claims:
        f = by_id.get(c.figure)
        table = f.table if f is not None else pd.DataFrame()
        outcome = checks.evaluate(c.check, table)
        po = None
        if c.on_paper:
            pt = paper_table(paper.figure(c.figure))
            if pt is not None:
                po = checks.evaluate(c.check, pt)
        flip = checks.flip_rate(c.check, table, c.perturb) if not table.empty else None
        out.append(ClaimResult(c, outcome, po, flip))
    return out


def sensitivity_plan(
    sens: Sensitivity, spec: FigureSpec, profile: str
) -> tuple[FigureSpec, list[tuple[str, list[str]]]]:
    """The figure as a sensitivity sweep runs it (its points and techniques restricted as
    the sweep says) and each value with its overrides. The smoke profile, which only checks
    the pipeline, keeps its own few points and runs one value besides the chosen one."""
    from tierlab.reproduce.model import Profile

    prof = spec.profile(profile)
    keys = sens.keys or (sens.key,)
    values = list(sens.values)
    if profile == "smoke":
        values = [sens.chosen, next(v for v in values if v != sens.chosen)]
    else:
        prof = Profile(
            points=sens.points or prof.points,
            set=prof.set,
            techniques=sens.techniques if sens.techniques is not None else prof.techniques,
            baseline=prof.baseline,
            note=prof.note,
        )
    fig = dataclasses.replace(spec, profiles={**spec.profiles, profile: prof})
    return fig, [(v, [f"{k}={v}" for k in keys]) for v in values]


def run_sensitivity(
    paper: Paper,
    sens: Sensitivity,
    profile: str,
    executor: Executor,
    *,
    store: ResultStore | None = None,
    progress: Callable[[FigureSpec, int], SweepProgress | None] | None = None,
    user_set: Sequence[str] = (),
    seed: int | None = None,
) -> SensitivityRun:
    """Run ``sens``'s figure at each value of its parameter and evaluate its claims."""
    fig, sets = sensitivity_plan(sens, paper.figure(sens.figure), profile)
    out = SensitivityRun(sens)
    claims = [c for c in paper.claims if c.id in sens.claims]
    for value, extra in sets:
        at = dataclasses.replace(fig, id=f"{fig.id} ({sens.key} = {value})")
        _, plan, _ = plan_figure(at, profile, user_set, seed, extra, sens.apply_to)
        prog = progress(at, len(plan.points)) if progress is not None else None
        fr = run_figure(
            at,
            profile,
            executor,
            store=store,
            progress=prog,
            user_set=user_set,
            seed=seed,
            extra=extra,
            extra_points=sens.apply_to,
        )
        outcomes = {c.id: checks.evaluate(c.check, fr.table) for c in claims}
        out.runs.append((value, fr, outcomes))
        if fr.run.interrupted:
            break
    return out


def lookup(doc: Any, key: str) -> Any:
    """The value at a dotted ``--set``-style key (``machine.nodes[0].latency_ns``) of a
    parsed scenario, or KeyError."""
    cur = doc
    for part in key.split("."):
        name, *idx = part.split("[")
        if name:
            cur = cur[name]
        for i in idx:
            cur = cur[int(i.rstrip("]"))]
    return cur


def parameter_values(paper: Paper, figures: Sequence[FigureRun]) -> list[list[str]]:
    """For each parameter, the distinct values it had in the points that ran (as TOML-ish
    text), in first-seen order."""
    import tomllib

    docs: dict[str, list[Any]] = {}
    for f in figures:
        for _, r in f.run.finished():
            docs.setdefault(f.spec.scenario, []).append(tomllib.loads(r.scenario))
    out: list[list[str]] = []
    for p in paper.parameters:
        seen: dict[str, None] = {}
        for s in p.scenarios:
            key = p.key
            for d in docs.get(s, []):
                # A per-technique run holds its technique as telemetry[0]: a key of the
                # scenario's i-th technique is looked up there when the run has no i-th.
                for k in (key, None):
                    try:
                        seen[_text(lookup(d, k or _technique_key(s, key, d)))] = None
                        break
                    except (KeyError, IndexError, TypeError, ValueError):
                        continue
        out.append(list(seen))
    return out


@functools.cache
def _technique_names(scenario: str) -> tuple[str, ...]:
    """The names of a scenario's ``[[telemetry]]`` techniques, in order."""
    import tomllib

    from tierlab import _native

    try:
        doc = tomllib.loads(_native.export(scenario, [], None))
    except Exception:
        return ()
    return tuple(str(t.get("name", "")) for t in doc.get("telemetry", []))


def _technique_key(scenario: str, key: str, run_doc: dict[str, Any]) -> str:
    """``key`` as it is in one technique's run: ``telemetry[i]`` names the scenario's i-th
    technique, which a per-technique run of ``tierlab telemetry`` holds as its only entry."""
    if not key.startswith("telemetry["):
        return key
    i = int(key[len("telemetry[") : key.index("]")])
    names = _technique_names(scenario)
    mine = [str(t.get("name", "")) for t in run_doc.get("telemetry", [])]
    if i >= len(names) or names[i] not in mine:
        raise KeyError(key)
    return f"telemetry[{mine.index(names[i])}]" + key[key.index("]") + 1 :]


def _text(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, list):
        return "[" + ", ".join(_text(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_text(x)}" for k, x in v.items()) + "}"
    return str(v)


def run_paper(
    paper: Paper,
    profile: str,
    executor: Executor,
    *,
    store: ResultStore | None = None,
    progress: Callable[[FigureSpec, int], SweepProgress | None] | None = None,
    user_set: Sequence[str] = (),
    seed: int | None = None,
    figures: str | None = None,
    sweeps: bool = True,
) -> PaperRun:
    """Run every figure of ``paper`` (those whose id matches the glob ``figures``) and
    evaluate its claims. ``progress(spec, points)`` gives the progress display of each
    figure's sweep. Stops after a figure that was interrupted (Ctrl-C). Parameters the paper
    file gives no provenance for are labelled with their declaration's
    (:func:`tierlab.reproduce.provenance.resolve`)."""
    from tierlab.reproduce.provenance import resolve

    paper = resolve(paper)
    out = PaperRun(paper)
    for spec in paper.figures:
        if figures and not fnmatch.fnmatchcase(spec.id, figures):
            continue
        _, plan, _ = plan_figure(spec, profile, user_set, seed)
        prog = progress(spec, len(plan.points)) if progress is not None else None
        fr = run_figure(
            spec, profile, executor, store=store, progress=prog, user_set=user_set, seed=seed
        )
        out.figures.append(fr)
        if fr.run.interrupted:
            break
    ran = {f.spec.id for f in out.figures}
    if sweeps and not out.interrupted:
        for sens in paper.sensitivity:
            if sens.figure not in ran:
                continue
            sr = run_sensitivity(
                paper,
                sens,
                profile,
                executor,
                store=store,
                progress=progress,
                user_set=user_set,
                seed=seed,
            )
            out.sensitivity.append(sr)
            if any(fr.run.interrupted for _, fr, _ in sr.runs):
                break
    out.claims = evaluate_claims(paper, out.figures)
    for c in out.claims:
        c.sensitivity = [
            sr.summary(c.claim.id) for sr in out.sensitivity if c.claim.id in sr.spec.claims
        ]
    out.parameter_values = parameter_values(paper, out.figures)
    return out
