"""Placement plans: which node each sampled page of a process should live on.

:func:`make_plan` turns a recording into a :class:`Plan`:

- every sample is assigned to the mapping live at its address and time (the mapping history
  of ``tierlab view``); only mappings still live when the recording ended can be placed, so
  samples of mappings unmapped before the end are dropped (counted);
- a sample's node is the node of the CPU that took it (the CPU -> node map of the recording's
  ``meta.json`` ``machine.cpu_nodes``, else ``--cpu-nodes``, else this machine's
  ``/sys/devices/system/node/node*/cpulist``);
- **affinity** (the profile-guided ccNUMA method): a page goes to the node whose CPUs sampled
  it most (ties: the lowest node number), among ``nodes`` if given;
- **hot-fast** (tiering): pages ranked by samples (ties: lower address first), the hottest to
  ``fast_node`` until ``fast_capacity`` bytes are used; the rest to ``slow_node`` if given,
  else left out of the plan.

``by = "weight"`` counts the samples' latency weight (PEBS/IBS cycles) instead of samples.

The per-page evidence and both rules are computed by ``tierlab-core``'s ``plan`` module (through
``tierlab._native.plan_evidence``, ``plan_affinity`` and ``plan_hot_fast``), the rules the
simulator's profile-guided placement uses; this module reads the recording, assigns samples to
mappings and writes the plan.

A plan is a JSON file (``tierlab-placement-plan`` version 1, ``docs/formats.md``); :func:`load`
validates one and reports the file and the field of the first problem.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping as MappingABC
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, overload

import numpy as np
import pandas as pd

from tierlab import safeio
from tierlab.api import native
from tierlab.place import PlaceError
from tierlab.place.numa import MAX_CPU, format_cpulist, parse_cpulist, topology
from tierlab.place.proc import normalize_name
from tierlab.recording import Recording
from tierlab.view import history

PLAN_FORMAT = "tierlab-placement-plan"
PLAN_VERSION = 1
POLICIES = ("affinity", "hot-fast")
BY = ("samples", "weight")
MAPPINGS = ("auto", "live", "history")
_INF = int(np.iinfo(np.uint64).max)
#: Largest address and node number a plan may hold (move_pages takes int node numbers).
_ADDR_MAX = 2**64 - 1
#: Where a mapping may start: a base page boundary.
_MAP_ALIGN = 4096
_NODE_MAX = 2**31 - 1
#: Largest plan file read (about 10 million pages).
MAX_PLAN_BYTES = 1 << 30


@dataclass
class PlanMapping:
    """A mapping of the planned process that plan pages belong to."""

    id: int
    start: int
    length: int
    name: str
    inode: int | None = None
    #: Evidence (samples or weight) of the plan's pages in this mapping.
    evidence: int = 0
    #: Derived from the data (the recording had no mapping events): matched by address only.
    derived: bool = False

    @property
    def end(self) -> int:
        return self.start + self.length

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "start": self.start,
            "length": self.length,
            "name": self.name,
            "inode": self.inode,
            "evidence": self.evidence,
            "derived": self.derived,
        }


@dataclass
class Plan:
    """A page-to-node plan. Page columns are numpy arrays of equal length."""

    page_size: int
    process: dict[str, Any]
    policy: dict[str, Any]
    #: The nodes the ``evidence`` columns refer to, in order.
    nodes: list[int]
    mappings: list[PlanMapping]
    addr: np.ndarray  # uint64, page-aligned
    mapping: np.ndarray  # int64: PlanMapping.id
    target: np.ndarray  # int64: target node
    evidence: np.ndarray  # int64 (pages x len(nodes))
    cpu_nodes: dict[int, list[int]] | None = None
    cpu_nodes_source: str | None = None
    source: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    created: str = ""

    def __len__(self) -> int:
        return int(self.addr.size)

    def mapping_by_id(self) -> dict[int, PlanMapping]:
        return {m.id: m for m in self.mappings}

    def frame(self) -> pd.DataFrame:
        """The pages as a DataFrame: ``addr, mapping, node, evidence.<node>...``."""
        df = pd.DataFrame({"addr": self.addr, "mapping": self.mapping, "node": self.target})
        for i, n in enumerate(self.nodes):
            df[f"evidence.{n}"] = self.evidence[:, i] if self.evidence.size else 0
        return df

    def to_json(self) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "version": PLAN_VERSION,
            "created": self.created,
            "source": self.source,
            "process": self.process,
            "page_size": self.page_size,
            "policy": self.policy,
            "cpu_nodes": None
            if self.cpu_nodes is None
            else {str(n): format_cpulist(c) for n, c in sorted(self.cpu_nodes.items())},
            "cpu_nodes_source": self.cpu_nodes_source,
            "nodes": self.nodes,
            "summary": self.summary,
            "mappings": [m.to_json() for m in self.mappings],
            "pages": [
                {"addr": a, "mapping": m, "node": n, "evidence": e}
                for a, m, n, e in zip(
                    self.addr.tolist(),
                    self.mapping.tolist(),
                    self.target.tolist(),
                    self.evidence.tolist() if self.evidence.size else [[]] * len(self),
                    strict=True,
                )
            ],
        }


# -- writing and reading ----------------------------------------------------------------------


def save(plan: Plan, path: str | os.PathLike[str]) -> None:
    """Write ``plan`` as JSON (one page per line), atomically."""
    doc = plan.to_json()
    pages = doc.pop("pages")
    head = json.dumps(doc, indent=2)
    assert head.endswith("}")
    lines = [head[:-1].rstrip() + ',\n  "pages": [']
    body = ",\n".join("    " + json.dumps(p, separators=(", ", ": ")) for p in pages)
    lines.append(("\n" + body + "\n  ]\n}\n") if pages else "]\n}\n")
    text = "".join(lines)
    p = Path(path)
    tmp = p.with_name(f".{p.name}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, p)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise PlaceError(f"{p}: cannot write the plan: {e.strerror}") from None


class _Checker:
    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, what: str) -> PlaceError:
        return PlaceError(f"{self.path}: field `{where}`: {what}")

    def obj(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, MappingABC):
            raise self.fail(where, f"expected an object, got {_kind(value)}")
        return dict(value)

    def get(self, doc: dict[str, Any], key: str, where: str) -> Any:
        if key not in doc:
            raise self.fail(f"{where}{key}", "missing")
        return doc[key]

    @overload
    def int_(
        self,
        value: Any,
        where: str,
        *,
        minimum: int = ...,
        maximum: int = ...,
        optional: Literal[False] = ...,
    ) -> int: ...
    @overload
    def int_(
        self, value: Any, where: str, *, minimum: int = ..., maximum: int = ..., optional: bool
    ) -> int | None: ...
    def int_(
        self,
        value: Any,
        where: str,
        *,
        minimum: int = 0,
        maximum: int = 2**63 - 1,
        optional: bool = False,
    ) -> int | None:
        if value is None and optional:
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(where, f"expected an integer, got {_kind(value)}")
        if value < minimum:
            raise self.fail(where, f"must be at least {minimum}, got {value}")
        if value > maximum:
            raise self.fail(where, f"must be at most {maximum}, got {value}")
        return value

    def str_(self, value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise self.fail(where, f"expected a string, got {_kind(value)}")
        return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return f"the string {value!r}"[:60]
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"{type(value).__name__} {value!r}"[:60]


def load(path: str | os.PathLike[str]) -> Plan:
    """Read and validate a plan file. Errors name the file and the field (``pages[3].node``)."""
    p = Path(path)
    if p.is_dir():
        raise PlaceError(f"{p}: is a directory, not a plan file")
    raw = safeio.read_bytes(p, MAX_PLAN_BYTES, PlaceError, "plan file")
    doc = safeio.loads_json(raw, p, PlaceError)
    c = _Checker(p)
    doc = c.obj(doc, "(top level)")
    fmt = c.get(doc, "format", "")
    if fmt != PLAN_FORMAT:
        raise c.fail("format", f"is {fmt!r}, expected {PLAN_FORMAT!r} (not a placement plan)")
    version = c.int_(c.get(doc, "version", ""), "version", minimum=1)
    if version is not None and version > PLAN_VERSION:
        raise c.fail(
            "version",
            f"plan format version {version} is newer than this tierlab reads (up to "
            f"{PLAN_VERSION}); upgrade tierlab",
        )
    page_size = c.int_(c.get(doc, "page_size", ""), "page_size", minimum=1, maximum=1 << 40)
    if page_size & (page_size - 1):
        raise c.fail("page_size", f"must be a power of two, got {page_size}")
    process = c.obj(doc.get("process") or {}, "process")
    pid = c.int_(process.get("pid"), "process.pid", minimum=1, optional=True)
    cmd = process.get("command")
    if cmd is not None and (not isinstance(cmd, list) or not all(isinstance(a, str) for a in cmd)):
        raise c.fail("process.command", "expected a list of strings or null")
    policy = c.obj(doc.get("policy") or {}, "policy")
    nodes_raw = c.get(doc, "nodes", "")
    if not isinstance(nodes_raw, list):
        raise c.fail("nodes", f"expected a list of node numbers, got {_kind(nodes_raw)}")
    nodes = [c.int_(n, f"nodes[{i}]", maximum=_NODE_MAX) for i, n in enumerate(nodes_raw)]
    if len(set(nodes)) != len(nodes):
        raise c.fail("nodes", "a node appears twice")
    cpu_nodes = None
    raw_cpu = doc.get("cpu_nodes")
    if raw_cpu is not None:
        cpu_nodes = _cpu_nodes_from_meta(c.obj(raw_cpu, "cpu_nodes"), f"{p}: field `cpu_nodes`")
    maps_raw = c.get(doc, "mappings", "")
    if not isinstance(maps_raw, list):
        raise c.fail("mappings", f"expected a list, got {_kind(maps_raw)}")
    mappings: list[PlanMapping] = []
    for i, m in enumerate(maps_raw):
        w = f"mappings[{i}]"
        m = c.obj(m, w)
        mid = c.int_(c.get(m, "id", w + "."), f"{w}.id")
        start = c.int_(c.get(m, "start", w + "."), f"{w}.start", maximum=_ADDR_MAX)
        length = c.int_(c.get(m, "length", w + "."), f"{w}.length", minimum=1, maximum=_ADDR_MAX)
        # As mmap makes mappings: page-aligned start and length, ending at 2^64 at most.
        if start % _MAP_ALIGN:
            raise c.fail(f"{w}.start", f"{start:#x} is not a multiple of {_MAP_ALIGN} (a page)")
        if length % _MAP_ALIGN:
            raise c.fail(f"{w}.length", f"{length} is not a multiple of {_MAP_ALIGN} (a page)")
        if start + length > _ADDR_MAX + 1:
            raise c.fail(
                f"{w}.length",
                f"{length} from {start:#x} ends past the end of the address space (2^64)",
            )
        name = c.str_(c.get(m, "name", w + "."), f"{w}.name")
        inode = c.int_(m.get("inode"), f"{w}.inode", optional=True)
        ev = c.int_(m.get("evidence", 0), f"{w}.evidence")
        derived = m.get("derived", False)
        if not isinstance(derived, bool):
            raise c.fail(f"{w}.derived", f"expected true or false, got {_kind(derived)}")
        mappings.append(PlanMapping(mid, start, length, name, inode, ev, derived))
    by_id: dict[int, PlanMapping] = {}
    for i, m in enumerate(mappings):
        if m.id in by_id:
            raise c.fail(f"mappings[{i}].id", f"id {m.id} is used twice")
        by_id[m.id] = m
    pages_raw = c.get(doc, "pages", "")
    if not isinstance(pages_raw, list):
        raise c.fail("pages", f"expected a list, got {_kind(pages_raw)}")
    n = len(pages_raw)
    addr = np.zeros(n, dtype=np.uint64)
    mapping = np.zeros(n, dtype=np.int64)
    target = np.zeros(n, dtype=np.int64)
    evidence = np.zeros((n, len(nodes)), dtype=np.int64)
    for i, pg in enumerate(pages_raw):
        w = f"pages[{i}]"
        pg = c.obj(pg, w)
        a = c.int_(c.get(pg, "addr", w + "."), f"{w}.addr", maximum=_ADDR_MAX)
        if a % page_size:
            raise c.fail(f"{w}.addr", f"{a:#x} is not a multiple of the page size {page_size}")
        mid = c.int_(c.get(pg, "mapping", w + "."), f"{w}.mapping")
        if mid not in by_id:
            raise c.fail(f"{w}.mapping", f"no mapping has id {mid}")
        m = by_id[mid]
        if not (m.start // page_size * page_size <= a < m.end):
            raise c.fail(
                f"{w}.addr",
                f"{a:#x} is outside its mapping {mid} ({m.start:#x}-{m.end:#x})",
            )
        node = c.int_(c.get(pg, "node", w + "."), f"{w}.node", maximum=_NODE_MAX)
        ev = pg.get("evidence", [0] * len(nodes))
        if not isinstance(ev, list) or len(ev) != len(nodes):
            raise c.fail(f"{w}.evidence", f"expected a list of {len(nodes)} counts (one per node)")
        for j, x in enumerate(ev):
            evidence[i, j] = c.int_(x, f"{w}.evidence[{j}]")
        addr[i] = a
        mapping[i] = mid
        target[i] = node
    if n:
        uniq, counts = np.unique(addr, return_counts=True)
        if (counts > 1).any():
            dup = int(uniq[counts > 1][0])
            i = int(np.flatnonzero(addr == dup)[1])
            raise c.fail(f"pages[{i}].addr", f"page {dup:#x} appears more than once")
    src = doc.get("source")
    summary = doc.get("summary")
    return Plan(
        page_size=page_size,
        process={"pid": pid, "command": cmd},
        policy=policy,
        nodes=[int(x) for x in nodes if x is not None],
        mappings=mappings,
        addr=addr,
        mapping=mapping,
        target=target,
        evidence=evidence,
        cpu_nodes=cpu_nodes,
        cpu_nodes_source=doc.get("cpu_nodes_source"),
        source=src if isinstance(src, dict) else {},
        summary=summary if isinstance(summary, dict) else {},
        created=str(doc.get("created") or ""),
    )


# -- making a plan ----------------------------------------------------------------------------


@dataclass
class PlanOptions:
    policy: str = "affinity"
    #: ``samples`` or ``weight`` (latency weight of each sample).
    by: str = "samples"
    #: Allowed target nodes (affinity); ``None``: every node of the CPU map.
    nodes: list[int] | None = None
    #: CPU -> node map given by the user (node -> CPUs); overrides the recording's.
    cpu_nodes: dict[int, list[int]] | None = None
    fast_node: int | None = None
    fast_capacity: int | None = None
    slow_node: int | None = None
    #: Pages with less evidence are left out (affinity), or not promoted (hot-fast).
    min_samples: int = 1
    #: Only samples of this event (``samples.event``).
    event: str | None = None
    #: Page size (default: the recording's ``machine.page_size``, else the 4 KiB base page).
    page_size: int | None = None
    #: Which mappings to plan: ``live`` (those still mapped when the recording ended: a plan
    #: for the running process), ``history`` (every mapping the program ever had: for a
    #: program that exited), ``auto`` (``history`` when the recording says its target ended).
    mappings: str = "auto"


def parse_cpu_nodes(items: list[str]) -> dict[int, list[int]]:
    """``["0=0-3,8", "1=4-7"]`` (or one ``"0=0-3;1=4-7"``) -> ``{0: [0..3, 8], 1: [4..7]}``."""
    out: dict[int, list[int]] = {}
    for item in items:
        for part in item.split(";"):
            part = part.strip()
            if not part:
                continue
            node, sep, cpus = part.partition("=")
            if not sep or not node.strip().isdigit():
                raise PlaceError(
                    f"--cpu-nodes {part!r}: expected NODE=CPULIST, e.g. 0=0-3,8 or '0=0-3;1=4-7'"
                )
            try:
                out.setdefault(int(node), []).extend(parse_cpulist(cpus))
            except ValueError:
                raise PlaceError(
                    f"--cpu-nodes {part!r}: {cpus!r} is not a CPU list such as 0-3,8"
                ) from None
    _check_cpu_nodes(out, "--cpu-nodes")
    return out


def _check_cpu_nodes(cpu_nodes: dict[int, list[int]], where: str) -> None:
    seen: dict[int, int] = {}
    for node, cpus in cpu_nodes.items():
        for cpu in cpus:
            if cpu in seen and seen[cpu] != node:
                raise PlaceError(f"{where}: CPU {cpu} is on both node {seen[cpu]} and node {node}")
            seen[cpu] = node


def _cpu_nodes_from_meta(raw: Any, where: str) -> dict[int, list[int]]:
    if not isinstance(raw, MappingABC):
        raise PlaceError(f"{where}: expected an object {{node: cpulist}}")
    out: dict[int, list[int]] = {}
    for k, v in raw.items():
        if not str(k).isdigit():
            raise PlaceError(f"{where}: key {k!r} is not a node number")
        try:
            if isinstance(v, str):
                cpus = parse_cpulist(v)
            elif (
                isinstance(v, list)
                and len(v) <= MAX_CPU
                and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
                and all(0 <= x <= MAX_CPU for x in v)
            ):
                cpus = list(v)
            else:
                raise ValueError
        except ValueError:
            raise PlaceError(
                f'{where}.{k}: expected a CPU list such as "0-3,8" or a list of CPUs'
            ) from None
        out[int(k)] = cpus
    _check_cpu_nodes(out, where)
    return out


def _cpu_map(rec: Recording, opts: PlanOptions) -> tuple[dict[int, list[int]], str]:
    if opts.cpu_nodes is not None:
        _check_cpu_nodes(opts.cpu_nodes, "--cpu-nodes")
        return opts.cpu_nodes, "--cpu-nodes"
    machine = rec.meta.get("machine") or {}
    if isinstance(machine, MappingABC) and machine.get("cpu_nodes") is not None:
        where = f"{rec.path / 'meta.json'}: field `machine.cpu_nodes`"
        return _cpu_nodes_from_meta(machine["cpu_nodes"], where), "recording"
    topo = topology()
    return {n: c for n, c in topo.cpus.items() if c}, "this machine (/sys/devices/system/node)"


def _process(rec: Recording) -> dict[str, Any]:
    params = rec.meta.get("parameters") or {}
    acc = rec.meta.get("accounting") or {}
    target = params.get("target") if isinstance(params, MappingABC) else None
    pid = None
    command = None
    if isinstance(acc, MappingABC) and isinstance(acc.get("target_pid"), int):
        pid = acc["target_pid"] or None
    if isinstance(target, MappingABC):
        if pid is None and isinstance(target.get("pid"), int):
            pid = target["pid"]
        argv = target.get("argv")
        if isinstance(argv, list):
            command = [str(a) for a in argv]
    if command is None and pid is not None:
        command = _live_command(pid, rec.meta.get("created"))
    return {"pid": pid, "command": command}


def _live_command(pid: int, created: Any) -> list[str] | None:
    """The command line of the recorded process (an attach recording stores only its pid), if
    it is still running: the process with that pid must have started before the recording
    did, else the pid was reused."""
    try:
        started = datetime.fromisoformat(str(created)).timestamp()
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
        btime = next(
            int(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
        began = btime + int(stat[19]) / os.sysconf("SC_CLK_TCK")
        if began > started + 1:
            return None
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    args = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    return args or None


def _mappings_mode(rec: Recording, opts: PlanOptions) -> str:
    """``live`` or ``history`` (see :attr:`PlanOptions.mappings`)."""
    if opts.mappings != "auto":
        return opts.mappings
    acc = rec.meta.get("accounting") or {}
    ended = isinstance(acc, MappingABC) and isinstance(acc.get("target_exit"), MappingABC)
    return "history" if ended else "live"


def _check_options(opts: PlanOptions) -> None:
    if opts.policy not in POLICIES:
        raise PlaceError(f"--policy {opts.policy}: expected one of {', '.join(POLICIES)}")
    if opts.by not in BY:
        raise PlaceError(f"--by {opts.by}: expected one of {', '.join(BY)}")
    if opts.policy == "hot-fast":
        if opts.fast_node is None or opts.fast_capacity is None:
            raise PlaceError("--policy hot-fast needs --fast-node N and --fast-capacity BYTES")
        if opts.fast_capacity < 0:
            raise PlaceError("--fast-capacity must not be negative")
        if opts.fast_capacity == 0 and opts.slow_node is None:
            raise PlaceError(
                "--fast-capacity 0: the fast node could take no page and, without "
                "--slow-node, the plan would be empty; give a capacity of at least one page"
            )
        if opts.slow_node is not None and opts.slow_node == opts.fast_node:
            raise PlaceError("--slow-node must differ from --fast-node")
        if opts.nodes is not None:
            raise PlaceError("--nodes applies to --policy affinity (hot-fast uses --fast-node)")
    elif opts.fast_node is not None or opts.fast_capacity is not None or opts.slow_node is not None:
        raise PlaceError("--fast-node, --fast-capacity and --slow-node need --policy hot-fast")
    if opts.min_samples < 1:
        raise PlaceError("--min-samples must be at least 1")
    if opts.mappings not in MAPPINGS:
        raise PlaceError(f"--mappings {opts.mappings}: expected one of {', '.join(MAPPINGS)}")
    for name, value in (("--fast-node", opts.fast_node), ("--slow-node", opts.slow_node)):
        if value is not None and not 0 <= value <= _NODE_MAX:
            raise PlaceError(f"{name} {value}: not a node number")
    for n in opts.nodes or []:
        if not 0 <= n <= _NODE_MAX:
            raise PlaceError(f"--nodes: {n} is not a node number")


def make_plan(rec: Recording, opts: PlanOptions | None = None) -> Plan:
    """A plan from ``rec``'s samples (see the module's docstring for the algorithm)."""
    opts = opts or PlanOptions()
    _check_options(opts)
    machine = rec.meta.get("machine") or {}
    recorded_page = machine.get("page_size") if isinstance(machine, MappingABC) else None
    default_page = native().PAGE_SIZE
    page_size = opts.page_size or (
        recorded_page if isinstance(recorded_page, int) else default_page
    )
    if page_size <= 0 or page_size & (page_size - 1):
        raise PlaceError(f"page size {page_size}: must be a power of two")

    s = rec.samples()
    what = "samples"
    if opts.event is not None:
        events = sorted(set(s["event"].tolist()))
        s = s[s["event"] == opts.event]
        if not len(s):
            raise PlaceError(
                f"{rec.path}: no samples of event {opts.event!r} (events: "
                f"{', '.join(events) or 'none'})"
            )
    if not len(s):
        acc = rec.accesses()
        if len(acc) and opts.policy == "hot-fast" and opts.by == "samples":
            s = acc.assign(cpu=np.full(len(acc), -1, dtype=np.int64), weight=1)
            what = "accesses"
        elif len(acc):
            raise PlaceError(
                f"{rec.path}: no samples, only accesses, which carry no CPU: node affinity "
                "(and --by weight) need samples; use --policy hot-fast"
            )
        else:
            raise PlaceError(f"{rec.path}: no samples to plan from")
    if opts.by == "weight":
        w = s["weight"].to_numpy(dtype=np.int64)
        if not w.any():
            raise PlaceError(
                f"{rec.path}: every sample has weight 0 (this source records no latency): "
                "use --by samples"
            )
    else:
        w = np.ones(len(s), dtype=np.int64)

    cpu_nodes, cpu_source = _cpu_map(rec, opts)
    if opts.policy == "affinity" and opts.nodes:
        # A page goes to a node whose CPUs sampled it: nodes without CPUs get none.
        with_cpus = sorted(n for n, cpus in cpu_nodes.items() if cpus)
        if not any(n in with_cpus for n in opts.nodes):
            raise PlaceError(
                f"--nodes {','.join(map(str, opts.nodes))}: no CPU is on these nodes in the "
                f"CPU -> node map ({cpu_source}: nodes with CPUs "
                f"{', '.join(map(str, with_cpus)) or 'none'}), so affinity would place no page"
            )
    nodes = sorted(
        set(cpu_nodes)
        | set(opts.nodes or [])
        | {x for x in (opts.fast_node, opts.slow_node) if x is not None}
    )

    addr = s["addr"].to_numpy(dtype=np.uint64)
    t = s["time_ns"].to_numpy(dtype=np.uint64)
    cpu = s["cpu"].to_numpy(dtype=np.int64)
    mev = rec.mappings()
    maps = history.build(mev) if len(mev) else history.derive(addr)
    derived = not len(mev)
    owner, seg = history.assign_segments(maps, t, addr)
    seg_lo, seg_hi, _seg_t0, seg_t1, seg_mid = history.segment_table(maps)
    mode = _mappings_mode(rec, opts)

    # Plan mappings. `live`: the pieces of every mapping still live at the end of the
    # recording (adjacent pieces of one mapping joined); `history`: every mapping instance.
    plan_maps: list[PlanMapping] = []
    piece_owner: list[int] = []
    piece_plan = np.full(seg_lo.size, -1, dtype=np.int64)
    by_id = {m.id: m for m in maps}
    if mode == "live":
        live = np.flatnonzero(seg_t1 == np.uint64(_INF))
        live = live[np.lexsort((seg_lo[live], seg_mid[live]))]
        for k in live.tolist():
            lo, hi, mid = int(seg_lo[k]), history.segment_end(int(seg_hi[k])), int(seg_mid[k])
            last = plan_maps[-1] if plan_maps else None
            if last is not None and last.end == lo and piece_owner[-1] == mid:
                last.length = hi - last.start
            else:
                name = "" if derived else normalize_name(by_id[mid].name)
                plan_maps.append(PlanMapping(len(plan_maps), lo, hi - lo, name, derived=derived))
                piece_owner.append(mid)
            piece_plan[k] = len(plan_maps) - 1
    else:
        plan_of = {}
        for m in maps:
            plan_of[m.id] = len(plan_maps)
            name = "" if derived else normalize_name(m.name)
            plan_maps.append(PlanMapping(len(plan_maps), m.start, m.length, name, derived=derived))
        if seg_lo.size:
            piece_plan = np.asarray([plan_of[int(x)] for x in seg_mid.tolist()], dtype=np.int64)
    pm = np.where(seg >= 0, piece_plan[np.clip(seg, 0, None)] if seg_lo.size else -1, -1)
    in_none = int((owner < 0).sum())
    in_dead = int(((owner >= 0) & (pm < 0)).sum())
    keep = pm >= 0
    if not keep.any():
        raise PlaceError(
            f"{rec.path}: none of the {len(s)} {what} falls in a mapping live at the end of the "
            f"recording ({in_none} in no mapping, {in_dead} in mappings unmapped before the end"
            "; --mappings history plans every mapping the program had)"
        )
    addr, cpu, w, pm, t = addr[keep], cpu[keep], w[keep], pm[keep], t[keep]
    if opts.policy == "affinity" and not nodes:
        raise PlaceError(
            "no CPU -> node map: the recording has none (meta.json machine.cpu_nodes) and "
            "this machine shows none; give --cpu-nodes 0=0-3 --cpu-nodes 1=4-7"
        )

    # The aggregation and the decision are tierlab-core's (`plan` module), shared with the
    # simulator's profile-guided placement.
    nat = native()
    ev = nat.plan_evidence(
        addr.astype("<u8").tobytes(),
        cpu.astype("<i8").tobytes(),
        w.astype("<u8").tobytes(),
        page_size,
        cpu_nodes,
        nodes,
    )
    unknown_cpus = ev["cpus_without_node"]
    if opts.policy == "affinity" and unknown_cpus:
        shown = ", ".join(map(str, unknown_cpus[:8])) + (" ..." if len(unknown_cpus) > 8 else "")
        raise PlaceError(
            f"{rec.path}: CPU(s) {shown} took samples but are on no node of the CPU -> node "
            f"map (from {cpu_source}: "
            + "; ".join(f"{n}={format_cpulist(c)}" for n, c in sorted(cpu_nodes.items()))
            + "); give the right map with --cpu-nodes"
        )
    pages = np.frombuffer(ev["pages"], dtype="<u8")
    npg = pages.size
    evidence = np.frombuffer(ev["evidence"], dtype="<u8").astype(np.int64).reshape(npg, len(nodes))
    total = np.frombuffer(ev["total"], dtype="<u8").astype(np.int64)
    page = addr // np.uint64(page_size) * np.uint64(page_size)
    inv = np.searchsorted(pages, page)
    # A page belongs to the plan mapping of its latest point (in `history` mode mappings of
    # different times may cover the same page: the last one).
    latest = np.lexsort((t, inv))
    last_of_page = latest[np.r_[np.flatnonzero(np.diff(inv[latest])), inv.size - 1]]
    page_map = pm[last_of_page] if npg else np.zeros(0, dtype=np.int64)

    if opts.policy == "affinity":
        allowed = None if opts.nodes is None else sorted(set(opts.nodes))
        decided = nat.plan_affinity(
            ev["pages"], ev["evidence"], nodes, page_size, allowed, opts.min_samples
        )
    else:
        assert opts.fast_node is not None and opts.fast_capacity is not None
        decided = nat.plan_hot_fast(
            ev["pages"],
            ev["total"],
            page_size,
            opts.fast_node,
            opts.fast_capacity,
            opts.slow_node,
            opts.min_samples,
        )
    skipped: dict[str, int] = dict(decided["skipped"])
    target = np.frombuffer(decided["node"], dtype="<u4").astype(np.int64)
    sel = np.searchsorted(pages, np.frombuffer(decided["addr"], dtype="<u8"))
    pages, page_map, evidence, total = pages[sel], page_map[sel], evidence[sel], total[sel]
    # Linear in pages and plan mappings (one pass each, no per-mapping scan of the pages).
    if plan_maps:
        per_map = np.bincount(page_map, weights=total, minlength=len(plan_maps))
        for i, plan_map in enumerate(plan_maps):
            plan_map.evidence = int(per_map[i])
    used, page_map = np.unique(page_map, return_inverse=True)
    plan_maps = [plan_maps[int(i)] for i in used.tolist()]
    for new_id, plan_map in enumerate(plan_maps):
        plan_map.id = new_id
    page_map = page_map.astype(np.int64).reshape(-1)

    per_node = {
        str(n): {"pages": int((target == n).sum()), "bytes": int((target == n).sum()) * page_size}
        for n in sorted(set(target.tolist()))
    }
    policy: dict[str, Any] = {"name": opts.policy, "by": opts.by, "min_samples": opts.min_samples}
    if opts.policy == "affinity":
        policy["nodes"] = opts.nodes
    else:
        policy.update(
            fast_node=opts.fast_node, fast_capacity=opts.fast_capacity, slow_node=opts.slow_node
        )
    if opts.event is not None:
        policy["event"] = opts.event
    summary = {
        "mappings_from": mode,
        "pages": int(pages.size),
        "bytes": int(pages.size) * page_size,
        "mappings": len(plan_maps),
        "per_node": per_node,
        "points": what,
        "points_used": int(keep.sum()),
        "points_in_no_mapping": in_none,
        "points_in_unmapped_mappings": in_dead,
        "points_on_cpus_without_node": int(ev["points_on_cpus_without_node"]),
        "skipped_pages": {k: int(v) for k, v in skipped.items() if v},
    }
    return Plan(
        page_size=page_size,
        process=_process(rec),
        policy=policy,
        nodes=nodes,
        mappings=plan_maps,
        addr=pages.astype(np.uint64),
        mapping=page_map,
        target=target,
        evidence=evidence,
        cpu_nodes={n: sorted(c) for n, c in cpu_nodes.items()},
        cpu_nodes_source=cpu_source,
        source={
            "recording": str(rec.path),
            "recording_source": rec.meta.get("source"),
            "recording_created": rec.meta.get("created"),
            "complete": rec.meta.get("complete"),
        },
        summary=summary,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def _human(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def describe(plan: Plan) -> str:
    """A one-paragraph summary for people."""
    s = plan.summary
    parts = [
        f"node {n}: {v['pages']} pages ({_human(v['bytes'])})"
        for n, v in (s.get("per_node") or {}).items()
    ]
    text = (
        f"plan ({plan.policy.get('name')}, by {plan.policy.get('by')}): {len(plan)} pages in "
        f"{len(plan.mappings)} mapping(s)" + (": " + ", ".join(parts) if parts else "")
    )
    skipped = s.get("skipped_pages") or {}
    if skipped:
        text += "; left out: " + ", ".join(f"{v} ({k})" for k, v in skipped.items())
    dropped = s.get("points_in_no_mapping", 0) + s.get("points_in_unmapped_mappings", 0)
    if dropped:
        text += (
            f"; {dropped} {s.get('points', 'samples')} not used (in no mapping, or in mappings "
            "unmapped before the recording ended)"
        )
    if s.get("mappings_from") == "history":
        text += (
            "; mappings: every mapping the program had (it exited; --mappings live plans only "
            "those mapped at the end)"
        )
    if plan.cpu_nodes_source:
        text += f"; CPU -> node map from {plan.cpu_nodes_source}"
    return text
