"""``stats.json`` (the nested stats registry) and ``run.json`` (how the run went, and what it
came from: its ``provenance``, see :mod:`tierlab.provenance`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tierlab.outdir import atomic_output
from tierlab.reporters.base import Reporter

if TYPE_CHECKING:
    from tierlab.api import Result


def stats_json(result: Result) -> str:
    """The nested stats as JSON text (what ``tierlab run --json`` prints)."""
    return json.dumps(result.stats, indent=2, allow_nan=False, default=str) + "\n"


def run_info(result: Result) -> dict[str, Any]:
    """Facts about the run that are not stats of the simulated machine."""
    from tierlab._version import VERSION as __version__

    def secs(ns: int | None) -> float | None:
        return None if ns is None else ns / 1e9

    return {
        "name": result.name,
        "seed": result.seed,
        "interrupted": result.interrupted,
        "error": result.error,
        "sim_seconds_done": secs(result.sim_ns_done),
        "sim_seconds_total": secs(result.sim_ns_total),
        "wall_seconds": result.wall_seconds,
        "tierlab_version": __version__,
        "provenance": result.provenance or _provenance(result),
    }


def _provenance(result: Result) -> dict[str, Any]:
    from tierlab import provenance

    return provenance.collect("", result.scenario)


class StatsJsonReporter(Reporter):
    name = "stats"
    files = ("stats.json", "run.json")

    def write(self, result: Result, out_dir: Path) -> list[Path]:
        stats, run = out_dir / "stats.json", out_dir / "run.json"
        with atomic_output(stats) as tmp:
            tmp.write_text(stats_json(result))
        with atomic_output(run) as tmp:
            tmp.write_text(json.dumps(run_info(result), indent=2) + "\n")
        return [stats, run]
