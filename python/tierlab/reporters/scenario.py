"""``scenario.toml``: the fully expanded scenario, to reproduce the run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tierlab.outdir import atomic_output
from tierlab.reporters.base import Reporter

if TYPE_CHECKING:
    from tierlab.api import Result


class ScenarioReporter(Reporter):
    name = "scenario"
    files = ("scenario.toml",)

    def write(self, result: Result, out_dir: Path) -> list[Path]:
        path = out_dir / "scenario.toml"
        text = result.scenario if result.scenario.endswith("\n") else result.scenario + "\n"
        with atomic_output(path) as tmp:
            tmp.write_text(text)
        return [path]
