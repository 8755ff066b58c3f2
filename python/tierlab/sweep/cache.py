"""Resumable sweeps: every finished point's result stored on disk, keyed by what determines
it, and reused by the next run of the same point.

The key is a SHA-256 of the point's fully expanded scenario (``tierlab._native.export`` of
the scenario with the point's overrides and seed: every default written out), its seed, its
technique selection, whether it keeps samples, and the tierlab version. The engine is
deterministic, so equal keys mean equal results. A result is saved as soon as its point
finishes (one JSON file per point, written atomically), so a sweep that is killed loses at
most the points that were running.

What the key does not see: the contents of files the scenario only names (a replayed
recording, a masim config is expanded into the scenario and is seen), and changes of the
engine between two builds of the same version; ``--fresh`` recomputes then.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tierlab.sweep.point import Point, PointResult

#: Bumped when the stored layout changes (old files are then ignored).
FORMAT = 1


def _version() -> str:
    from tierlab._version import VERSION as __version__

    return str(__version__)


def point_key(point: Point) -> str:
    """The hex SHA-256 that names ``point``'s stored result (see the module docs)."""
    from tierlab import _native

    expanded = _native.export(point.spec, list(point.overrides), point.seed)
    doc = {
        "format": FORMAT,
        "scenario": expanded,
        "seed": point.seed,
        "techniques": None if point.techniques is None else list(point.techniques),
        "keep_samples": point.keep_samples,
        "version": _version(),
    }
    if point.samples_dir:
        doc["samples_dir"] = point.samples_dir
    from tierlab.agents.files import agent_paths, digests, read_sources

    agents = digests(read_sources(agent_paths(expanded)))
    if agents:
        # A point whose Python policy file changed runs again.
        doc["agent_files"] = agents
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class ResultCache:
    """Point results stored as ``DIR/<key>.json``. ``reuse=False`` (``--fresh``) never
    loads, only saves (overwriting what was there)."""

    def __init__(self, directory: Path, reuse: bool = True) -> None:
        self.directory = Path(directory)
        self.reuse = reuse
        self._keys: dict[Point, str] = {}

    def key(self, point: Point) -> str:
        if point not in self._keys:
            self._keys[point] = point_key(point)
        return self._keys[point]

    def path(self, point: Point) -> Path:
        return self.directory / f"{self.key(point)}.json"

    def load(self, point: Point) -> PointResult | None:
        """The stored result of ``point`` (None when there is none or it does not read)."""
        if not self.reuse:
            return None
        try:
            path = self.path(point)
        except Exception:  # an invalid point: its run will say why
            return None
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        try:
            res = _from_json(doc["result"], point.label)
        except (KeyError, TypeError):
            return None
        if res.written is not None and not all(Path(p).exists() for p in res.written):
            return None  # the recordings the worker wrote are gone: run it again
        return res

    def save(self, point: Point, result: PointResult) -> None:
        """Store ``result`` (atomically: a temporary file renamed into place)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path(point)
        doc = {
            "format": FORMAT,
            "label": point.label,
            "spec": point.spec,
            "overrides": list(point.overrides),
            "seed": point.seed,
            "techniques": None if point.techniques is None else list(point.techniques),
            "version": _version(),
            "result": asdict(result),
        }
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(doc, allow_nan=True))
            os.replace(tmp, path)
        except BaseException as e:
            # Nothing half-written stays (a full disk, an interrupt): the point runs again.
            tmp.unlink(missing_ok=True)
            if isinstance(e, OSError) and e.filename is None:
                raise OSError(e.errno, e.strerror, str(path)) from None
            raise


def _from_json(doc: dict[str, Any], label: str) -> PointResult:
    log = doc.get("mapping_log")
    return PointResult(
        label=label,
        scenario=doc["scenario"],
        name=doc["name"],
        seed=doc["seed"],
        wall_seconds=doc["wall_seconds"],
        stats_flat=doc["stats_flat"],
        timeseries=doc["timeseries"],
        samples=doc.get("samples"),
        mapping_log=None if log is None else [tuple(e) for e in log],
        stats=doc.get("stats"),
        written=doc.get("written"),
        provenance=doc.get("provenance"),
    )
