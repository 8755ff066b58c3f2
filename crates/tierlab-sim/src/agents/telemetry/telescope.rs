//! Telescope: DAMON's regions profiled through Accessed bits at the upper page-table levels
//! (USENIX ATC 2024, "Telescope: Telemetry at Terabyte Scale"; the DAMON patch series
//! "mm/damon: Profiling enhancements for DAMON"; facts in `reference/telescope.md`).
//!
//! The regions, their merge/split and aggregation are DAMON's ([`super::regions`]). What
//! changes is the sample: for each region, per sampling interval, a random address is picked
//! and the **entry that is profiled** is the one of the highest page-table level whose span
//! (aligned, containing the address) satisfies the variant's rule:
//! - `bounded`: the span lies entirely inside the region `[start, end)`;
//! - `flex`: the span may overshoot the region, as long as
//!   `overshoot = (bytes of the span outside the region) / span <= flex_<level>`
//!   (25% at PMD and 15% at PUD in the paper's configuration; PGD 0, i.e. bounded).
//!
//! Levels are searched from PGD (512 GiB) down to PMD (2 MiB); the PTE (4 KiB) is the
//! fallback and always fits (regions are page aligned). With a 2 MiB page there is no PTE
//! level: a PTE choice becomes the PMD leaf, as in DAMON. The chosen entry's Accessed bit is
//! cleared without a TLB flush; one interval later it is tested: set means something in the
//! whole span was walked (one touched page marks the whole span — the over-reporting caveat
//! of the upstream review is inherent). An entry that is not present counts as not accessed.
//!
//! **Result reuse**: when several regions' samples fall in the same entry (same level, same
//! span) in one interval, the entry is cleared and tested once and every such region gets
//! the result. Because regions are sorted and disjoint and each chosen entry intersects its
//! region, an entry shared by two regions contains every region between them, so comparing
//! with the last entry chosen at the same level is exact (O(1), no per-sample allocation).
//!
//! The hot set per window follows [`super::regions`]: the last aggregation snapshot at or
//! before the window end, regions with `nr_accesses > hot_threshold`, all their bytes.
//!
//! # Parameters
//! [`TelescopeOwn`] and the region settings ([`RegionSettings`]) with the paper's intervals
//! (5 ms sampling window, 200 ms profiling window, 1 s VMA scan) and, as DAMON's, the region
//! bounds, the hot threshold and the intervals goal (defaults, ranges and sources in
//! `docs/parameters.md`). The Telescope paper's
//! configurations are Telescope-BND (`variant = "bounded"`) and Telescope-FLX (`flex`).
//!
//! # CPU cost
//! `ns_per_check` per distinct entry per interval: half when it is cleared, half when it is
//! tested. Regions reusing an entry's result cost nothing.

use serde::{Deserialize, Serialize};
use tierlab_core::param::{params, Provenance};

use super::regions::{Attrs, Region, RegionObserver, RegionSettings, Sampler};
use super::*;
use crate::agents::FeedKind;
use crate::agents::MachineView;
use crate::error::Result;
use crate::hw::pagetable::Level;
use crate::os::Flush;
use crate::params::{SharedDefaults, With};
use crate::rng::Rng;
use crate::units::Duration;

/// The Telescope variant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// The profiled entry's span lies inside the region.
    #[default]
    Bounded,
    /// The profiled entry's span may overshoot the region within a per-level threshold.
    Flex,
}

tierlab_core::choice_param!(Variant);

/// Telescope's own parameters (beside the region settings, [`RegionSettings`], flattened
/// into `kind = "telescope"` tables with the paper's defaults).
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct TelescopeOwn {
    /// `bounded` (Telescope-BND) or `flex` (Telescope-FLX).
    #[param(default, setting)]
    pub variant: Variant,
    /// `flex`: largest overshoot fraction of a PMD (2 MiB) entry.
    #[param(
        default = 0.25,
        range = "[0, 1)",
        unit = "fraction",
        sourced = "reference/telescope.md: Flex, n = 25% at L2 (PMD) in the paper's configuration"
    )]
    pub flex_pmd: f64,
    /// `flex`: largest overshoot fraction of a PUD (1 GiB) entry.
    #[param(
        default = 0.15,
        range = "[0, 1)",
        unit = "fraction",
        sourced = "reference/telescope.md: Flex, n = 15% at L3 (PUD) in the paper's configuration"
    )]
    pub flex_pud: f64,
    /// `flex`: largest overshoot fraction of a PGD (512 GiB) entry.
    #[param(
        default = 0.0,
        range = "[0, 1)",
        unit = "fraction",
        assumed = "bounded at PGD: the paper gives no PGD threshold"
    )]
    pub flex_pgd: f64,
}

