"""damo records of the region-based techniques that kept one (``record = true``).

For every such technique, ``damon-<technique>.json`` is the JSON ``damo record`` writes
(``damo report access --input_file`` reads it): one record for the context's target with its
intervals and every aggregation's snapshot (regions with ``nr_accesses`` in samples and
percent, age in aggregation intervals and microseconds).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from tierlab.outdir import atomic_output
from tierlab.reporters.base import Reporter

if TYPE_CHECKING:
    from tierlab.api import Result


def file_name(label: str) -> str:
    return "damon-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", label) + ".json"


class DamoRecordReporter(Reporter):
    """``damon-<technique>.json``: a damo record per region-based technique that kept one."""

    name = "damo"
    patterns: ClassVar[tuple[str, ...]] = ("damon-*.json",)

    def write(self, result: Result, out_dir: Path) -> list[Path]:
        written: list[Path] = []
        for label, text in result.damo_records.items():
            path = out_dir / file_name(label)
            with atomic_output(path) as tmp:
                tmp.write_text(text)
            written.append(path)
        return written
