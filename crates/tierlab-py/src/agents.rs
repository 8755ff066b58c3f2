//! Agents written in Python (`kind = "python"`): the host the engine asks to build them
//! ([`PyHost`]), the adapters that run a Python object as a telemetry technique
//! ([`PyObserver`]), a tiering policy ([`PyTiering`]) or a replacement policy
//! ([`PyReplacement`]), and the context a hook receives ([`NativeContext`]).
//!
//! The Python side is `tierlab.agents`: it loads the class, checks its parameters, wraps the
//! native context in the user-facing one (numpy arrays in and out) and turns an exception
//! into one message naming the user's file and line (`tierlab.agents._host`). Every call
//! into Python takes the GIL (already held: a run holds it); the engine's hot path never
//! calls Python, except a replacement policy's per-fault callbacks.
//!
//! A [`NativeContext`] holds a raw pointer to the engine's context of the hook under way;
//! the pointer is cleared when the hook returns, and any later use raises
//! `RuntimeError` instead of touching freed memory.

use std::cell::Cell;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::Arc;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use tierlab_sim::agents::telemetry::{HotReport, Observer, ObserverCtx, TelemetryBuildCtx, TelemetryShared};
use tierlab_sim::agents::tiering::{TieringBuildCtx, TieringCtx, TieringPolicy, TieringShared};
use tierlab_sim::agents::{Drain, Feed, FeedKind, MachineView, RegionSnapshot, SnapRegion};
use tierlab_sim::hw::pagetable::Level;
use tierlab_sim::os::replacement::{Frames, PageId, PolicyBuildCtx, Replacement};
use tierlab_sim::os::Flush;
use tierlab_sim::params::{External, Unshared};
use tierlab_sim::stats::Stats;
use tierlab_sim::units::Ps;
use tierlab_sim::{Result, SimError};

static HOST_MODULE: GILOnceCell<Py<PyModule>> = GILOnceCell::new();

fn host(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    Ok(HOST_MODULE
        .get_or_try_init(py, || py.import_bound("tierlab.agents._host").map(Bound::unbind))?
        .bind(py))
}

/// A Python exception as one message naming the user's file and line (formatted by the
/// Python side), as the error that stops the run.
fn user_error(py: Python<'_>, e: PyErr, path: &str) -> SimError {
    let msg = host(py)
        .and_then(|h| h.call_method1("error_message", (e.clone_ref(py), path)))
        .and_then(|m| m.extract::<String>())
        .unwrap_or_else(|_| format!("{path}: {e}"));
    SimError::runtime(msg)
}

fn toml_to_py(py: Python<'_>, v: &toml::Value) -> PyResult<PyObject> {
    let j = serde_json::to_value(v).map_err(|e| PyValueError::new_err(e.to_string()))?;
    crate::json_to_py(py, &j)
}

fn u64s(py: Python<'_>, v: &[u64]) -> PyObject {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    PyBytes::new_bound(py, &bytes).into_py(py)
}

fn u32s(py: Python<'_>, v: &[u32]) -> PyObject {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    PyBytes::new_bound(py, &bytes).into_py(py)
}

fn from_u64s(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect()
}

fn kinds_of(names: &[String]) -> PyResult<Vec<FeedKind>> {
    names
        .iter()
        .map(|n| match n.as_str() {
            "regions" => Ok(FeedKind::Regions),
            "samples" => Ok(FeedKind::Samples),
            "hotset" => Ok(FeedKind::HotSet),
            other => Err(PyValueError::new_err(format!("unknown feed kind `{other}`"))),
        })
        .collect()
}

static FEED_LISTS: std::sync::Mutex<Vec<&'static [FeedKind]>> = std::sync::Mutex::new(Vec::new());

/// What the Python side says about a built agent.
struct Built {
    obj: PyObject,
    path: String,
    interval: Ps,
    accepts: Vec<FeedKind>,
    publishes: Vec<FeedKind>,
    batch: usize,
}

/// Build through `tierlab.agents._host.build`; a `HostError` becomes a configuration error
/// of `field_prefix.<field>` (or a runtime error when the class's own code raised).
#[allow(clippy::too_many_arguments)]
fn build(
    kind: &str,
    shared: &impl serde::Serialize,
    keys: &tierlab_sim::params::ExternalKeys,
    own: &toml::Table,
    seed: u64,
    label: &str,
    index: usize,
    err: &dyn Fn(&str, String) -> SimError,
) -> Result<Built> {
    Python::with_gil(|py| {
        let run = || -> PyResult<Bound<'_, PyAny>> {
            let h = host(py)?;
            let own_py = toml_to_py(py, &toml::Value::Table(own.clone()))?;
            let shared_v = toml::Value::try_from(shared).map_err(|e| PyValueError::new_err(e.to_string()))?;
            let shared_py = toml_to_py(py, &shared_v)?;
            h.call_method1("build", (kind, &keys.path, &keys.class, own_py, shared_py, seed, label, index))
        };
        let out = match run() {
            Ok(o) => o,
            Err(e) => {
                // HostError(field, message, config): located by the engine.
                let v = e.value_bound(py);
                if let (Ok(field), Ok(msg), Ok(config)) = (
                    v.getattr("field").and_then(|f| f.extract::<String>()),
                    v.getattr("message").and_then(|f| f.extract::<String>()),
                    v.getattr("config").and_then(|f| f.extract::<bool>()),
                ) {
                    return Err(if config { err(&field, msg) } else { SimError::runtime(msg) });
                }
                return Err(user_error(py, e, &keys.path));
            }
        };
        let get = || -> PyResult<Built> {
            let (obj, info): (PyObject, Bound<'_, PyDict>) = out.extract()?;
            let item = |k: &str| -> PyResult<Bound<'_, PyAny>> {
                info.get_item(k)?.ok_or_else(|| PyValueError::new_err(format!("host info lacks `{k}`")))
            };
            Ok(Built {
                obj,
                path: keys.path.clone(),
                interval: Ps::from_ps(item("interval_ps")?.extract()?),
                accepts: kinds_of(&item("accepts")?.extract::<Vec<String>>()?)?,
                publishes: kinds_of(&item("publishes")?.extract::<Vec<String>>()?)?,
                batch: item("batch")?.extract()?,
            })
        };
        get().map_err(|e| SimError::runtime(format!("{}: {e}", keys.path)))
    })
}

