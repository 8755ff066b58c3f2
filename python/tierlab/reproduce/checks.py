"""Claim predicates: each decides, from a figure's table of results, whether a claim holds,
and says what it measured.

A claim's ``check`` names a predicate (``kind``) and gives its arguments; the predicate is
evaluated on the figure's tidy table (one row per point or technique, the columns of the
figure's view) and returns an :class:`Outcome`: ``holds``, ``fails`` or ``n/a`` (the rows
it needs were not run, e.g. in a quick run) and the measured value as text. Verdicts are
never written by hand.

Arguments every predicate takes: ``where`` (keep rows whose column equals a value, is in a
list, or is the column's ``"max"``/``"min"``), ``by`` (columns naming a group: the
predicate holds when it holds for every group). The predicates:

==================  ============================================================================
``compare``         every row (``agg = "all"``), or the ``mean``/``min``/``max`` of ``value``,
                    satisfies ``op`` ``threshold``
``ratio``           per group, ``value`` where ``column == numerator`` over ``value`` where
                    ``column == denominator`` satisfies ``op`` ``threshold``
``argbest``         per group, the ``column`` of the row with the best (``best = "max"`` or
                    ``"min"``) ``value`` is ``expect`` (a value or a list of values)
``distinct_best``   the groups' best ``column`` values take at least ``min_distinct`` values
``best_order``      the best ``column`` value of group ``lower`` is below that of every
                    group in ``higher``
``monotonic``       per group, ``value`` sorted by ``order`` is ``decreasing``/``increasing``
``spread``          per group, max/min of ``value`` is at most ``threshold``
``best_sequence``   per group, the best ``column`` along ``order`` (``descending``) runs
                    through ``sequence`` in that order
``close``           for each ``targets`` entry (``key`` value -> paper value), ``value`` is
                    within ``rel_tol`` of it
==================  ============================================================================
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

HOLDS, FAILS, NA, ERROR = "holds", "fails", "n/a", "error"

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


@dataclass(frozen=True)
class Outcome:
    """A predicate's verdict (``holds``, ``fails``, ``n/a``) and what it measured."""

    verdict: str
    observed: str


