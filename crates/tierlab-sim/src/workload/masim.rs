//! `masim`: runs masim configuration files (the workload language of DAMON's and
//! Telescope's evaluations) with masim's runtime semantics.
//!
//! Each thread runs the config's phases in order, `repeat` times. Within a phase, until the
//! phase's time is up, the thread chooses one of the phase's access patterns with
//! probability weight / sum(weights) and performs `accesses_per_choice` accesses on it
//! (masim's `--nr_accesses_per_region`, 131,072). The phase's time is checked against the
//! thread's simulated clock before every choice, and a phase always makes at least one
//! choice (masim checks the time after a choice); a phase starts at the thread's clock when
//! the previous one ended.
//!
//! Access semantics, as in masim's `do_{seq,rnd}_{ro,wo,rw}`:
//! - sequential: the offset advances by the stride before each access and wraps to 0 at the
//!   region's end (the first access is at `stride`); the offset is kept per thread and per
//!   pattern, across choices, phases and repeats;
//! - random: the offset is uniform over the region's bytes (masim's `rndint() % size`), the
//!   stride is ignored;
//! - `ro`: one load per access; `wo`: one store; `rw`: masim's `rr[o] = rr[o] + 1`, i.e. a
//!   load then a store of the same byte. An `rw` choice therefore issues
//!   2 x `accesses_per_choice` memory accesses, and the stats count both.
//!
//! Two deliberate differences from masim's C code: a sequential offset wraps when it reaches
//! the region's size (masim tests `offset > size` and so touches the byte just past the
//! region), and random offsets cover regions larger than 2 GiB (masim's `rand()` is 31 bits).
//!
//! All threads share the regions, mapped once by [`Workload::setup`] under the region names.

use super::masim_config::{load_masim, parse_masim, MasimConfig, RwMode};
use super::{
    check_threads, Access, AddressSpace, BuildCtx, MapOptions, PageSize, Ps, Step, Workload, WorkloadParams,
    WorkloadShared,
};
use crate::error::{Result, SimError};
use crate::rng::Rng;
use crate::stats::Stats;
use serde::{Deserialize, Serialize};
use std::path::Path;
use tierlab_core::param::params;

/// How a thread chooses the next pattern of a phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Selection {
    /// Draw from a shuffled bag holding each pattern weight/g times (g = gcd of the weights),
    /// refilled when empty: same expected shares as `random`, but the shares within a phase
    /// follow the weights closely even over few choices.
    #[default]
    Shuffled,
    /// masim's own choice: independent, identically distributed draws with probability
    /// weight / sum(weights).
    Random,
}

tierlab_core::choice_param!(Selection);

/// Parameters of the `masim` workload.
#[params]
#[derive(Clone, Debug)]
pub struct MasimParams {
    /// Path of a masim config file, relative to the scenario's folder. Exactly one of
    /// `config` and `text` is required.
    #[param(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// An inline masim config (same grammar as a file). Exactly one of `config` and `text`
    /// is required.
    #[param(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Accesses per pattern choice (an `rw` access is a load plus a store): masim's
    /// `--nr_accesses_per_region`.
    #[param(
        default = 131_072,
        range = "[1, 1e12]",
        unit = "accesses",
        sourced = "reference/masim-format.md: masim's --nr_accesses_per_region, 131,072"
    )]
    pub accesses_per_choice: u64,
    /// Number of times the whole phase list runs (masim's `--repeat`).
    #[param(default = 1, range = "[1, 1e9]", unit = "repetitions", setting)]
    pub repeat: u32,
    /// `"shuffled"` or `"random"`. `random` is masim's i.i.d. weighted choice.
    /// `shuffled` draws choices from a shuffled bag holding each pattern weight/g times
    /// (g = gcd of the phase's weights), refilled when empty: the same expected shares,
    /// but the shares within a phase match the weights closely even with few choices
    /// (masim at ~10,000 accesses/ms makes only ~760 choices in a 10 s phase, so i.i.d.
    /// choice would miss the weights by ~2%).
    #[param(default)]
    pub selection: Selection,
}

/// Largest number of pattern iterations emitted in one batch; a longer choice continues in
/// the following batches (without a time check in between, as in masim).
const MAX_CHUNK: u64 = 1 << 17;

