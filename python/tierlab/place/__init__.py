"""Live placement on Linux: turn a recording into a page-to-node plan (:mod:`.plan`), apply
it to a running process with ``move_pages(2)`` (:mod:`.apply`), and show where a process's
pages are (:mod:`.show`). The system call and the NUMA topology are in :mod:`.numa`,
``/proc/PID`` parsing in :mod:`.proc`. Documented in ``docs/placement.md`` (Live placement)
and ``docs/formats.md`` (Placement plan)."""

from __future__ import annotations


class PlaceError(ValueError):
    """Something the user can fix: a bad plan file, a missing process, a bad option. The
    message says what and where (file, field)."""
