//! The PEBS hardware model: precise event-based sampling of memory accesses.
//!
//! Each core counts the configured event (loads, stores or both). Every `period`-th event
//! (the reset value R) writes a record holding the data address into the core's PEBS
//! buffer. When the buffer holds `threshold` records (the McKernel driver interrupts at 90%
//! of the buffer's capacity, B / record size records) the core takes an interrupt: the
//! handler's cost is charged to that core's clock and the records are handed over as one
//! *drain* stamped with one timestamp (PEBS records on Knights Landing carry no time).
//! The driver side (hotness, frequency mode) lives in `telemetry::pebs`.

/// Configuration of the sampling hardware.
#[derive(Clone, Debug, PartialEq)]
pub struct PebsHwConfig {
    /// Sample loads.
    pub loads: bool,
    /// Sample stores.
    pub stores: bool,
    /// Reset value R: one record every R events.
    pub period: u64,
    /// Records the buffer holds (B / record size).
    pub capacity: usize,
    /// Records at which the interrupt fires.
    pub threshold: usize,
    /// Interrupt handler cost, ps.
    pub interrupt_ps: u64,
    /// Count only accesses that miss the cores' cache model (L2_MISS_LOADS).
    pub miss_only: bool,
}

impl PebsHwConfig {
    /// The event mask: bit 0 loads, bit 1 stores, bit 2 ([`super::cache::MISS_ONLY`]) only
    /// cache misses.
    pub fn mask(&self) -> u8 {
        (self.loads as u8)
            | ((self.stores as u8) << 1)
            | if self.miss_only { super::cache::MISS_ONLY } else { 0 }
    }
}

/// A batch of records handed over by one interrupt (or a final flush).
#[derive(Clone, Debug, PartialEq)]
pub struct Drain {
    /// Time of the interrupt, ns (the one timestamp all its records get).
    pub time_ns: u64,
    /// Core that took it.
    pub core: u32,
    /// Drain number on this machine, from 0.
    pub index: u64,
    /// (data address, access kind code) of each record.
    pub records: Vec<(u64, u8)>,
}

/// Per-core sampling state.
#[derive(Clone, Debug, Default)]
pub struct PebsCore {
    /// Records in the buffer.
    pub buf: Vec<(u64, u8)>,
    /// Records written.
    pub samples: u64,
    /// Interrupts taken.
    pub interrupts: u64,
    /// Time in the interrupt handler, ps.
    pub interrupt_ps: u64,
}

/// The sampling hardware of all cores.
#[derive(Clone, Debug)]
pub struct PebsHw {
    /// Configuration.
    pub cfg: PebsHwConfig,
    /// Per core.
    pub cores: Vec<PebsCore>,
    /// Drains not yet consumed by the driver.
    pub drained: Vec<Drain>,
    /// Drains so far.
    pub drains: u64,
}

impl PebsHw {
    /// Hardware for `cores` cores.
    pub fn new(cfg: PebsHwConfig, cores: usize) -> Self {
        PebsHw { cfg, cores: vec![PebsCore::default(); cores], drained: Vec::new(), drains: 0 }
    }

    /// The event mask: bit 0 loads, bit 1 stores, bit 2 ([`super::cache::MISS_ONLY`]) only
    /// cache misses.
    pub fn mask(&self) -> u8 {
        self.cfg.mask()
    }

    /// Write a record for `core`; returns the interrupt cost in ps when the buffer reached
    /// its threshold (the caller charges it to the core), else 0.
    pub fn record(&mut self, core: usize, addr: u64, kind: u8, clock_ps: u64) -> u64 {
        let c = &mut self.cores[core];
        c.buf.push((addr, kind));
        c.samples += 1;
        if c.buf.len() >= self.cfg.threshold {
            c.interrupts += 1;
            c.interrupt_ps += self.cfg.interrupt_ps;
            let records = std::mem::take(&mut c.buf);
            self.drained.push(Drain {
                time_ns: clock_ps / 1000,
                core: core as u32,
                index: self.drains,
                records,
            });
            self.drains += 1;
            self.cfg.interrupt_ps
        } else {
            0
        }
    }

    /// Hand over every partly filled buffer without an interrupt (end of run).
    pub fn flush(&mut self, now_ns: u64) {
        for (i, c) in self.cores.iter_mut().enumerate() {
            if !c.buf.is_empty() {
                let records = std::mem::take(&mut c.buf);
                self.drained.push(Drain { time_ns: now_ns, core: i as u32, index: self.drains, records });
                self.drains += 1;
            }
        }
    }
}