impl MasimParams {
    /// Load and parse the config named by `config` (resolved against `ctx.base_dir`) or given
    /// inline by `text`.
    pub fn load_config(&self, ctx: &BuildCtx) -> Result<MasimConfig> {
        match (&self.config, &self.text) {
            (Some(_), Some(_)) => Err(SimError::config(
                &ctx.scenario_file,
                "workload.config",
                "give either `config` (a file) or `text` (inline), not both",
            )),
            (None, None) => Err(SimError::config(
                &ctx.scenario_file,
                "workload.config",
                "masim needs `config` (path of a masim config file) or `text` (an inline config)",
            )),
            (Some(path), None) => {
                let p = Path::new(path);
                let full = if p.is_relative() { ctx.base_dir.join(p) } else { p.to_path_buf() };
                load_masim(&full)
            }
            (None, Some(text)) => parse_masim(text, &format!("{} (workload.text)", ctx.scenario_file)),
        }
    }
}

impl WorkloadParams for MasimWorkloadConfig {
    fn build(&self, ctx: &BuildCtx) -> Result<Box<dyn Workload>> {
        check_threads("masim", self.shared.threads, ctx)?;
        if self.accesses_per_choice == 0 {
            return Err(SimError::config(
                &ctx.scenario_file,
                "workload.accesses_per_choice",
                "must be at least 1",
            ));
        }
        if self.repeat == 0 {
            return Err(SimError::config(&ctx.scenario_file, "workload.repeat", "must be at least 1"));
        }
        let cfg = self.load_config(ctx)?;
        Ok(Box::new(Masim::new(cfg, self, ctx.seed)))
    }
}

/// Where the last batch of a thread was counted (for [`Workload::discard`]).
#[derive(Clone, Copy, Debug)]
struct LastBatch {
    counter: usize,
    run_phase: usize,
    len: u64,
    first_chunk: bool,
}

struct ThreadState {
    rng: Rng,
    /// Index of the current phase in run order (`round * nphases + j`).
    run_phase: usize,
    in_phase: bool,
    phase_end: Ps,
    choices_here: u64,
    /// Remaining draws per pattern of the current phase's bag (shuffled selection).
    bag: Vec<u64>,
    bag_left: u64,
    /// Sequential offset per flat pattern index.
    seq_off: Vec<u64>,
    /// Pattern (index within the phase) of the choice in progress and its remaining
    /// iterations.
    cur_pattern: usize,
    cur_left: u64,
    /// Memory accesses per (round, flat pattern).
    counts: Vec<u64>,
    /// Choices per run phase.
    choices: Vec<u64>,
    last: Option<LastBatch>,
    done: bool,
}

/// The `masim` workload (see the module docs).
pub struct Masim {
    cfg: MasimConfig,
    threads: usize,
    accesses_per_choice: u64,
    repeat: u32,
    selection: Selection,
    page_size: Option<PageSize>,
    populate: bool,
    region_base: Vec<u64>,
    /// First flat pattern index of each phase.
    pat_base: Vec<usize>,
    total_patterns: usize,
    /// Length of each phase.
    phase_len: Vec<Ps>,
    /// Per phase: bag multiplicity of each pattern (weight / gcd).
    bag_units: Vec<Vec<u64>>,
    st: Vec<ThreadState>,
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Replace characters that would break a dotted stat name.
pub(crate) fn stat_key(name: &str) -> String {
    let s: String = name.chars().map(|c| if c == '.' { '_' } else { c }).collect();
    if s.is_empty() {
        "_".into()
    } else {
        s
    }
}

impl Masim {
    fn new(cfg: MasimConfig, p: &MasimWorkloadConfig, seed: u64) -> Self {
        let mut pat_base = Vec::with_capacity(cfg.phases.len());
        let mut total_patterns = 0;
        for ph in &cfg.phases {
            pat_base.push(total_patterns);
            total_patterns += ph.patterns.len();
        }
        let phase_len =
            cfg.phases.iter().map(|ph| Ps::from_ns(ph.duration_ms.saturating_mul(1_000_000))).collect();
        let bag_units = cfg
            .phases
            .iter()
            .map(|ph| {
                let g = ph.patterns.iter().fold(0, |g, pt| gcd(g, pt.weight)).max(1);
                ph.patterns.iter().map(|pt| pt.weight / g).collect()
            })
            .collect();
        let st = (0..p.shared.threads)
            .map(|t| ThreadState {
                rng: Rng::derived(seed, "workload.masim", t as u64),
                run_phase: 0,
                in_phase: false,
                phase_end: Ps::ZERO,
                choices_here: 0,
                bag: Vec::new(),
                bag_left: 0,
                seq_off: vec![0; total_patterns],
                cur_pattern: 0,
                cur_left: 0,
                counts: Vec::new(),
                choices: Vec::new(),
                last: None,
                done: false,
            })
            .collect();
        Masim {
            cfg,
            threads: p.shared.threads,
            accesses_per_choice: p.accesses_per_choice,
            repeat: p.repeat,
            selection: p.selection,
            page_size: p.shared.page_size,
            populate: p.shared.populate,
            region_base: Vec::new(),
            pat_base,
            total_patterns,
            phase_len,
            bag_units,
            st,
        }
    }

