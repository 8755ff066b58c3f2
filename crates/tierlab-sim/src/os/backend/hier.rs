//! Hierarchical memory mode: a small fast memory in front of a big slow memory behind a
//! link, with OS-level page replacement (the setting of the CMCP paper: a Knights Corner
//! card's 8 GB in front of the host's memory over PCIe).
//!
//! Enabled by `[machine.hmem]`; the replacement policy is the scenario's `[[policies]]`
//! entry (see [`super::replacement`]). Every mapping of the address space is the
//! "computation area": its pages live in slow memory until touched, and are brought into the
//! fast memory (memory node 0, whose latency every access pays) by page faults:
//! - a page that has never been written back to slow memory is zero-filled on its first
//!   fault (no data crosses the link: the application initializes it), unless its mapping
//!   was populated (its data starts in slow memory);
//! - a page with a copy in slow memory is transferred over the link: `link_latency_ns` plus
//!   `page size / link_gbps`, the link being shared (one transfer at a time per direction,
//!   transfers queue);
//! - when the fast memory is full, the policy picks a victim: it is unmapped from every page
//!   table holding it, the TLBs that may cache it are invalidated (the faulting core
//!   invalidates locally and sends shootdowns), and it is written back over the link when
//!   dirty (the faulting core waits for it).
//!
//! # Page tables: shared or per-core (PSPT)
//! - `shared`: one set of page tables; the OS cannot know which cores cache a translation,
//!   so an unmap (or an Accessed-bit clear) invalidates every other core of the address
//!   space (`mm_cpumask`). One Accessed bit per page.
//! - `pspt` (partially separated page tables, Gerofi et al.): each core installs its own PTE
//!   for an address it touches, copying the valid mapping of another core when the page is
//!   resident (a cheap fault, `pte_copy_ns`, no data moved). The OS knows each page's core
//!   map; unmapping invalidates only those cores, and each core's PTE has its own Accessed
//!   bit, so clearing invalidates only the cores whose bit was set.
//!
//! # Page sizes (`page_size`)
//! `4KiB`, `2MiB` (a PMD leaf: 3-level walks, the 2 MiB TLB arrays) and `64KiB` with Knights
//! Corner semantics: 16 consecutive 4 KiB PTEs, 64 KiB aligned, cached as one 64 KiB TLB
//! entry (an L1 array of its own, `l1_64k_entries`, and the shared L2), moved and replaced
//! as a unit; the Accessed and Dirty bits are set on the individual 4 KiB entry touched, so
//! the OS reads 16 PTEs to test a 64 KiB page.
//!
//! # Costs
//! Data-moving fault: `fault_ns` + eviction (shootdowns, write-back) + transfer (or zero
//! fill at `machine.cost.zero_gbps`). Shootdowns use the machine's cost model (initiator
//! `shootdown_ns(targets)`, `shootdown_target_ns` per target, `invlpg_ns` locally). Testing
//! a page's Accessed bits costs `pte_scan_ns` per PTE read. The LRU scanner runs on a
//! dedicated core outside the application's (its time is reported, its shootdowns are
//! charged to the cores they interrupt).
//!
//! Per-page state costs ~30 bytes per page of the computation area.

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Env, MemoryBackend};
use crate::error::{Result, SimError};
use crate::hw::cost::ps;
use crate::hw::pagetable::Level;
use crate::hw::{Fill, Hardware, Translated};
use crate::os::replacement::{Frames, PageId, PolicyBuildCtx, PolicyConfig, Replacement};
use crate::os::shootdown::{shootdown, Initiator as ShootdownInitiator, Inval};
use crate::os::{Migrated, Vma};
use crate::stats::Stats;
use crate::units::{format_size, parse_size, Ps};
use tierlab_core::param::{params, ParamType, Shape};
use tierlab_core::PageSize;

/// Most cores the hierarchical mode supports (core maps are 64-bit masks).
pub const MAX_CORES: usize = 64;

/// How much fast memory there is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FastMemory {
    /// A size in bytes.
    Bytes(u64),
    /// A fraction of the footprint (the sum of the mappings when the run starts), in (0, 1]
    /// or above (more memory than needed).
    Fraction(f64),
}

impl Serialize for FastMemory {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            FastMemory::Bytes(b) => s.serialize_str(&format_size(*b)),
            FastMemory::Fraction(f) => s.serialize_str(&format!("{}%", f * 100.0)),
        }
    }
}

struct FastVisitor;

