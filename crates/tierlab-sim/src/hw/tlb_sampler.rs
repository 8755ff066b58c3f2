//! Sampling TLB misses: a profile source of profile-guided placement.
//!
//! Every `period`-th TLB miss of a core (a miss of every TLB level, one that walks the page
//! table) writes a record (the data address) into the core's buffer; when the buffer holds
//! `threshold` records the core takes an interrupt whose handler cost is charged to that
//! core's clock, and the records are handed over. The same shape as the PEBS hardware model
//! ([`crate::machine::pebs`]), for a different event.

/// TLB-miss sampling of all cores.
#[derive(Clone, Debug)]
pub struct TlbMissSampler {
    /// Record every this many TLB misses.
    pub period: u64,
    /// Records per interrupt.
    pub threshold: usize,
    /// Interrupt handler cost, ps.
    pub interrupt_ps: u64,
    left: Vec<u64>,
    buf: Vec<Vec<u64>>,
    /// Records handed over: (core, data address).
    pub drained: Vec<(u32, u64)>,
    /// Records written, per core.
    pub samples: Vec<u64>,
    /// Time in the interrupt handler, per core, ps.
    pub busy_ps: Vec<u64>,
}

impl TlbMissSampler {
    /// Sampling for `cores` cores.
    pub fn new(cores: usize, period: u64, threshold: usize, interrupt_ps: u64) -> Self {
        let period = period.max(1);
        TlbMissSampler {
            period,
            threshold: threshold.max(1),
            interrupt_ps,
            left: vec![period; cores],
            buf: vec![Vec::new(); cores],
            drained: Vec::new(),
            samples: vec![0; cores],
            busy_ps: vec![0; cores],
        }
    }

    /// A TLB miss of `core` at `addr`; returns the interrupt cost (ps) the core pays now.
    #[inline]
    pub fn on_miss(&mut self, core: usize, addr: u64, _clock_ps: u64) -> u64 {
        self.left[core] -= 1;
        if self.left[core] > 0 {
            return 0;
        }
        self.left[core] = self.period;
        self.samples[core] += 1;
        let b = &mut self.buf[core];
        b.push(addr);
        if b.len() < self.threshold {
            return 0;
        }
        self.drained.extend(b.drain(..).map(|a| (core as u32, a)));
        self.busy_ps[core] += self.interrupt_ps;
        self.interrupt_ps
    }

    /// Hand over partly filled buffers without an interrupt (end of profiling).
    pub fn flush(&mut self) {
        for (core, b) in self.buf.iter_mut().enumerate() {
            self.drained.extend(b.drain(..).map(|a| (core as u32, a)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_every_period_and_interrupts_per_threshold() {
        let mut s = TlbMissSampler::new(2, 10, 3, 500);
        let mut cost = 0;
        for k in 0..100u64 {
            cost += s.on_miss(0, k * 4096, 0);
        }
        assert_eq!(s.samples[0], 10, "N/R samples");
        assert_eq!(s.drained.len(), 9, "three interrupts of three records");
        assert_eq!(cost, 3 * 500);
        assert_eq!(s.drained[0], (0, 9 * 4096));
        s.flush();
        assert_eq!(s.drained.len(), 10);
    }
}
