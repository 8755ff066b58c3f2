"""A paper's reproduction as data: the schema of ``papers/*.toml`` and its validation.

A paper file holds (every key is checked; an unknown key or a wrong type is an error naming
the file and the field):

- ``id``, ``title``, ``citation``, ``text`` (the paper's text, relative to ``../shared``),
  ``docs`` (tierlab's page about it);
- ``[[figures]]``: ``id``, ``title``, ``paper_ref`` (where in the paper), ``scenario``
  (built-in name), ``command`` (``run``: the scenario's ``[[sweep]]``; ``telemetry``: one
  run per technique; ``pebs-scale``: the PEBS paper's Fig. 3, single-node runs of the
  scenario and the BSP model, :class:`tierlab.pebs_scale.PebsScaleKind`), ``view`` (how it
  is tabulated and plotted,
  :mod:`tierlab.reproduce.views`), ``about`` (a paragraph), ``techniques`` and ``baseline``
  (``telemetry`` only), ``[figures.profiles.NAME]`` (``quick``, ``smoke``: ``points``, globs
  of the point labels to run; ``set``, overrides applied to every point; ``techniques``;
  ``baseline``; ``note``), ``[[figures.paper_values]]`` (the paper's numbers: ``title``,
  ``source``, ``columns``, ``rows``; with ``tidy = true`` the rows use the column names of
  tierlab's table, so claims are also evaluated on them), ``covers`` (the paper's figures and
  tables it reproduces: ``"Table 1"``, ``"Figure 4"``);
- ``[[claims]]``: ``id``, ``figure``, ``claim``, ``paper`` (what the paper says),
  ``source``, ``check`` (a table: ``kind`` = a predicate of :mod:`tierlab.reproduce.checks`
  and its arguments), ``on_paper`` (also evaluate the check on the paper's tidy values),
  ``basis`` (``evidence``, the default and the only one counted; ``construction``: true
  whatever the results; ``uninformative``: holds for almost any arrangement of them; the two
  need ``basis_note``, why), ``perturb`` (``shuffle``, the default, or ``mirror``: how its
  test perturbs the results to require the verdict to flip);
- ``[[parameters]]``: ``key`` (a scenario key, as ``--set`` names it), ``scenarios``,
  ``status`` (``sourced``, ``calibrated`` or ``assumed``; absent: the value is the default
  the code declares, and its provenance is the declaration's, see
  :mod:`tierlab.reproduce.provenance`), ``source`` (sourced: where the
  value comes from), ``calibrated_to`` (calibrated: the figure or number it was fitted to),
  ``reason`` (assumed: why this value), ``note``, ``quote`` and ``quote_in`` (the words that
  give the value and the file under ``../shared`` they are in; needed by every sourced
  parameter, checked by the tests);
- ``[[not_reproduced]]``: ``id`` (the paper's "Figure 6"), ``title``, ``reason``,
  ``command`` (optional: what shows it outside the report);
- ``[[sensitivity]]``: ``key`` (a free parameter), ``keys`` (the scenario keys that take the
  value, default ``key``), ``figure``, ``values`` (as ``--set`` takes them), ``chosen`` (the
  scenario's own), ``claims`` (of that figure), ``range_note`` (why this range),
  ``points`` and ``techniques`` (optional: fewer of the figure's points), ``apply_to``
  (optional: globs of the point labels that take the value; the others run as they are).
"""

from __future__ import annotations

import tomllib
from typing import Any

from tierlab.reproduce.model import (
    BASES,
    COMMANDS,
    PROFILES,
    STATUSES,
    Claim,
    FigureSpec,
    NotReproduced,
    Paper,
    PaperValues,
    Parameter,
    Profile,
    Sensitivity,
)


class SpecError(ValueError):
    """A paper file that does not follow the schema (the message names file and field)."""


class _Fields:
    """Typed access to one TOML table, recording which keys were read."""

    def __init__(self, origin: str, where: str, table: object) -> None:
        if not isinstance(table, dict):
            raise SpecError(f"{origin}: `{where}`: expected a table, got {_type(table)}")
        self.origin, self.where, self.table = origin, where, table
        self.used: set[str] = set()

    def _path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def _err(self, key: str, msg: str) -> SpecError:
        return SpecError(f"{self.origin}: `{self._path(key)}`: {msg}")

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        self.used.add(key)
        if key not in self.table:
            if default is ...:
                raise self._err(key, "missing")
            return default
        v = self.table[key]
        if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
            names = (
                kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            )
            raise self._err(key, f"expected {names}, got {_type(v)}")
        return v

    def text(self, key: str, default: Any = ...) -> str:
        v = self.get(key, str, default)
        if isinstance(v, str) and not v.strip() and default is ...:
            raise self._err(key, "must not be empty")
        return str(v)

    def strings(self, key: str, default: Any = ...) -> tuple[str, ...] | None:
        v = self.get(key, list, default)
        if v is None or v is default:
            return None if v is None else tuple(v)
        for i, x in enumerate(v):
            if not isinstance(x, str):
                raise self._err(f"{key}[{i}]", f"expected a string, got {_type(x)}")
        return tuple(v)

    def tables(self, key: str) -> list[tuple[str, object]]:
        v = self.get(key, list, [])
        return [(f"{self._path(key)}[{i}]", t) for i, t in enumerate(v)]

    def done(self) -> None:
        unknown = sorted(set(self.table) - self.used)
        if unknown:
            raise self._err(unknown[0], f"unknown field (known: {', '.join(sorted(self.used))})")


