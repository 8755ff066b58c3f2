//! `python`: a replacement policy written outside the engine (a Python class), run through
//! the host the embedding program installs ([`set_host`]; the Python binding installs one
//! when it loads). Its callbacks run at every fault (a batched form chooses several victims
//! at once); a victim that is not resident, or an exception, stops the run with an error
//! ([`Replacement::error`]).

use std::sync::{Arc, OnceLock};

use super::{PolicyBuildCtx, PolicyParams, Replacement};
use crate::error::Result;
use crate::params::{External, Unshared};

/// What builds replacement policies written outside the engine.
pub trait ReplacementHost: Send + Sync {
    /// Build the policy of `p`: load its class, check its own parameters against what the
    /// class declares (errors name `policies[i].<key>`), instantiate it with the seed.
    fn build(&self, p: &External<Unshared>, ctx: &PolicyBuildCtx) -> Result<Box<dyn Replacement>>;
}

static HOST: OnceLock<Arc<dyn ReplacementHost>> = OnceLock::new();

/// Install the host (once per process; later calls are ignored).
pub fn set_host(h: Arc<dyn ReplacementHost>) {
    let _ = HOST.set(h);
}

impl PolicyParams for External<Unshared> {
    fn build(&self, ctx: &PolicyBuildCtx) -> Result<Box<dyn Replacement>> {
        let host = HOST.get().ok_or_else(|| ctx.error("kind", crate::params::NO_HOST))?;
        host.build(self, ctx)
    }
}
