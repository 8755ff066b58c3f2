//! DAMON: region-based sampling of leaf Accessed bits (Linux `mm/damon`, virtual-address
//! operations `vaddr`; facts in `reference/damon.md`).
//!
//! Each sampling interval, for every region, a random address is picked and the Accessed bit
//! of the PTE mapping it (the PMD when it is a 2 MiB page) is cleared **without a TLB flush**;
//! one interval later the bit is tested: set again means the region was accessed. Cached
//! translations therefore hide later accesses (real DAMON behaviour, reproduced by the
//! machine's TLBs). Regions adapt by merge/split ([`super::regions`]); the hot set reported
//! per window is the rule in [`super::regions`]'s docs: the last aggregation snapshot at or
//! before the window end, regions with `nr_accesses > hot_threshold`, all their bytes.
//!
//! # Parameters
//! [`DamonOwn`] and the region settings ([`RegionSettings`]) with the kernel's defaults
//! (`damon_new_ctx`: 5 ms sampling, 100 ms aggregation, 60 s ops update, 10..1000 regions;
//! damo's ops update is 1 s), the Telescope authors' hot threshold and damo's recommended
//! intervals goal, off by default as the kernel's (`aggrs = 0`); defaults, ranges and sources
//! in `docs/parameters.md`.
//!
//! The Telescope paper's configurations: DAMON-MOD = `sample_interval = "5ms"`,
//! `aggr_interval = "200ms"`, `ops_update_interval = "1s"`; DAMON-AGG the same with
//! `sample_interval = "1ms"`.
//!
//! # Check semantics (`__damon_va_check_access`)
//! A region whose sampling address lies in the same page (folio: 4 KiB, or 2 MiB for a huge
//! page) as the previously tested address reuses that result instead of walking again; the
//! folio size is that of the last present page tested. An unmapped address is not accessed.
//!
//! # CPU cost
//! `ns_per_check` per sample: half when the region's entry is prepared (every region, as the
//! kernel clears the bit of each region's sample), half when it is tested (reused results
//! cost nothing), charged to the observer's core at each event.

use tierlab_core::param::{params, Provenance};
use tierlab_core::{HUGE_1G_SIZE, HUGE_SIZE, PAGE_SIZE};

use super::damos::{schemes_from_damo_json, Damos, SchemeConfig};
use super::regions::{Region, RegionObserver, RegionSettings, Sampler};
use super::*;
use crate::agents::FeedKind;
use crate::agents::MachineView;
use crate::error::Result;
use crate::hw::pagetable::Level;
use crate::os::Flush;
use crate::params::{SharedDefaults, With};
use crate::rng::Rng;
use crate::units::Duration;

/// DAMON's own parameters besides the region settings ([`RegionSettings`], flattened into
/// `kind = "damon"` tables with DAMON's defaults): DAMOS schemes run in the monitoring loop
/// ([`super::damos`]) and the damo record.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct DamonOwn {
    /// DAMOS schemes applied in the monitoring loop, in order (default: none, monitoring
    /// only). Each is a table: `action`, `target_nid`, the access pattern (`min_size`,
    /// `max_size`, `min_nr_accesses`, `max_nr_accesses`, `min_age`, `max_age`),
    /// `apply_interval`, `quota`, `watermarks`, `filters` ([`SchemeConfig`]).
    #[param(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub schemes: Vec<SchemeConfig>,
    /// A file of schemes as written for damo (JSON: a list of schemes, `{"schemes": [...]}`
    /// or damo's whole `{"kdamonds": [...]}`; damo's units), appended after `schemes`. A
    /// relative path is read from the scenario file's directory.
    #[param(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub damo_schemes: Option<String>,
    /// CPU time of walking one page of a region a scheme's action is applied to (page-table
    /// walk, filters).
    #[param(default = 20.0, range = "[0, 1e9]", unit = "ns", assumed = "as change_prot_numa per PTE")]
    pub damos_ns_per_page: f64,
    /// Keep every aggregation's snapshot and write them as a damo record
    /// (`damon-<label>.json` in `tierlab run --out`, the JSON `damo record` writes).
    #[param(default = false, setting)]
    pub record: bool,
}

