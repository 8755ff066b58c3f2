//! Python bindings of the trace tools: the streaming importers (`import_trace`) and the
//! streaming per-mapping aggregation of `tierlab view` (`aggregate_accesses`). Nothing here
//! holds a trace in memory: files are read and written chunk by chunk.

use std::io::Read;
use std::path::{Path, PathBuf};

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use tierlab_core::recording::aggregate;
use tierlab_core::recording::import::{self, ImportCounts};
use tierlab_core::recording::{
    AccessChunk, MappingRow, RecordingError, RecordingWriter, TimeUnit, WriterOptions,
};

create_exception!(
    _native,
    TraceFormatError,
    PyValueError,
    "A trace file does not follow its format (the message names the file, record and field)."
);

fn err(e: RecordingError) -> PyErr {
    TraceFormatError::new_err(e.to_string())
}

fn counts_dict<'py>(py: Python<'py>, c: &ImportCounts) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new_bound(py);
    d.set_item("accesses", c.accesses)?;
    d.set_item("loads", c.loads)?;
    d.set_item("stores", c.stores)?;
    d.set_item("threads", c.threads)?;
    d.set_item("skipped_lines", c.skipped_lines)?;
    Ok(d)
}

/// Import a Valgrind lackey log (`--trace-mem=yes` output) streaming: one thread (the pid
/// Valgrind's messages name, else 0); time = instructions executed before the access.
fn import_lackey(path: &Path, w: &mut RecordingWriter) -> Result<(ImportCounts, u64), RecordingError> {
    let shown = path.display().to_string();
    let mut f = tierlab_core::recording::open_regular(path, "lackey log")?;
    let mut parser = tierlab_live::lackey::Parser::new();
    let mut acc = tierlab_live::lackey::Accesses::default();
    let mut buf = vec![0u8; 1 << 20];
    let mut counts = ImportCounts::default();
    let mut pid: Option<u32> = None;
    let mut chunk = AccessChunk::default();
    let mut flush = |acc: &mut tierlab_live::lackey::Accesses,
                     pid: u32,
                     w: &mut RecordingWriter,
                     counts: &mut ImportCounts| {
        chunk.clear();
        if let Some(i) = acc.addr.iter().position(|&a| !import::canonical(a)) {
            return Err(RecordingError {
                file: shown.clone(),
                record: None,
                field: Some("addr".into()),
                msg: format!(
                    "access {} of the log: address {:#x} is not canonical (x86-64: bits 63 to 47 \
                     must be equal)",
                    counts.accesses + i as u64 + 1,
                    acc.addr[i]
                ),
            });
        }
        chunk.time.extend_from_slice(&acc.time);
        chunk.addr.extend_from_slice(&acc.addr);
        chunk.kind.extend_from_slice(&acc.kind);
        chunk.tid.resize(acc.addr.len(), pid);
        counts.accesses += acc.kind.len() as u64;
        let stores = acc.kind.iter().filter(|&&k| k == 1).count() as u64;
        counts.stores += stores;
        counts.loads += acc.kind.len() as u64 - stores;
        acc.clear();
        w.write_accesses(&chunk)
    };
    // The offending line is quoted only once the file has shown itself to be a lackey log
    // (an instruction, an access or a Valgrind message before it): nothing of a file that is
    // not one (a password file given by mistake) is echoed.
    let lerr = |e: tierlab_live::lackey::LackeyError, lackey: bool| RecordingError {
        file: shown.clone(),
        record: Some(e.line),
        field: None,
        msg: if lackey {
            format!("{}: {:?}", e.reason, e.text.chars().take(120).collect::<String>())
        } else {
            format!("{}; not a lackey log", e.reason)
        },
    };
    let seen = |p: &tierlab_live::lackey::Parser| {
        p.instructions + p.loads + p.stores + p.modifies > 0 || !p.messages.is_empty()
    };
    loop {
        let n = f.read(&mut buf).map_err(|e| RecordingError::file(&shown, e.to_string()))?;
        if n == 0 {
            break;
        }
        if let Err(e) = parser.feed(&buf[..n], &mut acc) {
            return Err(lerr(e, seen(&parser)));
        }
        if pid.is_none() {
            pid = parser.messages.iter().find_map(|m| {
                m.strip_prefix("==").and_then(|r| r.split("==").next()).and_then(|p| p.parse().ok())
            });
        }
        if acc.len() >= import::GROUP_ROWS {
            flush(&mut acc, pid.unwrap_or(0), w, &mut counts)?;
        }
    }
    if let Err(e) = parser.finish(&mut acc) {
        return Err(lerr(e, seen(&parser)));
    }
    flush(&mut acc, pid.unwrap_or(0), w, &mut counts)?;
    if counts.accesses == 0 {
        return Err(RecordingError::file(
            &shown,
            if seen(&parser) {
                "no accesses: a lackey log without load, store or modify lines (was lackey run with \
                 --trace-mem=yes?)"
            } else {
                "empty: no accesses"
            },
        ));
    }
    counts.threads = 1;
    Ok((counts, parser.instructions))
}

