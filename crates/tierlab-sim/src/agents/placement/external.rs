//! `python`: a placement policy written outside the engine (a Python class), run through
//! the host the embedding program installs ([`set_host`]; the Python binding installs one
//! when it loads). It sets the allocation rule or a preferred-node plan before the workload
//! maps its memory, and may move pages at its interval, through the same view as a built-in
//! policy.

use std::sync::{Arc, OnceLock};

use super::{PlacementBuildCtx, PlacementParams, PlacementPolicy};
use crate::error::Result;
use crate::params::{External, Unshared};

/// What builds placement policies written outside the engine.
pub trait PlacementHost: Send + Sync {
    /// Build the policy of `p`: load its class, check its own parameters against what the
    /// class declares (errors name `placement.<key>`), instantiate it with the seed.
    fn build(&self, p: &External<Unshared>, ctx: &PlacementBuildCtx) -> Result<Box<dyn PlacementPolicy>>;
}

static HOST: OnceLock<Arc<dyn PlacementHost>> = OnceLock::new();

/// Install the host (once per process; later calls are ignored).
pub fn set_host(h: Arc<dyn PlacementHost>) {
    let _ = HOST.set(h);
}

impl PlacementParams for External<Unshared> {
    fn build(&self, ctx: &PlacementBuildCtx) -> Result<Box<dyn PlacementPolicy>> {
        let host = HOST.get().ok_or_else(|| ctx.err("kind", crate::params::NO_HOST))?;
        host.build(self, ctx)
    }
}