impl Visitor<'_> for FastVisitor {
    type Value = FastMemory;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a size (\"512MiB\", bytes) or a share of the footprint (\"50%\", or 0.5)")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<FastMemory, E> {
        Ok(FastMemory::Bytes(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<FastMemory, E> {
        u64::try_from(v).map(FastMemory::Bytes).map_err(|_| E::custom(format!("{v} is negative")))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<FastMemory, E> {
        Ok(FastMemory::Fraction(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<FastMemory, E> {
        if let Some(p) = v.trim().strip_suffix('%') {
            let x: f64 = p.trim().parse().map_err(|_| E::custom(format!("`{v}` is not a percentage")))?;
            return Ok(FastMemory::Fraction(x / 100.0));
        }
        parse_size(v).map(FastMemory::Bytes).map_err(E::custom)
    }
}

impl<'de> Deserialize<'de> for FastMemory {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<FastMemory, D::Error> {
        d.deserialize_any(FastVisitor)
    }
}

/// A size or a share, parsed from a string (or a number) by its own `Deserialize`.
impl ParamType for FastMemory {
    fn shape() -> Shape {
        Shape::Text
    }
}

/// Page-table organization.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PageTableKind {
    /// One set of page tables for all cores.
    Shared,
    /// Per-core partially separated page tables.
    #[default]
    Pspt,
}
tierlab_core::choice_param!(PageTableKind);

impl PageTableKind {
    /// `shared` or `pspt`.
    pub fn name(self) -> &'static str {
        match self {
            PageTableKind::Shared => "shared",
            PageTableKind::Pspt => "pspt",
        }
    }
}

/// `[machine.hmem]`: the hierarchical memory mode.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct HmemConfig {
    /// Fast memory: bytes (`"512MiB"`) or a share of the footprint (`"50%"` or `0.5`).
    #[param(required, setting)]
    pub fast_memory: FastMemory,
    /// Link bandwidth to the slow memory, per direction.
    #[param(
        default = 6.0,
        range = "(0, 1e6]",
        unit = "GB/s",
        sourced = "papers/cmcp-pspt-paper.txt, section 3: 'we measured up to 6GB/s bandwidth between the host and the MIC' (also reference/cost-model.md)"
    )]
    pub link_gbps: f64,
    /// Latency of one transfer over the link (DMA setup and completion).
    #[param(default = 2000.0, range = "[0, 1e9]", unit = "ns", assumed = "2 us of DMA setup and completion")]
    pub link_latency_ns: f64,
    /// `"pspt"` (per-core page tables) or `"shared"`.
    #[param(default)]
    pub page_tables: PageTableKind,
    /// `"4KiB"`, `"64KiB"` or `"2MiB"`: the size of every page of every mapping.
    #[param(default)]
    pub page_size: PageSize,
    /// Fixed cost of a fault that brings a page in (trap, handler, PTE setup), excluding
    /// eviction and transfer.
    #[param(default = 2000.0, range = "[0, 1e9]", unit = "ns", assumed = "2 us on a 1 GHz in-order core")]
    pub fault_ns: f64,
    /// Cost of a PSPT fault that copies another core's valid PTE.
    #[param(default = 1000.0, range = "[0, 1e9]", unit = "ns", assumed = "1 us (no data moved)")]
    pub pte_copy_ns: f64,
    /// Cost of reading one PTE when testing Accessed bits.
    #[param(default = 20.0, range = "[0, 1e9]", unit = "ns", assumed = "20 ns")]
    pub pte_scan_ns: f64,
    /// Entries of the L1 TLB for 64 KiB pages.
    #[param(
        default = 32,
        range = "[0, 65536]",
        unit = "entries",
        assumed = "Knights Corner's, 32 entries 4-way (not in ../shared/reference)"
    )]
    pub l1_64k_entries: usize,
    /// Ways of the 64 KiB L1 TLB.
    #[param(
        default = 4,
        range = "[1, 256]",
        unit = "ways",
        assumed = "Knights Corner's, 32 entries 4-way (not in ../shared/reference)"
    )]
    pub l1_64k_ways: usize,
    /// Hardware threads running the policy's periodic work (the LRU scanner), outside the
    /// application's cores: the paper dedicates spare hyperthreads to it. A scan's work
    /// (PTE reads, shootdowns it waits for) is spread over them.
    #[param(
        default = 16,
        range = "[1, 4096]",
        unit = "threads",
        assumed = "the CMCP paper (section 5.1) dedicates hyperthreads to the statistics collection without their number: the 4 cores of a 60-core Knights Corner (4 hyperthreads each, reference/tlb-shootdown.md) left by a 56-core run"
    )]
    pub scanner_threads: u32,
    /// TLB effects: false = every access walks and sets the Accessed bit (no TLB hides any
    /// access; for checking policies against trace simulators).
    #[param(default = true)]
    pub tlb: bool,
}

impl HmemConfig {
    /// Check what the fields' declared ranges do not: (dotted field, problem).
    pub fn validate(&self, cores: usize) -> std::result::Result<(), (String, String)> {
        let e = |f: &str, m: String| Err((format!("machine.hmem.{f}"), m));
        match self.fast_memory {
            FastMemory::Bytes(b) if b < self.page_size.bytes() => {
                return e(
                    "fast_memory",
                    format!("{b} bytes is less than one {} page", self.page_size.name()),
                );
            }
            FastMemory::Fraction(f) if !(f.is_finite() && f > 0.0) => {
                return e("fast_memory", format!("{} must be > 0", f));
            }
            _ => {}
        }
        if self.page_size == PageSize::Huge1G {
            return e(
                "page_size",
                "the hierarchical mode supports \"4KiB\", \"64KiB\" and \"2MiB\" pages".into(),
            );
        }
        if cores > MAX_CORES {
            return e(
                "page_tables",
                format!("the hierarchical mode supports at most {MAX_CORES} cores, not {cores}"),
            );
        }
        if self.l1_64k_ways == 0
            || self.l1_64k_entries == 0
            || !self.l1_64k_entries.is_multiple_of(self.l1_64k_ways)
        {
            return e(
                "l1_64k_entries",
                format!(
                    "{} entries must be a positive multiple of {} ways",
                    self.l1_64k_entries, self.l1_64k_ways
                ),
            );
        }
        Ok(())
    }
}

// Page flags.
const RESIDENT: u8 = 1;
/// The page has a valid copy in slow memory (written back, or populated there).
const IN_SLOW: u8 = 2;
/// The page was touched at least once.
const TOUCHED: u8 = 4;

/// Per-page state, indexed by [`PageId`].
#[derive(Default)]
struct Pages {
    flags: Vec<u8>,
    /// Cores holding a PTE (PSPT); shared: bit 0 = present.
    cmap: Vec<u64>,
    /// Cores whose PTE has the Accessed bit set; shared: bit 0.
    young: Vec<u64>,
    /// Every core that ever mapped the page (the sharing pattern).
    ever: Vec<u64>,
    /// Accessed / Dirty bits of the 4 KiB entries of a page (bit k = entry k; 64 KiB pages
    /// use 16 bits, others bit 0).
    sub_a: Vec<u16>,
    sub_d: Vec<u16>,
}

