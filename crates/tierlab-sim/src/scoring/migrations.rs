//! The migration audit of a tiering run: ping-pong and wasted promotions, from the policy's
//! decision log ([`MoveRecord`]) and exact ground truth.
//!
//! # Definitions (`tiering.*`)
//! - **Ping-pong** (`tiering.ping_pong`): a move of a page in the direction opposite to its
//!   previous move, at most `scoring.pingpong_window` after it (a page demoted and promoted
//!   back, or promoted and demoted back). Each reversal counts once; a page that bounces
//!   three times counts three.
//! - **Wasted promotion** (`tiering.wasted_promotions`): a promotion whose page is demoted
//!   again with no access to it seen in between. Ground truth counts accesses per page per
//!   window, not their times, so "in between" is decided per window: the promotion is
//!   wasted when ground truth counted no access to the page in any window from the one of the
//!   promotion to the one of the demotion. An access in the promotion's window before the
//!   promotion, or in the demotion's window after the demotion, makes the promotion count as
//!   used: the figure is a lower bound, exact when the windows are short against the time
//!   pages stay promoted. A page promoted and never demoted is not wasted.
//!
//! The audit reads only what the policy decided and what the workload did: it costs the
//! policy nothing. Memory: the pages moved within the last `pingpong_window` and the
//! promoted pages not yet seen accessed. Moves beyond the decision log's cap
//! ([`crate::agents::tiering::LOG_PAGES`]) are not audited (`tiering.unlogged_pages`).

use std::collections::HashMap;

use crate::agents::{MoveRecord, Ps};
use crate::stats::Stats;
use crate::truth::WindowTruth;

/// Whether ground truth counted an access to any of `n` 4 KiB pages from `vpn` in `w`.
pub fn accessed_in(w: &WindowTruth, vpn: u64, n: u64) -> bool {
    let i = w.pages.partition_point(|&(p, _)| p < vpn);
    w.pages.get(i).is_some_and(|&(p, c)| p < vpn + n && c > 0)
}

/// The audit's state and counters.
#[derive(Clone, Debug)]
pub struct MigrationAudit {
    window: Ps,
    /// Page address -> its last move (time, promotion).
    last: HashMap<u64, (Ps, bool)>,
    /// Promoted pages (address -> 4 KiB pages it spans) not yet seen accessed.
    pending: HashMap<u64, u64>,
    /// Records of the decision log already audited.
    cursor: usize,
    /// Reversals within the window.
    pub ping_pong: u64,
    /// Promotions demoted again before any access.
    pub wasted: u64,
    /// Page moves audited.
    pub audited: u64,
}

impl MigrationAudit {
    /// An audit counting reversals within `pingpong_window`.
    pub fn new(pingpong_window: Ps) -> Self {
        MigrationAudit {
            window: pingpong_window,
            last: HashMap::new(),
            pending: HashMap::new(),
            cursor: 0,
            ping_pong: 0,
            wasted: 0,
            audited: 0,
        }
    }

    /// Audit the moves of `log` not seen yet (the whole decision log so far), made in the
    /// window that just closed: `span(addr)` gives the 4 KiB pages of the page at `addr`,
    /// `accessed(vpn, n)` whether the closing window accessed any of `n` pages from `vpn`.
    pub fn on_moves(
        &mut self,
        log: &[MoveRecord],
        span: impl Fn(u64) -> u64,
        accessed: impl Fn(u64, u64) -> bool,
    ) {
        for rec in log.get(self.cursor..).unwrap_or(&[]) {
            for &va in rec.pages.iter().take(rec.moved as usize) {
                self.audited += 1;
                if let Some(&(t, promote)) = self.last.get(&va) {
                    if promote != rec.promote && rec.time.saturating_sub(t) <= self.window {
                        self.ping_pong += 1;
                    }
                }
                self.last.insert(va, (rec.time, rec.promote));
                if rec.promote {
                    self.pending.insert(va, span(va));
                } else if let Some(n) = self.pending.remove(&va) {
                    if !accessed(tierlab_core::vpn(va), n) {
                        self.wasted += 1;
                    }
                }
            }
        }
        self.cursor = log.len();
    }

    /// The window ending at `now` closed: promoted pages it accessed are used; moves older
    /// than the ping-pong window are forgotten.
    pub fn end_window(&mut self, now: Ps, accessed: impl Fn(u64, u64) -> bool) {
        self.pending.retain(|&va, &mut n| !accessed(tierlab_core::vpn(va), n));
        let w = self.window;
        self.last.retain(|_, &mut (t, _)| now.saturating_sub(t) <= w);
    }

