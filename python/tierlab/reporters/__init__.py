"""Reporters: each turns a :class:`tierlab.Result` into files in an output directory.

Every reporter implements :class:`~tierlab.reporters.base.Reporter` (one file per
reporter, listed once in :func:`reporters`); :func:`write_all` runs them all. Files are
written atomically (a hidden temporary file renamed into place), so an interrupted write never
leaves half a file, and the output directory as a whole is replaced atomically by
:func:`write_all`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tierlab.outdir import atomic_output
from tierlab.reporters.base import Reporter

if TYPE_CHECKING:
    from tierlab.api import Result


def reporters() -> list[Reporter]:
    """One instance of every reporter, in writing order."""
    from tierlab.reporters.damo import DamoRecordReporter
    from tierlab.reporters.decisions import DecisionsReporter
    from tierlab.reporters.heatmap import HeatmapReporter
    from tierlab.reporters.samples import SamplesReporter
    from tierlab.reporters.scenario import ScenarioReporter
    from tierlab.reporters.stats_json import StatsJsonReporter
    from tierlab.reporters.summary import SummaryReporter
    from tierlab.reporters.timeseries import TimeseriesReporter

    return [
        ScenarioReporter(),
        StatsJsonReporter(),
        SummaryReporter(),
        TimeseriesReporter(),
        HeatmapReporter(),
        SamplesReporter(),
        DamoRecordReporter(),
        DecisionsReporter(),
    ]


def write_all(result: Result, out_dir: Path) -> list[Path]:
    """Run every reporter into ``out_dir`` as a whole: the files are written into a new
    directory beside it, which then replaces ``out_dir`` (see :mod:`tierlab.outdir`), so no
    file of an earlier run survives and an interrupted write leaves the earlier results.
    ``out_dir`` must be absent, empty, or an earlier ``run --out`` directory (``run.json``):
    anything else is refused (:class:`tierlab.outdir.OutputError`)."""
    from tierlab import outdir

    written: list[Path] = []
    with outdir.replacing(out_dir, ("run",), outdir.OutputError) as staged:
        for reporter in reporters():
            written.extend(reporter.write(result, staged))
    return [out_dir / p.relative_to(staged) for p in written]


__all__ = ["Reporter", "atomic_output", "reporters", "write_all"]
