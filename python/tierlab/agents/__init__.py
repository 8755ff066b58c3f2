"""Your own telemetry technique, tiering policy or replacement policy, written in Python and
run by the simulator like a built-in one (``kind = "python"`` in a scenario) and, for tiering
policies, by ``tierlab tier`` on a live process.

A class derives from :class:`TieringPolicy`, :class:`Telemetry`, :class:`Placement` or
:class:`Replacement`,
declares its parameters as :class:`Param` class attributes and implements the hooks of its
kind; the hooks get a :class:`Context` (the machine as the engine's own agents see it:
numpy arrays in and out, every operation charged by the cost model). See
``docs/python-agents.md`` for the tutorial and ``examples/`` for re-implementations of
built-in policies that give identical statistics.
"""

from __future__ import annotations

from tierlab.agents.base import (
    Agent,
    Context,
    HotSet,
    PagesReport,
    Param,
    Placement,
    Regions,
    RegionsReport,
    Replacement,
    Samples,
    ScanResult,
    Telemetry,
    TieringPolicy,
)

__all__ = [
    "Agent",
    "Context",
    "HotSet",
    "PagesReport",
    "Param",
    "Placement",
    "Regions",
    "RegionsReport",
    "Replacement",
    "Samples",
    "ScanResult",
    "Telemetry",
    "TieringPolicy",
]
