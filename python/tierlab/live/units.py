"""Sizes and durations on the command line: ``4MiB``, ``64k``, ``20ms``, ``0.5s``."""

from __future__ import annotations

import re
from fractions import Fraction

#: Size units, as scenarios spell them (docs/formats.md): binary ``K``/``KiB`` .. ``T``/``TiB``
#: (powers of 1024), decimal ``KB`` .. ``TB`` (powers of 1000); case is not significant.
_SIZE = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gib": 1 << 30,
    "t": 1 << 40,
    "tib": 1 << 40,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
}
#: The largest size accepted, as in scenarios: 2^60 bytes (1 EiB).
MAX_SIZE = 1 << 60
_TIME = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "": 1_000_000_000}


def parse_size(text: str) -> int:
    """``4MiB`` -> 4194304, ``1GB`` -> 1000000000: the units of scenarios (``K``/``KiB``
    .. ``T``/``TiB`` powers of 1024, ``KB`` .. ``TB`` powers of 1000); a bare number is
    bytes. At most 2^60 bytes; a fraction of a byte is an error."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    if not m:
        if text.strip().startswith("-"):
            raise ValueError(f"{text!r}: a size is not negative")
        raise ValueError(f"{text!r}: expected a size such as 4096, 64KiB, 4MiB, 1GiB or 1GB")
    unit = m.group(2)
    if unit.lower() not in _SIZE:
        raise ValueError(
            f"{text!r}: unknown size unit {unit!r} (use B, K/KiB, M/MiB, G/GiB, T/TiB: powers "
            "of 1024, or KB, MB, GB, TB: powers of 1000)"
        )
    num = Fraction(m.group(1)) * _SIZE[unit.lower()]
    if num.denominator != 1:
        raise ValueError(f"{text!r}: not a whole number of bytes ({float(num):g})")
    if num > MAX_SIZE:
        raise ValueError(f"{text!r}: more than the largest size accepted, 2^60 bytes (1 EiB)")
    return int(num)


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
