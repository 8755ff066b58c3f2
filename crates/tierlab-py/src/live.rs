//! Python bindings of the live recorder (`tierlab-live`): `LiveRecorder` (launch / attach,
//! poll, finish), its configuration (`recorder_config_fields`: every field's default, unit,
//! range and description, from `tierlab_live::config`; `recorder_config`: a configuration
//! checked by the Rust type), backend detection, and the streaming lackey parser of
//! `tierlab trace`.
//!
//! Columns cross the boundary as little-endian bytes (numpy `frombuffer` turns them into
//! arrays without copying row by row); mapping events as a list of tuples.

use pyo3::create_exception;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString};

use tierlab_live::config::{ConfigError, RecorderConfig};
use tierlab_live::events::{Backend, Pmus};
use tierlab_live::lackey;

create_exception!(
    _native,
    LiveError,
    PyRuntimeError,
    "Live recording could not start or go on (no PMU, no permission, no such process, ...)."
);
create_exception!(
    _native,
    RecorderConfigError,
    LiveError,
    "A recorder configuration the recorder cannot take: an unknown key, a value of the wrong type or out of range (the message names it)."
);

fn config_err(e: ConfigError) -> PyErr {
    RecorderConfigError::new_err(e.to_string())
}

/// A Python value of field `field` as JSON, for serde to check against the field's type:
/// None, bool, int, float, str, or an `os.PathLike` (its `os.fspath`).
fn value_to_json(field: &'static str, v: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    use serde_json::Value;
    let wrong = |message: String| config_err(ConfigError::Type { field, message });
    if v.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = v.downcast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if v.downcast::<PyInt>().is_ok() {
        if let Ok(u) = v.extract::<u64>() {
            return Ok(Value::from(u));
        }
        if let Ok(i) = v.extract::<i64>() {
            return Ok(Value::from(i));
        }
        return Err(wrong(format!("integer {v} does not fit in 64 bits")));
    }
    if let Ok(f) = v.downcast::<PyFloat>() {
        let x = f.value();
        return serde_json::Number::from_f64(x)
            .map(Value::Number)
            .ok_or_else(|| wrong(format!("invalid value: floating point `{x}`, expected a number")));
    }
    if let Ok(s) = v.downcast::<PyString>() {
        return Ok(Value::String(s.to_str()?.to_string()));
    }
    if v.hasattr("__fspath__")? {
        let path = v.py().import_bound("os")?.call_method1("fspath", (v,))?;
        if let Ok(s) = path.downcast::<PyString>() {
            return Ok(Value::String(s.to_str()?.to_string()));
        }
        return Err(wrong("a path must be text (str), not bytes".into()));
    }
    let ty = v.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    Err(wrong(format!("invalid type: Python {ty}, expected None, bool, int, str or a path")))
}

/// A recorder configuration from keyword arguments: each key a field of [`RecorderConfig`],
/// checked by serde against the field's type, then every range.
fn config_from(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<RecorderConfig> {
    let mut pairs = Vec::new();
    for (k, v) in kwargs.into_iter().flat_map(|d| d.iter()) {
        let key: String = k.extract()?;
        let Some(field) = RecorderConfig::NAMES.iter().copied().find(|n| *n == key) else {
            return Err(config_err(ConfigError::UnknownKey(key)));
        };
        pairs.push((field, value_to_json(field, &v)?));
    }
    RecorderConfig::from_pairs(pairs).map_err(config_err)
}

/// The recorder's configuration fields, in order: `name`, `type`, `default`, `default_text`,
/// `unit`, `description`, `min`, `max` (integers), `choices`.
#[pyfunction]
fn recorder_config_fields(py: Python<'_>) -> PyResult<PyObject> {
    let fields =
        serde_json::to_value(RecorderConfig::fields()).map_err(|e| LiveError::new_err(e.to_string()))?;
    crate::json_to_py(py, &fields)
}

/// A recorder configuration checked by the recorder's own type: every field, the defaults
/// for those not given. Raises `RecorderConfigError` naming a bad key or value.
#[pyfunction]
#[pyo3(signature = (**config))]
fn recorder_config(py: Python<'_>, config: Option<&Bound<'_, PyDict>>) -> PyResult<PyObject> {
    let cfg = config_from(config)?;
    let v = serde_json::to_value(&cfg).map_err(|e| LiveError::new_err(e.to_string()))?;
    crate::json_to_py(py, &v)
}

fn le_bytes<'py, T: Copy, const N: usize>(
    py: Python<'py>,
    v: &[T],
    f: fn(T) -> [u8; N],
) -> Bound<'py, PyBytes> {
    let mut out = Vec::with_capacity(v.len() * N);
    for x in v {
        out.extend_from_slice(&f(*x));
    }
    PyBytes::new_bound(py, &out)
}