/// Telescope's parameters: the region settings and its own.
pub type TelescopeParams = With<RegionSettings, TelescopeOwn>;

impl SharedDefaults<RegionSettings> for TelescopeOwn {
    fn shared_defaults() -> RegionSettings {
        RegionSettings::with_intervals(Duration(200_000_000), Duration(1_000_000_000))
    }
    /// Telescope's intervals are the paper's; its cost per check is assumed as DAMON's (the
    /// region settings declare the rest with their sources).
    fn shared_provenance(field: &str) -> Option<Provenance> {
        use Provenance::{Assumed, Sourced};
        Some(match field {
            "sample_interval" => {
                Sourced("papers/telescope-slides.txt: 5 ms sampling window (reference/telescope.md)")
            }
            "aggr_interval" => {
                Sourced("papers/telescope-slides.txt: 200 ms profiling window (reference/telescope.md)")
            }
            "ops_update_interval" => {
                Sourced("papers/telescope-slides.txt: 1 sec vma-scan interval (reference/telescope.md)")
            }
            "ns_per_check" => {
                Assumed("as DAMON's: one walk to the entry and one bit operation, twice (prepare and check)")
            }
            _ => return None,
        })
    }
}

impl SharedDefaults<TelemetryShared> for TelescopeOwn {
    fn shared_defaults() -> TelemetryShared {
        TelemetryShared::default()
    }
}

impl With<RegionSettings, TelescopeOwn> {
    /// The validated attributes.
    pub fn attrs(&self, ctx: &TelemetryBuildCtx) -> Result<Attrs> {
        self.shared.attrs(ctx)
    }

    /// The sampler these parameters describe.
    pub fn sampler(&self) -> TelescopeSampler {
        TelescopeSampler::new(match self.variant {
            Variant::Bounded => None,
            Variant::Flex => Some([self.flex_pgd, self.flex_pud, self.flex_pmd]),
        })
    }
}

impl TelemetryParams for TelescopeParams {
    fn build(&self, label: &str, ctx: &TelemetryBuildCtx) -> Result<Box<dyn Observer>> {
        let attrs = self.attrs(ctx)?;
        let rng = Rng::derived(ctx.seed, &format!("telemetry.{label}"), 0);
        let r = &self.shared;
        Ok(Box::new(RegionObserver::new(attrs, rng, self.sampler(), r.ns_per_check, r.hot_threshold)))
    }
    fn publishes(&self) -> &'static [FeedKind] {
        &[FeedKind::Regions]
    }
}

/// The level Telescope profiles for `addr` in the region `[start, end)`: the highest of PGD,
/// PUD, PMD whose aligned span containing `addr` lies inside the region (`flex = None`), or
/// whose overshoot (bytes of the span outside the region / span) is at most the level's
/// threshold (`flex = Some([pgd, pud, pmd])`; a threshold of 0 demands the span inside);
/// else PTE.
pub fn choose_level(addr: u64, start: u64, end: u64, flex: Option<&[f64; 3]>) -> Level {
    debug_assert!(start <= addr && addr < end);
    for level in [Level::Pgd, Level::Pud, Level::Pmd] {
        let span = level.span();
        let base = addr & !(span - 1);
        let lim = base + span;
        if base >= start && lim <= end {
            return level;
        }
        if let Some(thr) = flex {
            let overshoot = span - (lim.min(end) - base.max(start));
            if overshoot as f64 <= thr[level as usize] * span as f64 {
                return level;
            }
        }
    }
    Level::Pte
}

