//! Python bindings of tierlab, exposed as `tierlab._native`.
//!
//! Every `#[pyfunction]` and Python type of the project lives here; the engine crates stay
//! free of Python. A run's result crosses the boundary as a typed object (`result.rs`:
//! `RunOutput`) holding plain dicts and lists that the Python package turns into pandas
//! objects.

// pyo3 0.22's create_exception! checks a `gil-refs` cfg this crate does not declare.
#![allow(unexpected_cfgs)]
// pyo3 0.22's #[pyfunction] expansion converts PyErr into itself; clippy flags the generated code.
#![allow(clippy::useless_conversion)]

mod agents;
mod hugealloc;
mod live;
mod params;
mod plan;
mod result;
mod samples;
mod schema;
mod tier;
mod traces;

use std::sync::Arc;

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use tierlab_sim::driver::{Control, Progress, Simulation};
use tierlab_sim::scenario;
use tierlab_sim::stats::StatValue;
use tierlab_sim::workload::replay::ReplayData;
use tierlab_sim::workload::WorkloadConfig;
use tierlab_sim::SimError;

#[global_allocator]
static ALLOC: hugealloc::HugePageAdvice = hugealloc::HugePageAdvice;

create_exception!(
    _native,
    ScenarioError,
    PyValueError,
    "A scenario, masim config, override or input is invalid."
);
create_exception!(
    _native,
    SimulationError,
    PyRuntimeError,
    "The simulated program did something the machine cannot do."
);

fn to_py(e: SimError) -> PyErr {
    match e {
        SimError::Runtime(_) => SimulationError::new_err(e.to_string()),
        _ => ScenarioError::new_err(e.to_string()),
    }
}

fn json_to_py(py: Python<'_>, v: &serde_json::Value) -> PyResult<PyObject> {
    Ok(match v {
        serde_json::Value::Null => py.None(),
        serde_json::Value::Bool(b) => b.into_py(py),
        serde_json::Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                u.into_py(py)
            } else if let Some(i) = n.as_i64() {
                i.into_py(py)
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_py(py)
            }
        }
        serde_json::Value::String(s) => s.into_py(py),
        serde_json::Value::Array(a) => {
            let l = PyList::empty_bound(py);
            for x in a {
                l.append(json_to_py(py, x)?)?;
            }
            l.into_py(py)
        }
        serde_json::Value::Object(m) => {
            let d = PyDict::new_bound(py);
            for (k, x) in m {
                d.set_item(k, json_to_py(py, x)?)?;
            }
            d.into_py(py)
        }
    })
}

fn bytes_as<T: Copy, const N: usize>(b: &[u8], name: &str, conv: fn([u8; N]) -> T) -> PyResult<Vec<T>> {
    if !b.len().is_multiple_of(N) {
        return Err(ScenarioError::new_err(format!(
            "replay column `{name}`: {} bytes is not a multiple of {N}",
            b.len()
        )));
    }
    Ok(b.chunks_exact(N).map(|c| conv(c.try_into().expect("chunk"))).collect())
}

fn replay_from_dict(d: &Bound<'_, PyDict>) -> PyResult<ReplayData> {
    let get = |k: &str| -> PyResult<Vec<u8>> {
        match d.get_item(k)? {
            Some(v) => Ok(v
                .downcast::<PyBytes>()
                .map_err(|_| ScenarioError::new_err(format!("replay `{k}` must be bytes")))?
                .as_bytes()
                .to_vec()),
            None => Err(ScenarioError::new_err(format!("replay data has no `{k}` column"))),
        }
    };
    let addr = bytes_as(&get("addr")?, "addr", u64::from_le_bytes)?;
    let tid = bytes_as(&get("tid")?, "tid", u32::from_le_bytes)?;
    let kind = get("kind")?;
    let mut mappings = Vec::new();
    if let Some(m) = d.get_item("mappings")? {
        for item in m.iter()? {
            let (start, length, name): (u64, u64, String) = item?.extract()?;
            mappings.push((start, length, name));
        }
    }
    let data = ReplayData { addr, tid, kind, mappings };
    data.validate().map_err(to_py)?;
    Ok(data)
}

