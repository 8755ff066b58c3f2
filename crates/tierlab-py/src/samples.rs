//! A run's samples as the compact set the engine keeps ([`tierlab_core::SampleSet`]: about
//! 9 bytes a sample), read a range of rows at a time as little-endian column buffers
//! (`tierlab.sampleset.Samples` makes numpy arrays of them). Nothing here makes a Python
//! object per sample.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use tierlab_core::SampleSet;

/// The samples of one technique (see the module docs of ``tierlab.sampleset``).
#[pyclass(module = "tierlab._native", name = "SampleSet", frozen)]
pub struct PySampleSet {
    set: SampleSet,
}

impl PySampleSet {
    pub fn new(set: SampleSet) -> Self {
        PySampleSet { set }
    }
}

fn le_bytes<'py, T: Copy, const N: usize>(
    py: Python<'py>,
    v: &[T],
    f: impl Fn(T) -> [u8; N],
) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_bound_with(py, v.len() * N, |buf| {
        for (out, &x) in buf.chunks_exact_mut(N).zip(v) {
            out.copy_from_slice(&f(x));
        }
        Ok(())
    })
}

#[pymethods]
impl PySampleSet {
    fn __len__(&self) -> usize {
        self.set.len()
    }

    /// The event names the ``event`` codes index.
    #[getter]
    fn events(&self) -> Vec<String> {
        self.set.events().to_vec()
    }

    /// Bytes the set holds.
    fn heap_bytes(&self) -> usize {
        self.set.heap_bytes()
    }

    /// Rows ``start..end`` (clamped) of the columns ``names`` (default all): column name ->
    /// little-endian bytes (``time_ns``, ``addr``, ``ip``, ``weight``, ``data_src``,
    /// ``drain``: u64; ``tid``, ``cpu``: u32; ``event``: u8 codes into :attr:`events`). One
    /// column is made at a time.
    #[pyo3(signature = (start=0, end=None, names=None))]
    fn columns<'py>(
        &self,
        py: Python<'py>,
        start: usize,
        end: Option<usize>,
        names: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        const ALL: [&str; 9] =
            ["time_ns", "tid", "cpu", "addr", "ip", "weight", "data_src", "event", "drain"];
        let names = names.unwrap_or_else(|| ALL.iter().map(|s| s.to_string()).collect());
        let end = end.unwrap_or(usize::MAX);
        let d = PyDict::new_bound(py);
        for name in &names {
            let col = py.allow_threads(|| self.set.try_column(name, start, end)).map_err(|e| {
                pyo3::exceptions::PyOSError::new_err(format!("reading the run's spilled samples back: {e}"))
            })?;
            let Some(col) = col else {
                return Err(pyo3::exceptions::PyKeyError::new_err(name.clone()));
            };
            let bytes = match name.as_str() {
                "tid" | "cpu" => le_bytes(py, &col, |x| (x as u32).to_le_bytes())?,
                "event" => le_bytes(py, &col, |x| [x as u8])?,
                _ => le_bytes(py, &col, u64::to_le_bytes)?,
            };
            d.set_item(name, bytes)?;
        }
        Ok(d)
    }

    /// One row per drain (``time_ns``, ``drain``, ``records``: u64; ``cpu``: u32), as
    /// little-endian bytes.
    fn drains<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let rows = self.set.drains();
        let d = PyDict::new_bound(py);
        let time: Vec<u64> = rows.iter().map(|r| r.0).collect();
        let cpu: Vec<u32> = rows.iter().map(|r| r.1).collect();
        let drain: Vec<u64> = rows.iter().map(|r| r.2).collect();
        let records: Vec<u64> = rows.iter().map(|r| r.3).collect();
        d.set_item("time_ns", le_bytes(py, &time, u64::to_le_bytes)?)?;
        d.set_item("cpu", le_bytes(py, &cpu, u32::to_le_bytes)?)?;
        d.set_item("drain", le_bytes(py, &drain, u64::to_le_bytes)?)?;
        d.set_item("records", le_bytes(py, &records, u64::to_le_bytes)?)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        format!("SampleSet({} samples)", self.set.len())
    }
}
