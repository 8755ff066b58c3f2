"""Bad input to the Python API (RecordingWriter, overrides and seeds, heatmap_frame) is refused
with an error naming what is wrong, never stored as a wrong value or left half-written."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tierlab
from tierlab import api
from tierlab.recording import Recording, RecordingError, RecordingWriter, writer


def _accesses(time_ns: Any) -> dict[str, Any]:
    n = len(time_ns)
    return {"time_ns": time_ns, "tid": [0] * n, "addr": list(range(1, n + 1)), "kind": [0] * n}


# -- 1. float columns ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("time_ns", "what"),
    [
        (np.full(3, 1e30), "row 0 does not fit in 64 bits"),
        (np.full(3, 2.0**64), "row 0 does not fit in 64 bits"),
        (np.array([0.0, 1.5e19, -1.0]), "-1.0 at row 2 is negative"),
        (np.array([-1.0, 1.5e19, 0]), "-1.0 at row 0 is negative"),
        (np.array([0.0, np.nan]), "nan at row 1 is not a finite number"),
        (np.array([np.inf]), "inf at row 0 is not a finite number"),
        (np.array([0.0, 2.5]), "2.5 at row 1 is not an integer"),
        ([1.0, -3.0], "-3.0 at row 1 is negative"),
    ],
)
def test_bad_float_column_refused(tmp_path: Path, time_ns: Any, what: str) -> None:
    with (
        RecordingWriter(tmp_path / "rec") as w,
        pytest.raises(RecordingError, match=r"column `time_ns`.*" + what),
    ):
        w.append_accesses(**_accesses(time_ns))
    assert Recording.open(tmp_path / "rec").accesses().empty


def test_integral_floats_kept_exactly(tmp_path: Path) -> None:
    # Integral floats below 2^64, also above 2^53 and 2^63, are the integers they are.
    values = [0.0, 2.0**53, 1.5e19, 2.0**64 - 2048]
    with RecordingWriter(tmp_path / "rec") as w:
        w.append_accesses(**_accesses(np.array(values)))
    got = Recording.open(tmp_path / "rec").accesses()["time_ns"].tolist()
    assert got == [int(v) for v in values]


# -- 2. numpy values in meta.json; no skeleton on a constructor error --------------------------


def test_numpy_parameters_stored_as_json(tmp_path: Path) -> None:
    p = tmp_path / "rec"
    with RecordingWriter(
        p,
        parameters={"a": np.int64(3), "b": np.float32(0.5), "c": np.arange(2), "d": np.bool_(1)},
        machine={"page_size": np.uint64(4096), "nodes": (np.int8(1), 2)},
    ) as w:
        w.update_meta(extra={"n": np.uint32(7), np.int64(5): [np.float64(1.5)]})
    meta = Recording.open(p).meta
    assert meta["parameters"] == {"a": 3, "b": 0.5, "c": [0, 1], "d": True}
    assert meta["machine"] == {"page_size": 4096, "nodes": [1, 2]}
    assert meta["extra"] == {"n": 7, "5": [1.5]}
    assert type(meta["parameters"]["a"]) is int


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"parameters": {"a": {"b": object()}}}, r"parameters\.a\.b: cannot store object"),
        ({"parameters": {"a": {1, 2}}}, r"parameters\.a: cannot store set"),
        ({"machine": {"page_size": 3000}}, r"machine\.page_size.*3000 is not a power of two"),
        ({"source": 5}, r"field `source`: expected a string, got the integer 5"),
        ({"parameters": [1, 2]}, r"`parameters` must be a mapping"),
    ],
)
def test_constructor_error_leaves_nothing(
    tmp_path: Path, kwargs: dict[str, Any], match: str
) -> None:
    p = tmp_path / "rec"
    with pytest.raises((TypeError, RecordingError), match=match):
        RecordingWriter(p, **kwargs)
    assert not os.path.lexists(p)
    assert os.listdir(tmp_path) == []
    # a retry at the same path works
    with RecordingWriter(p, parameters={"a": 1}):
        pass
    assert Recording.open(p).meta["parameters"] == {"a": 1}


def test_constructor_error_after_mkdir_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(path: Path, data: bytes) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(writer, "_atomic_write_bytes", fail)
    (tmp_path / "empty").mkdir()
    for name in ("rec", "empty"):
        # The writer's error names the path it could not write.
        with pytest.raises(RecordingError, match=rf"{name}/meta.json: cannot write: disk full"):
            RecordingWriter(tmp_path / name)
    assert sorted(os.listdir(tmp_path)) == ["empty"]  # the caller's empty directory stays
    assert os.listdir(tmp_path / "empty") == []


def test_overwrite_error_keeps_old_recording(tmp_path: Path) -> None:
    p = tmp_path / "rec"
    with RecordingWriter(p, parameters={"old": 1}):
        pass
    with pytest.raises(TypeError, match=r"parameters\.x: cannot store"):
        RecordingWriter(p, overwrite=True, parameters={"x": object()})
    assert os.listdir(tmp_path) == ["rec"]
    assert Recording.open(p).meta["parameters"] == {"old": 1}


# -- 3. update_meta checks what the reader checks -----------------------------------------------


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"accounting": {"samples": -1}}, r"`accounting\.samples`.*got the integer -1"),
        ({"accounting": {"lost": 1.5}}, r"`accounting\.lost`.*got the number 1\.5"),
        ({"accounting": {"interrupted": 1}}, r"`accounting\.interrupted`"),
        ({"accounting": [1]}, r"field `accounting`: expected an object"),
        ({"source": 5}, r"field `source`: expected a string, got the integer 5"),
        ({"machine": {"page_size": 0}}, r"`machine\.page_size`"),
        ({"tier": {"x": object()}}, r"update_meta: tier\.x: cannot store object"),
    ],
)
def test_update_meta_refuses_what_the_reader_refuses(
    tmp_path: Path, fields: dict[str, Any], match: str
) -> None:
    p = tmp_path / "rec"
    with RecordingWriter(p) as w:
        w.update_meta(accounting={"samples": 3})
        with pytest.raises((RecordingError, TypeError), match=match):
            w.update_meta(**fields)
    # the refused value was not kept: the recording opens with the earlier one
    assert Recording.open(p).meta["accounting"] == {"samples": 3}


def test_reader_names_bad_value(tmp_path: Path) -> None:
    p = tmp_path / "rec"
    with RecordingWriter(p):
        pass
    meta = json.loads((p / "meta.json").read_text())
    meta["accounting"] = {"drains": -7}
    (p / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(RecordingError, match=r"`accounting\.drains`.*got the integer -7"):
        Recording.open(p)


# -- 4. overrides and seeds ---------------------------------------------------------------------


def test_numpy_override_values() -> None:
    assert api.build_overrides(
        {
            "machine__cores": np.int32(2),
            "duration": np.float64(0.01),
            "x": np.bool_(True),
            "y": np.array([1, 2], dtype=np.uint8),
        }
    ) == ["machine.cores=2", "duration=0.01", "x=true", "y=[1, 2]"]


def test_numpy_override_runs_like_python_values() -> None:
    a = tierlab.export("demo", duration="20ms", machine__cores=np.int32(2), seed=np.int64(3))
    b = tierlab.export("demo", duration="20ms", machine__cores=2, seed=3)
    assert a == b


def test_set_as_one_string() -> None:
    assert api.build_overrides(None, "machine.cores=2") == ["machine.cores=2"]
    assert tierlab.export("demo", set='duration="20ms"') == tierlab.export(
        "demo", set=['duration="20ms"']
    )
    with pytest.raises(ValueError, match=r"set: override 'machine' is not of the form key=value"):
        api.build_overrides(None, "machine")
    with pytest.raises(TypeError, match=r"set: override 5 is int"):
        api.build_overrides(None, [5])
    with pytest.raises(TypeError, match=r"set: expected a list"):
        api.build_overrides(None, 5)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [2**63, 2**70, -(2**63) - 1])
def test_override_integer_beyond_toml(value: int) -> None:
    with pytest.raises(ValueError, match=r"override machine__cores \(machine\.cores\): integer"):
        tierlab.export("demo", machine__cores=value)


def test_override_unexpressible_value_names_key() -> None:
    with pytest.raises(TypeError, match=r"override machine__cores \(machine\.cores\): cannot"):
        api.build_overrides({"machine__cores": object()})


@pytest.mark.parametrize("seed", [-1, 2**63, 2**64, np.int64(-1)])
def test_seed_out_of_range(seed: Any) -> None:
    for call in (tierlab.export, tierlab.run):
        with pytest.raises(ValueError, match=r"seed: -?\d+ is outside 0\.\.9223372036854775807"):
            call("demo", seed=seed, duration="20ms")


@pytest.mark.parametrize("seed", [1.0, "3", True])
def test_seed_not_an_integer(seed: Any) -> None:
    with pytest.raises(TypeError, match=r"seed: expected an integer"):
        tierlab.export("demo", seed=seed)


def test_seed_bounds_accepted() -> None:
    assert "seed = 9223372036854775807" in tierlab.export("demo", seed=2**63 - 1)
    assert "seed = 0" in tierlab.export("demo", seed=np.uint64(0))


# -- 5. heatmap_frame ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, 3, [1, 2], "counts"])
def test_heatmap_frame_not_a_dict(value: Any) -> None:
    with pytest.raises(TypeError, match=r"heatmap_frame: expected a heatmap dict.*got"):
        api.heatmap_frame(value)


def _heatmap() -> dict[str, Any]:
    return {
        "t_start_s": [0.0, 0.5],
        "t_end_s": [0.5, 1.0],
        "bin_start": [0, 4096],
        "bin_bytes": [4096, 4096],
        "bin_mapping": ["a", "b"],
        "counts": [[1, 2], [3, 4]],
    }


def test_heatmap_frame_numpy_like_lists() -> None:
    plain = api.heatmap_frame(_heatmap())
    arrays = api.heatmap_frame({k: np.asarray(v) for k, v in _heatmap().items()})
    assert plain.equals(arrays)
    assert plain["accesses"].tolist() == [1, 2, 3, 4]
    assert plain["mapping"].tolist() == ["a", "b", "a", "b"]
    empty = api.heatmap_frame({k: np.asarray([]) for k in _heatmap()})
    assert empty.empty and "accesses" in empty.columns


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("counts", [1, 2, 3, 4], r"`counts` has shape \(4,\)"),
        ("t_end_s", [0.5], r"`t_end_s` has 1 values.*one per 2 windows"),
        ("bin_bytes", None, r"`bin_bytes` has 0 values.*one per 2 bins"),
        ("counts", [[1, 2], [3]], r"`counts`"),
    ],
)
def test_heatmap_frame_inconsistent(key: str, value: Any, match: str) -> None:
    hm = _heatmap()
    hm[key] = value
    with pytest.raises(ValueError, match=r"heatmap_frame: " + match):
        api.heatmap_frame(hm)
