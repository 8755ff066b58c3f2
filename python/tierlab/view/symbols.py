"""Resolve sample IPs to symbols, as ``perf report --sort=sym`` does: a pure-Python reader of
ELF64 little-endian files (the ELF specification: file header, program headers, section
headers, ``.symtab`` / ``.dynsym``, ``PT_NOTE`` build-id notes) and a resolver that puts an IP
into the file mapped at its address at its time (the recording's mapping history).

How an IP becomes a symbol:

1. The mapping live at the IP's address at the sample's time (``history.assign`` on the
   ``mappings`` table). No mapping: ``[unknown]``. A mapping that is not a file (``[anon]``,
   ``[heap]``, ``[stack]``, ``[vdso]``, JIT code): ``[unknown]`` in that mapping.
2. The file's load bias. An executable (``ET_EXEC``) is mapped at its link addresses (bias 0).
   A PIE or shared object (``ET_DYN``) is mapped anywhere: the recording keeps one row per
   mapped file (its segments merged, see ``history.py``), whose start is the mapping of file
   offset 0 (the first ``PT_LOAD``, which holds the ELF header), so
   ``bias = start - (p_vaddr - p_offset)`` of that segment and ``vaddr = ip - bias``.
3. The symbol whose ``[st_value, st_value + st_size)`` holds ``vaddr``, among the defined
   ``STT_FUNC`` / ``STT_GNU_IFUNC`` / ``STT_OBJECT`` symbols of ``.symtab``, else of a
   separate debug file (``/usr/lib/debug/.build-id/xx/yyyy.debug``) found by build-id, else
   of ``.dynsym`` (a stripped file keeps its exported symbols there).
4. No symbol holds it: ``FILE+0xOFFSET`` (the file's basename and the offset in the file).
   A file that is gone, unreadable, not ELF64 little-endian, or changed since the recording
   (its build-id, else its size and modification time, differ from what the recorder noted in
   ``accounting.mapped_files``): ``[unknown]``, with one note per file in ``notes``.

Nothing here raises on a bad or missing file: every problem becomes a note.
"""

from __future__ import annotations

import mmap
import os
import shutil
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tierlab.view import history

if TYPE_CHECKING:
    import pandas as pd

UNKNOWN = "[unknown]"
KERNEL = "[kernel]"
#: User-space addresses on x86-64 / AArch64 stay below this; IPs above are kernel code.
KERNEL_START = 0xFFFF_8000_0000_0000
PAGE = 4096

# ELF constants (System V gABI).
ET_EXEC = 2
ET_DYN = 3
PT_LOAD = 1
PT_NOTE = 4
SHT_SYMTAB = 2
SHT_DYNSYM = 11
SHN_UNDEF = 0
STT_NOTYPE = 0
STT_OBJECT = 1
STT_FUNC = 2
STT_GNU_IFUNC = 10
STB_GLOBAL = 1
NT_GNU_BUILD_ID = 3
PF_X = 1
SHF_EXECINSTR = 0x4

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_PHDR = struct.Struct("<IIQQQQQQ")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = np.dtype(
    [
        ("name", "<u4"),
        ("info", "u1"),
        ("other", "u1"),
        ("shndx", "<u2"),
        ("value", "<u8"),
        ("size", "<u8"),
    ]
)
#: Where distributions install separate debug files, by build-id.
DEBUG_DIRS = ("/usr/lib/debug",)


class ElfError(ValueError):
    """A file that is not a readable ELF64 little-endian object (message names the file)."""


@dataclass
class Segment:
    offset: int
    vaddr: int
    filesz: int
    memsz: int
    flags: int


