//! CPU presets: `machine.cpu = "skylake-sp"` (and the others of [`PRESETS`]) sets the TLB
//! geometry for 4 KiB / 2 MiB / 1 GiB pages, the paging-structure-cache sizes, the L2-TLB hit
//! and page-walk latencies, the core clock and which hardware sampling (PEBS or IBS) the core
//! has, from published figures.
//!
//! A preset is applied when the scenario is parsed (`scenario::load`): each of its
//! values is written into the scenario's `[machine]` table **only where the scenario (or a
//! `--set`) does not give that key**, so an explicit key always wins and the rest of the
//! engine sees an ordinary `MachineConfig`. Every key a preset writes is a declared field
//! (`machine.tlb`: [`super::tlb::TlbConfig`], `machine.psc`: [`super::psc::PscConfig`],
//! `machine.cost`: [`super::cost::CostConfig`], `machine.cpu_ghz`), whose declared range the
//! merged value is checked against like any other; the declared defaults are the values
//! without a preset. `docs/engine.md` ("CPU presets") has the table and the sources.
//!
//! Sources (each value below names one):
//! - [ORM] Intel 64 and IA-32 Architectures Optimization Reference Manual (248966), the
//!   TLB-parameter and cache-parameter tables of each microarchitecture's chapter;
//! - [SOG17]/[SOG19] AMD Software Optimization Guide for family 17h / 19h processors,
//!   section "Translation Lookaside Buffers";
//! - [WC] WikiChip microarchitecture pages (Zen 2: "The fully-associative L1 data TLB contains
//!   64 entries and holds 4-Kbyte, 2-Mbyte, and 1-Gbyte page table entries. The L2 data TLB
//!   is a unified 12-way set-associative cache with 2048 entries ... 1-Gbyte pages are
//!   smashed into 2-Mbyte entries but installed as 1-Gbyte entries when reloaded into the L1
//!   TLB", quoting [SOG17]);
//! - [PWC] `../shared/reference/page-walk-caches.md` (Skylake-SP CPUID dump and Intel forum
//!   thread: DTLB 64 x 4-way 4 KiB, 4 x 4-way 1 GiB, STLB 1536 entries 12-way; Haswell
//!   measurement: STLB hit 12 cycles; Golden Cove: DTLB 96 (4 KiB) / 32 (2 MiB), STLB 2048
//!   with 1024 usable for 2 MiB, from Bakhvalov's perf-book citing [ORM]);
//! - [CM] `../shared/reference/cost-model.md` (Knights Corner: L1 dTLB 64 (4 KiB) and 8
//!   (2 MiB), L2 TLB 64);
//! - [KNL] Sodani et al., "Knights Landing: Second-Generation Intel Xeon Phi Product", IEEE
//!   Micro 36(2), 2016, and [ORM]'s Knights Landing chapter (uTLB 64 entries 8-way for
//!   4 KiB; DTLB 256 entries 8-way 4 KiB, 128 entries 8-way 2 MiB, 16 entries 1 GiB);
//! - vendor product pages for the base clock of the named SKU.
//!
//! Figures marked "not re-checked" are as recalled from the named document and could not be
//! confirmed in the session that wrote this file; "assumption" marks values with no published
//! figure, with the reasoning. Model approximations:
//! - AMD's L1 DTLB is one fully associative array for every page size; the model has one
//!   array per page size, each given the full size (it over-states reach only when one core
//!   mixes page sizes);
//! - Knights Landing's uTLB holds 4 KiB pages only; its 2 MiB DTLB array is modelled as the
//!   L1 2 MiB array (a 2 MiB hit pays no L2-TLB latency) and its 4 KiB DTLB as the shared L2
//!   (which, in the model, also takes 2 MiB entries);
//! - Golden Cove's limit of 1024 STLB entries for 2 MiB pages is not modelled;
//! - the page-walk latency per level is one L2-cache hit (assumption: the page-table lines a
//!   walk reads are mostly in the L2; upper levels are served by the paging-structure caches,
//!   modelled separately), using the L2 latency of the core.

/// Hardware sampling a core offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sampling {
    /// Intel Processor Event-Based Sampling (`pebs`, `perf-pebs` telemetry).
    pub pebs: bool,
    /// AMD Instruction-Based Sampling (`ibs` telemetry).
    pub ibs: bool,
}

