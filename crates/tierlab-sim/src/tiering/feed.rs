//! Reading what the followed observer produced, by the observer's concrete type: region
//! snapshots with `nr_accesses` from DAMON and Telescope, PEBS records from the PEBS
//! hardware's drains. Other techniques feed their per-window hot set
//! ([`super::Feed::Hot`]).

use std::any::Any;

use crate::machine::pebs::Drain;
use crate::machine::Machine;
use crate::telemetry::damon::DamonSampler;
use crate::telemetry::pebs::Pebs;
use crate::telemetry::regions::{RegionObserver, SnapRegion, Snapshot};
use crate::telemetry::telescope::TelescopeSampler;
use crate::telemetry::Observer;

use super::Feed;

/// What has been fed so far.
#[derive(Clone, Debug, Default)]
pub struct Cursor {
    /// Aggregations of the region observer already fed.
    aggregations: u64,
    /// PEBS drains with an index below this were fed.
    drains: u64,
}

/// A region snapshot taken from an observer, with the observer's parameters.
pub struct SnapFeed<'a> {
    snap: &'a Snapshot,
    max_nr_accesses: u32,
    hot_threshold: u32,
}

impl SnapFeed<'_> {
    /// As a feed.
    pub fn feed(&self) -> Feed<'_> {
        Feed::Regions {
            regions: &self.snap.regions,
            max_nr_accesses: self.max_nr_accesses,
            hot_threshold: self.hot_threshold,
            time_ns: self.snap.end_ns,
        }
    }
}

fn regions_of(obs: &dyn Observer) -> Option<(&crate::telemetry::regions::Monitor, u32)> {
    let any: &dyn Any = obs;
    if let Some(o) = any.downcast_ref::<RegionObserver<DamonSampler>>() {
        return Some((&o.mon, o.hot_threshold));
    }
    if let Some(o) = any.downcast_ref::<RegionObserver<TelescopeSampler>>() {
        return Some((&o.mon, o.hot_threshold));
    }
    None
}

/// Whether the observer feeds more than its window hot set (regions or samples).
pub fn has_rich_feed(obs: &dyn Observer) -> bool {
    let any: &dyn Any = obs;
    regions_of(obs).is_some() || any.is::<Pebs>()
}

impl Cursor {
    /// The latest snapshot of a region observer if it was not fed yet.
    pub fn new_snapshot<'a>(&mut self, obs: &'a dyn Observer) -> Option<SnapFeed<'a>> {
        let (mon, hot_threshold) = regions_of(obs)?;
        if mon.aggregations == self.aggregations {
            return None;
        }
        self.aggregations = mon.aggregations;
        let snap = mon.latest_snapshot()?;
        Some(SnapFeed { snap, max_nr_accesses: mon.aggr_samples.min(u32::MAX as u64) as u32, hot_threshold })
    }

    /// The PEBS drains not fed yet (read from the hardware before the PEBS driver consumes
    /// them); empty for other observers.
    pub fn new_drains(&mut self, obs: &dyn Observer, m: &Machine) -> Vec<Drain> {
        let any: &dyn Any = obs;
        if !any.is::<Pebs>() {
            return Vec::new();
        }
        let Some(hw) = m.pebs.as_ref() else { return Vec::new() };
        let out: Vec<Drain> = hw.drained.iter().filter(|d| d.index >= self.drains).cloned().collect();
        if let Some(d) = out.last() {
            self.drains = d.index + 1;
        }
        out
    }
}

/// Regions of a snapshot as (start, end, nr_accesses).
pub fn region_triples(r: &[SnapRegion]) -> impl Iterator<Item = (u64, u64, u32)> + '_ {
    r.iter().map(|x| (x.start, x.end, x.nr_accesses))
}
