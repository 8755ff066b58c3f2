"""The recording format v1: writer, reader, crash safety, third-party readers, replay data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tierlab.recording import (
    SCHEMAS,
    TABLES,
    Recording,
    RecordingError,
    RecordingWriter,
    to_replay,
)

HEAP = 0x7F00_0000_0000
STACK = 0x7FFF_0000_0000


def sample_data(n: int = 1000, seed: int = 0) -> dict[str, dict[str, object]]:
    rng = np.random.default_rng(seed)
    return {
        "accesses": {
            "time_ns": np.arange(n, dtype=np.uint64) * 10,
            "tid": rng.integers(0, 4, n, dtype=np.uint32),
            "addr": HEAP + rng.integers(0, 1 << 20, n, dtype=np.uint64) * 8,
            "kind": rng.integers(0, 2, n, dtype=np.uint8),
        },
        "samples": {
            "time_ns": [5, 15],
            "tid": [1, 2],
            "cpu": [0, 3],
            "addr": [HEAP + 64, HEAP + 4096],
            "ip": [0x401000, 0],
            "weight": [250, 90],
            "data_src": [0, 0x1A],
            "event": ["mem-loads", "pebs-model"],
            "drain": [0, 0],
        },
        "mappings": {
            "time_ns": [0, 0, 900],
            "event": ["map", "map", "unmap"],
            "start": [HEAP, STACK, STACK],
            "length": [8 << 20, 1 << 20, 1 << 20],
            "name": ["[heap]", "[stack]", "[stack]"],
        },
        "drains": {"time_ns": [20], "cpu": [0], "drain": [0], "records": [2]},
    }


def write(path: Path, data: dict[str, dict[str, object]], parts: int = 1) -> None:
    with RecordingWriter(path, source="test", parameters={"period": 1}, machine={"cpus": 4}) as w:
        for _ in range(parts):
            for table, cols in data.items():
                getattr(w, f"append_{table}")(**cols)
            w.flush()


def test_round_trip(tmp_path: Path) -> None:
    rec_dir = tmp_path / "rec"
    data = sample_data()
    write(rec_dir, data, parts=3)
    rec = Recording.open(rec_dir)
    assert rec.meta["format"] == "tierlab-recording"
    assert rec.meta["version"] == 1
    assert rec.meta["source"] == "test"
    assert rec.meta["parameters"] == {"period": 1}
    assert rec.meta["machine"] == {"cpus": 4}
    assert rec.meta["complete"] is True
    assert rec.meta["tables"] == {"accesses": 3000, "samples": 6, "mappings": 9, "drains": 3}
    assert "T" in rec.meta["created"]
    assert [p.name for p in rec.parts("accesses")] == [
        "part-00000.parquet",
        "part-00001.parquet",
        "part-00002.parquet",
    ]
    acc = rec.accesses()
    assert list(acc.columns) == ["time_ns", "tid", "addr", "kind"]
    assert [str(t) for t in acc.dtypes] == ["uint64", "uint32", "uint64", "uint8"]
    np.testing.assert_array_equal(acc["addr"].to_numpy()[:1000], data["accesses"]["addr"])
    samples = rec.samples()
    assert list(samples.columns) == SCHEMAS["samples"].names
    assert list(samples["event"][:2]) == ["mem-loads", "pebs-model"]
    assert list(rec.mappings()["name"][:3]) == ["[heap]", "[stack]", "[stack]"]
    assert rec.drains()["records"].sum() == 6
    for table in TABLES:  # schemas on disk are exactly the format's
        assert pq.read_schema(rec.parts(table)[0]).remove_metadata() == SCHEMAS[table]


def test_appends_from_dataframe_and_arrow(tmp_path: Path) -> None:
    cols = sample_data(10)["accesses"]
    with RecordingWriter(tmp_path / "r") as w:
        w.append_accesses(pd.DataFrame(cols))
        w.append_accesses(pa.table(cols))
    assert len(Recording.open(tmp_path / "r").accesses()) == 20


def test_empty_tables_have_columns_and_a_part(tmp_path: Path) -> None:
    with RecordingWriter(tmp_path / "r"):
        pass
    rec = Recording.open(tmp_path / "r")
    for table in TABLES:
        frame = getattr(rec, table)()
        assert frame.empty
        assert list(frame.columns) == SCHEMAS[table].names
        # Every table stays readable by plain Parquet readers even with no rows.
        assert pd.read_parquet(tmp_path / "r" / table).columns.tolist() == SCHEMAS[table].names


def test_missing_table_directory_reads_as_empty(tmp_path: Path) -> None:
    write(tmp_path / "r", sample_data(10))
    for part in (tmp_path / "r" / "drains").iterdir():
        part.unlink()
    (tmp_path / "r" / "drains").rmdir()
    drains = Recording.open(tmp_path / "r").drains()
    assert drains.empty and list(drains.columns) == ["time_ns", "cpu", "drain", "records"]


def test_append_validation(tmp_path: Path) -> None:
    with RecordingWriter(tmp_path / "r") as w:
        with pytest.raises(RecordingError, match=r"missing column.*kind"):
            w.append_accesses(time_ns=[1], tid=[0], addr=[1])
        with pytest.raises(RecordingError, match=r"unknown column.*cpu"):
            w.append_accesses(time_ns=[1], tid=[0], addr=[1], kind=[0], cpu=[0])
        with pytest.raises(RecordingError, match="`kind` must be 0"):
            w.append_accesses(time_ns=[1], tid=[0], addr=[1], kind=[2])
        with pytest.raises(RecordingError, match="`addr`"):
            w.append_accesses(time_ns=[1], tid=[0], addr=[-1], kind=[0])
        with pytest.raises(RecordingError, match=r"`time_ns`.*must be integers"):
            w.append_accesses(time_ns=[1.5], tid=[0], addr=[1], kind=[0])
        with pytest.raises(RecordingError, match="different lengths"):
            w.append_accesses(time_ns=[1, 2], tid=[0], addr=[1], kind=[0])
        with pytest.raises(RecordingError, match="'map' or 'unmap'"):
            w.append_mappings(time_ns=[0], event=["mmap"], start=[0], length=[1], name=["x"])


def test_lists_of_large_integers_stay_exact(tmp_path: Path) -> None:
    # numpy makes [0x1000, 2**64 - 8] float64: the addresses were rounded, with a warning only.
    addrs = [0x1000, 2**64 - 8, 2**63 + 1]
    with RecordingWriter(tmp_path / "r") as w:
        w.append_accesses(time_ns=[0, 1, 2], tid=[0, 0, 0], addr=addrs, kind=[0, 1, 0])
        with pytest.raises(RecordingError, match=r"`addr`.*negative"):
            w.append_accesses(time_ns=[3, 4], tid=[0, 0], addr=[-1, 2**63], kind=[0, 0])
        with pytest.raises(RecordingError, match=r"`addr`.*64 bits"):
            w.append_accesses(time_ns=[3, 4], tid=[0, 0], addr=[1, 2**64], kind=[0, 0])
    got = Recording.open(tmp_path / "r").accesses()["addr"].to_numpy(dtype=np.uint64).tolist()
    assert got == addrs


def test_writer_refuses_to_clobber(tmp_path: Path) -> None:
    write(tmp_path / "r", sample_data(10))
    with pytest.raises(RecordingError, match="already exists"):
        RecordingWriter(tmp_path / "r")
    RecordingWriter(tmp_path / "r", overwrite=True).close()
    assert Recording.open(tmp_path / "r").accesses().empty


def test_auto_flush(tmp_path: Path) -> None:
    w = RecordingWriter(tmp_path / "r", flush_rows=250)
    w.append_accesses(**sample_data(1000)["accesses"])
    assert len(Recording.open(tmp_path / "r").parts("accesses")) == 1  # written, not closed
    assert Recording.open(tmp_path / "r").meta["tables"]["accesses"] == 1000
    w.close()


def test_open_errors(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match="no such recording"):
        Recording.open(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RecordingError, match=r"meta\.json: missing"):
        Recording.open(tmp_path / "empty")

    write(tmp_path / "r", sample_data(10))
    meta_path = tmp_path / "r" / "meta.json"
    meta = json.loads(meta_path.read_text())

    meta_path.write_text(json.dumps({**meta, "version": 2}))
    with pytest.raises(RecordingError, match="version 2 is newer than this tierlab reads"):
        Recording.open(tmp_path / "r")
    meta_path.write_text(json.dumps({**meta, "format": "something-else"}))
    with pytest.raises(RecordingError, match="field `format`"):
        Recording.open(tmp_path / "r")
    meta_path.write_text("{not json")
    with pytest.raises(RecordingError, match=r"meta\.json:1:2: not valid JSON"):
        Recording.open(tmp_path / "r")


def test_missing_column_names_file_and_column(tmp_path: Path) -> None:
    write(tmp_path / "r", sample_data(10))
    part = tmp_path / "r" / "accesses" / "part-00000.parquet"
    pq.write_table(pq.read_table(part).drop_columns(["addr"]), part)
    rec = Recording.open(tmp_path / "r")
    with pytest.raises(RecordingError, match=r"part-00000\.parquet: missing column `addr`"):
        rec.accesses()


def test_wrong_type_names_file_and_column(tmp_path: Path) -> None:
    write(tmp_path / "r", sample_data(10))
    part = tmp_path / "r" / "samples" / "part-00000.parquet"
    t = pq.read_table(part)
    t = t.set_column(t.schema.get_field_index("event"), "event", pa.array([1, 2]))
    pq.write_table(t, part)
    with pytest.raises(RecordingError, match=r"part-00000\.parquet: column `event` has type int64"):
        Recording.open(tmp_path / "r").samples()


def test_extra_columns_are_ignored(tmp_path: Path) -> None:
    """A newer writer of the same major version may add columns; readers drop them."""
    write(tmp_path / "r", sample_data(10))
    part = tmp_path / "r" / "drains" / "part-00000.parquet"
    pq.write_table(pq.read_table(part).append_column("future", pa.array([7])), part)
    assert list(Recording.open(tmp_path / "r").drains().columns) == SCHEMAS["drains"].names


WRITER_SCRIPT = """
import os, signal, sys
import numpy as np
from tierlab.recording import RecordingWriter
w = RecordingWriter(sys.argv[1], source="crash-test")
for i in range(3):
    w.append_accesses(time_ns=np.arange(100) + 100 * i, tid=np.zeros(100), addr=np.arange(100) * 64,
                      kind=np.zeros(100))
    w.flush()