def fmt(x: object) -> str:
    """A measured number, short: 3 significant digits, thousands separators."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return str(x)
    v = float(x)
    if math.isnan(v):
        return "-"
    if v != 0 and abs(v) < 0.01:
        return f"{v:.2g}"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if v.is_integer():
        return f"{int(v)}"
    return f"{v:.3g}" if abs(v) < 10 else f"{v:.1f}"


def _where(df: pd.DataFrame, where: dict[str, Any] | None) -> pd.DataFrame:
    if not where:
        return df
    for col, want in where.items():
        if col not in df.columns:
            return df.iloc[0:0]
        if want in ("max", "min"):
            s = pd.to_numeric(df[col], errors="coerce")
            df = df[s == (s.max() if want == "max" else s.min())]
        elif isinstance(want, list):
            df = df[df[col].isin(want)]
        else:
            df = df[df[col] == want]
    return df


def _groups(df: pd.DataFrame, by: list[str] | None) -> list[tuple[str, pd.DataFrame]]:
    if not by:
        return [("", df)]
    if any(b not in df.columns for b in by):
        return []
    out = []
    for key, g in df.groupby(by, sort=False, dropna=False):
        k = key if isinstance(key, tuple) else (key,)
        out.append(("/".join(str(x) for x in k), g))
    return out


def _num(v: object) -> float:
    try:
        return float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def _summary(values: list[tuple[str, float]], ok: list[bool], unit: str = "") -> str:
    nums = [v for _, v in values if not math.isnan(v)]
    if not nums:
        return "no values"
    rng = (
        f"{fmt(min(nums))}{unit}"
        if min(nums) == max(nums)
        else f"{fmt(min(nums))}-{fmt(max(nums))}{unit}"
    )
    text = f"{rng} ({sum(ok)} of {len(ok)})"
    bad = [name for (name, _), good in zip(values, ok, strict=True) if not good and name]
    if bad:
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        text += f"; not at {', '.join(bad[:3])}{more}"
    return text


def _verdict(ok: list[bool]) -> str:
    if not ok:
        return NA
    return HOLDS if all(ok) else FAILS


def compare(
    df: pd.DataFrame,
    value: str,
    op: str,
    threshold: float,
    agg: str = "all",
    where: dict[str, Any] | None = None,
    by: list[str] | None = None,
    unit: str = "",
) -> Outcome:
    d = _where(df, where)
    if value not in d.columns or d.empty:
        return Outcome(NA, "not run")
    cmp = _OPS[op]
    if agg == "all":
        names = ["/".join(str(r[b]) for b in by) for _, r in d.iterrows()] if by else [""] * len(d)
        vals = [(n, _num(v)) for n, v in zip(names, d[value].tolist(), strict=True)]
        ok = [not math.isnan(v) and cmp(v, threshold) for _, v in vals]
        return Outcome(_verdict(ok), _summary(vals, ok, unit))
    s = pd.to_numeric(d[value], errors="coerce").dropna()
    if s.empty:
        return Outcome(NA, "no values")
    x = float({"mean": s.mean(), "min": s.min(), "max": s.max()}[agg])
    return Outcome(HOLDS if cmp(x, threshold) else FAILS, f"{agg} {fmt(x)}{unit}")


def ratio(
    df: pd.DataFrame,
    value: str,
    column: str,
    numerator: Any,
    denominator: Any,
    op: str,
    threshold: float,
    by: list[str] | None = None,
    where: dict[str, Any] | None = None,
    unit: str = "x",
) -> Outcome:
    d = _where(df, where)
    if value not in d.columns or column not in d.columns:
        return Outcome(NA, "not run")
    cmp = _OPS[op]
    vals: list[tuple[str, float]] = []
    # numerator or denominator may be a list: one ratio per pair
    nums = numerator if isinstance(numerator, list) else [numerator]
    dens = denominator if isinstance(denominator, list) else [denominator]
    for name, g in _groups(d, by):
        for nv in nums:
            for dv in dens:
                n = g[g[column] == nv][value]
                m = g[g[column] == dv][value]
                if n.empty or m.empty:
                    continue
                den = _num(m.iloc[0])
                pair = f"{nv}/{dv}" if len(nums) > 1 or len(dens) > 1 else ""
                label = ", ".join(x for x in (name, pair) if x)
                vals.append((label, _num(n.iloc[0]) / den if den else math.nan))
    ok = [not math.isnan(v) and cmp(v, threshold) for _, v in vals]
    return Outcome(_verdict(ok), _summary(vals, ok, unit) if vals else "not run")


def _best(g: pd.DataFrame, value: str, column: str, best: str) -> Any:
    s = pd.to_numeric(g[value], errors="coerce")
    if s.dropna().empty:
        return None
    v = s.to_numpy(dtype=float)
    pos = int(np.nanargmax(v) if best == "max" else np.nanargmin(v))
    return g[column].iloc[pos]


def argbest(
    df: pd.DataFrame,
    value: str,
    column: str,
    expect: Any,
    by: list[str] | None = None,
    where: dict[str, Any] | None = None,
    best: str = "max",
) -> Outcome:
    d = _where(df, where)
    if value not in d.columns or column not in d.columns:
        return Outcome(NA, "not run")
    allowed = expect if isinstance(expect, list) else [expect]
    winners = [(name, _best(g, value, column, best)) for name, g in _groups(d, by)]
    winners = [(n, w) for n, w in winners if w is not None]
    ok = [w in allowed for _, w in winners]
    if not winners:
        return Outcome(NA, "not run")
    counts: dict[str, int] = {}
    for _, w in winners:
        counts[fmt(w)] = counts.get(fmt(w), 0) + 1
    text = ", ".join(f"{w} in {n}" for w, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    bad = [f"{n}: {fmt(w)}" for (n, w), good in zip(winners, ok, strict=True) if not good and n]
    if bad:
        more = f" and {len(bad) - 4} more" if len(bad) > 4 else ""
        text += f"; not at {', '.join(bad[:4])}{more}"
    elif len(winners) > 1:
        text += f" of {len(winners)} groups"
    elif winners[0][0]:
        text += f" ({winners[0][0]})"
    return Outcome(_verdict(ok), text)


def distinct_best(
    df: pd.DataFrame,
    value: str,
    column: str,
    by: list[str],
    min_distinct: int = 2,
    where: dict[str, Any] | None = None,
    best: str = "max",
) -> Outcome:
    d = _where(df, where)
    if value not in d.columns or column not in d.columns:
        return Outcome(NA, "not run")
    winners = [(n, _best(g, value, column, best)) for n, g in _groups(d, by)]
    winners = [(n, w) for n, w in winners if w is not None]
    if len(winners) < 2:
        return Outcome(NA, "fewer than two groups run")
    k = len({w for _, w in winners})
    text = ", ".join(f"{n}: {fmt(w)}" for n, w in winners)
    return Outcome(HOLDS if k >= min_distinct else FAILS, f"{text} ({k} distinct)")


def best_order(
    df: pd.DataFrame,
    value: str,
    column: str,
    by: list[str],
    lower: str,
    higher: list[str],
    where: dict[str, Any] | None = None,
    best: str = "max",
) -> Outcome:
    d = _where(df, where)
    if value not in d.columns or column not in d.columns:
        return Outcome(NA, "not run")
    winners = {n: _best(g, value, column, best) for n, g in _groups(d, by)}
    lo = winners.get(lower)
    his = [(h, winners.get(h)) for h in higher]
    his = [(h, w) for h, w in his if w is not None]
    if lo is None or not his:
        return Outcome(NA, "not run")
    ok = [_num(lo) < _num(w) for _, w in his]
    text = f"{lower}: {fmt(lo)}; " + ", ".join(f"{h}: {fmt(w)}" for h, w in his)
    return Outcome(_verdict(ok), text)


def monotonic(
    df: pd.DataFrame,
    value: str,
    order: str,
    by: list[str] | None = None,
    where: dict[str, Any] | None = None,
    direction: str = "decreasing",
    strict: bool = True,
) -> Outcome:
    d = _where(df, where)
    if value not in d.columns or order not in d.columns:
        return Outcome(NA, "not run")
    names, ok, series = [], [], []
    for name, g in _groups(d, by):
        g = g.assign(_o=pd.to_numeric(g[order], errors="coerce")).sort_values("_o")
        v = pd.to_numeric(g[value], errors="coerce").tolist()
        if len(v) < 2:
            continue
        steps = [b - a for a, b in itertools.pairwise(v)]
        good = all((s < 0 if strict else s <= 0) for s in steps)
        if direction == "increasing":
            good = all((s > 0 if strict else s >= 0) for s in steps)
        names.append(name)
        ok.append(good)
        series.append(
            " > ".join(fmt(x) for x in v)
            if direction == "decreasing"
            else " < ".join(fmt(x) for x in v)
        )
    if not ok:
        return Outcome(NA, "not run")
    parts = [f"{n}: {s}" if n else s for n, s in zip(names, series, strict=True)]
    shown = "; ".join(parts[:4]) + (f"; ... ({len(parts)} groups)" if len(parts) > 4 else "")
    return Outcome(_verdict(ok), f"{shown} ({sum(ok)} of {len(ok)} {direction})")


def spread(
    df: pd.DataFrame,
    value: str,
    by: list[str],
    threshold: float,
    where: dict[str, Any] | None = None,
) -> Outcome:
    d = _where(df, where)
    if value not in d.columns:
        return Outcome(NA, "not run")
    vals = []
    for name, g in _groups(d, by):
        s = pd.to_numeric(g[value], errors="coerce").dropna()
        if len(s) < 2 or s.min() <= 0:
            continue
        vals.append((name, float(s.max() / s.min())))
    ok = [v <= threshold for _, v in vals]
    return Outcome(_verdict(ok), _summary(vals, ok, "x max/min") if vals else "not run")


def best_sequence(
    df: pd.DataFrame,
    value: str,
    column: str,
    order: str,
    sequence: list[Any],
    by: list[str] | None = None,
    where: dict[str, Any] | None = None,
    descending: bool = True,
    best: str = "max",
) -> Outcome:
    d = _where(df, where)
    if value not in d.columns or column not in d.columns or order not in d.columns:
        return Outcome(NA, "not run")
    ok, parts = [], []
    for name, g in _groups(d, by):
        run: list[Any] = []
        for _, h in sorted(g.groupby(order), key=lambda kv: _num(kv[0]), reverse=descending):
            w = _best(h, value, column, best)
            if w is not None and (not run or run[-1] != w):
                run.append(w)
        if not run:
            continue
        ok.append(run == list(sequence))
        parts.append(f"{name}: {' -> '.join(str(x) for x in run)}" if name else " -> ".join(run))
    if not ok:
        return Outcome(NA, "not run")
    return Outcome(_verdict(ok), "; ".join(parts) + f" ({sum(ok)} of {len(ok)})")


def close(
    df: pd.DataFrame,
    value: str,
    key: str,
    targets: dict[str, float],
    rel_tol: float,
    where: dict[str, Any] | None = None,
) -> Outcome:
    d = _where(df, where)
    if value not in d.columns or key not in d.columns:
        return Outcome(NA, "not run")
    ok, parts = [], []
    for k, want in targets.items():
        rows = d[d[key].astype(str) == str(k)]
        if rows.empty:
            rows = d[pd.to_numeric(d[key], errors="coerce") == _num(k)]
        if rows.empty:
            continue
        got = _num(rows[value].iloc[0])
        dev = abs(got - want) / abs(want) if want else math.inf
        ok.append(dev <= rel_tol)
        sign = "+" if got >= want else "-"
        parts.append(f"{key} {k}: {fmt(got)} vs {fmt(want)} ({sign}{dev:.0%})")
    if not ok:
        return Outcome(NA, "not run")
    return Outcome(_verdict(ok), "; ".join(parts))


#: Predicate name -> (function, required arguments, optional arguments).
CHECKS: dict[str, tuple[Callable[..., Outcome], set[str], set[str]]] = {
    "compare": (compare, {"value", "op", "threshold"}, {"agg", "where", "by", "unit"}),
    "ratio": (
        ratio,
        {"value", "column", "numerator", "denominator", "op", "threshold"},
        {"by", "where", "unit"},
    ),
    "argbest": (argbest, {"value", "column", "expect"}, {"by", "where", "best"}),
    "distinct_best": (distinct_best, {"value", "column", "by"}, {"min_distinct", "where", "best"}),
    "best_order": (
        best_order,
        {"value", "column", "by", "lower", "higher"},
        {"where", "best"},
    ),
    "monotonic": (monotonic, {"value", "order"}, {"by", "where", "direction", "strict"}),
    "spread": (spread, {"value", "by", "threshold"}, {"where"}),
    "best_sequence": (
        best_sequence,
        {"value", "column", "order", "sequence"},
        {"by", "where", "descending", "best"},
    ),
    "close": (close, {"value", "key", "targets", "rel_tol"}, {"where"}),
}


def validate(check: dict[str, Any]) -> None:
    """Raise ValueError unless ``check`` names a predicate with its required arguments and
    no unknown ones (and known operators, aggregations, directions)."""
    kind = check.get("kind")
    if kind not in CHECKS:
        raise ValueError(f"kind {kind!r}: not a predicate (known: {', '.join(sorted(CHECKS))})")
    _, required, optional = CHECKS[kind]
    args = set(check) - {"kind"}
    missing = sorted(required - args)
    if missing:
        raise ValueError(f"{kind}: missing argument {', '.join(missing)}")
    unknown = sorted(args - required - optional)
    if unknown:
        raise ValueError(
            f"{kind}: unknown argument {', '.join(unknown)} "
            f"(takes {', '.join(sorted(required | optional))})"
        )
    if "op" in check and check["op"] not in _OPS:
        raise ValueError(f"op {check['op']!r}: one of {', '.join(_OPS)}")
    if check.get("agg", "all") not in ("all", "mean", "min", "max"):
        raise ValueError(f"agg {check['agg']!r}: one of all, mean, min, max")
    if check.get("direction", "decreasing") not in ("decreasing", "increasing"):
        raise ValueError(f"direction {check['direction']!r}: decreasing or increasing")
    if check.get("best", "max") not in ("max", "min"):
        raise ValueError(f"best {check['best']!r}: max or min")
    for k in ("by",):
        if k in check and not (
            isinstance(check[k], list) and all(isinstance(x, str) for x in check[k])
        ):
            raise ValueError(f"{k}: expected an array of column names")
    if "where" in check and not isinstance(check["where"], dict):
        raise ValueError("where: expected a table of column = value")


#: Arguments that name a column of the figure's table.
_COLUMN_ARGS = ("value", "column", "order", "key")


def columns(check: dict[str, Any]) -> list[str]:
    """Every column of the figure's table ``check`` names (its value, grouping, ordering and
    ``where`` columns), in a stable order."""
    out = [check[a] for a in _COLUMN_ARGS if isinstance(check.get(a), str)]
    out += list(check.get("by") or [])
    out += list((check.get("where") or {}).keys())
    return list(dict.fromkeys(out))


def evaluate(check: dict[str, Any], table: pd.DataFrame) -> Outcome:
    """The outcome of ``check`` on ``table``: ``n/a`` for an empty table (the figure did not
    run), ``error`` when the check names a column the table does not have (a misspelt
    column is a mistake of the paper file, not a claim that was not run)."""
    if table is None or table.empty:
        return Outcome(NA, "not run")
    missing = [c for c in columns(check) if c not in table.columns]
    if missing:
        return Outcome(
            ERROR,
            f"no column {', '.join(repr(c) for c in missing)} in the results "
            f"(columns: {', '.join(map(str, table.columns))})",
        )
    fn, _, _ = CHECKS[check["kind"]]
    args = {k: v for k, v in check.items() if k != "kind"}
    try:
        return fn(table, **args)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        return Outcome(NA, f"could not evaluate: {e}")


# -- perturbations: can a claim fail? ------------------------------------------------------------

#: How many seeded shuffles :func:`flip_rate` evaluates.
SHUFFLES = 16
#: A counted claim that holds must fail in at least this share of the shuffles of its column
#: (or under the opposite pattern).
MIN_FLIP = 0.25
PERTURBATIONS = ("shuffle", "mirror")


def shuffled(table: pd.DataFrame, check: dict[str, Any], rng: np.random.Generator) -> pd.DataFrame:
    """``table`` with the claim's ``value`` column permuted across all the figure's points
    (every row, not only those the check selects): the same numbers, in no particular
    relation to the points."""
    out = table.copy()
    col = check["value"]
    out[col] = rng.permutation(out[col].to_numpy())
    return out


def mirrored(table: pd.DataFrame, check: dict[str, Any]) -> pd.DataFrame:
    """``table`` with the opposite pattern: among the rows the check selects, per group
    (``by``), each value ``v`` of the claim's column becomes ``max + min - v`` (the best
    point becomes the worst, a rising series falls; the range is kept)."""
    out = table.copy()
    col = check["value"]
    vals = pd.to_numeric(out[col], errors="coerce").astype(float)
    sel = _where(out.assign(_row=range(len(out))), check.get("where"))
    for _, g in _groups(sel, check.get("by")):
        rows = g["_row"].to_numpy()
        v = vals.iloc[rows]
        vals.iloc[rows] = v.max() + v.min() - v
    out[col] = vals.to_numpy()
    return out


def with_targets(table: pd.DataFrame, check: dict[str, Any]) -> pd.DataFrame:
    """``table`` with the paper's numbers of a ``close`` check in place of tierlab's."""
    out = table.copy()
    col, key = check["value"], check["key"]
    vals = pd.to_numeric(out[col], errors="coerce").astype(float).to_numpy(copy=True)
    sel = _where(out.assign(_row=range(len(out))), check.get("where"))
    for k, want in check["targets"].items():
        rows = sel[sel[key].astype(str) == str(k)]
        if rows.empty:
            rows = sel[pd.to_numeric(sel[key], errors="coerce") == _num(k)]
        vals[rows["_row"].to_numpy()] = float(want)
    out[col] = vals
    return out


@dataclass(frozen=True)
class Flip:
    """How a claim's verdict responds to a perturbation of its inputs."""

    perturbation: str
    verdict: str
    #: the share of perturbed tables on which the verdict differs (n/a ones not counted)
    rate: float
    trials: int

    @property
    def can_fail(self) -> bool:
        """Whether the claim can fail: one that holds fails in at least :data:`MIN_FLIP` of
        the perturbed tables; one that fails shows it by failing."""
        if self.verdict == HOLDS:
            return self.rate >= MIN_FLIP
        return self.verdict == FAILS

    def text(self) -> str:
        if self.verdict not in (HOLDS, FAILS):
            return "-"
        other = "fails" if self.verdict == HOLDS else "holds"
        if self.perturbation == "targets":
            return "holds with the paper's numbers" if self.rate else "out of reach"
        if self.perturbation == "mirror":
            return (
                f"{other} with the opposite pattern"
                if self.rate
                else (f"{self.verdict} with the opposite pattern too")
            )
        return f"{other} in {self.rate:.0%} of {self.trials} shuffles"


