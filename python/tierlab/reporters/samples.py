"""Samples of the simulated sample-based techniques (PEBS) as recordings.

For every technique that took samples, ``samples-<technique>/`` is a recording in the same
format as ``tierlab record`` writes (``docs/formats.md``): the ``samples`` table (one row per
PEBS record, ``drain`` = the sample set it was delivered in, one timestamp per drain), the
``drains`` table (one row per drain: time, core, records) and the ``mappings`` table (the run's
map/unmap history). ``tierlab view OUT/samples-<technique>`` draws it like a live recording.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import pandas as pd

from tierlab import sampleset
from tierlab import stats_keys as sk
from tierlab.reporters.base import Reporter

if TYPE_CHECKING:
    from tierlab.api import Result


def _dir_name(label: str) -> str:
    return "samples-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", label)


def drains_of(samples: pd.DataFrame) -> pd.DataFrame:
    """One row per drain (``time_ns, cpu, drain, records``) from the samples' ``drain`` column."""
    if samples.empty:
        return pd.DataFrame({"time_ns": [], "cpu": [], "drain": [], "records": []})
    g = samples.groupby("drain", sort=True)
    return pd.DataFrame(
        {
            "time_ns": g["time_ns"].first().to_numpy(np.uint64),
            "cpu": g["cpu"].first().to_numpy(np.uint32),
            "drain": g.size().index.to_numpy(np.uint64),
            "records": g.size().to_numpy(np.uint32),
        }
    )


def mappings_frame(result: Result) -> pd.DataFrame:
    """The run's map and unmap events as the recording format's ``mappings`` table."""
    log = result.mapping_log
    return pd.DataFrame(
        {
            "time_ns": np.asarray([r[0] for r in log], dtype=np.uint64),
            "event": [r[1] for r in log],
            "start": np.asarray([r[2] for r in log], dtype=np.uint64),
            "length": np.asarray([r[3] for r in log], dtype=np.uint64),
            "name": [r[4] for r in log],
        }
    )


def write_sample_recordings(result: Result, out_dir: Path, view: bool = False) -> list[Path]:
    """Write one recording per sampling technique of ``result`` into ``out_dir``
    (``samples-<technique>/``) and, with ``view``, its view (``view-<technique>/``). Returns
    the recordings, then the view files."""
    from tierlab.recording import RecordingWriter

    if not result.samples:
        return []
    mappings = mappings_frame(result)
    stats = result.stats_flat
    # The CPU -> node map of the simulated machine (node: [cores]), for placement plans.
    cpu_nodes: dict[str, list[int]] = {}
    for core, node in enumerate(result.core_nodes):
        cpu_nodes.setdefault(str(node), []).append(core)
    written: list[Path] = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for label, samples in result.samples.items():
        samples = sampleset.of(samples)
        path = out_dir / _dir_name(label)
        prefix = f"telemetry.{label}."
        params = {k[len(prefix) :]: v for k, v in stats.items() if k.startswith(prefix)}
        # Streamed a chunk at a time (each chunk a part of its own): the memory this takes is
        # a chunk's, whatever the number of samples.
        with RecordingWriter(
            path,
            source="tierlab-sim",
            parameters={
                "scenario": result.name,
                "seed": result.seed,
                "technique": label,
                **params,
            },
            machine={"simulated": True, "cores": stats.get(sk.RUN_THREADS), "cpu_nodes": cpu_nodes},
            overwrite=True,
            flush_rows=sampleset.CHUNK_ROWS,
        ) as w:
            for chunk in samples.chunks():
                w.append_samples(chunk)
            w.append_drains(samples.drains())
            w.append_mappings(mappings)
        written.append(path)
    views: list[Path] = []
    if view:
        from tierlab.recording import Recording
        from tierlab.view import analysis, render

        for rec in written:
            v = analysis.analyze(Recording.open(rec))
            vdir = out_dir / rec.name.replace("samples-", "view-", 1)
            vdir.mkdir(exist_ok=True)
            views.extend(render.write(v, vdir))
    return written + views


class SamplesReporter(Reporter):
    """``samples-<technique>/``: a recording per sampling technique (see module docs)."""

    name = "samples"
    # Directories, one per sampling technique that took samples (named after its label).
    patterns: ClassVar[tuple[str, ...]] = ("samples-*",)

    def write(self, result: Result, out_dir: Path) -> list[Path]:
        return write_sample_recordings(result, out_dir)
