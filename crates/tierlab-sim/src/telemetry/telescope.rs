//! Placeholder being replaced by the real implementation (in progress).
use serde::{Deserialize, Serialize};

use super::*;
use crate::error::Result;

/// Parameters.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelescopeParams {
    /// Label.
    #[serde(default)]
    pub name: Option<String>,
    /// Core.
    #[serde(default)]
    pub core: Option<usize>,
}

impl TelemetryParams for TelescopeParams {
    fn build(&self, ctx: &TelemetryBuildCtx) -> Result<Box<dyn Observer>> {
        Err(ctx.err("kind", "not implemented yet"))
    }
    fn label(&self) -> String {
        self.name.clone().unwrap_or_else(|| "telescope".replace('_', "-"))
    }
    fn core(&self) -> Option<usize> {
        self.core
    }
}