impl DamonOwn {
    /// The schemes (inline, then the damo file's), validated against the machine; errors
    /// name `telemetry[i].schemes[k].<field>`.
    pub fn load_schemes(
        &self,
        attrs: &super::regions::Attrs,
        ctx: &TelemetryBuildCtx,
    ) -> Result<Vec<SchemeConfig>> {
        let mut all = self.schemes.clone();
        if let Some(f) = &self.damo_schemes {
            let path = resolve_path(&ctx.scenario_file, f);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| ctx.err("damo_schemes", format!("cannot read {}: {e}", path.display())))?;
            let more = schemes_from_damo_json(&text, attrs.sample, attrs.aggr)
                .map_err(|e| ctx.err("damo_schemes", format!("{}: {e}", path.display())))?;
            all.extend(more);
        }
        for (k, s) in all.iter().enumerate() {
            s.validate(ctx.nodes.max(1)).map_err(|(f, m)| ctx.err(&format!("schemes[{k}].{f}"), m))?;
        }
        Ok(all)
    }
}

/// `f` relative to the directory of `scenario_file` (absolute paths and built-in scenarios:
/// as given).
pub fn resolve_path(scenario_file: &str, f: &str) -> std::path::PathBuf {
    let p = std::path::Path::new(f);
    if p.is_absolute() || scenario_file.starts_with("builtin:") || scenario_file.is_empty() {
        return p.to_path_buf();
    }
    match std::path::Path::new(scenario_file).parent() {
        Some(d) => d.join(p),
        None => p.to_path_buf(),
    }
}

/// DAMON's parameters: the region settings and its own.
pub type DamonParams = With<RegionSettings, DamonOwn>;

impl SharedDefaults<RegionSettings> for DamonOwn {
    fn shared_defaults() -> RegionSettings {
        RegionSettings::with_intervals(Duration(100_000_000), Duration(60_000_000_000))
    }
    /// The intervals DAMON has by default are the kernel's (the region settings declare the
    /// rest with their sources).
    fn shared_provenance(field: &str) -> Option<Provenance> {
        match field {
            "aggr_interval" => Some(Provenance::Sourced(
                "reference/damon-modern.md section 1: damon_new_ctx, aggr_interval 100 ms",
            )),
            "ops_update_interval" => Some(Provenance::Sourced(
                "reference/damon-modern.md section 1: damon_new_ctx, ops_update_interval 60 s (damo's is \
                 1 s, reference/damon.md)",
            )),
            _ => None,
        }
    }
}

impl SharedDefaults<TelemetryShared> for DamonOwn {
    fn shared_defaults() -> TelemetryShared {
        TelemetryShared::default()
    }
}

impl TelemetryParams for DamonParams {
    fn build(&self, label: &str, ctx: &TelemetryBuildCtx) -> Result<Box<dyn Observer>> {
        let r = &self.shared;
        let attrs = r.attrs(ctx)?;
        let rng = Rng::derived(ctx.seed, &format!("telemetry.{label}"), 0);
        let schemes = self.own.load_schemes(&attrs, ctx)?;
        let mut obs =
            RegionObserver::new(attrs, rng, DamonSampler::default(), r.ns_per_check, r.hot_threshold);
        obs.damos = Damos::new(schemes, self.own.damos_ns_per_page);
        if self.own.record {
            obs.record = Some(Vec::new());
        }
        Ok(Box::new(obs))
    }
    fn publishes(&self) -> &'static [FeedKind] {
        &[FeedKind::Regions]
    }
}

/// DAMON's sampler (`damon_va_prepare_access_checks` / `damon_va_check_accesses`).
#[derive(Clone, Debug)]
pub struct DamonSampler {
    last_addr: u64,
    last_folio_sz: u64,
    last_accessed: bool,
    /// Samples on 2 MiB pages (PMD-level).
    pub huge_samples: u64,
}

