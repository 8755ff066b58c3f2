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


class RayExecutor(Executor):
    """Runs points as Ray tasks (see the module docs). ``jobs`` caps how many run at once
    (default: the cluster's CPUs)."""

    name = "ray"

    def __init__(self, address: str | None = None, jobs: int | None = None) -> None:
        self.address = address
        self.jobs = jobs
        self._connected_here = False

    def _connect(self) -> Any:
        ray = _ray()
        if not ray.is_initialized():
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
        if self.jobs:
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
