//! `toy`: a telemetry technique that exists to show how one is added (one file, one registry
//! line) and to test that the driver runs any registered technique. It reports the pages of
//! every mapping whose first base page has its PTE Accessed bit set, testing and clearing
//! that bit (with no TLB flush) every `interval`. Registered for tests only.

use tierlab_core::param::params;

use super::{HotReport, Observer, ObserverCtx, TelemetryBuildCtx, TelemetryParams, TelemetryShared};
use crate::agents::{MachineView, Ps};
use crate::error::Result;
use crate::hw::pagetable::Level;
use crate::os::Flush;
use crate::stats::Stats;
use crate::units::Duration;

/// Parameters of `toy`.
#[params]
#[derive(Clone, Debug)]
pub struct ToyParams {
    /// How often it looks.
    #[param(default = Duration(10_000_000), setting)]
    pub interval: Duration,
}

impl TelemetryParams for ToyParams {
    fn build(&self, _label: &str, _ctx: &TelemetryBuildCtx) -> Result<Box<dyn Observer>> {
        Ok(Box::new(Toy { interval: self.interval.ps(), next: Ps::ZERO, hot: Vec::new(), looks: 0 }))
    }
}

/// The `toy` observer.
pub struct Toy {
    interval: Ps,
    next: Ps,
    hot: Vec<(u64, u64)>,
    looks: u64,
}

impl Observer for Toy {
    fn start(&mut self, ctx: &mut ObserverCtx) -> Result<()> {
        self.next = ctx.now + self.interval;
        Ok(())
    }
    fn next_event(&self) -> Ps {
        self.next
    }
    fn on_event(&mut self, ctx: &mut ObserverCtx) -> Result<()> {
        let vmas: Vec<(u64, u64)> = ctx.machine.vmas().values().map(|v| (v.start, v.start + v.len)).collect();
        self.hot.clear();
        for (s, e) in vmas {
            if ctx.machine.clear_accessed(s, Level::Pte, Flush::None) {
                self.hot.push((s, e));
            }
        }
        self.looks += 1;
        ctx.charge(Ps::from_ns(100));
        self.next = ctx.now + self.interval;
        Ok(())
    }
    fn hot_set(&mut self, _start: Ps, _end: Ps, _m: &MachineView) -> HotReport {
        HotReport::Regions(self.hot.clone())
    }
    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        out.set(format!("{prefix}.looks"), self.looks);
    }
}

impl crate::params::SharedDefaults<TelemetryShared> for ToyParams {
    fn shared_defaults() -> TelemetryShared {
        TelemetryShared::default()
    }
}
