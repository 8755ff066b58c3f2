"""The live recorder's configuration is declared once, in the native ``RecorderConfig``
(``crates/tierlab-live/src/config.rs``): these tests fail when Python, the command line, the
type stub or docs/recording.md state a default, a type or a range of their own, and check that
a bad key or value is an error naming it."""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from pathlib import Path

import pytest

from conftest import REPO, assert_user_error, cli
from tierlab import _native
from tierlab.cli.main import build_parser
from tierlab.cli.overhead import OVERHEAD_FIELDS
from tierlab.cli.record import RECORD_FIELDS, RECORDER_OPTIONS
from tierlab.cli.tier import TIER_FIELDS
from tierlab.live.config import FIELDS, RecordOptions

NATIVE = _native.recorder_config_fields()
NAMES = [f["name"] for f in NATIVE]
DEFAULTS = {f["name"]: f["default"] for f in NATIVE}
#: The commands that configure the recorder, and the fields each one sets.
COMMANDS = {"record": RECORD_FIELDS, "overhead": OVERHEAD_FIELDS, "tier": TIER_FIELDS}


def test_the_description_list_is_complete() -> None:
    assert len(set(NAMES)) == len(NAMES) >= 10
    for f in NATIVE:
        assert f["description"] and f["default_text"], f
        assert f["type"] in ("int", "bool", "str", "int | None", "str | None"), f
        if f["type"].startswith("int"):
            assert f["min"] is not None and f["max"] is not None, f
            assert f["min"] <= f["max"] < 2**64, f
            if f["default"] is not None:
                assert f["min"] <= f["default"] <= f["max"], f
        else:
            assert f["min"] is None and f["max"] is None, f
        if f["choices"] is not None:
            assert f["default"] in f["choices"], f
    assert list(FIELDS) == NAMES


def test_record_options_take_the_native_fields_and_defaults() -> None:
    fields = dataclasses.fields(RecordOptions)
    assert [f.name for f in fields] == NAMES
    for f in fields:
        assert f.type == FIELDS[f.name]["type"], f.name  # the annotation, as Python spells it
        assert f.default == DEFAULTS[f.name], f.name
    assert RecordOptions().native_kwargs() == DEFAULTS


def test_defaults_round_trip_through_the_native_type() -> None:
    """Python's defaults, given back to the recorder's type, come out unchanged; so does a
    configuration with every field changed."""
    assert _native.recorder_config() == DEFAULTS
    assert _native.recorder_config(**RecordOptions().native_kwargs()) == DEFAULTS
    changed = RecordOptions(
        backend="page-faults",
        event="page-faults",
        period=7,
        buffer_size=8 << 10,
        ldlat=50,
        l3_miss_only=True,
        min_mapping=4 << 20,
        snapshot_interval_ns=5_000_000,
        flush_interval_ns=100_000_000,
        pmus_root="fake-sysfs",
    ).native_kwargs()
    assert {k: v for k, v in changed.items() if v == DEFAULTS[k]} == {}, "change every field"
    assert _native.recorder_config(**changed) == changed
    assert _native.recorder_config(pmus_root=Path("fake-sysfs"))["pmus_root"] == "fake-sysfs"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"buffer_sise": 1}, "unknown key `buffer_sise` (the keys: backend, event, period,"),
        ({"flush_interval_s": 0.5}, "unknown key `flush_interval_s`"),
        ({"buffer_size": "64KiB"}, '`buffer_size`: invalid type: string "64KiB", expected u64'),
        ({"buffer_size": 1.5}, "`buffer_size`: invalid type: floating point `1.5`, expected u64"),
        ({"ldlat": -5}, "`ldlat`: invalid value: integer `-5`, expected u64"),
        ({"period": 2**64}, "`period`: integer 18446744073709551616 does not fit in 64 bits"),
        ({"l3_miss_only": 1}, "`l3_miss_only`: invalid type: integer `1`, expected a boolean"),
        ({"event": 3}, "`event`: invalid type: integer `3`, expected a string"),
        ({"backend": "pebs"}, "`backend`: unknown backend `pebs` (choose from auto, intel-pebs,"),
        ({"snapshot_interval_ns": [1]}, "`snapshot_interval_ns`: invalid type: Python list"),
        ({"buffer_size": 63}, "`buffer_size` = 63: must be at least 64 bytes"),
        ({"ldlat": 65536}, "`ldlat` = 65536: must be at most 65535 cycles"),
        ({"period": 0}, "`period` = 0: must be from 1 to 9223372036854775807 events"),
    ],
)
def test_bad_keys_and_values_are_errors_naming_them(config: dict, message: str) -> None:
    with pytest.raises(_native.RecorderConfigError) as e:
        _native.recorder_config(**config)
    assert str(e.value).startswith("recorder config: "), str(e.value)
    assert message in str(e.value), str(e.value)
    assert isinstance(e.value, _native.LiveError)  # what the commands report as a user error