/// Import trace files of `format` (`raw`, `csv`, `oracle-general`, `lackey`) into a new
/// recording `out`; `meta` is a JSON object merged into `meta.json` (source, parameters...);
/// `mappings` rows `(time_ns, "map"|"unmap", start, length, name)` go to the mappings
/// table; `sync` a tracer's `sync.bin` whose events go to the `sync` table. Returns the
/// counts (accesses, loads, stores, threads, skipped_lines, sync_events, and instructions
/// for lackey) and the time unit written.
#[pyfunction]
#[pyo3(signature = (format, files, out, overwrite=false, meta="{}", mappings=Vec::new(), object_bytes=4096, sep=",", with_size=false, sync=None))] // not a page size: bytes per object
#[allow(clippy::too_many_arguments)]
pub fn import_trace(
    py: Python<'_>,
    format: &str,
    files: Vec<PathBuf>,
    out: PathBuf,
    overwrite: bool,
    meta: &str,
    mappings: Vec<(u64, String, u64, u64, String)>,
    object_bytes: u64,
    sep: &str,
    with_size: bool,
    sync: Option<PathBuf>,
) -> PyResult<PyObject> {
    let meta: serde_json::Value =
        serde_json::from_str(meta).map_err(|e| PyValueError::new_err(format!("meta: {e}")))?;
    let maps: Vec<MappingRow> = mappings
        .into_iter()
        .map(|(t, ev, start, length, name)| MappingRow { time_ns: t, map: ev == "map", start, length, name })
        .collect();
    let fmt = format.to_string();
    let sep = match sep.as_bytes() {
        [b] if b.is_ascii() => *b,
        _ => {
            return Err(PyValueError::new_err(format!(
                "sep {sep:?}: the field separator must be one ASCII character"
            )))
        }
    };
    let res =
        py.allow_threads(move || -> Result<(ImportCounts, TimeUnit, Option<u64>, u64), RecordingError> {
            let sync_events = match &sync {
                Some(p) => Some(import::read_sync_file(p)?),
                None => None,
            };
            let with_size =
                with_size || (fmt == "raw" && files.iter().all(|f| f.with_extension("size").is_file()));
            let opts = WriterOptions { overwrite, with_size, ..Default::default() };
            let source = meta.get("source").and_then(|s| s.as_str()).unwrap_or("tierlab import").to_string();
            let mut w = RecordingWriter::create(&out, &source, opts)?;
            if let Some(m) = meta.as_object() {
                for (k, v) in m {
                    if !["format", "version", "complete", "tables", "created"].contains(&k.as_str()) {
                        w.meta_mut().insert(k.clone(), v.clone());
                    }
                }
            }
            let (counts, unit, instr) = match fmt.as_str() {
                "raw" => {
                    let (c, timed) = import::import_raw(&files, &mut w)?;
                    (c, if timed { TimeUnit::Ns } else { TimeUnit::Accesses }, None)
                }
                "csv" => {
                    let total =
                        import::import_csv_files(&files, &import::CsvOptions { sep }, &mut w, with_size)?;
                    let unit = meta
                        .get("time_unit")
                        .and_then(|u| u.as_str())
                        .and_then(TimeUnit::parse)
                        .unwrap_or(TimeUnit::Ns);
                    (total, unit, None)
                }
                "oracle-general" => {
                    let mut total = ImportCounts::default();
                    for f in &files {
                        let c = import::import_oracle_general(f, object_bytes, &mut w)?;
                        total.accesses += c.accesses;
                        total.loads += c.loads;
                        total.threads = total.threads.max(c.threads);
                    }
                    (total, TimeUnit::Accesses, None)
                }
                "lackey" => {
                    let [f] = files.as_slice() else {
                        return Err(RecordingError::file("lackey", "give exactly one lackey log file"));
                    };
                    let (c, instr) = import_lackey(f, &mut w)?;
                    (c, TimeUnit::Instructions, Some(instr))
                }
                other => return Err(RecordingError::file(other, "unknown trace format")),
            };
            w.meta_mut().insert("time_unit".into(), serde_json::json!(unit.as_str()));
            if !maps.is_empty() {
                w.write_mappings(&maps)?;
            }
            let n_sync = sync_events.as_ref().map_or(0, |e| e.len() as u64);
            if let Some(events) = sync_events {
                w.write_sync(&events)?;
            }
            w.close()?;
            Ok((counts, unit, instr, n_sync))
        });
    let (counts, unit, instr, n_sync) = res.map_err(err)?;
    let d = counts_dict(py, &counts)?;
    d.set_item("sync_events", n_sync)?;
    d.set_item("time_unit", unit.as_str())?;
    if let Some(i) = instr {
        d.set_item("instructions", i)?;
    }
    Ok(d.into_py(py))
}