/// The host the engine asks to build `kind = "python"` entries.
pub struct PyHost;

impl tierlab_sim::agents::telemetry::external::TelemetryHost for PyHost {
    fn build(
        &self,
        p: &External<TelemetryShared>,
        label: &str,
        ctx: &TelemetryBuildCtx,
    ) -> Result<Box<dyn Observer>> {
        let b = build("telemetry", &p.shared, &p.keys, &p.own, ctx.seed, label, ctx.index, &|f, m| {
            ctx.err(f, m)
        })?;
        let publishes = tierlab_sim::params::intern(&b.publishes, &FEED_LISTS);
        Ok(Box::new(PyObserver { b, publishes, next: Ps::ZERO }))
    }
}

impl tierlab_sim::agents::tiering::external::TieringHost for PyHost {
    fn build(&self, p: &External<TieringShared>, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>> {
        let label = p.shared.name.clone().unwrap_or_else(|| "python".into());
        let b = build("tiering", &p.shared, &p.keys, &p.own, ctx.seed, &label, 0, &|f, m| ctx.err(f, m))?;
        if b.interval == Ps::ZERO {
            return Err(ctx.err("interval", "must be > 0"));
        }
        let accepts = tierlab_sim::params::intern(&b.accepts, &FEED_LISTS);
        Ok(Box::new(PyTiering { next: b.interval, accepts, b }))
    }
}

impl tierlab_sim::os::replacement::external::ReplacementHost for PyHost {
    fn build(&self, p: &External<Unshared>, ctx: &PolicyBuildCtx) -> Result<Box<dyn Replacement>> {
        let b = build("replacement", &p.shared, &p.keys, &p.own, ctx.seed, "python", ctx.index, &|f, m| {
            ctx.error(f, m)
        })?;
        Ok(Box::new(PyReplacement {
            resident: vec![false; ctx.pages as usize],
            queue: VecDeque::new(),
            error: None,
            capacity: ctx.frames,
            b,
        }))
    }
}

impl tierlab_sim::agents::placement::external::PlacementHost for PyHost {
    fn build(
        &self,
        p: &External<Unshared>,
        ctx: &tierlab_sim::agents::placement::PlacementBuildCtx,
    ) -> Result<Box<dyn tierlab_sim::agents::placement::PlacementPolicy>> {
        let b =
            build("placement", &p.shared, &p.keys, &p.own, ctx.seed, "placement", 0, &|f, m| ctx.err(f, m))?;
        Ok(Box::new(PyPlacement { next: b.interval, b }))
    }
}

/// Install the host (when the module loads).
pub fn install() {
    let h = Arc::new(PyHost);
    tierlab_sim::agents::placement::external::set_host(h.clone());
    tierlab_sim::agents::telemetry::external::set_host(h.clone());
    tierlab_sim::agents::tiering::external::set_host(h.clone());
    tierlab_sim::os::replacement::external::set_host(h);
}

// -- the context of a hook ----------------------------------------------------------------------

#[derive(Clone, Copy)]
enum Target {
    Gone,
    Telemetry(*mut c_void),
    Tiering(*mut c_void),
    View(*const c_void),
    Frames(*mut c_void),
}

/// The engine's context of the hook under way, for the Python side (valid only during the
/// hook). The user-facing context (`tierlab.agents.Context`) wraps it.
#[pyclass(unsendable, module = "tierlab._native")]
pub struct NativeContext {
    target: Cell<Target>,
    /// Pages the frames context may name.
    pages: u64,
    capacity: u64,
}

type AgentCtxS = tierlab_sim::agents::AgentCtx<'static, ()>;
type TieringCtxS = TieringCtx<'static, 'static>;

const GONE: &str = "the context of a hook is valid only during the hook";

fn bad(msg: impl Into<String>) -> PyErr {
    PyValueError::new_err(msg.into())
}

impl NativeContext {
    fn new(target: Target) -> Self {
        NativeContext { target: Cell::new(target), pages: 0, capacity: 0 }
    }
    fn close(&self) {
        self.target.set(Target::Gone);
    }
    /// The machine view, mutable (telemetry and tiering hooks).
    // The context is an exclusive handle the hook lent: `&self` because Python holds it.
    #[allow(clippy::mut_from_ref)]
    fn machine(&self) -> PyResult<&mut MachineView<'static>> {
        // SAFETY: the pointers are set from live `&mut` contexts by the adapters below, for
        // the duration of one call into Python, and cleared (`close`) before it returns.
        unsafe {
            match self.target.get() {
                Target::Telemetry(p) => Ok(&mut (*(p as *mut AgentCtxS)).machine),
                Target::Tiering(p) => Ok(&mut (*(p as *mut TieringCtxS)).machine),
                Target::View(_) => Err(PyRuntimeError::new_err(
                    "this hook's context is read-only (hot_set): it cannot change the machine",
                )),
                _ => Err(PyRuntimeError::new_err(GONE)),
            }
        }
    }
    /// The machine view, read-only.
    fn view(&self) -> PyResult<&MachineView<'static>> {
        // SAFETY: as `machine`.
        unsafe {
            match self.target.get() {
                Target::View(p) => Ok(&*(p as *const MachineView<'static>)),
                Target::Telemetry(_) | Target::Tiering(_) => self.machine().map(|m| &*m),
                _ => Err(PyRuntimeError::new_err(GONE)),
            }
        }
    }
    fn agent(&self) -> PyResult<(Ps, usize)> {
        // SAFETY: as `machine`.
        unsafe {
            match self.target.get() {
                Target::Telemetry(p) => {
                    let c = &*(p as *mut AgentCtxS);
                    Ok((c.now, c.core))
                }
                Target::Tiering(p) => {
                    let c = &*(p as *mut TieringCtxS);
                    Ok((c.now, c.core))
                }
                _ => Err(PyRuntimeError::new_err(GONE)),
            }
        }
    }
    // The context is an exclusive handle the hook lent: `&self` because Python holds it.
    #[allow(clippy::mut_from_ref)]
    fn tiering(&self) -> PyResult<&mut TieringCtxS> {
        // SAFETY: as `machine`.
        unsafe {
            match self.target.get() {
                Target::Tiering(p) => Ok(&mut *(p as *mut TieringCtxS)),
                Target::Gone => Err(PyRuntimeError::new_err(GONE)),
                _ => Err(PyRuntimeError::new_err("only a tiering policy's context moves pages")),
            }
        }
    }
    // The context is an exclusive handle the hook lent: `&self` because Python holds it.
    #[allow(clippy::mut_from_ref)]
    fn telemetry(&self) -> PyResult<&mut AgentCtxS> {
        // SAFETY: as `machine`.
        unsafe {
            match self.target.get() {
                Target::Telemetry(p) => Ok(&mut *(p as *mut AgentCtxS)),
                Target::Gone => Err(PyRuntimeError::new_err(GONE)),
                _ => Err(PyRuntimeError::new_err(
                    "only a telemetry technique's or a placement policy's context does this",
                )),
            }
        }
    }
    // The context is an exclusive handle the hook lent: `&self` because Python holds it.
    #[allow(clippy::mut_from_ref)]
    fn frames(&self) -> PyResult<&mut dyn Frames> {
        // SAFETY: as `machine`; the pointer is a `*mut &mut dyn Frames` of the adapter's frame.
        unsafe {
            match self.target.get() {
                Target::Frames(p) => Ok(&mut **(p as *mut &mut dyn Frames)),
                _ => Err(PyRuntimeError::new_err(GONE)),
            }
        }
    }
    fn charge(&self, t: Ps) -> PyResult<()> {
        // SAFETY: as `machine`.
        unsafe {
            match self.target.get() {
                Target::Telemetry(p) => (*(p as *mut AgentCtxS)).charge(t),
                Target::Tiering(p) => (*(p as *mut TieringCtxS)).charge(t),
                _ => return Err(PyRuntimeError::new_err(GONE)),
            }
        }
        Ok(())
    }
    /// Check that every page is the base of a page inside a mapping.
    fn check_pages(&self, vas: &[u64], what: &str) -> PyResult<()> {
        let m = self.view()?;
        for &va in vas {
            let Some(v) = m.vma_of(va) else {
                return Err(bad(format!("{what}: page {va:#x} is in no mapping of the program")));
            };
            let size = m.page_size_of(va).unwrap_or(v.page_size).bytes();
            if va % size != 0 {
                return Err(bad(format!(
                    "{what}: {va:#x} is not the start of a page (its page is {size} bytes, at {:#x})",
                    va & !(size - 1)
                )));
            }
        }
        Ok(())
    }
}

fn level_of(name: &str) -> PyResult<Level> {
    match name {
        "pte" => Ok(Level::Pte),
        "pmd" => Ok(Level::Pmd),
        "pud" => Ok(Level::Pud),
        other => Err(bad(format!("level `{other}`: expected pte, pmd or pud"))),
    }
}

#[pymethods]
impl NativeContext {
    /// Current simulated time, ps.
    fn now_ps(&self) -> PyResult<u64> {
        Ok(self.agent()?.0.ps())
    }
    /// The core the agent's work is charged to.
    fn core(&self) -> PyResult<usize> {
        Ok(self.agent()?.1)
    }
    /// Charge `ps` of the agent's own work to its core.
    fn charge_ps(&self, ps: u64) -> PyResult<()> {
        self.charge(Ps::from_ps(ps))
    }
    /// Charge `ns` (a float) of work: converted as the engine converts (`Ps::from_ns_f64`).
    fn charge_ns(&self, ns: f64) -> PyResult<()> {
        if !(ns.is_finite() && ns >= 0.0) {
            return Err(bad(format!("charge_ns({ns}): must be a finite number >= 0")));
        }
        self.charge(Ps::from_ns_f64(ns))
    }
    /// The clock of `core`, ps.
    fn core_clock_ps(&self, core: usize) -> PyResult<u64> {
        let m = self.view()?;
        if core >= m.cores() {
            return Err(bad(format!("core {core} does not exist ({} cores)", m.cores())));
        }
        Ok(m.core_clock(core).ps())
    }
    /// Cores of the machine.
    fn cores(&self) -> PyResult<usize> {
        Ok(self.view()?.cores())
    }
    /// The mappings: (starts, ends, page sizes) as little-endian u64 bytes.
    fn vmas(&self, py: Python<'_>) -> PyResult<(PyObject, PyObject, PyObject)> {
        let m = self.view()?;
        let (mut s, mut e, mut p) = (Vec::new(), Vec::new(), Vec::new());
        for v in m.vmas().values() {
            s.push(v.start);
            e.push(v.start + v.len);
            p.push(v.page_size.bytes());
        }
        Ok((u64s(py, &s), u64s(py, &e), u64s(py, &p)))
    }
    /// Memory nodes: (capacity bytes, used bytes) per node.
    fn nodes(&self) -> PyResult<Vec<(u64, u64)>> {
        let m = self.view()?;
        Ok(m.nodes()
            .iter()
            .map(|n| (tierlab_core::bytes_of(n.capacity_pages), tierlab_core::bytes_of(n.used_pages)))
            .collect())
    }
    /// What one access of `core` to `node` costs now, ps (the loaded latency in force).
    fn access_cost_ps(&self, core: usize, node: u8) -> PyResult<u64> {
        let m = self.view()?;
        if core >= m.cores() || node as usize >= m.nodes().len() {
            return Err(bad(format!("core {core} or node {node} does not exist")));
        }
        Ok(m.access_cost(core, node).ps())
    }
    /// The node of the page holding `va` (-1: not present).
    fn node_of(&self, va: u64) -> PyResult<i32> {
        Ok(self.view()?.node_of(va).map_or(-1, i32::from))
    }
    /// The size of the present page holding `va` (0: not present).
    fn page_size_of(&self, va: u64) -> PyResult<u64> {
        Ok(self.view()?.page_size_of(va).map_or(0, |p| p.bytes()))
    }
    /// The present pages of `[start, end)`, at most `max`: (bases, sizes, nodes) as bytes and
    /// where the listing stopped (see `MachineView::present_pages`).
    fn present_pages(
        &self,
        py: Python<'_>,
        start: u64,
        end: u64,
        max: usize,
    ) -> PyResult<(PyObject, PyObject, PyObject, u64)> {
        let (pages, stop) = self.view()?.present_pages(start, end, max);
        let bases: Vec<u64> = pages.iter().map(|p| p.0).collect();
        let sizes: Vec<u64> = pages.iter().map(|p| p.1).collect();
        let nodes: Vec<u8> = pages.iter().map(|p| p.2).collect();
        Ok((u64s(py, &bases), u64s(py, &sizes), PyBytes::new_bound(py, &nodes).into_py(py), stop))
    }
    /// Test (and clear when `clear`) the Accessed bit at `level` of `va`; `flush`: none,
    /// local or all (a shootdown of the page).
    #[pyo3(signature = (va, level="pte", clear=true, flush="none"))]
    fn accessed(&self, va: u64, level: &str, clear: bool, flush: &str) -> PyResult<bool> {
        let level = level_of(level)?;
        if !clear {
            return Ok(self.view()?.test_accessed(va, level));
        }
        let flush = match flush {
            "none" => Flush::None,
            "all" => Flush::Shootdown { initiator: self.agent()?.1 },
            other => return Err(bad(format!("flush `{other}`: expected none or all"))),
        };
        Ok(self.machine()?.clear_accessed(va, level, flush))
    }
    /// Read (and clear when `clear`) the leaf Accessed bits of `[start, end)` in a mapping of
    /// `page_size` pages: (entries read, run starts, run ends (base-page numbers), pages
    /// found, lo, hi).
    fn scan_accessed(
        &self,
        py: Python<'_>,
        start: u64,
        end: u64,
        page_size: u64,
        clear: bool,
    ) -> PyResult<(u64, PyObject, PyObject, u64, u64, u64)> {
        let psz = match page_size {
            s if s == tierlab_core::PAGE_SIZE => tierlab_core::PageSize::Base4K,
            s if s == tierlab_core::HUGE_SIZE => tierlab_core::PageSize::Huge2M,
            s if s == tierlab_core::HUGE_1G_SIZE => tierlab_core::PageSize::Huge1G,
            other => return Err(bad(format!("page_size {other}: expected 4096, 2 MiB or 1 GiB"))),
        };
        let r = self
            .machine()?
            .scan_accessed(start, end, psz, clear)
            .ok_or_else(|| PyRuntimeError::new_err("this memory backend has no radix page tables"))?;
        let s: Vec<u64> = r.runs.iter().map(|x| x.0).collect();
        let e: Vec<u64> = r.runs.iter().map(|x| x.1).collect();
        Ok((r.read, u64s(py, &s), u64s(py, &e), r.pages, r.lo, r.hi))
    }
    /// Invalidate the translations of `[start, end)` with one shootdown from the agent's
    /// core; its time is charged to the agent.
    fn invalidate_range(&self, start: u64, end: u64) -> PyResult<()> {
        let (_, core) = self.agent()?;
        let m = self.machine()?;
        let before = m.core_clock(core);
        m.invalidate_range(core, start, end);
        let took = m.core_clock(core) - before;
        // SAFETY: as `machine`.
        unsafe {
            match self.target.get() {
                Target::Telemetry(p) => *(*(p as *mut AgentCtxS)).cpu += took,
                Target::Tiering(p) => *(*(p as *mut TieringCtxS)).cpu += took,
                _ => {}
            }
        }
        Ok(())
    }