/// One preset.
#[derive(Clone, Debug)]
pub struct Preset {
    /// The `machine.cpu` value.
    pub name: &'static str,
    /// What it models (SKU whose clock is used).
    pub what: &'static str,
    /// `machine.tlb` keys.
    pub tlb: &'static [(&'static str, i64)],
    /// `machine.tlb.l2_1g_splinter`.
    pub l2_1g_splinter: bool,
    /// `machine.psc` keys.
    pub psc: &'static [(&'static str, i64)],
    /// Core clock, GHz (`machine.cpu_ghz`).
    pub ghz: f64,
    /// L2-TLB hit latency in cycles (`machine.cost.l2_tlb_hit_ns` = cycles / GHz).
    pub l2_tlb_hit_cycles: f64,
    /// Page-walk latency per level in cycles (`machine.cost.walk_ns_per_level`).
    pub walk_cycles_per_level: f64,
    /// PEBS / IBS.
    pub sampling: Sampling,
}

/// Paging-structure caches: no vendor publishes their sizes for these cores
/// ([PWC] section 1); the placeholders of [PWC] (PML4 2, PDPTE 4, PDE 32, fully
/// associative) for every preset: assumption.
const PSC_PLACEHOLDER: &[(&str, i64)] = &[
    ("pml4_entries", 2),
    ("pml4_ways", 2),
    ("pdpte_entries", 4),
    ("pdpte_ways", 4),
    ("pde_entries", 32),
    ("pde_ways", 32),
];

const INTEL: Sampling = Sampling { pebs: true, ibs: false };
const AMD: Sampling = Sampling { pebs: false, ibs: true };