    /// The parsed config.
    pub fn config(&self) -> &MasimConfig {
        &self.cfg
    }

    fn choose(&mut self, t: usize, j: usize) -> usize {
        let s = &mut self.st[t];
        let pats = &self.cfg.phases[j].patterns;
        match self.selection {
            Selection::Random => {
                let total: u64 = pats.iter().map(|p| p.weight).sum();
                let mut u = s.rng.below(total);
                for (k, p) in pats.iter().enumerate() {
                    if u < p.weight {
                        return k;
                    }
                    u -= p.weight;
                }
                unreachable_last(pats.len())
            }
            Selection::Shuffled => {
                if s.bag_left == 0 {
                    s.bag.clear();
                    s.bag.extend_from_slice(&self.bag_units[j]);
                    s.bag_left = s.bag.iter().sum();
                }
                let mut u = s.rng.below(s.bag_left);
                s.bag_left -= 1;
                for (k, c) in s.bag.iter_mut().enumerate() {
                    if u < *c {
                        *c -= 1;
                        return k;
                    }
                    u -= *c;
                }
                unreachable_last(pats.len())
            }
        }
    }
}

/// Fallback for weighted scans (cannot happen: the draw is below the total).
#[cold]
fn unreachable_last(n: usize) -> usize {
    n - 1
}

#[inline]
fn emit_seq(out: &mut Vec<Access>, base: u64, size: u64, stride: u64, off: &mut u64, n: u64, mode: RwMode) {
    let mut o = *off;
    let mut next = || {
        o = o.saturating_add(stride);
        if o >= size {
            o = 0;
        }
        base + o
    };
    match mode {
        RwMode::ReadOnly => out.extend((0..n).map(|_| Access::read(next()))),
        RwMode::WriteOnly => out.extend((0..n).map(|_| Access::write(next()))),
        RwMode::ReadWrite => {
            out.reserve(2 * n as usize);
            for _ in 0..n {
                let a = next();
                out.push(Access::read(a));
                out.push(Access::write(a));
            }
        }
    }
    *off = o;
}

#[inline]
fn emit_rnd(out: &mut Vec<Access>, base: u64, size: u64, rng: &mut Rng, n: u64, mode: RwMode) {
    match mode {
        RwMode::ReadOnly => out.extend((0..n).map(|_| Access::read(base + rng.below(size)))),
        RwMode::WriteOnly => out.extend((0..n).map(|_| Access::write(base + rng.below(size)))),
        RwMode::ReadWrite => {
            out.reserve(2 * n as usize);
            for _ in 0..n {
                let a = base + rng.below(size);
                out.push(Access::read(a));
                out.push(Access::write(a));
            }
        }
    }
}

impl Workload for Masim {
    fn threads(&self) -> usize {
        self.threads
    }

    fn setup(&mut self, mem: &mut dyn AddressSpace) -> Result<()> {
        self.region_base.clear();
        for r in &self.cfg.regions {
            let opts = MapOptions {
                name: r.name.clone(),
                page_size: self.page_size,
                populate: self.populate,
                thread: 0,
            };
            self.region_base.push(mem.mmap(r.size, opts)?);
        }
        Ok(())
    }

