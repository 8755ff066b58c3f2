"""The SLURM executor: a sweep's points as one SLURM job array, submitted with ``sbatch``.

Why generated ``sbatch`` scripts rather than submitit: the array, its throttle, its limits
and its files are all visible and re-runnable by hand (``WORK/arrays/N.sh``), nothing but
SLURM's own commands is needed on the submitting machine, and a sweep resumes from files
alone, whether its submitter was stopped, killed or run again months later.

Layout of the work directory (``OUT/slurm/`` for the CLI; it must be on a file system that
the cluster's nodes share with the submitting machine):

- ``tasks/KEY.pkl``: one item (the function and its argument, pickled); ``KEY`` is the
  SHA-256 of that pickle, so the same point always has the same key;
- ``results/KEY.pkl``: its value, written atomically by the array task
  (:mod:`tierlab.sweep.slurm_task`) when it ends;
- ``queued/KEY``: ``JOBID_INDEX``, the array task that computes it;
- ``arrays/JOBTAG.sh`` / ``.keys``: the job script and the keys of its array indices;
- ``logs/JOBID_INDEX.log``: the array task's output.

A rerun reuses every result file that is there (the points store above usually holds them
already), waits for array tasks of an earlier run that are still queued or running instead
of submitting them again, and submits one array for the rest. A task that ends (cancelled,
failed, out of time or memory) without a result is reported as a
:class:`~tierlab.sweep.executor.TaskFailure` naming its array task and log. At most
``max_queued`` tasks of this sweep are in the queue at once (a sweep larger than that is
submitted as several arrays, one after another); ``jobs`` throttles how many run at once
(the array's ``%N``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tierlab.sweep.executor import Executor, Outcomes, TaskFailure

T = TypeVar("T")
R = TypeVar("R")

#: SLURM job states in which a task may still produce its result.
ALIVE = frozenset(
    {
        "PENDING",
        "CONFIGURING",
        "RUNNING",
        "COMPLETING",
        "SUSPENDED",
        "REQUEUED",
        "REQUEUE_HOLD",
        "REQUEUE_FED",
        "RESIZING",
        "SIGNALING",
        "STAGE_OUT",
        "RESV_DEL_HOLD",
    }
)

#: Memory a task needs beyond the engine's estimate of the run: the Python interpreter,
#: numpy, pandas and the extension loaded (about 200 MiB measured), with room to spare.
BASE_MEMORY_MB = 512

#: Default time limit of a task when none is given (minutes).
DEFAULT_TIME_MINUTES = 60


class SlurmError(OSError):
    """SLURM's commands are missing or refused a request (the message says which)."""


@dataclass
class Limits:
    """Per-task limits of an array: minutes of wall time and MiB of memory."""

    minutes: int
    mem_mb: int