    // -- tiering -------------------------------------------------------------------------------

    /// (fast node, slow node).
    fn tiers(&self) -> PyResult<(u8, u8)> {
        let t = self.tiering()?.tiers();
        Ok((t.fast, t.slow))
    }
    /// Bytes the rate limit lets be promoted now.
    fn budget(&self) -> PyResult<u64> {
        Ok(self.tiering()?.kind.mover.budget())
    }
    /// Free bytes of the fast node.
    fn fast_free(&self) -> PyResult<u64> {
        Ok(self.tiering()?.fast_free())
    }
    /// Capacity of the fast node, bytes.
    fn fast_capacity(&self) -> PyResult<u64> {
        Ok(self.tiering()?.fast_capacity())
    }
    /// Whether the policy's core has time left before `until_ps`.
    fn core_free_before(&self, until_ps: u64) -> PyResult<bool> {
        Ok(self.tiering()?.core_free_before(Ps::from_ps(until_ps)))
    }
    /// Promote the pages (LE u64 bytes): (moved, stopped for lack of room).
    fn promote(&self, pages: &[u8]) -> PyResult<(u64, bool)> {
        let vas = from_u64s(pages);
        self.check_pages(&vas, "promote")?;
        self.tiering()?.promote(&vas).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }
    /// Demote the pages (LE u64 bytes): moved.
    fn demote(&self, pages: &[u8]) -> PyResult<u64> {
        let vas = from_u64s(pages);
        self.check_pages(&vas, "demote")?;
        self.tiering()?.demote(&vas).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }

    // -- telemetry -----------------------------------------------------------------------------

    /// Whether a subscriber follows this technique's feeds of `kind`.
    fn wants(&self, kind: &str) -> PyResult<bool> {
        let k = kinds_of(&[kind.to_string()])?[0];
        Ok(self.telemetry()?.wants(k))
    }
    /// Publish a region snapshot (starts, ends as LE u64 bytes; nr_accesses, ages as LE u32).
    fn publish_regions(
        &self,
        starts: &[u8],
        ends: &[u8],
        nr_accesses: &[u8],
        ages: &[u8],
        max_nr_accesses: u32,
        hot_threshold: u32,
    ) -> PyResult<()> {
        let ctx = self.telemetry()?;
        let (s, e) = (from_u64s(starts), from_u64s(ends));
        let le32 = |b: &[u8]| -> Vec<u32> {
            b.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))).collect()
        };
        let (n, a) = (le32(nr_accesses), le32(ages));
        if [e.len(), n.len(), a.len()].iter().any(|&l| l != s.len()) {
            return Err(bad("publish_regions: the arrays differ in length"));
        }
        let regions = (0..s.len())
            .map(|i| SnapRegion { start: s[i], end: e[i], nr_accesses: n[i], age: a[i] })
            .collect();
        let snap = RegionSnapshot { regions, max_nr_accesses, hot_threshold, time: ctx.now };
        ctx.publish(Feed::Regions(Arc::new(snap)));
        Ok(())
    }
    /// Publish one batch of sampled addresses (LE u64 bytes) taken on `core`.
    fn publish_samples(&self, addrs: &[u8], core: u32, index: u64) -> PyResult<()> {
        let ctx = self.telemetry()?;
        let records = from_u64s(addrs).into_iter().map(|a| (a, 0u8)).collect();
        let d = Drain { time: ctx.now, core, index, records, cost_ps: 0 };
        ctx.publish(Feed::Samples(Arc::new(vec![d])));
        Ok(())
    }

    /// Program the PEBS-like sampler of every core: one record every `period` events
    /// (loads, stores), a buffer of `capacity` records whose interrupt fires at `threshold`
    /// (the handler's time, 2,000 cycles, is charged to the sampled core by the hardware
    /// model).
    fn pebs_enable(
        &self,
        loads: bool,
        stores: bool,
        period: u64,
        capacity: usize,
        threshold: usize,
    ) -> PyResult<()> {
        if period == 0 || capacity == 0 || threshold == 0 || threshold > capacity || !(loads || stores) {
            return Err(bad(format!(
                "pebs_enable(loads={loads}, stores={stores}, period={period}, capacity={capacity}, \
                 threshold={threshold}): need loads or stores, period >= 1, 1 <= threshold <= capacity"
            )));
        }
        let m = self.machine()?;
        let ghz = m.cpu_ghz();
        m.enable_pebs(tierlab_sim::hw::pebs::PebsHwConfig {
            loads,
            stores,
            period,
            capacity,
            threshold,
            interrupt_ps: (2000.0 / ghz * 1000.0).round() as u64,
            miss_only: false,
        });
        Ok(())
    }
    /// Take the sample buffers drained since the last call (and, with `poll`, empty every
    /// core's buffer now): (addresses, cores, drain times in ps) as bytes.
    fn pebs_take(&self, py: Python<'_>, poll: bool) -> PyResult<(PyObject, PyObject, PyObject)> {
        let (now, _) = self.agent()?;
        let m = self.machine()?;
        let Some(hw) = m.pebs_mut() else {
            return Err(PyRuntimeError::new_err("PEBS is not enabled (call pebs_enable first)"));
        };
        if poll {
            hw.poll(now);
        }
        let drains = std::mem::take(&mut hw.drained);
        let (mut a, mut c, mut t) = (Vec::new(), Vec::new(), Vec::new());
        for d in &drains {
            for &(addr, _) in &d.records {
                a.push(addr);
                c.push(d.core);
                t.push(d.time.ps());
            }
        }
        Ok((u64s(py, &a), u32s(py, &c), u64s(py, &t)))
    }

    // -- placement -----------------------------------------------------------------------------

    /// The rule new pages follow: `first-touch` or `interleave`.
    fn set_placement(&self, rule: &str) -> PyResult<()> {
        let p = match rule {
            "first-touch" => tierlab_sim::os::memory::Placement::FirstTouch,
            "interleave" => tierlab_sim::os::memory::Placement::Interleave,
            other => return Err(bad(format!("placement `{other}`: expected first-touch or interleave"))),
        };
        self.telemetry()?.machine.set_placement(p);
        Ok(())
    }
    /// The preferred-node plan consulted at every fault (starts, ends as LE u64 bytes, nodes
    /// as bytes): sorted, disjoint ranges.
    fn set_plan(&self, starts: &[u8], ends: &[u8], nodes: &[u8]) -> PyResult<()> {
        let (s, e) = (from_u64s(starts), from_u64s(ends));
        if e.len() != s.len() || nodes.len() != s.len() {
            return Err(bad("set_plan: the arrays differ in length"));
        }
        let ctx = self.telemetry()?;
        let n = ctx.machine.nodes().len();
        let mut plan = Vec::with_capacity(s.len());
        for i in 0..s.len() {
            if e[i] <= s[i] || (i > 0 && s[i] < e[i - 1]) {
                return Err(bad(format!(
                    "set_plan: range {i} [{:#x}, {:#x}) is empty or not after the previous one",
                    s[i], e[i]
                )));
            }
            if nodes[i] as usize >= n {
                return Err(bad(format!("set_plan: node {} does not exist ({n} nodes)", nodes[i])));
            }
            plan.push((s[i], e[i], nodes[i]));
        }
        ctx.machine.set_preferred(plan);
        Ok(())
    }
    /// Move the pages (LE u64 bytes) to `node` as one batch from the agent's core: pages
    /// moved (charged as a migration).
    fn move_pages(&self, pages: &[u8], node: u8) -> PyResult<u64> {
        let vas = from_u64s(pages);
        self.check_pages(&vas, "move_pages")?;
        let (now, core) = self.agent()?;
        let m = self.machine()?;
        if node as usize >= m.nodes().len() {
            return Err(bad(format!("move_pages: node {node} does not exist")));
        }
        m.start_work(core, now);
        let before = m.core_clock(core);
        let r = m.migrate_pages(&vas, node, core).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        let took = m.core_clock(core) - before;
        // SAFETY: as `machine`.
        unsafe {
            if let Target::Telemetry(p) = self.target.get() {
                *(*(p as *mut AgentCtxS)).cpu += took;
            }
        }
        Ok(r.pages)
    }

    // -- replacement ---------------------------------------------------------------------------

    /// Test and clear the Accessed bits of every PTE mapping `page`: how many were set.
    fn test_and_clear_young(&self, page: u64) -> PyResult<u32> {
        if page >= self.pages {
            return Err(bad(format!("page {page} does not exist ({} pages)", self.pages)));
        }
        Ok(self.frames()?.test_and_clear_young(page as PageId))
    }
    /// Cores mapping `page` (per-core page tables; 0 otherwise).
    fn mapcount(&self, page: u64) -> PyResult<u32> {
        if page >= self.pages {
            return Err(bad(format!("page {page} does not exist ({} pages)", self.pages)));
        }
        Ok(self.frames()?.mapcount(page as PageId))
    }
    /// Frames of fast memory.
    fn capacity(&self) -> PyResult<u64> {
        self.frames()?;
        Ok(self.capacity)
    }
}

