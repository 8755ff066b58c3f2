//! `m5`: M5-like promotion (Sun et al., ASPLOS 2025) of the pages a CXL device's hot-page
//! tracker reports (the `m5` telemetry technique: exact top-K pages of each query).
//!
//! # Model
//! Each query's top-K list arrives hottest first (a sample batch of page addresses) and
//! replaces the previous one. Every `interval` the policy promotes the listed pages still on
//! the slow tier, hottest first, at most `batch` per interval, within the rate limit; TPP's
//! kswapd demotes below `demote_watermark` ([`super::kswapd`]). Followed to a PEBS technique
//! it would promote every sampled page: it expects a top-K source.
//!
//! Parameters: [`M5TieringParams`] (defaults, ranges and sources in `docs/parameters.md`,
//! mechanism and numbers in `docs/tiering-systems.md`).

use super::kswapd::Kswapd;
use super::{Feed, TieringBuildCtx, TieringCtx, TieringParams, TieringPolicy, TieringShared};
use crate::agents::{FeedKind, Ps};
use crate::error::Result;
use crate::stats::Stats;
use crate::units::Duration;
use tierlab_core::param::{params, Provenance};

/// Parameters of `m5` (tiering).
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct M5TieringParams {
    /// Time between promotion rounds.
    #[param(default = Duration(10_000_000), assumed = "one round per query of the device (10 ms)")]
    pub interval: Duration,
    /// Pages promoted per round at most.
    #[param(
        default = 512,
        range = "[1, 1e9]",
        unit = "pages",
        assumed = "one migration batch (Linux NR_MAX_BATCHED_MIGRATION = 512)"
    )]
    pub batch: u32,
    /// kswapd demotes when free fast memory is below this share of it, until back there.
    #[param(
        default = 0.02,
        range = "[0, 0.5)",
        unit = "fraction",
        sourced = "reference/memory-management.md: TPP's demote_scale_factor, 2%"
    )]
    pub demote_watermark: f64,
}

impl TieringParams for M5TieringParams {
    fn build(&self, _shared: &TieringShared, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>> {
        if self.interval.0 == 0 {
            return Err(ctx.err("interval", "must be > 0"));
        }
        Ok(Box::new(M5Tiering {
            next: self.interval.ps(),
            p: self.clone(),
            list: Vec::new(),
            kswapd: Kswapd::default(),
            lists: 0,
        }))
    }
    fn period(&self) -> Ps {
        self.interval.ps()
    }
    fn accepts(&self) -> Option<&'static [FeedKind]> {
        Some(&[FeedKind::Samples])
    }
}

/// The `m5` tiering policy.
pub struct M5Tiering {
    p: M5TieringParams,
    next: Ps,
    /// The latest top-K list (addresses, hottest first).
    list: Vec<u64>,
    kswapd: Kswapd,
    lists: u64,
}

impl TieringPolicy for M5Tiering {
    fn start(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        self.kswapd.start(ctx);
        Ok(())
    }

    fn next_event(&self) -> Ps {
        self.next
    }

    fn on_feed(&mut self, feed: &Feed, _ctx: &mut TieringCtx) -> Result<()> {
        let Feed::Samples(drains) = feed else { return Ok(()) };
        if let Some(d) = drains.last() {
            self.list = d.records.iter().map(|&(a, _)| a & !(tierlab_core::PAGE_SIZE - 1)).collect();
            self.lists += 1;
        }
        Ok(())
    }

    fn on_event(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        self.next = ctx.now + self.p.interval.ps();
        let slow = ctx.tiers().slow;
        let budget = ctx.kind.mover.budget();
        let mut bytes = 0;
        let mut batch = Vec::new();
        for &va in &self.list {
            if batch.len() >= self.p.batch as usize {
                break;
            }
            if ctx.machine.node_of(va) != Some(slow) {
                continue;
            }
            let b = super::page_bytes(&ctx.machine, va);
            if bytes + b > budget {
                break;
            }
            bytes += b;
            batch.push(va);
        }
        self.kswapd.reclaim(ctx, self.p.demote_watermark, bytes, 100.0)?;
        if !batch.is_empty() {
            let (moved, _) = ctx.promote(&batch)?;
            for &va in &batch[..moved as usize] {
                self.kswapd.promoted(va);
            }
        }
        Ok(())
    }

    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        out.set(format!("{prefix}.topk_lists"), self.lists);
        out.set(format!("{prefix}.kswapd_reclaims"), self.kswapd.reclaims);
    }
}

impl crate::params::SharedDefaults<TieringShared> for M5TieringParams {
    fn shared_defaults() -> TieringShared {
        TieringShared::with_rate(65536.0)
    }
    fn shared_provenance(field: &str) -> Option<Provenance> {
        match field {
            "rate_limit_mbps" => Some(Provenance::Assumed(
                "M5 migrates with the kernel's migration path; Linux's promotion rate limit (65536 MB/s)",
            )),
            "copy_mode" => Some(Provenance::Assumed(
                "M5 promotes the device's hot pages from a kernel daemon, not in the application's threads",
            )),
            _ => None,
        }
    }
}
