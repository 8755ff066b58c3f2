"""The Python side of the engine's host for ``kind = "python"`` entries (called by the
binding, ``crates/tierlab-py/src/agents.rs``): load the user's class, check its parameters,
build it; invoke a hook with the user-facing context; turn an exception into one message
naming the user's file and line."""

from __future__ import annotations

import hashlib
import linecache
import sys
import traceback
import zlib
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from tierlab.agents.base import (
    Agent,
    Context,
    HotSet,
    PagesReport,
    Placement,
    Regions,
    RegionsReport,
    Replacement,
    Samples,
    Telemetry,
    TieringPolicy,
    as_u64,
)

BASES: dict[str, type] = {
    "telemetry": Telemetry,
    "tiering": TieringPolicy,
    "replacement": Replacement,
    "placement": Placement,
}
NAMES = {
    "telemetry": "telemetry technique",
    "tiering": "tiering policy",
    "replacement": "replacement policy",
    "placement": "placement policy",
}
FEEDS = ("regions", "samples", "hotset")


class HostError(Exception):
    """A problem with an entry: ``field`` (a key of its table), ``message``, and whether it is
    a configuration error (located by the engine at the key's line) or the class's own code
    failing (a runtime error)."""

    def __init__(self, field: str, message: str, config: bool = True) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.config = config


_modules: dict[tuple[str, str], ModuleType] = {}
#: Sources shipped with a sweep point (path -> source): used instead of the file.
_shipped: dict[str, str] = {}


def ship(sources: tuple[tuple[str, str], ...] | list[tuple[str, str]]) -> None:
    """Use these sources for these paths (a sweep's worker: the source the sweep saw)."""
    for path, source in sources:
        _shipped[path] = source
        lines = source.splitlines(keepends=True)
        # Tracebacks quote the user's lines even where the file is not (another machine).
        linecache.cache[path] = (len(source), None, lines, path)


def load_module(path: str) -> ModuleType:
    """The module of file ``path`` (loaded once per content)."""
    p = Path(path)
    if path in _shipped:
        source = _shipped[path].encode()
    else:
        try:
            source = p.read_bytes()
        except OSError as e:
            raise HostError("path", f"cannot read {path}: {e.strerror or e}") from None
    key = (str(p.resolve()), hashlib.sha256(source).hexdigest())
    if key in _modules:
        return _modules[key]
    name = f"tierlab_user_{key[1][:16]}"
    mod = ModuleType(name)
    mod.__file__ = path
    sys.modules[name] = mod
    try:
        exec(compile(source, path, "exec"), mod.__dict__)
    except SyntaxError as e:
        del sys.modules[name]
        raise HostError("path", f"{path}:{e.lineno}: SyntaxError: {e.msg}") from None
    except BaseException as e:
        del sys.modules[name]
        raise HostError("path", error_message(e, path)) from None
    _modules[key] = mod
    return mod


def find_class(kind: str, path: str, cls: str) -> type:
    mod = load_module(path)
    base = BASES[kind]
    c = getattr(mod, cls, None)
    if c is None:
        have = sorted(
            n
            for n, v in vars(mod).items()
            if isinstance(v, type) and issubclass(v, base) and v is not base
        )
        hint = (
            f" (its {NAMES[kind]} classes: {', '.join(have)})"
            if have
            else f" (it defines no {NAMES[kind]})"
        )
        raise HostError("class", f"no class `{cls}` in {path}{hint}")
    if not (isinstance(c, type) and issubclass(c, base)):
        raise HostError(
            "class",
            f"`{cls}` in {path} is not a {NAMES[kind]}: derive it from "
            f"tierlab.agents.{base.__name__}",
        )
    return c


def configure(c: type[Agent], own: dict[str, Any], path: str) -> dict[str, Any]:
    """The class's parameters with the scenario's values, checked."""
    declared = c.params()
    values: dict[str, Any] = {}
    for key, value in own.items():
        p = declared.get(key)
        if p is None:
            names = ", ".join(sorted(declared)) or "none"
            raise HostError(
                key, f"unknown parameter of {c.__name__} ({path}); it declares: {names}"
            )
        try:
            values[key] = p.convert(value)
        except ValueError as e:
            raise HostError(key, f"{c.__name__}.{key}: {e}") from None
    return values


