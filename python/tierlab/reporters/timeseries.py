"""``timeseries.parquet`` and ``timeseries.csv``: one row per window."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tierlab.outdir import atomic_output
from tierlab.reporters.base import Reporter

if TYPE_CHECKING:
    from tierlab.api import Result


class TimeseriesReporter(Reporter):
    name = "timeseries"
    files = ("timeseries.parquet", "timeseries.csv")

    def write(self, result: Result, out_dir: Path) -> list[Path]:
        pq_path, csv_path = out_dir / "timeseries.parquet", out_dir / "timeseries.csv"
        with atomic_output(pq_path) as tmp:
            result.timeseries.to_parquet(tmp, index=False)
        with atomic_output(csv_path) as tmp:
            result.timeseries.to_csv(tmp, index=False)
        return [pq_path, csv_path]
