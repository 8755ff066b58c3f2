"""Tuning a scenario's parameters: grid or Bayesian search over any scenario keys, every
trial a point of the sweep engine (same executors, results stored and reused).

A search is a scenario (one of its ``[[sweep]]`` points, when it has a sweep), parameters
(:class:`Param`: a key and a range: ``2:8:2``, ``0.1:0.9``, ``1:1000:log``, or a list of
choices ``["10ms", "50ms"]``), and an objective: a statistic of the run (a key of the flat
stats, e.g. ``workload.kv.throughput``) to maximize or minimize.

- ``grid`` runs every combination (continuous ranges at ``grid_points`` values each).
- ``bayes`` asks Optuna's TPE sampler (seeded, so a search is repeatable) for ``trials``
  settings, in batches as wide as the executor, and tells it each batch's values.

Each trial is a :class:`~tierlab.sweep.point.Point` whose overrides set the parameters;
with a result store (``--out DIR``: ``DIR/points/``) a finished trial is kept and a rerun of
the same search reuses it, so a killed search resumes (a Bayesian search asks for the same
settings again, since its sampler is seeded and told the same values, and finds them
stored).
"""

from __future__ import annotations

import itertools
import math
import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tierlab.sweep.engine import ResultStore, SweepProgress, execute
from tierlab.sweep.executor import Executor
from tierlab.sweep.point import Point, PointResult


class TuneError(ValueError):
    """A search that cannot run as asked (bad range, unknown objective, ...)."""


_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


#: Most trials a grid search may have (the grid is made before any point runs).
MAX_GRID = 100_000


@dataclass(frozen=True)
class Param:
    """A tuned scenario key and its range (see the module docs)."""

    name: str
    kind: str  # "choice", "int" or "float"
    choices: tuple[Any, ...] = ()
    low: float = 0.0
    high: float = 0.0
    step: float | None = None
    log: bool = False

    @classmethod
    def parse(cls, text: str) -> Param:
        """``NAME=RANGE`` (see the module docs)."""
        if "=" not in text or not text.split("=", 1)[0].strip():
            raise TuneError(f"--param {text!r}: expected NAME=RANGE (e.g. x=2:8:2)")
        name, spec = (s.strip() for s in text.split("=", 1))
        m = re.fullmatch(rf"({_NUM}):({_NUM})(?::({_NUM}|log))?", spec)
        if m:
            lo, hi, third = m.group(1), m.group(2), m.group(3)
            is_int = all(re.fullmatch(r"[-+]?\d+", x) for x in (lo, hi)) and (
                third is None or third == "log" or re.fullmatch(r"[-+]?\d+", third) is not None
            )
            low, high = float(lo), float(hi)
            if high < low:
                raise TuneError(f"--param {text!r}: the range ends below its start")
            log = third == "log"
            step = None if third is None or log else float(third)
            if step is not None and step <= 0:
                raise TuneError(f"--param {text!r}: the step must be positive")
            if log and low <= 0:
                raise TuneError(f"--param {text!r}: a log range must start above 0")
            return cls(name, "int" if is_int else "float", low=low, high=high, step=step, log=log)
        try:
            value = tomllib.loads(f"v = {spec}")["v"]
        except tomllib.TOMLDecodeError:
            value = spec  # a bare word: one string
        values = value if isinstance(value, list) else [value]
        if not values:
            raise TuneError(f"--param {text!r}: an empty list of choices")
        return cls(name, "choice", choices=tuple(values))

    def grid_size(self, points: int = 5) -> int:
        """How many values :meth:`grid` gives at most (counted without making them)."""
        if self.kind == "choice":
            return len(self.choices)
        if self.step is not None:
            return math.floor((self.high - self.low) / self.step + 1e-9) + 1
        if self.kind == "int" and not self.log:
            return int(self.high) - int(self.low) + 1
        return points

    def first(self) -> Any:
        """The first value of :meth:`grid` (made alone)."""
        if self.kind == "choice":
            return self.choices[0]
        return round(self.low) if self.kind == "int" else round(self.low, 12)

    def grid(self, points: int = 5) -> list[Any]:
        """The values a grid search tries."""
        if self.grid_size(points) > MAX_GRID:
            raise TuneError(
                f"--param {self.name}: {self.grid_size(points):,} values, more than a grid "
                f"may have ({MAX_GRID:,}); give a step (x=LOW:HIGH:STEP) or use --method bayes"
            )
        if self.kind == "choice":
            return list(self.choices)
        if self.step is not None:
            n = math.floor((self.high - self.low) / self.step + 1e-9)
            vals = [self.low + i * self.step for i in range(n + 1)]
        elif self.kind == "int" and not self.log:
            vals = [float(x) for x in range(int(self.low), int(self.high) + 1)]
        elif self.log:
            a, b = math.log(self.low), math.log(self.high)
            vals = [math.exp(a + (b - a) * i / max(1, points - 1)) for i in range(points)]
        else:
            vals = [
                self.low + (self.high - self.low) * i / max(1, points - 1) for i in range(points)
            ]
        if self.kind == "int":
            return list(dict.fromkeys(round(v) for v in vals))
        return [round(v, 12) for v in vals]

    def suggest(self, trial: Any) -> Any:
        """The value an Optuna trial suggests."""
        if self.kind == "choice":
            idx = trial.suggest_categorical(self.name, list(range(len(self.choices))))
            return self.choices[idx]
        if self.kind == "int":
            step = int(self.step) if self.step else 1
            return trial.suggest_int(
                self.name, int(self.low), int(self.high), step=step, log=self.log
            )
        return trial.suggest_float(self.name, self.low, self.high, step=self.step, log=self.log)

    def describe(self) -> str:
        if self.kind == "choice":
            return ", ".join(toml_value(c) for c in self.choices)
        step = f" step {self.step:g}" if self.step else (" (log)" if self.log else "")
        return f"{self.low:g} to {self.high:g}{step}"