    fn next_batch(
        &mut self,
        t: usize,
        now: Ps,
        out: &mut Vec<Access>,
        _mem: &mut dyn AddressSpace,
    ) -> Result<Step> {
        if self.region_base.len() != self.cfg.regions.len() {
            return Err(SimError::runtime("masim: next_batch called before setup"));
        }
        let nphases = self.cfg.phases.len();
        let total_runs = nphases * self.repeat as usize;
        let first_chunk = self.st[t].cur_left == 0;
        if first_chunk {
            // A new choice: first see whether the phase's time is up.
            loop {
                let s = &mut self.st[t];
                if s.done {
                    return Ok(Step::Done);
                }
                let j = s.run_phase % nphases;
                if !s.in_phase {
                    s.in_phase = true;
                    s.phase_end = now.saturating_add(self.phase_len[j]);
                    s.choices_here = 0;
                    s.bag_left = 0;
                    let round = s.run_phase / nphases;
                    let need = (round + 1) * self.total_patterns;
                    if s.counts.len() < need {
                        s.counts.resize(need, 0);
                    }
                    if s.choices.len() <= s.run_phase {
                        s.choices.resize(s.run_phase + 1, 0);
                    }
                } else if s.choices_here > 0 && now >= s.phase_end {
                    s.in_phase = false;
                    s.run_phase += 1;
                    if s.run_phase >= total_runs {
                        s.done = true;
                        return Ok(Step::Done);
                    }
                    continue;
                }
                break;
            }
            let j = self.st[t].run_phase % nphases;
            let k = self.choose(t, j);
            let s = &mut self.st[t];
            s.cur_pattern = k;
            s.cur_left = self.accesses_per_choice;
            s.choices_here += 1;
            s.choices[s.run_phase] += 1;
        }

        let s = &mut self.st[t];
        let j = s.run_phase % nphases;
        let round = s.run_phase / nphases;
        let k = s.cur_pattern;
        let flat = self.pat_base[j] + k;
        let pat = &self.cfg.phases[j].patterns[k];
        let base = self.region_base[pat.region];
        let size = self.cfg.regions[pat.region].size;
        let n = s.cur_left.min(MAX_CHUNK);
        s.cur_left -= n;
        let before = out.len();
        if pat.random {
            emit_rnd(out, base, size, &mut s.rng, n, pat.mode);
        } else {
            emit_seq(out, base, size, pat.stride, &mut s.seq_off[flat], n, pat.mode);
        }
        let emitted = (out.len() - before) as u64;
        let counter = round * self.total_patterns + flat;
        s.counts[counter] += emitted;
        s.last = Some(LastBatch { counter, run_phase: s.run_phase, len: emitted, first_chunk });
        Ok(Step::Continue)
    }

    fn discard(&mut self, t: usize, unexecuted: &[Access]) {
        let s = &mut self.st[t];
        if let Some(last) = s.last.take() {
            let n = (unexecuted.len() as u64).min(last.len);
            s.counts[last.counter] -= n;
            if n == last.len && last.first_chunk {
                s.choices[last.run_phase] -= 1;
            }
        }
    }

    fn report_stats(&self, out: &mut Stats) {
        let nphases = self.cfg.phases.len();
        let runs = self.st.iter().map(|s| s.choices.len()).max().unwrap_or(0);
        let mut region_total = vec![0u64; self.cfg.regions.len()];
        let mut all = 0u64;
        for i in 0..runs {
            let j = i % nphases;
            let round = i / nphases;
            let ph = &self.cfg.phases[j];
            let prefix = format!("workload.phase.{i}");
            out.set(format!("{prefix}.name"), ph.name.as_str());
            let choices: u64 = self.st.iter().map(|s| s.choices.get(i).copied().unwrap_or(0)).sum();
            out.set(format!("{prefix}.choices"), choices);
            let mut per_region = vec![None::<u64>; self.cfg.regions.len()];
            let mut phase_total = 0u64;
            for (k, pt) in ph.patterns.iter().enumerate() {
                let idx = round * self.total_patterns + self.pat_base[j] + k;
                let c: u64 = self.st.iter().map(|s| s.counts.get(idx).copied().unwrap_or(0)).sum();
                *per_region[pt.region].get_or_insert(0) += c;
                region_total[pt.region] += c;
                phase_total += c;
            }
            for (r, c) in per_region.iter().enumerate() {
                if let Some(c) = c {
                    let name = stat_key(&self.cfg.regions[r].name);
                    out.set(format!("{prefix}.region.{name}.accesses"), *c);
                }
            }
            out.set(format!("{prefix}.accesses"), phase_total);
            all += phase_total;
        }
        for (r, region) in self.cfg.regions.iter().enumerate() {
            out.set(format!("workload.region.{}.accesses", stat_key(&region.name)), region_total[r]);
        }
        out.set("workload.accesses", all);
    }

