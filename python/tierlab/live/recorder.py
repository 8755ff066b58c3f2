"""The recording loop: drive a native ``LiveRecorder`` and write its rows as a recording.

Rows are written in chunks (a Parquet part per table at least every ``flush_interval_ns``,
each atomically), so a recorder killed with SIGKILL leaves a readable recording up
to its last chunk. Ctrl-C (KeyboardInterrupt) stops recording, drains what the kernel holds,
and closes the recording; the target is never signalled by the recorder.
"""

from __future__ import annotations

import os
import platform
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from tierlab import signals
from tierlab.live.config import RecordOptions
from tierlab.recording import RecordingWriter
from tierlab.view import symbols

if TYPE_CHECKING:
    from tierlab._native import LiveBatch

#: How the mapping history is obtained (stored in the metadata; see docs/recording.md).
MAPPING_TRACKER = {
    "method": "perf-mmap2+proc-maps-diff",
    "maps": "exact (perf MMAP2 records)",
    "unmaps": "found missing from /proc/PID/maps snapshots taken at every drain and at least "
    "every snapshot_interval_ns: dated at the snapshot, at most max_snapshot_gap_ns late",
    "unreported_maps": "ranges appearing without an MMAP2 record (mremap, shmat): dated at the "
    "previous snapshot, at most max_snapshot_gap_ns early",
}


@dataclass
class RecordResult:
    path: Path | None
    parameters: dict[str, Any]
    accounting: dict[str, Any]
    exit: tuple[str, int] | None
    interrupted: bool
    wall_s: float
    target_s: float
    mapping_events: int = 0
    pid: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "page_size": os.sysconf("SC_PAGE_SIZE"),
        "kernel": platform.release(),
        "arch": platform.machine(),
    }
    try:
        text = Path("/proc/cpuinfo").read_text()
        for key, name in (("vendor_id", "vendor"), ("model name", "model")):
            for line in text.splitlines():
                if line.startswith(key):
                    info[name] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        info["perf_event_paranoid"] = int(
            Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip()
        )
        info["perf_event_max_sample_rate"] = int(
            Path("/proc/sys/kernel/perf_event_max_sample_rate").read_text().strip()
        )
    except (OSError, ValueError):
        pass
    return info


def _thp_size() -> int:
    """Bytes of a transparent huge page on this machine (2 MiB on x86-64)."""
    try:
        return int(Path("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size").read_text())
    except (OSError, ValueError):
        return 2 << 20


def drain_interval_summary(times_by_cpu: dict[int, list[int]]) -> dict[str, Any]:
    """Intervals between consecutive drains of the same CPU's buffer."""
    gaps = np.concatenate(
        [np.diff(np.asarray(sorted(t), dtype=np.float64)) for t in times_by_cpu.values()]
        or [np.empty(0)]
    )
    if gaps.size == 0:
        return {"count": 0}
    return {
        "count": int(gaps.size),
        "mean_ns": float(gaps.mean()),
        "median_ns": float(np.median(gaps)),
        "min_ns": float(gaps.min()),
        "max_ns": float(gaps.max()),
    }


class _Sink:
    """Appends native batches to a writer (or only counts them, for overhead baselines)."""

    def __init__(self, writer: RecordingWriter | None, event: str) -> None:
        self.writer = writer
        self.event = event
        self.drain_times: dict[int, list[int]] = {}
        self.mapping_events = 0
        #: Mappings with huge pages: (start, end) -> the largest observation (smaps).
        self.page_sizes: dict[tuple[int, int], dict[str, Any]] = {}
        #: Files mapped, by path: size, mtime and build-id when first seen (``tierlab view``
        #: checks that the file it reads symbols from is the one that ran).
        self.mapped_files: dict[str, dict[str, Any] | None] = {}

    def add(self, batch: LiveBatch) -> None:
        s = batch["samples"]
        n = len(s["time_ns"]) // 8
        d = batch["drains"]
        cpus = np.frombuffer(d["cpu"], dtype="<u8")
        times = np.frombuffer(d["time_ns"], dtype="<u8")
        for cpu, t in zip(cpus.tolist(), times.tolist(), strict=True):
            self.drain_times.setdefault(cpu, []).append(t)
        self.mapping_events += len(batch["mappings"])
        for row in batch["mappings"]:
            name = row[4]
            if name not in self.mapped_files and symbols.is_file_name(name):
                self.mapped_files[name] = symbols.file_identity(name)
        for t, start, end, name, kps, huge in batch.get("page_sizes") or []:
            seen = self.page_sizes.get((start, end))
            if seen is None:
                seen = self.page_sizes[(start, end)] = {
                    "start": start,
                    "end": end,
                    "name": name,
                    "time_ns": t,
                    "kernel_page_size": kps,
                    "anon_huge_bytes": huge,
                }
            seen["kernel_page_size"] = max(seen["kernel_page_size"], kps)
            seen["anon_huge_bytes"] = max(seen["anon_huge_bytes"], huge)
        if self.writer is None:
            return
        if n:
            event = pa.DictionaryArray.from_arrays(
                pa.array(np.zeros(n, dtype=np.int32)), pa.array([self.event])
            ).cast(pa.string())
            self.writer.append_samples(
                time_ns=np.frombuffer(s["time_ns"], dtype="<u8"),
                tid=np.frombuffer(s["tid"], dtype="<u4"),
                cpu=np.frombuffer(s["cpu"], dtype="<u4"),
                addr=np.frombuffer(s["addr"], dtype="<u8"),
                ip=np.frombuffer(s["ip"], dtype="<u8"),
                weight=np.frombuffer(s["weight"], dtype="<u8"),
                data_src=np.frombuffer(s["data_src"], dtype="<u8"),
                event=event,
                drain=np.frombuffer(s["drain"], dtype="<u8"),
            )
        if len(times):
            self.writer.append_drains(
                time_ns=times,
                cpu=cpus,
                drain=np.frombuffer(d["drain"], dtype="<u8"),
                records=np.frombuffer(d["records"], dtype="<u8"),
            )
        if batch["mappings"]:
            when, events, starts, lengths, names = zip(*batch["mappings"], strict=True)
            self.writer.append_mappings(
                time_ns=list(when),
                event=list(events),
                start=list(starts),
                length=list(lengths),
                name=list(names),
            )


