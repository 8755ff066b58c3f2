"""The recording format's declaration as Python sees it: tables, columns, types, codes and
``meta.json`` fields (declared once, in ``crates/tierlab-core/src/schema.rs``, and read here
through the binding), and the error every reader and writer raises."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from tierlab.api import native

if TYPE_CHECKING:
    import pyarrow as pa

# The format is declared once, in tierlab-core (`crates/tierlab-core/src/schema.rs`): its
# tables, columns, types, codes and meta.json fields come from there through the binding.
_SPEC: dict[str, Any] = native().recording_schema()

FORMAT_NAME: str = _SPEC["format"]
FORMAT_VERSION: int = _SPEC["version"]
META_FILE: str = _SPEC["meta_file"]


@cache
def arrow_schemas() -> dict[str, pa.Schema]:
    """The pyarrow schema of every table (made once: it needs pyarrow)."""
    import pyarrow as pa

    return {
        t["name"]: pa.schema([(c["name"], pa.type_for_alias(c["type"])) for c in t["columns"]])
        for t in _SPEC["tables"]
    }


if TYPE_CHECKING:
    #: Column schemas of every table (the core tables, then the optional ones), in column
    #: order (made on first use, by the module's ``__getattr__``: it needs pyarrow).
    SCHEMAS: dict[str, pa.Schema]


def __getattr__(name: str) -> Any:
    if name == "SCHEMAS":
        return arrow_schemas()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The core tables: every recording has them (possibly empty).
TABLES: tuple[str, ...] = tuple(t["name"] for t in _SPEC["tables"] if not t["optional"])
#: Optional tables: present only in recordings whose source produces them (``regions``:
#: DAMON-style region snapshots from ``tierlab import damo``).
OPTIONAL_TABLES: tuple[str, ...] = tuple(t["name"] for t in _SPEC["tables"] if t["optional"])
ALL_TABLES: tuple[str, ...] = TABLES + OPTIONAL_TABLES

#: Coded columns: (table, column) -> {value: name}; any other value is refused on append.
CODES: dict[tuple[str, str], dict[int | str, str]] = {
    (ct["table"], ct["column"]): {c["value"]: c["name"] for c in ct["codes"]}
    for ct in _SPEC["codes"]
}
_KINDS = {name: value for value, name in CODES[("accesses", "kind")].items()}
#: Codes of the ``kind`` column of ``accesses``.
KIND_LOAD: int = int(_KINDS["load"])
KIND_STORE: int = int(_KINDS["store"])
#: Values of the ``event`` column of ``mappings``.
MAPPING_EVENTS: tuple[str, ...] = tuple(str(v) for v in CODES[("mappings", "event")])
#: ``meta.json`` fields the writer maintains (``update_meta`` cannot set them).
META_MANAGED: frozenset[str] = frozenset(f["name"] for f in _SPEC["meta_fields"] if f["managed"])


class RecordingError(ValueError):
    """A recording is missing, malformed, or of an unsupported version."""


def part_name(index: int) -> str:
    return f"part-{index:05d}.parquet"
