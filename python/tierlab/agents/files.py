"""The files of the Python agents a scenario names (``kind = "python"``): found in its
expanded TOML, hashed into a sweep point's key (a point re-runs when its policy file
changes), and shipped with the point to the worker that runs it (the worker uses the source
the sweep saw, and needs no copy of the file: a Ray worker on another machine)."""

from __future__ import annotations

import hashlib
import tomllib
from typing import Any


def agent_paths(expanded: str) -> list[str]:
    """The ``path`` of every ``kind = "python"`` entry of an expanded scenario (telemetry,
    tiering, replacement policies), in order, without repeats."""
    try:
        doc = tomllib.loads(expanded)
    except tomllib.TOMLDecodeError:
        return []
    tables: list[Any] = [*doc.get("telemetry", []), doc.get("tiering"), *doc.get("policies", [])]
    out: list[str] = []
    for t in tables:
        path = t.get("path") if isinstance(t, dict) and t.get("kind") == "python" else None
        if isinstance(path, str) and path not in out:
            out.append(path)
    return out


def read_sources(paths: list[str]) -> tuple[tuple[str, str], ...]:
    """(path, source) of each file that reads (one that does not is left to the run, which
    says why)."""
    out = []
    for p in paths:
        try:
            with open(p, encoding="utf-8") as f:
                out.append((p, f.read()))
        except (OSError, UnicodeDecodeError):
            continue
    return tuple(out)


def digests(sources: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """SHA-256 of each shipped source, by path."""
    return {p: hashlib.sha256(s.encode()).hexdigest() for p, s in sources}