@dataclass
class ElfFile:
    """What the resolver needs of one ELF file."""

    path: str
    type: int
    segments: list[Segment]
    build_id: str | None
    #: Symbols sorted by address: start, end (exclusive; start + size, or the next symbol's
    #: start for size 0), name.
    starts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    ends: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    names: list[str] = field(default_factory=list)
    #: Where the symbols came from: ``symtab``, ``debug`` (a separate debug file),
    #: ``dynsym`` or ``none`` (no symbols: offsets only).
    symbols_from: str = "none"

    def lookup(self, vaddr: np.ndarray) -> np.ndarray:
        """Index into ``names`` of the symbol holding each address, or -1."""
        v = np.asarray(vaddr, dtype=np.uint64)
        if not self.names:
            return np.full(v.size, -1, dtype=np.int64)
        i = np.searchsorted(self.starts, v, side="right").astype(np.int64) - 1
        ok = i >= 0
        ok[ok] &= v[ok] < self.ends[i[ok]]
        return np.where(ok, i, -1)

    def bias(
        self,
        start: int,
        length: int | None = None,
        ips: np.ndarray | None = None,
        weights: np.ndarray | None = None,
    ) -> int:
        """Load bias of this file mapped at ``[start, start + length)``.

        The recording has no file offsets: its row of a file normally starts at file offset 0
        (all segments, merged). A row may cover only some segments (a ``perf script`` import
        without data mappings keeps only the executable one): the candidates are the
        segments whose page-aligned span up to a later segment's end equals ``length``, and
        among several the one that puts most of ``ips`` (the samples' IPs in the row, each
        counted ``weights`` times) in an executable segment wins; the first segment when
        nothing decides."""
        if self.type != ET_DYN or not self.segments:
            return 0
        segs = sorted(self.segments, key=lambda s: s.offset)
        mask = PAGE - 1
        cands = [segs[0]]
        if length is not None:
            fit = [
                a
                for k, a in enumerate(segs)
                if length
                in {
                    -(-(b.vaddr + size) // PAGE) * PAGE - (a.vaddr & ~mask)
                    for b in segs[k:]
                    for size in (b.filesz, b.memsz)
                }
            ]
            cands = fit or cands
        best, score = cands[0], -1
        for a in cands:
            bias = start - (a.vaddr & ~mask)  # a segment is mapped from its page start
            if ips is None or len(cands) == 1:
                return bias
            v = ips.astype(np.uint64) - np.uint64(bias % (1 << 64))
            w = np.ones(v.size, dtype=np.int64) if weights is None else weights
            n = sum(
                int(w[(v >= np.uint64(x.vaddr)) & (v < np.uint64(x.vaddr + x.memsz))].sum())
                for x in segs
                if x.flags & PF_X
            )
            if n > score:
                best, score = a, n
        return start - (best.vaddr & ~mask)

    def file_offset(self, vaddr: int) -> int | None:
        """The file offset of a link-time address (None outside every ``PT_LOAD``)."""
        for s in self.segments:
            if s.vaddr <= vaddr < s.vaddr + max(s.memsz, s.filesz):
                return vaddr - s.vaddr + s.offset
        return None


def _cstr(buf: Any, off: int, limit: int) -> str:
    end = buf.find(b"\0", off, limit)
    if end < 0:
        end = limit
    return bytes(buf[off:end]).decode("utf-8", "replace")


def _notes(buf: Any, off: int, size: int, align: int) -> str | None:
    """The GNU build-id of a note area, as hex, or None."""
    pad = 8 if align == 8 else 4
    end = off + size
    while off + 12 <= end:
        namesz, descsz, ntype = struct.unpack_from("<III", buf, off)
        name_off = off + 12
        desc_off = name_off + -(-namesz // pad) * pad
        nxt = desc_off + -(-descsz // pad) * pad
        if nxt > end or desc_off > end:
            return None
        if ntype == NT_GNU_BUILD_ID and bytes(buf[name_off : name_off + namesz]) == b"GNU\0":
            return bytes(buf[desc_off : desc_off + descsz]).hex()
        off = nxt
    return None


def _symbols(
    buf: Any,
    size: int,
    sh: tuple[int, ...],
    strtab: tuple[int, ...] | None,
    code_sections: frozenset[int] = frozenset(),
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Defined function/object symbols of one symbol table section, sorted by address, and
    labels (``STT_NOTYPE``: assembly entry points such as ``_start``) in ``code_sections``."""
    off, length = sh[4], sh[5]
    if off + length > size or strtab is None:
        raise ElfError("symbol table outside the file")
    n = length // _SYM.itemsize
    # A copy: no array may keep pointing into the file's mmap when it is closed.
    syms = np.frombuffer(bytes(buf[off : off + n * _SYM.itemsize]), dtype=_SYM)
    kind = syms["info"] & 0xF
    label = (kind == STT_NOTYPE) & np.isin(syms["shndx"], list(code_sections))
    keep = (
        ((kind == STT_FUNC) | (kind == STT_GNU_IFUNC) | (kind == STT_OBJECT) | label)
        & (syms["shndx"] != SHN_UNDEF)
        & (syms["value"] != 0)
    )
    sel = syms[keep]
    s_off, s_len = strtab[4], strtab[5]
    if s_off + s_len > size:
        raise ElfError("string table outside the file")
    # Aliases at one address: a global name first, then the shortest, then alphabetical.
    rows = []
    for name_i, info, value, sz in zip(
        sel["name"].tolist(),
        sel["info"].tolist(),
        sel["value"].tolist(),
        sel["size"].tolist(),
        strict=True,
    ):
        if name_i >= s_len:
            continue
        name = _cstr(buf, s_off + name_i, s_off + s_len)
        if not name or name.startswith((".L", "$")):
            continue
        # At one address a function or object wins over a label, then a global name.
        rank = (2 if info & 0xF == STT_NOTYPE else 0) + (0 if info >> 4 == STB_GLOBAL else 1)
        rows.append((value, rank, len(name), name, sz))
    rows.sort()
    starts: list[int] = []
    sizes: list[int] = []
    names: list[str] = []
    for value, _g, _l, name, sz in rows:
        if starts and starts[-1] == value:
            sizes[-1] = max(sizes[-1], sz)
            continue
        starts.append(value)
        sizes.append(sz)
        names.append(name)
    st = np.asarray(starts, dtype=np.uint64)
    sz_a = np.asarray(sizes, dtype=np.uint64)
    nxt = np.append(st[1:], np.uint64(np.iinfo(np.uint64).max)) if st.size else st
    # A symbol of size 0 (hand-written assembly) reaches the next symbol.
    ends = np.where(sz_a > 0, np.minimum(st + sz_a, nxt) if st.size else st, nxt)
    return st, ends, names


def read_elf(
    path: str | os.PathLike[str],
    *,
    debug_dirs: tuple[str, ...] = DEBUG_DIRS,
    symbols: bool = True,
) -> ElfFile:
    """Read an ELF64 little-endian file's load segments, build-id and (unless ``symbols`` is
    False) symbols. Raises :class:`ElfError` (naming the file) for anything else or a
    malformed file; ``OSError`` when it cannot be opened."""
    p = str(path)
    with open(p, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < _EHDR.size:
            raise ElfError(f"{p}: not an ELF file (too short)")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            try:
                return _parse(p, buf, size, debug_dirs, symbols)
            except (struct.error, ValueError, IndexError) as e:
                if isinstance(e, ElfError):
                    raise
                raise ElfError(f"{p}: malformed ELF file ({e})") from None


def _parse(p: str, buf: Any, size: int, debug_dirs: tuple[str, ...], with_symbols: bool) -> ElfFile:
    (ident, etype, _mach, _ver, _entry, phoff, shoff, _fl, _ehs, phentsize, phnum, shentsize,
     shnum, _shstrndx) = _EHDR.unpack_from(buf, 0)  # fmt: skip
    if ident[:4] != b"\x7fELF":
        raise ElfError(f"{p}: not an ELF file")
    if ident[4] != 2 or ident[5] != 1:
        raise ElfError(f"{p}: not ELF64 little-endian (class {ident[4]}, data {ident[5]})")
    segments: list[Segment] = []
    build_id = None
    if phoff and phentsize >= _PHDR.size and phoff + phnum * phentsize <= size:
        for k in range(phnum):
            ptype, flags, off, vaddr, _pa, filesz, memsz, align = _PHDR.unpack_from(
                buf, phoff + k * phentsize
            )
            if ptype == PT_LOAD:
                segments.append(Segment(off, vaddr, filesz, memsz, flags))
            elif ptype == PT_NOTE and build_id is None and off + filesz <= size:
                build_id = _notes(buf, off, filesz, align)
    sections: list[tuple[int, ...]] = []
    if not with_symbols:
        return ElfFile(p, etype, segments, build_id)
    if shoff and shentsize >= _SHDR.size and shoff + _SHDR.size <= size:
        first = _SHDR.unpack_from(buf, shoff)
        if shnum == 0:
            shnum = first[5]  # more than 0xff00 sections: the count is in section 0
        if shoff + shnum * shentsize <= size:
            sections = [_SHDR.unpack_from(buf, shoff + k * shentsize) for k in range(shnum)]
    elf = ElfFile(p, etype, segments, build_id)
    by_type: dict[int, tuple[int, ...]] = {}
    for one in sections:
        if one[1] in (SHT_SYMTAB, SHT_DYNSYM) and one[1] not in by_type:
            by_type[one[1]] = one
    for kind, label in ((SHT_SYMTAB, "symtab"), (SHT_DYNSYM, "dynsym")):
        sh = by_type.get(kind)
        if sh is None:
            continue
        link = sh[6]
        strtab = sections[link] if link < len(sections) else None
        code = frozenset(k for k, one in enumerate(sections) if one[2] & SHF_EXECINSTR)
        try:
            starts, ends, names = _symbols(buf, size, sh, strtab, code)
        except ElfError:
            continue  # a table outside the file: try the next one
        if not names:
            continue
        if kind == SHT_DYNSYM and build_id:
            dbg = _debug_file(build_id, debug_dirs)
            if dbg is not None:
                elf.starts, elf.ends, elf.names = dbg.starts, dbg.ends, dbg.names
                elf.symbols_from = "debug"
                return elf
        elf.starts, elf.ends, elf.names = starts, ends, names
        elf.symbols_from = label
        return elf
    if build_id:
        dbg = _debug_file(build_id, debug_dirs)
        if dbg is not None:
            elf.starts, elf.ends, elf.names = dbg.starts, dbg.ends, dbg.names
            elf.symbols_from = "debug"
    return elf


def _debug_file(build_id: str, debug_dirs: tuple[str, ...]) -> ElfFile | None:
    """The separate debug file of this build-id with a ``.symtab``, if installed."""
    if len(build_id) < 3:
        return None
    for d in debug_dirs:
        cand = Path(d) / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug"
        if not cand.is_file():
            continue
        try:
            dbg = read_elf(cand, debug_dirs=())
        except (OSError, ElfError):
            continue
        if dbg.symbols_from == "symtab":
            return dbg
    return None


def file_identity(path: str) -> dict[str, Any] | None:
    """What identifies a mapped file's version: size, modification time (ns) and, for ELF
    files, the GNU build-id. None when the file cannot be read (gone, not a regular file)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not os.path.isfile(path):
        return None
    ident: dict[str, Any] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    try:
        with open(path, "rb") as f:
            head = f.read(_EHDR.size)
        if head[:4] == b"\x7fELF":
            ident["build_id"] = read_elf(path, debug_dirs=(), symbols=False).build_id
    except (OSError, ElfError, ValueError):
        pass
    return ident


def _changed(path: str, now: ElfFile, recorded: dict[str, Any] | None) -> str | None:
    """Why the file on disk is not the one recorded (None: same, or nothing to compare)."""
    if not isinstance(recorded, dict):
        return None
    was = recorded.get("build_id")
    if was and now.build_id:
        return None if was == now.build_id else f"build-id {now.build_id} != recorded {was}"
    try:
        st = os.stat(path)
    except OSError:
        return "cannot stat"
    if recorded.get("size") not in (None, st.st_size):
        return f"size {st.st_size} != recorded {recorded.get('size')}"
    if recorded.get("mtime_ns") not in (None, st.st_mtime_ns):
        return "modified since the recording"
    return None


def demangle(names: list[str]) -> dict[str, str]:
    """C++ names (``_Z...``) demangled by ``c++filt`` when it is installed (else unchanged)."""
    mangled = sorted({n for n in names if n.startswith("_Z")})
    tool = shutil.which("c++filt")
    if not mangled or tool is None:
        return {}
    try:
        out = subprocess.run(
            [tool], input="\n".join(mangled) + "\n", capture_output=True, text=True, timeout=30
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return {}
    if len(out) != len(mangled):
        return {}
    return dict(zip(mangled, out, strict=True))


def is_symbol(name: str) -> bool:
    """A symbol's name (not ``[unknown]``, ``[kernel]`` or ``FILE+0xOFFSET``)."""
    return name not in (UNKNOWN, KERNEL) and "+0x" not in name


def is_file_name(name: str) -> bool:
    return name.startswith("/") and not name.startswith("//")


@dataclass
class Resolved:
    """Per sample: the symbol (index into ``names``) and the object (index into ``objects``)."""

    symbol: np.ndarray
    obj: np.ndarray
    names: list[str]
    objects: list[str]
    notes: list[str]


class Resolver:
    """Resolves IPs against a recording's mapping history; files are read once each."""

    def __init__(
        self,
        mappings: pd.DataFrame,
        recorded_files: dict[str, Any] | None = None,
        *,
        maps: list[history.Mapping] | None = None,
    ) -> None:
        self.maps = maps if maps is not None else history.build(mappings)
        self.recorded = recorded_files if isinstance(recorded_files, dict) else {}
        self._elf: dict[str, ElfFile | None] = {}
        self.notes: list[str] = []

    def elf(self, path: str) -> ElfFile | None:
        if path in self._elf:
            return self._elf[path]
        elf: ElfFile | None = None
        try:
            elf = read_elf(path)
        except FileNotFoundError:
            self.notes.append(f"{path}: file not found (its samples are {UNKNOWN})")
        except OSError as e:
            self.notes.append(f"{path}: cannot read ({e.strerror or e}); samples {UNKNOWN}")
        except ElfError as e:
            self.notes.append(f"{e}; samples {UNKNOWN}")
        if elf is not None:
            why = _changed(path, elf, self.recorded.get(path))
            if why:
                self.notes.append(
                    f"{path}: changed since the recording ({why}); its samples are {UNKNOWN}"
                )
                elf = None
        self._elf[path] = elf
        return elf

    def owners(self, time_ns: np.ndarray, ip: np.ndarray) -> np.ndarray:
        """Per sample, the id of the mapping its user-space IP lies in at its time (or -1)."""
        ip = np.asarray(ip, dtype=np.uint64)
        t = np.asarray(time_ns, dtype=np.uint64)
        owner = np.full(ip.size, -1, dtype=np.int64)
        user = np.flatnonzero((ip < np.uint64(KERNEL_START)) & (ip != 0))
        if user.size and self.maps:
            owner[user] = history.assign(self.maps, t[user], ip[user])
        return owner

    def resolve(self, time_ns: np.ndarray, ip: np.ndarray) -> Resolved:
        return self.resolve_owned(ip, self.owners(time_ns, ip))

    def resolve_owned(
        self, ip: np.ndarray, owner: np.ndarray, weights: np.ndarray | None = None
    ) -> Resolved:
        """:meth:`resolve` of IPs whose mappings are known (:meth:`owners`); ``weights``:
        samples per row, when the rows are distinct (IP, mapping) pairs of many samples."""
        ip = np.asarray(ip, dtype=np.uint64)
        names: list[str] = [UNKNOWN, KERNEL]
        objects: list[str] = [UNKNOWN, KERNEL]
        name_ix = {UNKNOWN: 0, KERNEL: 1}
        obj_ix = {UNKNOWN: 0, KERNEL: 1}

        def intern(table: list[str], index: dict[str, int], s: str) -> int:
            k = index.get(s)
            if k is None:
                k = index[s] = len(table)
                table.append(s)
            return k

        sym = np.zeros(ip.size, dtype=np.int64)
        obj = np.zeros(ip.size, dtype=np.int64)
        kernel = ip >= np.uint64(KERNEL_START)
        sym[kernel] = 1
        obj[kernel] = 1
        by_id = {m.id: m for m in self.maps}
        held = np.flatnonzero(owner >= 0)
        order = held[np.argsort(owner[held], kind="stable")]
        ids, first, counts = np.unique(owner[order], return_index=True, return_counts=True)
        for mid, i0, n in zip(ids.tolist(), first.tolist(), counts.tolist(), strict=True):
            sel = order[i0 : i0 + n]
            m = by_id[mid]
            name = m.name or "[anon]"
            o = intern(objects, obj_ix, name)
            obj[sel] = o
            if not is_file_name(name):
                continue  # [anon], [heap], [stack], [vdso], JIT code: no file to read
            elf = self.elf(name)
            if elf is None:
                continue
            bias = elf.bias(m.start, m.length, ip[sel], None if weights is None else weights[sel])
            vaddr = ip[sel] - np.uint64(bias % (1 << 64))
            found = elf.lookup(vaddr)
            local = (
                np.asarray([intern(names, name_ix, s) for s in elf.names], dtype=np.int64)
                if elf.names
                else np.zeros(0, dtype=np.int64)
            )
            hit = found >= 0
            sym[sel[hit]] = local[found[hit]]
            base = os.path.basename(name)
            miss = np.flatnonzero(~hit)
            # Once per distinct address (a hot loop's IPs repeat).
            uv, inv = np.unique(vaddr[miss], return_inverse=True)
            codes = np.empty(uv.size, dtype=np.int64)
            for j, v in enumerate(uv.tolist()):
                off = elf.file_offset(v)
                if off is None:  # outside every PT_LOAD: the offset in the mapping
                    off = (v + bias - m.start) % (1 << 64)
                codes[j] = intern(names, name_ix, f"{base}+{off:#x}")
            sym[sel[miss]] = codes[inv.reshape(-1)]
        d = demangle(names)
        if d:
            names = [d.get(n, n) for n in names]
        return Resolved(sym, obj, names, objects, list(self.notes))


@dataclass
class SymbolRow:
    symbol: str
    obj: str
    samples: int
    share: float
    levels: dict[str, int]
    #: Data mappings its samples touched: (mapping name, samples), most first.
    data: list[tuple[str, int]]

    def to_json(self) -> dict[str, Any]:
        return {
            "symbol": self.symbol,
            "object": self.obj,
            "samples": self.samples,
            "share": self.share,
            "memory_levels": self.levels,
            "data": [{"mapping": n, "samples": c} for n, c in self.data],
        }


def table(
    res: Resolved,
    level_code: np.ndarray | None = None,
    level_names: list[str] | None = None,
    data_code: np.ndarray | None = None,
    data_names: list[str] | None = None,
    top: int = 20,
    top_data: int = 4,
    weights: np.ndarray | None = None,
) -> list[SymbolRow]:
    """The ``top`` (symbol, object) pairs by samples, with their memory levels
    (``level_code``: per sample, an index into ``level_names``) and the data mappings they
    touched (``data_code``: per sample, an index into ``data_names``). ``weights``: samples
    per row, when a row stands for many samples."""
    if res.symbol.size == 0:
        return []
    w = np.ones(res.symbol.size, dtype=np.int64) if weights is None else weights
    n = int(w.sum())
    width = len(res.objects) + 1
    key = res.symbol * width + res.obj
    uniq, inverse = np.unique(key, return_inverse=True)
    inverse = inverse.reshape(-1)
    counts = np.bincount(inverse, weights=w, minlength=uniq.size).astype(np.int64)
    ranked = sorted(range(uniq.size), key=lambda i: (-int(counts[i]), int(uniq[i])))[:top]
    order = np.argsort(inverse, kind="stable")
    starts = np.searchsorted(inverse[order], np.arange(uniq.size + 1))
    rows = []
    for i in ranked:
        idx = order[starts[i] : starts[i + 1]]
        s, o = divmod(int(uniq[i]), width)
        lv: dict[str, int] = {}
        if level_code is not None and level_names is not None:
            c = np.bincount(level_code[idx], weights=w[idx], minlength=len(level_names))
            lv = {level_names[k]: int(c[k]) for k in range(len(level_names)) if c[k]}
        data: list[tuple[str, int]] = []
        if data_code is not None and data_names is not None:
            c = np.bincount(data_code[idx], weights=w[idx], minlength=len(data_names))
            best = sorted(np.flatnonzero(c).tolist(), key=lambda k: (-int(c[k]), k))
            data = [(data_names[k], int(c[k])) for k in best[:top_data]]
        rows.append(
            SymbolRow(
                symbol=res.names[s],
                obj=res.objects[o],
                samples=int(counts[i]),
                share=int(counts[i]) / n,
                levels=lv,
                data=data,
            )
        )
    return rows