impl Pages {
    fn grow(&mut self, n: usize) {
        self.flags.resize(n, 0);
        self.cmap.resize(n, 0);
        self.young.resize(n, 0);
        self.ever.resize(n, 0);
        self.sub_a.resize(n, 0);
        self.sub_d.resize(n, 0);
    }
}

/// A mapping's range of page ids.
#[derive(Clone, Copy, Debug)]
struct Area {
    /// First byte covered (aligned down to the page size).
    start: u64,
    end: u64,
    first: PageId,
}

/// Counters of one core in the hierarchical mode.
#[derive(Clone, Debug, Default)]
pub struct HmemCoreCounters {
    /// Faults that brought a page into fast memory.
    pub page_faults: u64,
    /// Of them, zero-filled (no transfer).
    pub zero_fills: u64,
    /// PSPT faults that copied another core's PTE.
    pub pte_copies: u64,
    /// Evictions this core performed (in its faults).
    pub evictions: u64,
    /// Bytes this core's faults moved over the link (in and out).
    pub bytes_moved: u64,
    /// Time in fault handling (data-moving faults with their evictions, and PTE copies), ps.
    pub fault_ps: u64,
}

struct HmemCore {
    /// Last area used: (start, end, first id).
    memo: (u64, u64, PageId),
    c: HmemCoreCounters,
}

/// Who runs policy code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Initiator {
    Core(usize),
    Scanner,
}

/// Costs in ps.
#[derive(Clone, Copy, Debug)]
struct Costs {
    fault: u64,
    copy: u64,
    pte_read: u64,
    zero_fill: u64,
    link_lat: u64,
    /// ps per byte over the link, scaled by 1000 (fs per byte).
    link_fs_per_byte: u64,
}

/// Machine-wide counters of the hierarchical mode.
#[derive(Clone, Debug, Default)]
pub struct HmemCounters {
    /// Evictions.
    pub evictions: u64,
    /// Dirty evictions written back.
    pub writebacks: u64,
    /// Bytes brought in over the link.
    pub bytes_in: u64,
    /// Bytes written back over the link.
    pub bytes_out: u64,
    /// Link busy time (both directions), ps.
    pub link_busy_ps: u64,
    /// Time faults waited for the link, ps.
    pub link_wait_ps: u64,
    /// Page-table entries read to test Accessed bits.
    pub pte_reads: u64,
    /// Accessed bits found set and cleared.
    pub young_cleared: u64,
    /// Remote invalidations caused by Accessed-bit clears.
    pub young_invalidations: u64,
    /// Remote invalidations caused by evictions.
    pub evict_invalidations: u64,
    /// Busy time of the scanner core, ps.
    pub scanner_ps: u64,
    /// Scanner runs.
    pub ticks: u64,
    /// Pages brought in by a placement or tiering policy (prefetches).
    pub prefetches: u64,
    /// Pages evicted by a placement or tiering policy.
    pub demotions: u64,
}

/// The hierarchical backend's state (everything but the policy).
struct State {
    cfg: HmemConfig,
    pt: PageTableKind,
    shift: u32,
    size: PageSize,
    pages: Pages,
    areas: Vec<Area>,
    next_id: u64,
    hc: Vec<HmemCore>,
    frames: u64,
    used: u64,
    footprint_bytes: u64,
    costs: Costs,
    link_in_free: u64,
    link_out_free: u64,
    c: HmemCounters,
    policy_kind: &'static str,
}

/// The hierarchical memory backend.
pub struct Hier {
    s: State,
    /// The node that stands for the slow memory in placement and tiering (node 1, when the
    /// machine has one).
    slow_node: Option<u8>,
    policy: Option<Box<dyn Replacement>>,
    track: bool,
    next_tick_ps: u64,
}

impl Hier {
    /// The backend for a machine with `cores` cores (the policy is built by
    /// [`MemoryBackend::start`]).
    pub fn new(cfg: &HmemConfig, cores: usize, nodes: usize, cost: &crate::hw::cost::CostConfig) -> Self {
        Hier {
            slow_node: (nodes >= 2).then_some(1),
            s: State {
                cfg: cfg.clone(),
                pt: cfg.page_tables,
                shift: cfg.page_size.shift(),
                size: cfg.page_size,
                pages: Pages::default(),
                areas: Vec::new(),
                next_id: 0,
                hc: (0..cores)
                    .map(|_| HmemCore { memo: (1, 0, 0), c: HmemCoreCounters::default() })
                    .collect(),
                frames: 0,
                used: 0,
                footprint_bytes: 0,
                costs: Costs {
                    fault: ps(cfg.fault_ns),
                    copy: ps(cfg.pte_copy_ns),
                    pte_read: ps(cfg.pte_scan_ns),
                    zero_fill: ps(cfg.page_size.bytes() as f64 / cost.zero_gbps),
                    link_lat: ps(cfg.link_latency_ns),
                    link_fs_per_byte: (1e6 / cfg.link_gbps).round() as u64,
                },
                link_in_free: 0,
                link_out_free: 0,
                c: HmemCounters::default(),
                policy_kind: "",
            },
            policy: None,
            track: false,
            next_tick_ps: u64::MAX,
        }
    }

    /// The configuration.
    pub fn cfg(&self) -> &HmemConfig {
        &self.s.cfg
    }
    /// Page size in bytes.
    pub fn page_bytes(&self) -> u64 {
        self.s.size.bytes()
    }
    /// Frames of fast memory (0 before the run starts).
    pub fn frames(&self) -> u64 {
        self.s.frames
    }
    /// Resident pages.
    pub fn resident_pages(&self) -> u64 {
        self.s.used
    }
    /// The machine-wide counters.
    pub fn counters(&self) -> &HmemCounters {
        &self.s.c
    }
    /// Counters of core `i`.
    pub fn core_counters(&self, i: usize) -> &HmemCoreCounters {
        &self.s.hc[i].c
    }