/// Export the accesses of recording `dir` to `out` as `format` (`oracle-general`, `lcs`,
/// `valpin`, `ramulator`, `champsim`, `csv`), streaming; `object_bytes` is the object size of
/// the libCacheSim formats (64: lines, 4096: pages), `threads` the threads to keep (default:
/// all). Returns the counts (accesses, loads, stores, threads, objects, bytes). Ctrl-C stops
/// it (KeyboardInterrupt) and leaves nothing at `out`.
#[pyfunction]
#[pyo3(signature = (dir, format, out, object_bytes=4096, threads=None))] // not a page size: bytes per object
pub fn export_trace(
    py: Python<'_>,
    dir: PathBuf,
    format: &str,
    out: PathBuf,
    object_bytes: u64,
    threads: Option<Vec<u32>>,
) -> PyResult<PyObject> {
    use tierlab_core::recording::export::{export, ExportCounts, ExportOptions, Format};
    let Some(fmt) = Format::parse(format) else {
        let names: Vec<&str> = Format::ALL.iter().map(|(n, _)| *n).collect();
        return Err(PyValueError::new_err(format!(
            "unknown trace format {format:?} (expected one of {})",
            names.join(", ")
        )));
    };
    let mut threads = threads;
    if let Some(t) = threads.as_mut() {
        t.sort_unstable();
        t.dedup();
    }
    let interrupted = std::sync::atomic::AtomicBool::new(false);
    let res = py.allow_threads(|| -> Result<ExportCounts, RecordingError> {
        let meta = tierlab_core::recording::read_meta(&dir)?;
        let unit = tierlab_core::recording::time_unit(&meta);
        let table = tierlab_core::recording::AccessTable::open(&dir)?;
        let opts = ExportOptions { format: fmt, object_bytes, threads, ..Default::default() };
        let stop = || {
            let hit = Python::with_gil(|py| py.check_signals().is_err());
            if hit {
                interrupted.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            hit
        };
        export(&table, unit, &out, &opts, &stop)
    });
    if interrupted.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(pyo3::exceptions::PyKeyboardInterrupt::new_err("interrupted"));
    }
    let c = res.map_err(err)?;
    let d = PyDict::new_bound(py);
    d.set_item("accesses", c.accesses)?;
    d.set_item("loads", c.loads)?;
    d.set_item("stores", c.stores)?;
    d.set_item("threads", c.threads)?;
    d.set_item("objects", c.objects)?;
    d.set_item("bytes", c.bytes)?;
    Ok(d.into_py(py))
}