/// Run a scenario: its result as a `RunOutput` (`result.rs`).
#[pyfunction]
#[pyo3(signature = (spec, overrides=Vec::new(), seed=None, progress=None, replay=None, techniques=None))]
fn run(
    py: Python<'_>,
    spec: &str,
    overrides: Vec<String>,
    seed: Option<u64>,
    progress: Option<PyObject>,
    replay: Option<Bound<'_, PyDict>>,
    techniques: Option<Vec<String>>,
) -> PyResult<result::RunOutput> {
    let (mut sc, src) = scenario::open(spec, &overrides, seed).map_err(to_py)?;
    scenario::select_techniques(&mut sc, &src, techniques.as_deref()).map_err(to_py)?;
    let replay = match replay {
        Some(d) => Some(Arc::new(replay_from_dict(&d)?)),
        None => None,
    };
    let sim = Simulation::new(sc, &src, replay).map_err(to_py)?;
    let mut pending_err: Option<PyErr> = None;
    let mut cb = |p: Progress| -> Control {
        if let Err(e) = py.check_signals() {
            pending_err = Some(e);
            return Control::Stop;
        }
        if let Some(f) = &progress {
            if let Err(e) = f.call1(py, (p.sim_ns, p.total_ns, p.accesses)) {
                pending_err = Some(e);
                return Control::Stop;
            }
        }
        Control::Continue
    };
    let r = sim.run(&mut cb).map_err(to_py)?;
    if let Some(e) = &pending_err {
        // Ctrl-C and errors from the callback stop the run; anything but an interrupt is
        // re-raised, an interrupt returns what was done.
        if !e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) {
            return Err(e.clone_ref(py));
        }
    }
    let summary = summary(&r);
    result::run_output(py, r, summary)
}

/// Run a scenario collecting a learning dataset into `out_dir` (`rows.parquet`,
/// `dataset.json`); returns the run's summary lines.
#[pyfunction]
#[pyo3(signature = (spec, out_dir, overrides=Vec::new(), seed=None, follow=None, history=8, group_rows=131072, progress=None, replay=None))]
#[allow(clippy::too_many_arguments)]
fn dataset(
    py: Python<'_>,
    spec: &str,
    out_dir: &str,
    overrides: Vec<String>,
    seed: Option<u64>,
    follow: Option<String>,
    history: u32,
    group_rows: usize,
    progress: Option<PyObject>,
    replay: Option<Bound<'_, PyDict>>,
) -> PyResult<Vec<(String, String)>> {
    let (sc, src) = scenario::open(spec, &overrides, seed).map_err(to_py)?;
    let replay = match replay {
        Some(d) => Some(Arc::new(replay_from_dict(&d)?)),
        None => None,
    };
    let spec = tierlab_sim::driver::dataset::DatasetSpec {
        dir: std::path::PathBuf::from(out_dir),
        follow,
        history,
        group_rows,
    };
    let sim = Simulation::new(sc, &src, replay).map_err(to_py)?.with_dataset(spec).map_err(to_py)?;
    let mut pending_err: Option<PyErr> = None;
    let mut cb = |p: Progress| -> Control {
        if let Err(e) = py.check_signals() {
            pending_err = Some(e);
            return Control::Stop;
        }
        if let Some(f) = &progress {
            if let Err(e) = f.call1(py, (p.sim_ns, p.total_ns, p.accesses)) {
                pending_err = Some(e);
                return Control::Stop;
            }
        }
        Control::Continue
    };
    let r = sim.run(&mut cb).map_err(to_py)?;
    if let Some(e) = pending_err {
        return Err(e);
    }
    if let Some(e) = &r.error {
        return Err(SimulationError::new_err(e.clone()));
    }
    Ok(summary(&r))
}

