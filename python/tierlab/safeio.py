"""Bounded readers for files tierlab did not write itself (recordings, plans, imports).

Every input is hostile until checked:

- only **regular files** are read: a FIFO would block forever, ``/dev/zero`` never ends,
  a directory is not a file. The check is made on the open descriptor (``fstat``), opened
  with ``O_NONBLOCK`` so that opening a FIFO cannot hang either;
- **sizes are bounded**: a file larger than its kind may be is refused before it is read, and
  a compressed input may not expand beyond a limit (a zlib bomb is refused, not decompressed);
- **JSON nesting is bounded** (:data:`MAX_JSON_DEPTH` levels): Python's parser raises
  ``RecursionError`` on deep nesting, and deep structures break the code that walks them;
- error messages name the file and never echo the contents of a file that is not what it
  claims to be.

Every function takes the exception class to raise (``RecordingError``, ``PlaceError``,
``ImportError_``, ...), so each reader keeps its own error type; messages start with the path.
"""

from __future__ import annotations

import json
import os
import stat
import zlib
from pathlib import Path
from typing import Any

#: Deepest JSON nesting accepted (tierlab's own files nest 4 levels at most).
MAX_JSON_DEPTH = 64
#: Largest ``meta.json`` accepted (a live recording's is a few KiB).
MAX_META_BYTES = 64 << 20

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def check_regular(path: Path, error: type[Exception], what: str = "file") -> os.stat_result:
    """``stat`` ``path`` (following symlinks) and refuse anything but a regular file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except OSError as e:
        raise error(f"{path}: cannot read: {(e.strerror or str(e)).lower()}") from None
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{path}: is {file_kind(st.st_mode)}, not a {what}; refusing to read it")
    return st


def open_regular(path: Path, error: type[Exception], what: str = "file") -> tuple[int, int]:
    """Open ``path`` for reading without blocking on FIFOs; return ``(fd, size)`` after
    checking, on the descriptor itself, that it is a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory, not a {what}") from None
    except OSError as e:
        raise error(f"{path}: cannot read: {(e.strerror or str(e)).lower()}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{path}: is {file_kind(st.st_mode)}, not a {what}; refusing to read it")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def read_bytes(path: Path, limit: int, error: type[Exception], what: str = "file") -> bytes:
    """The whole of a regular file of at most ``limit`` bytes."""
    fd, size = open_regular(path, error, what)
    try:
        if size > limit:
            raise error(
                f"{path}: {size} bytes, more than a {what} may have ({limit} bytes); "
                "refusing to read it"
            )
        chunks = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 24, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise error(f"{path}: grew past {limit} bytes while read; refusing it")
    except OSError as e:
        raise error(f"{path}: cannot read: {(e.strerror or str(e)).lower()}") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def open_text(path: Path, error: type[Exception], what: str = "file") -> Any:
    """A text stream (UTF-8, undecodable bytes replaced) over a regular file."""
    fd, _ = open_regular(path, error, what)
    return os.fdopen(fd, "r", encoding="utf-8", errors="replace")


def decompress_zlib(
    data: bytes, path: Path, error: type[Exception], *, limit: int | None = None
) -> bytes:
    """zlib-decompress ``data`` without letting it expand past ``limit`` bytes (default:
    256 MiB or 200 times the compressed size, whichever is larger, at most 2 GiB)."""
    if limit is None:
        limit = min(2 << 30, max(256 << 20, 200 * len(data)))
    d = zlib.decompressobj()
    out = []
    total = 0
    pending = data
    try:
        while pending:
            chunk = d.decompress(pending, 1 << 22)
            out.append(chunk)
            total += len(chunk)
            if total > limit:
                raise error(
                    f"{path}: decompresses to more than {limit} bytes ({len(data)} compressed); "
                    "refusing it (a zlib bomb?)"
                )
            pending = d.unconsumed_tail
            if d.eof:
                break
        if not d.eof:
            raise error(f"{path}: zlib stream is cut short")
    except zlib.error as e:
        raise error(f"{path}: not a valid zlib stream ({e})") from None
    return b"".join(out)


def json_depth(doc: Any) -> int:
    """Nesting depth of a parsed JSON document (scalars are depth 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            items: Any = value.values()
        elif isinstance(value, list):
            items = value
        else:
            continue
        deepest = max(deepest, depth)
        for v in items:
            if isinstance(v, dict | list):
                stack.append((v, depth + 1))
    return deepest


def loads_json(
    data: bytes | str,
    path: Path | str,
    error: type[Exception],
    *,
    max_depth: int = MAX_JSON_DEPTH,
) -> Any:
    """Parse JSON; errors name the file, line and column, never the text."""
    try:
        doc = json.loads(data)
    except RecursionError:
        raise error(f"{path}: JSON nested more than {max_depth} levels deep; refusing it") from None
    except json.JSONDecodeError as e:
        raise error(f"{path}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from None
    except UnicodeDecodeError as e:
        raise error(f"{path}: not valid JSON: not UTF-8 text (byte {e.start})") from None
    except ValueError as e:  # e.g. integers with more digits than Python converts
        raise error(f"{path}: not valid JSON: {str(e)[:80]}") from None
    if json_depth(doc) > max_depth:
        raise error(f"{path}: JSON nested more than {max_depth} levels deep; refusing it")
    return doc


def read_json(
    path: Path,
    error: type[Exception],
    *,
    limit: int = MAX_META_BYTES,
    what: str = "JSON file",
    max_depth: int = MAX_JSON_DEPTH,
) -> Any:
    """Read and parse a JSON file with every bound above."""
    return loads_json(read_bytes(path, limit, error, what), path, error, max_depth=max_depth)


__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_META_BYTES",
    "check_regular",
    "decompress_zlib",
    "file_kind",
    "json_depth",
    "loads_json",
    "open_regular",
    "open_text",
    "read_bytes",
    "read_json",
]