/// Telescope's sampler.
#[derive(Clone, Debug)]
pub struct TelescopeSampler {
    flex: Option<[f64; 3]>,
    /// Per level: the last entry chosen in this pass (its base) and its result.
    last: [Option<(u64, bool)>; 4],
    /// Entries tested per level (PGD, PUD, PMD, PTE).
    pub tested_per_level: [u64; 4],
}

impl TelescopeSampler {
    /// A sampler: `flex` = per-level overshoot thresholds `[pgd, pud, pmd]`, `None` = bounded.
    pub fn new(flex: Option<[f64; 3]>) -> Self {
        TelescopeSampler { flex, last: [None; 4], tested_per_level: [0; 4] }
    }
}

impl Sampler for TelescopeSampler {
    fn prepare(&mut self, regions: &mut [Region], rng: &mut Rng, m: &mut MachineView) -> u64 {
        self.last = [None; 4];
        let mut n = 0;
        for r in regions.iter_mut() {
            let a = r.start + rng.below(r.end - r.start);
            let mut level = choose_level(a, r.start, r.end, self.flex.as_ref());
            // A leaf above the chosen level holds the Accessed bit (no lower tables).
            if level > Level::Pud && m.is_giant(a) {
                level = Level::Pud;
            } else if level == Level::Pte && m.is_huge(a) {
                level = Level::Pmd;
            }
            r.sampling_addr = a;
            r.level = level;
            let base = a & !(level.span() - 1);
            let slot = &mut self.last[level as usize];
            if slot.map(|(b, _)| b) != Some(base) {
                m.clear_accessed(a, level, Flush::None);
                *slot = Some((base, false));
                n += 1;
            }
        }
        n
    }

    fn check(&mut self, regions: &mut [Region], m: &MachineView) -> u64 {
        self.last = [None; 4];
        let mut tested = 0;
        for r in regions.iter_mut() {
            let li = r.level as usize;
            let base = r.sampling_addr & !(r.level.span() - 1);
            let accessed = match self.last[li] {
                Some((b, res)) if b == base => res,
                _ => {
                    let res = m.test_accessed(r.sampling_addr, r.level);
                    self.last[li] = Some((base, res));
                    self.tested_per_level[li] += 1;
                    tested += 1;
                    res
                }
            };
            r.nr_accesses += accessed as u32;
        }
        tested
    }

