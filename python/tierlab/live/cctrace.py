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
import math
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Where the raw files go (re-exported: cctrace.raw_tmp_dir is this module's API too).
from tierlab.live.tracefiles import RAW_SHM_MIN_FREE as RAW_SHM_MIN_FREE
from tierlab.live.tracefiles import add_meta
from tierlab.live.tracefiles import raw_tmp_dir as raw_tmp_dir

RUNTIME_SOURCE = Path(__file__).parent / "tracer" / "tierlab_trace_rt.c"
#: The allocation interposer (linked beside the runtime: allocation sites) and libc's memory
#: functions (memcpy, memset, str*: the ranges they read and write).
ALLOC_SOURCE = Path(__file__).parent / "tracer" / "tierlab_alloc_rt.c"
LIBC_SOURCE = Path(__file__).parent / "tracer" / "tierlab_libc_rt.c"
#: LLVM libomp's synchronisation entry points (__kmpc_*), for programs built with clang.
KMP_SOURCE = Path(__file__).parent / "tracer" / "tierlab_kmp_rt.c"
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
        _object(KMP_SOURCE, cc, []),
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
    """The threads' trace files with at least one access (a thread whose accesses all fell
    outside the windows leaves an empty one)."""
    return sorted(
        (f for f in trace_dir.glob("t*.bin") if f.stat().st_size > 0),
        key=lambda p: int(p.stem[1:]) if p.stem[1:].isdigit() else 0,
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
        if any(trace_dir.glob("t*.bin")):
            raise CcTraceError(
                f"{trace_dir}: the program made no access inside the recorded windows "
                "(--window, --roi): nothing to record"
            )
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


def run_traced(
    argv: Sequence[str], trace_dir: Path, extra_env: dict[str, str] | None = None
) -> RunResult:
    """Run an instrumented program with its files going to ``trace_dir``."""
    env = {**os.environ, **(extra_env or {}), "TIERLAB_TRACE_DIR": str(trace_dir)}
    for k in ("TIERLAB_TRACE_ROOT", "TIERLAB_TRACE_T0"):  # this run's first process sets them
        env.pop(k, None)
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


#: The programs of ``tierlab bench tracer``: source in ``tracer/``, arguments at scale 1 (sizes
#: that keep the raw files, 9 bytes an access, near 1-2 GB) and how an argument scales.
BENCH_PROGRAMS: dict[str, dict[str, Any]] = {
    "triad": {
        "source": "bench_triad.c",
        "what": "STREAM triad a = b + 3c, 4 Mi doubles per array, 20 sweeps",
        "args": lambda s: [str(max(1024, round(4_194_304 * s))), "20"],
    },
    "gups": {
        "source": "bench_gups.c",
        "what": "random-access updates Table[r] ^= r, 2^25 u64 (256 MiB), 30 M updates",
        # The table shrinks with the size too (lackey's small runs): 2^25 words at scale 1.
        "args": lambda s: [
            str(max(12, min(25, 25 + round(math.log2(s))))),
            str(max(1000, round(30_000_000 * s))),
        ],
    },
    "stencil": {
        "source": "bench_stencil.c",
        "what": "2-D 5-point Jacobi, 2048 x 2048 doubles, 10 sweeps",
        "args": lambda s: [str(max(64, round(2048 * s**0.5))), "10"],
    },
}


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the process and its children) of a run."""
    before = os.times()
    t = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - t
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return wall, cpu


def _lackey_accesses(log: Path) -> int:
    counts = {"L": 0, "S": 0, "M": 0}
    with open(log, "rb") as f:
        for line in f:
            if len(line) > 2 and line[0:1] == b" " and line[2:3] == b" ":
                k = chr(line[1])
                if k in counts:
                    counts[k] += 1
    return counts["L"] + counts["S"] + 2 * counts["M"]


def _dir_bytes(d: Path) -> int:
    return sum(f.stat().st_size for f in d.rglob("*") if f.is_file())


def bench_tracer(
    programs: Sequence[str] = tuple(BENCH_PROGRAMS),
    threads: int = 4,
    scale: float = 1.0,
    lackey_scale: float | None = 0.01,
    progress: Any = None,
) -> dict[str, Any]:
    """Each program natively, instrumented (the program alone, raw files in memory), and the
    whole ``tierlab trace --cc`` command (build, run, recording), and natively and under
    Valgrind lackey at ``lackey_scale`` of the size (None: no lackey). Wall and CPU seconds,
    accesses, bytes per access of the recording, slowdowns against native."""
    import sys

    from tierlab.live.trace import find_valgrind

    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    vg = find_valgrind() if lackey_scale else None
    out: dict[str, Any] = {"threads": threads, "scale": scale, "lackey_scale": lackey_scale}
    rows: dict[str, Any] = {}
    say = progress or (lambda msg: None)
    with tempfile.TemporaryDirectory(prefix="tierlab-bench-") as tmp:
        d = Path(tmp)
        for name in programs:
            spec = BENCH_PROGRAMS[name]
            src = Path(__file__).parent / "tracer" / spec["source"]
            args = spec["args"](scale)
            native = d / f"{name}-native"
            _run(["gcc", "-O2", "-fopenmp", str(src), "-o", str(native)], f"building {name}")
            traced = d / f"{name}-traced"
            build([src], traced, ["-O2", "-fopenmp"])
            row: dict[str, Any] = {"what": spec["what"], "args": args}
            say(f"{name}: native")
            row["native"] = dict(
                zip(("wall", "cpu"), _timed([str(native), *args], env), strict=True)
            )
            say(f"{name}: instrumented")
            raw = Path(tempfile.mkdtemp(prefix="tierlab-bench-raw-", dir=raw_tmp_dir()))
            try:
                wall, cpu = _timed([str(traced), *args], {**env, "TIERLAB_TRACE_DIR": str(raw)})
                accesses = sum(f.stat().st_size // 8 for f in raw_files(raw))
                row["instrumented"] = {"wall": wall, "cpu": cpu, "accesses": accesses}
            finally:
                shutil.rmtree(raw, ignore_errors=True)
            say(f"{name}: tierlab trace --cc")
            rec = d / f"{name}.rec"
            cmd = [
                sys.executable, "-m", "tierlab", "trace", "--cc", str(src),
                "--cflags", "-O2 -fopenmp", "-o", str(rec), "--", *args,
            ]  # fmt: skip
            wall, cpu = _timed(cmd, env)
            size = _dir_bytes(rec)
            meta = json.loads((rec / "meta.json").read_text())
            rec_acc = int(meta["tables"]["accesses"])
            row["command"] = {
                "wall": wall,
                "cpu": cpu,
                "accesses": rec_acc,
                "bytes": size,
                "bytes_per_access": size / max(1, rec_acc),
                "accesses_per_second": rec_acc / wall,
            }
            shutil.rmtree(rec, ignore_errors=True)
            if vg and lackey_scale:
                small = spec["args"](scale * lackey_scale)
                say(f"{name}: native and lackey at {lackey_scale:g} of the size")
                nat = _timed([str(native), *small], env)
                log = d / f"{name}-lackey.log"
                lk = _timed(
                    [vg, "--tool=lackey", "--trace-mem=yes", f"--log-file={log}", str(native),
                     *small],
                    env,
                )  # fmt: skip
                row["lackey"] = {
                    "args": small,
                    "native_wall": nat[0],
                    "native_cpu": nat[1],
                    "wall": lk[0],
                    "cpu": lk[1],
                    "accesses": _lackey_accesses(log),
                }
                log.unlink()
            nw, nc = row["native"]["wall"], row["native"]["cpu"]
            row["slowdown"] = {
                "instrumented_wall": row["instrumented"]["wall"] / nw,
                "command_wall": row["command"]["wall"] / nw,
                "instrumented_cpu": row["instrumented"]["cpu"] / nc if nc >= 0.05 else None,
                "command_cpu": row["command"]["cpu"] / nc if nc >= 0.05 else None,
            }
            if "lackey" in row:
                lk = row["lackey"]
                row["slowdown"]["lackey_wall"] = lk["wall"] / lk["native_wall"]
                # CPU seconds come in clock ticks (10 ms): a shorter native run has no ratio.
                row["slowdown"]["lackey_cpu"] = (
                    lk["cpu"] / lk["native_cpu"] if lk["native_cpu"] >= 0.05 else None
                )
            rows[name] = row
    out["programs"] = rows
    return out


# -- processes ----------------------------------------------------------------------------------
#: Where a child process's recording goes inside its first process's recording.
PROCESS_DIR = "processes"


@dataclass
class TracedProcess:
    """One line of the runtime's ``processes.log``."""

    pid: int
    parent: int
    start_ns: int
    how: str  # start (the first traced process), fork, exec
    dir: str  # its raw files: "." or p<PID>[-N]
    exe: str


def traced_processes(trace_dir: Path) -> list[TracedProcess]:
    """The processes of a raw trace directory (``processes.log``; a directory without it, from
    an older runtime, holds one process). Errors name the file and line."""
    log = trace_dir / "processes.log"
    if not log.is_file():
        return [TracedProcess(0, 0, 0, "start", ".", "")]
    out = []
    with open(log, errors="replace") as f:
        for i, line in enumerate(f, 1):
            w = line.rstrip("\n").split(" ", 6)
            if not w or not w[0]:
                continue
            try:
                if w[0] != "process" or len(w) < 6:
                    raise ValueError
                out.append(
                    TracedProcess(
                        int(w[1]), int(w[2]), int(w[3]), w[4], w[5], w[6] if len(w) > 6 else ""
                    )
                )
            except ValueError:
                raise CcTraceError(
                    f"{log}:{i}: not a process line (process PID PARENT NS HOW DIR EXE)"
                ) from None
            if w[5] != "." and (not w[5].startswith("p") or "/" in w[5] or ".." in w[5]):
                raise CcTraceError(f"{log}:{i}: directory {w[5]!r} is not p<PID>[-N]")
    return out


def import_processes(
    trace_dir: Path, out: Path, *, rename: dict[str, str] | None = None, **kw: Any
) -> dict[str, Any]:
    """:func:`import_dir` for every traced process of ``trace_dir``: the first process's into
    ``out``, each other one with accesses into ``out/processes/p<PID>[-N]`` (a whole
    recording of its own: its address space is its own), and ``meta.json``'s ``processes``
    lists them all (docs/formats.md). The counts are the first process's, with
    ``processes`` (how many) and ``all_accesses`` (of every process)."""
    procs = traced_processes(trace_dir)
    root = next((p for p in procs if p.dir == "."), None)
    counts = import_dir(trace_dir, out, rename=rename, **kw)
    listed: list[dict[str, Any]] = []
    total = int(counts["accesses"])
    for p in procs:
        entry: dict[str, Any] = {
            "pid": p.pid,
            "parent": p.parent,
            "start_ns": p.start_ns,
            "how": p.how,
            "exe": _renamed(p.exe, rename),
            "path": ".",
            "accesses": int(counts["accesses"]),
            "threads": int(counts["threads"]),
        }
        if p is not root:
            sub = trace_dir / p.dir
            if not raw_files(sub):
                entry.update(path=None, accesses=0, threads=0)
            else:
                kw2 = {**kw, "overwrite": False}
                c = import_dir(sub, out / PROCESS_DIR / p.dir, rename=rename, **kw2)
                entry.update(
                    path=f"{PROCESS_DIR}/{p.dir}",
                    accesses=int(c["accesses"]),
                    threads=int(c["threads"]),
                )
                total += int(c["accesses"])
        listed.append(entry)
    if len(listed) > 1 or (listed and listed[0]["pid"]):
        add_meta(out, processes=listed)
    return {**counts, "processes": len(listed), "all_accesses": total}


def _renamed(name: str, rename: dict[str, str] | None) -> str:
    for old, new in (rename or {}).items():
        if name.startswith(old):
            return new + name[len(old) :]
    return name


# -- windows and the raw files' place --------------------------------------------------------------
_TIME_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_COUNT_UNITS = {"": 1, "k": 1_000, "M": 1_000_000, "G": 1_000_000_000}


def parse_window(spec: str) -> tuple[str, int, int, int]:
    """``START:LENGTH[:EVERY]`` as the runtime reads it: ``("accesses" | "ns", start, length,
    every)`` (every 0: one window). ValueError says what is wrong."""
    parts = spec.split(":")
    if len(parts) not in (2, 3):
        raise ValueError("give START:LENGTH or START:LENGTH:EVERY")
    vals: list[int] = []
    kinds: set[str] = set()
    for part in parts:
        m = re.fullmatch(r"([0-9]+(?:\.[0-9]*)?)([A-Za-z]*)", part)
        if m is None:
            raise ValueError(f"{part!r} is not a number with an optional unit")
        x, unit = float(m.group(1)), m.group(2)
        if unit in _TIME_UNITS:
            kinds.add("ns")
            vals.append(round(x * _TIME_UNITS[unit]))
        elif unit in _COUNT_UNITS:
            kinds.add("accesses")
            vals.append(round(x * _COUNT_UNITS[unit]))
        elif unit in ("i", "instr", "instructions"):
            raise ValueError(
                "instructions cannot be counted: the compiler's instrumentation reports "
                "accesses only; give accesses (1M) or a time (100ms)"
            )
        else:
            raise ValueError(f"{part!r}: unit {unit!r} (ns, us, ms, s for times; k, M, G counts)")
    if len(kinds) > 1:
        raise ValueError("mixes accesses and times: give all three in one kind")
    if vals[1] == 0:
        raise ValueError("LENGTH must be more than 0")
    every = vals[2] if len(vals) == 3 else 0
    if len(vals) == 3 and every < vals[1]:
        raise ValueError("EVERY must be at least LENGTH")
    return kinds.pop(), vals[0], vals[1], every
