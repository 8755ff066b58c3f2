"""Type stub of tierlab's native extension (``crates/tierlab-py``: ``src/lib.rs``, ``src/live.rs``).

Results cross the boundary as plain dicts and lists; the TypedDicts below name their keys.
They exist only for type checking (``from tierlab._native import RunOutput`` under
``TYPE_CHECKING``).
"""

from collections.abc import Callable, Sequence
from os import PathLike
from typing import Any, Literal, TypedDict, Unpack, final

__version__: str

#: One statistic's value (the stats registry's JSON: numbers, strings, booleans, null).
StatValue = int | float | str | bool | None
#: The nested stats registry (``stats["machine"]["accesses"]``).
StatsTree = dict[str, StatValue | StatsTree]

class ScenarioError(ValueError):
    """A scenario, masim config, override or input is invalid."""

class SimulationError(RuntimeError):
    """The simulated program did something the machine cannot do."""

class LiveError(RuntimeError):
    """Live recording could not start or go on (no PMU, no permission, no such process, ...)."""

class RecorderConfigError(LiveError):
    """A recorder configuration the recorder cannot take: an unknown key, a value of the wrong
    type or out of range (the message names it)."""

# -- run -------------------------------------------------------------------------------------

class Heatmap(TypedDict):
    t_start_s: list[float]
    t_end_s: list[float]
    bin_start: list[int]
    bin_bytes: list[int]
    bin_mapping: list[str]
    #: one row per window, one count per bin
    counts: list[list[int]]

class MappingInfo(TypedDict):
    name: str
    start: int
    length: int
    page_size: int

class SampleColumns(TypedDict):
    """A sample-based technique's samples, as columns of the recording's ``samples`` table."""

    time_ns: list[int]
    tid: list[int]
    cpu: list[int]
    addr: list[int]
    ip: list[int]
    weight: list[int]
    data_src: list[int]
    event: list[str]
    drain: list[int]

#: ``(time_ns, "map" | "unmap", start, length, name)``
MappingEvent = tuple[int, str, int, int, str]

class RunOutput(TypedDict):
    """What :func:`run` returns."""

    #: the scenario fully expanded (TOML)
    scenario: str
    name: str
    seed: int
    interrupted: bool
    #: a simulation error that ended the run early (everything before it is kept), or None
    error: str | None
    wall_seconds: float
    #: the stats registry, nested (``stats["machine"]["accesses"]``)
    stats: StatsTree
    #: the same keyed by dotted names
    stats_flat: dict[str, StatValue]
    #: one list per column, one value per window (counts as ints, times and rates as floats)
    timeseries: dict[str, list[float]]
    heatmap: Heatmap
    mappings: list[MappingInfo]
    mapping_log: list[MappingEvent]
    #: technique label -> its samples (``placement``: a profiling placement policy's)
    samples: dict[str, SampleColumns]
    #: the placement plan the run produced, ``(start, end, node)`` ranges, or None
    plan: list[tuple[int, int, int]] | None
    #: node of each core
    core_nodes: list[int]
    #: damo records (JSON text) of the region-based techniques with ``record = true``, by label
    damo_records: dict[str, str]
    #: the stages that ran before the last one
    stages: list[StageOutput]
    #: ``(name, value)`` rows of the run's summary
    summary: list[tuple[str, str]]

class StageOutput(TypedDict):
    """An earlier stage of a run (see ``docs/architecture.md``, stages)."""

    name: str
    stats: StatsTree
    stats_flat: dict[str, StatValue]
    #: ranges in the plan the stage produced (0: none)
    plan_ranges: int

class ReplayInput(TypedDict, total=False):
    """Replay data for a scenario whose workload is a recording (little-endian columns)."""

    addr: bytes
    tid: bytes
    kind: bytes
    mappings: Sequence[tuple[int, int, str]]

#: ``progress(sim_ns_done, sim_ns_total, accesses_done)``
ProgressCallback = Callable[[int, int, int], object]

def run(
    spec: str,
    overrides: Sequence[str] = ...,
    seed: int | None = None,
    progress: ProgressCallback | None = None,
    replay: ReplayInput | dict[str, Any] | None = None,
    techniques: Sequence[str] | None = None,
) -> RunOutput:
    """Run a scenario. ``techniques`` keeps only the named ``[[telemetry]]`` techniques
    (``[]``: none). A KeyboardInterrupt (Ctrl-C, or raised by ``progress``) stops the run
    and returns what was done with ``interrupted=True``; other exceptions of ``progress`` are
    re-raised."""

def export(spec: str, overrides: Sequence[str] = ..., seed: int | None = None) -> str:
    """The scenario fully expanded (every default written out), as TOML."""

def builtin_scenarios() -> list[tuple[str, str]]:
    """The built-in scenarios: ``(name, description)``."""

