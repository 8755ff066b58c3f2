"""A lab machine: the guest's NUMA nodes, CPUs and slow tier, read from a TOML file.

::

    [machine]
    description = "two 1 GiB nodes; node 1 CPU-less and slow (HMAT)"
    slow_tier = "hmat"          # "hmat", "dax-kmem" or "none"
    transparent_hugepage = "madvise"   # the guest's THP mode (default madvise)
    numa_balancing = 0          # kernel.numa_balancing at boot: 0 off (default), 1, 2 tiering

    [[node]]                    # node 0
    memory = "1GiB"
    cpus = 2                    # how many CPUs this node has (0: a CPU-less node)
    latency_ns = 100            # HMAT: access latency and bandwidth from the CPU nodes
    bandwidth = "20GB/s"

    [[node]]                    # node 1
    memory = "1GiB"
    cpus = 0
    latency_ns = 300
    bandwidth = "5GB/s"

With ``slow_tier = "hmat"`` QEMU describes each node's latency and bandwidth in an ACPI HMAT
and the kernel places the CPU-less nodes in memory tiers from it. With ``"dax-kmem"`` the
nodes marked ``dax_kmem = true`` (CPU-less, last) are given to the kernel as legacy pmem
(``memmap=SIZE!START``), and the guest onlines them through ``dax_pmem`` and ``kmem``: the
kmem driver gives the node the dax memory type, a lower tier. Built-in machines are in
``tierlab/lab/machines/``; ``tierlab lab machines`` lists them.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from tierlab.live.units import human_size, parse_size

MACHINES_DIR = Path(__file__).parent / "machines"

SLOW_TIERS = ("hmat", "dax-kmem", "none")

#: The guest's transparent huge page mode (``transparent_hugepage=``): ``madvise`` by default,
#: so a program's anonymous memory faults page by page as on most hosts (Debian's kernel
#: defaults to ``always``, which faults an 8 MiB mapping in four 2 MiB pieces).
THP_MODES = ("madvise", "always", "never")

#: Guest memory is onlined in memory blocks of 128 MiB (x86-64 with < 64 GiB): a node, and a
#: dax kmem region, is a whole number of blocks.
MEMORY_BLOCK = 128 << 20

#: The pc machine's RAM below 4 GiB when the guest has 3.5 GiB or more (QEMU's i440fx
#: layout); the rest is mapped from 4 GiB.
PC_LOWMEM_SPLIT = 0xE000_0000
PC_LOWMEM = 0xC000_0000
FOUR_GIB = 1 << 32


class MachineError(ValueError):
    """A machine file that cannot be used: the message names the file and the field."""


@dataclass(frozen=True)
class Node:
    index: int
    memory: int
    cpus: int
    latency_ns: int | None = None
    bandwidth: int | None = None  # bytes/s
    dax_kmem: bool = False


@dataclass(frozen=True)
class Machine:
    name: str
    source: str
    description: str
    slow_tier: str
    nodes: tuple[Node, ...]
    distances: dict[tuple[int, int], int] = field(default_factory=dict)
    boot_timeout_s: float = 300.0
    agent_setup: str = ""
    transparent_hugepage: str = "madvise"
    numa_balancing: int = 0

    @property
    def cpus(self) -> int:
        return sum(n.cpus for n in self.nodes)

    @property
    def memory(self) -> int:
        return sum(n.memory for n in self.nodes)

    def cpu_ranges(self) -> list[tuple[int, int]]:
        """Per node: its first CPU and one past its last."""
        out = []
        first = 0
        for n in self.nodes:
            out.append((first, first + n.cpus))
            first += n.cpus
        return out

    def node_start(self, index: int) -> int:
        """The guest-physical address where node ``index``'s memory starts."""
        offset = sum(n.memory for n in self.nodes[:index])
        low = self.low_memory()
        if offset < low:
            if offset + self.nodes[index].memory > low:
                raise MachineError(
                    f"{self.source}: node {index} straddles the PCI hole below 4 GiB: make "
                    "the nodes before it end at 3 GiB, or the machine smaller than 3.5 GiB"
                )
            return offset
        return FOUR_GIB + offset - low

    def low_memory(self) -> int:
        """The guest's RAM below 4 GiB. A dax kmem machine keeps only its other nodes there
        (QEMU's ``max-ram-below-4g``), so its pmem starts at 4 GiB, clear of the firmware's
        tables at the top of low RAM (which a kmem memory block may not overlap)."""
        if self.slow_tier == "dax-kmem":
            return sum(n.memory for n in self.nodes if not n.dax_kmem)
        return PC_LOWMEM if self.memory >= PC_LOWMEM_SPLIT else self.memory

    def kernel_args(self) -> list[str]:
        """The kernel command-line arguments the machine needs (``memmap`` for dax kmem)."""
        out = [f"transparent_hugepage={self.transparent_hugepage}"]
        if self.slow_tier == "dax-kmem":
            for n in self.nodes:
                if n.dax_kmem:
                    out.append(f"memmap={n.memory >> 20}M!{self.node_start(n.index) >> 20}M")
        return out

    def qemu_args(self) -> list[str]:
        """QEMU's memory, CPU and NUMA options for this machine."""
        hmat = self.slow_tier == "hmat"
        opts = ",hmat=on" if hmat else ""
        if self.slow_tier == "dax-kmem":
            opts += f",max-ram-below-4g={self.low_memory() >> 20}M"
        args = ["-machine", "pc" + opts]
        args += ["-smp", str(self.cpus), "-m", f"{self.memory >> 20}M"]
        ranges = self.cpu_ranges()
        initiators = [n.index for n in self.nodes if n.cpus > 0]
        for n in self.nodes:
            opt = f"node,nodeid={n.index},memdev=mem{n.index}"
            lo, hi = ranges[n.index]
            if n.cpus:
                opt += f",cpus={lo}-{hi - 1}"
            if hmat:
                opt += f",initiator={n.index if n.cpus else initiators[0]}"
            args += ["-object", f"memory-backend-ram,id=mem{n.index},size={n.memory >> 20}M"]
            args += ["-numa", opt]
        for (a, b), d in sorted(self.distances.items()):
            args += ["-numa", f"dist,src={a},dst={b},val={d}"]
        if hmat:
            for i in initiators:
                for n in self.nodes:
                    assert n.latency_ns is not None and n.bandwidth is not None
                    base = f"hmat-lb,initiator={i},target={n.index},hierarchy=memory"
                    args += ["-numa", f"{base},data-type=access-latency,latency={n.latency_ns}"]
                    mb = max(1, n.bandwidth // 1_000_000)
                    args += ["-numa", f"{base},data-type=access-bandwidth,bandwidth={mb}M"]
        return args

    def summary(self) -> str:
        parts = []
        for n in self.nodes:
            what = f"node {n.index}: {human_size(n.memory)}, " + (
                f"{n.cpus} CPU{'s' if n.cpus != 1 else ''}" if n.cpus else "CPU-less"
            )
            if self.slow_tier == "hmat":
                what += f", {n.latency_ns} ns, {(n.bandwidth or 0) / 1e9:g} GB/s"
            if n.dax_kmem:
                what += ", dax kmem"
            parts.append(what)
        return f"{self.name} ({self.slow_tier}): " + "; ".join(parts)


def builtin_machines() -> list[str]:
    return sorted(p.stem for p in MACHINES_DIR.glob("*.toml"))


def resolve(name_or_path: str) -> Path:
    """A built-in machine's name or a machine file's path -> the file."""
    p = Path(name_or_path)
    if p.suffix == ".toml" or "/" in name_or_path:
        if not p.is_file():
            raise MachineError(f"{name_or_path}: no such machine file")
        return p
    builtin = MACHINES_DIR / f"{name_or_path}.toml"
    if builtin.is_file():
        return builtin
    from tierlab.cli.suggest import did_you_mean

    names = builtin_machines()
    raise MachineError(
        f"{name_or_path!r}: no such machine{did_you_mean(name_or_path, names)} "
        f"(built-in: {', '.join(names)}; or give a .toml file)"
    )


def _int(src: str, where: str, v: object, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise MachineError(f"{src}: {where}: expected an integer from {lo} to {hi}, got {v!r}")
    return v


def _bandwidth(src: str, where: str, v: object) -> int:
    if not isinstance(v, str) or not v.strip().endswith("/s"):
        raise MachineError(f'{src}: {where}: expected a bandwidth such as "20GB/s", got {v!r}')
    try:
        b = parse_size(v.strip()[:-2])
    except ValueError as e:
        raise MachineError(f"{src}: {where}: {e}") from None
    if b < 1_000_000:
        raise MachineError(f"{src}: {where}: at least 1MB/s")
    return b


def load(name_or_path: str) -> Machine:
    """Reads and checks a machine file (or a built-in machine by name)."""
    path = resolve(name_or_path)
    src = str(path)
    try:
        doc = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise MachineError(f"{src}: {e}") from None
    except OSError as e:
        raise MachineError(f"{src}: {e.strerror}") from None
    unknown = set(doc) - {"machine", "node", "distance"}
    if unknown:
        raise MachineError(f"{src}: unknown table(s): {', '.join(sorted(unknown))}")
    m = doc.get("machine", {})
    if not isinstance(m, dict):
        raise MachineError(f"{src}: [machine] must be a table")
    bad = set(m) - {
        "description",
        "slow_tier",
        "boot_timeout_s",
        "setup",
        "transparent_hugepage",
        "numa_balancing",
    }
    if bad:
        raise MachineError(f"{src}: [machine]: unknown field(s): {', '.join(sorted(bad))}")
    slow = m.get("slow_tier", "hmat")
    if slow not in SLOW_TIERS:
        raise MachineError(
            f"{src}: [machine] slow_tier: {slow!r}: expected one of {', '.join(SLOW_TIERS)}"
        )
    timeout = m.get("boot_timeout_s", 300)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise MachineError(f"{src}: [machine] boot_timeout_s: expected a number of seconds > 0")
    setup = m.get("setup", "")
    if not isinstance(setup, str):
        raise MachineError(f"{src}: [machine] setup: expected a shell command (a string)")
    thp = m.get("transparent_hugepage", "madvise")
    if thp not in THP_MODES:
        raise MachineError(
            f"{src}: [machine] transparent_hugepage: {thp!r}: expected one of "
            f"{', '.join(THP_MODES)}"
        )
    nb = _int(src, "[machine] numa_balancing", m.get("numa_balancing", 0), 0, 3)
    raw_nodes = doc.get("node", [])
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise MachineError(f"{src}: no [[node]]: a machine has at least one node")
    if len(raw_nodes) > 8:
        raise MachineError(f"{src}: at most 8 nodes")
    nodes = []
    for i, raw in enumerate(raw_nodes):
        where = f"node {i}"
        if not isinstance(raw, dict):
            raise MachineError(f"{src}: {where}: expected a table")
        bad = set(raw) - {"memory", "cpus", "latency_ns", "bandwidth", "dax_kmem"}
        if bad:
            raise MachineError(f"{src}: {where}: unknown field(s): {', '.join(sorted(bad))}")
        if "memory" not in raw:
            raise MachineError(f"{src}: {where}: memory is missing")
        try:
            mem = parse_size(str(raw["memory"]))
        except ValueError as e:
            raise MachineError(f"{src}: {where} memory: {e}") from None
        if mem < MEMORY_BLOCK or mem % MEMORY_BLOCK:
            raise MachineError(
                f"{src}: {where} memory: {raw['memory']}: a whole number of "
                f"{human_size(MEMORY_BLOCK)} memory blocks"
            )
        cpus = _int(src, f"{where} cpus", raw.get("cpus", 0), 0, 64)
        lat = raw.get("latency_ns")
        bw = raw.get("bandwidth")
        if slow == "hmat" and (lat is None or bw is None):
            raise MachineError(f'{src}: {where}: slow_tier = "hmat" needs latency_ns and bandwidth')
        lat_v = None if lat is None else _int(src, f"{where} latency_ns", lat, 1, 1_000_000)
        bw_v = None if bw is None else _bandwidth(src, f"{where} bandwidth", bw)
        dax = raw.get("dax_kmem", False)
        if not isinstance(dax, bool):
            raise MachineError(f"{src}: {where} dax_kmem: expected true or false")
        if dax and slow != "dax-kmem":
            raise MachineError(f'{src}: {where} dax_kmem: needs slow_tier = "dax-kmem"')
        if dax and cpus:
            raise MachineError(f"{src}: {where}: a dax kmem node has no CPUs (cpus = 0)")
        nodes.append(Node(i, mem, cpus, lat_v, bw_v, dax))
    if not any(n.cpus for n in nodes):
        raise MachineError(f"{src}: no node has CPUs")
    if slow == "dax-kmem":
        dax_nodes = [n.index for n in nodes if n.dax_kmem]
        if not dax_nodes:
            raise MachineError(f'{src}: slow_tier = "dax-kmem" needs a node with dax_kmem = true')
        if dax_nodes != list(range(len(nodes) - len(dax_nodes), len(nodes))):
            raise MachineError(f"{src}: the dax kmem nodes come last")
        if sum(n.memory for n in nodes if not n.dax_kmem) > PC_LOWMEM:
            raise MachineError(
                f"{src}: the nodes before the dax kmem nodes have at most 3 GiB together "
                "(they are the guest's RAM below 4 GiB)"
            )
    distances: dict[tuple[int, int], int] = {}
    for j, d in enumerate(doc.get("distance", [])):
        where = f"distance {j}"
        if not isinstance(d, dict) or set(d) != {"from", "to", "value"}:
            raise MachineError(f"{src}: {where}: expected {{from, to, value}}")
        a = _int(src, f"{where} from", d["from"], 0, len(nodes) - 1)
        b = _int(src, f"{where} to", d["to"], 0, len(nodes) - 1)
        distances[(a, b)] = _int(src, f"{where} value", d["value"], 10, 255)
    machine = Machine(
        name=path.stem,
        source=src,
        description=str(m.get("description", "")),
        slow_tier=slow,
        nodes=tuple(nodes),
        distances=distances,
        boot_timeout_s=float(timeout),
        agent_setup=setup,
        transparent_hugepage=thp,
        numa_balancing=nb,
    )
    machine.kernel_args()  # checks the dax kmem nodes' addresses
    return machine