    fn natural_duration(&self) -> Option<Ps> {
        let ns = self.cfg.total_duration_ms().saturating_mul(1_000_000).saturating_mul(self.repeat as u64);
        Some(Ps::from_ns(ns))
    }
}

/// `MasimParams` with the workload parameters every kind shares ([`WorkloadShared`]).
pub type MasimWorkloadConfig = crate::params::With<WorkloadShared, MasimParams>;

impl crate::params::SharedDefaults<WorkloadShared> for MasimParams {
    fn shared_defaults() -> WorkloadShared {
        WorkloadShared::default()
    }
}

/// Test helpers shared by the workloads' unit tests: a mock address space and a small
/// driver with a fake clock.
#[cfg(test)]
pub(crate) mod testing {
    use super::super::{Access, AddressSpace, MapOptions, Ps, Step, Workload};
    use crate::error::{Result, SimError};

    /// One mapping of the mock.
    #[derive(Clone, Debug)]
    pub struct MockMap {
        pub start: u64,
        pub len: u64,
        pub opts: MapOptions,
    }

    /// An address space that hands out 2 MiB-aligned ranges and records the mappings.
    #[derive(Default)]
    pub struct MockSpace {
        pub maps: Vec<MockMap>,
        next: u64,
    }

    impl MockSpace {
        pub fn new() -> Self {
            MockSpace { maps: Vec::new(), next: 1 << 30 }
        }
        pub fn find(&self, name: &str) -> &MockMap {
            self.maps.iter().find(|m| m.opts.name == name).unwrap_or_else(|| panic!("no mapping {name}"))
        }
        pub fn contains(&self, addr: u64) -> bool {
            self.maps.iter().any(|m| addr >= m.start && addr - m.start < m.len)
        }
    }

    impl AddressSpace for MockSpace {
        fn mmap(&mut self, len: u64, opts: MapOptions) -> Result<u64> {
            let page = opts.page_size.map_or(4096, |p| p.bytes());
            let len = len.div_ceil(page) * page;
            let start = self.next;
            self.next = (start + len).div_ceil(2 << 20) * (2 << 20) + (2 << 20);
            self.maps.push(MockMap { start, len, opts });
            Ok(start)
        }
        fn mmap_fixed(&mut self, addr: u64, len: u64, opts: MapOptions) -> Result<()> {
            if addr & 4095 != 0 || len & 4095 != 0 || len == 0 {
                return Err(SimError::runtime(format!("mmap_fixed: unaligned {addr:#x}+{len:#x}")));
            }
            if self.maps.iter().any(|m| addr < m.start + m.len && m.start < addr + len) {
                return Err(SimError::runtime(format!("mmap_fixed: {addr:#x}+{len:#x} overlaps")));
            }
            self.maps.push(MockMap { start: addr, len, opts });
            Ok(())
        }
        fn munmap(&mut self, addr: u64) -> Result<()> {
            let i =
                self.maps.iter().position(|m| m.start == addr).ok_or_else(|| SimError::runtime("munmap"))?;
            self.maps.remove(i);
            Ok(())
        }
    }

    /// Run `w` with a fake clock: every access advances its thread's clock by `per_access`;
    /// threads are interleaved by clock (the lowest clock runs next). Stops each thread at
    /// `duration` (zero = when it reports Done), handing the unexecuted tail back through
    /// `discard`. `f(t, now, access)` sees every executed access. Returns the final clocks.
    pub fn drive(
        w: &mut dyn Workload,
        mem: &mut MockSpace,
        per_access: Ps,
        duration: Ps,
        mut f: impl FnMut(usize, Ps, &Access),
    ) -> Vec<Ps> {
        let n = w.threads();
        let mut clock = vec![Ps::ZERO; n];
        let mut live = vec![true; n];
        let mut buf = Vec::new();
        while let Some(t) = (0..n).filter(|&t| live[t]).min_by_key(|&t| clock[t]) {
            buf.clear();
            let step = w.next_batch(t, clock[t], &mut buf, mem).expect("next_batch");
            for (i, a) in buf.iter().enumerate() {
                if duration > Ps::ZERO && clock[t] >= duration {
                    w.discard(t, &buf[i..]);
                    live[t] = false;
                    break;
                }
                f(t, clock[t], a);
                clock[t] += per_access;
            }
            if step == Step::Done || (duration > Ps::ZERO && clock[t] >= duration) {
                live[t] = false;
            }
        }
        clock
    }

