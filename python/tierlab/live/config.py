"""The live recorder's configuration, as the native recorder declares it.

Every knob's default, unit, range and description is written once, in the Rust type
``RecorderConfig`` (``crates/tierlab-live/src/config.rs``); ``_native.recorder_config_fields()``
hands them over. :class:`RecordOptions` takes its defaults from there, and the command-line
options of ``record``, ``overhead`` and ``tier`` (``tierlab.cli.record.add_recorder_options``)
their defaults, ranges, choices and help texts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from tierlab import _native

if TYPE_CHECKING:
    from tierlab._native import RecorderConfigField

#: The recorder's fields by name, in the native table's order.
FIELDS: dict[str, RecorderConfigField] = {f["name"]: f for f in _native.recorder_config_fields()}


def _default(name: str) -> Any:
    return FIELDS[name]["default"]


@dataclass
class RecordOptions:
    """A recorder configuration: the fields of the native ``RecorderConfig`` (see
    :data:`FIELDS` for each one's unit and meaning), with its defaults. The recorder checks
    it when it starts (``tierlab._native.RecorderConfigError`` names a bad field)."""

    backend: str = _default("backend")
    event: str | None = _default("event")
    period: int | None = _default("period")
    buffer_size: int = _default("buffer_size")
    ldlat: int = _default("ldlat")
    l3_miss_only: bool = _default("l3_miss_only")
    min_mapping: int = _default("min_mapping")
    snapshot_interval_ns: int = _default("snapshot_interval_ns")
    flush_interval_ns: int = _default("flush_interval_ns")
    pmus_root: str | None = _default("pmus_root")

    @property
    def flush_interval_s(self) -> float:
        """A chunk of the recording is written at least this often (seconds)."""
        return self.flush_interval_ns / 1e9

    def native_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``_native.LiveRecorder.launch`` / ``attach``."""
        return asdict(self)
