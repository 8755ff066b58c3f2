"""tierlab-core is the contract: the recording schema and the placement rules are declared
once, in Rust, and the Python package uses them through the binding."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tierlab import _native
from tierlab import recording as rmod
from tierlab.place.plan import PlanOptions, make_plan
from tierlab.recording import Recording, RecordingError, RecordingWriter

SPEC = _native.recording_schema()


def _native_columns(table: str) -> list[tuple[str, str]]:
    (t,) = [t for t in SPEC["tables"] if t["name"] == table]
    return [(c["name"], c["type"]) for c in t["columns"]]


def _rows(table: str, n: int = 3) -> dict[str, list]:
    """n valid rows of ``table``, one list per column of the native schema."""
    codes = {(ct["table"], ct["column"]): [c["value"] for c in ct["codes"]] for ct in SPEC["codes"]}
    out: dict[str, list] = {}
    for name, typ in _native_columns(table):
        allowed = codes.get((table, name))
        if allowed is not None:
            out[name] = [allowed[i % len(allowed)] for i in range(n)]
        elif typ == "string":
            out[name] = [f"s{i}" for i in range(n)]
        else:
            out[name] = list(range(n))
    return out


def test_python_schemas_are_the_native_schema() -> None:
    assert [t["name"] for t in SPEC["tables"]] == list(rmod.ALL_TABLES)
    assert rmod.TABLES == ("accesses", "samples", "mappings", "drains")
    assert rmod.OPTIONAL_TABLES == ("regions", "sync", "allocations", "alloc_sites")
    for table in rmod.ALL_TABLES:
        want = _native_columns(table)
        got = [(f.name, str(f.type)) for f in rmod.SCHEMAS[table]]
        assert got == want, table
    identity = (rmod.FORMAT_NAME, rmod.FORMAT_VERSION, rmod.META_FILE)
    assert identity == (SPEC["format"], SPEC["version"], SPEC["meta_file"])
    assert (rmod.KIND_LOAD, rmod.KIND_STORE) == (0, 1)
    assert rmod.MAPPING_EVENTS == ("map", "unmap")
    managed = {f["name"] for f in SPEC["meta_fields"] if f["managed"]}
    assert managed == rmod.META_MANAGED


def test_the_writer_writes_exactly_the_native_columns(tmp_path: Path) -> None:
    """Every table the writer produces has the native schema's columns, names and types,
    in order; meta.json has every field the native schema lists."""
    with RecordingWriter(tmp_path / "r", source="test") as w:
        for table in rmod.ALL_TABLES:
            getattr(w, f"append_{table}")(**_rows(table))
    for table in rmod.ALL_TABLES:
        (part,) = sorted((tmp_path / "r" / table).glob("*.parquet"))
        schema = pq.read_schema(part)
        got = [(f.name, f.type) for f in schema]
        assert got == [(n, pa.type_for_alias(t)) for n, t in _native_columns(table)], table
    meta = json.loads((tmp_path / "r" / SPEC["meta_file"]).read_text())
    assert list(meta)[: len(SPEC["meta_fields"])] == [f["name"] for f in SPEC["meta_fields"]]
    rec = Recording.open(tmp_path / "r")
    assert list(rec.samples().columns) == [n for n, _ in _native_columns("samples")]


def test_coded_columns_accept_only_their_codes(tmp_path: Path) -> None:
    with RecordingWriter(tmp_path / "r") as w:
        bad = _rows("accesses")
        bad["kind"][1] = 2
        with pytest.raises(
            RecordingError, match=r"`kind` must be 0 \(load\) or 1 \(store\), got \[2\]"
        ):
            w.append_accesses(**bad)
        bad = _rows("mappings")
        bad["event"][0] = "remap"
        with pytest.raises(
            RecordingError, match=r"`event` must be 'map' or 'unmap', got \['remap'\]"
        ):
            w.append_mappings(**bad)
        for field in SPEC["meta_fields"]:
            if field["managed"]:
                with pytest.raises(RecordingError, match="cannot be set"):
                    w.update_meta(**{field["name"]: 1})


def test_page_sizes_come_from_core() -> None:
    assert _native.page_sizes() == [
        ("4KiB", 4096, 12),
        ("64KiB", 65536, 16),
        ("2MiB", 2 << 20, 21),
        ("1GiB", 1 << 30, 30),
    ]
    assert _native.PAGE_SIZE == 4096


# -- the placement rules ------------------------------------------------------------------------

P = 4096


def _u8(values) -> bytes:
    return np.asarray(values, dtype="<u8").tobytes()


def _decided(d: dict) -> tuple[list[int], list[int], dict]:
    addr = np.frombuffer(d["addr"], dtype="<u8").tolist()
    node = np.frombuffer(d["node"], dtype="<u4").tolist()
    return addr, node, d["skipped"]


def test_native_evidence_and_affinity() -> None:
    # CPUs 0-1 on node 2, CPUs 2-3 on node 5: columns [2, 5]; CPU 9 on no node; -1: no CPU.
    addr = [0x1008, 0x1010, 0x1020, 0x2000, 0x2040, 0x3000, 0x3000]
    cpu = [0, 2, 3, 1, 2, 9, -1]
    ev = _native.plan_evidence(
        _u8(addr),
        np.asarray(cpu, dtype="<i8").tobytes(),
        _u8([1] * 7),
        P,
        {2: [0, 1], 5: [2, 3]},
        [2, 5],
    )
    assert np.frombuffer(ev["pages"], dtype="<u8").tolist() == [0x1000, 0x2000, 0x3000]
    assert np.frombuffer(ev["evidence"], dtype="<u8").reshape(3, 2).tolist() == [
        [1, 2],
        [1, 1],
        [0, 0],
    ]
    assert np.frombuffer(ev["total"], dtype="<u8").tolist() == [3, 2, 2]
    assert (ev["points_on_cpus_without_node"], ev["cpus_without_node"]) == (1, [9])
    d = _native.plan_affinity(ev["pages"], ev["evidence"], [2, 5], P)
    assert _decided(d) == ([0x1000, 0x2000], [5, 2], {})  # 0x2000: a tie, the lower node
    d = _native.plan_affinity(ev["pages"], ev["evidence"], [2, 5], P, [5], 2)
    assert _decided(d) == (
        [0x1000],
        [5],
        {"no evidence from the allowed nodes": 1, "below --min-samples": 1},
    )
    with pytest.raises(ValueError, match="node 7 is not one of the evidence's nodes"):
        _native.plan_affinity(ev["pages"], ev["evidence"], [2, 5], P, [7])
    with pytest.raises(ValueError, match="CPU 1 is on both node 2 and node 5"):
        _native.plan_evidence(_u8([0]), _u8([0]), _u8([1]), P, {2: [1], 5: [1]}, [2, 5])
    with pytest.raises(ValueError, match="must be a power of two"):
        _native.plan_affinity(ev["pages"], ev["evidence"], [2, 5], 3000)


def test_native_hot_fast() -> None:
    pages = _u8([0x1000, 0x2000, 0x3000, 0x4000])
    total = _u8([4, 3, 2, 3])
    d = _native.plan_hot_fast(pages, total, P, fast_node=1, fast_capacity=2 * P + 100)
    assert _decided(d) == (
        [0x1000, 0x2000],
        [1, 1],
        {"not among the hottest (no --slow-node)": 2},
    )
    d = _native.plan_hot_fast(pages, total, P, 1, 2 * P, slow_node=0, min_samples=4)
    assert _decided(d) == ([0x1000, 0x2000, 0x3000, 0x4000], [1, 0, 0, 0], {})
    d = _native.plan_hot_fast(b"", b"", P, 1, P)
    assert _decided(d) == ([], [], {})


def test_make_plan_decides_with_the_native_rule(tmp_path: Path) -> None:
    """make_plan's targets are the native rule's on the plan's own evidence."""
    rng = np.random.default_rng(7)
    n = 500
    base = 0x10000000
    with RecordingWriter(tmp_path / "r", machine={"page_size": P}) as w:
        w.append_mappings(
            time_ns=[0], event=["map"], start=[base], length=[64 * P], name=["[anon]"]
        )
        w.append_samples(
            time_ns=np.arange(n) + 1,
            tid=np.ones(n),
            cpu=rng.integers(0, 4, n),
            addr=base + rng.integers(0, 64 * P, n),
            ip=np.zeros(n),
            weight=rng.integers(0, 50, n),
            data_src=np.zeros(n),
            event=["page-faults"] * n,
            drain=np.zeros(n),
        )
    rec = Recording.open(tmp_path / "r")
    cpu_nodes = {0: [0, 1], 1: [2, 3]}
    for min_samples in (1, 3, 6):
        plan = make_plan(rec, PlanOptions(cpu_nodes=cpu_nodes, min_samples=min_samples))
        # Every page of the plan: its evidence's best node (ties: the lower), at least
        # min_samples of it; every sampled page left out has less.
        ev = plan.evidence
        assert (ev.sum(axis=1) >= min_samples).all()
        assert plan.target.tolist() == [plan.nodes[i] for i in np.argmax(ev, axis=1)]
        skipped = plan.summary["skipped_pages"].get("below --min-samples", 0)
        sampled = len(np.unique(rec.samples()["addr"].to_numpy() // P))
        assert len(plan) + skipped == sampled


def test_live_recorder_batches_carry_the_schema_columns() -> None:
    """The live recorder's batches (core's Sample and Drain rows, as columns) carry the
    native schema's columns; `event` is added by the writer (one event per recording)."""
    try:
        rec = _native.LiveRecorder.launch(["sh", "-c", "exit 0"], backend="page-faults")
    except _native.LiveError as e:
        pytest.skip(f"perf_event_open is not allowed here: {e}")
    batches = []
    try:
        while rec.exit is None:
            batches.append(rec.poll(50))
        batches.append(rec.finish())
    finally:
        rec.close()
    samples = [n for n, _ in _native_columns("samples")]
    for b in batches:
        assert sorted(b["samples"]) == sorted(c for c in samples if c != "event")
        assert sorted(b["drains"]) == sorted(n for n, _ in _native_columns("drains"))
        for m in b["mappings"]:
            assert len(m) == len(_native_columns("mappings"))
            assert m[1] in rmod.MAPPING_EVENTS
    assert sum(len(b["samples"]["addr"]) for b in batches) > 0
