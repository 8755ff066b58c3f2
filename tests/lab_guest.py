"""The guest side of tests/test_lab.py: runs inside the lab's guest (the host's Python and
tierlab, over 9p) and writes what it saw to DIR/guest.json. tierlab's commands run in this
one process (``tierlab.cli.main.main``) where they can, as importing tierlab costs seconds
under emulation; ``tierlab record`` runs beside the target as its own process.

    python tests/lab_guest.py PARTS DIR   (PARTS: place,tier; DIR: the programs and outputs)
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

TOUCHED = 1024
TARGET_PAGES = 2048


def tierlab(*args: object) -> tuple[int, str, str]:
    from tierlab.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def vmstat() -> dict[str, int]:
    out = {}
    for line in Path("/proc/vmstat").read_text().splitlines():
        k, v = line.split()
        out[k] = int(v)
    return out


def numa_maps(pid: int, addr: int) -> dict[str, int]:
    """The N<node>=<pages> fields of the numa_maps line of the mapping at ``addr``."""
    for line in Path(f"/proc/{pid}/numa_maps").read_text().splitlines():
        words = line.split()
        if int(words[0], 16) == addr:
            return {
                w.split("=")[0]: int(w.split("=")[1])
                for w in words[1:]
                if w.startswith("N") and "=" in w
            }
    raise AssertionError(f"no mapping at {addr:#x} in /proc/{pid}/numa_maps")


def wait_for(cond: Any, what: str, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def samples_in(rec: Path, lo: int, hi: int) -> int:
    import pyarrow.parquet as pq

    n = 0
    for part in sorted((rec / "samples").glob("part-*.parquet")):
        addr = pq.read_table(part, columns=["addr"]).column("addr").to_numpy()
        n += int(((addr >= lo) & (addr < hi)).sum())
    return n


def place(d: Path) -> dict[str, Any]:
    """record (page faults) -> plan (as if the CPUs were on node 1) -> apply, on a live
    place_target; numa_maps before and after."""
    importlib.import_module("tierlab.cli.place")  # imported before the target starts

    out: dict[str, Any] = {}
    target = subprocess.Popen(
        [str(d / "place_target"), str(TARGET_PAGES)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert target.stdin is not None and target.stdout is not None

    def cmd(line: str) -> str:
        assert target.stdin is not None and target.stdout is not None
        target.stdin.write(line + "\n")
        target.stdin.flush()
        return target.stdout.readline().strip()

    try:
        words = target.stdout.readline().split()
        addr = int(words[1], 16)
        page = os.sysconf("SC_PAGE_SIZE")
        out["addr"] = addr
        out["pid"] = target.pid
        rec = d / "place.rec"
        # fmt: off
        recorder = subprocess.Popen(
            [sys.executable, "-m", "tierlab", "record", "--backend", "page-faults", "--pid",
             str(target.pid), "--flush-interval", "100ms", "-o", str(rec)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        # fmt: on
        wait_for(lambda: (rec / "meta.json").exists() or recorder.poll() is not None, "record")
        if recorder.poll() is not None:
            raise AssertionError(f"tierlab record ended: {recorder.communicate()[1]}")
        out["touch"] = cmd(f"touch {TOUCHED}")
        end = addr + TARGET_PAGES * page
        wait_for(lambda: samples_in(rec, addr, end) >= TOUCHED, "the faults to be recorded")
        recorder.send_signal(signal.SIGINT)
        _o, rerr = recorder.communicate(timeout=120)
        out["record_code"] = recorder.returncode
        out["record_stderr"] = rerr[-2000:]
        out["samples_in_range"] = samples_in(rec, addr, end)
        plan = d / "plan.json"
        out["plan"] = tierlab("place", "plan", rec, "-o", plan, "--cpu-nodes", "1=0-1", "--json")
        out["numa_before"] = numa_maps(target.pid, addr)
        code, stdout, stderr = tierlab("place", "apply", "--pid", target.pid, plan, "--json")
        out["apply_code"] = code
        out["apply"] = json.loads(stdout) if stdout.strip() else {"stderr": stderr}
        out["numa_after"] = numa_maps(target.pid, addr)
        code, stdout, stderr = tierlab("place", "show", "--pid", target.pid, "--json")
        out["show_code"] = code
        out["show"] = json.loads(stdout) if stdout.strip() else {"stderr": stderr}
    finally:
        target.stdin.close()
        target.wait(timeout=60)
    return out


def tier(d: Path) -> dict[str, Any]:
    """tierlab tier on lab_phases: its pages first land on the slow node 1; phase A's are
    promoted to node 0 (4 MiB of fast capacity for 8 MiB of A), then demoted to make room for
    phase B's."""
    from tierlab.tier import log as tlog

    before = vmstat()
    rec = d / "tier.rec"
    # fmt: off
    code, stdout, stderr = tierlab(
        "tier", "-o", rec, "--fast-node", "0", "--slow-node", "1", "--fast-capacity", "4MiB",
        "--interval", "200ms", "--json", "--", d / "lab_phases", "2048", "1", "6000", "1",
    )
    # fmt: on
    after = vmstat()
    out: dict[str, Any] = {"code": code, "stderr": stderr[-3000:]}
    out["summary"] = json.loads(stdout) if stdout.strip() else None
    keys = [k for k in after if k.startswith(("pgmigrate", "numa_", "pgpromote", "pgdemote"))]
    out["vmstat"] = {k: after[k] - before.get(k, 0) for k in keys}
    df = tlog.read(rec)
    moved = df[(df.kind == "move") & (df.outcome == "moved")] if df is not None else None
    out["moved"] = {} if moved is None else moved.groupby("action").size().to_dict()
    out["moved_to"] = (
        {} if moved is None else {str(k): int(v) for k, v in moved.groupby("node").size().items()}
    )
    return out


def main() -> int:
    parts, d = sys.argv[1].split(","), Path(sys.argv[2])
    result: dict[str, Any] = {}
    for part in parts:
        t0 = time.monotonic()
        try:
            result[part] = {"ok": True, **{"place": place, "tier": tier}[part](d)}
        except Exception:
            result[part] = {"ok": False, "error": traceback.format_exc()}
        result[part]["guest_seconds"] = time.monotonic() - t0
    # A file, not stdout: the programs tierlab launches write to this process's stdout.
    (d / "guest.json").write_text(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