/// Every preset.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "skylake-sp",
        what: "Intel Skylake-SP (Xeon Platinum 8180)",
        tlb: &[
            // [PWC]: CPUID on a Skylake-SP, DTLB 4 KiB 64 entries 4-way.
            ("l1_4k_entries", 64),
            ("l1_4k_ways", 4),
            // [ORM] Skylake TLB table: DTLB 2M/4M 32 entries 4-way (not re-checked).
            ("l1_2m_entries", 32),
            ("l1_2m_ways", 4),
            // [PWC]: CPUID, DTLB 1 GiB 4 entries 4-way.
            ("l1_1g_entries", 4),
            ("l1_1g_ways", 4),
            // [PWC]: STLB 4K/2M 1536 entries, 12-way (WikiChip; CPUID's 6-way is wrong).
            ("l2_entries", 1536),
            ("l2_ways", 12),
            // [ORM] Skylake TLB table: STLB 1 GiB 16 entries 4-way, separate (not re-checked).
            ("l2_1g_entries", 16),
            ("l2_1g_ways", 4),
        ],
        l2_1g_splinter: false,
        psc: PSC_PLACEHOLDER,
        // Xeon Platinum 8180 base clock 2.5 GHz (Intel ARK).
        ghz: 2.5,
        // [PWC]: STLB hit 12 cycles measured on Haswell; assumption: unchanged on Skylake.
        l2_tlb_hit_cycles: 12.0,
        // [ORM] Skylake Server cache table: L2 (1 MiB) 14 cycles (not re-checked).
        walk_cycles_per_level: 14.0,
        sampling: INTEL,
    },
    Preset {
        name: "icelake-sp",
        what: "Intel Ice Lake-SP, Sunny Cove (Xeon Platinum 8380)",
        tlb: &[
            // [ORM] Ice Lake client TLB table (Sunny Cove): DTLB load 4 KiB 64 entries
            // 4-way, 2M/4M 32 entries 4-way, 1 GiB 8 entries (not re-checked).
            ("l1_4k_entries", 64),
            ("l1_4k_ways", 4),
            ("l1_2m_entries", 32),
            ("l1_2m_ways", 4),
            ("l1_1g_entries", 8),
            ("l1_1g_ways", 8),
            // [ORM]/WikiChip Sunny Cove: STLB 2048 entries 4K/2M (not re-checked);
            // 16-way: assumption (2048 = 128 sets x 16, as Golden Cove's).
            ("l2_entries", 2048),
            ("l2_ways", 16),
            // WikiChip Sunny Cove: 1024 STLB entries for 1 GiB pages (not re-checked);
            // 8-way: assumption.
            ("l2_1g_entries", 1024),
            ("l2_1g_ways", 8),
        ],
        l2_1g_splinter: false,
        psc: PSC_PLACEHOLDER,
        // Xeon Platinum 8380 base clock 2.3 GHz (Intel ARK).
        ghz: 2.3,
        // Assumption: the Haswell STLB-hit measurement of [PWC] (12 cycles).
        l2_tlb_hit_cycles: 12.0,
        // [ORM] Ice Lake cache table: L2 hit 14 cycles (not re-checked).
        walk_cycles_per_level: 14.0,
        sampling: INTEL,
    },
    Preset {
        name: "sapphire-rapids",
        what: "Intel Sapphire Rapids, Golden Cove (Xeon Platinum 8480+)",
        tlb: &[
            // [PWC] (perf-book citing [ORM]): DTLB 96 entries 4 KiB, 32 entries 2 MiB;
            // 6-way / 4-way: [ORM] Golden Cove TLB table (not re-checked).
            ("l1_4k_entries", 96),
            ("l1_4k_ways", 6),
            ("l1_2m_entries", 32),
            ("l1_2m_ways", 4),
            // [ORM] Golden Cove: DTLB 1 GiB 8 entries (not re-checked); fully associative.
            ("l1_1g_entries", 8),
            ("l1_1g_ways", 8),
            // [PWC]: STLB 2048 entries shared 4K/2M; 16-way: [ORM] (not re-checked).
            ("l2_entries", 2048),
            ("l2_ways", 16),
            // [ORM] Golden Cove: STLB 1 GiB 1024 entries 8-way (not re-checked).
            ("l2_1g_entries", 1024),
            ("l2_1g_ways", 8),
        ],
        l2_1g_splinter: false,
        psc: PSC_PLACEHOLDER,
        // Xeon Platinum 8480+ base clock 2.0 GHz (Intel ARK).
        ghz: 2.0,
        // Assumption: the Haswell STLB-hit measurement of [PWC] (12 cycles).
        l2_tlb_hit_cycles: 12.0,
        // Golden Cove L2 (2 MiB) ~16 cycles (Chips and Cheese Golden Cove article; not
        // re-checked).
        walk_cycles_per_level: 16.0,
        sampling: INTEL,
    },
    Preset {
        name: "zen3",
        what: "AMD Zen 3 (EPYC 7763)",
        tlb: &[
            // [SOG19]: L1 DTLB 64 entries, fully associative, every page size (one array
            // per size in the model, see the module comment).
            ("l1_4k_entries", 64),
            ("l1_4k_ways", 64),
            ("l1_2m_entries", 64),
            ("l1_2m_ways", 64),
            ("l1_1g_entries", 64),
            ("l1_1g_ways", 64),
            // [SOG19]: L2 DTLB 2048 entries for 4K/2M (not re-checked). [WC] gives Zen 2's
            // as 12-way, which does not divide 2048 (the array is skewed, ways split by page
            // size: Hadi Brais on Stack Overflow q. 69814823); modelled as 128 sets x 16
            // ways: assumption.
            ("l2_entries", 2048),
            ("l2_ways", 16),
            // No separate 1 GiB array: 1 GiB pages are smashed into 2 MiB L2 entries [WC].
            ("l2_1g_entries", 0),
            ("l2_1g_ways", 4),
        ],
        l2_1g_splinter: true,
        psc: PSC_PLACEHOLDER,
        // EPYC 7763 base clock 2.45 GHz (AMD product page).
        ghz: 2.45,
        // Assumption: an L2 DTLB hit ~7 cycles (no figure found for Zen 3).
        l2_tlb_hit_cycles: 7.0,
        // [SOG19]: L2 cache latency 12 cycles (not re-checked).
        walk_cycles_per_level: 12.0,
        sampling: AMD,
    },
    Preset {
        name: "zen4",
        what: "AMD Zen 4 (EPYC 9654)",
        tlb: &[
            // [SOG19] (Zen 4) and Chips and Cheese's Zen 4 memory-subsystem article: L1
            // DTLB 72 entries, fully associative, every page size (not re-checked).
            ("l1_4k_entries", 72),
            ("l1_4k_ways", 72),
            ("l1_2m_entries", 72),
            ("l1_2m_ways", 72),
            ("l1_1g_entries", 72),
            ("l1_1g_ways", 72),
            // Same sources: L2 DTLB 3072 entries (not re-checked); 12-way: assumption (Zen
            // 2's associativity, [WC]).
            ("l2_entries", 3072),
            ("l2_ways", 12),
            ("l2_1g_entries", 0),
            ("l2_1g_ways", 4),
        ],
        // Assumption: 1 GiB pages still smashed into 2 MiB L2 entries, as on Zen 2 [WC].
        l2_1g_splinter: true,
        psc: PSC_PLACEHOLDER,
        // EPYC 9654 base clock 2.4 GHz (AMD product page).
        ghz: 2.4,
        // Assumption: ~7 cycles, as zen3.
        l2_tlb_hit_cycles: 7.0,
        // [SOG19] (Zen 4): L2 (1 MiB) 14 cycles (not re-checked).
        walk_cycles_per_level: 14.0,
        sampling: AMD,
    },
    Preset {
        name: "knl",
        what: "Intel Knights Landing (Xeon Phi 7250)",
        tlb: &[
            // [KNL]: uTLB 64 entries 8-way, 4 KiB (not re-checked).
            ("l1_4k_entries", 64),
            ("l1_4k_ways", 8),
            // [KNL]: DTLB 2 MiB 128 entries 8-way, modelled as the L1 2 MiB array.
            ("l1_2m_entries", 128),
            ("l1_2m_ways", 8),
            // [KNL]: DTLB 1 GiB 16 entries, fully associative (not re-checked).
            ("l1_1g_entries", 16),
            ("l1_1g_ways", 16),
            // [KNL]: DTLB 4 KiB 256 entries 8-way, modelled as the shared L2.
            ("l2_entries", 256),
            ("l2_ways", 8),
            ("l2_1g_entries", 0),
            ("l2_1g_ways", 4),
        ],
        l2_1g_splinter: false,
        psc: PSC_PLACEHOLDER,
        // Xeon Phi 7250: 1.40 GHz (`../shared/reference/pebs-cost.md`).
        ghz: 1.4,
        // Assumption: ~7 cycles (a DTLB hit after a uTLB miss; no published figure found).
        l2_tlb_hit_cycles: 7.0,
        // Assumption: ~17 cycles, an L2 hit on KNL (no figure re-checked).
        walk_cycles_per_level: 17.0,
        // KNL has PEBS (loads only, one counter: `../shared/reference/perf-sampling.md`).
        sampling: INTEL,
    },
    Preset {
        name: "knc",
        what: "Intel Knights Corner (Xeon Phi 5110P)",
        tlb: &[
            // [CM]: L1 dTLB 64 entries (4 KiB), 8 entries (2 MiB); 4-way: assumption.
            ("l1_4k_entries", 64),
            ("l1_4k_ways", 4),
            ("l1_2m_entries", 8),
            ("l1_2m_ways", 4),
            // Assumption: no 1 GiB TLB entries (none listed in [CM]); a 1 GiB page is then
            // cached as its 2 MiB pieces. 64 KiB pages: `machine.hmem.l1_64k_*`.
            ("l1_1g_entries", 0),
            ("l1_1g_ways", 4),
            // [CM]: L2 TLB 64 entries; 4-way: assumption.
            ("l2_entries", 64),
            ("l2_ways", 4),
            ("l2_1g_entries", 0),
            ("l2_1g_ways", 4),
        ],
        l2_1g_splinter: false,
        psc: PSC_PLACEHOLDER,
        // Xeon Phi 5110P: 60 cores at 1.053 GHz (`../shared/reference/tlb-shootdown.md`).
        ghz: 1.053,
        // Assumption: ~7 cycles (no published figure found).
        l2_tlb_hit_cycles: 7.0,
        // Assumption: ~24 cycles, an L2 hit on the in-order KNC core (not re-checked).
        walk_cycles_per_level: 24.0,
        // Assumption: the KNC PMU has no PEBS and no IBS.
        sampling: Sampling { pebs: false, ibs: false },
    },
];