/// Call `host.invoke(obj, method, ctx, *args)` with a context over `target`, cleared after.
fn invoke<'py>(
    py: Python<'py>,
    b: &Built,
    method: &str,
    target: Target,
    args: Vec<PyObject>,
    pages: u64,
) -> Result<Bound<'py, PyAny>> {
    let ctx = Bound::new(py, NativeContext { pages, capacity: 0, ..NativeContext::new(target) })
        .map_err(|e| SimError::runtime(e.to_string()))?;
    let mut all: Vec<PyObject> =
        vec![b.obj.clone_ref(py), method.into_py(py), ctx.clone().into_any().unbind()];
    all.extend(args);
    let r = host(py).and_then(|h| h.call_method1("invoke", PyTuple::new_bound(py, all)));
    ctx.borrow().close();
    r.map_err(|e| user_error(py, e, &b.path))
}

fn stats_of(b: &Built, prefix: &str, out: &mut Stats) {
    Python::with_gil(|py| {
        let Ok(h) = host(py) else { return };
        let Ok(d) = h.call_method1("stats", (b.obj.clone_ref(py),)) else { return };
        let Ok(items) = d.extract::<Vec<(String, Bound<'_, PyAny>)>>() else { return };
        for (k, v) in items {
            if let Ok(i) = v.extract::<u64>() {
                out.set(format!("{prefix}.{k}"), i);
            } else if let Ok(x) = v.extract::<f64>() {
                out.set(format!("{prefix}.{k}"), x);
            }
        }
    })
}

fn columns_of(b: &Built) -> Vec<(String, f64)> {
    Python::with_gil(|py| {
        host(py)
            .and_then(|h| h.call_method1("window_columns", (b.obj.clone_ref(py),)))
            .and_then(|d| d.extract::<Vec<(String, f64)>>())
            .unwrap_or_default()
    })
}

/// The next event a hook asked for (an int of ps), or `now + interval`.
fn next_of(r: &Bound<'_, PyAny>, now: Ps, interval: Ps, path: &str, method: &str) -> Result<Ps> {
    if r.is_none() {
        return Ok(now + interval);
    }
    let t: u64 = r.extract().map_err(|_| {
        SimError::runtime(format!(
            "{path}: {method} returned {}; expected None or the next event's time in ps (an int)",
            r.repr().map(|s| s.to_string()).unwrap_or_default()
        ))
    })?;
    if t <= now.ps() {
        return Err(SimError::runtime(format!(
            "{path}: {method} returned {t} ps, not after now ({} ps): the next event must be later",
            now.ps()
        )));
    }
    Ok(Ps::from_ps(t))
}

/// Run hook `method` (`start` or `on_interval`) over `target` at `now`: the time of the
/// agent's next event (the hook's answer, or `now + interval`).
fn timed(b: &Built, method: &str, target: Target, now: Ps) -> Result<Ps> {
    Python::with_gil(|py| {
        let r = invoke(py, b, method, target, vec![], 0)?;
        next_of(&r, now, b.interval, &b.path, method)
    })
}

fn feed_args(py: Python<'_>, feed: &Feed) -> Vec<PyObject> {
    match feed {
        Feed::Samples(drains) => {
            let n: usize = drains.iter().map(|d| d.records.len()).sum();
            let (mut addr, mut time, mut core) =
                (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
            for d in drains.iter() {
                for &(a, _) in &d.records {
                    addr.push(a);
                    time.push(d.time.ps());
                    core.push(d.core);
                }
            }
            vec!["samples".into_py(py), u64s(py, &addr), u64s(py, &time), u32s(py, &core)]
        }
        Feed::Regions(s) => {
            let r = &s.regions;
            let st: Vec<u64> = r.iter().map(|x| x.start).collect();
            let en: Vec<u64> = r.iter().map(|x| x.end).collect();
            let nr: Vec<u32> = r.iter().map(|x| x.nr_accesses).collect();
            let age: Vec<u32> = r.iter().map(|x| x.age).collect();
            vec![
                "regions".into_py(py),
                u64s(py, &st),
                u64s(py, &en),
                u32s(py, &nr),
                u32s(py, &age),
                s.max_nr_accesses.into_py(py),
                s.hot_threshold.into_py(py),
                s.time.ps().into_py(py),
            ]
        }
        Feed::HotSet { report, start, end } => match &**report {
            HotReport::Regions(r) => {
                let st: Vec<u64> = r.iter().map(|x| x.0).collect();
                let en: Vec<u64> = r.iter().map(|x| x.1).collect();
                vec![
                    "hotset-regions".into_py(py),
                    u64s(py, &st),
                    u64s(py, &en),
                    start.ps().into_py(py),
                    end.ps().into_py(py),
                ]
            }
            HotReport::Pages(p) => vec![
                "hotset-pages".into_py(py),
                u64s(py, p),
                py.None(),
                start.ps().into_py(py),
                end.ps().into_py(py),
            ],
        },
    }
}

// -- tiering ------------------------------------------------------------------------------------

/// A Python tiering policy.
pub struct PyTiering {
    b: Built,
    next: Ps,
    accepts: &'static [FeedKind],
}

fn tiering_target(ctx: &mut TieringCtx) -> Target {
    Target::Tiering(ctx as *mut TieringCtx as *mut c_void)
}

impl TieringPolicy for PyTiering {
    fn start(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        self.next = timed(&self.b, "start", tiering_target(ctx), ctx.now)?;
        Ok(())
    }
    fn next_event(&self) -> Ps {
        self.next
    }
    fn on_event(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        self.next = ctx.now + self.b.interval;
        self.next = timed(&self.b, "on_interval", tiering_target(ctx), ctx.now)?;
        Ok(())
    }
    fn on_feed(&mut self, feed: &Feed, ctx: &mut TieringCtx) -> Result<()> {
        Python::with_gil(|py| {
            let args = feed_args(py, feed);
            invoke(py, &self.b, "on_feed", tiering_target(ctx), args, 0).map(drop)
        })
    }
    fn window_columns(&self) -> Vec<(String, f64)> {
        columns_of(&self.b)
    }
    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        stats_of(&self.b, prefix, out)
    }
    fn period(&self) -> Option<Ps> {
        Some(self.b.interval)
    }
    fn accepts(&self) -> Option<&'static [FeedKind]> {
        Some(self.accepts)
    }
}