fn fmt_si(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.2} G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else if a >= 1e3 {
        format!("{:.2} k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

fn fmt_bytes(b: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", units[u])
}

fn summary(r: &tierlab_sim::driver::RunResult) -> Vec<(String, String)> {
    let s = &r.stats;
    let g = |k: &str| s.get_u64(k);
    let f = |k: &str| s.get(k).map(StatValue::as_f64).unwrap_or(0.0);
    let acc = g("machine.accesses");
    let mut rows = vec![
        ("scenario".to_string(), r.scenario.name.clone()),
        ("workload".to_string(), r.scenario.workload.kind().to_string()),
        ("seed".to_string(), r.scenario.seed.to_string()),
        (
            "simulated time".to_string(),
            format!(
                "{:.3} s{}",
                f("run.simulated_seconds"),
                if r.interrupted { " (interrupted)" } else { "" }
            ),
        ),
        ("windows".to_string(), g("run.windows").to_string()),
        (
            "accesses".to_string(),
            format!(
                "{} ({} reads, {} writes)",
                fmt_si(acc as f64),
                fmt_si(g("machine.reads") as f64),
                fmt_si(g("machine.writes") as f64)
            ),
        ),
        (
            "TLB misses".to_string(),
            format!(
                "{} ({:.2}% of accesses)",
                fmt_si(g("machine.tlb.misses") as f64),
                100.0 * g("machine.tlb.misses") as f64 / acc.max(1) as f64
            ),
        ),
        ("page faults".to_string(), fmt_si(g("machine.page_faults") as f64)),
    ];
    let sim_s = f("run.simulated_seconds");
    if sim_s > 0.0 {
        rows.push((
            "accesses per simulated ms".to_string(),
            format!("{:.0}", acc as f64 / (sim_s * 1e3) / g("run.threads").max(1) as f64) + " per thread",
        ));
    }
    for (name, _) in s.iter().filter(|(k, _)| k.starts_with("node.") && k.ends_with(".accesses")) {
        let node = &name["node.".len()..name.len() - ".accesses".len()];
        let a = g(name);
        rows.push((
            format!("node {node}"),
            format!(
                "{:.1}% of accesses, {} resident of {}",
                100.0 * a as f64 / acc.max(1) as f64,
                fmt_bytes(g(&format!("node.{node}.resident_bytes"))),
                fmt_bytes(g(&format!("node.{node}.capacity_bytes")))
            ),
        ));
    }
    let rate = if r.wall_seconds > 0.0 { acc as f64 / r.wall_seconds } else { 0.0 };
    rows.push((
        "wall time".to_string(),
        format!("{:.2} s ({} simulated accesses/s)", r.wall_seconds, fmt_si(rate)),
    ));
    rows
}

/// Print a scenario fully expanded.
#[pyfunction]
#[pyo3(signature = (spec, overrides=Vec::new(), seed=None))]
fn export(spec: &str, overrides: Vec<String>, seed: Option<u64>) -> PyResult<String> {
    let (mut sc, src) = scenario::open(spec, &overrides, seed).map_err(to_py)?;
    if sc.duration.is_none() && !matches!(sc.workload, WorkloadConfig::Replay(_)) {
        let ctx = scenario::build_ctx(&sc, &src);
        let w = sc.workload.build(&ctx).map_err(to_py)?;
        if let Some(d) = w.natural_duration() {
            sc.duration = Some(tierlab_sim::units::Duration(d.whole_ns()));
        }
    }
    Ok(scenario::export(&sc))
}

/// The engine's estimate of the memory a run of the scenario holds (bytes; the parts that
/// grow with its numbers: TLBs, caches, per-window results; `driver::budget`), as the run
/// itself checks it against the host's memory before it starts.
#[pyfunction]
#[pyo3(signature = (spec, overrides=Vec::new(), seed=None))]
fn estimate_memory(spec: &str, overrides: Vec<String>, seed: Option<u64>) -> PyResult<u64> {
    let (sc, src) = scenario::open(spec, &overrides, seed).map_err(to_py)?;
    let mut end_ns = sc.duration.map(|d| d.0).unwrap_or(0);
    if end_ns == 0 && !matches!(sc.workload, WorkloadConfig::Replay(_)) {
        let ctx = scenario::build_ctx(&sc, &src);
        let w = sc.workload.build(&ctx).map_err(to_py)?;
        end_ns = w.natural_duration().map(|d| d.whole_ns()).unwrap_or(0);
    }
    let agents = sc.telemetry.len() + sc.placement.is_some() as usize + sc.tiering.is_some() as usize;
    let parts = tierlab_sim::driver::budget::estimate(&sc, end_ns, agents);
    Ok(parts.iter().fold(0u64, |a, p| a.saturating_add(p.bytes)))
}

/// The directory a scenario's relative paths (a replayed recording, a policy file) are
/// resolved against.
#[pyfunction]
#[pyo3(signature = (spec, overrides=Vec::new()))]
fn scenario_base_dir(spec: &str, overrides: Vec<String>) -> PyResult<String> {
    let (_, src) = scenario::open(spec, &overrides, None).map_err(to_py)?;
    Ok(src.base_dir.to_string_lossy().to_string())
}

/// The built-in scenarios: (name, description).
#[pyfunction]
fn builtin_scenarios() -> Vec<(String, String)> {
    scenario::BUILTINS.iter().map(|b| (b.name.to_string(), b.description.to_string())).collect()
}

/// The recording directory a replay scenario needs, or None.
#[pyfunction]
#[pyo3(signature = (spec, overrides=Vec::new()))]
fn replay_path(spec: &str, overrides: Vec<String>) -> PyResult<Option<String>> {
    let (sc, src) = scenario::open(spec, &overrides, None).map_err(to_py)?;
    Ok(match &sc.workload {
        WorkloadConfig::Replay(p) => {
            let path = std::path::Path::new(&p.path);
            Some(if path.is_absolute() {
                p.path.clone()
            } else {
                src.base_dir.join(path).to_string_lossy().to_string()
            })
        }
        _ => None,
    })
}

/// A sweep's name and its points: (label, overrides).
type SweepPoints = (String, Vec<(String, Vec<String>)>);

/// A scenario's sweep: (name, [(label, [overrides])]) (no points when it has none).
#[pyfunction]
#[pyo3(signature = (spec, overrides=Vec::new()))]
fn sweep_points(spec: &str, overrides: Vec<String>) -> PyResult<SweepPoints> {
    let (sc, _) = scenario::open(spec, &overrides, None).map_err(to_py)?;
    Ok((sc.report.sweep_name.clone(), sc.sweep.iter().map(|p| (p.label.clone(), p.set.clone())).collect()))
}

/// A scenario's telemetry techniques: [(label, kind)].
#[pyfunction]
#[pyo3(signature = (spec, overrides=Vec::new()))]
fn techniques(spec: &str, overrides: Vec<String>) -> PyResult<Vec<(String, String)>> {
    let (sc, _) = scenario::open(spec, &overrides, None).map_err(to_py)?;
    Ok(sc.telemetry.iter().map(|t| (t.label(), t.kind().to_string())).collect())
}

/// Engine benchmarks: simulated accesses per second.
#[pyfunction]
#[pyo3(signature = (quick=false))]
fn bench_engine(py: Python<'_>, quick: bool) -> PyResult<PyObject> {
    let r = py.allow_threads(|| tierlab_sim::bench::engine(quick)).map_err(to_py)?;
    let d = PyDict::new_bound(py);
    for (k, v) in r {
        d.set_item(k, v)?;
    }
    Ok(d.into_py(py))
}

/// Replay a page trace (little-endian u64 page numbers) through replacement policy `kind`
/// (default parameters, every access visible: no TLB) with `capacity` frames:
/// `(requests, misses, seconds)`, the time covering the whole replay.
#[pyfunction]
fn policy_replay(py: Python<'_>, kind: &str, pages: &[u8], capacity: u64) -> PyResult<(u64, u64, f64)> {
    let trace = bytes_as(pages, "pages", u64::from_le_bytes)?;
    py.allow_threads(|| {
        let t = std::time::Instant::now();
        let o = tierlab_sim::os::replacement::replay_trace(kind, &trace, capacity)?;
        Ok((o.requests, o.misses, t.elapsed().as_secs_f64()))
    })
    .map_err(to_py)
}

/// The registered replacement policies.
#[pyfunction]
fn policy_kinds() -> Vec<String> {
    tierlab_sim::os::replacement::PolicyConfig::kinds().iter().map(|s| s.to_string()).collect()
}

/// The `tierlab._native` module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(dataset, m)?)?;
    m.add_class::<samples::PySampleSet>()?;
    m.add_function(wrap_pyfunction!(export, m)?)?;
    m.add_function(wrap_pyfunction!(estimate_memory, m)?)?;
    m.add_function(wrap_pyfunction!(scenario_base_dir, m)?)?;
    m.add_function(wrap_pyfunction!(builtin_scenarios, m)?)?;
    m.add_function(wrap_pyfunction!(replay_path, m)?)?;
    m.add_function(wrap_pyfunction!(bench_engine, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_points, m)?)?;
    m.add_function(wrap_pyfunction!(techniques, m)?)?;
    m.add_function(wrap_pyfunction!(policy_replay, m)?)?;
    m.add_function(wrap_pyfunction!(policy_kinds, m)?)?;
    m.add("ScenarioError", m.py().get_type_bound::<ScenarioError>())?;
    m.add("SimulationError", m.py().get_type_bound::<SimulationError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    agents::register(m)?;
    live::register(m)?;
    params::register(m)?;
    plan::register(m)?;
    result::register(m)?;
    schema::register(m)?;
    tier::register(m)?;
    traces::register(m)?;
    Ok(())
}