def record(
    out: Path | None,
    *,
    argv: Sequence[str] | None = None,
    pid: int | None = None,
    options: RecordOptions | None = None,
    overwrite: bool = False,
    on_poll: Callable[[Any], None] | None = None,
    source: str | None = None,
    devnull_stdout: bool = False,
) -> RecordResult:
    """Record ``argv`` (launched) or process ``pid`` (attached) into recording ``out``
    (``None``: record and count, write nothing). Raises ``tierlab._native.LiveError`` when
    recording cannot start."""
    from tierlab import _native
    from tierlab._version import VERSION as __version__

    opts = options or RecordOptions()
    started = time.monotonic()
    if (argv is None) == (pid is None):
        raise ValueError("record: give either argv or pid")
    if argv is not None:
        saved = None
        if devnull_stdout:  # the child inherits fd 1 at the fork inside launch()
            sys.stdout.flush()
            saved = os.dup(1)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.close(devnull)
        try:
            rec = _native.LiveRecorder.launch(list(argv), **opts.native_kwargs())
        finally:
            if saved is not None:
                os.dup2(saved, 1)
                os.close(saved)
    else:
        rec = _native.LiveRecorder.attach(int(pid), **opts.native_kwargs())  # type: ignore[arg-type]
    params = dict(rec.parameters())
    # CLOCK_MONOTONIC at the recording's time 0 (the interposer of --alloc-sites dates its
    # events on that clock).
    params["monotonic_origin_ns"] = time.monotonic_ns() - int(rec.now_ns)
    params.update(
        {
            "buffer_size": opts.buffer_size,
            "watermark_bytes": opts.buffer_size,
            "min_mapping": opts.min_mapping,
            "snapshot_interval_ns": opts.snapshot_interval_ns,
            "flush_interval_s": opts.flush_interval_s,
            "mapping_tracker": MAPPING_TRACKER,
            "target": {"argv": list(argv)} if argv is not None else {"pid": pid},
        }
    )
    if params["event"] == "mem-loads":
        params["ldlat"] = opts.ldlat
    writer = None
    try:
        if out is not None:
            writer = RecordingWriter(
                out,
                source=source or f"tierlab-record {__version__}",
                parameters=params,
                machine=machine_info(),
                overwrite=overwrite,
                flush_rows=2_000_000,
            )
    except BaseException:
        rec.close()
        raise
    sink = _Sink(writer, str(params["event"]))
    thp_size = _thp_size()
    last_flush = time.monotonic()

    def accounting() -> dict[str, Any]:
        a = dict(rec.stats())
        a["drain_intervals"] = drain_interval_summary(sink.drain_times)
        a["mapping_events"] = sink.mapping_events
        a["page_sizes"] = list(sink.page_sizes.values())
        a["mapped_files"] = {k: v for k, v in sink.mapped_files.items() if v is not None}
        a["thp_size"] = thp_size
        a["duration_ns"] = rec.now_ns
        a["target_pid"] = rec.pid
        ex = rec.exit
        a["target_exit"] = None if ex is None else {"how": ex[0], "value": ex[1]}
        return a

    # Ctrl-C sets a flag instead of raising: a KeyboardInterrupt raised between a poll and the
    # append of its batch (or inside the append) would drop records the kernel already handed
    # over. The loop checks the flag after each batch is stored.
    # SIGTERM and SIGHUP do the same (tierlab.signals).
    stop = threading.Event()
    with signals.on_stop(stop.set):
        try:
            while rec.exit is None and not stop.is_set():
                sink.add(rec.poll(100))
                if on_poll is not None:
                    on_poll(rec)
                if writer is not None and time.monotonic() - last_flush >= opts.flush_interval_s:
                    writer.update_meta_or_warn(accounting=accounting())
                    writer.flush()
                    last_flush = time.monotonic()
        except KeyboardInterrupt:  # raised by on_poll or by a handler installed elsewhere
            stop.set()
        target_s = rec.now_ns / 1e9
        sink.add(rec.finish())
    interrupted = stop.is_set()
    acc = accounting()
    acc["interrupted"] = interrupted
    exit_ = rec.exit
    rec.close()
    if writer is not None:
        writer.update_meta_or_warn(accounting=acc)
        writer.close()
    return RecordResult(
        path=out,
        parameters=params,
        accounting=acc,
        exit=exit_,
        interrupted=interrupted,
        wall_s=time.monotonic() - started,
        target_s=target_s,
        mapping_events=sink.mapping_events,
        pid=int(acc["target_pid"]),
    )
