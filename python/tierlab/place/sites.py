"""Site-based placement: which allocation sites go to the fast tier, and a run of the program
that puts them there.

- :func:`make_plan` ranks a recording's allocation sites (frame 0: the line that called the
  allocator, :mod:`tierlab.view.sites`) by accesses per byte, the bytes being the site's
  page-rounded footprint (each chosen allocation gets pages of its own), and takes them in
  that order while the chosen sites' live footprint stays within the fast capacity at every
  moment of the recording (a site that does not fit is passed over; smaller, less dense ones
  after it may still fit). The prediction: the chosen sites' accesses.
- :func:`simulate` replays the recording's accesses against the plan (an access is fast when
  the allocation live at its address and time belongs to a chosen site) and, on the same
  accesses, the best static page placement of the same capacity (the hottest 4 KiB pages).
- :func:`run` runs a program with the allocation interposer (``tierlab_alloc_rt.c``) in
  placement mode: the chosen sites' return addresses are found in the program's executable by
  source line (``objdump -d`` for the call instructions, ``addr2line`` for their lines), the
  interposer binds their allocations to the fast node with ``mbind`` and the rest of the
  process to the slow node with ``set_mempolicy``, and writes every call and its result to a
  log, which is parsed into the report.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tierlab.place import PlaceError

FORMAT = "tierlab-site-plan"
PAGE = 1 << 12
#: Bytes the interposer puts before a fast block (its header; FAST_HDR in tierlab_alloc_rt.c).
FAST_HEADER = 64


def _location_key(loc: str) -> str | None:
    """``file:line`` of a ``function file:line`` location (the file's basename), or None."""
    m = re.search(r"(\S+):(\d+)$", loc.strip())
    if not m or m.group(1).startswith("??"):
        return None
    return f"{Path(m.group(1)).name}:{m.group(2)}"


def _footprints(al: Any, groups: np.ndarray, ngroups: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per group: (times, live bytes just after each time), each allocation taking what the
    interposer maps for it: its bytes and header rounded up to whole pages."""
    out = []
    need = al.size + np.uint64(FAST_HEADER + PAGE - 1)
    rounded = (need // np.uint64(PAGE) * np.uint64(PAGE)).astype(np.int64)
    for g in range(ngroups):
        sel = groups == g
        t = np.concatenate([al.t_start[sel], al.t_end[sel]])
        d = np.concatenate([rounded[sel], -rounded[sel]])
        order = np.lexsort((d < 0, t))
        out.append((t[order], np.cumsum(d[order])))
    return out


def _peak_together(curves: list[tuple[np.ndarray, np.ndarray]]) -> int:
    if not curves:
        return 0
    times = np.unique(np.concatenate([c[0] for c in curves]))
    total = np.zeros(times.size, dtype=np.int64)
    for t, live in curves:
        if t.size == 0:
            continue
        idx = np.searchsorted(t, times, side="right") - 1
        total += np.where(idx >= 0, live[np.maximum(idx, 0)], 0)
    return int(total.max()) if total.size else 0


def make_plan(
    rec_path: Path, *, fast_capacity: int, fast_node: int, slow_node: int | None
) -> dict[str, Any]:
    from tierlab.recording import Recording, RecordingError
    from tierlab.view import sites as sv

    try:
        rec = Recording.open(rec_path)
        rep = sv.analyze(rec, depth=1, phases=1)
    except RecordingError as e:
        raise PlaceError(str(e)) from e
    if rep is None:
        raise PlaceError(
            f"{rec_path}: no allocations table: record the program with `tierlab trace --cc` "
            "or `tierlab record --alloc-sites` to plan by site"
        )
    al = sv.lifetimes(rec.frame("allocations"))
    group, info = sv.site_groups(rec.frame("alloc_sites"), 1)
    alloc_group = group[al.site] if al.count else np.zeros(0, dtype=np.int64)
    curves = _footprints(al, alloc_group, len(info))
    peaks = [int(c[1].max()) if c[1].size else 0 for c in curves]
    by_loc = {r.location: r for r in rep.rows}
    order = sorted(
        (g for g in range(len(info)) if info[g][0] in by_loc),
        key=lambda g: (
            -(by_loc[info[g][0]].accesses / peaks[g]) if peaks[g] else 0.0,
            info[g][0],
        ),
    )
    chosen: list[int] = []
    for g in order:
        r = by_loc[info[g][0]]
        if r.accesses == 0 or peaks[g] == 0 or peaks[g] > fast_capacity:
            continue
        if _peak_together([curves[c] for c in [*chosen, g]]) <= fast_capacity:
            chosen.append(g)
    fast_acc = sum(by_loc[info[g][0]].accesses for g in chosen)
    sites = []
    for g in order:
        r = by_loc[info[g][0]]
        sites.append(
            {
                "site": g,
                "location": info[g][0],
                "object": info[g][2][0] if info[g][2] else "?",
                "accesses": r.accesses,
                "bytes_allocated": r.bytes_allocated,
                "footprint": peaks[g],
                "accesses_per_byte": r.accesses / peaks[g] if peaks[g] else 0.0,
                "node": fast_node if g in chosen else slow_node,
                "fast": g in chosen,
            }
        )
    return {
        "format": FORMAT,
        "version": 1,
        "source": {"recording": str(rec_path), "recording_source": rec.meta.get("source")},
        "policy": {"by": "site", "fast_capacity": fast_capacity},
        "page_size": PAGE,
        "fast_node": fast_node,
        "slow_node": slow_node,
        "sites": sites,
        "prediction": {
            "fast_accesses": fast_acc,
            "accesses_in_allocations": rep.in_allocations,
            "accesses": rep.accesses,
            "fast_share_of_allocations": fast_acc / rep.in_allocations
            if rep.in_allocations
            else 0.0,
            "fast_share": fast_acc / rep.accesses if rep.accesses else 0.0,
            "fast_footprint": _peak_together([curves[c] for c in chosen]),
        },
    }


def load_plan(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except OSError as e:
        raise PlaceError(f"{path}: cannot read: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise PlaceError(f"{path}: line {e.lineno}: not JSON ({e.msg})") from e
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise PlaceError(f"{path}: field `format`: expected {FORMAT!r} (a `--by site` plan)")
    for i, s in enumerate(doc.get("sites", [])):
        for k, ty in (("site", int), ("location", str), ("fast", bool)):
            if not isinstance(s.get(k), ty):
                raise PlaceError(f"{path}: field `sites[{i}].{k}`: expected {ty.__name__}")
    for k in ("fast_node",):
        if not isinstance(doc.get(k), int):
            raise PlaceError(f"{path}: field `{k}`: expected an integer")
    return doc


def tiering_shares(rec_path: Path, fast_capacity: int) -> list[dict[str, Any]]:
    """The simulator's tiering policies on the same recording: the built-in
    ``tiering-replay`` scenario with the recording as its workload (one pass) and a fast node
    of ``fast_capacity`` bytes; per policy its fast-tier share of the replayed accesses and
    its migrations."""
    import sys

    with tempfile.TemporaryDirectory(prefix="tierlab-site-sim-") as tmp:
        cmd = [
            sys.executable, "-m", "tierlab", "run", "tiering-replay", "--no-progress",
            "--set", f"workload.path={json.dumps(str(Path(rec_path).resolve()))}",
            "--set", "workload.repeat=1",
            "--set", f"machine.nodes[0].capacity={fast_capacity}",
            "-o", str(Path(tmp) / "run"), "--json",
        ]  # fmt: skip
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            tail = (res.stderr or res.stdout).strip().splitlines()[-5:]
            raise PlaceError("the tiering replay failed:\n" + "\n".join(tail))
        try:
            rows = json.loads(res.stdout)
        except json.JSONDecodeError as e:
            raise PlaceError(f"the tiering replay printed no JSON table ({e.msg})") from e
    return [
        {
            "policy": r.get("policy"),
            "fast_share": r.get("run_fast_share"),
            "migrations": r.get("migrations"),
            "optimum_fast_share": r.get("optimum_fast_share"),
        }
        for r in rows
    ]


def simulate(plan: dict[str, Any], rec_path: Path, *, tiering: bool = False) -> dict[str, Any]:
    """The plan applied to the recording's accesses, beside static page placement of the same
    capacity (the hottest pages, ties by lower address) and, with ``tiering``, the
    simulator's tiering policies replaying the same recording (:func:`tiering_shares`)."""
    from tierlab.recording import Recording
    from tierlab.view import sites as sv

    rec = Recording.open(rec_path)
    al = sv.lifetimes(rec.frame("allocations"))
    group, info = sv.site_groups(rec.frame("alloc_sites"), 1)
    fast_locs = {s["location"] for s in plan["sites"] if s["fast"]}
    fast_group = np.array([loc in fast_locs for loc, _s, _o in info] + [False])
    alloc_fast = fast_group[group[al.site]] if al.count else np.zeros(0, dtype=bool)
    att = sv.Attributor(al)
    n = fast = 0
    page_keys: list[np.ndarray] = []
    page_counts: list[np.ndarray] = []
    for b in sv._batches(rec, ["time_ns", "addr"]):
        addr = b["addr"].astype(np.uint64)
        row = att.find(addr, b["time_ns"].astype(np.uint64))
        n += addr.size
        fast += int(alloc_fast[row[row >= 0]].sum())
        pk, pc = np.unique(addr >> np.uint64(12), return_counts=True)
        page_keys.append(pk)
        page_counts.append(pc)
    cap_pages = int(plan["policy"]["fast_capacity"]) // PAGE
    page_fast = 0
    if page_keys:
        pk, inv = np.unique(np.concatenate(page_keys), return_inverse=True)
        pc = np.bincount(inv, weights=np.concatenate(page_counts)).astype(np.int64)
        order = np.lexsort((pk, -pc))
        page_fast = int(pc[order[:cap_pages]].sum())
    pred = plan["prediction"]
    return {
        "accesses": n,
        "site_plan": {
            "fast_accesses": fast,
            "fast_share": fast / n if n else 0.0,
            "predicted_fast_share": pred["fast_share"],
            "difference": (fast / n if n else 0.0) - pred["fast_share"],
        },
        "page_placement": {
            "pages": cap_pages,
            "fast_accesses": page_fast,
            "fast_share": page_fast / n if n else 0.0,
        },
        "tiering": tiering_shares(rec_path, int(plan["policy"]["fast_capacity"]))
        if tiering
        else None,
    }


# -- run ------------------------------------------------------------------------------------


def call_returns(exe: str) -> dict[int, str]:
    """Return address (link address) of every call instruction in ``exe`` -> the
    ``file:line`` (basename) of the call, from ``objdump -d`` and ``addr2line``."""
    objdump, a2l = shutil.which("objdump"), shutil.which("addr2line")
    if objdump is None or a2l is None:
        raise PlaceError("objdump and addr2line (binutils) are needed to find the sites in CMD")
    res = subprocess.run(
        [objdump, "-d", "--no-show-raw-insn", exe], capture_output=True, text=True, timeout=300
    )
    if res.returncode != 0:
        raise PlaceError(f"{exe}: objdump failed: {res.stderr.strip()[:200]}")
    rets: list[int] = []
    pending = False
    for line in res.stdout.splitlines():
        m = re.match(r"\s+([0-9a-f]+):\s+(\S+)", line)
        if not m:
            continue
        addr = int(m.group(1), 16)
        if pending:
            rets.append(addr)
        pending = m.group(2).startswith("call")
    out: dict[int, str] = {}
    for k in range(0, len(rets), 4096):
        chunk = rets[k : k + 4096]
        r = subprocess.run(
            [a2l, "-e", exe, *(hex(a - 1) for a in chunk)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        lines = r.stdout.splitlines()
        if len(lines) != len(chunk):
            continue
        for a, fl in zip(chunk, lines, strict=True):
            key = _location_key(fl.split(" (discriminator")[0])
            if key is not None:
                out[a] = key
    return out


@dataclass
class RunReport:
    exit_code: int | None
    command: list[str]
    log: str
    nodes: list[int]
    resolved: dict[int, int]  # plan site -> call instructions found
    mbind: dict[int, dict[str, Any]] = field(default_factory=dict)
    set_mempolicy: dict[str, Any] | None = None
    start: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "command": self.command,
            "log": self.log,
            "nodes": self.nodes,
            "resolved": {str(k): v for k, v in self.resolved.items()},
            "mbind": {str(k): v for k, v in self.mbind.items()},
            "set_mempolicy": self.set_mempolicy,
            "start": self.start,
            "notes": self.notes,
        }


def parse_log(
    path: Path,
) -> tuple[dict[int, dict[str, Any]], dict[str, Any] | None, dict[str, Any] | None]:
    mb: dict[int, dict[str, Any]] = {}
    smp = start = None
    for line in path.read_text(errors="replace").splitlines():
        w = line.split()
        if not w:
            continue
        kv = dict(x.split("=", 1) for x in w[1:] if "=" in x)
        if w[0] == "mbind":
            s = mb.setdefault(
                int(kv["site"]), {"calls": 0, "bytes": 0, "failed": 0, "errnos": [], "nodes": []}
            )
            s["calls"] += 1
            s["bytes"] += int(kv["len"])
            if kv.get("rc") != "0":
                s["failed"] += 1
                s["errnos"].append(int(kv.get("errno", 0)))
        elif w[0] == "free" and "site" in kv:
            s = mb.setdefault(
                int(kv["site"]), {"calls": 0, "bytes": 0, "failed": 0, "errnos": [], "nodes": []}
            )
            s["nodes"].append(int(kv.get("node", -1)))
        elif w[0] == "set_mempolicy":
            smp = {"node": int(kv["node"]), "rc": int(kv["rc"]), "errno": int(kv["errno"])}
        elif w[0] == "start":
            start = {k: int(v) for k, v in kv.items()}
    return mb, smp, start


def run(
    plan: dict[str, Any],
    command: Sequence[str],
    log: Path | None = None,
    *,
    stdout_to_stderr: bool = False,
) -> RunReport:
    from tierlab.live import cctrace
    from tierlab.place.numa import topology
    from tierlab.view import symbols

    if not command:
        raise PlaceError("nothing to run: give -- CMD [ARGS...]")
    exe = shutil.which(command[0]) or command[0]
    if not os.path.isfile(exe):
        raise PlaceError(f"{command[0]}: no such program")
    exe = os.path.realpath(exe)
    try:
        elf = symbols.read_elf(exe)
    except (OSError, symbols.ElfError) as e:
        raise PlaceError(f"{exe}: {e}") from e
    calls = call_returns(exe)
    wanted = {}
    for s in plan["sites"]:
        if s["fast"]:
            key = _location_key(s["location"])
            if key is None:
                raise PlaceError(
                    f"site {s['site']} ({s['location']}) has no file:line: it cannot be found in "
                    "another build (record the program built with -g)"
                )
            wanted[int(s["site"])] = key
    lines = []
    resolved: dict[int, int] = {}
    for site, key in wanted.items():
        found = [a for a, k in calls.items() if k == key]
        resolved[site] = len(found)
        for a in found:
            off = elf.file_offset(a)
            if off is not None:
                lines.append(f"site {site} {exe} {off:x}")
    tmp = Path(tempfile.mkdtemp(prefix="tierlab-place-"))
    log_path = log or (tmp / "shim.log")
    if log_path.exists():
        log_path.unlink()
    cfg = tmp / "sites.cfg"
    head = [f"fast {int(plan['fast_node'])}", f"log {log_path}"]
    if plan.get("slow_node") is not None:
        head.append(f"slow {int(plan['slow_node'])}")
    cfg.write_text("\n".join([*head, *lines]) + "\n")
    env = {**os.environ, "TIERLAB_PLACE_SITES": str(cfg)}
    linked = "tierlab_alloc_map_event" in set(elf.names)
    if not linked:
        pre = str(cctrace.preload_object())
        env["LD_PRELOAD"] = pre + (" " + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    try:
        code: int | None = subprocess.run(
            list(command), env=env, stdout=2 if stdout_to_stderr else None
        ).returncode
    except OSError as e:
        raise PlaceError(f"{command[0]}: cannot start: {e.strerror}") from e
    mb, smp, start = parse_log(log_path) if log_path.is_file() else ({}, None, None)
    nodes = topology().memory
    rep = RunReport(code, list(command), str(log_path), nodes, resolved, mb, smp, start)
    if len(nodes) == 1:
        rep.notes.append(
            f"this machine has one NUMA node ({nodes[0]}): the binding is checked from the "
            "interposer's mbind calls (the fast and the slow tier are the same memory here)"
        )
    for site, k in resolved.items():
        if k == 0:
            rep.notes.append(f"site {site} ({wanted[site]}): no call at that line in {exe}")
    if log is None:
        rep.log = str(log_path)
    return rep