impl Default for DamonSampler {
    fn default() -> Self {
        DamonSampler { last_addr: 0, last_folio_sz: PAGE_SIZE, last_accessed: false, huge_samples: 0 }
    }
}

impl Sampler for DamonSampler {
    fn prepare(&mut self, regions: &mut [Region], rng: &mut Rng, m: &mut MachineView) -> u64 {
        for r in regions.iter_mut() {
            let a = r.start + rng.below(r.end - r.start);
            r.sampling_addr = a;
            r.level = if m.is_giant(a) {
                Level::Pud
            } else if m.is_huge(a) {
                Level::Pmd
            } else {
                Level::Pte
            };
            m.clear_accessed(a, r.level, Flush::None);
        }
        regions.len() as u64
    }

    fn check(&mut self, regions: &mut [Region], m: &MachineView) -> u64 {
        let mut tested = 0;
        for (i, r) in regions.iter_mut().enumerate() {
            let a = r.sampling_addr;
            let mask = !(self.last_folio_sz - 1);
            let accessed = if i > 0 && (self.last_addr & mask) == (a & mask) {
                self.last_accessed
            } else {
                // damon_va_young: the leaf entry of a present page; the folio size is updated
                // only when a page is found.
                let young = if m.is_giant(a) {
                    self.last_folio_sz = HUGE_1G_SIZE;
                    self.huge_samples += 1;
                    m.test_accessed(a, Level::Pud)
                } else if m.is_huge(a) {
                    self.last_folio_sz = HUGE_SIZE;
                    self.huge_samples += 1;
                    m.test_accessed(a, Level::Pmd)
                } else if m.is_present(a, Level::Pte) {
                    self.last_folio_sz = PAGE_SIZE;
                    m.test_accessed(a, Level::Pte)
                } else {
                    false
                };
                self.last_accessed = young;
                self.last_addr = a;
                tested += 1;
                young
            };
            r.nr_accesses += accessed as u32;
        }
        tested
    }

    fn report_stats(&self, prefix: &str, out: &mut crate::stats::Stats) {
        out.set(format!("{prefix}.huge_page_samples"), self.huge_samples);
    }
}

#[cfg(test)]
mod tests {
    use super::super::regions::testutil::{drive, machine, map, precision_recall};
    use super::super::regions::Monitor;
    use super::*;
    use crate::workload::{Access, AddressSpace, MapOptions, PageSize};

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

    #[test]
    fn defaults_and_paper_configs() {
        let p = DamonParams::default();
        let r = &p.shared;
        assert_eq!(r.sample_interval, Duration(5_000_000));
        assert_eq!(r.aggr_interval, Duration(100_000_000));
        assert_eq!(r.ops_update_interval, Duration(60_000_000_000));
        assert_eq!((r.min_nr_regions, r.max_nr_regions, r.hot_threshold), (10, 1000, 5));
        assert!(!r.auto_tune);
        let cfg: TelemetryConfig = toml::from_str("kind = \"damon\"").unwrap();
        assert_eq!(cfg.label(), "damon");
        // DAMON-AGG of the Telescope paper.
        let text = "name = \"damon-agg\"\nsample_interval = \"1ms\"\naggr_interval = \"200ms\"\n\
                    ops_update_interval = \"1s\"";
        let agg: With<TelemetryShared, DamonParams> = toml::from_str(text).unwrap();
        assert_eq!(agg.shared.name.as_deref(), Some("damon-agg"));
        let a = agg.own.shared.attrs(&ctx()).unwrap();
        assert_eq!(
            (a.sample, a.aggr, a.ops_update),
            (Ps::from_ns(1_000_000), Ps::from_ns(200_000_000), Ps::from_ns(1_000_000_000))
        );
        assert_eq!(a.max_nr_accesses(), 200);
        // Serialized defaults read back identically.
        let s = toml::to_string(&p).unwrap();
        assert_eq!(toml::from_str::<DamonParams>(&s).unwrap(), p);
    }

