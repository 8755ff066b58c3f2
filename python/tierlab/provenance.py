"""What a result came from, recorded so that it can be re-created later: the ``provenance``
object of ``run.json`` and of every stored sweep point.

:func:`collect` gathers the tierlab version and the git commit of its source tree (with
whether the tree had uncommitted changes), the SHA-256 of the fully expanded scenario, the
SHA-256 of every input file the scenario names (any string value of a key called ``path``
or ``config``, or ending in ``_path`` / ``_file``, anywhere in the scenario: replayed
recordings, policy files, masim configurations), the host (CPU model,
cores, memory, kernel), Python and the versions of the libraries results pass through, and
the executor. A directory (a recording) is hashed as the sorted list of its files' relative
paths and hashes. ``tierlab rerun`` compares these with the present ones.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
import tomllib
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

#: Libraries whose versions are recorded (those a result's numbers or files pass through).
LIBRARIES = ("numpy", "pandas", "pyarrow", "matplotlib")

#: Bumped when the layout of the provenance object changes.
FORMAT = 1


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


#: (path, size, mtime_ns) -> digest, so that the points of a sweep that all replay one
#: recording hash it once per process.
_DIGESTS: dict[tuple[str, int, int], str] = {}


def digest(path: Path) -> str:
    """SHA-256 of a file, or of a directory as ``relative path NUL file digest`` lines of its
    files in sorted order (symbolic links followed)."""
    path = Path(path)
    if path.is_dir():
        h = hashlib.sha256()
        files = sorted(p for p in path.rglob("*") if p.is_file())
        for p in files:
            h.update(f"{p.relative_to(path).as_posix()}\0{digest(p)}\n".encode())
        return h.hexdigest()
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        _DIGESTS[key] = _file_digest(path)
    return _DIGESTS[key]


def _is_path_key(key: str) -> bool:
    return key in ("path", "config") or key.endswith(("_path", "_file"))


def referenced_paths(scenario: dict[str, Any]) -> list[tuple[str, str]]:
    """``(dotted key, value)`` of every path-like string in a scenario (see the module
    docs), in document order."""
    found: list[tuple[str, str]] = []

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                key = f"{prefix}.{k}" if prefix else str(k)
                if isinstance(v, str) and _is_path_key(str(k)):
                    found.append((key, v))
                else:
                    walk(v, key)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{prefix}[{i}]")

    walk(scenario, "")
    return found


def base_dir(spec: str, overrides: list[str] | None = None) -> Path:
    """The directory the scenario's relative paths are resolved against (the engine's
    rule: a scenario file's own directory, else the current directory)."""
    from tierlab import _native

    try:
        return Path(_native.scenario_base_dir(spec, list(overrides or [])))
    except Exception:  # the run itself reports an invalid scenario
        return Path(".")


def inputs(
    spec: str, scenario_text: str, overrides: list[str] | None = None
) -> list[dict[str, Any]]:
    """Every input file of a run: ``{key, path, sha256}`` (``sha256`` None and ``error`` set
    when it cannot be read), for the path-like keys of ``scenario_text`` (the expanded
    scenario) and the masim file of a ``masim:PATH`` spec."""
    out: list[dict[str, Any]] = []
    if spec.startswith("masim:"):
        out.append({"key": "masim", "path": str(Path(spec[len("masim:") :]).absolute())})
    try:
        doc = tomllib.loads(scenario_text)
    except tomllib.TOMLDecodeError:
        doc = {}
    base = base_dir(spec, overrides)
    for key, value in referenced_paths(doc):
        if value.startswith("builtin:"):  # shipped inside tierlab: its commit says which
            out.append({"key": key, "path": value, "sha256": None, "builtin": True})
            continue
        p = Path(value)
        out.append({"key": key, "path": str(p if p.is_absolute() else (base / p).absolute())})
    for item in out:
        if item.get("builtin"):
            continue
        try:
            item["sha256"] = digest(Path(item["path"]))
        except OSError as e:
            item["sha256"] = None
            item["error"] = e.strerror or str(e)
    return out


@cache
def git_commit() -> dict[str, Any] | None:
    """The git commit of the tree tierlab's sources are in, and whether it had uncommitted
    changes; None when they are not in a git work tree (an installed package)."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
        if head.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "Model", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


@cache
def host() -> dict[str, Any]:
    """The machine: name, CPU model, logical CPUs, memory, OS and kernel."""
    return {
        "hostname": platform.node(),
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "memory_bytes": _memory_bytes(),
        "os": platform.system(),
        "kernel": platform.release(),
        "machine": platform.machine(),
    }


@cache
def software() -> dict[str, Any]:
    """tierlab's version and commit, Python's version, the libraries' versions."""
    from importlib import metadata

    from tierlab._version import VERSION as __version__

    libs: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            libs[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            libs[name] = None
    return {
        "tierlab_version": str(__version__),
        "git": git_commit(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "libraries": libs,
    }


def collect(
    spec: str,
    scenario_text: str,
    executor: str | None = None,
    overrides: list[str] | None = None,
) -> dict[str, Any]:
    """The provenance of a run of ``spec`` (with ``overrides``) whose expanded scenario is
    ``scenario_text``."""
    return {
        "format": FORMAT,
        "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "scenario_sha256": sha256_text(scenario_text),
        "inputs": inputs(spec, scenario_text, overrides),
        "host": host(),
        "software": software(),
        "executor": executor,
        "argv": list(sys.argv),
    }
