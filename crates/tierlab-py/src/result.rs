//! What `run` returns, as typed Python objects, and the catalogue of statistics keys.
//!
//! Every type is declared once, with [`record!`]: `RunOutput` and `StageOutput` are frozen
//! classes with one read-only attribute per field; `Heatmap` and `MappingInfo` are dicts
//! with fixed keys (the Python package hands them to pandas and
//! stores them as JSON as they are). The same declaration gives the field's Python type and
//! description, which `_record_types()` returns; `tools/gen_python.py` writes the stub's
//! declarations of these types (`python/tierlab/_native.pyi`, between its `generated`
//! markers) from it, and a test fails when the stub is stale or a real run's values do not
//! have the declared types.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use tierlab_sim::driver::RunResult;
use tierlab_sim::stats_keys;

/// One field of a declared type: its name, its Python type (as the stub writes it) and its
/// description.
pub struct FieldInfo {
    pub name: &'static str,
    pub py_type: &'static str,
    pub doc: &'static str,
}

/// A declared type: its name, whether it is a frozen class (`class`) or a dict with fixed
/// keys (`dict`, a `TypedDict` in the stub), its description and its fields.
pub struct RecordInfo {
    pub name: &'static str,
    pub kind: &'static str,
    pub doc: &'static str,
    pub fields: &'static [FieldInfo],
}

