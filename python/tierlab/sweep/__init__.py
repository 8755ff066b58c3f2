"""One sweep engine for every kind of sweep.

A sweep is a list of :class:`Point` (label, overrides, optional technique selection,
seed). :func:`execute` runs them on an :class:`Executor` (:class:`LocalExecutor`: this
process or a pool of processes; ``RayExecutor``: a Ray cluster) through one worker
function (:func:`run_point`), with progress, reuse of stored results
(:class:`~tierlab.sweep.cache.ResultCache`) and clean interruption. What a sweep's
results mean is its *kind*'s business (:mod:`tierlab.sweep.kinds`: records, tables, plots),
found by name in a registry.
"""

from tierlab.sweep.engine import SweepProgress, SweepRun, SweepState, execute
from tierlab.sweep.executor import Executor, LocalExecutor
from tierlab.sweep.point import Point, PointError, PointResult, scenario_points
from tierlab.sweep.worker import run_point

__all__ = [
    "Executor",
    "LocalExecutor",
    "Point",
    "PointError",
    "PointResult",
    "SweepProgress",
    "SweepRun",
    "SweepState",
    "execute",
    "run_point",
    "scenario_points",
]