w.append_accesses(time_ns=[1], tid=[0], addr=[0], kind=[0])  # buffered, never flushed
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_killed_writer_leaves_readable_recording(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", WRITER_SCRIPT, str(tmp_path / "r")], timeout=60)
    assert proc.returncode == -9  # killed, not failed
    rec = Recording.open(tmp_path / "r")
    assert rec.meta["complete"] is False
    assert rec.meta["tables"]["accesses"] == 300
    assert len(rec.accesses()) == 300
    assert rec.samples().empty
    assert not [f for f in (tmp_path / "r").rglob("*") if f.name.endswith(".tmp")]


def test_leftover_temporary_part_is_invisible(tmp_path: Path) -> None:
    """A part being written when the writer died is hidden from every reader."""
    write(tmp_path / "r", sample_data(10))
    junk = tmp_path / "r" / "accesses" / ".part-00001.parquet.tmp"
    junk.write_bytes(b"PAR1 half a file")
    assert len(Recording.open(tmp_path / "r").accesses()) == 10
    assert len(pd.read_parquet(tmp_path / "r" / "accesses")) == 10


def test_third_party_readers(tmp_path: Path) -> None:
    """pandas, polars and DuckDB read every table without tierlab."""
    pl = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    rec_dir = tmp_path / "rec"
    write(rec_dir, sample_data(500), parts=2)
    expected = Recording.open(rec_dir)
    old = Path.cwd()
    os.chdir(tmp_path)  # relative paths, as a user would type them
    try:
        for table in TABLES:
            want = getattr(expected, table)()
            by_pandas = pd.read_parquet(f"rec/{table}")
            by_polars = pl.read_parquet(f"rec/{table}/*.parquet")
            by_duckdb = duckdb.sql(f"SELECT * FROM read_parquet('rec/{table}/*.parquet')").df()
            for got in (by_pandas, by_polars.to_pandas(), by_duckdb):
                assert list(got.columns) == SCHEMAS[table].names
                assert len(got) == len(want)
            assert by_polars.schema["time_ns"] == pl.UInt64
        total = duckdb.sql(
            "SELECT count(*), sum(kind) FROM read_parquet('rec/accesses/*.parquet')"
        ).fetchall()[0]
        assert total[0] == 1000
        assert total[1] == int(expected.accesses()["kind"].sum())
    finally:
        os.chdir(old)


def test_to_replay(tmp_path: Path) -> None:
    data = sample_data(100)
    acc = data["accesses"]
    order = np.arange(100)[::-1]  # written out of time order: replay sorts by time
    with RecordingWriter(tmp_path / "r") as w:
        w.append_accesses(**{k: np.asarray(v)[order] for k, v in acc.items()})
        w.append_mappings(**data["mappings"])
        # a re-mapping of part of the heap merges into the first range
        w.append_mappings(
            time_ns=[950], event=["map"], start=[HEAP + 4096], length=[10], name=["x"]
        )
    replay = to_replay(tmp_path / "r")
    assert set(replay) == {"addr", "tid", "kind", "mappings"}
    np.testing.assert_array_equal(np.frombuffer(replay["addr"], "<u8"), acc["addr"])
    np.testing.assert_array_equal(np.frombuffer(replay["tid"], "<u4"), acc["tid"])
    np.testing.assert_array_equal(np.frombuffer(replay["kind"], "u1"), acc["kind"])
    assert replay["mappings"] == [(HEAP, 8 << 20, "[heap]"), (STACK, 1 << 20, "[stack]")]


def test_to_replay_aligns_mappings(tmp_path: Path) -> None:
    with RecordingWriter(tmp_path / "r") as w:
        w.append_mappings(time_ns=[0], event=["map"], start=[HEAP + 100], length=[5000], name=["a"])
    assert to_replay(tmp_path / "r")["mappings"] == [(HEAP, 8192, "a")]


def test_a_recorder_goes_on_when_its_metadata_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # update_meta refuses what the reader would refuse; a live recorder must not stop over it.
    with RecordingWriter(tmp_path / "r") as w:
        assert w.update_meta_or_warn(accounting={"samples": 5})
        assert not w.update_meta_or_warn(accounting={"samples": -1})
        w.append_accesses(time_ns=[1], tid=[0], addr=[0x1000], kind=[0])
    assert "accounting.samples" in capsys.readouterr().err
    rec = Recording.open(tmp_path / "r")
    assert rec.meta["accounting"]["samples"] == 5
    assert len(rec.accesses()) == 1
