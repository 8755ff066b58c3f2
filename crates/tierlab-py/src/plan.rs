//! The placement rules of `tierlab_core::plan` for `tierlab place plan`
//! (`python/tierlab/place/plan.py`): Python reads the recording and assigns samples to
//! mappings; these functions aggregate the samples into per-page evidence and decide.
//!
//! Arrays cross as little-endian bytes (numpy `tobytes()` / `frombuffer`). Nodes are node
//! numbers on the Python side; the evidence's columns are `nodes` in the given (ascending)
//! order, so "ties to the lowest column" is "ties to the lowest node number".

use std::collections::BTreeMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use tierlab_core::plan::{self, AffinityRule, HotFastRule, Target};

fn decode<const N: usize, T>(b: &[u8], name: &str, conv: fn([u8; N]) -> T) -> PyResult<Vec<T>> {
    if !b.len().is_multiple_of(N) {
        return Err(PyValueError::new_err(format!("`{name}`: {} bytes is not a multiple of {N}", b.len())));
    }
    Ok(b.chunks_exact(N).map(|c| conv(c.try_into().expect("chunk of N bytes"))).collect())
}

fn encode<'py, T: Copy, const N: usize>(
    py: Python<'py>,
    v: impl Iterator<Item = T>,
    f: fn(T) -> [u8; N],
) -> Bound<'py, PyBytes> {
    let mut out = Vec::new();
    for x in v {
        out.extend_from_slice(&f(x));
    }
    PyBytes::new_bound(py, &out)
}

fn check_page_size(page_size: u64) -> PyResult<()> {
    if page_size == 0 || !page_size.is_power_of_two() {
        return Err(PyValueError::new_err(format!("page size {page_size}: must be a power of two")));
    }
    Ok(())
}

fn column_of(nodes: &[u32], node: u32) -> PyResult<u32> {
    nodes.iter().position(|&n| n == node).map(|i| i as u32).ok_or_else(|| {
        PyValueError::new_err(format!("node {node} is not one of the evidence's nodes {nodes:?}"))
    })
}

fn check_nodes(nodes: &[u32]) -> PyResult<()> {
    if nodes.windows(2).any(|w| w[0] >= w[1]) {
        return Err(PyValueError::new_err(format!("nodes {nodes:?}: must be ascending, without duplicates")));
    }
    Ok(())
}

/// Aggregate samples into per-page evidence (`tierlab_core::plan::aggregate`): `addr` (u64),
/// `cpu` (i64; negative: no CPU, as for trace accesses) and `weight` (u64) per sample;
/// `cpu_nodes` maps a node number to its CPUs; `nodes` (ascending) are the evidence's columns.
/// Returns `{"pages": u64 bytes (page addresses, ascending), "evidence": u64 bytes (pages x
/// nodes, row-major), "total": u64 bytes (every sample's weight, per page),
/// "points_on_cpus_without_node": int, "cpus_without_node": [int]}`.
#[pyfunction]
fn plan_evidence<'py>(
    py: Python<'py>,
    addr: &[u8],
    cpu: &[u8],
    weight: &[u8],
    page_size: u64,
    cpu_nodes: BTreeMap<u32, Vec<u32>>,
    nodes: Vec<u32>,
) -> PyResult<Bound<'py, PyDict>> {
    check_page_size(page_size)?;
    check_nodes(&nodes)?;
    let addr = decode(addr, "addr", u64::from_le_bytes)?;
    let cpu = decode(cpu, "cpu", i64::from_le_bytes)?;
    let weight = decode(weight, "weight", u64::from_le_bytes)?;
    if cpu.len() != addr.len() || weight.len() != addr.len() {
        return Err(PyValueError::new_err(format!(
            "addr, cpu and weight differ in length ({}, {}, {})",
            addr.len(),
            cpu.len(),
            weight.len()
        )));
    }
    let mut cpu_node: Vec<Option<u32>> = Vec::new();
    for (&node, cpus) in &cpu_nodes {
        let col = column_of(&nodes, node)?;
        for &c in cpus {
            let c = c as usize;
            if cpu_node.len() <= c {
                cpu_node.resize(c + 1, None);
            }
            if let Some(other) = cpu_node[c].filter(|&other| other != col) {
                return Err(PyValueError::new_err(format!(
                    "CPU {c} is on both node {} and node {node}",
                    nodes[other as usize]
                )));
            }
            cpu_node[c] = Some(col);
        }
    }
    let ncols = nodes.len();
    let agg = py.allow_threads(|| {
        let samples = addr.iter().zip(&cpu).zip(&weight).map(|((&a, &c), &w)| (a, u32::try_from(c).ok(), w));
        plan::aggregate(samples, &cpu_node, ncols, page_size)
    });
    let ev = &agg.evidence;
    let (mut pages, mut counts) =
        (Vec::with_capacity(ev.len() * 8), Vec::with_capacity(ev.len() * ncols * 8));
    for (a, _, c) in ev.pages() {
        pages.extend_from_slice(&a.to_le_bytes());
        c.iter().for_each(|x| counts.extend_from_slice(&x.to_le_bytes()));
    }
    let d = PyDict::new_bound(py);
    d.set_item("pages", PyBytes::new_bound(py, &pages))?;
    d.set_item("evidence", PyBytes::new_bound(py, &counts))?;
    d.set_item("total", encode(py, ev.totals().map(|(_, _, t)| t), u64::to_le_bytes))?;
    d.set_item("points_on_cpus_without_node", agg.points_on_cpus_without_node)?;
    d.set_item("cpus_without_node", agg.cpus_without_node.iter().copied().collect::<Vec<u32>>())?;
    Ok(d)
}