@pytest.mark.skipif(not hasattr(_native, "LiveRecorder"), reason="live recording is Linux-only")
def test_the_recorder_checks_its_configuration_before_starting(tmp_path: Path) -> None:
    """A bad key or value stops launch/attach before anything runs."""
    marker = tmp_path / "ran"
    with pytest.raises(_native.RecorderConfigError, match="unknown key `buffr_size`"):
        _native.LiveRecorder.launch(["touch", str(marker)], buffr_size=4096)
    with pytest.raises(_native.RecorderConfigError, match="`buffer_size` = 8: must be at least"):
        _native.LiveRecorder.launch(["touch", str(marker)], backend="page-faults", buffer_size=8)
    with pytest.raises(_native.RecorderConfigError, match="`period`: invalid type"):
        _native.LiveRecorder.attach(os.getpid(), period="100")
    assert not marker.exists()


def _recorder_actions(command: str) -> dict[str, object]:
    """The argparse actions of `command` that set recorder fields, by field name."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    p = sub.choices[command]
    return {a.dest: a for a in p._actions if a.dest in FIELDS}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_command_line_defaults_and_help_are_the_native_ones(command: str) -> None:
    actions = _recorder_actions(command)
    assert sorted(actions) == sorted(COMMANDS[command])
    for name, action in actions.items():
        f = FIELDS[name]
        assert action.option_strings == [RECORDER_OPTIONS[name][0]]
        assert action.default == f["default"], name
        help_text = action.help % {}
        assert help_text.startswith(f["description"]), name
        if f["type"] != "bool":
            assert help_text.endswith(f"(default: {f['default_text']})"), name
        assert action.choices == f["choices"], name
    # Parsed without options, every recorder field is the native default.
    argv = {"record": ["-o", "R", "--", "true"], "overhead": ["--", "true"]}
    args = build_parser().parse_args([command, *argv.get(command, ["-o", "R", "--", "true"])])
    for name in COMMANDS[command]:
        assert getattr(args, name) == DEFAULTS[name], name


def test_record_sets_every_knob_but_the_tests_own() -> None:
    assert set(RECORD_FIELDS) == set(NAMES) - {"pmus_root"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--buffer-size", "63"], "--buffer-size: 63: expected a size of at least 64 bytes"),
        (["--ldlat", "65536"], "--ldlat: 65536: expected a latency in cycles from 0 to 65535"),
        (["--period", "0"], "--period: 0: expected a period from 1 to 9223372036854775807"),
        (["--backend", "pebs"], "argument --backend: invalid choice: 'pebs'"),
        (["--maps-interval", "soon"], "argument --maps-interval: 'soon': expected a duration"),
    ],
)
def test_command_line_ranges_are_the_native_ones(args: list[str], message: str) -> None:
    err = assert_user_error(cli("record", *args, "-o", "R", "--", "true"))
    assert message in err, err


def test_tier_takes_the_recorders_period_range() -> None:
    err = assert_user_error(cli("tier", "--period", "0", "-o", "R", "--", "true"))
    assert "argument --period: 0: expected a period from 1 to" in err, err


def test_the_stub_declares_the_native_fields() -> None:
    """`_native.pyi` names the configuration's keys and types (no defaults): they are the
    native ones, in order."""
    tree = ast.parse((REPO / "python/tierlab/_native.pyi").read_text())
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    body = classes["RecorderConfig"].body
    declared = {
        n.target.id: ast.unparse(n.annotation)
        for n in body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }
    assert list(declared) == NAMES
    assert declared == {f["name"]: f["type"] for f in NATIVE}
    assert all(n.value is None for n in body if isinstance(n, ast.AnnAssign))
    recorder = classes["LiveRecorder"]
    for fn in recorder.body:
        if isinstance(fn, ast.FunctionDef) and fn.name in ("launch", "attach"):
            assert fn.args.kwarg is not None and fn.args.kwarg.arg == "config", fn.name
            assert ast.unparse(fn.args.kwarg.annotation) == "Unpack[RecorderConfig]", fn.name
            assert len(fn.args.args) == 1 and not fn.args.defaults, fn.name


def test_docs_options_table_states_the_native_defaults() -> None:
    """docs/recording.md's table of knobs: every integer knob of `tierlab record` has a row,
    and its default column is the native default."""
    text = (REPO / "docs/recording.md").read_text()
    section = text.split("### Knobs", 1)[1].split("\n### ", 1)[0]
    rows = re.findall(r"^\| `(--[a-z0-9-]+) [A-Z]+` \| ([^|]*) \|", section, re.M)
    by_option = {opt: default.strip() for opt, default in rows}
    field_of = {RECORDER_OPTIONS[n][0]: n for n in RECORD_FIELDS}
    int_options = {RECORDER_OPTIONS[n][0] for n in RECORD_FIELDS if "int" in FIELDS[n]["type"]}
    assert set(by_option) == int_options
    for option, default in by_option.items():
        assert default == FIELDS[field_of[option]]["default_text"], option
    # The backends table marks each backend's default event: the native one.
    event_default = FIELDS["event"]["default_text"]
    assert "intel-pebs mem-loads" in event_default
    assert "| `intel-pebs` | `mem-loads` (default) |" in text