    #[test]
    fn invalid_parameters_name_their_field() {
        let bad = [
            ("min_nr_regions = 2", "min_nr_regions"),
            ("min_nr_regions = 20\nmax_nr_regions = 10", "max_nr_regions"),
            ("sample_interval = \"1s\"", "aggr_interval"),
            ("auto_tune = true\ntune_aggrs = 0", "tune_aggrs"),
        ];
        for (text, field) in bad {
            let p: DamonParams = toml::from_str(text).unwrap();
            let e = p.build("damon", &ctx()).err().unwrap().to_string();
            assert!(e.contains(&format!("telemetry[0].{field}")), "{text}: {e}");
        }
        assert!(toml::from_str::<DamonParams>("sampling = \"5ms\"").is_err(), "unknown field");
        for (text, range) in [
            ("ns_per_check = -1.0", "[0, 1000000000]"),
            ("min_nr_regions = 2", "[3, 100000000]"),
            ("damos_ns_per_page = -1.0", "[0, 1000000000]"),
        ] {
            let e = load_error(&format!("kind = \"damon\"\n{text}"));
            let field = text.split(' ').next().unwrap();
            assert!(e.contains(&format!("telemetry[0].{field}")) && e.contains(range), "{text}: {e}");
        }
    }

    #[test]
    fn prepare_clears_without_flush_and_check_counts() {
        let mut m = machine();
        let a = map(&mut m, 64 << 20, "x");
        let mut regions = vec![Region::new(a, a + 4096), Region::new(a + (8 << 20), a + (8 << 20) + 4096)];
        let mut s = DamonSampler::default();
        let mut rng = Rng::new(1);
        // Touch both pages: walks set their bits and the TLB caches them.
        m.access(0, Access::read(a)).unwrap();
        m.access(0, Access::read(a + (8 << 20))).unwrap();
        assert_eq!(s.prepare(&mut regions, &mut rng, &mut MachineView::new(&mut m)), 2);
        assert!(!m.test_accessed(a, Level::Pte), "cleared");
        // A TLB hit does not set the bit again: not accessed.
        m.access(0, Access::read(a + 8)).unwrap();
        assert_eq!(s.check(&mut regions, &MachineView::new(&mut m)), 2);
        assert_eq!((regions[0].nr_accesses, regions[1].nr_accesses), (0, 0));
        // After a flush the next access walks and is seen.
        s.prepare(&mut regions, &mut rng, &mut MachineView::new(&mut m));
        m.clear_accessed(a, Level::Pte, Flush::Shootdown { initiator: 0 });
        m.access(0, Access::read(a + 16)).unwrap();
        s.check(&mut regions, &MachineView::new(&mut m));
        assert_eq!((regions[0].nr_accesses, regions[1].nr_accesses), (1, 0));
    }

    #[test]
    fn unmapped_samples_are_not_accessed_and_same_folio_reuses() {
        let mut m = machine();
        let opts = MapOptions { page_size: Some(PageSize::Huge2M), ..MapOptions::named("h") };
        let h = m.mmap(4 << 20, opts).unwrap();
        // Fault the first 2 MiB page in; two regions inside it: the second reuses the first's
        // result.
        m.access(0, Access::read(h)).unwrap();
        let mut regions = vec![
            Region::new(h, h + (1 << 20)),
            Region::new(h + (1 << 20), h + (2 << 20)),
            Region::new(h + (2 << 20), h + (4 << 20)),
        ];
        let mut s = DamonSampler::default();
        let mut rng = Rng::new(3);
        s.prepare(&mut regions, &mut rng, &mut MachineView::new(&mut m));
        assert_eq!(regions[0].level, Level::Pmd);
        assert_eq!(regions[2].level, Level::Pte, "not faulted in: no huge PMD yet");
        // A flush (as if the translation had been evicted): the next access walks.
        m.clear_accessed(h, Level::Pmd, Flush::Shootdown { initiator: 0 });
        m.access(0, Access::read(h + 100)).unwrap();
        let tested = s.check(&mut regions, &MachineView::new(&mut m));
        assert_eq!(tested, 2, "region 1 reuses region 0's folio");
        assert_eq!(regions.iter().map(|r| r.nr_accesses).collect::<Vec<_>>(), vec![1, 1, 0]);
    }

