"""A sweep's unit of work: :class:`Point` (what to run), :class:`PointResult` (what one run
gave, trimmed to what reports use, plain data that pickles and stores as JSON) and
:class:`PointError` (why a point failed, naming it)."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from tierlab._native import MappingEvent, RunOutput, StatsTree, StatValue
    from tierlab.api import Result


@dataclass(frozen=True)
class Point:
    """One simulation of a sweep.

    ``label`` names the point in progress and error messages (unique within a sweep);
    ``overrides`` are ``key=value`` strings applied in order (the scenario's ``[[sweep]]``
    entry's, then the user's); ``techniques`` keeps only the named ``[[telemetry]]``
    techniques (``()``: none, ``None``: the scenario's own); ``keep_samples`` returns the
    samples and mapping log of sample-based techniques too, or, with ``samples_dir``, has the
    worker write them there as recordings (with their views) and return only the paths, so
    that what crosses to the caller does not grow with the number of samples;
    ``sweep_label`` is the label of the scenario's sweep point this run belongs to (``""``
    without a sweep).
    """

    label: str
    spec: str
    overrides: tuple[str, ...] = ()
    seed: int | None = None
    techniques: tuple[str, ...] | None = None
    keep_samples: bool = False
    sweep_label: str = ""
    samples_dir: str = ""
    #: (path, source) of the Python agents the point's scenario names, shipped to the worker
    #: (set by the sweep when it dispatches the point; not part of its identity).
    sources: tuple[tuple[str, str], ...] = field(default=(), compare=False, hash=False)


ErrorKind = Literal["scenario", "simulation", "error"]


class PointError(Exception):
    """A point that failed: its label, the cause as one line, what kind of cause it was
    (``scenario``: an invalid scenario or override, ``simulation``: the simulated program
    did something the machine cannot do, ``error``: anything else) and, for the latter, the
    worker's traceback. Plain data: it pickles across processes and machines (the native
    exception classes do not)."""

    def __init__(self, label: str, message: str, kind: ErrorKind = "error", detail: str = ""):
        super().__init__(label, message, kind, detail)
        self.label = label
        self.message = message
        self.kind: ErrorKind = kind
        self.detail = detail

    def __str__(self) -> str:
        if not self.label:  # not a sweep point: the scenario itself
            return self.message
        return f"point {self.label!r}: {self.message}"

    @classmethod
    def from_exception(cls, label: str, exc: BaseException) -> PointError:
        """The error of point ``label`` from the exception its run raised."""
        import traceback

        from tierlab import _native

        message = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, _native.ScenarioError):
            return cls(label, message, "scenario")
        if isinstance(exc, _native.SimulationError):
            return cls(label, message, "simulation")
        if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
            return cls(label, f"{exc.filename}: {exc.strerror.lower()}", "scenario")
        detail = "".join(traceback.format_exception(exc))
        return cls(label, f"{type(exc).__name__}: {message}", "error", detail)


@dataclass
class PointResult:
    """What one point's run gave: the expanded scenario, the flat stats, the time series
    (one list per column) and the wall time; with ``keep_samples``, the samples, the
    mapping log and the nested stats too, or (``Point.samples_dir``) the paths the worker
    wrote them to (``written``). Every field is plain data (JSON-compatible)."""

    label: str
    scenario: str
    name: str
    seed: int
    wall_seconds: float
    stats_flat: dict[str, StatValue]
    timeseries: dict[str, list[float]]
    #: plain columns (lists), for JSON and pickling
    samples: dict[str, dict[str, list[Any]]] | None = None
    mapping_log: list[MappingEvent] | None = None
    stats: StatsTree | None = field(default=None, repr=False)
    written: list[str] | None = None
    #: what the point came from and where it ran (:func:`tierlab.provenance.collect`)
    provenance: dict[str, Any] | None = field(default=None, repr=False)

    @classmethod
    def from_native(cls, label: str, raw: RunOutput, keep_samples: bool = False) -> PointResult:
        return cls(
            label=label,
            scenario=raw.scenario,
            name=raw.name,
            seed=raw.seed,
            wall_seconds=raw.wall_seconds,
            stats_flat=raw.stats_flat,
            timeseries=raw.timeseries,
            samples=(
                {k: v.to_lists() for k, v in _samples(raw.samples).items()}
                if keep_samples
                else None
            ),
            mapping_log=raw.mapping_log if keep_samples else None,
            stats=raw.stats if keep_samples else None,
        )

    def to_result(self) -> Result:
        """The point as a :class:`tierlab.Result` (no heatmap, mappings or summary)."""
        from tierlab.api import Result, empty_heatmap, simulated_ns

        done, total = simulated_ns(self.timeseries)
        return Result(
            name=self.name,
            seed=self.seed,
            scenario=self.scenario,
            interrupted=False,
            wall_seconds=self.wall_seconds,
            stats=self.stats or {},
            stats_flat=self.stats_flat,
            timeseries_columns=self.timeseries,
            heatmap=empty_heatmap(),
            mappings=[],
            summary=[],
            sim_ns_done=done,
            sim_ns_total=total,
            mapping_log=self.mapping_log or [],
            samples=_samples(self.samples or {}),
        )


#: What a worker returns for a point: its result or its error.
Outcome = PointResult | PointError


def select(labels: Iterable[str], only: str | None) -> list[str]:
    """The labels matching the glob ``only`` (all without one)."""
    return [x for x in labels if not only or fnmatch.fnmatchcase(x, only)]


def scenario_points(
    spec: str, overrides: Sequence[str] = (), only: str | None = None
) -> tuple[str, list[tuple[str, list[str]]]]:
    """A scenario's sweep name and its points ``(label, overrides)`` (``overrides``: the
    user's, applied to the scenario when reading its sweep); ``only`` keeps the labels
    matching a glob pattern (``bt/*/fifo``). No points when the scenario has no sweep."""
    from tierlab import _native

    name, points = _native.sweep_points(spec, list(overrides))
    keep = set(select((p[0] for p in points), only))
    return str(name), [(str(label), list(ov)) for label, ov in points if label in keep]


def _samples(raw: Any) -> Any:
    """``tierlab.api``'s samples of a run (imported when there are samples only)."""
    from tierlab.api import _samples as samples

    return samples(raw)