def seed_rng(seed: int, label: str) -> np.random.Generator:
    """The agent's generator: the scenario's seed and its label (different labels, different
    streams; the same scenario, the same numbers)."""
    return np.random.default_rng([seed & 0xFFFFFFFFFFFFFFFF, zlib.crc32(label.encode())])


def build(
    kind: str,
    path: str,
    cls: str,
    own: dict[str, Any],
    shared: dict[str, Any],
    seed: int,
    label: str,
    index: int,
) -> tuple[Agent, dict[str, Any]]:
    """Build the agent of one scenario entry: (the instance, what the engine needs)."""
    c = find_class(kind, path, cls)
    values = configure(c, own, path)
    try:
        obj = c()
    except BaseException as e:
        raise HostError("class", error_message(e, path), config=False) from None
    for k, v in values.items():
        setattr(obj, k, v)
    obj.label = label
    obj.shared = dict(shared)
    obj.seed = seed
    obj.rng = seed_rng(seed, label)
    obj._tl_path = path
    obj._tl_deferred = None
    info: dict[str, Any] = {
        "interval_ps": int(obj.interval) * 1000,
        "accepts": [],
        "publishes": [],
        "batch": 1,
    }
    if isinstance(obj, TieringPolicy):
        info["accepts"] = _feeds(obj.accepts, "accepts", cls)
    if isinstance(obj, Telemetry):
        info["publishes"] = [f for f in _feeds(obj.publishes, "publishes", cls) if f != "hotset"]
    if isinstance(obj, Replacement):
        b = getattr(obj, "batch", 1)
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise HostError("class", f"{cls}.batch = {b!r}: expected an int >= 1")
        info["batch"] = b
    return obj, info


def _feeds(names: Any, attr: str, cls: str) -> list[str]:
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise HostError(
            "class", f"{cls}.{attr} = {names!r}: expected a tuple of {', '.join(FEEDS)}"
        )
    bad = [n for n in names if n not in FEEDS]
    if bad:
        raise HostError(
            "class", f"{cls}.{attr}: unknown feed kind {bad[0]!r} (expected {', '.join(FEEDS)})"
        )
    return list(names)


def _feed(args: tuple[Any, ...]) -> Samples | Regions | HotSet:
    tag = args[0]
    if tag == "samples":
        return Samples(
            np.frombuffer(args[1], "<u8"),
            np.frombuffer(args[2], "<u8"),
            np.frombuffer(args[3], "<u4"),
        )
    if tag == "regions":
        return Regions(
            np.frombuffer(args[1], "<u8"),
            np.frombuffer(args[2], "<u8"),
            np.frombuffer(args[3], "<u4"),
            np.frombuffer(args[4], "<u4"),
            int(args[5]),
            int(args[6]),
            int(args[7]),
        )
    if tag == "hotset-regions":
        return HotSet(
            np.frombuffer(args[1], "<u8"),
            np.frombuffer(args[2], "<u8"),
            None,
            int(args[3]),
            int(args[4]),
        )
    return HotSet(None, None, np.frombuffer(args[1], "<u8"), int(args[3]), int(args[4]))


