"""Output directories: what may be replaced, and replacing it atomically.

tierlab writes directories (a recording, ``run --out``, ``view -o``). Two rules:

- **Only tierlab's own output is ever replaced.** A directory is recognised by its marker
  file: ``meta.json`` of format ``tierlab-recording`` (a recording), ``run.json`` (``run
  --out``), ``view.json`` (``view -o``). An empty directory may be used too; anything else is
  refused with a message, never deleted.
- Commands that resume from their own earlier output (``telemetry --out``, ``tune --out``)
  write into it in place; they recognise it by ``telemetry.csv`` / ``tune.json``, or, for a
  run that was killed before writing them, by ``points/`` holding only stored point results.
  ``coremap --out`` (``coremap.json``) and ``overhead --keep`` (``overhead.json``) replace
  their own earlier output as a whole.
- **Replacing is atomic.** The new content is written into a hidden sibling directory
  (``.NAME.tierlab-new-XXXX``), then swapped with the old one in one ``renameat2(2)``
  ``RENAME_EXCHANGE`` (two renames where the kernel or file system lacks it) and the old
  content is deleted. No stale file of an earlier run survives beside the new ones, and an
  interrupted write leaves the old directory as it was. The hidden names carry the writer's
  pid: what a writer killed outright (SIGKILL) left is deleted by the next command that
  writes the same path.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class OutputError(ValueError):
    """An output directory that tierlab must not replace (the message says why)."""


#: Kinds of tierlab output directories and the marker that identifies each.
KINDS = {
    "recording": "meta.json",
    "run": "run.json",
    "view": "view.json",
    "telemetry": "telemetry.csv",
    "tune": "tune.json",
    "coremap": "coremap.json",
    "overhead": "overhead.json",
    "pebs-scale": "pebs-scale.json",
    "reproduce": "report.json",
    "points": "points/",
}

#: A stored point result of a resumable sweep (``tierlab.sweep.cache``): ``points/<sha256>.json``.
_POINT_FILE = re.compile(r"\.?[0-9a-f]{64}\.json(\.[A-Za-z0-9_.-]+)?")


def _head(path: Path, n: int = 4096) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return b""


def _stored_points(path: Path) -> bool:
    """Whether ``path`` is a non-empty directory of stored point results and nothing else."""
    try:
        names = [e.name for e in path.iterdir()]
    except OSError:
        return False
    return bool(names) and all(_POINT_FILE.fullmatch(n) for n in names)


#: What ``--executor slurm`` keeps in ``OUT/slurm/`` (``tierlab.sweep.slurm_executor``).
_SLURM_DIRS = frozenset({"tasks", "results", "queued", "arrays", "logs"})


def _slurm_work(path: Path) -> bool:
    """Whether ``path`` is the SLURM executor's work directory and nothing else: its
    subdirectories only, with a job script among the arrays."""
    try:
        if path.is_symlink() or not path.is_dir():
            return False
        names = {e.name for e in path.iterdir()}
        arrays = [e.name for e in (path / "arrays").iterdir()]
    except OSError:
        return False
    return names <= _SLURM_DIRS and any(n.endswith(".sh") for n in arrays)


def kind_of(path: Path) -> str | None:
    """Which tierlab output ``path`` (a directory) is, by its marker file; ``None`` if none."""
    meta = path / "meta.json"
    if meta.is_file():
        try:
            with open(meta, "rb") as f:
                head = f.read(4096)
            if b'"tierlab-recording"' in head:
                return "recording"
        except OSError:
            pass
    run = path / "run.json"
    if run.is_file():
        try:
            with open(run, "rb") as f:
                doc = json.loads(f.read(1 << 20))
            if isinstance(doc, dict) and "tierlab_version" in doc:
                return "run"
        except (OSError, ValueError):
            pass
    view = path / "view.json"
    if view.is_file():
        try:
            with open(view, "rb") as f:
                head = f.read(4096)
            if b'"recording"' in head and b'"points"' in head:
                return "view"
        except OSError:
            pass
    telemetry = path / "telemetry.csv"
    if telemetry.is_file():
        first = _head(telemetry, 1024).split(b"\n", 1)[0]
        if b"technique" in first and b"mean_precision" in first:
            return "telemetry"
    tune = path / "tune.json"
    if tune.is_file():
        head = _head(tune)
        if b'"objective"' in head and b'"trials"' in _head(tune, 1 << 20):
            return "tune"
    coremap = path / "coremap.json"
    if coremap.is_file() and (path / "coremap.csv").is_file():
        return "coremap"
    overhead = path / "overhead.json"
    if overhead.is_file() and b'"tierlab-overhead"' in _head(overhead):
        return "overhead"
    if (path / "pebs-scale.json").is_file() and (path / "pebs-scale.csv").is_file():
        return "pebs-scale"
    report = path / "report.json"
    if report.is_file():
        head = _head(report)
        if b'"profile"' in head and b'"executor"' in head and b'"papers"' in _head(report, 1 << 24):
            return "reproduce"
    points = path / "points"
    if points.is_dir() and not points.is_symlink() and _stored_points(points):
        return "points"
    if _slurm_work(path / "slurm"):
        return "points"  # a SLURM sweep whose submitter stopped before a point was stored
    return None


_WHAT = {
    "recording": "a tierlab recording (meta.json)",
    "run": "a `tierlab run --out` directory (run.json)",
    "view": "a `tierlab view` output (view.json)",
    "telemetry": "a `tierlab telemetry --out` directory (telemetry.csv)",
    "tune": "a `tierlab tune --out` directory (tune.json)",
    "coremap": "a `tierlab coremap --out` directory (coremap.json)",
    "overhead": "a `tierlab overhead --keep` directory (overhead.json)",
    "pebs-scale": "a `tierlab telemetry pebs-scale --out` directory (pebs-scale.json)",
    "reproduce": "a `tierlab reproduce --out` directory (report.json)",
    "points": "an interrupted sweep's stored points (points/, slurm/)",
}


def is_empty_dir(path: Path) -> bool:
    try:
        return path.is_dir() and not any(path.iterdir())
    except OSError:
        return False


def check_replaceable(path: Path, kinds: tuple[str, ...], error: type[Exception]) -> bool:
    """Whether ``path`` exists with content to replace (``False``: absent or an empty
    directory). Raises ``error`` when it exists and is not one of ``kinds``."""
    clean_leftovers(path)
    if not os.path.lexists(path):
        return False
    if path.is_symlink() or not path.is_dir():
        raise error(f"{path}: exists and is not a directory; refusing to replace it")
    if is_empty_dir(path):
        return False
    kind = kind_of(path)
    if kind not in kinds:
        wanted = " or ".join(_WHAT[k] for k in kinds)
        found = f" (it is {_WHAT[kind]})" if kind else ""
        raise error(
            f"{path}: exists and is not {wanted}{found}; refusing to replace it: remove it "
            "yourself or choose another directory"
        )
    return True


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (on this machine's process table)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return pid > 0
    return True


#: What a writer stages beside ``NAME`` (:func:`staging_dir`, :func:`install`): the pid of the
#: writing process, then mkdtemp's random part.
_LEFTOVER = re.compile(r"tierlab-(?:new|old)-(?P<pid>[0-9]{1,10})-[A-Za-z0-9_]+")


def clean_leftovers(dest: Path) -> list[Path]:
    """Delete what killed writers left beside ``dest``: the hidden ``.NAME.tierlab-new-PID-*``
    (a directory being written) and ``.NAME.tierlab-old-PID-*`` (one being replaced)
    directories of processes that no longer run. A writer stopped by SIGINT, SIGTERM or
    SIGHUP deletes its own; one killed outright (SIGKILL, a power cut) cannot, and the next
    command writing the same path does it. Returns what was deleted."""
    dest = Path(os.path.abspath(dest))
    prefix = f".{dest.name}."
    removed: list[Path] = []
    try:
        entries = list(os.scandir(dest.parent))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        m = _LEFTOVER.fullmatch(entry.name[len(prefix) :])
        if m is None or _alive(int(m["pid"])):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        if not os.path.lexists(entry.path):
            removed.append(Path(entry.path))
    return removed


def staging_dir(dest: Path) -> Path:
    """A new hidden directory beside ``dest`` (same file system, so renames are atomic),
    named with this process's pid so that the next writer can tell a leftover (its writer
    gone) from a directory being written (:func:`clean_leftovers`)."""
    parent = dest.parent
    parent.mkdir(parents=True, exist_ok=True)
    clean_leftovers(dest)
    staged = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tierlab-new-{os.getpid()}-", dir=parent))
    umask = os.umask(0)
    os.umask(umask)
    staged.chmod(0o777 & ~umask)  # mkdtemp makes it 0700: give it a new directory's mode
    return staged


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (``renameat2`` with ``RENAME_EXCHANGE``); ``False`` where
    that is not available."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return bool(rc == 0)


def install(staged: Path, dest: Path) -> None:
    """Put the finished directory ``staged`` at ``dest``, replacing what is there atomically
    and deleting the old content."""
    if not os.path.lexists(dest):
        os.rename(staged, dest)
        return
    if is_empty_dir(dest):
        # Filled in place: the directory stays the same one (it may be a shell's working
        # directory, `--out .`); it was empty, so nothing is replaced.
        for child in staged.iterdir():
            os.rename(child, dest / child.name)
        os.rmdir(staged)
        return
    if _exchange(staged, dest):
        shutil.rmtree(staged, ignore_errors=True)  # `staged` now holds the old content
        return
    old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tierlab-old-{os.getpid()}-", dir=dest.parent))
    os.rmdir(old)
    os.rename(dest, old)
    os.rename(staged, dest)
    shutil.rmtree(old, ignore_errors=True)


@contextmanager
def replacing(dest: Path, kinds: tuple[str, ...], error: type[Exception]) -> Iterator[Path]:
    """Write a directory atomically: yields a staging directory to fill; on success it
    replaces ``dest`` (which must be absent, empty, or one of ``kinds``); on failure or
    interruption it is deleted and ``dest`` is untouched."""
    # An absolute path: `.` and `..` have a name and a parent outside themselves, so the
    # staging directory is made beside the destination, never inside it.
    dest = Path(os.path.abspath(dest))
    check_replaceable(dest, kinds, error)
    try:
        staged = staging_dir(dest)
    except OSError as e:
        raise error(f"{dest}: cannot create the output directory: {e.strerror or e}") from None
    try:
        yield staged
        check_replaceable(dest, kinds, error)  # still replaceable (nothing raced in)?
        install(staged, dest)
    except BaseException as e:
        shutil.rmtree(staged, ignore_errors=True)
        if isinstance(e, OSError):
            raise error(write_error(e, dest, staged)) from None
        raise


def write_error(e: OSError, dest: Path, staged: Path | None = None) -> str:
    """The message of an error writing ``dest`` (a full disk, a read-only file system): the
    path it happened at (the final one, not the hidden staging one) and that what was at
    ``dest`` is kept."""
    where = Path(e.filename) if e.filename else dest
    if staged is not None and Path(os.path.abspath(where)).is_relative_to(staged):
        where = dest / Path(os.path.abspath(where)).relative_to(staged)
    reason = (e.strerror or str(e)).lower()
    kept = "left as it was" if os.path.lexists(dest) else "not created"
    return f"{where}: cannot write: {reason}; {dest} is {kept}"


def take_back(path: Path, created: bool) -> None:
    """Remove what a failed command wrote at ``path``: the directory when the command created
    it (``created``), else the entries of the directory, which was empty before (the callers
    write in place only into an absent or empty directory). A symlink is never followed."""
    if path.is_symlink() or not path.is_dir():
        return
    if created:
        shutil.rmtree(path, ignore_errors=True)
        return
    for entry in path.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


@contextmanager
def atomic_output(path: Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success rename it onto ``path`` (a file
    written this way is never seen half-written)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


__all__ = [
    "KINDS",
    "OutputError",
    "atomic_output",
    "check_replaceable",
    "clean_leftovers",
    "install",
    "is_empty_dir",
    "kind_of",
    "replacing",
    "take_back",
    "write_error",
]
