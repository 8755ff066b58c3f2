//! Python bindings of the live Linux recorder (`tierlab-live`).

use pyo3::prelude::*;

/// Register the live-recording functions on the module.
pub fn register(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
