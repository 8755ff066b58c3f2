"""The live tiering loop, ``tierlab tier``: sample a running process, decide with the
simulator's tiering policy (the Rust decision core of ``hottest-first``, through
``tierlab._native.HottestFirstCore``), move pages with ``move_pages(2)`` in rate-limited
batches, and write everything as a recording with a decision log.

:mod:`.loop` runs it, :mod:`.log` writes and reads the decision log (``REC/tier/``),
:mod:`.model` is a model of the kernel with several nodes for tests. Documented in
``docs/placement.md`` (Live tiering loop) and ``docs/formats.md`` (Decision log).
"""

from __future__ import annotations

from tierlab.place import PlaceError


class TierError(PlaceError):
    """Something the user can fix: a missing node, a bad option, a process that cannot be
    traced. The message says what the machine or the process lacks."""
