"""Reporters: each turns a :class:`tierlab.Result` into files in an output directory.

Every reporter implements :class:`Reporter` (one file per reporter, listed once in
:data:`REPORTERS`); :func:`write_all` runs them all. Files are written atomically (a hidden
temporary file renamed into place), so an interrupted write never leaves half a file, and the
output directory as a whole is replaced atomically by :func:`write_all`.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from tierlab.api import Result


class Reporter(ABC):
    """Writes one kind of output of a run.

    Contract: :meth:`write` creates only files named in :attr:`files` (always written) or
    matching a glob in :attr:`patterns` (written when the run has that kind of output, e.g.
    one directory per sampling technique) inside ``out_dir`` (which exists), each atomically,
    and returns their paths. It must work for interrupted runs and for runs with empty tables.
    """

    #: Short name (``--report`` style selection, messages).
    name: ClassVar[str]
    #: File names this reporter always writes.
    files: ClassVar[tuple[str, ...]] = ()
    #: Globs (``fnmatch``) of the names it writes only when the run has such output.
    patterns: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def write(self, result: Result, out_dir: Path) -> list[Path]:
        """Write this reporter's files into ``out_dir``; return the paths written."""


@contextmanager
def atomic_output(path: Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success rename it onto ``path``."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def reporters() -> list[Reporter]:
    """One instance of every reporter, in writing order."""
    from tierlab.reporters.damo import DamoRecordReporter
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
