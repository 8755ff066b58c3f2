"""Full access traces of programs built from source, by compiler instrumentation.

The sources are compiled with ``-fsanitize=thread`` (gcc, g++, gfortran; clang works too):
the compiler calls ``__tsan_read8(addr)``, ``__tsan_write4(addr)``, ... at every load and
store of the program's own code. Instead of the ThreadSanitizer runtime, the program is
linked with tierlab's small runtime (``tracer/tierlab_trace_rt.c``), which appends each access
to a per-thread buffer and writes it to ``$TIERLAB_TRACE_DIR/t<TID>.bin`` (the raw
per-thread format of ``tierlab import raw``), with ``t<TID>.size`` (bytes per access),
``t<TID>.time`` (a CLOCK_MONOTONIC checkpoint every 4096 accesses of the thread) and
``maps.log`` (the mapping history) and ``sync.bin`` (the program's synchronisation: OpenMP
regions, barriers, critical sections and locks through libgomp's entry points; pthread
barriers, mutexes and condition variables). :func:`import_dir` turns such a directory into
a recording (streaming, in Rust); the synchronisation becomes the ``sync`` table, which
replay obeys (``docs/formats.md``).

What is traced: every load and store the compiler emits for the instrumented sources,
atomics included (a read-modify-write is a load and a store, with gcc and with clang: clang
gets ``-tsan-instrument-read-before-write``), libc's memory and string functions as the
ranges they read and write (``tracer/tierlab_libc_rt.c``, linked in), and the program's
allocations with their call stacks (``tracer/tierlab_alloc_rt.c``: the recording's
``allocations`` and ``alloc_sites`` tables). Not traced: the rest of the code that was not
compiled with the flags (libc's internals, libgomp, other libraries), the kernel.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RUNTIME_SOURCE = Path(__file__).parent / "tracer" / "tierlab_trace_rt.c"
#: The allocation interposer (linked beside the runtime: allocation sites) and libc's memory
#: functions (memcpy, memset, str*: the ranges they read and write).
ALLOC_SOURCE = Path(__file__).parent / "tracer" / "tierlab_alloc_rt.c"
LIBC_SOURCE = Path(__file__).parent / "tracer" / "tierlab_libc_rt.c"
#: Compile flags that make a compiler call the runtime at every load and store.
INSTRUMENT_FLAGS = ["-fsanitize=thread", "--param=tsan-instrument-func-entry-exit=0"]
#: The same for clang: its ThreadSanitizer pass takes options through -mllvm (it ignores
#: gcc's --param spelling) and by default drops the load of a read-modify-write (a load
#: followed by a store to the same address); read-before-write=1 keeps it.
CLANG_INSTRUMENT_FLAGS = [
    "-fsanitize=thread",
    "-mllvm",
    "-tsan-instrument-func-entry-exit=0",
    "-mllvm",
    "-tsan-instrument-read-before-write=1",
]
#: Added for allocation sites: DWARF line info (file:line of a call site), frame pointers
#: (the interposer's call stacks) and no _FORTIFY_SOURCE (its __memcpy_chk & co. would
#: bypass the interposed memory functions). None of them changes the accesses.
SITE_FLAGS = ["-g", "-fno-omit-frame-pointer", "-U_FORTIFY_SOURCE"]
#: What a --cc trace does not see, stated in its metadata and by `tierlab view`.
NOT_COVERED = [
    "libc's and other uninstrumented libraries' own loads and stores (except the memory "
    "functions listed as covered)",
    "the kernel's accesses (system calls, page-table walks)",
    "the runtime's and the allocator's bookkeeping",
]
_FORTRAN = {".f", ".f90", ".f95", ".f03", ".f08", ".for", ".F", ".F90", ".F95", ".F03", ".F08"}
_CXX = {".cc", ".cpp", ".cxx", ".C", ".c++"}
#: Addresses at or above this are the kernel's (``[vsyscall]``): not part of a program's
#: address space as traced.
_USER_LIMIT = 1 << 47


class CcTraceError(RuntimeError):
    """Building or tracing failed (the message says which step and why)."""


def compiler_for(sources: Sequence[str | os.PathLike[str]]) -> str:
    """gfortran for Fortran sources, g++ for C++, else gcc (``$FC``, ``$CXX``, ``$CC``)."""
    exts = {Path(s).suffix for s in sources}
    if exts & _FORTRAN:
        return os.environ.get("FC", "gfortran")
    if exts & _CXX:
        return os.environ.get("CXX", "g++")
    return os.environ.get("CC", "gcc")


def _run(cmd: list[str], what: str) -> None:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise CcTraceError(f"{what}: cannot run {cmd[0]}: {e.strerror}") from e
    if res.returncode != 0:
        tail = (res.stderr or res.stdout).strip().splitlines()[-15:]
        raise CcTraceError(f"{what} failed ({shlex.join(cmd)}):\n" + "\n".join(tail))


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tierlab"


def runtime_object(cc: str = "gcc") -> Path:
    """The runtime compiled with ``cc`` (cached by the source's hash)."""
    return _object(RUNTIME_SOURCE, cc, [])


#: Flags of the interposers: frame pointers (the unwinder walks them), and no loop turned
#: into a call of the memory functions they define.
_INTERPOSER_FLAGS = [
    "-fno-omit-frame-pointer",
    "-fno-tree-loop-distribute-patterns",
    "-fno-builtin",
]


def _object(source: Path, cc: str, flags: list[str]) -> Path:
    src = source.read_bytes()
    digest = hashlib.sha256(src + cc.encode() + " ".join(flags).encode()).hexdigest()[:16]
    obj = cache_dir() / f"{source.stem}-{digest}.o"
    if not obj.is_file():
        obj.parent.mkdir(parents=True, exist_ok=True)
        tmp = obj.with_name(f".{obj.name}.{os.getpid()}.tmp")
        _run(
            [cc, "-O2", "-fPIC", *flags, "-c", str(source), "-o", str(tmp)],
            f"compiling {source.name}",
        )
        os.replace(tmp, obj)
    return obj


def runtime_objects(cc: str = "gcc") -> list[Path]:
    """Every object a traced program links: the runtime, the allocation interposer and the
    memory functions."""
    return [
        runtime_object(cc),
        _object(ALLOC_SOURCE, cc, [*_INTERPOSER_FLAGS, "-DTIERLAB_ALLOC_LINKED"]),
        _object(LIBC_SOURCE, cc, _INTERPOSER_FLAGS),
    ]


def preload_object(cc: str = "gcc") -> Path:
    """The allocation interposer as a shared object for LD_PRELOAD (cached)."""
    src = ALLOC_SOURCE.read_bytes()
    digest = hashlib.sha256(src + cc.encode()).hexdigest()[:16]
    so = cache_dir() / f"tierlab_alloc-{digest}.so"
    if not so.is_file():
        so.parent.mkdir(parents=True, exist_ok=True)
        tmp = so.with_name(f".{so.name}.{os.getpid()}.tmp")
        _run(
            [
                cc,
                "-O2",
                "-fPIC",
                "-shared",
                *_INTERPOSER_FLAGS,
                str(ALLOC_SOURCE),
                "-o",
                str(tmp),
                "-ldl",
                "-lpthread",
            ],
            "building the allocation interposer",
        )
        os.replace(tmp, so)
    return so


def is_clang(cc: str) -> bool:
    """Whether ``cc`` is clang (by its --version), whatever it is called."""
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "clang" in out.lower()


def compiler_version(cc: str) -> str | None:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.splitlines()[0].strip() if out else None


def coverage() -> dict[str, list[str]]:
    """What a --cc trace records and what it does not (the recording's
    ``parameters.coverage``; ``tierlab view`` prints it)."""
    return {
        "covered": [
            "every load and store of the instrumented sources, a read-modify-write (x ^= y, "
            "x++, atomics) as a load and a store, with gcc and with clang",
            "libc's memcpy, mempcpy, memmove, memset, memcmp, bcmp, memchr, strlen, strnlen, "
            "strcpy, stpcpy, strncpy, strcat, strncat, strcmp, strncmp, strchr, strrchr: the "
            "bytes they read and write (also when the compiler turns a loop into one of them)",
            "allocations: malloc, calloc, realloc, reallocarray, free, posix_memalign, "
            "aligned_alloc, memalign, valloc, pvalloc, C++ new/delete, mmap, munmap, mremap",
        ],
        "not_covered": list(NOT_COVERED),
    }


def instrument_flags(cc: str) -> list[str]:
    """The instrumentation flags for ``cc`` (clang's or gcc's spelling) and the site flags."""
    return [*(CLANG_INSTRUMENT_FLAGS if is_clang(cc) else INSTRUMENT_FLAGS), *SITE_FLAGS]


def build(
    sources: Sequence[str | os.PathLike[str]],
    exe: Path,
    cflags: Sequence[str] = (),
    compiler: str | None = None,
) -> list[str]:
    """Compile ``sources`` instrumented and link them with the runtime into ``exe``; the
    commands run, for the record. Libraries among ``cflags`` (``-lm``, ``-l m``) go after the
    objects on the link line, where the linker looks for them."""
    if not sources:
        raise CcTraceError("no source to build")
    for s in sources:
        if not Path(s).is_file():
            raise CcTraceError(f"{s}: no such source file")
    cc = compiler or compiler_for(sources)
    if shutil.which(cc) is None:
        raise CcTraceError(f"{cc}: compiler not found (Debian: apt-get install gcc g++ gfortran)")
    rts = runtime_objects("gcc" if shutil.which("gcc") else cc)
    inst = instrument_flags(cc)
    flags, libs = _split_libs(cflags)
    commands = []
    with tempfile.TemporaryDirectory(prefix="tierlab-cc-") as tmp:
        objs = []
        for i, s in enumerate(sources):
            obj = Path(tmp) / f"{i}-{Path(s).stem}.o"
            cmd = [cc, *flags, *inst, "-c", str(s), "-o", str(obj)]
            _run(cmd, f"compiling {s}")
            commands.append(shlex.join(cmd))
            objs.append(str(obj))
        cmd = [cc, *flags, *objs, *map(str, rts), "-o", str(exe), *libs, "-lpthread", "-ldl"]
        _run(cmd, "linking")
        commands.append(shlex.join(cmd))
    return commands


def _split_libs(cflags: Sequence[str]) -> tuple[list[str], list[str]]:
    """``cflags`` without the library flags (``-lNAME``, ``-l NAME``), and those flags."""
    flags: list[str] = []
    libs: list[str] = []
    it = iter(cflags)
    for f in it:
        if f == "-l":
            libs += [f, next(it, "")]
        elif f.startswith("-l"):
            libs.append(f)
        else:
            flags.append(f)
    return flags, libs


@dataclass
class Mapping:
    lo: int
    hi: int
    name: str
    perms: str = ""


#: The name given to a thread's stack (an anonymous mapping right above its guard page).
THREAD_STACK = "[thread stack]"


def name_thread_stacks(snap: list[Mapping]) -> None:
    """Name the threads' stacks in a snapshot sorted by address: glibc maps a thread's stack
    and its guard in one anonymous mapping and makes the guard (its lowest pages)
    inaccessible, so /proc/self/maps shows an anonymous ``---p`` range directly below an
    anonymous writable one. (The main thread's stack is ``[stack]`` already.) Other
    anonymous mappings with a guard below them (rare: some allocators' arenas) are named
    so too."""
    for below, m in itertools.pairwise(snap):
        if (
            m.name == "[anon]"
            and below.name == "[anon]"
            and below.hi == m.lo
            and below.perms.startswith("---")
            and m.perms.startswith("rw")
        ):
            m.name = THREAD_STACK


def _subtract(ranges: list[Mapping], lo: int, hi: int) -> list[Mapping]:
    out = []
    for r in ranges:
        if r.hi <= lo or r.lo >= hi:
            out.append(r)
            continue
        if r.lo < lo:
            out.append(Mapping(r.lo, lo, r.name))
        if r.hi > hi:
            out.append(Mapping(hi, r.hi, r.name))
    return out


def _uncovered(lo: int, hi: int, cover: list[Mapping]) -> list[tuple[int, int]]:
    """Parts of [lo, hi) covered by no range of ``cover`` (sorted by lo)."""
    out = []
    s = lo
    for c in cover:
        if c.hi <= s:
            continue
        if c.lo >= hi:
            break
        if c.lo > s:
            out.append((s, c.lo))
        s = max(s, c.hi)
        if s >= hi:
            break
    if s < hi:
        out.append((s, hi))
    return out


def parse_maps_line(line: str) -> Mapping | None:
    parts = line.split(None, 5)
    if len(parts) < 5 or "-" not in parts[0]:
        return None
    lo_s, hi_s = parts[0].split("-", 1)
    lo, hi = int(lo_s, 16), int(hi_s, 16)
    if lo >= _USER_LIMIT:
        return None
    name = parts[5].strip() if len(parts) > 5 else ""
    return Mapping(lo, hi, name or "[anon]", parts[1])


def mapping_events(log: Path) -> list[tuple[int, str, int, int, str]]:
    """The mapping history in ``maps.log`` as recording rows ``(time_ns, event, start,
    length, name)``. Exact events (the program's own mmap/munmap/mremap) keep their times;
    ranges that appear between two snapshots (libc's internal mmaps, heap growth, thread
    stacks) are dated at the earlier snapshot (early: an access is never given to a mapping
    that did not exist), ranges that disappear at the later one."""
    events: list[tuple[int, str, int, int, str]] = []
    live: list[Mapping] = []
    prev_t = 0
    snap: list[Mapping] | None = None
    snap_t = 0
    with open(log, errors="replace") as f:
        for line in f:
            if snap is not None:
                if line.startswith("end"):
                    snap.sort(key=lambda m: m.lo)
                    name_thread_stacks(snap)
                    cover = sorted(live, key=lambda m: m.lo)
                    for m in snap:
                        for lo, hi in _uncovered(m.lo, m.hi, cover):
                            events.append((prev_t, "map", lo, hi - lo, m.name))
                    for m in cover:
                        for lo, hi in _uncovered(m.lo, m.hi, snap):
                            events.append((snap_t, "unmap", lo, hi - lo, m.name))
                    live = snap
                    prev_t = snap_t
                    snap = None
                else:
                    parsed = parse_maps_line(line)
                    if parsed is not None:
                        snap.append(parsed)
                continue
            w = line.split()
            if not w:
                continue
            if w[0] == "snapshot":
                snap, snap_t = [], int(w[1])
            elif w[0] == "map" and len(w) >= 4:
                t, lo, n = int(w[1]), int(w[2], 16), int(w[3], 16)
                if lo < _USER_LIMIT and n:
                    name = w[4] if len(w) > 4 else "[anon]"
                    events.append((t, "map", lo, n, name))
                    live = [*_subtract(live, lo, lo + n), Mapping(lo, lo + n, name)]
            elif w[0] == "unmap" and len(w) >= 4:
                t, lo, n = int(w[1]), int(w[2], 16), int(w[3], 16)
                if lo < _USER_LIMIT and n:
                    events.append((t, "unmap", lo, n, ""))
                    live = _subtract(live, lo, lo + n)
    events.sort(key=lambda e: e[0])
    return events


def raw_files(trace_dir: Path) -> list[Path]:
    return sorted(
        trace_dir.glob("t*.bin"), key=lambda p: int(p.stem[1:]) if p.stem[1:].isdigit() else 0
    )


def import_dir(
    trace_dir: Path,
    out: Path,
    *,
    overwrite: bool = False,
    source: str = "tierlab-trace (compiler instrumentation)",
    parameters: dict[str, Any] | None = None,
    accounting: dict[str, Any] | None = None,
    rename: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A directory of the runtime's files into a recording at ``out``. ``rename`` replaces
    path prefixes in mapping names (the temporary build directory of ``--cc``)."""
    from tierlab import _native

    files = raw_files(trace_dir)
    if not files:
        raise CcTraceError(
            f"{trace_dir}: no t<TID>.bin files (was the program built with the runtime?)"
        )
    log = trace_dir / "maps.log"
    maps = mapping_events(log) if log.is_file() else []
    for old, new in (rename or {}).items():
        maps = [
            (t, e, a, n, new + name[len(old) :] if name.startswith(old) else name)
            for t, e, a, n, name in maps
        ]
    meta = {"source": source, "parameters": parameters or {}, "accounting": accounting or {}}
    sync = trace_dir / "sync.bin"
    counts = dict(
        _native.import_trace(
            "raw",
            [str(f) for f in files],
            str(out),
            overwrite=overwrite,
            meta=json.dumps(meta),
            mappings=maps,
            sync=str(sync) if sync.is_file() else None,
        )
    )
    if (trace_dir / "allocs.bin").is_file():
        from tierlab.live import allocs

        try:
            counts.update(allocs.import_allocs(trace_dir, out, trace_dir=trace_dir, rename=rename))
        except allocs.AllocError as e:
            raise CcTraceError(str(e)) from e
    return counts


@dataclass
class RunResult:
    exit_code: int | None
    wall_seconds: float
    interrupted: bool = False
    messages: list[str] = field(default_factory=list)


def run_traced(argv: Sequence[str], trace_dir: Path) -> RunResult:
    """Run an instrumented program with its files going to ``trace_dir``."""
    env = {**os.environ, "TIERLAB_TRACE_DIR": str(trace_dir)}
    t = time.perf_counter()
    try:
        proc = subprocess.Popen(list(argv), env=env)
    except OSError as e:
        raise CcTraceError(f"{argv[0]}: cannot start: {e.strerror}") from e
    try:
        code: int | None = proc.wait()
        interrupted = False
    except KeyboardInterrupt:
        from tierlab import signals

        signals.forward(proc)
        proc.wait()
        code, interrupted = None, True
    return RunResult(code, time.perf_counter() - t, interrupted)


def bench_tracer(n: int, iterations: int, threads: int) -> dict[str, Any]:
    """The triad natively, under the tracer and under lackey (same binary source, same
    arguments, same OMP_NUM_THREADS): wall time and accesses of each."""
    from tierlab.live.trace import find_valgrind

    src = Path(__file__).parent / "tracer" / "bench_triad.c"
    argv_tail = [str(n), str(iterations)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    out: dict[str, Any] = {"n": n, "iterations": iterations, "threads": threads}
    with tempfile.TemporaryDirectory(prefix="tierlab-bench-") as tmp:
        d = Path(tmp)
        native = d / "triad"
        _run(["gcc", "-O2", "-fopenmp", str(src), "-o", str(native)], "building the triad")
        traced = d / "triad-traced"
        build([src], traced, ["-O2", "-fopenmp"])

        def timed(argv: list[str], extra_env: dict[str, str]) -> float:
            t = time.perf_counter()
            subprocess.run(argv, env={**env, **extra_env}, check=True, capture_output=True)
            return time.perf_counter() - t

        out["native"] = {"wall_seconds": timed([str(native), *argv_tail], {})}
        raw = d / "raw"
        raw.mkdir()
        wall = timed([str(traced), *argv_tail], {"TIERLAB_TRACE_DIR": str(raw)})
        accesses = sum(f.stat().st_size // 8 for f in raw_files(raw))
        out["tierlab"] = {"wall_seconds": wall, "accesses": accesses}
        vg = find_valgrind()
        log = d / "lackey.log"
        wall = timed(
            [vg, "--tool=lackey", "--trace-mem=yes", f"--log-file={log}", str(native), *argv_tail],
            {},
        )
        counts = {"L": 0, "S": 0, "M": 0}
        with open(log, "rb") as f:
            for line in f:
                if len(line) > 2 and line[0:1] == b" " and line[2:3] == b" ":
                    k = chr(line[1])
                    if k in counts:
                        counts[k] += 1
        out["lackey"] = {
            "wall_seconds": wall,
            "accesses": counts["L"] + counts["S"] + 2 * counts["M"],
        }
    t, lk = out["tierlab"], out["lackey"]
    out["speedup_wall"] = lk["wall_seconds"] / t["wall_seconds"]
    out["speedup_rate"] = (t["accesses"] / t["wall_seconds"]) / (
        lk["accesses"] / lk["wall_seconds"]
    )
    return out
