"""Recording overhead: run a command N times without and N times with recording,
interleaved (base, recorded, base, recorded, ...), and compare the target's run times.

Both kinds of run time the target alone, from its start to its exit (the recorder's own
start-up and the writing of the last chunk are not counted). The overhead is
``mean(recorded) / mean(baseline) - 1``; its 95 % confidence interval comes from a seeded
bootstrap of that ratio (10,000 resamples of each group), so it is reproducible.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tierlab.live.recorder import RecordOptions, record


class OverheadError(RuntimeError):
    pass


@dataclass
class Overhead:
    command: list[str]
    runs: int
    baseline_s: list[float]
    recorded_s: list[float]
    samples: list[int]
    drains: list[int]
    lost: list[int]
    overhead: float
    ci95: tuple[float, float]
    parameters: dict[str, Any]
    #: the highest 1-minute load average seen during the runs, and the cores
    load_max: float | None = None
    cores: int = 1

    def noise_notes(self) -> list[str]:
        """Why the figure may be noise (see :mod:`tierlab.noise`)."""
        from tierlab import noise

        return noise.notes(self.ci95, self.load_max, self.cores)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["ci95"] = list(self.ci95)
        d["ci95_spans_zero"] = self.ci95[0] <= 0 <= self.ci95[1]
        d["busy"] = bool(self.load_max is not None and self.load_max > self.cores)
        d["noise"] = self.noise_notes()
        d["baseline_mean_s"] = float(np.mean(self.baseline_s))
        d["recorded_mean_s"] = float(np.mean(self.recorded_s))
        return d


def bootstrap_ci(
    base: Sequence[float], rec: Sequence[float], *, n: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """95 % interval of mean(rec) / mean(base) - 1 by resampling each group."""
    b, r = np.asarray(base, dtype=float), np.asarray(rec, dtype=float)
    rng = np.random.default_rng(seed)
    bm = b[rng.integers(0, b.size, size=(n, b.size))].mean(axis=1)
    rm = r[rng.integers(0, r.size, size=(n, r.size))].mean(axis=1)
    ratio = rm / bm - 1.0
    lo, hi = np.percentile(ratio, [2.5, 97.5])
    return float(lo), float(hi)


def ended(how: str, value: int) -> str:
    """How the target ended, in words: ``exited with status 3``, ``killed by signal
    SIGSEGV`` (``how`` is ``exit`` or ``signal``, as the recorder reports it)."""
    if how == "signal":
        import signal

        try:
            return f"killed by signal {signal.Signals(value).name}"
        except ValueError:
            return f"killed by signal {value}"
    return f"exited with status {value}"


def _baseline(argv: Sequence[str]) -> float:
    t = time.perf_counter()
    try:
        proc = subprocess.run(list(argv), stdout=subprocess.DEVNULL, check=False)
    except OSError as e:
        raise OverheadError(f"{argv[0]}: {e.strerror}") from e
    dt = time.perf_counter() - t
    if proc.returncode != 0:
        code = proc.returncode
        how = ended("signal", -code) if code < 0 else ended("exit", code)
        raise OverheadError(f"{argv[0]} {how} (baseline run)")
    return dt


def measure(
    argv: Sequence[str],
    *,
    runs: int = 5,
    warmup: int = 1,
    options: RecordOptions | None = None,
    keep: Path | None = None,
    on_run: Callable[[str, int, float], None] | None = None,
) -> Overhead:
    if runs < 2:
        raise OverheadError("--runs must be at least 2 for a confidence interval")
    from tierlab import noise

    watch = noise.LoadWatch()
    opts = options or RecordOptions()
    base: list[float] = []
    rec: list[float] = []
    samples: list[int] = []
    drains: list[int] = []
    lost: list[int] = []
    params: dict[str, Any] = {}
    tmp = Path(tempfile.mkdtemp(prefix="tierlab-overhead-"))
    try:
        for i in range(warmup + runs):
            counted = i >= warmup
            dt = _baseline(argv)
            if counted:
                base.append(dt)
                if on_run:
                    on_run("baseline", i - warmup, dt)
            out = (keep / f"run-{i - warmup}") if (keep and counted) else tmp / f"r{i}"
            res = record(out, argv=argv, options=opts, overwrite=True, devnull_stdout=True)
            if res.exit != ("exit", 0):
                how = "did not end" if res.exit is None else ended(*res.exit)
                raise OverheadError(f"{argv[0]} {how} (recorded run)")
            params = res.parameters
            if counted:
                rec.append(res.target_s)
                samples.append(int(res.accounting["samples"]))
                drains.append(int(res.accounting["drains"]))
                lost.append(int(res.accounting["lost"]))
                if on_run:
                    on_run("recorded", i - warmup, res.target_s)
            if out.parent == tmp:
                shutil.rmtree(out, ignore_errors=True)
            watch.sample()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    overhead = float(np.mean(rec) / np.mean(base) - 1.0)
    return Overhead(
        command=list(argv),
        runs=runs,
        baseline_s=base,
        recorded_s=rec,
        samples=samples,
        drains=drains,
        lost=lost,
        overhead=overhead,
        ci95=bootstrap_ci(base, rec),
        parameters={k: params.get(k) for k in ("backend", "event", "period", "buffer_size")},
        load_max=watch.max,
        cores=noise.cores(),
    )