/// The preset called `name`.
pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// The names of every preset, quoted and comma-separated (for messages).
pub fn names() -> String {
    PRESETS.iter().map(|p| format!("\"{}\"", p.name)).collect::<Vec<_>>().join(", ")
}

/// The sub-table of `t` at `path`, created where absent; None when a key on the way is not a
/// table (the typed parse reports that).
fn table_at<'a>(t: &'a mut toml::Table, path: &[&str]) -> Option<&'a mut toml::Table> {
    match path.split_first() {
        None => Some(t),
        Some((p, rest)) => {
            match t.entry(p.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new())) {
                toml::Value::Table(next) => table_at(next, rest),
                _ => None,
            }
        }
    }
}

/// Round to 1/1000 ns (the engine's clock unit is the picosecond).
fn ns(cycles: f64, ghz: f64) -> f64 {
    (cycles / ghz * 1000.0).round() / 1000.0
}

impl Preset {
    /// Every value the preset sets, as (dotted key under `machine`, value).
    pub fn values(&self) -> Vec<(String, toml::Value)> {
        let mut v: Vec<(String, toml::Value)> = Vec::new();
        for (k, x) in self.tlb {
            v.push((format!("tlb.{k}"), toml::Value::Integer(*x)));
        }
        v.push(("tlb.l2_1g_splinter".into(), toml::Value::Boolean(self.l2_1g_splinter)));
        for (k, x) in self.psc {
            v.push((format!("psc.{k}"), toml::Value::Integer(*x)));
        }
        v.push(("cpu_ghz".into(), toml::Value::Float(self.ghz)));
        v.push(("cost.l2_tlb_hit_ns".into(), toml::Value::Float(ns(self.l2_tlb_hit_cycles, self.ghz))));
        v.push((
            "cost.walk_ns_per_level".into(),
            toml::Value::Float(ns(self.walk_cycles_per_level, self.ghz)),
        ));
        v
    }