fn open_table(dir: &Path) -> PyResult<tierlab_core::recording::AccessTable> {
    tierlab_core::recording::AccessTable::open(dir).map_err(err)
}

/// One pass over a recording's accesses: `{rows, time_min, time_max, threads, pages, runs}`
/// (runs of touched pages as `(start, end)`, merged across holes under `gap` bytes).
#[pyfunction]
#[pyo3(signature = (dir, gap=0))]
pub fn survey_accesses(py: Python<'_>, dir: PathBuf, gap: u64) -> PyResult<PyObject> {
    let s = py
        .allow_threads(|| -> Result<aggregate::Survey, RecordingError> {
            aggregate::survey(&tierlab_core::recording::AccessTable::open(&dir)?)
        })
        .map_err(err)?;
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for r in s.runs {
        match runs.last_mut() {
            Some(l) if r.0 - l.1 < gap.max(1) => l.1 = r.1,
            _ => runs.push(r),
        }
    }
    let d = PyDict::new_bound(py);
    d.set_item("rows", s.rows)?;
    d.set_item("time_min", s.time_range.0)?;
    d.set_item("time_max", s.time_range.1)?;
    d.set_item("threads", s.threads)?;
    d.set_item("pages", s.pages)?;
    d.set_item("runs", runs)?;
    Ok(d.into_py(py))
}

/// Per-mapping aggregates of a recording's accesses for `tierlab view`: `segments` are
/// `(lo, hi, t0, t1, mapping index)`, `specs` `(base, pages, group)` per mapping; time bins
/// start at `t_lo`, `width` wide, `cols` of them. Returns `(list of dicts, unassigned)`; a
/// dict holds accesses, pages_touched, threads, first_ns, last_ns, counts (little-endian u64
/// bytes, rows x cols), hist_n and hist_pages.
#[pyfunction]
pub fn aggregate_accesses(
    py: Python<'_>,
    dir: PathBuf,
    segments: Vec<(u64, u64, u64, u64, usize)>,
    specs: Vec<(u64, u64, u64)>,
    t_lo: u64,
    width: u64,
    cols: usize,
) -> PyResult<(PyObject, u64)> {
    let table = open_table(&dir)?;
    let segs: Vec<aggregate::Segment> = segments
        .into_iter()
        .map(|(lo, hi, t0, t1, mapping)| aggregate::Segment { lo, hi, t0, t1, mapping })
        .collect();
    let specs: Vec<aggregate::MapSpec> =
        specs.into_iter().map(|(base, pages, group)| aggregate::MapSpec { base, pages, group }).collect();
    let bins = aggregate::Bins { t_lo, width, cols: cols.max(1) };
    let (aggs, unassigned) =
        py.allow_threads(|| aggregate::aggregate(&table, &segs, &specs, bins)).map_err(err)?;
    let out = pyo3::types::PyList::empty_bound(py);
    for g in aggs {
        let d = PyDict::new_bound(py);
        d.set_item("accesses", g.accesses)?;
        d.set_item("pages_touched", g.pages_touched)?;
        d.set_item("threads", g.threads)?;
        d.set_item("first_ns", g.time_range.map(|r| r.0))?;
        d.set_item("last_ns", g.time_range.map(|r| r.1))?;
        let bytes: Vec<u8> = g.counts.iter().flat_map(|v| v.to_le_bytes()).collect();
        d.set_item("counts", pyo3::types::PyBytes::new_bound(py, &bytes))?;
        d.set_item("hist_n", g.hist.keys().copied().collect::<Vec<u64>>())?;
        d.set_item("hist_pages", g.hist.values().copied().collect::<Vec<u64>>())?;
        out.append(d)?;
    }
    Ok((out.into_py(py), unassigned))
}

/// Register the functions and exceptions of this module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TraceFormatError", m.py().get_type_bound::<TraceFormatError>())?;
    m.add_function(wrap_pyfunction!(import_trace, m)?)?;
    m.add_function(wrap_pyfunction!(export_trace, m)?)?;
    m.add_function(wrap_pyfunction!(survey_accesses, m)?)?;
    m.add_function(wrap_pyfunction!(aggregate_accesses, m)?)?;
    Ok(())
}
