"""tierlab: where a program's memory is hot, and where it should live.

A tiered-memory simulator (many-core, NUMA, HBM/DRAM/CXL/NVM tiers, telemetry techniques and
placement policies) with exact ground truth, plus a recording format shared by simulated and
live telemetry.

    >>> import tierlab
    >>> r = tierlab.run("demo", duration="50ms", machine__cores=4)
    >>> r.stats["machine"]["accesses"]
    >>> r.timeseries.head()
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tierlab.api import Result, export, heatmap_frame, run, scenarios
    from tierlab.recording import Recording, RecordingError, RecordingWriter, to_replay

# The public names are imported on first use (PEP 562), so `import tierlab` and the command
# line start without pandas: the CLI's own Ctrl-C and error handling is in place before the
# heavy imports run.
_LAZY = {
    "Result": "tierlab.api",
    "export": "tierlab.api",
    "heatmap_frame": "tierlab.api",
    "run": "tierlab.api",
    "scenarios": "tierlab.api",
    "Recording": "tierlab.recording",
    "RecordingError": "tierlab.recording",
    "RecordingWriter": "tierlab.recording",
    "to_replay": "tierlab.recording",
}


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("tierlab")
    except metadata.PackageNotFoundError:  # running from a source tree without install
        return "0.0.0+unknown"


def __getattr__(name: str) -> object:
    if name == "__version__":
        value: object = _version()
        globals()[name] = value
        return value
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tierlab' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | {"__version__"})


__all__ = [
    "Recording",
    "RecordingError",
    "RecordingWriter",
    "Result",
    "__version__",
    "export",
    "heatmap_frame",
    "run",
    "scenarios",
    "to_replay",
]
