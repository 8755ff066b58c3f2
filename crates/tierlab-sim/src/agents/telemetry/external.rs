//! `python`: a telemetry technique written outside the engine (a Python class), run through
//! the host the embedding program installs ([`set_host`]; the Python binding installs one
//! when it loads). The engine knows the technique only as an [`Observer`] the host builds:
//! it runs on the same sealed view, is charged by the same cost model and publishes the same
//! feeds as a built-in technique.

use std::sync::{Arc, OnceLock};

use super::{Observer, Technique, TelemetryBuildCtx, TelemetryShared};
use crate::error::Result;
use crate::params::{External, ExternalKeys, SharedDefaults};

/// What builds techniques written outside the engine.
pub trait TelemetryHost: Send + Sync {
    /// Build the technique of `p` labelled `label`: load its class, check its own
    /// parameters (`p.own`) against what the class declares (errors name
    /// `telemetry[i].<key>`), instantiate it with the scenario's seed.
    fn build(
        &self,
        p: &External<TelemetryShared>,
        label: &str,
        ctx: &TelemetryBuildCtx,
    ) -> Result<Box<dyn Observer>>;
}

static HOST: OnceLock<Arc<dyn TelemetryHost>> = OnceLock::new();

/// Install the host (once per process; later calls are ignored).
pub fn set_host(h: Arc<dyn TelemetryHost>) {
    let _ = HOST.set(h);
}

/// The installed host, or the error saying where such classes run.
pub fn host(field: &str, ctx: &TelemetryBuildCtx) -> Result<&'static Arc<dyn TelemetryHost>> {
    HOST.get().ok_or_else(|| ctx.err(field, crate::params::NO_HOST))
}

impl Technique for External<TelemetryShared> {
    fn build(&self, label: &str, ctx: &TelemetryBuildCtx) -> Result<Box<dyn Observer>> {
        host("kind", ctx)?.build(self, label, ctx)
    }
    fn shared(&self) -> &TelemetryShared {
        &self.shared
    }
    fn publishes(&self) -> &'static [super::FeedKind] {
        &[]
    }
}

impl SharedDefaults<TelemetryShared> for ExternalKeys {
    fn shared_defaults() -> TelemetryShared {
        TelemetryShared::default()
    }
}