// -- telemetry ----------------------------------------------------------------------------------

/// A Python telemetry technique.
pub struct PyObserver {
    b: Built,
    publishes: &'static [FeedKind],
    next: Ps,
}

fn telemetry_target(ctx: &mut ObserverCtx) -> Target {
    Target::Telemetry(ctx as *mut ObserverCtx as *mut c_void)
}

impl Observer for PyObserver {
    fn start(&mut self, ctx: &mut ObserverCtx) -> Result<()> {
        self.next = timed(&self.b, "start", telemetry_target(ctx), ctx.now)?;
        Ok(())
    }
    fn next_event(&self) -> Ps {
        self.next
    }
    fn on_event(&mut self, ctx: &mut ObserverCtx) -> Result<()> {
        self.next = timed(&self.b, "on_interval", telemetry_target(ctx), ctx.now)?;
        Ok(())
    }
    fn publishes(&self) -> &'static [FeedKind] {
        self.publishes
    }
    fn hot_set(&mut self, start: Ps, end: Ps, machine: &MachineView) -> HotReport {
        Python::with_gil(|py| {
            let target = Target::View(machine as *const MachineView as *const c_void);
            let r =
                invoke(py, &self.b, "hot_set", target, vec![start.ps().into_py(py), end.ps().into_py(py)], 0);
            // The Python side checked the report and returns (kind, a, b) as bytes.
            let parsed = r.and_then(|r| {
                r.extract::<(String, Vec<u8>, Vec<u8>)>().map_err(|e| SimError::runtime(e.to_string()))
            });
            match parsed {
                Ok((k, a, b)) if k == "regions" => {
                    HotReport::Regions(from_u64s(&a).into_iter().zip(from_u64s(&b)).collect())
                }
                Ok((_, a, _)) => HotReport::Pages(from_u64s(&a)),
                Err(e) => {
                    // Reported when the technique's next hook runs (hot_set cannot fail).
                    let _ = host(py).and_then(|h| {
                        h.call_method1("defer_error", (self.b.obj.clone_ref(py), e.to_string()))
                    });
                    HotReport::Regions(Vec::new())
                }
            }
        })
    }
    fn window_columns(&self) -> Vec<(String, f64)> {
        columns_of(&self.b)
    }
    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        stats_of(&self.b, prefix, out)
    }
    fn finish(&mut self, ctx: &mut ObserverCtx) -> Result<()> {
        Python::with_gil(|py| invoke(py, &self.b, "finish", telemetry_target(ctx), vec![], 0).map(drop))
    }
}