def _type(v: object) -> str:
    return {
        str: "a string",
        int: "an integer",
        float: "a float",
        bool: "a boolean",
        list: "an array",
        dict: "a table",
    }.get(type(v), type(v).__name__)


def _profile(origin: str, where: str, t: object, command: str) -> Profile:
    f = _Fields(origin, where, t)
    p = Profile(
        points=f.strings("points", ()) or (),
        set=f.strings("set", ()) or (),
        techniques=f.strings("techniques", None),
        baseline=f.get("baseline", bool, None),
        note=f.text("note", ""),
    )
    f.done()
    for i, s in enumerate(p.set):
        if "=" not in s or not s.split("=", 1)[0].strip():
            raise SpecError(f"{origin}: `{where}.set[{i}]`: expected KEY=VALUE, got {s!r}")
    if command != "telemetry" and (p.techniques is not None or p.baseline is not None):
        raise SpecError(f"{origin}: `{where}`: techniques/baseline apply to telemetry figures")
    return p


def _values(origin: str, where: str, t: object) -> PaperValues:
    f = _Fields(origin, where, t)
    cols = f.strings("columns")
    assert cols is not None
    raw = f.get("rows", list)
    rows = []
    for i, r in enumerate(raw):
        if not isinstance(r, list) or len(r) != len(cols):
            raise SpecError(
                f"{origin}: `{where}.rows[{i}]`: expected an array of {len(cols)} values "
                f"({', '.join(cols)})"
            )
        rows.append(tuple(r))
    v = PaperValues(
        title=f.text("title"),
        source=f.text("source"),
        columns=cols,
        rows=tuple(rows),
        tidy=f.get("tidy", bool, False),
    )
    f.done()
    return v


def _figure(origin: str, where: str, t: object) -> FigureSpec:
    from tierlab.reproduce import views

    f = _Fields(origin, where, t)
    command = f.text("command")
    if command not in COMMANDS:
        raise SpecError(f"{origin}: `{where}.command`: {command!r} is not one of {COMMANDS}")
    view = f.text("view")
    if view not in views.VIEWS:
        raise SpecError(
            f"{origin}: `{where}.view`: no view {view!r} (known: {', '.join(sorted(views.VIEWS))})"
        )
    profiles_t = f.get("profiles", dict, {})
    profiles = {}
    for name, pt in profiles_t.items():
        if name not in PROFILES or name == "full":
            raise SpecError(
                f"{origin}: `{where}.profiles.{name}`: unknown profile (quick or smoke)"
            )
        profiles[name] = _profile(origin, f"{where}.profiles.{name}", pt, command)
    spec = FigureSpec(
        id=f.text("id"),
        title=f.text("title"),
        paper_ref=f.text("paper_ref"),
        scenario=f.text("scenario"),
        command=command,
        view=view,
        about=f.text("about", ""),
        techniques=f.strings("techniques", None),
        baseline=f.get("baseline", bool, True),
        profiles=profiles,
        paper_values=tuple(_values(origin, w, v) for w, v in f.tables("paper_values")),
        covers=f.strings("covers", ()) or (),
    )
    f.done()
    if command != "telemetry" and spec.techniques is not None:
        raise SpecError(f"{origin}: `{where}.techniques`: only for telemetry figures")
    return spec


def _claim(origin: str, where: str, t: object, figures: set[str]) -> Claim:
    from tierlab.reproduce import checks

    f = _Fields(origin, where, t)
    c = Claim(
        id=f.text("id"),
        figure=f.text("figure"),
        claim=f.text("claim"),
        paper=f.text("paper"),
        source=f.text("source"),
        check=dict(f.get("check", dict)),
        on_paper=f.get("on_paper", bool, False),
        basis=f.text("basis", "evidence"),
        basis_note=f.text("basis_note", ""),
        perturb=f.text("perturb", "shuffle"),
    )
    f.done()
    if c.basis not in BASES:
        raise SpecError(f"{origin}: `{where}.basis`: {c.basis!r} is not one of {BASES}")
    if c.basis != "evidence" and not c.basis_note.strip():
        raise SpecError(
            f"{origin}: `{where}.basis_note`: a claim that is not evidence ({c.basis}) says why"
        )
    if c.perturb not in checks.PERTURBATIONS:
        raise SpecError(
            f"{origin}: `{where}.perturb`: {c.perturb!r} is not one of {checks.PERTURBATIONS}"
        )
    if c.figure not in figures:
        raise SpecError(f"{origin}: `{where}.figure`: no figure {c.figure!r} in this paper")
    try:
        checks.validate(c.check)
    except ValueError as e:
        raise SpecError(f"{origin}: `{where}.check`: {e}") from None
    return c