    /// Bits of the 4 KiB entry of `addr` in core `core`'s page table: (present, accessed,
    /// dirty). With shared page tables `core` is ignored.
    pub fn pte_bits(&mut self, core: usize, addr: u64) -> Option<(bool, bool, bool)> {
        let h = &mut self.s;
        let (id, sub) = h.id_of(core, addr)?;
        let i = id as usize;
        let present = match h.pt {
            PageTableKind::Pspt => h.pages.cmap[i] >> core & 1 != 0,
            PageTableKind::Shared => h.pages.flags[i] & RESIDENT != 0,
        };
        Some((present, h.pages.sub_a[i] >> sub & 1 != 0, h.pages.sub_d[i] >> sub & 1 != 0))
    }

    /// Core map of the page holding `addr` (per-core page tables).
    pub fn core_map(&mut self, addr: u64) -> Option<u64> {
        let (id, _) = self.s.id_of(0, addr)?;
        Some(self.s.pages.cmap[id as usize])
    }

    /// Whether the page holding `addr` is resident in fast memory.
    pub fn is_resident(&mut self, addr: u64) -> Option<bool> {
        let (id, _) = self.s.id_of(0, addr)?;
        Some(self.s.pages.flags[id as usize] & RESIDENT != 0)
    }

    /// The flags of the page holding `va` (None: in no mapping).
    fn flags_ro(&self, va: u64) -> Option<u8> {
        let h = &self.s;
        let i = h.areas.partition_point(|a| a.start <= va);
        let a = i.checked_sub(1).and_then(|i| h.areas.get(i))?;
        if va >= a.end {
            return None;
        }
        let id = a.first as u64 + ((va - a.start) >> h.shift);
        Some(h.pages.flags[id as usize])
    }

    /// A fault on a non-resident page: evict when full, bring the page in.
    fn fault_in(&mut self, env: &mut Env, core: usize, id: PageId) -> Result<()> {
        let i = id as usize;
        let t0 = env.hw.cores[core].clock_ps;
        let Some(mut p) = self.policy.take() else {
            return Err(SimError::runtime(
                "hierarchical memory mode without a replacement policy (the backend was not started)",
            ));
        };
        let h = &mut self.s;
        env.hw.cores[core].clock_ps = env.hw.cores[core].clock_ps.saturating_add(h.costs.fault);
        let pb = h.size.bytes();
        if h.used >= h.frames {
            let mut ctx =
                Ctx { h: &mut *h, hw: &mut *env.hw, mm: env.mm_cpumask, who: Initiator::Core(core) };
            let v = p.evict(&mut ctx);
            let err = p.error().or_else(|| {
                let resident = ctx.h.pages.flags.get(v as usize).is_some_and(|f| f & RESIDENT != 0);
                (!resident).then(|| {
                    SimError::runtime(format!(
                        "replacement policy `{}` chose page {v} as the victim, which is not resident",
                        ctx.h.policy_kind
                    ))
                })
            });
            if let Some(e) = err {
                env.hw.cores[core].clock_ps = t0;
                self.policy = Some(p);
                return Err(e);
            }
            ctx.unmap_victim(v);
            env.mem.free(0, pb / tierlab_core::PAGE_SIZE);
        }
        let flags = h.pages.flags[i];
        if flags & IN_SLOW != 0 {
            let at = env.hw.cores[core].clock_ps;
            let t = h.link(true, at, pb);
            env.hw.cores[core].clock_ps = env.hw.cores[core].clock_ps.saturating_add(t);
            h.c.bytes_in += pb;
            h.hc[core].c.bytes_moved += pb;
        } else {
            env.hw.cores[core].clock_ps = env.hw.cores[core].clock_ps.saturating_add(h.costs.zero_fill);
            h.hc[core].c.zero_fills += 1;
        }
        let bit = 1u64 << core;
        let pg = &mut h.pages;
        pg.flags[i] = flags | RESIDENT | TOUCHED;
        pg.cmap[i] = if h.pt == PageTableKind::Pspt { bit } else { 1 };
        pg.ever[i] |= bit;
        pg.young[i] = 0;
        pg.sub_a[i] = 0;
        pg.sub_d[i] = 0;
        h.used += 1;
        let n = &mut env.mem.nodes[0];
        n.used_pages += pb / tierlab_core::PAGE_SIZE;
        n.allocated_pages += pb / tierlab_core::PAGE_SIZE;
        p.on_fault_in(
            id,
            &mut Ctx { h: &mut *h, hw: &mut *env.hw, mm: env.mm_cpumask, who: Initiator::Core(core) },
        );
        let err = p.error();
        self.policy = Some(p);
        if let Some(e) = err {
            return Err(e);
        }
        let c = &mut env.hw.cores[core];
        let dt = c.clock_ps - t0;
        c.c.page_faults += 1;
        c.c.fault_ps += dt;
        let h = &mut self.s;
        h.hc[core].c.page_faults += 1;
        h.hc[core].c.fault_ps += dt;
        Ok(())
    }

    /// Evict resident page `id` on behalf of `core` (a policy's demotion).
    fn evict_page(&mut self, env: &mut Env, core: usize, id: PageId) {
        let pb = self.s.size.bytes();
        if let Some(p) = self.policy.as_mut() {
            p.remove(id);
        }
        let mut ctx =
            Ctx { h: &mut self.s, hw: &mut *env.hw, mm: env.mm_cpumask, who: Initiator::Core(core) };
        ctx.unmap_victim(id);
        env.mem.free(0, pb / tierlab_core::PAGE_SIZE);
    }
}

