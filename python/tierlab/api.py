"""tierlab's Python API: run scenarios, export them, list the built-in ones.

The simulation itself is native (``tierlab._native``); this module turns Python arguments
into the native call (overrides, progress) and the native result into a
:class:`Result` holding pandas tables.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from tierlab import stats_keys as sk

# numpy and pandas are imported where a table is made, not here: every `tierlab` command
# imports this module, and most (`run --json`, the recorders, every input error) make none.
if TYPE_CHECKING:
    import pandas as pd

    from tierlab._native import (
        Heatmap,
        MappingEvent,
        MappingInfo,
        RunOutput,
        StageOutput,
        StatsTree,
        StatValue,
    )
    from tierlab.sampleset import Samples

ProgressFn = Callable[[int, int, int], None]


def native() -> ModuleType:
    """The compiled extension ``tierlab._native`` (a clear error if it was not built)."""
    try:
        from tierlab import _native
    except ImportError as e:  # pragma: no cover - depends on the build
        raise ImportError(
            "tierlab's native extension (tierlab._native) is not built or does not load: "
            f"{e}. Build it with `make install` (or `maturin develop --release`)."
        ) from e
    return _native


# -- overrides ---------------------------------------------------------------------------------


#: TOML integers are 64-bit signed.
_TOML_INT_MIN, _TOML_INT_MAX = -(2**63), 2**63 - 1


def toml_value(value: Any) -> str:
    """A Python value as a TOML literal (strings are quoted, so they are never re-parsed).
    numpy scalars and arrays are taken as the Python numbers and lists they hold; an integer
    outside TOML's 64-bit range is a ValueError."""
    if type(value).__module__.split(".")[0] == "numpy" and callable(getattr(value, "tolist", None)):
        value = value.tolist()  # numpy scalar -> int/float/bool, array -> list
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if not _TOML_INT_MIN <= value <= _TOML_INT_MAX:
            raise ValueError(
                f"integer {_short_int(value)} is outside TOML's 64-bit range "
                f"({_TOML_INT_MIN}..{_TOML_INT_MAX})"
            )
        return str(int(value))
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(float(value))
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Path):
        return json.dumps(str(value), ensure_ascii=False)
    if isinstance(value, Mapping):
        items = ", ".join(f"{_toml_key(k)} = {toml_value(v)}" for k, v in value.items())
        return "{ " + items + " }" if items else "{}"
    if isinstance(value, Iterable):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot express {type(value).__name__} {value!r} as a TOML value")


def _short_int(value: int) -> str:
    return str(value) if abs(value) < 10**40 else f"of {value.bit_length()} bits"


def _toml_key(key: Any) -> str:
    k = str(key)
    if k and all(c.isalnum() or c in "-_" for c in k):
        return k
    return json.dumps(k)


def build_overrides(
    overrides: Mapping[str, Any] | None = None, set: Iterable[str] | None = None
) -> list[str]:
    """``key=value`` strings for the native layer: ``set`` entries are passed as written;
    keyword overrides use ``__`` for dots (``machine__cores=4`` -> ``machine.cores=4``) and
    their values are written as TOML literals."""
    out: list[str] = []
    if isinstance(set, str):  # one override, not a sequence of one-character strings
        set = [set]
    elif set is not None and not isinstance(set, Iterable):
        raise TypeError(
            f"set: expected a list of 'key=value' strings, got {type(set).__name__} {set!r}"
        )
    for item in set or ():
        if not isinstance(item, str):
            raise TypeError(
                f"set: override {item!r} is {type(item).__name__}, not a 'key=value' string "
                "(it is not of the form key=value)"
            )
        if "=" not in item:
            raise ValueError(f"set: override {item!r} is not of the form key=value")
        out.append(item)
    for key, value in (overrides or {}).items():
        dotted = key.replace("__", ".")
        try:
            text = toml_value(value)
        except (TypeError, ValueError) as e:
            raise type(e)(f"override {key} ({dotted}): {e}") from None
        out.append(f"{dotted}={text}")
    return out


#: Seeds the engine accepts: TOML integers >= 0.
SEED_MAX = 2**63 - 1