/// Declares a type crossing to Python: `class NAME { field: RustType => "python type", ... }`
/// makes a `#[pyclass(frozen)]` with a getter per field; `dict NAME { ... }` a struct turned
/// into a dict of exactly those keys by `into_dict`. Both get `INFO`, the declaration as data.
/// Doc comments (`///`) on the type and its fields are the descriptions.
macro_rules! record {
    (
        $(#[doc = $doc:literal])*
        class $name:ident {
            $( $(#[doc = $fdoc:literal])* $field:ident : $ty:ty => $py:literal ),* $(,)?
        }
    ) => {
        $(#[doc = $doc])*
        #[pyclass(frozen, module = "tierlab._native")]
        pub struct $name {
            $( $(#[doc = $fdoc])* #[pyo3(get)] pub $field: $ty, )*
        }
        impl $name {
            pub const INFO: RecordInfo = RecordInfo {
                name: stringify!($name),
                kind: "class",
                doc: concat!($($doc, "\n",)*),
                fields: &[$( FieldInfo {
                    name: stringify!($field),
                    py_type: $py,
                    doc: concat!($($fdoc, "\n",)*),
                } ),*],
            };
        }
    };
    (
        $(#[doc = $doc:literal])*
        dict $name:ident $(<$lt:lifetime>)? {
            $( $(#[doc = $fdoc:literal])* $field:ident : $ty:ty => $py:literal ),* $(,)?
        }
    ) => {
        $(#[doc = $doc])*
        pub struct $name $(<$lt>)? {
            $( $(#[doc = $fdoc])* pub $field: $ty, )*
        }
        impl $(<$lt>)? $name $(<$lt>)? {
            pub const INFO: RecordInfo = RecordInfo {
                name: stringify!($name),
                kind: "dict",
                doc: concat!($($doc, "\n",)*),
                fields: &[$( FieldInfo {
                    name: stringify!($field),
                    py_type: $py,
                    doc: concat!($($fdoc, "\n",)*),
                } ),*],
            };
            /// The dict of this record's fields.
            pub fn into_dict(self, py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
                let d = PyDict::new_bound(py);
                $( d.set_item(stringify!($field), self.$field)?; )*
                Ok(d)
            }
        }
    };
}

record! {
    /// What :func:`run` returns.
    class RunOutput {
        /// the scenario fully expanded (TOML)
        scenario: String => "str",
        /// the scenario's name
        name: String => "str",
        /// the seed the run used
        seed: u64 => "int",
        /// stopped early by the caller (Ctrl-C, or a KeyboardInterrupt raised by ``progress``)
        interrupted: bool => "bool",
        /// a simulation error that ended the run early (everything before it is kept), or None
        error: Option<String> => "str | None",
        /// wall-clock seconds of the run loop (every stage)
        wall_seconds: f64 => "float",
        /// the stats registry, nested (``stats["machine"]["accesses"]``)
        stats: PyObject => "StatsTree",
        /// the same keyed by dotted names (:mod:`tierlab.stats_keys` names them)
        stats_flat: Py<PyDict> => "dict[str, StatValue]",
        /// one list per column, one value per window (counts as ints, times and rates as floats)
        timeseries: Py<PyDict> => "dict[str, list[float]]",
        /// accesses per (window, address bin)
        heatmap: Py<PyDict> => "Heatmap",
        /// the mappings at the end of setup
        mappings: Py<PyList> => "list[MappingInfo]",
        /// every map and unmap of the run
        mapping_log: Py<PyList> => "list[MappingEvent]",
        /// technique label -> its samples, compactly (``placement``: a profiling placement
        /// policy's); ``tierlab.sampleset.Samples`` reads them as columns
        samples: Py<PyDict> => "dict[str, SampleSet]",
        /// the placement plan the run produced, ``(start, end, node)`` ranges, or None
        plan: PyObject => "list[tuple[int, int, int]] | None",
        /// node of each core
        core_nodes: Vec<u8> => "list[int]",
        /// damo records (JSON text) of the region-based techniques with ``record = true``, by label
        damo_records: Py<PyDict> => "dict[str, str]",
        /// the tiering policy's decision log: one row per page named in a promotion or demotion
        decisions: Py<PyDict> => "DecisionColumns",
        /// the stages that ran before the last one
        stages: Py<PyList> => "list[StageOutput]",
        /// ``(name, value)`` rows of the run's summary
        summary: Vec<(String, String)> => "list[tuple[str, str]]",
    }
}

record! {
    /// An earlier stage of a run (see ``docs/architecture.md``, stages).
    class StageOutput {
        /// the stage's name
        name: String => "str",
        /// its stats, nested
        stats: PyObject => "StatsTree",
        /// its stats keyed by dotted names
        stats_flat: Py<PyDict> => "dict[str, StatValue]",
        /// ranges in the plan the stage produced (0: none)
        plan_ranges: usize => "int",
    }
}

record! {
    /// Accesses per (window, address bin) (ground truth).
    dict Heatmap {
        /// start of each window, s
        t_start_s: Vec<f64> => "list[float]",
        /// end of each window, s
        t_end_s: Vec<f64> => "list[float]",
        /// first address of each bin
        bin_start: Vec<u64> => "list[int]",
        /// bytes in each bin
        bin_bytes: Vec<u64> => "list[int]",
        /// the mapping of each bin
        bin_mapping: Vec<String> => "list[str]",
        /// one row per window, one count per bin
        counts: Vec<Vec<u64>> => "list[list[int]]",
    }
}

record! {
    /// A mapping at the end of setup.
    dict MappingInfo {
        /// its name
        name: String => "str",
        /// first address
        start: u64 => "int",
        /// bytes
        length: u64 => "int",
        /// bytes per page
        page_size: u64 => "int",
    }
}

record! {
    /// A tiering policy's decision log, one row per page named in a promotion or demotion.
    dict DecisionColumns {
        /// when, ns
        time_ns: Vec<u64> => "list[int]",
        /// index of the call (one promotion or demotion of a list of pages)
        call: Vec<u64> => "list[int]",
        /// ``promote`` or ``demote``
        action: Vec<&'static str> => "list[str]",
        /// page address
        addr: Vec<u64> => "list[int]",
        /// target node
        node: Vec<u8> => "list[int]",
        /// whether the page moved (the call moved the first pages it named that fit)
        moved: Vec<bool> => "list[bool]",
    }
}

/// Every declared type, in the stub's order.
pub const RECORDS: &[RecordInfo] =
    &[Heatmap::INFO, MappingInfo::INFO, DecisionColumns::INFO, RunOutput::INFO, StageOutput::INFO];

/// The run's result as Python objects (the summary rows made beforehand).
pub fn run_output(py: Python<'_>, r: RunResult, summary: Vec<(String, String)>) -> PyResult<RunOutput> {
    let ts = PyDict::new_bound(py);
    for (n, c) in r.timeseries.names.iter().zip(&r.timeseries.columns) {
        // Counts are integers; times and rates stay floats.
        if n.ends_with("_s") || n.ends_with("_per_ms") || c.iter().any(|v| v.fract() != 0.0) {
            ts.set_item(n, c)?;
        } else {
            ts.set_item(n, c.iter().map(|&v| v as u64).collect::<Vec<u64>>())?;
        }
    }
    let h = r.heatmap;
    let heatmap = Heatmap {
        t_start_s: h.t_start_s,
        t_end_s: h.t_end_s,
        bin_start: h.bin_start,
        bin_bytes: h.bin_bytes,
        bin_mapping: h.bin_mapping,
        counts: h.counts,
    };
    let mappings = PyList::empty_bound(py);
    for m in r.mappings {
        let info = MappingInfo { name: m.name, start: m.start, length: m.length, page_size: m.page_size };
        mappings.append(info.into_dict(py)?)?;
    }
    let mapping_log = PyList::empty_bound(py);
    for (t, is_map, start, len, name) in r.mapping_log {
        mapping_log.append((t, if is_map { "map" } else { "unmap" }, start, len, name))?;
    }
    let samples = PyDict::new_bound(py);
    for (label, set) in r.samples {
        samples.set_item(label, Py::new(py, crate::samples::PySampleSet::new(set))?)?;
    }
    let damo_records = PyDict::new_bound(py);
    for (label, json) in r.damo_records {
        damo_records.set_item(label, json)?;
    }
    let mut dec = DecisionColumns {
        time_ns: Vec::new(),
        call: Vec::new(),
        action: Vec::new(),
        addr: Vec::new(),
        node: Vec::new(),
        moved: Vec::new(),
    };
    for (i, m) in r.decisions.iter().enumerate() {
        for (k, &a) in m.pages.iter().enumerate() {
            dec.time_ns.push(m.time.whole_ns());
            dec.call.push(i as u64);
            dec.action.push(if m.promote { "promote" } else { "demote" });
            dec.addr.push(a);
            dec.node.push(m.node);
            dec.moved.push((k as u64) < m.moved);
        }
    }
    let stages = PyList::empty_bound(py);
    for st in r.stages {
        let stage = StageOutput {
            name: st.name,
            stats: crate::json_to_py(py, &st.stats.to_nested_json())?,
            stats_flat: flat_stats(py, &st.stats)?,
            plan_ranges: st.plan_ranges,
        };
        stages.append(Bound::new(py, stage)?)?;
    }
    Ok(RunOutput {
        scenario: tierlab_sim::scenario::export(&r.scenario),
        name: r.scenario.name.clone(),
        seed: r.scenario.seed,
        interrupted: r.interrupted,
        error: r.error,
        wall_seconds: r.wall_seconds,
        stats: crate::json_to_py(py, &r.stats.to_nested_json())?,
        stats_flat: flat_stats(py, &r.stats)?,
        timeseries: ts.unbind(),
        heatmap: heatmap.into_dict(py)?.unbind(),
        mappings: mappings.unbind(),
        mapping_log: mapping_log.unbind(),
        samples: samples.unbind(),
        plan: r.plan.into_py(py),
        core_nodes: r.core_nodes,
        damo_records: damo_records.unbind(),
        decisions: dec.into_dict(py)?.unbind(),
        stages: stages.unbind(),
        summary,
    })
}

fn flat_stats(py: Python<'_>, stats: &tierlab_sim::stats::Stats) -> PyResult<Py<PyDict>> {
    let flat = crate::json_to_py(py, &stats.to_flat_json())?;
    Ok(flat.downcast_bound::<PyDict>(py)?.clone().unbind())
}

#[pymethods]
impl RunOutput {
    fn __repr__(&self) -> String {
        let error = self.error.as_ref().map_or("None".to_string(), |e| format!("{e:?}"));
        format!(
            "RunOutput(name={:?}, seed={}, interrupted={}, error={error}, wall_seconds={:.3})",
            self.name,
            self.seed,
            if self.interrupted { "True" } else { "False" },
            self.wall_seconds
        )
    }
}

#[pymethods]
impl StageOutput {
    fn __repr__(&self) -> String {
        format!("StageOutput(name={:?}, plan_ranges={})", self.name, self.plan_ranges)
    }
}

/// The declared result types (for `tools/gen_python.py`): `[{"name", "kind", "doc", "fields":
/// [(name, python type, doc)]}]`.
#[pyfunction]
fn _record_types(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let out = PyList::empty_bound(py);
    for r in RECORDS {
        let d = PyDict::new_bound(py);
        d.set_item("name", r.name)?;
        d.set_item("kind", r.kind)?;
        d.set_item("doc", r.doc)?;
        let fields: Vec<(&str, &str, &str)> = r.fields.iter().map(|f| (f.name, f.py_type, f.doc)).collect();
        d.set_item("fields", fields)?;
        out.append(d)?;
    }
    Ok(out)
}

/// The statistics a run may publish (`tierlab_sim::stats_keys::STATS`): `[(key, unit,
/// description)]`, a `{name}` part of a key standing for any one part of a dotted name.
#[pyfunction]
fn stats_catalogue() -> Vec<(&'static str, &'static str, &'static str)> {
    stats_keys::STATS.iter().map(|s| (s.key, s.unit, s.about)).collect()
}

/// The columns a run's time series may have (`tierlab_sim::stats_keys::COLUMNS`), as
/// [`stats_catalogue`].
#[pyfunction]
fn timeseries_catalogue() -> Vec<(&'static str, &'static str, &'static str)> {
    stats_keys::COLUMNS.iter().map(|s| (s.key, s.unit, s.about)).collect()
}

/// The units the catalogues use: `[(unit, meaning)]`.
#[pyfunction]
fn stat_units() -> Vec<(&'static str, &'static str)> {
    stats_keys::UNITS.to_vec()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RunOutput>()?;
    m.add_class::<StageOutput>()?;
    m.add_function(wrap_pyfunction!(_record_types, m)?)?;
    m.add_function(wrap_pyfunction!(stats_catalogue, m)?)?;
    m.add_function(wrap_pyfunction!(timeseries_catalogue, m)?)?;
    m.add_function(wrap_pyfunction!(stat_units, m)?)?;
    Ok(())
}
