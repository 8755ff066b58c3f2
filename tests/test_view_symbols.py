"""Sample IPs resolved to symbols (``tierlab.view.symbols``) and the per-symbol table of
``tierlab view``: a tiny C program built here (PIE, non-PIE, stripped), addresses from ``nm``,
recordings synthesized with the recording writer, and one real ``tierlab record`` run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import tierlab
from tierlab.cli.view import _print_symbols as print_symbols
from tierlab.recording import Recording, RecordingWriter
from tierlab.view import symbols
from tierlab.view.analysis import ViewOptions, analyze
from tierlab.view.render import page_of

PROG = r"""
#include <stdlib.h>
#ifndef N
#define N (8u << 20)
#endif
__attribute__((noinline)) void fill_a(char *p, size_t n) {
    for (size_t i = 0; i < n; i += 4096) p[i] = 1;
}
__attribute__((noinline)) long sum_b(char *p, size_t n) {
    long s = 0;
    for (size_t i = 0; i < n; i += 4096) { p[i] = 2; s += p[i]; }
    return s;
}
int main(void) {
    char *a = malloc(N), *b = malloc(N / 2);
    fill_a(a, N);
    return (int)(sum_b(b, N / 2) & 1);
}
"""
PIE_BASE = 0x5555_5555_4000
DATA = 0x7F00_0000_0000
PAGE = 4096
# data_src words: mem_lvl_num DRAM (0xD << 33) and L1 (0x1 << 33), mem_lvl HIT.
DRAM = (0xD << 33) | (0x2 << 5)
L1 = (0x1 << 33) | (0x2 << 5)


@pytest.fixture(scope="module")
def progs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc) to build the test program")
    out = tmp_path_factory.mktemp("symprog")
    src = out / "prog.c"
    src.write_text(PROG)
    built = {
        "pie": ["-fPIE", "-pie"],
        "nopie": ["-fno-pie", "-no-pie"],
        "stripped": ["-fPIE", "-pie", "-s"],
    }
    exes = {}
    for name, flags in built.items():
        exe = out / f"prog_{name}"
        res = subprocess.run([cc, "-O0", "-g", *flags, "-o", exe, src], capture_output=True)
        if res.returncode != 0:
            pytest.skip(f"cc cannot build a {name} program here: {res.stderr.decode()[:200]}")
        exes[name] = exe
    return exes


def nm(exe: Path) -> dict[str, int]:
    """Function addresses as binutils' nm gives them."""
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) is not installed")
    out = subprocess.run(["nm", exe], capture_output=True, text=True, check=True).stdout
    return {f[2]: int(f[0], 16) for f in (line.split() for line in out.splitlines()) if len(f) == 3}


@pytest.mark.parametrize("kind", ["pie", "nopie"])
def test_reader_finds_nm_addresses(progs: dict[str, Path], kind: str) -> None:
    elf = symbols.read_elf(progs[kind])
    assert elf.type == (symbols.ET_DYN if kind == "pie" else symbols.ET_EXEC)
    assert elf.symbols_from == "symtab"
    assert elf.build_id and len(elf.build_id) == 40
    addr = nm(progs[kind])
    for fn in ("fill_a", "sum_b", "main"):
        # The first instruction, one inside, and the last byte of each function.
        i = elf.names.index(fn)
        assert int(elf.starts[i]) == addr[fn]
        probe = np.asarray([addr[fn], addr[fn] + 5, int(elf.ends[i]) - 1], dtype=np.uint64)
        assert [elf.names[k] for k in elf.lookup(probe)] == [fn] * 3
    # Past main's end and before the first function: no symbol of these.
    got = elf.lookup(np.asarray([0, int(elf.ends[elf.names.index("main")])], dtype=np.uint64))
    assert all(k < 0 or elf.names[k] not in ("fill_a", "sum_b", "main") for k in got)


def test_reader_refuses_non_elf(tmp_path: Path) -> None:
    bad = tmp_path / "x"
    bad.write_bytes(b"#!/bin/sh\n" + b"\0" * 80)
    with pytest.raises(symbols.ElfError, match="not an ELF"):
        symbols.read_elf(bad)
    trunc = tmp_path / "y"
    trunc.write_bytes(b"\x7fELF\x02\x01" + b"\0" * 58 + b"\xff" * 8)
    symbols.read_elf(trunc)  # a header pointing nowhere: no segments, no symbols, no crash