def replay_path(spec: str, overrides: Sequence[str] = ...) -> str | None:
    """The recording directory a replay scenario needs, or None."""

def sweep_points(
    spec: str, overrides: Sequence[str] = ...
) -> tuple[str, list[tuple[str, list[str]]]]:
    """A scenario's sweep: ``(sweep_name, [(label, [overrides])])`` (no points when it has
    none)."""

def techniques(spec: str, overrides: Sequence[str] = ...) -> list[tuple[str, str]]:
    """A scenario's telemetry techniques: ``[(label, kind)]``."""

def bench_engine(quick: bool = False) -> dict[str, float]:
    """Engine benchmarks: simulated accesses per second, by benchmark name."""

def policy_replay(kind: str, pages: bytes, capacity: int) -> tuple[int, int, float]:
    """Replay a page trace (little-endian u64 page numbers) through replacement policy
    ``kind``: ``(requests, misses, seconds)``."""

def policy_kinds() -> list[str]:
    """The registered replacement policies."""

# -- declared parameters (src/params.rs) -------------------------------------------------------

class ParamField(TypedDict):
    """One declared parameter (``#[param(...)]`` on a field of the engine's configuration)."""

    key: str
    type: str
    rust_type: str
    default: str | None
    required: bool
    unit: str
    range: str | None
    status: str
    source: str
    doc: str
    summary: str

def param_sections() -> list[tuple[str, str, list[ParamField]]]:
    """Every declared parameter of a scenario, table by table: ``(path, kind, fields)``."""

def parameters_page() -> str:
    """``docs/parameters.md``, generated from the declarations."""

def param_info(spec: str, key: str, overrides: Sequence[str] = ...) -> ParamField | None:
    """The declared field a key of the scenario ``spec`` names
    (``telemetry[0].sample_interval``), or None."""

# -- live recording (src/live.rs) --------------------------------------------------------------

class BackendInfo(TypedDict):
    #: the backend ``auto`` picks here
    auto: str
    #: backend name -> None when it works here, else why not
    backends: dict[str, str | None]
    #: backend name -> the events it can record
    events: dict[str, list[str]]

def live_backends(pmus_root: str | PathLike[str] | None = None) -> BackendInfo:
    """Which backends this machine supports."""

class RecorderConfig(TypedDict, total=False):
    """The recorder's configuration (``LiveRecorder.launch(argv, **config)``): its fields and
    their types. Their defaults, units, ranges and descriptions are the native recorder's
    (:func:`recorder_config_fields`); ``tests/test_record_config.py`` checks these keys and
    types against it."""

    backend: str
    event: str | None
    period: int | None
    buffer_size: int
    ldlat: int
    l3_miss_only: bool
    min_mapping: int
    snapshot_interval_ns: int
    flush_interval_ns: int
    pmus_root: str | None

class RecorderConfigField(TypedDict):
    """One field of the recorder's configuration, as the native recorder declares it."""

    name: str
    #: the value's type as Python spells it: int, bool, str, int | None, str | None
    type: str
    default: int | bool | str | None
    #: the default as help texts and the docs show it: a size or duration with its unit, or
    #: what None means
    default_text: str
    #: bytes, ns, cycles, events, or ""
    unit: str
    description: str
    #: the valid range of an integer field (inclusive); None for the others
    min: int | None
    max: int | None
    #: the values allowed, when they are a short list
    choices: list[str] | None

def recorder_config_fields() -> list[RecorderConfigField]:
    """The recorder's configuration fields, in order, with their defaults."""

def recorder_config(**config: Unpack[RecorderConfig]) -> RecorderConfig:
    """``config`` checked by the recorder's own type, every field given (the defaults for the
    others). Raises :class:`RecorderConfigError` naming a bad key or value."""

class LiveSampleColumns(TypedDict):
    """Little-endian columns: u64 except ``tid`` and ``cpu`` (u32)."""

    time_ns: bytes
    tid: bytes
    cpu: bytes
    addr: bytes
    ip: bytes
    weight: bytes
    data_src: bytes
    drain: bytes

class LiveDrainColumns(TypedDict):
    """Little-endian u64 columns."""

    time_ns: bytes
    cpu: bytes
    drain: bytes
    records: bytes

class LiveBatch(TypedDict):
    samples: LiveSampleColumns
    drains: LiveDrainColumns
    mappings: list[MappingEvent]
    #: Mappings with pages larger than 4 KiB seen in /proc/PID/smaps: (time_ns, start, end,
    #: name, kernel_page_size, huge_bytes).
    page_sizes: list[tuple[int, int, int, str, int, int]]