#[cfg(target_os = "linux")]
mod linux {
    use super::*;
    use std::ffi::OsString;
    use tierlab_live::session::{self, Background, Batch, Exit, Recorder};

    fn live_err(e: impl std::fmt::Display) -> PyErr {
        LiveError::new_err(e.to_string())
    }

    /// A recorder's error: a configuration value it cannot take is a `RecorderConfigError`.
    fn recorder_err(e: session::LiveError) -> PyErr {
        match e {
            session::LiveError::Config(c) => config_err(c),
            e => live_err(e),
        }
    }

    /// One column of `rows` as little-endian bytes.
    fn column<'py, R, T: Copy, const N: usize>(
        py: Python<'py>,
        rows: &[R],
        get: impl Fn(&R) -> T,
        f: fn(T) -> [u8; N],
    ) -> Bound<'py, PyBytes> {
        let mut out = Vec::with_capacity(rows.len() * N);
        for r in rows {
            out.extend_from_slice(&f(get(r)));
        }
        PyBytes::new_bound(py, &out)
    }

    fn batch_to_py<'py>(py: Python<'py>, b: &Batch) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new_bound(py);
        let s = PyDict::new_bound(py);
        let rows = &b.samples;
        s.set_item("time_ns", column(py, rows, |r| r.time_ns, u64::to_le_bytes))?;
        s.set_item("tid", column(py, rows, |r| r.tid, u32::to_le_bytes))?;
        s.set_item("cpu", column(py, rows, |r| r.cpu, u32::to_le_bytes))?;
        s.set_item("addr", column(py, rows, |r| r.addr, u64::to_le_bytes))?;
        s.set_item("ip", column(py, rows, |r| r.ip, u64::to_le_bytes))?;
        s.set_item("weight", column(py, rows, |r| r.weight, u64::to_le_bytes))?;
        s.set_item("data_src", column(py, rows, |r| r.data_src, u64::to_le_bytes))?;
        s.set_item("drain", column(py, rows, |r| r.drain, u64::to_le_bytes))?;
        d.set_item("samples", s)?;
        // Drains' columns cross as u64 whatever their type in the recording.
        let dr = PyDict::new_bound(py);
        let rows = &b.drains;
        dr.set_item("time_ns", column(py, rows, |r| r.time_ns, u64::to_le_bytes))?;
        dr.set_item("cpu", column(py, rows, |r| u64::from(r.cpu), u64::to_le_bytes))?;
        dr.set_item("drain", column(py, rows, |r| r.drain, u64::to_le_bytes))?;
        dr.set_item("records", column(py, rows, |r| u64::from(r.records), u64::to_le_bytes))?;
        d.set_item("drains", dr)?;
        let maps = PyList::empty_bound(py);
        for m in &b.mappings {
            maps.append((m.time_ns, m.event.as_str(), m.start, m.length, m.name.as_str()))?;
        }
        d.set_item("mappings", maps)?;
        let sizes = PyList::empty_bound(py);
        for p in &b.page_sizes {
            sizes.append((p.time_ns, p.start, p.end, p.name.as_str(), p.kernel_page_size, p.huge_bytes))?;
        }
        d.set_item("page_sizes", sizes)?;
        Ok(d)
    }

    /// A recording in progress: `LiveRecorder.launch(argv, ...)` or `LiveRecorder.attach(pid, ...)`,
    /// then `poll()` until `exit` is not `None`, then `finish()`.
    #[pyclass(module = "tierlab._native")]
    pub struct LiveRecorder {
        rec: Option<Background>,
    }

    /// How often the drain thread looks at the rings when no watermark wakes it (ms).
    const DRAIN_POLL_MS: i32 = 50;

    impl LiveRecorder {
        fn get(&mut self) -> PyResult<&mut Background> {
            self.rec.as_mut().ok_or_else(|| live_err("the recorder is closed"))
        }
        fn get_ref(&self) -> PyResult<&Background> {
            self.rec.as_ref().ok_or_else(|| live_err("the recorder is closed"))
        }
        fn started(rec: Recorder) -> Self {
            LiveRecorder { rec: Some(Background::start(rec, DRAIN_POLL_MS)) }
        }
    }

    #[pymethods]
    impl LiveRecorder {
        /// Fork `argv`, open the events on it, then let it exec. `config`: the fields of
        /// `recorder_config_fields()` (the others keep their defaults).
        #[staticmethod]
        #[pyo3(signature = (argv, **config))]
        fn launch(argv: Vec<OsString>, config: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
            let cfg = config_from(config)?;
            let rec = Recorder::launch(cfg, &argv).map_err(recorder_err)?;
            Ok(Self::started(rec))
        }

        /// Attach to process `pid` (every thread, and every thread it creates). `config` as
        /// for `launch`.
        #[staticmethod]
        #[pyo3(signature = (pid, **config))]
        fn attach(pid: i32, config: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
            let cfg = config_from(config)?;
            let rec = Recorder::attach(cfg, pid).map_err(recorder_err)?;
            Ok(Self::started(rec))
        }

        /// Wait up to `timeout_ms` for rows (the GIL is released) and take those the drain
        /// thread gathered: `{"samples": {col: bytes}, "drains": {col: bytes (u64)},
        /// "mappings": [...]}`.
        #[pyo3(signature = (timeout_ms=100))]
        fn poll<'py>(&mut self, py: Python<'py>, timeout_ms: u64) -> PyResult<Bound<'py, PyDict>> {
            let rec = self.get()?;
            let (batch, _) = py.allow_threads(|| rec.take(timeout_ms));
            batch_to_py(py, &batch)
        }

        /// Stop recording: drain everything left and return the last rows.
        fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            let rec = self.get()?;
            let batch = py.allow_threads(|| rec.stop());
            batch_to_py(py, &batch)
        }

        /// Close the events and rings (the target, if still running, runs on).
        fn close(&mut self) {
            self.rec = None;
        }

        /// `None` while the target runs (or its last rows are not drained yet); else
        /// `("exit", code)`, `("signal", n)` or `("gone", 0)`.
        #[getter]
        fn exit(&self) -> PyResult<Option<(&'static str, i32)>> {
            let rec = self.get_ref()?;
            if !rec.done() {
                return Ok(None);
            }
            Ok(match rec.exit() {
                None | Some(Exit::Running) => None,
                Some(Exit::Code(c)) => Some(("exit", c)),
                Some(Exit::Signal(s)) => Some(("signal", s)),
                Some(Exit::Gone) => Some(("gone", 0)),
            })
        }

        #[getter]
        fn pid(&self) -> PyResult<i32> {
            Ok(self.get_ref()?.pid)
        }

        #[getter]
        fn now_ns(&self) -> PyResult<u64> {
            Ok(self.get_ref()?.now_ns())
        }

        /// What the recording used: backend, event, encodings, ring, flags the kernel refused.
        fn parameters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            let r = self.get_ref()?;
            let d = PyDict::new_bound(py);
            d.set_item("backend", r.spec.backend.name())?;
            d.set_item("event", r.spec.name.as_str())?;
            d.set_item("perf_type", r.spec.attr.type_)?;
            d.set_item("config", format!("{:#x}", r.spec.attr.config))?;
            d.set_item("config1", format!("{:#x}", r.spec.attr.config1))?;
            d.set_item("precise_ip", r.spec.attr.precise_ip())?;
            d.set_item("period", r.spec.attr.sample_period)?;
            d.set_item("sample_type", format!("{:#x}", r.spec.attr.sample_type))?;
            d.set_item("group_leader", r.spec.leader.map(|l| format!("{:#x}", l.config)))?;
            d.set_item("ring_bytes", r.ring_bytes)?;
            d.set_item("cpus", r.cpus.clone())?;
            d.set_item("flags_dropped", r.flags_dropped.clone())?;
            d.set_item("auto_notes", r.auto_notes.clone())?;
            Ok(d)
        }

        /// The accounting: samples, lost, throttling, drains, snapshots, threads.
        fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            let r = self.get_ref()?;
            let s = &r.stats();
            let d = PyDict::new_bound(py);
            for (k, v) in [
                ("samples", s.samples),
                ("lost_records", s.lost_records),
                ("lost", s.lost),
                ("lost_samples", s.lost_samples),
                ("throttled", s.throttled),
                ("unthrottled", s.unthrottled),
                ("drains", s.drains),
                ("watermark_drains", s.watermark_drains),
                ("timer_drains", s.timer_drains),
                ("samples_without_addr", s.samples_without_addr),
                ("other_process_samples", s.other_process_samples),
                ("corrupt_rings", s.corrupt_rings),
                ("unparsed_records", s.unparsed_records),
                ("maps_snapshots", s.snapshots),
                ("max_snapshot_gap_ns", s.max_snapshot_gap_ns),
                ("threads", s.threads),
                ("smaps_reads", s.smaps_reads),
            ] {
                d.set_item(k, v)?;
            }
            d.set_item("tids", r.threads())?;
            Ok(d)
        }
    }

    pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add_class::<LiveRecorder>()
    }
}