def flip_rate(
    check: dict[str, Any], table: pd.DataFrame, perturbation: str = "shuffle", seed: int = 0
) -> Flip:
    """The verdict of ``check`` on ``table`` and how often it changes when the claim's column
    is shuffled across the points (:data:`SHUFFLES` seeded permutations) or mirrored."""
    base = evaluate(check, table).verdict
    if base not in (HOLDS, FAILS):
        return Flip(perturbation, base, 0.0, 0)
    if base == FAILS and check["kind"] == "close":
        # A comparison with the paper's numbers that fails: it can hold (it is not out of
        # reach by construction) if it holds with the paper's numbers in place of tierlab's.
        v = evaluate(check, with_targets(table, check)).verdict
        return Flip("targets", base, float(v == HOLDS), 1)
    if perturbation == "mirror":
        v = evaluate(check, mirrored(table, check)).verdict
        return Flip(perturbation, base, float(v in (HOLDS, FAILS) and v != base), 1)
    rng = np.random.default_rng(seed)
    seen = flipped = 0
    for _ in range(SHUFFLES):
        v = evaluate(check, shuffled(table, check, rng)).verdict
        if v in (HOLDS, FAILS):
            seen += 1
            flipped += v != base
    return Flip(perturbation, base, flipped / seen if seen else 0.0, SHUFFLES)
