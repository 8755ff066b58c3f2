"""tierlab-core is the contract: the recording schema and the placement rules are declared
once, in Rust, and the Python package uses them through the binding."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tierlab import _native
from tierlab import recording as rmod
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
    assert rmod.OPTIONAL_TABLES == ("regions",)
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