    #[test]
    fn nr_accesses_stays_within_bounds() {
        // Everything hot: counts reach but never exceed aggr/sample = 20.
        let mut m = machine();
        let a = map(&mut m, 32 << 20, "hot");
        let p = DamonParams::default();
        let mut obs = RegionObserver::new(
            p.shared.attrs(&ctx()).unwrap(),
            Rng::new(1),
            DamonSampler::default(),
            p.shared.ns_per_check,
            p.shared.hot_threshold,
        );
        let mut max_seen = 0;
        let mut cpu = Ps::ZERO;
        obs.start(&mut crate::agents::testing::ctx(&mut m, Ps::ZERO, 1, &mut cpu)).unwrap();
        let mut rng = Rng::new(5);
        for _ in 0..200 {
            let t = obs.next_event();
            while m.hw.cores[0].clock_ps < t.ps() {
                m.access(0, Access::read(a + rng.below((32 << 20) / 64) * 64)).unwrap();
            }
            obs.on_event(&mut crate::agents::testing::ctx(&mut m, t, 1, &mut cpu)).unwrap();
            let mon: &Monitor = &obs.mon;
            for r in &mon.regions {
                assert!(r.nr_accesses <= 20 && r.last_nr_accesses <= 20);
            }
            if let Some(s) = mon.latest_snapshot() {
                max_seen = max_seen.max(s.regions.iter().map(|r| r.nr_accesses).max().unwrap());
            }
        }
        assert_eq!(max_seen, 20, "a region sampled hot every interval reaches the maximum");
        assert!(cpu > Ps::ZERO, "kdamond's work is charged");
    }

    #[test]
    fn finds_the_hot_part_of_a_mapping() {
        // One 256 MiB mapping, the workload reads random lines of [64 MiB, 128 MiB).
        let mut m = machine();
        let base = map(&mut m, 256 << 20, "heap");
        let (lo, hi) = (base + (64 << 20), base + (128 << 20));
        let p: DamonParams =
            toml::from_str("aggr_interval = \"200ms\"\nops_update_interval = \"1s\"").unwrap();
        let mut obs = p.build("damon", &ctx()).unwrap();
        drive(obs.as_mut(), &mut m, Ps::from_ns(2_000_000_000), lo, hi, 9);
        let rep =
            obs.hot_set(Ps::from_ns(1_000_000_000), Ps::from_ns(2_000_000_000), &MachineView::new(&mut m));
        let (prec, rec) = precision_recall(&rep, lo, hi);
        assert!(rec >= 0.9 && prec >= 0.6, "precision {prec:.3} recall {rec:.3}");
        let cols = obs.window_columns();
        assert_eq!(cols[0].0, "nr_regions");
        assert!(cols[1].1 >= 1.0);
        let mut st = crate::stats::Stats::new();
        obs.report_stats("telemetry.damon", &mut st);
        assert_eq!(st.get("telemetry.damon.aggregations").unwrap().as_f64(), 10.0);
        assert_eq!(st.get("telemetry.damon.sampling_interval_s").unwrap().as_f64(), 0.005);
    }

    #[test]
    fn same_seed_same_result() {
        let run = |seed: u64| {
            let mut m = machine();
            let base = map(&mut m, 128 << 20, "heap");
            let c = TelemetryBuildCtx { seed, ..ctx() };
            let mut obs = DamonParams::default().build("damon", &c).unwrap();
            drive(obs.as_mut(), &mut m, Ps::from_ns(500_000_000), base, base + (16 << 20), 1);
            obs.hot_set(Ps::ZERO, Ps::from_ns(500_000_000), &MachineView::new(&mut m))
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }
}
