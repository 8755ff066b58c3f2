//! The declared parameters (`tierlab_core::param`), for `tierlab params`, the docs page and
//! the reproduce report's labels.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use tierlab_core::param::FieldSpec;
use tierlab_sim::scenario;

use crate::to_py;

/// One field as a dict: key, type, default, required, unit, range, status, source, doc.
fn field_dict<'py>(py: Python<'py>, f: &FieldSpec) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new_bound(py);
    d.set_item("key", f.name)?;
    d.set_item("type", (f.shape)().label())?;
    d.set_item("rust_type", f.rust_type)?;
    d.set_item("default", f.default_text())?;
    d.set_item("required", f.required())?;
    d.set_item("unit", f.unit)?;
    d.set_item("range", f.range.map(|r| r.to_string()))?;
    d.set_item("status", f.provenance.status())?;
    d.set_item("source", f.provenance.text())?;
    d.set_item("doc", f.doc)?;
    d.set_item("summary", f.summary())?;
    Ok(d)
}

/// A table of the catalogue: (path, kind, fields).
type SectionRow<'py> = (String, String, Vec<Bound<'py, PyDict>>);

/// Every declared parameter of a scenario, table by table: [(path, kind, [field])].
#[pyfunction]
fn param_sections(py: Python<'_>) -> PyResult<Vec<SectionRow<'_>>> {
    scenario::catalogue()
        .into_iter()
        .map(|s| {
            let fields = s.fields.iter().map(|f| field_dict(py, f)).collect::<PyResult<Vec<_>>>()?;
            Ok((s.path, s.kind, fields))
        })
        .collect()
}

/// `docs/parameters.md`, generated from the declarations.
#[pyfunction]
fn parameters_page() -> String {
    scenario::parameters_page()
}

/// The declared field a key of a scenario names (`telemetry[0].sample_interval`), or None.
#[pyfunction]
#[pyo3(signature = (spec, key, overrides=Vec::new()))]
fn param_info<'py>(
    py: Python<'py>,
    spec: &str,
    key: &str,
    overrides: Vec<String>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let (sc, _) = scenario::open(spec, &overrides, None).map_err(to_py)?;
    scenario::declared_field(&sc, key).map(|f| field_dict(py, f)).transpose()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(param_sections, m)?)?;
    m.add_function(wrap_pyfunction!(parameters_page, m)?)?;
    m.add_function(wrap_pyfunction!(param_info, m)?)?;
    Ok(())
}