impl State {
    /// Register a mapping `[start, start+len)`.
    fn add_area(&mut self, start: u64, len: u64) {
        let pb = self.size.bytes();
        let s = self.size.base(start);
        let n = (start + len - s).div_ceil(pb);
        let a = Area { start: s, end: start + len, first: self.next_id as PageId };
        self.next_id += n;
        assert!(self.next_id < u32::MAX as u64, "hierarchical mode: more than 2^32 pages");
        self.pages.grow(self.next_id as usize);
        let i = self.areas.partition_point(|x| x.start < s);
        self.areas.insert(i, a);
    }

    /// Page id and 4 KiB sub-entry of `addr` for `core` (memoized per core).
    #[inline]
    fn id_of(&mut self, core: usize, addr: u64) -> Option<(PageId, u32)> {
        let (s, e, first) = self.hc[core].memo;
        let (s, first) = if addr >= s && addr < e {
            (s, first)
        } else {
            let i = self.areas.partition_point(|a| a.start <= addr);
            let a = *self.areas.get(i.checked_sub(1)?)?;
            if addr >= a.end {
                return None;
            }
            self.hc[core].memo = (a.start, a.end, a.first);
            (a.start, a.first)
        };
        let off = addr - s;
        let sub =
            if self.size == PageSize::Knc64K { ((off >> tierlab_core::PAGE_SHIFT) & 15) as u32 } else { 0 };
        Some((first + (off >> self.shift) as PageId, sub))
    }

    /// Virtual address of page `id`.
    fn va_of(&self, id: PageId) -> u64 {
        // Areas are sorted by address; ids grow with creation order, so search linearly
        // for the area containing the id (areas are few).
        let pb = self.size.bytes();
        for a in &self.areas {
            let n = (a.end - a.start).div_ceil(pb);
            if id >= a.first && (id as u64) < a.first as u64 + n {
                return a.start + (((id - a.first) as u64) << self.shift);
            }
        }
        panic!("hierarchical mode: page id {id} belongs to no mapping");
    }

    /// Transfer `bytes` over one direction of the link starting no earlier than `at`:
    /// returns the time until it completes.
    fn link(&mut self, inbound: bool, at: u64, bytes: u64) -> u64 {
        let free = if inbound { &mut self.link_in_free } else { &mut self.link_out_free };
        let start = at.max(*free);
        let occ = bytes * self.costs.link_fs_per_byte / 1000;
        *free = start + occ;
        self.c.link_busy_ps += occ;
        self.c.link_wait_ps += start - at;
        start + occ + self.costs.link_lat - at
    }
}

/// The memory system as a policy sees it: the page state plus the cores to invalidate.
struct Ctx<'a> {
    h: &'a mut State,
    hw: &'a mut Hardware,
    mm: &'a [bool],
    who: Initiator,
}

impl Ctx<'_> {
    fn charge(&mut self, t: u64) {
        match self.who {
            Initiator::Core(i) => self.hw.charge_tlb(i, t),
            Initiator::Scanner => self.h.c.scanner_ps += t,
        }
    }

    /// Invalidate page `id` on the cores of `mask` (the initiator locally, the others by
    /// shootdown); returns the number of remote targets.
    fn shootdown(&mut self, id: PageId, mask: u64) -> u64 {
        if mask == 0 {
            return 0;
        }
        let va = self.h.va_of(id);
        let initiator = match self.who {
            Initiator::Core(i) => ShootdownInitiator::Core { core: i, local: mask >> i & 1 != 0 },
            Initiator::Scanner => ShootdownInitiator::Kernel,
        };
        let out = shootdown(self.hw, Inval::Pages(&[va]), initiator, |i| mask >> i & 1 != 0);
        if self.who == Initiator::Scanner {
            self.h.c.scanner_ps += out.initiator_ps;
        }
        out.targets
    }

    /// Cores that may cache page `id`'s translation.
    fn holders(&self, id: PageId) -> u64 {
        match self.h.pt {
            PageTableKind::Pspt => self.h.pages.cmap[id as usize],
            PageTableKind::Shared => cpumask(self.mm),
        }
    }

    /// Unmap and write back page `id` (the policy's victim).
    fn unmap_victim(&mut self, id: PageId) {
        let i = id as usize;
        let holders = self.holders(id);
        let targets = self.shootdown(id, holders);
        self.h.c.evict_invalidations += targets;
        let h = &mut *self.h;
        let pb = h.size.bytes();
        if h.pages.sub_d[i] != 0 {
            if let Initiator::Core(c) = self.who {
                let at = self.hw.cores[c].clock_ps;
                let t = h.link(false, at, pb);
                self.hw.cores[c].clock_ps = self.hw.cores[c].clock_ps.saturating_add(t);
                h.hc[c].c.bytes_moved += pb;
            }
            h.c.bytes_out += pb;
            h.c.writebacks += 1;
            h.pages.flags[i] |= IN_SLOW;
        }
        h.pages.flags[i] &= !RESIDENT;
        h.pages.cmap[i] = 0;
        h.pages.young[i] = 0;
        h.pages.sub_a[i] = 0;
        h.pages.sub_d[i] = 0;
        h.used -= 1;
        h.c.evictions += 1;
        if let Initiator::Core(c) = self.who {
            h.hc[c].c.evictions += 1;
        }
    }
}

fn cpumask(mm: &[bool]) -> u64 {
    mm.iter().enumerate().filter(|(_, &on)| on).fold(0u64, |m, (i, _)| m | (1 << i))
}

