"""tierlab: where a program's memory is hot, and where it should live.

A tiered-memory simulator (many-core, NUMA, HBM/DRAM/CXL/NVM tiers, telemetry techniques and
placement policies) with exact ground truth, plus a recording format shared by simulated and
live telemetry.

    >>> import tierlab
    >>> r = tierlab.run("demo", duration="50ms", machine__cores=4)
    >>> r.stats["machine"]["accesses"]
    >>> r.timeseries.head()
    >>> s = tierlab.sweep("cmcp-replay")                 # a scenario's sweep points
    >>> c = tierlab.telemetry("telescope-footprints", quick=True)
    >>> t = tierlab.tune("tiering-kv", {"tiering.read_hot_threshold": "2:8:2"},
    ...                  "workload.kv.throughput", point="HeMem", set=['duration="3s"'])
    >>> p = tierlab.reproduce("numa", quick=True)

``tierlab.sweep``, ``tierlab.telemetry``, ``tierlab.reproduce`` and ``tierlab.tune`` are
tierlab's modules of those names, made callable: calling one runs
:mod:`tierlab.notebook`'s function of that name.
"""

from __future__ import annotations

import sys
import types
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tierlab.api import Result, export, heatmap_frame, run, scenarios
    from tierlab.recording import Recording, RecordingError, RecordingWriter, to_replay

# The public names are imported on first use (PEP 562), so `import tierlab` and the command
# line start without pandas: the CLI's own Ctrl-C and error handling is in place before the
# heavy imports run.
_LAZY = {
    "Result": "tierlab.api",
    "export": "tierlab.api",
    "heatmap_frame": "tierlab.api",
    "run": "tierlab.api",
    "scenarios": "tierlab.api",
    "Recording": "tierlab.recording",
    "RecordingError": "tierlab.recording",
    "RecordingWriter": "tierlab.recording",
    "to_replay": "tierlab.recording",
}


#: Modules that are also functions of the top-level API (``tierlab.sweep(...)``): module ->
#: the function a call runs.
CALLABLE_MODULES = {
    "tierlab.sweep": "sweep",
    "tierlab.telemetry": "telemetry",
    "tierlab.reproduce": "reproduce",
    "tierlab.tune": "tune",
}


class _CallableModule(types.ModuleType):
    """A module that, called, runs :mod:`tierlab.notebook`'s function of its name."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from tierlab import notebook

        return getattr(notebook, CALLABLE_MODULES[self.__name__])(*args, **kwargs)


class _CallableLoader(Loader):
    """Loads a module of :data:`CALLABLE_MODULES` as its own loader would, into a
    :class:`_CallableModule`."""

    def __init__(self, inner: Loader) -> None:
        self._inner = inner

    def create_module(self, spec: ModuleSpec) -> types.ModuleType:
        return _CallableModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        self._inner.exec_module(module)

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, is_package, ...
        return getattr(self._inner, name)


class _CallableFinder(MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> ModuleSpec | None:
        if fullname not in CALLABLE_MODULES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _CallableLoader(spec.loader)
                return spec
        return None


if not any(isinstance(f, _CallableFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _CallableFinder())


def _read_version() -> str:
    # (Not named `_version`: importing the submodule tierlab._version binds that name.)
    from tierlab._version import version

    return version()


def __getattr__(name: str) -> object:
    if name == "__version__":
        value: object = _read_version()
        globals()[name] = value
        return value
    if f"tierlab.{name}" in CALLABLE_MODULES:
        from importlib import import_module

        return import_module(f"tierlab.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tierlab' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    callables = {m.rsplit(".", 1)[1] for m in CALLABLE_MODULES}
    return sorted(set(globals()) | set(_LAZY) | callables | {"__version__"})


__all__ = [
    "Recording",
    "RecordingError",
    "RecordingWriter",
    "Result",
    "__version__",
    "export",
    "heatmap_frame",
    "reproduce",
    "run",
    "scenarios",
    "sweep",
    "telemetry",
    "to_replay",
    "tune",
]
