//! The tiering decision of the simulator for the live loop (`tierlab tier`,
//! `python/tierlab/tier/`): `hottest-first`'s decision core
//! (`tierlab_sim::agents::tiering::hottest_first::{SampleCounts, decide}`), the same code the
//! simulated policy ranks and demotes with.
//!
//! Arrays cross as little-endian bytes (numpy `tobytes()` / `frombuffer`).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use tierlab_core::{page_addr, vpn, PAGE_SIZE};
use tierlab_sim::agents::tiering::hottest_first::{decide, Decision, SampleCounts};
use tierlab_sim::agents::tiering::memtis::{self, MemtisCounts};

fn u64s(b: &[u8], name: &str) -> PyResult<Vec<u64>> {
    if !b.len().is_multiple_of(8) {
        return Err(PyValueError::new_err(format!("`{name}`: {} bytes is not a multiple of 8", b.len())));
    }
    Ok(b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect())
}

fn check(fill: f64, min_samples: u32) -> PyResult<()> {
    if !(fill > 0.0 && fill <= 1.0) {
        return Err(PyValueError::new_err(format!("fill {fill}: not in (0, 1]")));
    }
    if min_samples == 0 {
        return Err(PyValueError::new_err("min_samples: must be at least 1"));
    }
    Ok(())
}

fn decision_to_py<'py>(py: Python<'py>, d: &Decision) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new_bound(py);
    for (name, v) in [("promote", &d.promote), ("demote", &d.demote)] {
        let mut addr = Vec::with_capacity(v.len() * 8);
        let mut score = Vec::with_capacity(v.len() * 8);
        for &(a, s) in v {
            addr.extend_from_slice(&a.to_le_bytes());
            score.extend_from_slice(&s.to_le_bytes());
        }
        out.set_item(name, PyBytes::new_bound(py, &addr))?;
        out.set_item(format!("{name}_score"), PyBytes::new_bound(py, &score))?;
    }
    out.set_item("plan_pages", d.plan_pages)?;
    out.set_item("blocked", d.blocked)?;
    Ok(out)
}

/// `hottest-first`'s state and decision for a live process: decayed sample counts per page
/// and one decision step at a time.
#[pyclass(module = "tierlab._native")]
struct HottestFirstCore {
    counts: SampleCounts,
    fill: f64,
    min_samples: u32,
}

#[pymethods]
impl HottestFirstCore {
    #[new]
    #[pyo3(signature = (fill=0.95, min_samples=1))]
    fn new(fill: f64, min_samples: u32) -> PyResult<Self> {
        check(fill, min_samples)?;
        Ok(HottestFirstCore { counts: SampleCounts::default(), fill, min_samples })
    }

    /// One sample per address (u64 bytes), counted on its 4 KiB page.
    fn add_samples(&mut self, addrs: &[u8]) -> PyResult<usize> {
        let a = u64s(addrs, "addrs")?;
        for &x in &a {
            self.counts.add(vpn(x));
        }
        Ok(a.len())
    }

    /// Forget the pages of these addresses (u64 bytes): no longer mapped.
    fn forget(&mut self, addrs: &[u8]) -> PyResult<()> {
        for a in u64s(addrs, "addrs")? {
            self.counts.forget(vpn(a));
        }
        Ok(())
    }

    /// Halve every count (the policy's `sample_decay` step).
    fn halve(&mut self) {
        self.counts.halve();
    }

    /// Pages with a count.
    fn __len__(&self) -> usize {
        self.counts.len()
    }

    /// The candidate pages (at least `min_samples`) as `{"addr": u64 bytes, "count": f64
    /// bytes}`, by address.
    fn candidates<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let mut items = self.counts.items(self.min_samples);
        items.sort_by_key(|(i, _)| i.start);
        columns_to_py(py, items.into_iter().map(|(i, _)| (i.start, i.score)))
    }

    /// One decision (`hottest_first::decide`): `fast` (u64 bytes) the page addresses on the
    /// fast tier, `capacity` its bytes, at most `max_promote` promotions. Returns
    /// `{"promote", "demote": u64 bytes, "promote_score", "demote_score": f64 bytes,
    /// "plan_pages", "blocked"}`.
    #[pyo3(signature = (fast, capacity, max_promote=u64::MAX))]
    fn decide<'py>(
        &self,
        py: Python<'py>,
        fast: &[u8],
        capacity: u64,
        max_promote: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let fast = u64s(fast, "fast")?;
        let d = decide(&self.counts, &fast, capacity, self.fill, self.min_samples, max_promote);
        decision_to_py(py, &d)
    }
}

/// `memtis`'s page-access state and decision for a live process: counts in a log
/// histogram, cooled every `cooling_samples` samples, and the hot threshold fitted to the fast
/// tier.
#[pyclass(module = "tierlab._native")]
struct MemtisCore {
    counts: MemtisCounts,
    fill: f64,
}