    /// Like [`drive`] but without a per-access callback (faster; whole batches at once).
    pub fn drive_fast(w: &mut dyn Workload, mem: &mut MockSpace, per_access: Ps, duration: Ps) -> Vec<Ps> {
        let n = w.threads();
        let mut clock = vec![Ps::ZERO; n];
        let mut live = vec![true; n];
        let mut buf = Vec::new();
        while let Some(t) = (0..n).filter(|&t| live[t]).min_by_key(|&t| clock[t]) {
            buf.clear();
            let step = w.next_batch(t, clock[t], &mut buf, mem).expect("next_batch");
            let len = buf.len() as u64;
            if duration > Ps::ZERO && clock[t] + per_access.times(len) > duration {
                let done = (duration - clock[t]).ps().div_ceil(per_access.ps());
                w.discard(t, &buf[done as usize..]);
                clock[t] += per_access.times(done);
                live[t] = false;
            } else {
                clock[t] += per_access.times(len);
            }
            if step == Step::Done {
                live[t] = false;
            }
        }
        clock
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use crate::workload::AccessKind;
    use std::path::PathBuf;

    fn ctx(seed: u64) -> BuildCtx {
        BuildCtx {
            seed,
            base_dir: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/masim"),
            scenario_file: "test.toml".into(),
            cores: 8,
            duration: Ps::ZERO,
            replay: None,
        }
    }

    fn params(toml_text: &str) -> MasimWorkloadConfig {
        toml::from_str(toml_text).expect("params")
    }

    fn have_data() -> bool {
        ctx(0).base_dir.join("zigzag.cfg").exists()
    }

    /// Check every phase's per-region shares against its weights.
    fn check_shares(cfg_name: &str, threads: usize) {
        let p = params(&format!(
            "config = \"{cfg_name}\"\nthreads = {threads}\n# same choices per phase as 131072 accesses/choice at 100 ns/access\naccesses_per_choice = 1024"
        ));
        let mut w = p.build(&ctx(7)).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        drive_fast(w.as_mut(), &mut mem, Ps::from_ns(100 * 128), Ps::ZERO);
        let mut stats = Stats::new();
        w.report_stats(&mut stats);
        let cfg = p.load_config(&ctx(7)).unwrap();
        for (i, ph) in cfg.phases.iter().enumerate() {
            let total: u64 = stats.get_u64(&format!("workload.phase.{i}.accesses"));
            assert!(total > 0, "{cfg_name} phase {i}");
            let wsum = ph.total_weight() as f64;
            for pt in &ph.patterns {
                let name = &cfg.regions[pt.region].name;
                let got = stats.get_u64(&format!("workload.phase.{i}.region.{name}.accesses")) as f64
                    / total as f64;
                let want = pt.weight as f64 / wsum;
                assert!(
                    (got - want).abs() < 0.01,
                    "{cfg_name} phase {i} region {name}: share {got:.4} vs weight {want:.4}"
                );
            }
            let choices = stats.get_u64(&format!("workload.phase.{i}.choices"));
            let expect = ph.duration_ms as f64 * 1e6 / (1024.0 * 128.0 * 100.0) * threads as f64;
            assert!(
                (choices as f64 - expect).abs() <= 2.0 * threads as f64,
                "phase {i}: {choices} choices vs {expect}"
            );
        }
        let d = w.natural_duration().unwrap();
        assert_eq!(d, Ps::from_ns(cfg.total_duration_ms() * 1_000_000));
    }

    #[test]
    fn zigzag_shares_follow_weights() {
        if !have_data() {
            return;
        }
        check_shares("zigzag.cfg", 1);
        check_shares("zigzag.cfg", 2);
    }

    #[test]
    fn stairs_shares_follow_weights() {
        if !have_data() {
            return;
        }
        check_shares("stairs.cfg", 1);
    }

    #[test]
    fn real_scale_initial_phase_shares() {
        // 131072 accesses per choice at 100 ns per access over a 10 s phase with 10 patterns.
        let text = (0..10).map(|i| format!("s{i}, 10000000\n")).collect::<String>()
            + "\ninit\n10000\n"
            + &(0..10).map(|i| format!("s{i}, 0, 4096, 1\n")).collect::<String>();
        let p = crate::params::With {
            shared: WorkloadShared { threads: 1, page_size: None, populate: false },
            own: MasimParams {
                config: None,
                text: Some(text),
                accesses_per_choice: 131_072,
                repeat: 1,
                selection: Selection::Shuffled,
            },
        };
        let mut w = p.build(&ctx(1)).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        drive_fast(w.as_mut(), &mut mem, Ps::from_ns(100), Ps::ZERO);
        let mut stats = Stats::new();
        w.report_stats(&mut stats);
        let total = stats.get_u64("workload.phase.0.accesses") as f64;
        for i in 0..10 {
            let got = stats.get_u64(&format!("workload.phase.0.region.s{i}.accesses")) as f64 / total;
            assert!((got - 0.1).abs() < 0.01, "s{i}: {got}");
        }
        assert_eq!(stats.get_u64("workload.phase.0.choices"), 763);
    }

    #[test]
    fn default_file_with_tiny_regions() {
        if !have_data() {
            return;
        }
        let p = params("config = \"default\"\naccesses_per_choice = 1000\nrepeat = 2");
        let mut w = p.build(&ctx(3)).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        assert_eq!(mem.maps.len(), 3);
        assert!(mem.maps.iter().all(|m| m.len == 4096));
        let (a, b, c) = (mem.find("a").start, mem.find("b").start, mem.find("c").start);
        let mut reads = 0u64;
        let mut writes = 0u64;
        let mut last_b_read = None;
        drive(w.as_mut(), &mut mem, Ps::from_ns(1000), Ps::ZERO, |_, _, acc| {
            let r = if acc.addr >= a && acc.addr < a + 256 {
                "a"
            } else if acc.addr >= b && acc.addr < b + 64 {
                "b"
            } else if acc.addr >= c && acc.addr < c + 128 {
                "c"
            } else {
                panic!("access {:#x} outside the regions", acc.addr)
            };
            match (r, acc.kind) {
                ("a", AccessKind::Write) | ("c", AccessKind::Read) => {}
                ("b", AccessKind::Read) => last_b_read = Some(acc.addr),
                ("b", AccessKind::Write) => assert_eq!(last_b_read.take(), Some(acc.addr)),
                other => panic!("unexpected {other:?}"),
            }
            if acc.is_write() {
                writes += 1
            } else {
                reads += 1
            }
        });
        assert!(reads > 0 && writes > 0);
        let mut stats = Stats::new();
        w.report_stats(&mut stats);
        // Two rounds of two phases, counted in run order.
        for i in 0..4 {
            assert_eq!(
                stats.get(&format!("workload.phase.{i}.name")),
                Some(&crate::stats::StatValue::from(if i % 2 == 0 {
                    "example phase 1"
                } else {
                    "example phase 2"
                }))
            );
        }
        assert!(stats.get("workload.phase.4.name").is_none());
        let sum: u64 =
            ["a", "b", "c"].iter().map(|r| stats.get_u64(&format!("workload.region.{r}.accesses"))).sum();
        assert_eq!(sum, reads + writes);
        assert_eq!(stats.get_u64("workload.accesses"), reads + writes);
        // b: sequential stride 4096 in a 64-byte region always wraps to offset 0.
        assert!(stats.get_u64("workload.phase.1.region.b.accesses") > 0);
    }

    #[test]
    fn sequential_offsets_wrap_and_persist() {
        let text = "r, 1000\n\np\n10\nr, 0, 300, 1, ro\n";
        let p = crate::params::With {
            shared: WorkloadShared { threads: 1, page_size: None, populate: false },
            own: MasimParams {
                config: None,
                text: Some(text.into()),
                accesses_per_choice: 5,
                repeat: 1,
                selection: Selection::Random,
            },
        };
        let mut w = p.build(&ctx(0)).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        let base = mem.find("r").start;
        let mut out = Vec::new();
        w.next_batch(0, Ps::ZERO, &mut out, &mut mem).unwrap();
        w.next_batch(0, Ps::NS, &mut out, &mut mem).unwrap();
        let offs: Vec<u64> = out.iter().map(|a| a.addr - base).collect();
        assert_eq!(offs, vec![300, 600, 900, 0, 300, 600, 900, 0, 300, 600]);
        assert!(out.iter().all(|a| !a.is_write()));
    }

    #[test]
    fn deterministic_by_seed() {
        let run = |seed| {
            let p = params("text = \"a, 1G\\nb, 1M\\n\\np\\n10\\na, 1, 64, 3\\nb, 1, 64, 1, rw\\n\"\naccesses_per_choice = 100");
            let mut w = p.build(&ctx(seed)).unwrap();
            let mut mem = MockSpace::new();
            w.setup(&mut mem).unwrap();
            let mut v = Vec::new();
            drive(w.as_mut(), &mut mem, Ps::from_ns(1000), Ps::ZERO, |_, _, a| v.push(*a));
            v
        };
        let (a, b, c) = (run(1), run(1), run(2));
        assert!(!a.is_empty());
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn discard_uncounts_the_tail() {
        let p = params(
            "text = \"a, 1M\\n\\np\\n1000\\na, 1, 64, 1\\n\"\naccesses_per_choice = 1000\nthreads = 2",
        );
        let mut w = p.build(&ctx(5)).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        let mut executed = 0u64;
        drive(w.as_mut(), &mut mem, Ps::from_ns(10), Ps::from_ns(123_456), |_, _, _| executed += 1);
        let mut stats = Stats::new();
        w.report_stats(&mut stats);
        assert_eq!(stats.get_u64("workload.region.a.accesses"), executed);
        assert_eq!(executed, 2 * 12_346);
        // 12346 accesses per thread = 13 choices (the 13th partly executed).
        assert_eq!(stats.get_u64("workload.phase.0.choices"), 26);
    }

    #[test]
    fn parameter_errors() {
        let c = ctx(0);
        let e = params("accesses_per_choice = 1").build(&c).err().unwrap();
        assert!(e.to_string().contains("workload.config"), "{e}");
        let e = params("text = \"a, 1\\n\\np\\n1\\na, 1, 1, 1\"\nconfig = \"x\"").build(&c).err().unwrap();
        assert!(e.to_string().contains("not both"), "{e}");
        let e = params("text = \"a, 1\\n\\np\\n1\\na, 1, 1, 1\"\nthreads = 0").build(&c).err().unwrap();
        assert!(e.to_string().contains("workload.threads"), "{e}");
        let e = params("text = \"a, 1\\n\\np\\n1\\na, 1, 1, 1\"\nthreads = 9").build(&c).err().unwrap();
        assert!(e.to_string().contains("9 threads"), "{e}");
        let e = params("text = \"a, 1\\n\\np\\n1\\na, 1, 1, 1\"\nrepeat = 0").build(&c).err().unwrap();
        assert!(e.to_string().contains("workload.repeat"), "{e}");
        let e = params("text = \"a, 1\\n\\np\\n1\\nb, 1, 1, 1\"").build(&c).err().unwrap();
        assert_eq!(e.kind(), "masim");
        assert!(e.to_string().contains("test.toml (workload.text):5"), "{e}");
        let e = params("config = \"missing.cfg\"").build(&c).err().unwrap();
        assert_eq!(e.kind(), "input");
        assert!(toml::from_str::<MasimWorkloadConfig>("config = \"x\"\nthread = 2").is_err());
        assert!(toml::from_str::<MasimWorkloadConfig>("config = \"x\"\nselection = \"fair\"").is_err());
    }

    #[test]
    fn export_prints_defaults() {
        let p = params("config = \"zigzag.cfg\"");
        let s = toml::to_string(&p).unwrap();
        for key in [
            "threads = 1",
            "accesses_per_choice = 131072",
            "repeat = 1",
            "selection = \"shuffled\"",
            "populate = false",
        ] {
            assert!(s.contains(key), "{s}");
        }
        let back: MasimWorkloadConfig = toml::from_str(&s).unwrap();
        assert_eq!(back.accesses_per_choice, 131_072);
    }

    #[test]
    fn random_selection_is_iid_weighted() {
        let p = params("text = \"a, 1M\\nb, 1M\\n\\np\\n100000\\na, 0, 64, 3\\nb, 0, 64, 1\\n\"\naccesses_per_choice = 1\nselection = \"random\"");
        let mut w = p.build(&ctx(11)).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        drive_fast(w.as_mut(), &mut mem, Ps::from_ns(1000), Ps::from_ns(100_000_000));
        let mut stats = Stats::new();
        w.report_stats(&mut stats);
        let a = stats.get_u64("workload.phase.0.region.a.accesses") as f64;
        let b = stats.get_u64("workload.phase.0.region.b.accesses") as f64;
        assert!((a / (a + b) - 0.75).abs() < 0.01, "{}", a / (a + b));
    }
}
