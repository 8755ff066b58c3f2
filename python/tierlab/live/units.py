"""Sizes and durations on the command line: ``4MiB``, ``64k``, ``20ms``, ``0.5s``."""

from __future__ import annotations

import re

_SIZE = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "gib": 1 << 30,
}
_TIME = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "": 1_000_000_000}


def parse_size(text: str) -> int:
    """``4MiB`` -> 4194304. Binary units (``k`` = 1024); a bare number is bytes."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _SIZE:
        raise ValueError(f"{text!r}: expected a size such as 4096, 64KiB, 4MiB or 1GiB")
    return int(float(m.group(1)) * _SIZE[m.group(2).lower()])


def parse_duration_ns(text: str) -> int:
    """``20ms`` -> 20000000. A bare number is seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", text)
    if not m or m.group(2) not in _TIME:
        raise ValueError(f"{text!r}: expected a duration such as 20ms, 0.5s or 500us")
    return int(float(m.group(1)) * _TIME[m.group(2)])


def format_size(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def human_size(n: float) -> str:
    """Bytes with the binary unit that suits them, as few digits as tell it: ``4 KiB``,
    ``1.5 MiB``, ``514 MiB``, ``2 GiB`` (never ``0.00195 GiB``)."""
    n = float(n)
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v == int(v) or abs(v) >= 100 else f"{v:.3g} {unit}"
    return f"{n:.0f} B"