def _parameter(origin: str, where: str, t: object, scenarios: set[str]) -> Parameter:
    f = _Fields(origin, where, t)
    p = Parameter(
        key=f.text("key"),
        scenarios=f.strings("scenarios") or (),
        status=f.text("status", ""),
        source=f.text("source", ""),
        calibrated_to=f.text("calibrated_to", ""),
        reason=f.text("reason", ""),
        note=f.text("note", ""),
        quote=f.text("quote", ""),
        quote_in=f.text("quote_in", ""),
    )
    f.done()
    if bool(p.quote) != bool(p.quote_in):
        missing = "quote_in" if p.quote else "quote"
        raise SpecError(f"{origin}: `{where}.{missing}`: give the quote and its file together")
    texts = {"sourced": "source", "calibrated": "calibrated_to", "assumed": "reason"}
    if not p.status:
        given = [k for k in texts.values() if getattr(p, k).strip()]
        if given:
            raise SpecError(
                f"{origin}: `{where}.{given[0]}`: without `status` the parameter's provenance "
                "is the one declared in the code; give `status` too, or drop it"
            )
    elif p.status not in STATUSES:
        raise SpecError(f"{origin}: `{where}.status`: {p.status!r} is not one of {STATUSES}")
    else:
        need = texts[p.status]
        if not getattr(p, need).strip():
            raise SpecError(f"{origin}: `{where}.{need}`: a {p.status} parameter needs its {need}")
    for i, s in enumerate(p.scenarios):
        if s not in scenarios:
            raise SpecError(
                f"{origin}: `{where}.scenarios[{i}]`: {s!r} is not a scenario of this paper's "
                f"figures ({', '.join(sorted(scenarios))})"
            )
    return p


def _not_reproduced(origin: str, where: str, t: object) -> NotReproduced:
    f = _Fields(origin, where, t)
    n = NotReproduced(
        id=f.text("id"),
        title=f.text("title"),
        reason=f.text("reason"),
        command=f.text("command", ""),
    )
    f.done()
    return n


def _sensitivity(origin: str, where: str, t: object, paper_claims: dict[str, str]) -> Sensitivity:
    f = _Fields(origin, where, t)
    s = Sensitivity(
        key=f.text("key"),
        figure=f.text("figure"),
        values=f.strings("values") or (),
        chosen=f.text("chosen"),
        claims=f.strings("claims") or (),
        range_note=f.text("range_note"),
        points=f.strings("points", ()) or (),
        techniques=f.strings("techniques", None),
        keys=f.strings("keys", ()) or (),
        apply_to=f.strings("apply_to", ()) or (),
    )
    f.done()
    if len(s.values) < 2:
        raise SpecError(f"{origin}: `{where}.values`: a sweep needs at least two values")
    if s.chosen not in s.values:
        raise SpecError(f"{origin}: `{where}.chosen`: {s.chosen!r} is not one of `values`")
    for i, c in enumerate(s.claims):
        if c not in paper_claims:
            raise SpecError(f"{origin}: `{where}.claims[{i}]`: no claim {c!r} in this paper")
        if paper_claims[c] != s.figure:
            raise SpecError(
                f"{origin}: `{where}.claims[{i}]`: claim {c!r} is about figure "
                f"{paper_claims[c]!r}, not {s.figure!r}"
            )
    return s


def load_paper(text: str, origin: str) -> Paper:
    """Parse and validate a paper file (see the module docs); :class:`SpecError` names the
    file and the field of the first problem."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{origin}: {e}") from None
    f = _Fields(origin, "", doc)
    figures = tuple(_figure(origin, w, t) for w, t in f.tables("figures"))
    ids = [x.id for x in figures]
    dup = next((x for x in ids if ids.count(x) > 1), None)
    if dup:
        raise SpecError(f"{origin}: two figures have the id {dup!r}")
    claims = tuple(_claim(origin, w, t, set(ids)) for w, t in f.tables("claims"))
    cids = [c.id for c in claims]
    dup = next((x for x in cids if cids.count(x) > 1), None)
    if dup:
        raise SpecError(f"{origin}: two claims have the id {dup!r}")
    scenarios = {x.scenario for x in figures}
    params = tuple(_parameter(origin, w, t, scenarios) for w, t in f.tables("parameters"))
    missing = tuple(_not_reproduced(origin, w, t) for w, t in f.tables("not_reproduced"))
    sens = tuple(
        _sensitivity(origin, w, t, {c.id: c.figure for c in claims})
        for w, t in f.tables("sensitivity")
    )
    for i, s in enumerate(sens):
        if s.figure not in ids:
            raise SpecError(f"{origin}: `sensitivity[{i}].figure`: no figure {s.figure!r}")
    paper = Paper(
        id=f.text("id"),
        title=f.text("title"),
        citation=f.text("citation"),
        text=f.text("text"),
        docs=f.text("docs"),
        figures=figures,
        claims=claims,
        parameters=params,
        origin=origin,
        not_reproduced=missing,
        sensitivity=sens,
    )
    f.done()
    if not figures:
        raise SpecError(f"{origin}: `figures`: a paper needs at least one figure")
    return paper