def _recording(
    path: Path,
    maps: list[tuple[int, int, str]],
    ips: list[int],
    addrs: list[int],
    data_src: list[int] | None = None,
    meta: dict | None = None,
) -> Path:
    n = len(ips)
    with RecordingWriter(path, source="test") as w:
        w.append_mappings(
            time_ns=[0] * len(maps),
            event=["map"] * len(maps),
            start=[m[0] for m in maps],
            length=[m[1] for m in maps],
            name=[m[2] for m in maps],
        )
        w.append_samples(
            time_ns=np.arange(1, n + 1, dtype=np.uint64),
            tid=np.ones(n, dtype=np.uint32),
            cpu=np.zeros(n, dtype=np.uint32),
            addr=np.asarray(addrs, dtype=np.uint64),
            ip=np.asarray(ips, dtype=np.uint64),
            weight=np.zeros(n, dtype=np.uint64),
            data_src=np.asarray(data_src or [0] * n, dtype=np.uint64),
            event=["page-faults"] * n,
            drain=np.zeros(n, dtype=np.uint64),
        )
        w.append_drains(time_ns=[n + 1], cpu=[0], drain=[0], records=[n])
        if meta:
            w.update_meta(**meta)
    return path


def _span(exe: Path) -> int:
    elf = symbols.read_elf(exe)
    return -(-max(s.vaddr + s.memsz for s in elf.segments) // PAGE) * PAGE


def test_view_lists_symbols_of_pie_and_non_pie(
    progs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pie, nopie = progs["pie"], progs["nopie"]
    a_pie, a_nopie = nm(pie), nm(nopie)
    nopie_start = symbols.read_elf(nopie).segments[0].vaddr
    ips = (
        [PIE_BASE + a_pie["fill_a"] + 4] * 3
        + [PIE_BASE + a_pie["sum_b"] + 9] * 5
        + [a_nopie["fill_a"] + 1] * 2
    )
    addrs = [DATA + k * PAGE for k in range(len(ips))]
    src = [DRAM] * 2 + [L1] + [DRAM] * 5 + [L1] * 2
    rec = _recording(
        tmp_path / "r",
        [
            (PIE_BASE, _span(pie) - 0, str(pie)),
            (nopie_start, _span(nopie) - nopie_start, str(nopie)),
            (DATA, 64 * PAGE, "[anon]"),
        ],
        ips,
        addrs,
        src,
    )
    view = analyze(Recording.open(rec))
    v = json.loads(json.dumps(view.to_json()))
    got = {(r["symbol"], Path(r["object"]).name): r for r in v["symbols"]}
    assert got[("sum_b", "prog_pie")]["samples"] == 5
    assert got[("fill_a", "prog_pie")]["samples"] == 3
    assert got[("fill_a", "prog_nopie")]["samples"] == 2
    assert v["symbols"][0]["symbol"] == "sum_b"  # most samples first
    assert got[("fill_a", "prog_pie")]["memory_levels"] == {"L1": 1, "local DRAM": 2}
    assert got[("sum_b", "prog_pie")]["memory_levels"] == {"local DRAM": 5}
    assert got[("sum_b", "prog_pie")]["data"] == [{"mapping": "#2 [anon]", "samples": 5}]
    assert got[("sum_b", "prog_pie")]["share"] == pytest.approx(0.5)
    assert v["totals"]["symbols"]["samples_in_symbols"] == 10
    assert v["symbol_notes"] == []
    # The text table and the HTML page.
    print_symbols(view)
    text = capsys.readouterr().out
    assert re.search(r"share\s+samples\s+symbol\s+object\s+L1\s+local DRAM\n", text)
    assert re.search(r"50\.0%\s+5\s+sum_b\s+prog_pie\s+0\s+5\n", text)
    assert "data: #2 [anon] 5" in text
    page_of(view).write(tmp_path / "index.html")
    html = (tmp_path / "index.html").read_text()
    assert "<section id='symbols'>" in html and "sum_b" in html
    # --no-symbols
    assert "symbols" not in analyze(Recording.open(rec), ViewOptions(symbols=False)).to_json()


def test_a_row_of_the_executable_segment_alone(progs: dict[str, Path], tmp_path: Path) -> None:
    """perf without data mappings reports only the executable segment (file offset 0x1000
    here): the bias comes from the segment whose span matches the row's length."""
    pie = progs["pie"]
    elf = symbols.read_elf(pie)
    x = next(s for s in elf.segments if s.flags & symbols.PF_X)
    assert x.offset > 0  # this toolchain puts the headers in a segment of their own
    lo = x.vaddr // PAGE * PAGE
    length = -(-(x.vaddr + x.filesz) // PAGE) * PAGE - lo
    a = nm(pie)
    ips = np.asarray([PIE_BASE + a["sum_b"] + 2] * 2, dtype=np.uint64)
    assert elf.bias(PIE_BASE + lo, length, ips) == PIE_BASE
    # The whole file's row: its start is file offset 0.
    span = _span(pie)
    assert elf.bias(PIE_BASE, span, ips) == PIE_BASE
    rec = _recording(
        tmp_path / "r",
        [(PIE_BASE + lo, length, str(pie)), (DATA, 64 * PAGE, "[anon]")],
        ips.tolist(),
        [DATA] * 2,
    )
    v = analyze(Recording.open(rec)).to_json()
    assert [(r["symbol"], r["samples"]) for r in v["symbols"]] == [("sum_b", 2)]


def test_stripped_missing_and_changed_files(
    progs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pie, stripped = progs["pie"], progs["stripped"]
    a = nm(pie)  # the stripped build is the same code: same addresses
    gone = tmp_path / "gone"
    shutil.copy(pie, gone)
    changed = tmp_path / "changed"
    shutil.copy(pie, changed)
    other = 0x6000_0000_0000
    maps = [
        (PIE_BASE, _span(stripped), str(stripped)),
        (other, _span(pie), str(gone)),
        (other + 0x10_0000_0000, _span(pie), str(changed)),
        (0x7FFF_F7FC_1000, 2 * PAGE, "[vdso]"),
        (DATA, 64 * PAGE, "[anon]"),
    ]
    ips = [
        PIE_BASE + a["fill_a"] + 4,  # stripped: file+offset
        other + a["fill_a"],  # gone
        other + a["sum_b"],  # gone: noted once
        other + 0x10_0000_0000 + a["sum_b"],  # changed since the recording
        0x7FFF_F7FC_1000 + 0x10,  # vdso
        DATA + 8,  # JIT-like: code in an anonymous mapping
        0,  # no IP
        0x1234,  # in no mapping
    ]
    recorded = {str(changed): {"size": 1, "mtime_ns": 2, "build_id": "00" * 20}}
    rec = _recording(
        tmp_path / "r",
        maps,
        ips,
        [DATA] * len(ips),
        meta={"accounting": {"mapped_files": recorded}},
    )
    os.unlink(gone)
    res = tierlab("view", rec, "--json")
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    v = res.json()
    got = {(r["symbol"], Path(r["object"]).name): r["samples"] for r in v["symbols"]}
    elf = symbols.read_elf(stripped)
    assert elf.symbols_from in ("none", "dynsym")
    off = elf.file_offset(a["fill_a"] + 4)
    assert got[(f"prog_stripped+{off:#x}", "prog_stripped")] == 1
    assert got[("[unknown]", "gone")] == 2
    assert got[("[unknown]", "changed")] == 1
    assert got[("[unknown]", "[vdso]")] == 1
    assert got[("[unknown]", "[anon]")] == 1
    assert got[("[unknown]", "[unknown]")] == 2  # the IP in no mapping, and IP 0
    notes = v["symbol_notes"]
    assert sum("file not found" in n for n in notes) == 1
    assert any("changed since the recording" in n and "build-id" in n for n in notes)
    print_symbols(analyze(Recording.open(rec)))
    assert capsys.readouterr().out.count("file not found") == 1


def test_real_recording_shows_the_programs_functions(
    progs: dict[str, Path], tmp_path: Path
) -> None:
    rec = tmp_path / "live"
    res = tierlab("record", "--backend", "page-faults", "-o", rec, "--", progs["pie"])
    # Only a machine that forbids perf_event_open (some containers) is a reason to skip; any
    # other failure of `record` is a failure of the test.
    if res.returncode != 0 and "perf_event_open" in res.stderr:
        pytest.skip(f"perf_event_open is not allowed here: {res.stderr.strip()[-200:]}")
    assert res.returncode == 0, res.stderr
    files = json.loads((rec / "meta.json").read_text())["accounting"]["mapped_files"]
    assert files[str(progs["pie"])]["build_id"] == symbols.read_elf(progs["pie"]).build_id
    v = analyze(Recording.open(rec), ViewOptions(top_symbols=5)).to_json()
    top = {r["symbol"]: r["samples"] for r in v["symbols"][:2]}
    # fill_a writes 8 MiB, sum_b 4 MiB, one page fault per 4 KiB page (+- the pages malloc
    # touched first).
    assert set(top) == {"fill_a", "sum_b"}, v["symbols"]
    assert abs(top["fill_a"] - 2048) <= 4 and abs(top["sum_b"] - 1024) <= 4, top