def check_seed(seed: Any) -> int | None:
    """``seed`` as the engine takes it (``None``, or an integer in 0..2^63-1; numpy integers
    are taken as the integers they hold); anything else is a TypeError or ValueError naming
    ``seed``."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not hasattr(seed, "__index__"):
        raise TypeError(f"seed: expected an integer, got {type(seed).__name__} {seed!r}")
    value = int(seed.__index__())
    if not 0 <= value <= SEED_MAX:
        raise ValueError(f"seed: {_short_int(value)} is outside 0..{SEED_MAX} (2^63-1)")
    return value


# -- results -----------------------------------------------------------------------------------


@dataclass
class Result:
    """The outcome of one run.

    ``stats`` is the nested stats registry (``stats["machine"]["accesses"]``), ``stats_flat``
    the same keyed by dotted names (:mod:`tierlab.stats_keys` names them), ``timeseries`` one
    row per window, ``heatmap`` accesses per (window, address bin) as returned by the engine
    (see :meth:`heatmap_frame`), ``scenario`` the fully expanded scenario TOML (runs again to
    the same numbers).

    ``timeseries`` is made from the engine's columns when first read (``timeseries_columns``).
    """

    name: str
    seed: int
    scenario: str
    interrupted: bool
    wall_seconds: float
    stats: StatsTree
    stats_flat: dict[str, StatValue]
    timeseries_columns: Mapping[str, Any]
    heatmap: Heatmap
    mappings: list[MappingInfo]
    summary: list[tuple[str, str]]
    sim_ns_done: int | None = None
    sim_ns_total: int | None = None
    #: the simulation error that ended the run early (the simulated machine ran out of
    #: memory, ...): everything simulated before it is in the result; None for a full run
    error: str | None = None
    #: every map and unmap of the run: ``(time_ns, "map" | "unmap", start, length, name)``
    mapping_log: list[MappingEvent] = field(default_factory=list, repr=False)
    #: technique label -> its samples (sample-based techniques, a profiling placement
    #: policy), columns made when read (:class:`tierlab.sampleset.Samples`)
    samples: dict[str, Samples] = field(default_factory=dict, repr=False)
    #: the placement plan the run produced, ``(start, end, node)`` ranges, or None
    plan: list[tuple[int, int, int]] | None = field(default=None, repr=False)
    #: node of each core
    core_nodes: list[int] = field(default_factory=list, repr=False)
    #: damo records (JSON text) of the region-based techniques that kept one, by label
    damo_records: dict[str, str] = field(default_factory=dict, repr=False)
    #: the stages that ran before the last one
    stages: list[StageOutput] = field(default_factory=list, repr=False)
    #: the tiering policy's decision log (one row per page named in a promotion or
    #: demotion): ``time_ns, call, action, addr, node, moved`` columns; empty without tiering
    decisions: Mapping[str, Any] = field(default_factory=dict, repr=False)
    #: what the run came from (:func:`tierlab.provenance.collect`), written into
    #: ``run.json``; filled in by ``tierlab run`` (or when ``run.json`` is written)
    provenance: dict[str, Any] | None = field(default=None, repr=False)
    #: what the native ``run`` returned (None for a result made otherwise, e.g. from a
    #: sweep point)
    raw: RunOutput | None = field(default=None, repr=False)
    _timeseries: pd.DataFrame | None = field(default=None, repr=False, compare=False)

    @property
    def timeseries(self) -> pd.DataFrame:
        """One row per window (a pandas table, made on first use)."""
        if self._timeseries is None:
            import pandas as pd

            self._timeseries = pd.DataFrame(dict(self.timeseries_columns))
        return self._timeseries

    @classmethod
    def from_native(cls, raw: RunOutput, progress: tuple[int, int, int] | None = None) -> Result:
        """The result of the native ``run`` (``progress``: its last progress report)."""
        done, total = simulated_ns(raw.timeseries, progress)
        return cls(
            name=raw.name,
            seed=raw.seed,
            scenario=raw.scenario,
            interrupted=raw.interrupted,
            wall_seconds=raw.wall_seconds,
            stats=raw.stats,
            stats_flat=raw.stats_flat,
            timeseries_columns=raw.timeseries,
            heatmap=raw.heatmap,
            mappings=raw.mappings,
            summary=raw.summary,
            sim_ns_done=done,
            sim_ns_total=total,
            error=raw.error,
            mapping_log=raw.mapping_log,
            samples=_samples(raw.samples),
            plan=raw.plan,
            core_nodes=raw.core_nodes,
            damo_records=raw.damo_records,
            stages=raw.stages,
            decisions=raw.decisions,
            raw=raw,
        )

    def heatmap_frame(self) -> pd.DataFrame:
        """The heatmap as a long table: one row per (window, address bin) with columns
        ``window, t_start_s, t_end_s, bin, bin_start, bin_bytes, mapping, accesses``."""
        return heatmap_frame(self.heatmap)

    def frame(self, table: str = "timeseries", library: str = "pandas") -> Any:
        """A table of the run (``timeseries``, ``heatmap``, ``stats``) as a pandas frame, or
        as a polars one with ``library="polars"``."""
        from tierlab.display import to_library

        tables = {
            "timeseries": lambda: self.timeseries,
            "heatmap": self.heatmap_frame,
            "stats": self.stats_table,
        }
        if table not in tables:
            raise ValueError(f"table {table!r}: expected one of {', '.join(tables)}")
        return to_library(tables[table](), library)

    def __repr__(self) -> str:
        """One line (the scenario TOML is ``.scenario``, the summary ``.summary``)."""
        state = ""
        if self.interrupted:
            state = ", interrupted"
        elif self.error is not None:
            state = f", stopped by a simulation error: {self.error}"
        sim = f"{self.sim_ns_done / 1e9:g} s simulated, " if self.sim_ns_done else ""
        accesses = self.stats_flat.get("machine.accesses")
        acc = f"{accesses:,} accesses, " if isinstance(accesses, int) else ""
        return (
            f"<Result {self.name} seed {self.seed}: {sim}{acc}{self.wall_seconds:.2f} s wall"
            f"{state}>"
        )

    def _repr_html_(self) -> str:
        import html

        from tierlab.display import html_table

        head = f"<p><b>{html.escape(self.name)}</b> (seed {self.seed})</p>"
        return head + html_table(self.summary)

    def stats_table(self) -> pd.DataFrame:
        """``stats_flat`` as a two-column table (``name``, ``value``)."""
        import pandas as pd

        return pd.DataFrame(
            {"name": list(self.stats_flat), "value": [str(v) for v in self.stats_flat.values()]}
        )


def simulated_ns(
    timeseries: Mapping[str, Any], progress: tuple[int, int, int] | None = None
) -> tuple[int | None, int | None]:
    """``(sim_ns_done, sim_ns_total)`` of a run: from its last progress report, the time done
    raised to the end of its last window."""
    done: int | None = progress[0] if progress else None
    total: int | None = progress[1] if progress else None
    ends = timeseries.get(sk.TS_T_END_S) or ()
    if len(ends):
        end_ns = round(float(max(ends)) * 1e9)
        done = end_ns if done is None else max(done, end_ns)
    return done, total


def empty_heatmap() -> Heatmap:
    """A heatmap of no window and no bin."""
    return {
        "t_start_s": [],
        "t_end_s": [],
        "bin_start": [],
        "bin_bytes": [],
        "bin_mapping": [],
        "counts": [],
    }


def heatmap_frame(heatmap: Heatmap) -> pd.DataFrame:
    """Long form of a native heatmap dict (see :meth:`Result.heatmap_frame`)."""
    import numpy as np
    import pandas as pd

    if not isinstance(heatmap, Mapping):
        raise TypeError(
            "heatmap_frame: expected a heatmap dict (Result.heatmap: lists or arrays under "
            f"{', '.join(_HEATMAP_KEYS)}), got {type(heatmap).__name__}"
        )
    columns = ["window", "t_start_s", "t_end_s", "bin", "bin_start", "bin_bytes", "mapping"]

    def get(key: str, dtype: Any) -> np.ndarray:
        value = heatmap.get(key)
        try:
            return np.asarray([] if value is None else value, dtype=dtype)
        except (TypeError, ValueError, OverflowError) as e:
            raise ValueError(f"heatmap_frame: `{key}`: {e}") from None

    counts = get("counts", np.uint64)
    starts = get("bin_start", np.uint64)
    nbins = len(starts)
    if not counts.size or not nbins:
        return pd.DataFrame({c: [] for c in [*columns, "accesses"]})
    nwin = len(counts)
    if counts.shape != (nwin, nbins):
        raise ValueError(
            f"heatmap_frame: `counts` has shape {counts.shape}, expected one row of {nbins} "
            "counts (one per bin of `bin_start`) per window"
        )
    per_window = {k: get(k, float) for k in ("t_start_s", "t_end_s")}
    per_bin = {"bin_bytes": get("bin_bytes", np.uint64), "bin_mapping": get("bin_mapping", object)}
    for key, arr, n, what in [
        *((k, a, nwin, "windows (rows of `counts`)") for k, a in per_window.items()),
        *((k, a, nbins, "bins (`bin_start`)") for k, a in per_bin.items()),
    ]:
        if arr.shape != (n,):
            raise ValueError(
                f"heatmap_frame: `{key}` has {arr.shape[0] if arr.ndim else 0} values "
                f"(shape {arr.shape}), expected one per {n} {what}"
            )
    return pd.DataFrame(
        {
            "window": np.repeat(np.arange(nwin, dtype=np.uint32), nbins),
            "t_start_s": np.repeat(per_window["t_start_s"], nbins),
            "t_end_s": np.repeat(per_window["t_end_s"], nbins),
            "bin": np.tile(np.arange(nbins, dtype=np.uint32), nwin),
            "bin_start": np.tile(starts, nwin),
            "bin_bytes": np.tile(per_bin["bin_bytes"], nwin),
            "mapping": np.tile(per_bin["bin_mapping"], nwin),
            "accesses": counts.reshape(-1),
        }
    )


_HEATMAP_KEYS = ("t_start_s", "t_end_s", "bin_start", "bin_bytes", "bin_mapping", "counts")


# -- entry points ------------------------------------------------------------------------------


def run_native(
    scenario: str | Path,
    overrides: list[str],
    seed: int | None = None,
    progress: ProgressFn | None = None,
) -> Result:
    """Run with already-built ``key=value`` overrides (the CLI's entry point).

    ``progress`` receives ``(sim_ns_done, sim_ns_total, accesses_done)`` about every 0.1 s;
    if it raises (Ctrl-C), the run stops and the result has ``interrupted=True``.
    """
    spec = str(scenario)
    seed = check_seed(seed)
    last: tuple[int, int, int] | None = None

    def tick(done: int, total: int, accesses: int) -> None:
        nonlocal last
        last = (done, total, accesses)
        if progress is not None:
            progress(done, total, accesses)

    from tierlab import _native

    raw = _native.run(spec, overrides, seed, tick)
    return Result.from_native(raw, last)


def run(
    scenario: str | Path,
    *,
    seed: int | None = None,
    progress: bool | ProgressFn = False,
    set: Iterable[str] | None = None,
    **overrides: Any,
) -> Result:
    """Run a scenario: a TOML file, a built-in name (see :func:`scenarios`) or
    ``masim:PATH``.

    Overrides: ``machine__cores=4`` (``__`` stands for ``.``) or ``set=["machine.cores=4"]``.
    ``progress=True`` shows a progress bar on stderr; a callable receives
    ``(sim_ns_done, sim_ns_total, accesses_done)``.
    """
    ov = build_overrides(overrides, set)
    seed = check_seed(seed)
    if progress is True:
        from tierlab.progress import progress_bar

        with progress_bar() as cb:
            return run_native(scenario, ov, seed, cb)
    return run_native(scenario, ov, seed, progress or None)


def export(
    scenario: str | Path,
    *,
    seed: int | None = None,
    set: Iterable[str] | None = None,
    **overrides: Any,
) -> str:
    """The scenario fully expanded (every default written out) as TOML."""
    from tierlab import _native

    return _native.export(str(scenario), build_overrides(overrides, set), check_seed(seed))


def scenarios() -> list[tuple[str, str]]:
    """Built-in scenarios as ``(name, description)``."""
    from tierlab import _native

    return [(str(n), str(d)) for n, d in _native.builtin_scenarios()]


def bench_engine(quick: bool = False, repeat: int = 1) -> dict[str, list[float]]:
    """Engine throughput in accesses per second (``generate``, ``machine_1core``,
    ``machine_16core``, ...): every benchmark's rate in each of ``repeat`` rounds (all the
    benchmarks run once per round, so a slow spell of a shared machine spreads over them)."""
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, not {repeat}")
    from tierlab import _native

    runs: dict[str, list[float]] = {}
    for _ in range(repeat):
        for k, v in _native.bench_engine(quick).items():
            runs.setdefault(str(k), []).append(float(v))
    return runs


def _samples(raw: Mapping[str, Any]) -> dict[str, Samples]:
    """The run's samples as :class:`tierlab.sampleset.Samples` (numpy is imported only
    when there are samples: ``run --json`` of a run without any loads no table library)."""
    if not raw:
        return {}
    from tierlab import sampleset

    return sampleset.of_all(raw)
