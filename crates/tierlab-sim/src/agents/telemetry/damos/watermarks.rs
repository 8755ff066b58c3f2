//! When DAMOS schemes are active: each scheme's watermarks against the free memory rate
//! (`kdamond_wait_activation`).
//!
//! # Watermarks (`damos_wmark_wait_us`)
//! Metric `free_mem_rate`: free memory of all nodes per mille of their capacity. Above
//! `high` or below `low` a scheme deactivates; an inactive scheme activates again only in
//! `[low, mid)`; an active one stays active in `[low, high]`. When every scheme is
//! inactive, kdamond only re-checks every `interval` (no monitoring: no sampling cost).

use super::config::WmarkMetric;
use super::engine::Damos;
use crate::agents::MachineView;
use crate::units::Ps;

impl Damos {
    /// `kdamond_wait_activation`: update every scheme's watermark state; returns zero when
    /// some scheme is active (monitoring goes on), else the time to wait before the next
    /// check.
    pub fn wait_activation(&mut self, m: &MachineView) -> Ps {
        if self.schemes.is_empty() {
            return Ps::ZERO;
        }
        let rate = free_mem_permille(m);
        let mut min_wait: Option<Ps> = None;
        for s in &mut self.schemes {
            let w = &s.cfg.watermarks;
            let wait = if w.metric == WmarkMetric::None {
                Ps::ZERO
            } else if rate > w.high || w.low > rate {
                s.wmark_active = false;
                w.interval.ps()
            } else if w.high >= rate && rate >= w.mid && !s.wmark_active {
                w.interval.ps()
            } else {
                s.wmark_active = true;
                Ps::ZERO
            };
            min_wait = Some(min_wait.map_or(wait, |m| m.min(wait)));
        }
        let wait = min_wait.unwrap_or(Ps::ZERO);
        if wait > Ps::ZERO {
            self.inactive_checks += 1;
        }
        self.wmark_wait = wait;
        wait
    }
}

/// Free memory of every node per mille of their capacity (`DAMOS_WMARK_FREE_MEM_RATE`).
pub fn free_mem_permille(m: &MachineView) -> u64 {
    let (mut cap, mut free) = (0u64, 0u64);
    for n in m.nodes() {
        cap += n.capacity_pages;
        free += n.capacity_pages.saturating_sub(n.used_pages);
    }
    free * 1000 / cap.max(1)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;

    #[test]
    fn watermarks_activate_and_deactivate_as_the_kernel_does() {
        // Free memory per mille of both nodes; high 500, mid 400, low 200.
        let mut m = testutil::machine();
        let total: u64 = m.os.mem.nodes.iter().map(|n| n.capacity_pages).sum();
        let set_free = |m: &mut Machine, permille: u64| {
            let used = total - total * permille / 1000;
            let c0 = m.os.mem.nodes[0].capacity_pages;
            m.os.mem.nodes[0].used_pages = used.min(c0);
            m.os.mem.nodes[1].used_pages = used.saturating_sub(c0);
        };
        let mut s = scheme(Action::Stat);
        s.watermarks = WatermarksConfig {
            metric: WmarkMetric::FreeMemRate,
            interval: Duration(1_000_000_000),
            high: 500,
            mid: 400,
            low: 200,
        };
        let mut d = Damos::new(vec![s], 0.0);
        let mut step = |m: &mut Machine, free: u64| {
            set_free(m, free);
            let w = d.wait_activation(&MachineView::new(m));
            (w, d.schemes[0].active())
        };
        let (second, zero) = (Ps::from_ns(1_000_000_000), Ps::ZERO);
        assert_eq!(step(&mut m, 1000), (second, false), "above high: off");
        assert_eq!(step(&mut m, 450), (second, false), "in [mid, high] an inactive scheme stays off");
        assert_eq!(step(&mut m, 300), (zero, true), "in [low, mid): on");
        assert_eq!(step(&mut m, 450), (zero, true), "in [mid, high] an active scheme stays on");
        assert_eq!(step(&mut m, 199), (second, false), "below low: off");
        assert_eq!(step(&mut m, 250), (zero, true));
        assert_eq!(d.inactive_checks, 3);
    }
}
