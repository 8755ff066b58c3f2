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

from importlib import metadata as _metadata

from tierlab.api import Result, export, heatmap_frame, run, scenarios
from tierlab.recording import Recording, RecordingError, RecordingWriter, to_replay

try:
    __version__ = _metadata.version("tierlab")
except _metadata.PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+unknown"

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