#[pymethods]
impl MemtisCore {
    #[new]
    #[pyo3(signature = (fill=0.95, cooling_samples=2_000_000))]
    fn new(fill: f64, cooling_samples: u64) -> PyResult<Self> {
        check(fill, 1)?;
        if cooling_samples == 0 {
            return Err(PyValueError::new_err("cooling_samples: must be at least 1"));
        }
        Ok(MemtisCore { counts: MemtisCounts::new(cooling_samples), fill })
    }

    fn add_samples(&mut self, addrs: &[u8]) -> PyResult<usize> {
        let a = u64s(addrs, "addrs")?;
        for &x in &a {
            self.counts.add(vpn(x));
        }
        Ok(a.len())
    }

    fn forget(&mut self, addrs: &[u8]) -> PyResult<()> {
        for a in u64s(addrs, "addrs")? {
            self.counts.forget(vpn(a));
        }
        Ok(())
    }

    /// Memtis cools by samples taken, not by time: nothing to do.
    fn halve(&mut self) {}

    fn __len__(&self) -> usize {
        self.counts.len()
    }

    /// Every counted page as `{"addr": u64 bytes, "count": f64 bytes}`, by address.
    fn candidates<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let mut items: Vec<(u64, u32)> = self.counts.iter().collect();
        items.sort_unstable();
        columns_to_py(py, items.into_iter().map(|(v, c)| (page_addr(v), c as f64)))
    }

    /// One decision (`memtis::decide`), returned as `HottestFirstCore.decide` does, plus
    /// `threshold_bin`.
    #[pyo3(signature = (fast, capacity, max_promote=u64::MAX))]
    fn decide<'py>(
        &self,
        py: Python<'py>,
        fast: &[u8],
        capacity: u64,
        max_promote: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let fast = u64s(fast, "fast")?;
        let m = memtis::decide(&self.counts, &fast, capacity, self.fill, max_promote);
        let (pro, dem, thr) = (m.promote, m.demote, m.threshold);
        let conv = |v: Vec<(u64, u32)>| v.into_iter().map(|(a, c)| (a, c as f64)).collect::<Vec<_>>();
        let d = Decision { promote: conv(pro), demote: conv(dem), plan_pages: 0, blocked: false };
        let out = decision_to_py(py, &d)?;
        out.set_item("threshold_bin", thr)?;
        Ok(out)
    }
}

/// One stateless decision: `pages` (u64 bytes, page numbers or addresses) with `samples`
/// (u64 bytes, samples per page), the rest as `HottestFirstCore.decide`.
#[pyfunction]
#[pyo3(signature = (pages, samples, fast, capacity, fill=0.95, min_samples=1, max_promote=u64::MAX))]
#[allow(clippy::too_many_arguments)]
fn hottest_first_decide<'py>(
    py: Python<'py>,
    pages: &[u8],
    samples: &[u8],
    fast: &[u8],
    capacity: u64,
    fill: f64,
    min_samples: u32,
    max_promote: u64,
) -> PyResult<Bound<'py, PyDict>> {
    check(fill, min_samples)?;
    let p = u64s(pages, "pages")?;
    let n = u64s(samples, "samples")?;
    if p.len() != n.len() {
        return Err(PyValueError::new_err(format!("{} pages but {} sample counts", p.len(), n.len())));
    }
    let mut counts = SampleCounts::default();
    for (&a, &k) in p.iter().zip(&n) {
        for _ in 0..k {
            counts.add(vpn(a));
        }
    }
    let fast = u64s(fast, "fast")?;
    let d = decide(&counts, &fast, capacity, fill, min_samples, max_promote);
    decision_to_py(py, &d)
}

/// Bytes of the pages the decision works in (4 KiB).
#[pyfunction]
fn tier_page_size() -> u64 {
    debug_assert_eq!(page_addr(1), PAGE_SIZE);
    PAGE_SIZE
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<HottestFirstCore>()?;
    m.add_class::<MemtisCore>()?;
    m.add_function(wrap_pyfunction!(hottest_first_decide, m)?)?;
    m.add_function(wrap_pyfunction!(tier_page_size, m)?)?;
    Ok(())
}

/// `(address, count)` pairs as `{"addr": u64 bytes, "count": f64 bytes}` (little endian).
fn columns_to_py(py: Python<'_>, items: impl Iterator<Item = (u64, f64)>) -> PyResult<Bound<'_, PyDict>> {
    let mut addr = Vec::new();
    let mut count = Vec::new();
    for (a, c) in items {
        addr.extend_from_slice(&a.to_le_bytes());
        count.extend_from_slice(&c.to_le_bytes());
    }
    let out = PyDict::new_bound(py);
    out.set_item("addr", PyBytes::new_bound(py, &addr))?;
    out.set_item("count", PyBytes::new_bound(py, &count))?;
    Ok(out)
}