    /// Write the preset's values into `machine` (the scenario's `[machine]` table) where the
    /// key is absent.
    pub fn merge_into(&self, machine: &mut toml::Table) {
        for (key, value) in self.values() {
            let parts: Vec<&str> = key.split('.').collect();
            let (last, path) = parts.split_last().expect("a key");
            if let Some(t) = table_at(machine, path) {
                t.entry(last.to_string()).or_insert(value);
            }
        }
    }

    /// Check that the telemetry kinds need no sampling hardware the core lacks; returns the
    /// index of the offending technique and the reason.
    pub fn check_telemetry<'a>(&self, kinds: impl Iterator<Item = &'a str>) -> Result<(), (usize, String)> {
        for (i, k) in kinds.enumerate() {
            let missing = match k {
                "pebs" | "perf-pebs" if !self.sampling.pebs => Some("PEBS"),
                "ibs" if !self.sampling.ibs => Some("IBS"),
                _ => None,
            };
            if let Some(hw) = missing {
                let has = match (self.sampling.pebs, self.sampling.ibs) {
                    (true, _) => "it samples with PEBS",
                    (_, true) => "it samples with IBS",
                    _ => "it has neither PEBS nor IBS",
                };
                return Err((
                    i,
                    format!(
                        "telemetry kind `{k}` needs {hw}, which machine.cpu = \"{}\" ({}) does not have: {has}",
                        self.name, self.what
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierlab_core::param::Declared;

    /// Every number of `table` lies in the range its field declares.
    fn in_declared_ranges<T: Declared>(preset: &str, table: &toml::Value) {
        for (k, v) in table.as_table().unwrap() {
            let Some(x) = v.as_float().or(v.as_integer().map(|i| i as f64)) else { continue };
            let f = tierlab_core::param::find(T::fields(), k)
                .unwrap_or_else(|| panic!("{preset}: {k} not declared"));
            let r = f.range.unwrap_or_else(|| panic!("{preset}: {k} has no range"));
            assert!(r.contains(x), "{preset}: {k} = {x} is not in {r}");
        }
    }

    #[test]
    fn every_preset_is_a_valid_machine() {
        use super::super::{cost::CostConfig, psc::PscConfig, tlb::TlbConfig};
        for p in PRESETS {
            let mut t = toml::Table::new();
            p.merge_into(&mut t);
            let tlb: TlbConfig = t["tlb"].clone().try_into().unwrap();
            tlb.validate().unwrap_or_else(|e| panic!("{}: {e:?}", p.name));
            in_declared_ranges::<TlbConfig>(p.name, &t["tlb"]);
            let psc: PscConfig = t["psc"].clone().try_into().unwrap();
            psc.validate().unwrap_or_else(|e| panic!("{}: {e:?}", p.name));
            in_declared_ranges::<PscConfig>(p.name, &t["psc"]);
            let _: CostConfig = t["cost"].clone().try_into().unwrap();
            in_declared_ranges::<CostConfig>(p.name, &t["cost"]);
            assert!(t["cpu_ghz"].as_float().unwrap() > 0.0);
        }
    }

    #[test]
    fn merge_keeps_explicit_keys() {
        let p = preset("zen3").unwrap();
        let mut t: toml::Table = toml::from_str("cpu_ghz = 3.0\n[tlb]\nl2_entries = 512\n").unwrap();
        p.merge_into(&mut t);
        assert_eq!(t["cpu_ghz"].as_float(), Some(3.0));
        assert_eq!(t["tlb"]["l2_entries"].as_integer(), Some(512));
        assert_eq!(t["tlb"]["l2_ways"].as_integer(), Some(16));
        assert_eq!(t["tlb"]["l2_1g_splinter"].as_bool(), Some(true));
    }
}
