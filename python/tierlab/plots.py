"""matplotlib for tierlab's report plots, set up so that the same data give the same files
byte for byte (a sweep's report is then identical whatever ran its points, and when it was
made): the Agg backend, a fixed salt for the SVG element ids (``svg.hashsalt``) and no
creation date in the SVG metadata (``SOURCE_DATE_EPOCH``, matplotlib's way of leaving it
out, set unless the environment sets it)."""

from __future__ import annotations

import os
from typing import Any


def pyplot() -> Any:
    """``matplotlib.pyplot``, reproducible (see the module docs)."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "tierlab"
    os.environ.setdefault("SOURCE_DATE_EPOCH", "0")
    import matplotlib.pyplot as plt

    return plt