def _key(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def point_limits(items: Sequence[Any], minutes: int | None, mem_mb: int | None) -> Limits:
    """Limits for an array running ``items``: the given ones, else, for sweep points, the
    memory the engine estimates for the largest point (``_native.estimate_memory``: TLBs,
    caches and per-window results, as a run checks before it starts) doubled plus
    :data:`BASE_MEMORY_MB`; the time limit is :data:`DEFAULT_TIME_MINUTES` unless given
    (the engine has no estimate of a run's wall time)."""
    from tierlab.sweep.point import Point

    if mem_mb is None:
        est = 0
        for item in items:
            point = item[1] if isinstance(item, tuple) and len(item) == 2 else item
            if isinstance(point, Point):
                try:
                    from tierlab import _native

                    b = _native.estimate_memory(point.spec, list(point.overrides), point.seed)
                except Exception:  # an invalid point: its task will say why
                    continue
                est = max(est, int(b))
        mem_mb = BASE_MEMORY_MB + 2 * (est + (1 << 20) - 1) // (1 << 20)
    return Limits(minutes or DEFAULT_TIME_MINUTES, mem_mb)


def _run(cmd: list[str], what: str) -> str:
    exe = shutil.which(cmd[0])
    if exe is None:
        raise SlurmError(
            f"--executor slurm needs SLURM's `{cmd[0]}` on PATH (it is not found): run on a "
            "SLURM login node, or install the client commands (Debian: slurm-client)"
        )
    try:
        p = subprocess.run([exe, *cmd[1:]], capture_output=True, text=True, check=False)
    except OSError as e:
        raise SlurmError(f"{cmd[0]}: {e}") from None
    if p.returncode != 0:
        msg = " ".join((p.stderr or p.stdout).split()) or f"exit status {p.returncode}"
        raise SlurmError(f"{what} failed: {cmd[0]}: {msg}")
    return p.stdout


class SlurmExecutor(Executor):
    """Runs items as the tasks of SLURM job arrays (see the module docs).

    ``work_dir`` holds the tasks, results, scripts and logs; ``partition`` is passed to
    ``sbatch``; ``jobs`` caps the tasks running at once (``--array=...%jobs``; default: no
    cap); ``max_queued`` caps this sweep's tasks in the queue; ``minutes`` and ``mem_mb`` are
    per-task limits (default: :func:`point_limits`); ``poll_seconds`` is how often the queue
    and the result files are looked at; ``on_submit(job_id, tasks, limits)`` is called after
    each ``sbatch``."""

    name = "slurm"

    def __init__(
        self,
        work_dir: Path,
        *,
        partition: str | None = None,
        jobs: int | None = None,
        max_queued: int = 500,
        minutes: int | None = None,
        mem_mb: int | None = None,
        poll_seconds: float = 2.0,
        python: str | None = None,
        job_name: str = "tierlab-sweep",
        on_submit: Callable[[str, int, Limits], None] | None = None,
        on_adopt: Callable[[list[str], int], None] | None = None,
    ) -> None:
        if jobs is not None and jobs < 1:
            raise ValueError(f"jobs={jobs}: expected at least 1 task at a time")
        if max_queued < 1:
            raise ValueError(f"max_queued={max_queued}: expected at least 1")
        self.work = Path(work_dir).absolute()
        self.partition = partition
        self.jobs = jobs
        self.max_queued = max_queued
        self.minutes = minutes
        self.mem_mb = mem_mb
        self.poll_seconds = poll_seconds
        self.python = python or sys.executable
        self.job_name = job_name
        self.on_submit = on_submit
        self.on_adopt = on_adopt
        #: ``(job id, number of tasks)`` of every array this executor submitted
        self.submitted: list[tuple[str, int]] = []

    @property
    def slots(self) -> int:
        return self.jobs or self.max_queued

    def describe(self) -> str:
        part = f"partition {self.partition}" if self.partition else "the default partition"
        cap = f"{self.jobs} at a time" if self.jobs else "no cap on tasks at a time"
        return f"slurm ({part}, {cap})"

    def _dirs(self) -> None:
        for d in ("tasks", "results", "queued", "arrays", "logs"):
            (self.work / d).mkdir(parents=True, exist_ok=True)

    def _states(self, job_ids: Sequence[str]) -> dict[str, str]:
        """``{"JOBID_INDEX": STATE}`` of the array tasks of ``job_ids`` SLURM still knows.
        The user's jobs are listed and filtered here: ``squeue -j`` fails outright when one
        of the ids is no longer known (finished more than ``MinJobAge`` ago)."""
        if not job_ids:
            return {}
        import pwd

        user = pwd.getpwuid(os.getuid()).pw_name
        out = _run(
            ["squeue", "-h", "-r", "--states=all", "-u", user, "-o", "%i|%T"],
            "asking SLURM for the sweep's array tasks",
        )
        wanted = set(job_ids)
        states: dict[str, str] = {}
        for line in out.splitlines():
            task, _, state = line.strip().partition("|")
            if task and task.split("_")[0] in wanted:
                states[task] = state.strip()
        return states

    def _submit(self, keys: list[str], limits: Limits) -> str:
        """Submit one array computing ``keys`` (index i: ``keys[i]``); its job id."""
        tag = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{len(self.submitted)}"
        listing = self.work / "arrays" / f"{tag}.keys"
        _atomic_write(listing, ("\n".join(keys) + "\n").encode())
        script = self.work / "arrays" / f"{tag}.sh"
        _atomic_write(
            script,
            (
                "#!/bin/sh\n"
                "# A tierlab sweep's array: each task runs the point whose key is line\n"
                "# SLURM_ARRAY_TASK_ID (from 0) of the .keys file beside this script.\n"
                f"exec {_sh(self.python)} -m tierlab.sweep.slurm_task {_sh(str(self.work))} "
                f'{_sh(str(listing))} "$SLURM_ARRAY_TASK_ID"\n'
            ).encode(),
        )
        script.chmod(0o755)
        throttle = f"%{self.jobs}" if self.jobs else ""
        cmd = [
            "sbatch",
            "--parsable",
            f"--job-name={self.job_name}",
            f"--array=0-{len(keys) - 1}{throttle}",
            f"--time={limits.minutes}",
            f"--mem={limits.mem_mb}M",
            "--ntasks=1",
            "--cpus-per-task=1",
            f"--chdir={os.getcwd()}",
            f"--output={self.work / 'logs' / '%A_%a.log'}",
        ]
        if self.partition:
            cmd.append(f"--partition={self.partition}")
        cmd.append(str(script))
        job = _run(cmd, "submitting the sweep's job array").strip().split(";")[0]
        if not job:
            raise SlurmError("sbatch printed no job id")
        for i, k in enumerate(keys):
            _atomic_write(self.work / "queued" / k, f"{job}_{i}\n".encode())
        self.submitted.append((job, len(keys)))
        if self.on_submit is not None:
            self.on_submit(job, len(keys), limits)
        return job

    def _failure(self, task: str, state: str) -> TaskFailure:
        log = self.work / "logs" / f"{task}.log"
        last = ""
        try:
            lines = [x for x in log.read_text(errors="replace").splitlines() if x.strip()]
            if lines:
                last = f": {lines[-1].strip()[:300]}"
        except OSError:
            pass
        what = state.lower().replace("_", " ") if state else "gone from the queue"
        return TaskFailure(
            f"SLURM array task {task} ended without a result ({what}){last} (log: {log})"
        )

    def imap(self, fn: Callable[[T], R], items: Sequence[T]) -> Outcomes[R]:
        return self._imap(fn, items)

    def _imap(
        self, fn: Callable[[T], R], items: Sequence[T]
    ) -> Generator[tuple[int, Any], None, None]:
        self._dirs()
        keys: list[str] = []
        for item in items:
            payload = pickle.dumps((fn, item), protocol=4)
            k = _key(payload)
            path = self.work / "tasks" / f"{k}.pkl"
            if not path.exists():
                _atomic_write(path, payload)
            keys.append(k)
        index = {k: i for i, k in enumerate(keys)}
        pending = dict(index)  # key -> item index, for keys without a value yet
        task_of: dict[str, str] = {}  # key -> "JOBID_INDEX"
        ours: list[str] = []  # job ids submitted by this call
        waiting: list[str] = []  # keys not submitted yet
        try:
            # Values already there (an earlier run's tasks that finished after it stopped).
            for k in list(pending):
                got = self._take(k)
                if got is not None:
                    yield pending.pop(k), got
                    self._forget(k)
            # Tasks of an earlier run still queued or running: wait for them.
            earlier: dict[str, str] = {}
            for k in pending:
                with contextlib.suppress(OSError):
                    earlier[k] = (self.work / "queued" / k).read_text().strip()
            if earlier:
                alive = self._states(sorted({t.split("_")[0] for t in earlier.values()}))
                for k, t in earlier.items():
                    if alive.get(t) in ALIVE:
                        task_of[k] = t
                if task_of and self.on_adopt is not None:
                    self.on_adopt(sorted({t.split("_")[0] for t in task_of.values()}), len(task_of))
            waiting = [k for k in pending if k not in task_of]
            limits = (
                point_limits(
                    [
                        pickle.loads((self.work / "tasks" / f"{k}.pkl").read_bytes())[1]
                        for k in waiting
                    ],
                    self.minutes,
                    self.mem_mb,
                )
                if waiting
                else Limits(self.minutes or DEFAULT_TIME_MINUTES, self.mem_mb or 0)
            )
            while pending:
                room = self.max_queued - len(task_of)
                if waiting and room > 0:
                    batch, waiting = waiting[:room], waiting[room:]
                    job = self._submit(batch, limits)
                    ours.append(job)
                    for i, k in enumerate(batch):
                        task_of[k] = f"{job}_{i}"
                # Results first, then the queue: a task that wrote its result and ended is
                # seen as done, never as gone.
                for k in [k for k in pending if k in task_of]:
                    got = self._take(k)
                    if got is not None:
                        task_of.pop(k)
                        yield pending.pop(k), got
                        self._forget(k)
                jobs = sorted({t.split("_")[0] for t in task_of.values()})
                states = self._states(jobs)
                for k in [k for k in pending if k in task_of]:
                    state = states.get(task_of[k], "")
                    if state in ALIVE:
                        continue
                    got = self._take(k)
                    if got is not None:
                        task_of.pop(k)
                        yield pending.pop(k), got
                        self._forget(k)
                        continue
                    t = task_of.pop(k)
                    (self.work / "queued" / k).unlink(missing_ok=True)
                    yield pending.pop(k), self._failure(t, state)
                if pending:
                    time.sleep(self.poll_seconds)
        finally:
            # Stopped early (Ctrl-C, an error): the tasks this call submitted are cancelled;
            # an earlier run's tasks are left to finish (their results are reused).
            mine = [
                task_of[k] for k in pending if k in task_of and task_of[k].split("_")[0] in ours
            ]
            if mine:
                subprocess.run(
                    [shutil.which("scancel") or "scancel", *mine], capture_output=True, check=False
                )
                for k in pending:
                    if k in task_of and task_of[k] in mine:
                        (self.work / "queued" / k).unlink(missing_ok=True)

    def _forget(self, key: str) -> None:
        """Remove ``key``'s files once its value was handed over (the sweep's points store
        keeps it; a later ``--fresh`` run must compute it again, not find it here)."""
        for path in (
            self.work / "results" / f"{key}.pkl",
            self.work / "tasks" / f"{key}.pkl",
            self.work / "queued" / key,
        ):
            path.unlink(missing_ok=True)

    def _take(self, key: str) -> Any:
        """The value stored for ``key`` (None when there is none yet)."""
        path = self.work / "results" / f"{key}.pkl"
        try:
            data = path.read_bytes()
        except OSError:
            return None
        try:
            value = pickle.loads(data)
        except Exception:  # a damaged file: compute it again
            path.unlink(missing_ok=True)
            return None
        return value


def _sh(text: str) -> str:
    """``text`` quoted for ``/bin/sh``."""
    import shlex

    return shlex.quote(text)