impl Frames for Ctx<'_> {
    fn test_and_clear_young(&mut self, id: PageId) -> u32 {
        let i = id as usize;
        let per = if self.h.size == PageSize::Knc64K { 16 } else { 1 };
        let (ptes, young, holders) = match self.h.pt {
            PageTableKind::Pspt => {
                let cm = self.h.pages.cmap[i];
                (cm.count_ones() as u64 * per, self.h.pages.young[i] & cm, self.h.pages.young[i] & cm)
            }
            PageTableKind::Shared => {
                let y = self.h.pages.young[i] & 1;
                (per, y, if y != 0 { cpumask(self.mm) } else { 0 })
            }
        };
        self.h.c.pte_reads += ptes;
        let t = ptes * self.h.costs.pte_read;
        self.charge(t);
        if young == 0 {
            return 0;
        }
        self.h.pages.young[i] = 0;
        self.h.pages.sub_a[i] = 0;
        let n = young.count_ones();
        self.h.c.young_cleared += n as u64;
        let targets = self.shootdown(id, holders);
        self.h.c.young_invalidations += targets;
        n
    }
    fn mapcount(&self, id: PageId) -> u32 {
        match self.h.pt {
            PageTableKind::Pspt => self.h.pages.cmap[id as usize].count_ones(),
            PageTableKind::Shared => 0,
        }
    }
    fn capacity(&self) -> u64 {
        self.h.frames
    }
}

