"""What is generated from declarations on the Rust side stays true to them:

- the generated files (``_native.pyi``'s run-result types, ``tierlab/stats_keys.py``) are what
  ``tools/gen_python.py`` writes from the built extension now;
- a real run's result has exactly the attributes and keys the stub declares, with values of
  the declared types;
- every statistic and time-series column of a set of short built-in runs is in the catalogue
  (``crates/tierlab-sim/src/stats_keys.rs``), so no key Python reads can be missing from it.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import types
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tierlab import _native
from tierlab import stats_keys as sk

ROOT = Path(__file__).resolve().parent.parent
#: How the extension's classes hold their attributes.
ATTRIBUTES = (types.GetSetDescriptorType, types.MemberDescriptorType)
STUB = ROOT / "python" / "tierlab" / "_native.pyi"


def _generator() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("gen_python", ROOT / "tools" / "gen_python.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_python", module)
    spec.loader.exec_module(module)
    return module


def test_generated_files_are_current() -> None:
    stale = _generator().stale()
    assert not stale, "\n".join(
        f"{path.relative_to(ROOT)} is stale: run `.venv/bin/python tools/gen_python.py` "
        f"(after `make install`):\n{diff[:3000]}"
        for path, diff in stale.items()
    )


# -- the stub against real values -------------------------------------------------------------


@cache
def stub() -> tuple[dict[str, ast.expr], dict[str, dict[str, ast.expr]], set[str]]:
    """The stub's type aliases, its classes' fields (TypedDict keys, or the properties of a
    class) by class name, and the names of the TypedDicts."""
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    aliases: dict[str, ast.expr] = {}
    classes: dict[str, dict[str, ast.expr]] = {}
    typed_dicts: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            aliases[node.targets[0].id] = node.value
        elif isinstance(node, ast.ClassDef):
            fields: dict[str, ast.expr] = {}
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    fields[item.target.id] = item.annotation
                elif (
                    isinstance(item, ast.FunctionDef)
                    and item.returns is not None
                    and any(
                        isinstance(d, ast.Name) and d.id == "property" for d in item.decorator_list
                    )
                ):
                    fields[item.name] = item.returns
            classes[node.name] = fields
            if any(isinstance(b, ast.Name) and b.id == "TypedDict" for b in node.bases):
                typed_dicts.add(node.name)
    return aliases, classes, typed_dicts


def problems(value: Any, ann: ast.expr, where: str) -> list[str]:
    """Where ``value`` does not have the type the stub's annotation ``ann`` says (every
    element of a list or dict is checked); empty when it does."""
    aliases, classes, typed_dicts = stub()
    text = ast.unparse(ann)
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        left, right = problems(value, ann.left, where), problems(value, ann.right, where)
        return [] if not left or not right else [f"{where}: {value!r:.80} is not {text}"]
    if isinstance(ann, ast.Constant) and ann.value is None:
        return [] if value is None else [f"{where}: {value!r:.80} is not None"]
    if isinstance(ann, ast.Name):
        name = ann.id
        plain = {"str": (str,), "bool": (bool,), "float": (float, int), "int": (int,)}
        if name in plain:
            ok = isinstance(value, plain[name]) and (
                name in ("bool",) or not isinstance(value, bool)
            )
            return [] if ok else [f"{where}: {value!r:.80} is not {name}"]
        if name in aliases:
            return problems(value, aliases[name], where)
        if name in typed_dicts:
            if not isinstance(value, dict) or set(value) != set(classes[name]):
                got = sorted(value) if isinstance(value, dict) else type(value).__name__
                return [f"{where}: {got} is not a {name} (keys {sorted(classes[name])})"]
            out = []
            for key, sub in classes[name].items():
                out += problems(value[key], sub, f"{where}[{key!r}]")
            return out
        if name in classes:
            cls = getattr(_native, name)
            if not isinstance(value, cls):
                return [f"{where}: {type(value).__name__} is not {name}"]
            out = []
            for attr, sub in classes[name].items():
                out += problems(getattr(value, attr), sub, f"{where}.{attr}")
            return out
        raise AssertionError(f"{where}: the checker does not know the stub's type {name}")
    if isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name):
        kind = ann.value.id
        args = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        if kind == "list":
            if not isinstance(value, list):
                return [f"{where}: {type(value).__name__} is not {text}"]
            return [p for i, x in enumerate(value) for p in problems(x, args[0], f"{where}[{i}]")]
        if kind == "dict":
            if not isinstance(value, dict):
                return [f"{where}: {type(value).__name__} is not {text}"]
            out = []
            for k, v in value.items():
                out += problems(k, args[0], f"{where} key {k!r}")
                out += problems(v, args[1], f"{where}[{k!r}]")
            return out
        if kind == "tuple":
            if not isinstance(value, tuple) or len(value) != len(args):
                return [f"{where}: {value!r:.80} is not {text}"]
            return [
                p
                for i, (x, a) in enumerate(zip(value, args, strict=True))
                for p in problems(x, a, f"{where}[{i}]")
            ]
    raise AssertionError(f"{where}: the checker does not know the stub's type {text}")


def _point(spec: str, label: str) -> list[str]:
    return dict(_native.sweep_points(spec, [])[1])[label]


#: Short built-in runs that between them give stages, a plan, samples, mappings, a mapping
#: log, DAMOS schemes, a tiering policy, the hierarchical memory and telemetry of each family.
RUNS: dict[str, tuple[str, list[str], list[str] | None]] = {
    "demo": ("demo", ['duration="20ms"'], None),
    "telescope-5tb": ("telescope-5tb", ['duration="300ms"'], ["DAMON-MOD", "TS-BND", "TS-FLX"]),
    "telescope-5tb/PEBS-AGG": ("telescope-5tb", ['duration="300ms"'], ["PEBS-AGG"]),
    "pebs-minife": ("pebs-minife", ['duration="5ms"'], ["R64-B8K"]),
}
TIERING = (
    "DAMON-MOD",
    "HeMem",
    "Memtis",
    "NUMA-tiering",
    "DAMON-mtier",
    "Colloid",
    "HybridTier",
    "NOMAD",
    "ARMS",
    "pghot",
    "kmmscand",
    "klruscand",
    "M5",
    "PACT",
)
PLACEMENT = ("stream/2-nodes/profile-guided", "stream/2-nodes/profile-guided-migrate")
HMEM = ("bt/8/fifo", "bt/8/lru", "bt/8/cmcp")


def run_of(name: str) -> Any:
    if name in RUNS:
        spec, ov, techniques = RUNS[name]
        return _native.run(spec, ov, None, None, None, techniques)
    spec, label = name.split(":", 1)
    duration = {"tiering-kv": "200ms", "numa-placement": "20ms", "cmcp-table1": "10ms"}[spec]
    return _native.run(spec, [*_point(spec, label), f'duration="{duration}"'])


ALL_RUNS = [
    *RUNS,
    *(f"tiering-kv:{p}" for p in TIERING),
    *(f"numa-placement:{p}" for p in PLACEMENT),
    *(f"cmcp-table1:{p}" for p in HMEM),
]


@pytest.mark.parametrize("name", ["demo", "tiering-kv:Memtis", "numa-placement:" + PLACEMENT[0]])
def test_a_run_has_the_stub_types(name: str) -> None:
    raw = run_of(name)
    _, classes, _ = stub()
    for record in _native._record_types():
        if record["kind"] != "class":
            continue
        cls = getattr(_native, record["name"])
        have = {n for n, v in vars(cls).items() if isinstance(v, ATTRIBUTES)}
        assert have == set(classes[record["name"]]), (
            f"{record['name']}: the extension's attributes {sorted(have)} are not the stub's "
            f"{sorted(classes[record['name']])}"
        )
    found = problems(raw, ast.Name("RunOutput"), "run")
    assert not found, "\n".join(found[:20])
    # What the run must have had for the check to mean something.
    want = {
        "demo": lambda r: r.mappings and r.mapping_log and r.heatmap["counts"],
        "tiering-kv:Memtis": lambda r: r.samples,
        "numa-placement:" + PLACEMENT[0]: lambda r: r.stages and r.plan,
    }[name]
    assert want(raw), f"{name}: the run lacks what this test checks"


def test_the_checker_finds_wrong_types() -> None:
    assert problems({"a": 1}, ast.parse("dict[str, StatValue]", mode="eval").body, "x") == []
    assert problems([1, "2"], ast.parse("list[int]", mode="eval").body, "x") == [
        "x[1]: '2' is not int"
    ]
    assert problems(True, ast.parse("int | None", mode="eval").body, "x")
    heat = {"t_start_s": [0.0], "t_end_s": [1.0], "bin_start": [0], "bin_bytes": [1]}
    assert problems(heat, ast.Name("Heatmap"), "h")  # two keys missing


@pytest.mark.parametrize("name", ALL_RUNS)
def test_every_published_key_is_in_the_catalogue(name: str) -> None:
    raw = run_of(name)
    assert raw.error is None, raw.error
    missing = [k for k in raw.stats_flat if sk.entry_of(k) is None]
    missing += [
        f"{s.name}: {k}" for s in raw.stages for k in s.stats_flat if sk.entry_of(k) is None
    ]
    missing += [f"time series: {c}" for c in raw.timeseries if sk.column_of(c) is None]
    assert not missing, (
        f"{name}: not in the catalogue (crates/tierlab-sim/src/stats_keys.rs; then make "
        "install and tools/gen_python.py):\n" + "\n".join(missing)
    )


def test_catalogue_lookup() -> None:
    entry = sk.entry_of(sk.MACHINE_ACCESSES)
    assert entry is not None and (entry.key, entry.unit) == ("machine.accesses", "count")
    entry = sk.entry_of(sk.telemetry_cpu_seconds("DAMON-MOD"))
    assert entry is not None and entry.key == "telemetry.{label}.cpu_seconds" and entry.unit == "s"
    assert sk.entry_of("telemetry.DAMON.no_such_stat") is None
    assert sk.entry_of("telemetry.a.b.cpu_seconds") is None  # a label is one part
    assert sk.column_of(sk.ts_node_accesses("dram")) is not None
    assert sk.entry_of(sk.ts_node_accesses("dram")) is not None  # also a statistic
    assert sk.column_of("machine.accesses") is None
    assert all(e.unit in sk.UNITS for e in (*sk.CATALOGUE, *sk.TIMESERIES))