// -- placement ----------------------------------------------------------------------------------

/// A Python placement policy.
pub struct PyPlacement {
    b: Built,
    next: Ps,
}

impl tierlab_sim::agents::placement::PlacementPolicy for PyPlacement {
    fn mode(&self) -> String {
        "python".into()
    }
    fn prepare(&mut self, ctx: &mut tierlab_sim::agents::AgentCtx) -> Result<()> {
        Python::with_gil(|py| invoke(py, &self.b, "prepare", telemetry_target(ctx), vec![], 0).map(drop))
    }
    fn start(&mut self, ctx: &mut tierlab_sim::agents::AgentCtx) -> Result<()> {
        self.next = timed(&self.b, "start", telemetry_target(ctx), ctx.now)?;
        Ok(())
    }
    fn next_event(&self) -> Ps {
        self.next
    }
    fn on_event(&mut self, ctx: &mut tierlab_sim::agents::AgentCtx) -> Result<()> {
        self.next = timed(&self.b, "on_interval", telemetry_target(ctx), ctx.now)?;
        Ok(())
    }
    fn finish(&mut self, ctx: &mut tierlab_sim::agents::AgentCtx) -> Result<()> {
        Python::with_gil(|py| invoke(py, &self.b, "finish", telemetry_target(ctx), vec![], 0).map(drop))
    }
    fn report_stats(&self, out: &mut Stats) {
        stats_of(&self.b, "placement", out)
    }
}