def toml_value(v: Any) -> str:
    """``v`` as a TOML value for ``--set`` (strings quoted)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return f"{v:.1f}"
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return str(v)


@dataclass
class Trial:
    """One setting tried: its parameters, the objective's value (None if it failed), and
    whether it came from the store or an identical earlier trial."""

    number: int
    params: dict[str, Any]
    value: float | None
    label: str
    overrides: tuple[str, ...]
    wall_seconds: float = 0.0
    reused: bool = False
    error: str = ""
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class Search:
    """A finished (or interrupted) search."""

    scenario: str
    point: str
    objective: str
    direction: str  # "maximize" or "minimize"
    method: str
    params: list[Param]
    trials: list[Trial]
    base_overrides: tuple[str, ...]
    seed: int | None = None
    interrupted: bool = False

    def done(self) -> list[Trial]:
        return [t for t in self.trials if t.value is not None and not math.isnan(t.value)]

    def best(self) -> Trial | None:
        done = self.done()
        if not done:
            return None
        key: Callable[[Trial], float] = lambda t: t.value if t.value is not None else math.nan  # noqa: E731
        return max(done, key=key) if self.direction == "maximize" else min(done, key=key)

    def ranked(self) -> list[Trial]:
        sign = -1 if self.direction == "maximize" else 1
        done = sorted(self.done(), key=lambda t: (sign * (t.value or 0.0), t.number))
        return done + [t for t in self.trials if t not in done]

    def command(self, t: Trial) -> str:
        """The ``tierlab run`` command that reruns trial ``t``."""
        import shlex

        parts = ["tierlab", "run", self.scenario]
        if self.point:
            parts += ["--points", shlex.quote(self.point)]
        from tierlab.reproduce.runner import valid_on_base

        extra = t.overrides[len(self.own) :]
        if self.own and not valid_on_base(self.scenario, tuple(extra)):
            # `tierlab run --points` checks --set against the scenario before the point's
            # own overrides: repeat those first (same values, same expanded scenario).
            extra = t.overrides
        for s in extra:
            parts += ["--set", shlex.quote(s)]
        if self.seed is not None:
            parts += ["--seed", str(self.seed)]
        return " ".join(parts)

    #: the overrides of the scenario's own sweep point (not repeated in commands)
    own: tuple[str, ...] = ()
    #: trials whose result came from the store (earlier runs of the search)
    stored: int = 0


#: How many of a trial's statistics are kept with it.
KEEP_STATS = 40


def base_point(
    scenario: str, point: str | None, user_set: Sequence[str], seed: int | None
) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """The sweep point tuned (its label, its own overrides, the user's) of ``scenario``:
    the one ``point`` selects when the scenario has a sweep (an error when it selects none
    or several), else the scenario itself."""
    from tierlab.sweep.point import scenario_points, select

    _, pts = scenario_points(scenario, list(user_set))
    if not pts:
        if point:
            raise TuneError(f"{scenario} has no sweep points; drop --points")
        return "", (), tuple(user_set)
    labels = [label for label, _ in pts]
    chosen = select(labels, point) if point else labels
    if point and not chosen:
        raise TuneError(
            f"--points {point!r} matches none of the {len(labels)} sweep points of "
            f"{scenario} ({', '.join(labels)})"
        )
    if len(chosen) != 1:
        raise TuneError(
            f"{scenario} has {len(labels)} sweep points; choose one with --points "
            f"({', '.join(labels)})"
            if not point
            else f"--points {point!r} selects {len(chosen)} points ({', '.join(chosen)}); "
            "tune one at a time"
        )
    own = tuple(dict(pts)[chosen[0]])
    return chosen[0], own, tuple(user_set)


def objective_value(result: PointResult, key: str) -> float:
    """The objective ``key`` of a run (a flat stat), or TuneError naming close keys."""
    st = result.stats_flat
    if key not in st:
        import difflib

        close = difflib.get_close_matches(key, list(st), n=5, cutoff=0.5)
        hint = f" (close: {', '.join(close)})" if close else ""
        raise TuneError(f"--objective {key!r}: not a statistic of the run{hint}")
    v = st[key]
    try:
        return float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise TuneError(f"--objective {key!r}: not a number ({v!r})") from None


def _trial_point(
    scenario: str,
    seed: int | None,
    base: tuple[str, ...],
    params: Sequence[Param],
    values: Sequence[Any],
    number: int,
) -> Point:
    sets = tuple(f"{p.name}={toml_value(v)}" for p, v in zip(params, values, strict=True))
    return Point(f"trial-{number}", scenario, (*base, *sets), seed)


def run_search(
    scenario: str,
    params: Sequence[Param],
    objective: str,
    *,
    direction: str = "maximize",
    method: str = "grid",
    trials: int = 20,
    grid_points: int = 5,
    point: str | None = None,
    user_set: Sequence[str] = (),
    seed: int | None = None,
    executor: Executor,
    store: ResultStore | None = None,
    progress: SweepProgress | None = None,
) -> Search:
    """Run a search (see the module docs). Ctrl-C stops it: the result holds the trials
    done (``interrupted``)."""
    if not params:
        raise TuneError("nothing to tune: give at least one --param NAME=RANGE")
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise TuneError("a parameter is given twice")
    if trials < 1:
        raise TuneError(f"--trials {trials}: expected a positive number of trials")
    if grid_points < 1:
        raise TuneError(f"--grid-points {grid_points}: expected a positive number of values")
    label, own, user = base_point(scenario, point, user_set, seed)
    base = (*own, *user)
    search = Search(
        scenario, label, objective, direction, method, list(params), [], base, seed, own=own
    )
    if method == "grid":
        # Counted before a value is made: a grid of 10^8 values would fill the memory.
        size = math.prod(p.grid_size(grid_points) for p in params)
        if size > MAX_GRID:
            raise TuneError(
                f"the grid has {size:,} trials, more than {MAX_GRID:,}: narrow the ranges, "
                "give steps (x=LOW:HIGH:STEP) or use --method bayes"
            )
    # Validate every parameter's key and first value before running anything.
    from tierlab import _native

    first = [p.first() for p in params]
    probe = _trial_point(scenario, seed, base, params, first, 0)
    try:
        _native.export(scenario, list(probe.overrides), seed)
    except Exception as e:
        raise TuneError(" ".join(str(e).split())) from None
    seen: dict[tuple[str, ...], Trial] = {}

    def run_batch(batch: list[list[Any]]) -> tuple[list[Trial], bool]:
        points: list[Point] = []
        out: list[Trial] = []
        for values in batch:
            n = len(search.trials) + len(out)
            pt = _trial_point(scenario, seed, base, params, values, n)
            key = pt.overrides
            t = Trial(n, dict(zip(names, values, strict=True)), None, pt.label, pt.overrides)
            if key in seen:
                prev = seen[key]
                t.value, t.reused, t.error, t.stats = prev.value, True, prev.error, prev.stats
            else:
                points.append(pt)
            out.append(t)
        run = execute(points, executor, progress, store)
        by_label = {p.label: r for p, r in run.finished()}
        errors = {e.label: e for e in run.failures}
        for t in out:
            if t.reused:
                continue
            r = by_label.get(t.label)
            if r is not None:
                t.value = objective_value(r, objective)
                t.wall_seconds = r.wall_seconds
                t.stats = {k: r.stats_flat[k] for k in list(r.stats_flat)[:KEEP_STATS]}
            elif t.label in errors:
                t.error = errors[t.label].message
            seen[t.overrides] = t
        search.stored += run.reused
        return out, run.interrupted

    if method == "grid":
        combos = [list(c) for c in itertools.product(*(p.grid(grid_points) for p in params))]
        done, interrupted = run_batch(combos)
        search.trials.extend(done)
        search.interrupted = interrupted
        return search
    if method != "bayes":
        raise TuneError(f"--method {method!r}: grid or bayes")
    try:
        import optuna
    except ImportError:
        raise TuneError(
            "--method bayes needs Optuna (pip install 'tierlab[tune]', or optuna); "
            "--method grid needs nothing"
        ) from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(seed=seed if seed is not None else 0)
    study = optuna.create_study(
        direction="maximize" if direction == "maximize" else "minimize", sampler=sampler
    )
    width = max(1, executor.slots)
    while len(search.trials) < trials:
        k = min(width, trials - len(search.trials))
        asked = [study.ask() for _ in range(k)]
        batch = [[p.suggest(tr) for p in params] for tr in asked]
        done, interrupted = run_batch(batch)
        for tr, t in zip(asked, done, strict=True):
            if t.value is not None and not math.isnan(t.value):
                study.tell(tr, t.value)
            else:
                study.tell(tr, state=optuna.trial.TrialState.FAIL)
        search.trials.extend(done)
        if interrupted:
            search.interrupted = True
            break
    return search


# -- the report ---------------------------------------------------------------------------------


def to_json(s: Search) -> dict[str, Any]:
    best = s.best()
    return {
        "scenario": s.scenario,
        "point": s.point or None,
        "objective": s.objective,
        "direction": s.direction,
        "method": s.method,
        "seed": s.seed,
        "interrupted": s.interrupted,
        "params": [{"name": p.name, "kind": p.kind, "range": p.describe()} for p in s.params],
        "best": None
        if best is None
        else {
            "trial": best.number,
            "params": best.params,
            "value": best.value,
            "command": s.command(best),
        },
        "trials": [
            {
                "trial": t.number,
                "params": t.params,
                "value": t.value,
                "error": t.error or None,
                "duplicate_of_earlier": t.reused,
                "wall_seconds": t.wall_seconds,
                "command": s.command(t),
            }
            for t in s.trials
        ],
    }


def _plain(v: Any) -> str:
    """A value as an axis label: strings as they are, others as TOML."""
    return v if isinstance(v, str) else toml_value(v)


def _axis_values(p: Param, values: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    if p.kind == "choice":
        return [toml_value(v) if not isinstance(v, str) else v for v in values], {
            "type": "category"
        }
    return values, {"type": "log" if p.log else "linear"}


def page(s: Search) -> Any:
    """The interactive report page of a search."""
    from tierlab.reporters import page as pg
    from tierlab.reproduce import plots as P

    best = s.best()
    where = f"{s.scenario}" + (f", point {s.point}" if s.point else "")
    pgp = pg.Page(
        f"tierlab tune: {s.objective} on {where}",
        subtitle=f"{s.method} search, {s.direction} {s.objective}, {len(s.trials)} trials",
        banner="Interrupted (Ctrl-C): the search holds the trials done." if s.interrupted else "",
        footer="Written by tierlab tune; the numbers are in tune.json and trials.csv beside "
        "this page.",
    )
    summary = pgp.section("Best settings", id="best")
    if best is None:
        summary.add(pg.Paragraph("No trial finished."))
    else:
        summary.add(
            pg.KeyValues(
                [
                    (s.objective, pg.fmt_number(best.value)),
                    *((k, toml_value(v)) for k, v in best.params.items()),
                    ("trial", str(best.number)),
                    ("rerun it", s.command(best)),
                ]
            )
        )
    summary.add(
        pg.KeyValues(
            [
                ("scenario", s.scenario),
                ("sweep point", s.point or "(the scenario has none)"),
                ("fixed overrides", " ".join(s.base_overrides[len(s.own) :]) or "-"),
                ("method", s.method),
                ("objective", f"{s.direction} {s.objective}"),
                *((f"range of {p.name}", p.describe()) for p in s.params),
            ]
        )
    )
    land = pgp.section("Landscape", id="landscape")
    done = s.done()
    best_no = best.number if best is not None else -1
    for p in s.params:
        xs, ax = _axis_values(p, [t.params[p.name] for t in done])
        ys = [t.value for t in done]
        hover = [
            "<br>".join(
                [f"trial {t.number}", *(f"{k} = {toml_value(v)}" for k, v in t.params.items())]
            )
            for t in done
        ]
        data = [
            {
                "type": "scatter",
                "mode": "markers",
                "x": xs,
                "y": ys,
                "name": "trials",
                "text": hover,
                "marker": {
                    "size": [14 if t.number == best_no else 9 for t in done],
                    "color": ["#d62728" if t.number == best_no else "#1f77b4" for t in done],
                    "symbol": ["star" if t.number == best_no else "circle" for t in done],
                },
                "hovertemplate": f"%{{text}}<br>{s.objective}: %{{y:,.4~f}}<extra></extra>",
            }
        ]
        layout = {
            "title": {"text": f"{s.objective} against {p.name} (star: best)"},
            "xaxis": {"title": {"text": p.name}, **ax},
            "yaxis": {"title": {"text": s.objective}},
            "showlegend": False,
        }
        land.add(pg.Figure({"data": data, "layout": layout}, height=380))
    if len(s.params) == 2 and s.method == "grid" and done:
        a, b = s.params
        xa = list(dict.fromkeys(toml_value(t.params[a.name]) for t in done))
        yb = list(dict.fromkeys(toml_value(t.params[b.name]) for t in done))
        z: list[list[float | None]] = [[None] * len(xa) for _ in yb]
        for t in done:
            z[yb.index(toml_value(t.params[b.name]))][xa.index(toml_value(t.params[a.name]))] = (
                t.value
            )
        land.add(
            pg.Figure(
                {
                    "data": [
                        {
                            "type": "heatmap",
                            "x": xa,
                            "y": yb,
                            "z": z,
                            "colorscale": "Viridis",
                            "reversescale": s.direction == "minimize",
                            "colorbar": {"title": {"text": s.objective}},
                            "hovertemplate": f"{a.name} = %{{x}}<br>{b.name} = %{{y}}<br>"
                            f"{s.objective}: %{{z:,.4~f}}<extra></extra>",
                        }
                    ],
                    "layout": {
                        "title": {"text": f"{s.objective} over {a.name} and {b.name}"},
                        "xaxis": {"title": {"text": a.name}, "type": "category"},
                        "yaxis": {"title": {"text": b.name}, "type": "category"},
                    },
                },
                height=420,
            )
        )
    elif len(s.params) > 2 and done:
        dims = []
        for p in s.params:
            vals = [t.params[p.name] for t in done]
            if p.kind == "choice":
                labels = list(dict.fromkeys(toml_value(v) for v in vals))
                dims.append(
                    {
                        "label": p.name,
                        "values": [labels.index(toml_value(v)) for v in vals],
                        "tickvals": list(range(len(labels))),
                        "ticktext": labels,
                    }
                )
            else:
                dims.append({"label": p.name, "values": vals})
        dims.append({"label": s.objective, "values": [t.value for t in done]})
        land.add(
            pg.Figure(
                {
                    "data": [
                        {
                            "type": "parcoords",
                            "line": {
                                "color": [t.value for t in done],
                                "colorscale": "Viridis",
                                "showscale": True,
                            },
                            "dimensions": dims,
                        }
                    ],
                    "layout": {"title": {"text": "every trial (drag along an axis to filter)"}},
                },
                height=440,
            )
        )
    if s.method == "bayes" and done:
        running: list[float] = []
        for t in s.trials:
            v = t.value
            prev = running[-1] if running else None
            if v is None or math.isnan(v):
                running.append(prev if prev is not None else math.nan)
            elif prev is None or math.isnan(prev):
                running.append(v)
            else:
                running.append(max(prev, v) if s.direction == "maximize" else min(prev, v))
        nums = [t.number for t in s.trials]
        land.add(
            pg.Figure(
                {
                    "data": [
                        P.line(nums, [t.value for t in s.trials], "trial", mode="markers"),
                        P.line(nums, running, "best so far", mode="lines"),
                    ],
                    "layout": {
                        "title": {"text": "the search over time"},
                        "xaxis": {"title": {"text": "trial"}},
                        "yaxis": {"title": {"text": s.objective}},
                    },
                },
                height=340,
            )
        )
    table = pgp.section("Trials", id="trials")
    cols = [
        pg.Column("rank", format="int"),
        pg.Column("trial", format="int"),
        *(pg.Column(p.name, format="text") for p in s.params),
        pg.Column(s.objective),
        pg.Column("wall time", format="seconds"),
        pg.Column("command", format="text"),
    ]
    rows: list[list[object]] = []
    for i, t in enumerate(s.ranked(), start=1):
        rows.append(
            [
                i if t.value is not None else None,
                t.number,
                *(toml_value(t.params[p.name]) for p in s.params),
                t.value if t.value is not None else (t.error or "not run"),
                t.wall_seconds or None,
                s.command(t),
            ]
        )
    table.add(pg.Table(cols, rows))
    return pgp
