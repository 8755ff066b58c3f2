//! `toy`: a tiering policy that exists to show how one is added (one file, one registry line)
//! and to test that the driver runs any registered policy: it promotes the pages of every hot
//! region or page its technique reports (any feed kind), within the mover's rate limit.
//! Registered for tests only.

use tierlab_core::param::{params, Provenance};

use super::{TieringBuildCtx, TieringCtx, TieringParams, TieringPolicy, TieringShared};
use crate::agents::{Feed, FeedKind, HotReport, Ps, NEVER};
use crate::error::Result;
use crate::stats::Stats;
use tierlab_core::{page_addr, vpn, PAGE_MASK};

/// Parameters of `toy` (its own: none; the shared ones are `TieringShared`'s).
#[params]
#[derive(Clone, Debug)]
pub struct ToyParams {}

impl TieringParams for ToyParams {
    fn build(&self, _shared: &TieringShared, _ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>> {
        Ok(Box::new(Toy { promoted: 0, feeds: 0 }))
    }
    fn period(&self) -> Ps {
        Ps::from_ns(10_000_000)
    }
    fn accepts(&self) -> Option<&'static [FeedKind]> {
        Some(&[FeedKind::Regions, FeedKind::Samples, FeedKind::HotSet])
    }
}

impl crate::params::SharedDefaults<TieringShared> for ToyParams {
    fn shared_defaults() -> TieringShared {
        TieringShared::with_rate(1024.0)
    }
    fn shared_provenance(field: &str) -> Option<Provenance> {
        match field {
            "rate_limit_mbps" => Some(Provenance::Assumed("a test-only policy: any rate will do")),
            "copy_mode" => Some(Provenance::Assumed("a test-only policy")),
            _ => None,
        }
    }
}

/// The `toy` policy.
pub struct Toy {
    promoted: u64,
    feeds: u64,
}

impl TieringPolicy for Toy {
    fn next_event(&self) -> Ps {
        NEVER
    }
    fn on_event(&mut self, _ctx: &mut TieringCtx) -> Result<()> {
        Ok(())
    }
    fn on_feed(&mut self, feed: &Feed, ctx: &mut TieringCtx) -> Result<()> {
        self.feeds += 1;
        let mut pages: Vec<u64> = match feed {
            Feed::HotSet { report, .. } => match &**report {
                HotReport::Regions(r) => {
                    r.iter().flat_map(|&(s, e)| (vpn(s)..vpn(e)).map(page_addr)).take(64).collect()
                }
                HotReport::Pages(p) => p.iter().map(|&v| page_addr(v)).take(64).collect(),
            },
            Feed::Regions(snap) => snap.regions.iter().map(|r| r.start & !PAGE_MASK).collect(),
            Feed::Samples(d) => d.iter().flat_map(|d| d.records.iter().map(|r| r.0 & !PAGE_MASK)).collect(),
        };
        let slow = ctx.tiers().slow;
        pages.retain(|&va| ctx.machine.node_of(va) == Some(slow));
        pages.dedup();
        let (moved, _) = ctx.promote(&pages)?;
        self.promoted += moved;
        Ok(())
    }
    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        out.set(format!("{prefix}.toy.promoted"), self.promoted);
        out.set(format!("{prefix}.toy.feeds"), self.feeds);
    }
}