def invoke(obj: Agent, method: str, native: Any, *args: Any) -> Any:
    """Run hook ``method`` of ``obj`` with the context over ``native``; check what it
    returns."""
    deferred = getattr(obj, "_tl_deferred", None)
    if deferred is not None:
        obj._tl_deferred = None
        raise RuntimeError(deferred)
    ctx = Context(native) if native is not None else None
    if method == "on_feed":
        return obj.on_feed(_feed(args), ctx)  # type: ignore[attr-defined]
    if method == "hot_set":
        return _report(obj, obj.hot_set(args[0], args[1], ctx))  # type: ignore[attr-defined]
    if method == "on_fault_in":
        return obj.on_fault_in(args[0], ctx)  # type: ignore[attr-defined]
    if method == "remove":
        return obj.remove(args[0])  # type: ignore[attr-defined]
    if method == "evict":
        v = obj.evict(ctx)  # type: ignore[attr-defined]
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise TypeError(
                f"{type(obj).__name__}.evict returned {v!r}; expected a page id (an int)"
            )
        if v < 0:
            raise ValueError(f"{type(obj).__name__}.evict returned {v}; page ids are >= 0")
        return int(v)
    if method == "evict_batch":
        a = as_u64(obj.evict_batch(args[0], ctx), f"{type(obj).__name__}.evict_batch")  # type: ignore[attr-defined]
        return a.astype("<u8").tobytes()
    fn = getattr(obj, method)
    r = fn(ctx)
    if method in ("start", "on_interval") and r is not None:
        if isinstance(r, bool) or not isinstance(r, int | np.integer):
            raise TypeError(
                f"{type(obj).__name__}.{method} returned {r!r}; expected None or the next "
                "event's time in ps"
            )
        return int(r)
    return r


def _report(obj: Agent, r: Any) -> tuple[str, bytes, bytes]:
    name = f"{type(obj).__name__}.hot_set"
    if isinstance(r, RegionsReport):
        s, e = as_u64(r.start, f"{name} start"), as_u64(r.end, f"{name} end")
        if s.size != e.size:
            raise ValueError(f"{name}: {s.size} starts but {e.size} ends")
        if (e <= s).any():
            i = int(np.flatnonzero(e <= s)[0])
            raise ValueError(f"{name}: range {i} [{int(s[i]):#x}, {int(e[i]):#x}) is empty")
        if s.size > 1 and (s[1:] < e[:-1]).any():
            raise ValueError(f"{name}: the ranges are not sorted and disjoint")
        return ("regions", s.astype("<u8").tobytes(), e.astype("<u8").tobytes())
    if isinstance(r, PagesReport):
        p = as_u64(r.pages, f"{name} pages")
        if p.size > 1 and (p[1:] <= p[:-1]).any():
            raise ValueError(f"{name}: the pages are not sorted and unique")
        return ("pages", p.astype("<u8").tobytes(), b"")
    raise TypeError(f"{name} returned {type(r).__name__}; expected RegionsReport or PagesReport")


def defer_error(obj: Agent, message: str) -> None:
    """An error in a hook that cannot fail (``hot_set``): raised at the next hook."""
    obj._tl_deferred = message


def _numbers(d: Any, ints: bool) -> list[tuple[str, Any]]:
    if not isinstance(d, dict):
        return []
    out: list[tuple[str, Any]] = []
    for k, v in d.items():
        if isinstance(v, bool | int | np.integer) and ints and v >= 0:
            out.append((str(k), int(v)))
        elif isinstance(v, bool | int | float | np.integer | np.floating):
            out.append((str(k), float(v)))
    return out


def stats(obj: Agent) -> list[tuple[str, Any]]:
    """The agent's stats: non-negative ints stay counts, other numbers are floats."""
    return _numbers(obj.stats(), ints=True)


def window_columns(obj: Agent) -> list[tuple[str, Any]]:
    return _numbers(obj.window_columns(), ints=False)


def error_message(exc: BaseException, path: str) -> str:
    """``FILE:LINE: in FUNCTION: TYPE: MESSAGE`` for the innermost frame of ``exc``'s
    traceback in the user's file ``path`` (their code, not tierlab's), with the line's
    source."""
    target = str(Path(path).resolve())
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if _same(f.filename, target)]
    what = f"{type(exc).__name__}: {exc}"
    if not mine:
        return f"{path}: {what}"
    f = mine[-1]
    line = (f.line or linecache.getline(f.filename, f.lineno or 0)).strip()
    src = f"\n    {line}" if line else ""
    return f"{path}:{f.lineno}: in {f.name}: {what}{src}"


def _same(a: str, target: str) -> bool:
    try:
        return str(Path(a).resolve()) == target
    except OSError:
        return False