@final
class LiveRecorder:
    """A recording in progress: :meth:`launch` or :meth:`attach`, then :meth:`poll` until
    :attr:`exit` is not None, then :meth:`finish`. Linux only."""

    @staticmethod
    def launch(
        argv: Sequence[str | bytes | PathLike[str]], **config: Unpack[RecorderConfig]
    ) -> LiveRecorder:
        """Fork ``argv``, open the events on it, then let it exec."""
    @staticmethod
    def attach(pid: int, **config: Unpack[RecorderConfig]) -> LiveRecorder:
        """Attach to process ``pid`` (every thread, and every thread it creates)."""
    def poll(self, timeout_ms: int = 100) -> LiveBatch: ...
    def finish(self) -> LiveBatch: ...
    def close(self) -> None: ...
    @property
    def exit(self) -> tuple[Literal["exit", "signal", "gone"], int] | None: ...
    @property
    def pid(self) -> int: ...
    @property
    def now_ns(self) -> int: ...
    def parameters(self) -> dict[str, Any]:
        """backend, event, perf_type, config, config1, precise_ip, period, sample_type,
        group_leader, ring_bytes, cpus, flags_dropped, auto_notes."""
    def stats(self) -> dict[str, Any]:
        """samples, lost_records, lost, ..., threads (ints) and tids (list of ints)."""

class LackeyColumns(TypedDict):
    #: little-endian u64
    time_ns: bytes
    #: little-endian u64
    addr: bytes
    #: one byte per access
    kind: bytes
    #: Valgrind's own message lines
    messages: list[str]

class LackeyCounts(TypedDict):
    lines: int
    instructions: int
    loads: int
    stores: int
    modifies: int
    accesses: int

@final
class LackeyParser:
    """The streaming parser of lackey's ``--trace-mem=yes`` output."""

    def __init__(self) -> None: ...
    def feed(self, chunk: bytes) -> LackeyColumns: ...
    def finish(self) -> LackeyColumns: ...
    def counts(self) -> LackeyCounts: ...

# -- traces (crates/tierlab-py/src/traces.rs) -----------------------------------------------

class TraceFormatError(ValueError):
    """A trace file does not follow its format (the message names the file, record and
    field)."""

def import_trace(
    format: str,
    files: Sequence[str],
    out: str,
    overwrite: bool = False,
    meta: str = "{}",
    mappings: Sequence[tuple[int, str, int, int, str]] = ...,
    object_bytes: int = 4096,
    sep: str = ",",
    with_size: bool = False,
) -> dict[str, Any]:
    """Import ``raw``, ``csv``, ``oracle-general`` or ``lackey`` trace files into a new
    recording, streaming: counts (accesses, loads, stores, threads, skipped_lines, and
    instructions for lackey) and ``time_unit``."""

def survey_accesses(dir: str, gap: int = 0) -> dict[str, Any]:
    """One pass over a recording's accesses: rows, time_min, time_max, threads, pages and
    runs of touched pages ``(start, end)`` merged across holes under ``gap`` bytes."""

def aggregate_accesses(
    dir: str,
    segments: Sequence[tuple[int, int, int, int, int]],
    specs: Sequence[tuple[int, int, int]],
    t_lo: int,
    width: int,
    cols: int,
) -> tuple[list[dict[str, Any]], int]:
    """Per-mapping aggregates of a recording's accesses for ``tierlab view`` and the
    accesses in no mapping."""

# -- tier.rs: hottest-first's decision core for `tierlab tier` --------------------------------

class TierDecision(TypedDict):
    promote: bytes
    promote_score: bytes
    demote: bytes
    demote_score: bytes
    plan_pages: int
    blocked: bool

class TierCandidates(TypedDict):
    addr: bytes
    count: bytes

class HottestFirstCore:
    def __init__(self, fill: float = 0.95, min_samples: int = 1) -> None: ...
    def add_samples(self, addrs: bytes) -> int: ...
    def forget(self, addrs: bytes) -> None: ...
    def halve(self) -> None: ...
    def __len__(self) -> int: ...
    def candidates(self) -> TierCandidates: ...
    def decide(self, fast: bytes, capacity: int, max_promote: int = ...) -> TierDecision: ...

class MemtisDecision(TierDecision):
    threshold_bin: int

class MemtisCore:
    def __init__(self, fill: float = 0.95, cooling_samples: int = 2000000) -> None: ...
    def add_samples(self, addrs: bytes) -> int: ...
    def forget(self, addrs: bytes) -> None: ...
    def halve(self) -> None: ...
    def __len__(self) -> int: ...
    def candidates(self) -> TierCandidates: ...
    def decide(self, fast: bytes, capacity: int, max_promote: int = ...) -> MemtisDecision: ...

def hottest_first_decide(
    pages: bytes,
    samples: bytes,
    fast: bytes,
    capacity: int,
    fill: float = 0.95,
    min_samples: int = 1,
    max_promote: int = ...,
) -> TierDecision: ...
def tier_page_size() -> int: ...