    /// Both steps for a closed window of ground truth.
    pub fn close_window(&mut self, log: &[MoveRecord], w: &WindowTruth, now: Ps, span: impl Fn(u64) -> u64) {
        self.on_moves(log, span, |v, n| accessed_in(w, v, n));
        self.end_window(now, |v, n| accessed_in(w, v, n));
    }

    /// `tiering.ping_pong`, `tiering.wasted_promotions`, `tiering.pingpong_window_s`.
    pub fn report_stats(&self, out: &mut Stats) {
        out.set("tiering.ping_pong", self.ping_pong);
        out.set("tiering.wasted_promotions", self.wasted);
        out.set("tiering.pingpong_window_s", self.window.secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierlab_core::page_addr;

    fn rec(ms: u64, promote: bool, pages: &[u64], moved: u64) -> MoveRecord {
        MoveRecord {
            time: Ps::from_ns(ms * 1_000_000),
            promote,
            node: u8::from(!promote),
            pages: pages.iter().map(|&p| page_addr(p)).collect(),
            moved,
        }
    }

    fn truth(pages: &[u64]) -> WindowTruth {
        WindowTruth { index: 0, start_ns: 0, end_ns: 0, pages: pages.iter().map(|&p| (p, 1)).collect() }
    }

    /// A hand-built sequence over three 100 ms windows and a 150 ms ping-pong window.
    #[test]
    fn ping_pong_and_wasted_on_a_decision_sequence() {
        let mut a = MigrationAudit::new(Ps::from_ns(150_000_000));
        let span = |_| 1;
        // Window 0 [0, 100 ms): promote 1, 2, 3, 4 (4 named but not moved: moved = 3);
        // demote 2 at 50 ms (promoted at 10, nothing accessed it: wasted, ping-pong);
        // the window accesses page 1 only.
        let mut log = vec![rec(10, true, &[1, 2, 3, 4], 3), rec(50, false, &[2], 1)];
        a.close_window(&log, &truth(&[1]), Ps::from_ns(100_000_000), span);
        assert_eq!((a.ping_pong, a.wasted, a.audited), (1, 1, 4));
        // Window 1 [100, 200 ms): demote 1 at 150 ms (used in window 0: not wasted; 140 ms
        // after its promotion: ping-pong) and 3 at 180 ms (never accessed: wasted; 170 ms
        // after: no ping-pong); promote 2 back at 190 ms (140 ms after its demotion:
        // ping-pong).
        log.push(rec(150, false, &[1], 1));
        log.push(rec(180, false, &[3], 1));
        log.push(rec(190, true, &[2], 1));
        a.close_window(&log, &truth(&[]), Ps::from_ns(200_000_000), span);
        assert_eq!((a.ping_pong, a.wasted), (2 + 1, 2));
        // Window 2 [200, 300 ms): page 2 is accessed, then demoted at 250 ms: not wasted
        // (the access is in the demotion's window), ping-pong (60 ms after its promotion);
        // page 1 promoted again at 290 ms, 140 ms after its demotion: ping-pong.
        log.push(rec(250, false, &[2], 1));
        log.push(rec(290, true, &[1], 1));
        a.close_window(&log, &truth(&[2]), Ps::from_ns(300_000_000), span);
        assert_eq!((a.ping_pong, a.wasted), (3 + 2, 2));
        // Window 3: page 1 demoted at 1 s (long after its promotion: no ping-pong; never
        // accessed since: wasted). The window before forgot the old moves of page 3.
        log.push(rec(1000, false, &[1], 1));
        a.close_window(&log, &truth(&[]), Ps::from_ns(1_100_000_000), span);
        assert_eq!((a.ping_pong, a.wasted), (5, 3));
        assert!(a.last.len() <= 1, "moves older than the window are forgotten: {:?}", a.last);
    }

    /// A 2 MiB page is used when any of its 512 base pages is accessed.
    #[test]
    fn huge_page_used_by_any_base_page() {
        let mut a = MigrationAudit::new(Ps::from_ns(1_000_000_000));
        let log = vec![rec(1, true, &[512], 1), rec(2, false, &[512], 1)];
        a.close_window(&log, &truth(&[512 + 511]), Ps::from_ns(10_000_000), |_| 512);
        assert_eq!(a.wasted, 0);
        let log2 = vec![rec(1, true, &[1024], 1), rec(2, false, &[1024], 1)];
        let mut b = MigrationAudit::new(Ps::from_ns(1_000_000_000));
        b.close_window(&log2, &truth(&[1024 + 512]), Ps::from_ns(10_000_000), |_| 512);
        assert_eq!((b.wasted, b.ping_pong), (1, 1));
    }
}