/// Which backends this machine supports: `{"auto": name, "backends": {name: None | reason}}`.
#[pyfunction]
#[pyo3(signature = (pmus_root=None))]
fn live_backends(py: Python<'_>, pmus_root: Option<std::path::PathBuf>) -> PyResult<Bound<'_, PyDict>> {
    let pmus = pmus_root.map(Pmus::at).unwrap_or_else(Pmus::system);
    let d = PyDict::new_bound(py);
    let b = PyDict::new_bound(py);
    b.set_item(Backend::IntelPebs.name(), pmus.intel().err().map(|e| e.to_string()))?;
    b.set_item(Backend::AmdIbs.name(), pmus.amd_ibs().err().map(|e| e.to_string()))?;
    b.set_item(Backend::PageFaults.name(), None::<String>)?;
    d.set_item("backends", b)?;
    d.set_item("auto", pmus.auto().0.name())?;
    let ev = PyDict::new_bound(py);
    for backend in Backend::ALL {
        ev.set_item(backend.name(), backend.events().to_vec())?;
    }
    d.set_item("events", ev)?;
    Ok(d)
}

/// The streaming parser of lackey's `--trace-mem=yes` output.
#[pyclass(module = "tierlab._native")]
struct LackeyParser {
    parser: lackey::Parser,
    out: lackey::Accesses,
}

#[pymethods]
impl LackeyParser {
    #[new]
    fn new() -> Self {
        LackeyParser { parser: lackey::Parser::new(), out: lackey::Accesses::default() }
    }

    /// Parse a chunk; returns the accesses it completed as `{time_ns, addr, kind}` bytes
    /// (u64, u64, u8) and Valgrind's own message lines.
    fn feed<'py>(&mut self, py: Python<'py>, chunk: &[u8]) -> PyResult<Bound<'py, PyDict>> {
        self.out.clear();
        let (parser, out) = (&mut self.parser, &mut self.out);
        py.allow_threads(|| parser.feed(chunk, out)).map_err(|e| LiveError::new_err(e.to_string()))?;
        self.columns(py)
    }

    /// End of the output (a last line without newline).
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.out.clear();
        self.parser.finish(&mut self.out).map_err(|e| LiveError::new_err(e.to_string()))?;
        self.columns(py)
    }

    /// Counts so far: lines, instructions, loads, stores, modifies, accesses.
    fn counts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let p = &self.parser;
        let d = PyDict::new_bound(py);
        d.set_item("lines", p.line)?;
        d.set_item("instructions", p.instructions)?;
        d.set_item("loads", p.loads)?;
        d.set_item("stores", p.stores)?;
        d.set_item("modifies", p.modifies)?;
        d.set_item("accesses", p.accesses())?;
        Ok(d)
    }
}

impl LackeyParser {
    fn columns<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new_bound(py);
        d.set_item("time_ns", le_bytes(py, &self.out.time, u64::to_le_bytes))?;
        d.set_item("addr", le_bytes(py, &self.out.addr, u64::to_le_bytes))?;
        d.set_item("kind", PyBytes::new_bound(py, &self.out.kind))?;
        d.set_item("messages", std::mem::take(&mut self.parser.messages))?;
        Ok(d)
    }
}

/// Register the live-recording functions on the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("LiveError", m.py().get_type_bound::<LiveError>())?;
    m.add("RecorderConfigError", m.py().get_type_bound::<RecorderConfigError>())?;
    m.add_function(wrap_pyfunction!(live_backends, m)?)?;
    m.add_function(wrap_pyfunction!(recorder_config_fields, m)?)?;
    m.add_function(wrap_pyfunction!(recorder_config, m)?)?;
    m.add_class::<LackeyParser>()?;
    #[cfg(target_os = "linux")]
    linux::register(m)?;
    Ok(())
}
