//! `python`: a tiering policy written outside the engine (a Python class), run through the
//! host the embedding program installs ([`set_host`]; the Python binding installs one when
//! it loads). The engine knows the policy only as a [`TieringPolicy`] the host builds: its
//! promotions and demotions go through the same [`super::Mover`] (rate limit, batches,
//! charges) and are logged like a built-in policy's.

use std::sync::{Arc, OnceLock};

use super::{Common, FeedKind, TieringBuildCtx, TieringKind, TieringPolicy, TieringShared};
use crate::error::Result;
use crate::params::{External, ExternalKeys, SharedDefaults};
use crate::units::Ps;
use tierlab_core::param::Provenance;

/// What builds policies written outside the engine.
pub trait TieringHost: Send + Sync {
    /// Build the policy of `p`: load its class, check its own parameters (`p.own`) against
    /// what the class declares (errors name `tiering.<key>`), instantiate it with the
    /// scenario's seed. The policy gives its period and accepted feeds
    /// ([`TieringPolicy::period`], [`TieringPolicy::accepts`]).
    fn build(&self, p: &External<TieringShared>, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>>;
}

static HOST: OnceLock<Arc<dyn TieringHost>> = OnceLock::new();

/// Install the host (once per process; later calls are ignored).
pub fn set_host(h: Arc<dyn TieringHost>) {
    let _ = HOST.set(h);
}

/// Every feed kind, richest first (what a policy written outside the engine may accept
/// until it is built and says).
const ALL: &[FeedKind] = &[FeedKind::Regions, FeedKind::Samples, FeedKind::HotSet];

impl TieringKind for External<TieringShared> {
    fn build(&self, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>> {
        let host = HOST.get().ok_or_else(|| ctx.err("kind", crate::params::NO_HOST))?;
        host.build(self, ctx)
    }
    fn common(&self) -> Common {
        // The built policy's period is used ([`TieringPolicy::period`]).
        Common::of(&self.shared, Ps::ZERO)
    }
    fn accepts(&self) -> Option<&'static [FeedKind]> {
        Some(ALL)
    }
}

impl SharedDefaults<TieringShared> for ExternalKeys {
    fn shared_defaults() -> TieringShared {
        TieringShared::with_rate(2048.0)
    }
    fn shared_provenance(field: &str) -> Option<Provenance> {
        match field {
            "rate_limit_mbps" => Some(Provenance::Assumed("as hottest-first: Memtis' migration cap, 2 GB/s")),
            "copy_mode" => Some(Provenance::Assumed(
                "a policy written in Python: its migration thread copies in the background",
            )),
            _ => None,
        }
    }
}
