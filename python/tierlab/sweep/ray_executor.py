"""The Ray executor: a sweep's points as Ray tasks, on a cluster or a local Ray instance.

``RayExecutor(address="HOST:PORT")`` connects to a running cluster (``ray start --head``
prints its address); without an address it connects to the cluster named by ``RAY_ADDRESS``,
else starts a Ray instance on this machine. Every node must have the same tierlab installed
(its workers import ``tierlab.sweep.worker``). Each point is one task with one CPU; tasks are
not retried (a failed run fails the same way again: the engine is deterministic). Results
are the worker's plain data, so they are the local executor's, number for number.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Generator, Sequence
from typing import Any, TypeVar

from tierlab.sweep.executor import Executor

T = TypeVar("T")
R = TypeVar("R")


def _ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise ImportError(
            f"the Ray executor needs Ray ({e}): install it with pip install 'tierlab[ray]'"
        ) from e
    return ray


#: Seconds to wait for a TCP connection to a cluster's address before giving up (Ray itself
#: retries an unreachable address for minutes, without saying why).
CONNECT_TIMEOUT = 5.0


class RayConnectError(OSError):
    """A Ray cluster address that cannot be reached (the message names it)."""


def check_reachable(address: str | None, timeout: float = CONNECT_TIMEOUT) -> None:
    """Raise :class:`RayConnectError` unless a TCP connection to ``address`` (``HOST:PORT`` or
    ``ray://HOST:PORT``) opens within ``timeout`` seconds. ``None``, ``auto`` and ``local``
    are left to Ray (a local instance, or the one this machine runs)."""
    if address is None or address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[1] if "://" in address else address
    host, sep, port_text = hostport.rpartition(":")
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not sep or not host or not 0 < port < 65536:
        raise RayConnectError(f"Ray address {address!r}: expected HOST:PORT")
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as e:
        reason = e.strerror or str(e) or type(e).__name__
        if isinstance(e, TimeoutError):
            reason = f"no answer within {timeout:g} s"
        raise RayConnectError(
            f"cannot reach the Ray cluster at {address}: {reason.lower()} (is `ray start "
            "--head` running there, and is this its address?)"
        ) from None


class RayExecutor(Executor):
    """Runs points as Ray tasks (see the module docs). ``jobs`` caps how many run at once
    (default: the cluster's CPUs)."""

    name = "ray"

    def __init__(self, address: str | None = None, jobs: int | None = None) -> None:
        if jobs is not None and jobs < 1:
            raise ValueError(f"jobs={jobs}: expected at least 1 Ray task at a time")
        self.address = address
        self.jobs = jobs
        self._connected_here = False

    def _connect(self) -> Any:
        ray = _ray()
        if not ray.is_initialized():
            check_reachable(self.address or os.environ.get("RAY_ADDRESS") or None)
            ray.init(
                address=self.address,
                logging_level=logging.ERROR,
                log_to_driver=False,
                configure_logging=True,
            )
            self._connected_here = True
        return ray

    @property
    def slots(self) -> int:
        if self.jobs is not None:
            return self.jobs
        ray = self._connect()
        return max(1, int(ray.cluster_resources().get("CPU", 1)))

    def describe(self) -> str:
        return f"ray at {self.address or 'a local instance'}, {self.slots} at a time"

    def imap(
        self, fn: Callable[[T], R], items: Sequence[T]
    ) -> Generator[tuple[int, R], None, None]:
        ray = self._connect()
        task = ray.remote(num_cpus=1, max_retries=0)(fn)
        limit = self.slots
        refs: dict[Any, int] = {}
        pending: list[Any] = []
        queue = list(enumerate(items))
        queue.reverse()
        try:
            while queue or pending:
                # At most `limit` tasks submitted at once: Ctrl-C then cancels few, and a
                # cluster shared with others is not flooded.
                while queue and len(pending) < limit:
                    i, item = queue.pop()
                    ref = task.remote(item)
                    refs[ref] = i
                    pending.append(ref)
                ready, pending = ray.wait(pending, num_returns=1)
                for ref in ready:
                    yield refs.pop(ref), ray.get(ref)
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)

    def close(self) -> None:
        if self._connected_here:
            _ray().shutdown()
            self._connected_here = False
