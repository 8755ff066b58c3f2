"""Files both tracers (``tierlab trace --cc`` and lackey's ``tierlab trace``) handle: where
their raw files go while a program runs, and fields added to a finished recording's meta."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

#: Free bytes /dev/shm must have to hold the raw files (about 9 bytes an access: 4 GiB is
#: some 470 M accesses); with less, they go to the temporary directory.
RAW_SHM_MIN_FREE = 4 << 30


def raw_tmp_dir() -> str | None:
    """Where ``tierlab trace --cc`` puts the runtime's raw files while the program runs:
    ``$TIERLAB_RAW_DIR`` if set, else ``/dev/shm`` when it is a writable directory with at
    least :data:`RAW_SHM_MIN_FREE` free (memory: a busy disk slowed a traced program 2.5x),
    else ``None`` (the temporary directory, ``$TMPDIR``)."""
    explicit = os.environ.get("TIERLAB_RAW_DIR")
    if explicit:
        return explicit
    shm = "/dev/shm"
    try:
        st = os.statvfs(shm)
    except OSError:
        return None
    if os.access(shm, os.W_OK) and st.f_bavail * st.f_frsize >= RAW_SHM_MIN_FREE:
        return shm
    return None


def add_meta(rec: Path, **fields: Any) -> None:
    """Add fields to a closed recording's ``meta.json`` (written whole, then renamed)."""
    path = rec / "meta.json"
    meta = json.loads(path.read_text())
    meta.update(fields)
    tmp = path.with_name(".meta.json.tmp")
    tmp.write_text(json.dumps(meta, indent=2) + "\n")
    os.replace(tmp, path)
