"""The benchmark record of ``make bench`` (``tierlab bench engine --record DIR``).

Each record is one JSON file in ``DIR`` (``bench/results/`` by default in the repository):
the commit, the machine, every benchmark's best / median / worst rate over the rounds, and,
with ``--calibrate C_FILE``, the calibration: the naive C model of the TLB-miss path
(``../shared/bench/engine-calibration.c``) run in the same rounds, alternating with tierlab,
and the ratio tierlab / model per round (its median is the figure). A new record is compared
with the newest earlier one: the ratio new / old of every median.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

#: The calibration model's runs: (name, arguments after the binary, the tierlab benchmark it
#: calibrates). Uniform random over 1 GiB walks on almost every access (machine_1core_random);
#: sequential, 64 accesses per page, is the TLB-hit path (machine_1core runs STREAM triad).
CALIBRATION_RUNS = (
    ("model_random", ["1", "30000000"], "machine_1core_random"),
    ("model_seq", ["1", "100000000", "seq"], "machine_1core"),
)
#: Accesses of the model's runs with --quick (a tenth).
QUICK_DIVISOR = 10

_RATE = re.compile(r"([0-9.]+) M acc/s")


class BenchRecordError(Exception):
    """A calibration model that does not build or run, a record directory that is unusable."""


@dataclass
class Model:
    """The naive C model, built once."""

    binary: Path
    source: Path
    quick: bool

    @classmethod
    def build(cls, source: Path, work: Path, quick: bool) -> Model:
        if not source.is_file():
            raise BenchRecordError(f"{source}: the calibration model is not there (a C file)")
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            raise BenchRecordError("no C compiler (cc or gcc) to build the calibration model")
        binary = work / "calib"
        res = subprocess.run(
            [cc, "-O2", "-o", str(binary), str(source)], capture_output=True, text=True
        )
        if res.returncode != 0:
            first = (res.stderr.strip().splitlines() or ["(no message)"])[0]
            raise BenchRecordError(f"{source}: does not compile: {first}")
        return cls(binary, source, quick)

    def run(self, args: list[str]) -> float:
        """Accesses per second of one run of the model."""
        if self.quick:
            args = [args[0], str(int(args[1]) // QUICK_DIVISOR), *args[2:]]
        res = subprocess.run([str(self.binary), *args], capture_output=True, text=True, timeout=600)
        m = _RATE.search(res.stdout)
        if res.returncode != 0 or m is None:
            raise BenchRecordError(
                f"{self.source}: the model's run {' '.join(args)} printed no rate "
                f"(exit {res.returncode}): {res.stdout.strip()[:200]}"
            )
        return float(m.group(1)) * 1e6


def rounds(
    bench_round: Any, repeat: int, model: Model | None
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """``repeat`` rounds, each: every tierlab benchmark once, then every model run once
    (alternating, so a slow spell of a shared machine hits both). Returns the rates per
    benchmark and per model run, one entry per round."""
    runs: dict[str, list[float]] = {}
    models: dict[str, list[float]] = {}
    for _ in range(repeat):
        for k, v in bench_round().items():
            runs.setdefault(k, []).append(float(v))
        if model is not None:
            for name, args, _ in CALIBRATION_RUNS:
                models.setdefault(name, []).append(model.run(args))
    return runs, models


def _summary(rates: list[float]) -> dict[str, float]:
    return {"best": max(rates), "median": median(rates), "worst": min(rates)}


def _git(*args: str) -> str:
    """``git ARGS`` in the checkout tierlab runs from (an editable install), else nothing."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return ""
    try:
        res = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return res.stdout.strip() if res.returncode == 0 else ""


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        pass
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_bytes": mem,
        "kernel": platform.release(),
        "load_1min": load,
        "python": platform.python_version(),
    }


def make_record(
    runs: dict[str, list[float]],
    models: dict[str, list[float]],
    *,
    quick: bool,
    source: Path | None,
) -> dict[str, Any]:
    commit = _git("rev-parse", "HEAD")
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no")) if commit else False
    rec: dict[str, Any] = {
        "kind": "tierlab bench engine",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit,
        "dirty": dirty,
        "quick": quick,
        "rounds": len(next(iter(runs.values()), [])),
        "machine": machine(),
        "benchmarks": {k: _summary(v) for k, v in runs.items()},
        "runs": runs,
    }
    if models:
        cal: dict[str, Any] = {"model": source.name if source else "", "runs": models}
        for name, _, bench in CALIBRATION_RUNS:
            mine, theirs = runs.get(bench), models.get(name)
            if not mine or not theirs:
                continue
            ratios = [a / b for a, b in zip(mine, theirs, strict=True)]
            cal[f"{bench}_over_{name}"] = {
                "median": median(ratios),
                "per_round": ratios,
                "model_median_rate": median(theirs),
            }
        rec["calibration"] = cal
    return rec


def previous(directory: Path) -> tuple[Path, dict[str, Any]] | None:
    """The newest record in ``directory`` (by its date), if any; files that are not records
    are skipped."""
    best: tuple[str, Path, dict[str, Any]] | None = None
    if not directory.is_dir():
        return None
    for p in directory.glob("*.json"):
        try:
            doc = json.loads(p.read_text())
        except (OSError, ValueError, RecursionError):
            continue
        if not isinstance(doc, dict) or doc.get("kind") != "tierlab bench engine":
            continue
        date = str(doc.get("date", ""))
        if best is None or date > best[0]:
            best = (date, p, doc)
    return (best[1], best[2]) if best else None


def compare(new: dict[str, Any], old: dict[str, Any]) -> dict[str, float]:
    """new median / old median of every benchmark both records have, and of the
    calibration ratios."""
    out: dict[str, float] = {}
    for k, v in new.get("benchmarks", {}).items():
        o = old.get("benchmarks", {}).get(k)
        if isinstance(o, dict) and o.get("median"):
            out[k] = v["median"] / o["median"]
    for k, v in new.get("calibration", {}).items():
        o = old.get("calibration", {}).get(k)
        if isinstance(v, dict) and isinstance(o, dict) and o.get("median"):
            out[k] = v["median"] / o["median"]
    return out


def write(directory: Path, rec: dict[str, Any]) -> Path:
    """Write ``rec`` as ``engine-<date>-<commit>.json`` in ``directory`` (created)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BenchRecordError(f"{directory}: cannot create the record directory: {e}") from e
    stamp = rec["date"].replace(":", "").replace("-", "").split("+")[0]
    name = f"engine-{stamp}-{(rec['commit'] or 'nocommit')[:10]}{'-dirty' if rec['dirty'] else ''}"
    path = directory / f"{name}.json"
    n = 1
    while path.exists():  # two records in one second
        n += 1
        path = directory / f"{name}-{n}.json"
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".record-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(rec, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)
    return path
