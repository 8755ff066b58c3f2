"""Kinds of sweeps, registered by name.

A kind turns a scenario into points (:meth:`SweepKind.plan`) and the finished points into
its report (:meth:`SweepKind.report`: typed records, tables), and presents the report: JSON
(:meth:`SweepKind.to_json`, what ``--json`` prints), files (:meth:`SweepKind.write`, what
``--out`` writes) and a table on the terminal (:meth:`SweepKind.render`). ``tierlab run``
picks the kind named by the scenario's ``[report] sweep_name`` (``records`` when no kind has
that name); ``tierlab telemetry`` uses ``telemetry``.

Adding a kind is one module with a :class:`SweepKind` subclass and one line in
:data:`REGISTRY` (``"name": "module:Class"``, imported on first use).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from tierlab.sweep.point import Point, scenario_points, select

if TYPE_CHECKING:
    from rich.console import Console

    from tierlab.sweep.engine import SweepRun

#: A JSON document (what ``json.dumps`` takes).
JSON = dict[str, "JSON"] | list["JSON"] | str | int | float | bool | None

#: Kind name -> ``module:Class`` (the class is called with the kind's options).
REGISTRY: dict[str, str] = {
    "records": "tierlab.policies:RecordsKind",
    "table1": "tierlab.policies:Table1Kind",
    "scaling": "tierlab.policies:ScalingKind",
    "p": "tierlab.policies:PKind",
    "pagesize": "tierlab.policies:PageSizeKind",
    "placement": "tierlab.placement_sim:PlacementKind",
    "tiering": "tierlab.tiering:TieringKind",
    "telemetry": "tierlab.telemetry:TelemetryKind",
}

#: The kind of a sweep whose name no kind has.
DEFAULT = "records"

ReportT = TypeVar("ReportT")


@dataclass
class SweepPlan:
    """What a sweep runs: the scenario, its sweep name, the labels of the scenario's sweep
    points selected (``[""]`` for a scenario without a sweep) and the points to run."""

    spec: str
    sweep_name: str
    labels: list[str]
    points: list[Point]


class SweepKind(ABC, Generic[ReportT]):
    """A kind of sweep (see the module docs). Subclasses set :attr:`name` and implement
    :meth:`report`, :meth:`to_json`, :meth:`write` and :meth:`render`; :meth:`plan` runs
    each of the scenario's sweep points once by default."""

    name: ClassVar[str]

    def plan(
        self,
        spec: str,
        overrides: Sequence[str] = (),
        seed: int | None = None,
        only: str | None = None,
    ) -> SweepPlan:
        """One point per sweep point of ``spec`` (those matching the glob ``only``), the
        user's ``overrides`` applied after each point's own; one point labelled ``""`` for a
        scenario without a sweep."""
        name, pts = scenario_points(spec, overrides)
        if not pts:
            pts = [("", [])]
        else:
            keep = set(select((label for label, _ in pts), only))
            pts = [(label, ov) for label, ov in pts if label in keep]
        points = [
            Point(label, spec, (*ov, *overrides), seed, sweep_label=label) for label, ov in pts
        ]
        return SweepPlan(spec, name, [p.label for p in points], points)

    @abstractmethod
    def report(self, plan: SweepPlan, run: SweepRun) -> ReportT:
        """The report of the points that finished."""

    @abstractmethod
    def to_json(self, report: ReportT) -> JSON:
        """The report as JSON (``--json``)."""

    @abstractmethod
    def write(self, report: ReportT, out_dir: Path) -> list[Path]:
        """Write the report's files into ``out_dir``; the paths written."""

    @abstractmethod
    def render(self, report: ReportT, console: Console, title: str) -> None:
        """Print the report as a table."""


def names() -> list[str]:
    return sorted(REGISTRY)


def get(name: str, **options: Any) -> SweepKind[Any]:
    """The kind called ``name``, built with ``options`` (KeyError if there is none)."""
    module, _, attr = REGISTRY[name].partition(":")
    factory = getattr(import_module(module), attr)
    kind = factory(**options)
    assert isinstance(kind, SweepKind)
    return kind


def for_sweep(sweep_name: str) -> SweepKind[Any]:
    """The kind of a scenario whose ``[report] sweep_name`` is ``sweep_name``."""
    return get(sweep_name if sweep_name in REGISTRY else DEFAULT)
