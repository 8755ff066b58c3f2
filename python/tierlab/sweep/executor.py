"""Executors: where the points of a sweep run.

An :class:`Executor` runs a function over a list of items and yields ``(index, value)`` as
each finishes, in any order; closing the iterator (or an exception in it, such as Ctrl-C)
cancels what has not finished. The function must not raise for an item that fails (the
sweep's worker returns its errors as values), and items and values must pickle.
:class:`LocalExecutor` runs on this machine: in this process for one job, in a pool of
worker processes otherwise. ``tierlab.sweep.ray_executor.RayExecutor`` runs on a Ray
cluster.
"""

from __future__ import annotations

import multiprocessing
import signal
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class TaskFailure:
    """What an executor yields for an item whose run ended without a value (a batch
    scheduler's task cancelled, killed or out of time): the reason, one line. The sweep
    engine reports it as that point's failure. Plain data: it pickles."""

    def __init__(self, message: str) -> None:
        self.message = message

    def __repr__(self) -> str:
        return f"TaskFailure({self.message!r})"


class Outcomes(Protocol[R_co]):
    """What :meth:`Executor.imap` returns: an iterator of ``(index, value)`` that
    :meth:`close` stops (cancelling what has not finished). Generators are outcomes."""

    def __iter__(self) -> Iterator[tuple[int, R_co]]: ...

    def __next__(self) -> tuple[int, R_co]: ...

    def close(self) -> None: ...


class Executor(ABC):
    """Runs a function over items, yielding results as they finish (see the module docs)."""

    #: A short name for messages (``local``, ``ray``).
    name: str = "executor"

    @property
    @abstractmethod
    def slots(self) -> int:
        """How many items run at once (for progress and ETA)."""

    @abstractmethod
    def imap(self, fn: Callable[[T], R], items: Sequence[T]) -> Outcomes[R]:
        """``(index, fn(items[index]))`` for every item, in the order they finish."""

    def describe(self) -> str:
        return f"{self.name}, {self.slots} at a time"

    def close(self) -> None:
        """Release what the executor holds (connections, processes)."""
        return None

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _init_worker() -> None:
    # A Ctrl-C in the terminal reaches the whole process group: the parent stops the
    # sweep and ends the workers itself, so they must not die on it with a traceback each.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # SIGHUP likewise; SIGTERM ends a worker at once (the pool's own way of ending them),
    # not through the parent's handler, inherited by the fork, that stops a command softly.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # A parent killed outright (SIGKILL) takes its workers with it instead of leaving them
    # computing points nobody will read.
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            pr_set_pdeathsig = 1
            ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
        except (OSError, AttributeError):
            pass


class LocalExecutor(Executor):
    """This machine: ``jobs`` = 1 runs in this process; more run in a pool of that many
    worker processes (forked on Linux, so they start at once and share the loaded
    extension; spawned elsewhere)."""

    name = "local"

    def __init__(self, jobs: int = 1) -> None:
        if int(jobs) < 1:
            raise ValueError(f"jobs={jobs}: expected at least 1 point at a time")
        self.jobs = int(jobs)

    @property
    def slots(self) -> int:
        return self.jobs

    def imap(self, fn: Callable[[T], R], items: Sequence[T]) -> Outcomes[R]:
        if self.jobs == 1 or len(items) <= 1:
            return ((i, fn(item)) for i, item in enumerate(items))
        method = "fork" if sys.platform.startswith("linux") else "spawn"
        pool = ProcessPoolExecutor(
            max_workers=min(self.jobs, len(items)),
            mp_context=multiprocessing.get_context(method),
            initializer=_init_worker,
        )
        # Everything is submitted here, before the caller iterates: with fork, the workers
        # start now, before the caller's progress display starts a thread of its own.
        return _PoolOutcomes(pool, [pool.submit(fn, item) for item in items])


class _PoolOutcomes(Iterator[tuple[int, R]]):
    """Results of a process pool's futures as they finish; :meth:`close` (also on an
    interrupt) cancels the pending ones and ends the running workers."""

    def __init__(self, pool: ProcessPoolExecutor, futures: list[Future[R]]) -> None:
        self.pool = pool
        self.index = {f: i for i, f in enumerate(futures)}
        self.pending: set[Future[R]] = set(futures)
        self.ready: list[Future[R]] = []
        self.closed = False

    def __iter__(self) -> _PoolOutcomes[R]:
        return self

    def __next__(self) -> tuple[int, R]:
        try:
            while not self.ready:
                if not self.pending:
                    self.close()
                    raise StopIteration
                finished, self.pending = wait(self.pending, return_when=FIRST_COMPLETED)
                self.ready = sorted(finished, key=self.index.__getitem__)
            f = self.ready.pop(0)
            return self.index[f], f.result()
        except BaseException as e:
            if not isinstance(e, StopIteration):
                self.close()
            raise

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.pending:
            for f in self.pending:
                f.cancel()
            # Running points are abandoned: end their processes rather than wait.
            for proc in list((getattr(self.pool, "_processes", None) or {}).values()):
                if proc.is_alive():
                    proc.terminate()
        self.pool.shutdown(wait=True, cancel_futures=True)
