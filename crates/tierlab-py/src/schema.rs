//! The recording format's schema and the page sizes, from `tierlab-core`, for the Python
//! package (`tierlab.recording` builds its pyarrow schemas from `recording_schema()`).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use tierlab_core::schema::{self, CodeValue};
use tierlab_core::PageSize;

/// The recording format, as declared in `tierlab_core::schema`:
/// `{"format", "version", "meta_file", "tables": [{"name", "optional", "meaning", "columns":
/// [{"name", "type", "parquet", "meaning"}]}], "codes": [{"table", "column", "codes": [{"value",
/// "name", "meaning"}]}], "meta_fields": [{"name", "type", "required", "managed", "meaning"}]}`.
/// Column types are pyarrow aliases (`uint8`, `uint32`, `uint64`, `string`).
#[pyfunction]
fn recording_schema(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new_bound(py);
    d.set_item("format", schema::FORMAT_NAME)?;
    d.set_item("version", schema::FORMAT_VERSION)?;
    d.set_item("meta_file", schema::META_FILE)?;
    let tables = PyList::empty_bound(py);
    for t in schema::TABLES {
        let td = PyDict::new_bound(py);
        td.set_item("name", t.name)?;
        td.set_item("optional", t.optional)?;
        td.set_item("meaning", t.meaning)?;
        let cols = PyList::empty_bound(py);
        for c in t.columns {
            let cd = PyDict::new_bound(py);
            cd.set_item("name", c.name)?;
            cd.set_item("type", c.ty.arrow())?;
            cd.set_item("parquet", c.ty.parquet())?;
            cd.set_item("meaning", c.meaning)?;
            cols.append(cd)?;
        }
        td.set_item("columns", cols)?;
        tables.append(td)?;
    }
    d.set_item("tables", tables)?;
    let codes = PyList::empty_bound(py);
    for ct in schema::CODES {
        let cd = PyDict::new_bound(py);
        cd.set_item("table", ct.table)?;
        cd.set_item("column", ct.column)?;
        let values = PyList::empty_bound(py);
        for c in ct.codes {
            let v = PyDict::new_bound(py);
            match c.value {
                CodeValue::Int(i) => v.set_item("value", i)?,
                CodeValue::Str(s) => v.set_item("value", s)?,
            }
            v.set_item("name", c.name)?;
            v.set_item("meaning", c.meaning)?;
            values.append(v)?;
        }
        cd.set_item("codes", values)?;
        codes.append(cd)?;
    }
    d.set_item("codes", codes)?;
    let fields = PyList::empty_bound(py);
    for f in schema::META_FIELDS {
        let fd = PyDict::new_bound(py);
        fd.set_item("name", f.name)?;
        fd.set_item("type", f.ty.name())?;
        fd.set_item("required", f.required)?;
        fd.set_item("managed", f.managed)?;
        fd.set_item("meaning", f.meaning)?;
        fields.append(fd)?;
    }
    d.set_item("meta_fields", fields)?;
    Ok(d)
}

/// The page sizes tierlab models, smallest first: `[(name, bytes, shift)]`
/// (`("4KiB", 4096, 12)`, ...).
#[pyfunction]
fn page_sizes() -> Vec<(&'static str, u64, u32)> {
    PageSize::ALL.iter().map(|p| (p.name(), p.bytes(), p.shift())).collect()
}

/// Register `recording_schema`, `page_sizes` and `PAGE_SIZE` (the 4 KiB base page) on the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(recording_schema, m)?)?;
    m.add_function(wrap_pyfunction!(page_sizes, m)?)?;
    m.add("PAGE_SIZE", tierlab_core::PAGE_SIZE)?;
    Ok(())
}