// -- replacement --------------------------------------------------------------------------------

/// A Python replacement policy.
pub struct PyReplacement {
    b: Built,
    /// Which pages are resident (the adapter's own record, to check victims).
    resident: Vec<bool>,
    /// Victims chosen ahead (the batched form), used in order while they stay resident.
    queue: VecDeque<PageId>,
    error: Option<SimError>,
    capacity: u64,
}

impl PyReplacement {
    fn call(
        &mut self,
        py: Python<'_>,
        method: &str,
        f: &mut dyn Frames,
        args: Vec<PyObject>,
    ) -> Option<PyObject> {
        if self.error.is_some() {
            return None;
        }
        let mut fr: &mut dyn Frames = f;
        let target = Target::Frames(&mut fr as *mut &mut dyn Frames as *mut c_void);
        let ctx = match Bound::new(
            py,
            NativeContext {
                pages: self.resident.len() as u64,
                capacity: self.capacity,
                ..NativeContext::new(target)
            },
        ) {
            Ok(c) => c,
            Err(e) => {
                self.error = Some(SimError::runtime(e.to_string()));
                return None;
            }
        };
        let mut all: Vec<PyObject> =
            vec![self.b.obj.clone_ref(py), method.into_py(py), ctx.clone().into_any().unbind()];
        all.extend(args);
        let r = host(py).and_then(|h| h.call_method1("invoke", PyTuple::new_bound(py, all)));
        ctx.borrow().close();
        match r {
            Ok(v) => Some(v.unbind()),
            Err(e) => {
                self.error = Some(user_error(py, e, &self.b.path));
                None
            }
        }
    }
    fn ensure(&mut self, page: PageId) {
        if self.resident.len() <= page as usize {
            self.resident.resize(page as usize + 1, false);
        }
    }
    fn victim_error(&mut self, what: String) {
        if self.error.is_none() {
            self.error = Some(SimError::runtime(format!("{}: {what}", self.b.path)));
        }
    }
}

impl Replacement for PyReplacement {
    fn on_fault_in(&mut self, page: PageId, f: &mut dyn Frames) {
        self.ensure(page);
        self.resident[page as usize] = true;
        Python::with_gil(|py| {
            self.call(py, "on_fault_in", f, vec![page.into_py(py)]);
        });
    }
    fn evict(&mut self, f: &mut dyn Frames) -> PageId {
        Python::with_gil(|py| {
            if self.b.batch > 1 {
                loop {
                    while let Some(v) = self.queue.pop_front() {
                        if self.resident.get(v as usize) == Some(&true) {
                            self.resident[v as usize] = false;
                            return v;
                        }
                    }
                    let Some(r) = self.call(py, "evict_batch", f, vec![self.b.batch.into_py(py)]) else {
                        return 0;
                    };
                    match r.extract::<Vec<u8>>(py) {
                        Ok(b) if !b.is_empty() => {
                            let pages = from_u64s(&b);
                            if let Some(&p) = pages.iter().find(|&&p| p >= self.resident.len() as u64) {
                                self.victim_error(format!(
                                    "evict_batch chose page {p}, which does not exist"
                                ));
                                return 0;
                            }
                            if !pages.iter().any(|&p| self.resident[p as usize]) {
                                self.victim_error("evict_batch chose no resident page".into());
                                return 0;
                            }
                            self.queue.extend(pages.into_iter().map(|p| p as PageId));
                        }
                        _ => {
                            self.victim_error("evict_batch returned no pages".into());
                            return 0;
                        }
                    }
                }
            }
            let Some(r) = self.call(py, "evict", f, vec![]) else { return 0 };
            match r.extract::<u64>(py) {
                Ok(v) if (v as usize) < self.resident.len() && self.resident[v as usize] => {
                    self.resident[v as usize] = false;
                    v as PageId
                }
                Ok(v) => {
                    self.victim_error(format!("evict chose page {v}, which is not resident"));
                    0
                }
                Err(_) => {
                    let got = r.bind(py).repr().map(|s| s.to_string()).unwrap_or_default();
                    self.victim_error(format!("evict returned {got}; expected a page id (an int)"));
                    0
                }
            }
        })
    }
    fn remove(&mut self, page: PageId) {
        self.ensure(page);
        self.resident[page as usize] = false;
        Python::with_gil(|py| {
            // No frames in `remove`: the context offers none.
            if self.error.is_some() {
                return;
            }
            let r = host(py).and_then(|h| {
                h.call_method1("invoke", (self.b.obj.clone_ref(py), "remove", py.None(), page))
            });
            if let Err(e) = r {
                self.error = Some(user_error(py, e, &self.b.path));
            }
        });
    }
    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        stats_of(&self.b, prefix, out)
    }
    fn error(&mut self) -> Option<SimError> {
        self.error.take()
    }
}

/// Register the context type.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeContext>()?;
    install();
    Ok(())
}
