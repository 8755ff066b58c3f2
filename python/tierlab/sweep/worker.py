"""The worker: runs one :class:`~tierlab.sweep.point.Point` and returns a plain result.

Every executor runs :func:`run_point` (in this process, in a pool of processes, or on a Ray
cluster). It never raises for a failed run: the error comes back as a
:class:`~tierlab.sweep.point.PointError` value naming the point, so that nothing
unpicklable (the native exception classes) crosses a process boundary. Only an interrupt
(Ctrl-C) is raised: a run cut short is not a result.
"""

from __future__ import annotations

from tierlab.sweep.point import Outcome, Point, PointError, PointResult


def run_point(point: Point) -> Outcome:
    """Run ``point`` and return its result or its error (see the module docs)."""
    try:
        from tierlab import _native

        # A replay reads its recording in the engine (streaming): nothing to load here.
        if point.sources:
            from tierlab.agents import _host

            _host.ship(point.sources)
        overrides = list(point.overrides)
        techniques = None if point.techniques is None else list(point.techniques)
        raw = _native.run(point.spec, overrides, point.seed, None, None, techniques)
        if raw.interrupted:
            raise KeyboardInterrupt
        if raw.error:
            # A point that stopped on a simulation error is not a result of its parameters.
            return PointError(point.label, f"simulation error: {raw.error}", "simulation")
        if point.keep_samples and point.samples_dir:
            # Written here, by the process that holds them: only paths go back.
            from pathlib import Path

            from tierlab.api import Result
            from tierlab.reporters.samples import write_sample_recordings

            paths = write_sample_recordings(
                Result.from_native(raw), Path(point.samples_dir), view=True
            )
            res = PointResult.from_native(point.label, raw, False)
            res.written = [str(p) for p in paths]
            return _with_provenance(res, point)
        return _with_provenance(
            PointResult.from_native(point.label, raw, point.keep_samples), point
        )
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        return PointError.from_exception(point.label, exc)


def _with_provenance(res: PointResult, point: Point) -> PointResult:
    """``res`` with the provenance of its run (on the machine that ran it; the sweep
    engine adds the executor)."""
    from tierlab import provenance

    res.provenance = provenance.collect(point.spec, res.scenario, None, list(point.overrides))
    return res
