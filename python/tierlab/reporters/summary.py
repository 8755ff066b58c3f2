"""The human summary table (rich) and its machine-readable twin ``summary.csv``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from tierlab.outdir import atomic_output
from tierlab.reporters.base import Reporter

if TYPE_CHECKING:
    from tierlab.api import Result


def summary_table(result: Result) -> Table:
    """The summary rows of a run as a rich table."""
    title = f"{result.name} (seed {result.seed})"
    if result.interrupted:
        title += " [bold yellow]interrupted[/]"
    table = Table(title=title, title_justify="left", show_header=False, box=None)
    table.add_column("stat", style="bold")
    table.add_column("value")
    for label, value in result.summary:
        table.add_row(label, value)
    return table


class SummaryReporter(Reporter):
    name = "summary"
    files = ("summary.csv",)

    def render(self, result: Result, console: Console) -> None:
        """Print the summary table."""
        console.print(summary_table(result))

    def write(self, result: Result, out_dir: Path) -> list[Path]:
        import pandas as pd

        path = out_dir / "summary.csv"
        frame = pd.DataFrame(result.summary, columns=["stat", "value"])
        with atomic_output(path) as tmp:
            frame.to_csv(tmp, index=False)
        return [path]