fn targets_to_py<'py>(
    py: Python<'py>,
    targets: &[Target],
    node_of: impl Fn(u32) -> u32,
    skipped: Vec<(&'static str, u64)>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new_bound(py);
    d.set_item("addr", encode(py, targets.iter().map(|t| t.addr), u64::to_le_bytes))?;
    d.set_item("node", encode(py, targets.iter().map(|t| node_of(t.node)), u32::to_le_bytes))?;
    let s = PyDict::new_bound(py);
    for (reason, n) in skipped {
        s.set_item(reason, n)?;
    }
    d.set_item("skipped", s)?;
    Ok(d)
}

/// The affinity rule (`tierlab_core::plan::affinity`) on `plan_evidence`'s `pages` and
/// `evidence` over `nodes`: each page to the allowed node with the most evidence (ties: the
/// lowest node), pages with less than `min_samples` from the allowed nodes left out.
/// `allowed`: node numbers (`None`: every node). Returns `{"addr": u64 bytes, "node": u32
/// bytes (node numbers), "skipped": {reason: pages}}`, pages in address order.
#[pyfunction]
#[pyo3(signature = (pages, evidence, nodes, page_size, allowed=None, min_samples=1))]
fn plan_affinity<'py>(
    py: Python<'py>,
    pages: &[u8],
    evidence: &[u8],
    nodes: Vec<u32>,
    page_size: u64,
    allowed: Option<Vec<u32>>,
    min_samples: u64,
) -> PyResult<Bound<'py, PyDict>> {
    check_page_size(page_size)?;
    check_nodes(&nodes)?;
    let pages = decode(pages, "pages", u64::from_le_bytes)?;
    let evidence = decode(evidence, "evidence", u64::from_le_bytes)?;
    if evidence.len() != pages.len() * nodes.len() {
        return Err(PyValueError::new_err(format!(
            "evidence has {} values, expected {} pages x {} nodes",
            evidence.len(),
            pages.len(),
            nodes.len()
        )));
    }
    let allowed = match allowed {
        None => None,
        Some(a) => Some(a.iter().map(|&n| column_of(&nodes, n)).collect::<PyResult<Vec<u32>>>()?),
    };
    let rule = AffinityRule { allowed, min_samples };
    let n = nodes.len();
    let plan = py.allow_threads(|| {
        let rows = pages.iter().enumerate().map(|(i, &a)| (a, page_size, &evidence[i * n..(i + 1) * n]));
        plan::affinity(rows, &rule)
    });
    targets_to_py(py, &plan.targets, |col| nodes[col as usize], plan.skipped_pages())
}

/// The hot-fast rule (`tierlab_core::plan::hot_fast`) on `plan_evidence`'s `pages` and
/// `total`: pages ranked by total (ties: lower address), the hottest to `fast_node` while
/// they fit in `fast_capacity` bytes, the rest to `slow_node` or left out; pages below
/// `min_samples` never promoted. Returns what `plan_affinity` returns.
#[pyfunction]
#[pyo3(signature = (pages, total, page_size, fast_node, fast_capacity, slow_node=None, min_samples=1))]
#[allow(clippy::too_many_arguments)]
fn plan_hot_fast<'py>(
    py: Python<'py>,
    pages: &[u8],
    total: &[u8],
    page_size: u64,
    fast_node: u32,
    fast_capacity: u64,
    slow_node: Option<u32>,
    min_samples: u64,
) -> PyResult<Bound<'py, PyDict>> {
    check_page_size(page_size)?;
    let pages = decode(pages, "pages", u64::from_le_bytes)?;
    let total = decode(total, "total", u64::from_le_bytes)?;
    if total.len() != pages.len() {
        return Err(PyValueError::new_err(format!(
            "pages and total differ in length ({}, {})",
            pages.len(),
            total.len()
        )));
    }
    let rule = HotFastRule { fast_node, fast_capacity, slow_node, min_samples };
    let plan = py
        .allow_threads(|| plan::hot_fast(pages.iter().zip(&total).map(|(&a, &t)| (a, page_size, t)), &rule));
    targets_to_py(py, &plan.targets, |n| n, plan.skipped_pages())
}

/// Register the plan functions on the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(plan_evidence, m)?)?;
    m.add_function(wrap_pyfunction!(plan_affinity, m)?)?;
    m.add_function(wrap_pyfunction!(plan_hot_fast, m)?)?;
    Ok(())
}