impl MemoryBackend for Hier {
    fn name(&self) -> &'static str {
        "hierarchical"
    }

    /// A TLB miss: walk this core's page table, faulting the page in (or copying another
    /// core's PTE) when needed, set the Accessed (and Dirty) bit of the 4 KiB entry.
    fn translate(&mut self, env: &mut Env, core: usize, addr: u64, write: bool) -> Translated {
        let h = &mut self.s;
        let Some((id, sub)) = h.id_of(core, addr) else {
            *env.segfaults += 1;
            return Err(Box::new(SimError::runtime(format!(
                "core {core} accessed {addr:#x}, which is outside every mapping (segmentation fault)"
            ))));
        };
        let i = id as usize;
        // The walk through this core's (conceptual, always present above the leaf) page
        // tables, shortened by its paging-structure caches.
        let leaf = if h.size == PageSize::Huge2M { Level::Pmd } else { Level::Pte };
        let level_ps = env.hw.walk_level_ps;
        let walk = |c: &mut crate::hw::Core| {
            let (_, levels) = c.psc.walk_present(addr, leaf);
            c.c.walks_by_levels[levels as usize] += 1;
            levels as u64 * level_ps
        };
        let mut walk_ps = walk(&mut env.hw.cores[core]);
        let bit = 1u64 << core;
        let resident = h.pages.flags[i] & RESIDENT != 0;
        let faults = !resident || (h.pt == PageTableKind::Pspt && h.pages.cmap[i] & bit == 0);
        if faults {
            // The fault drops the cached entries of `addr` (SDM 4.10.4.1); the access walks
            // again once the handler has installed the PTE.
            let c = &mut env.hw.cores[core];
            c.psc.invalidate_va(addr);
            walk_ps += walk(c);
        }
        if !resident {
            self.fault_in(env, core, id)?;
        } else if h.pt == PageTableKind::Pspt && h.pages.cmap[i] & bit == 0 {
            // PSPT: copy the valid PTE of another core.
            let t = h.costs.copy;
            let c = &mut env.hw.cores[core];
            c.clock_ps = c.clock_ps.saturating_add(t);
            c.c.fault_ps += t;
            h.hc[core].c.pte_copies += 1;
            h.hc[core].c.fault_ps += t;
            h.pages.cmap[i] |= bit;
            h.pages.ever[i] |= bit;
            let mut p = self.policy.take().expect("policy");
            p.on_map(
                id,
                &mut Ctx { h: &mut self.s, hw: &mut *env.hw, mm: env.mm_cpumask, who: Initiator::Core(core) },
            );
            self.policy = Some(p);
        }
        let h = &mut self.s;
        let pg = &mut h.pages;
        pg.young[i] |= if h.pt == PageTableKind::Pspt { bit } else { 1 };
        pg.ever[i] |= bit;
        pg.sub_a[i] |= 1 << sub;
        if write {
            pg.sub_d[i] |= 1 << sub;
        }
        let dirty = pg.sub_d[i] >> sub & 1 != 0;
        if self.track {
            self.policy.as_mut().expect("policy").on_access(id);
        }
        Ok(Fill { node: 0, size: h.size, dirty, walk_ps })
    }

    fn set_dirty(&mut self, core: usize, addr: u64, _size: PageSize) {
        if let Some((id, sub)) = self.s.id_of(core, addr) {
            self.s.pages.sub_d[id as usize] |= 1 << sub;
        }
    }

    fn on_hit(&mut self, core: usize, addr: u64) {
        if let Some((id, _)) = self.s.id_of(core, addr) {
            if let Some(p) = self.policy.as_mut() {
                p.on_access(id);
            }
        }
    }

    fn map(&mut self, _env: &mut Env, vma: &Vma) {
        self.s.add_area(vma.start, vma.len);
    }

    /// Drop the pages of an unmapped range.
    fn unmap(&mut self, env: &mut Env, vma: &Vma) {
        let h = &mut self.s;
        let pb = h.size.bytes();
        let i = h.areas.partition_point(|a| a.start < h.size.base(vma.start));
        let Some(area) = h.areas.get(i).copied() else { return };
        let n = (area.end - area.start).div_ceil(pb);
        for k in 0..n {
            let id = area.first + k as PageId;
            if self.s.pages.flags[id as usize] & RESIDENT != 0 {
                if let Some(p) = self.policy.as_mut() {
                    p.remove(id);
                }
                let mut ctx =
                    Ctx { h: &mut self.s, hw: &mut *env.hw, mm: env.mm_cpumask, who: Initiator::Core(0) };
                let holders = ctx.holders(id);
                ctx.shootdown(id, holders);
                let h2 = &mut self.s;
                h2.pages.flags[id as usize] = 0;
                h2.pages.cmap[id as usize] = 0;
                h2.used -= 1;
                env.mem.free(0, pb / tierlab_core::PAGE_SIZE);
            } else {
                self.s.pages.flags[id as usize] = 0;
            }
        }
        let h = &mut self.s;
        h.areas.remove(i);
        for c in &mut h.hc {
            c.memo = (1, 0, 0);
        }
    }

    /// Populate: the data starts in slow memory.
    fn populate(&mut self, _env: &mut Env, _vma: &Vma, start: u64, len: u64, _core: usize) -> Result<()> {
        let h = &mut self.s;
        let pb = h.size.bytes();
        let mut a = h.size.base(start);
        while a < start + len {
            if let Some((id, _)) = h.id_of(0, a) {
                h.pages.flags[id as usize] |= IN_SLOW;
            }
            a += pb;
        }
        Ok(())
    }

    fn populate_on(&mut self, _env: &mut Env, vma: &Vma, _start: u64, _len: u64, node: u8) -> Result<()> {
        Err(SimError::runtime(format!(
            "populate `{}` on node {node}: not available in the hierarchical memory mode (pages live in fast memory only while resident)",
            vma.name
        )))
    }

    /// Node 0 for a page resident in the fast memory; the slow memory (node 1, when the
    /// machine names one) for a page whose data lives there (populated, or touched and
    /// evicted); None for a page never touched.
    fn node_of(&self, va: u64) -> Option<u8> {
        let f = self.flags_ro(va)?;
        if f & RESIDENT != 0 {
            Some(0)
        } else if f & (IN_SLOW | TOUCHED) != 0 {
            self.slow_node
        } else {
            None
        }
    }

    fn page_size_of(&self, va: u64) -> Option<PageSize> {
        self.node_of(va).map(|_| self.s.size)
    }

    /// Migration in a hierarchical memory: to node 0 (the fast memory) brings a page in now
    /// (a prefetch: the fault path's eviction and transfer, charged to `core`); to any other
    /// node evicts it (written back over the link when dirty). Pages outside every mapping
    /// are an error; pages already where they should be are skipped.
    fn migrate(&mut self, env: &mut Env, vas: &[u64], to: u8, core: usize) -> Result<Migrated> {
        let mut out = Migrated::default();
        if to as usize >= env.mem.nodes.len() {
            return Err(SimError::runtime(format!("migrate_page: node {to} does not exist")));
        }
        let before = env.hw.cores[core].clock_ps;
        let pb = self.s.size.bytes();
        for &va in vas {
            let Some((id, _)) = self.s.id_of(core, va) else {
                return Err(SimError::runtime(format!("migrate_page: {va:#x} is in no mapping")));
            };
            let resident = self.s.pages.flags[id as usize] & RESIDENT != 0;
            if (to == 0) == resident {
                continue;
            }
            if to == 0 {
                self.fault_in(env, core, id)?;
                // A prefetch is no access: the page's core map is the prefetching core's
                // until a core touches it.
                self.s.c.prefetches += 1;
                env.migration.promotions += 1;
            } else {
                self.evict_page(env, core, id);
                self.s.c.demotions += 1;
                env.migration.demotions += 1;
            }
            env.migration.moves += 1;
            env.migration.bytes += pb;
            out.pages += 1;
            out.bytes += pb;
        }
        out.ns = (env.hw.cores[core].clock_ps - before) as f64 / 1000.0;
        Ok(out)
    }

    /// Size the fast memory (a share of the footprint is resolved now) and build the
    /// replacement policy from `policies` (the scenario's `[[policies]]`).
    fn start(
        &mut self,
        env: &mut Env,
        policies: &[PolicyConfig],
        scenario_file: &str,
        seed: u64,
    ) -> Result<()> {
        let Some(pc) = policies.first() else {
            return Err(SimError::config(
                scenario_file,
                "policies",
                "[machine.hmem] needs a replacement policy: add [[policies]] with kind = \"fifo\", \"lru\", \"lru-exact\", \"clock\" or \"cmcp\"",
            ));
        };
        if policies.len() > 1 {
            return Err(SimError::config(
                scenario_file,
                "policies[1]",
                "only one replacement policy can run",
            ));
        }
        let h = &mut self.s;
        let pb = h.size.bytes();
        let footprint: u64 = h.areas.iter().map(|a| (a.end - a.start).div_ceil(pb) * pb).sum();
        h.footprint_bytes = footprint;
        let cap_bytes = match h.cfg.fast_memory {
            FastMemory::Bytes(b) => b,
            FastMemory::Fraction(f) => (f * footprint as f64) as u64,
        };
        let frames = (cap_bytes / pb).max(1);
        let node0 = &env.mem.nodes[0];
        if frames as u128 * pb as u128 > tierlab_core::bytes_of(node0.capacity_pages) as u128 {
            return Err(SimError::config(
                scenario_file,
                "machine.hmem.fast_memory",
                format!(
                    "{} of fast memory do not fit memory node `{}` ({})",
                    format_size(frames * pb),
                    node0.cfg.name,
                    format_size(tierlab_core::bytes_of(node0.capacity_pages))
                ),
            ));
        }
        h.frames = frames;
        let ctx = PolicyBuildCtx {
            frames,
            capacity_bytes: frames * pb,
            pages: h.next_id,
            per_core_page_tables: h.pt == PageTableKind::Pspt,
            scenario_file: scenario_file.to_string(),
            index: 0,
            seed,
        };
        let p = pc.build(&ctx)?;
        self.track = p.wants_accesses();
        env.hw.set_hit_reporting(self.track);
        self.next_tick_ps = match p.period() {
            Ps::ZERO => u64::MAX,
            n => n.ps(),
        };
        self.policy = Some(p);
        self.s.policy_kind = pc.kind();
        Ok(())
    }

    fn next_event_ps(&self) -> u64 {
        self.next_tick_ps
    }

    /// The policy's periodic work due at `now_ps` (on its dedicated scanner threads).
    fn tick(&mut self, env: &mut Env, now_ps: u64) {
        if self.next_tick_ps > now_ps {
            return;
        }
        let t = self.next_tick_ps;
        let Some(mut p) = self.policy.take() else { return };
        let period = p.period().max(Ps::NS).ps();
        let h = &mut self.s;
        let busy0 = h.c.scanner_ps;
        p.tick(
            Ps::from_ps(t),
            &mut Ctx { h: &mut *h, hw: &mut *env.hw, mm: env.mm_cpumask, who: Initiator::Scanner },
        );
        self.policy = Some(p);
        h.c.ticks += 1;
        let busy = (h.c.scanner_ps - busy0) / h.cfg.scanner_threads as u64;
        self.next_tick_ps = t + period.max(busy);
    }

    /// Stats of the hierarchical mode (under `hmem.`).
    fn report_stats(&self, hw: &Hardware, mm: &[bool], out: &mut Stats) {
        let h = &self.s;
        let pb = h.size.bytes();
        out.set("hmem.policy", h.policy_kind);
        out.set("hmem.page_tables", h.pt.name());
        out.set("hmem.page_size", h.size.name());
        out.set("hmem.page_bytes", pb);
        out.set("hmem.footprint_bytes", h.footprint_bytes);
        out.set("hmem.fast_memory_bytes", h.frames * pb);
        out.set(
            "hmem.fast_memory_fraction",
            if h.footprint_bytes > 0 { (h.frames * pb) as f64 / h.footprint_bytes as f64 } else { 0.0 },
        );
        out.set("hmem.frames", h.frames);
        out.set("hmem.resident_pages", h.used);
        let c = &h.c;
        out.set("hmem.evictions", c.evictions);
        out.set("hmem.writebacks", c.writebacks);
        out.set("hmem.bytes_in", c.bytes_in);
        out.set("hmem.bytes_out", c.bytes_out);
        out.set("hmem.data_moved_bytes", c.bytes_in + c.bytes_out);
        out.set("hmem.link_busy_s", c.link_busy_ps as f64 / 1e12);
        out.set("hmem.link_wait_s", c.link_wait_ps as f64 / 1e12);
        out.set("hmem.pte_reads", c.pte_reads);
        out.set("hmem.accessed_bits_cleared", c.young_cleared);
        out.set("hmem.invalidations.eviction", c.evict_invalidations);
        out.set("hmem.invalidations.accessed_bit", c.young_invalidations);
        out.set("hmem.scanner.runs", c.ticks);
        out.set("hmem.scanner.busy_s", c.scanner_ps as f64 / 1e12);
        out.set("hmem.scanner.threads", h.cfg.scanner_threads as u64);
        if c.prefetches + c.demotions > 0 {
            out.set("hmem.policy_prefetches", c.prefetches);
            out.set("hmem.policy_evictions", c.demotions);
        }
        // Per core, and averages over the application's cores (the paper's Table 1).
        let app: Vec<usize> = (0..hw.cores.len()).filter(|&i| mm[i]).collect();
        let n = app.len().max(1) as f64;
        let mut tot = [0f64; 8];
        for &i in &app {
            let k = &hw.cores[i].c;
            let hc = &h.hc[i].c;
            let row = [
                hc.page_faults as f64,
                k.remote_invalidations as f64,
                k.tlb_misses as f64,
                hc.pte_copies as f64,
                hc.bytes_moved as f64,
                hc.fault_ps as f64 / 1e12,
                hw.cores[i].clock_ps as f64 / 1e12,
                hc.zero_fills as f64,
            ];
            for (t, v) in tot.iter_mut().zip(row) {
                *t += v;
            }
            let p = format!("hmem.core.{i}");
            out.set(format!("{p}.page_faults"), hc.page_faults);
            out.set(format!("{p}.remote_tlb_invalidations"), k.remote_invalidations);
            out.set(format!("{p}.dtlb_misses"), k.tlb_misses);
            out.set(format!("{p}.pte_copy_faults"), hc.pte_copies);
            out.set(format!("{p}.data_moved_bytes"), hc.bytes_moved);
            out.set(format!("{p}.fault_time_s"), hc.fault_ps as f64 / 1e12);
        }
        let names = [
            "page_faults",
            "remote_tlb_invalidations",
            "dtlb_misses",
            "pte_copy_faults",
            "data_moved_bytes",
            "fault_time_s",
            "time_s",
            "zero_fill_faults",
        ];
        for (name, t) in names.iter().zip(tot) {
            out.set(format!("hmem.per_core.{name}"), t / n);
        }
        let run = app.iter().map(|&i| hw.cores[i].clock_ps).max().unwrap_or(0);
        out.set("hmem.run_time_s", run as f64 / 1e12);
        // Sharing pattern: pages by number of cores that ever mapped them.
        let mut hist = [0u64; MAX_CORES + 1];
        for (f, e) in h.pages.flags.iter().zip(&h.pages.ever) {
            if f & TOUCHED != 0 {
                hist[e.count_ones() as usize] += 1;
            }
        }
        let top = hist.iter().rposition(|&v| v > 0).unwrap_or(0);
        for (k, v) in hist.iter().enumerate().take(top + 1).skip(1) {
            out.set(format!("hmem.coremap.{k}"), *v);
        }
        out.set("hmem.touched_pages", hist.iter().sum::<u64>());
        if let Some(p) = self.policy.as_ref() {
            p.report_stats(&format!("hmem.{}", h.policy_kind), out);
        }
    }
}

/// Selected by `[machine.hmem]`, which also sets the TLBs' caching of its translations.
impl super::BackendKind for Hier {
    fn for_config(cfg: &crate::os::MachineConfig, hw: &mut crate::hw::Hardware) -> Option<Self> {
        let h = cfg.hmem.as_ref()?;
        hw.set_tlb_caching(h.tlb);
        Some(Hier::new(h, cfg.cores, cfg.nodes.len(), &cfg.cost))
    }
}