    fn report_stats(&self, prefix: &str, out: &mut crate::stats::Stats) {
        out.set(format!("{prefix}.variant"), if self.flex.is_some() { "flex" } else { "bounded" });
        for l in Level::ALL {
            out.set(format!("{prefix}.entries_checked_{}", l.name()), self.tested_per_level[l as usize]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::damon::DamonSampler;
    use super::super::regions::testutil::{drive, machine, map, precision_recall};
    use super::*;
    use crate::workload::{Access, AddressSpace, MapOptions, PageSize};

    const K4: u64 = 4096;
    const M2: u64 = 2 << 20;
    const G1: u64 = 1 << 30;
    const G512: u64 = 512 << 30;
    const PAPER: [f64; 3] = [0.0, 0.15, 0.25];

    /// The 2-core test machine with paging-structure caches on (the default) or off.
    fn machine_psc(on: bool) -> crate::os::Machine {
        let mut m = machine();
        if !on {
            let cfg = crate::os::MachineConfig {
                cores: 2,
                psc: crate::hw::psc::PscConfig { enabled: false, ..Default::default() },
                ..Default::default()
            };
            m = crate::os::Machine::new(&cfg);
            m.os.mm_cpumask[0] = true;
        }
        m
    }

    fn ctx() -> TelemetryBuildCtx {
        TelemetryBuildCtx {
            seed: 42,
            scenario_file: "t.toml".into(),
            index: 0,
            cores: 2,
            threads: 1,
            nodes: 2,
        }
    }

    /// Whether `level`'s entry for `addr` overshoots `[start, end)` by at most `thr` of its span.
    fn within(level: Level, addr: u64, start: u64, end: u64, thr: f64) -> bool {
        let span = level.span();
        let base = addr & !(span - 1);
        let over = span - ((base + span).min(end) - base.max(start));
        over as f64 <= thr * span as f64
    }

    #[test]
    fn bounded_picks_the_highest_level_inside() {
        let base = 16 * G512; // PGD aligned
        assert_eq!(choose_level(base + 5, base, base + G512, None), Level::Pgd);
        assert_eq!(choose_level(base + G1 + 5, base, base + 3 * G1, None), Level::Pud);
        // [2M, 5M): [2M, 4M) is a whole PMD entry; [4M, 5M) is not.
        assert_eq!(choose_level(base + 3 * M2 / 2, base + M2, base + 5 * M2 / 2, None), Level::Pmd);
        assert_eq!(choose_level(base + 2 * M2 + 4 * K4, base + M2, base + 5 * M2 / 2, None), Level::Pte);
        // A region one page short of a PUD: no PUD, PMDs inside it, the last PMD partial.
        let (s, e) = (base, base + G1 - K4);
        assert_eq!(choose_level(s + 7, s, e, None), Level::Pmd);
        assert_eq!(choose_level(e - 1, s, e, None), Level::Pte);
    }

    #[test]
    fn bounded_never_extends_outside_and_is_maximal() {
        let mut rng = Rng::new(11);
        for _ in 0..20_000 {
            // Random page-aligned regions around a PGD boundary, sizes up to ~1.5 TiB.
            let start = 16 * G512 + rng.below(1 << 28) * K4;
            let bits = 12 + rng.below(17);
            let size = (1 + rng.below(1 << bits)) * K4;
            let end = start + size;
            let a = start + rng.below(size);
            let l = choose_level(a, start, end, None);
            let span = l.span();
            let b = a & !(span - 1);
            assert!(
                b >= start && b + span <= end,
                "{l:?} entry [{b:#x}, +{span:#x}) outside [{start:#x}, {end:#x})"
            );
            if l != Level::Pgd {
                let up = Level::ALL[l as usize - 1];
                assert!(!within(up, a, start, end, 0.0), "{up:?} would also fit");
            }
        }
    }

    #[test]
    fn flex_overshoots_only_within_its_threshold() {
        let base = 16 * G512;
        // PUD: the region misses 100 MiB of the 1 GiB entry (9.8% <= 15%): PUD.
        assert_eq!(choose_level(base + 5, base, base + G1 - (100 << 20), Some(&PAPER)), Level::Pud);
        // Missing 200 MiB (19.5% > 15%): not PUD; the PMD under the address is inside.
        assert_eq!(choose_level(base + 5, base, base + G1 - (200 << 20), Some(&PAPER)), Level::Pmd);
        assert_eq!(choose_level(base + 5, base, base + G1 - (200 << 20), None), Level::Pmd);
        // PMD: region ends 1.6 MiB into a PMD entry (20% outside <= 25%): PMD.
        let (s, e) = (base, base + 10 * M2 + (8 << 20) / 5);
        assert_eq!(choose_level(e - 1, s, e, Some(&PAPER)), Level::Pmd);
        assert_eq!(choose_level(e - 1, s, e, None), Level::Pte);
        // Region ends 0.4 MiB into it (80% outside): PTE.
        let e = base + 10 * M2 + (2 << 20) / 5;
        assert_eq!(choose_level(e - 1, s, e, Some(&PAPER)), Level::Pte);
        // Exactly at the threshold: 25% outside is allowed.
        let e = base + 10 * M2 + 3 * M2 / 4;
        assert_eq!(choose_level(e - 1, s, e, Some(&PAPER)), Level::Pmd);
        let e = e - K4;
        assert_eq!(choose_level(e - 1, s, e, Some(&PAPER)), Level::Pte, "one page over 25%");
        // PGD threshold 0 by default: a region missing one page of a PGD entry is not PGD.
        assert_eq!(choose_level(base + 5, base, base + G512 - K4, Some(&PAPER)), Level::Pud);
    }

    #[test]
    fn flex_is_bounded_or_higher_and_respects_thresholds() {
        let mut rng = Rng::new(12);
        for _ in 0..20_000 {
            let start = 16 * G512 + rng.below(1 << 28) * K4;
            let bits = 12 + rng.below(17);
            let size = (1 + rng.below(1 << bits)) * K4;
            let end = start + size;
            let a = start + rng.below(size);
            let b = choose_level(a, start, end, None);
            let f = choose_level(a, start, end, Some(&PAPER));
            assert!(f <= b, "flex {f:?} below bounded {b:?}");
            if f != Level::Pte {
                assert!(within(f, a, start, end, PAPER[f as usize]));
            }
            for &up in &Level::ALL[..f as usize] {
                assert!(!within(up, a, start, end, PAPER[up as usize]), "{up:?} was acceptable");
            }
        }
    }

    #[test]
    fn shared_entries_are_cleared_and_tested_once() {
        let mut m = machine();
        let opts = MapOptions { page_size: Some(PageSize::Huge2M), ..MapOptions::named("h") };
        let h = m.mmap(M2, opts).unwrap();
        m.access(0, Access::read(h)).unwrap();
        // Two regions inside one 2 MiB page: both profile its PMD leaf.
        let mut regions = vec![Region::new(h, h + M2 / 2), Region::new(h + M2 / 2, h + M2)];
        let mut s = TelescopeSampler::new(None);
        let mut rng = Rng::new(1);
        assert_eq!(s.prepare(&mut regions, &mut rng, &mut MachineView::new(&mut m)), 1);
        assert!(regions.iter().all(|r| r.level == Level::Pmd));
        m.clear_accessed(h, Level::Pmd, Flush::Shootdown { initiator: 0 });
        m.access(0, Access::read(h + 64)).unwrap();
        assert_eq!(s.check(&mut regions, &MachineView::new(&mut m)), 1);
        assert_eq!((regions[0].nr_accesses, regions[1].nr_accesses), (1, 1));
    }

    /// Telescope's PUD check and DAMON's PTE check of a 1 GiB region (one PUD entry) of a
    /// populated 2 GiB mapping with 16 MiB hot, over 20 sampling intervals of 5 s: (the
    /// region's level, Telescope's nr_accesses, DAMON's nr_accesses).
    fn small_hot_set(psc: bool, flush_every_interval: bool) -> (Level, u32, u32) {
        let mut m = machine_psc(psc);
        let base = map(&mut m, 2 * G1, "heap");
        let (lo, hot) = (base + 300 * M2, 16 << 20);
        let mut ts = vec![Region::new(base, base + G1)];
        let mut dm = ts.clone();
        let (mut s_ts, mut s_dm) = (TelescopeSampler::new(None), DamonSampler::default());
        let (mut r1, mut r2, mut r3) = (Rng::new(1), Rng::new(2), Rng::new(3));
        for _ in 0..20 {
            s_ts.prepare(&mut ts, &mut r1, &mut MachineView::new(&mut m));
            s_dm.prepare(&mut dm, &mut r2, &mut MachineView::new(&mut m));
            if flush_every_interval {
                // Any INVLPG on the core (an munmap, a migration elsewhere) empties its PSCs.
                m.hw.invalidate_page(0, base + G1 + 5 * M2);
            }
            let t = m.hw.cores[0].clock_ps + 5_000_000_000;
            while m.hw.cores[0].clock_ps < t {
                m.access(0, Access::read(lo + r3.below(hot / 64) * 64)).unwrap();
            }
            s_ts.check(&mut ts, &MachineView::new(&mut m));
            s_dm.check(&mut dm, &MachineView::new(&mut m));
        }
        (ts[0].level, ts[0].nr_accesses, dm[0].nr_accesses)
    }

    #[test]
    fn upper_levels_see_a_small_hot_set_that_damon_misses() {
        // Without paging-structure caches every TLB miss reads the PUD entry.
        let (level, ts, dm) = small_hot_set(false, false);
        assert_eq!(level, Level::Pud);
        assert_eq!(ts, 20, "the PUD bit is set every interval");
        assert!(dm <= 3, "DAMON's random page is rarely in the 1.6% hot: {dm}");
        // With them (the default), the 8 hot PMD entries stay in the 32-entry PDE cache and
        // the PUD entry in the PDPTE cache: once Telescope clears the PUD bit (without a
        // flush, as it does), no walk reads the PUD entry again, and the check reads cold.
        let (_, ts, dm_psc) = small_hot_set(true, false);
        assert!(ts <= 1, "the PUD bit must stay clear behind the PSCs: {ts}");
        assert_eq!(dm_psc, dm, "DAMON checks PTEs, which every walk reads");
        // An INVLPG on the core each interval empties the PSCs: the next walk reads the PUD.
        let (_, ts, _) = small_hot_set(true, true);
        assert_eq!(ts, 20);
    }

    #[test]
    fn finds_the_hot_part_of_a_mapping() {
        // 64 MiB hot in 256 MiB: exactly the reach of the 32-entry PDE cache. Without PSCs
        // the PMD checks find it; with them, the PMD bits of the hot part are not set again
        // once cleared, and only the PTE-level checks of regions smaller than 2 MiB see it.
        for (psc, min_recall) in [(false, 0.9), (true, 0.5)] {
            for variant in ["bounded", "flex"] {
                let mut m = machine_psc(psc);
                let base = map(&mut m, 256 << 20, "heap");
                let (lo, hi) = (base + (64 << 20), base + (128 << 20));
                let p: TelescopeParams = toml::from_str(&format!("variant = \"{variant}\"")).unwrap();
                let mut obs = p.build("telescope", &ctx()).unwrap();
                drive(obs.as_mut(), &mut m, Ps::from_ns(2_000_000_000), lo, hi, 9);
                let rep = obs.hot_set(
                    Ps::from_ns(1_000_000_000),
                    Ps::from_ns(2_000_000_000),
                    &MachineView::new(&mut m),
                );
                let (prec, rec) = precision_recall(&rep, lo, hi);
                eprintln!("psc {psc} {variant}: precision {prec:.3} recall {rec:.3}");
                assert!(
                    rec >= min_recall && prec >= 0.6,
                    "psc {psc} {variant}: precision {prec:.3} recall {rec:.3}"
                );
                let mut st = crate::stats::Stats::new();
                obs.report_stats("telemetry.telescope", &mut st);
                assert_eq!(st.get("telemetry.telescope.aggregations").unwrap().as_f64(), 10.0);
                assert!(st.get("telemetry.telescope.entries_checked_pmd").unwrap().as_f64() > 0.0);
            }
        }
    }

    #[test]
    fn defaults_validation_and_determinism() {
        let p = TelescopeParams::default();
        assert_eq!(p.variant, Variant::Bounded);
        assert_eq!(
            (p.shared.sample_interval, p.shared.aggr_interval, p.shared.ops_update_interval),
            (Duration(5_000_000), Duration(200_000_000), Duration(1_000_000_000))
        );
        assert_eq!((p.flex_pmd, p.flex_pud, p.flex_pgd), (0.25, 0.15, 0.0));
        let cfg: TelemetryConfig = toml::from_str("kind = \"telescope\"").unwrap();
        assert_eq!(cfg.label(), "telescope");
        let s = toml::to_string(&p).unwrap();
        assert_eq!(toml::from_str::<TelescopeParams>(&s).unwrap(), p);
        let e = load_error("kind = \"telescope\"\nvariant = \"flex\"\nflex_pud = 1.0");
        assert!(e.contains("telemetry[0].flex_pud") && e.contains("must be in [0, 1)"), "{e}");
        assert!(toml::from_str::<TelescopeParams>("variant = \"loose\"").is_err());

        let run = |seed: u64| {
            let mut m = machine();
            let base = map(&mut m, 128 << 20, "heap");
            let c = TelemetryBuildCtx { seed, ..ctx() };
            let mut obs = TelescopeParams::default().build("telescope", &c).unwrap();
            drive(obs.as_mut(), &mut m, Ps::from_ns(600_000_000), base, base + (16 << 20), 1);
            obs.hot_set(Ps::ZERO, Ps::from_ns(600_000_000), &MachineView::new(&mut m))
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
    }
}
