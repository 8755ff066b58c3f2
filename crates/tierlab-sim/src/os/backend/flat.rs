//! The flat backend: every memory node is directly addressable (NUMA nodes, a CXL or PMem
//! tier exposed as a CPU-less node). One set of 4-level radix page tables with Accessed and
//! Dirty bits at every level; a page fault allocates the page on the node the placement rule
//! picks (first touch, interleave, a preferred-node plan), falling back to the next node when
//! one is full; migration moves pages between nodes (a copy at the slower node's bandwidth
//! plus one batched shootdown).

use crate::error::{Result, SimError};
use crate::hw::cost::ps;
use crate::hw::pagetable::{PageTables, Translation};
use crate::hw::{Core, Fill, Hardware, Translated};
use crate::os::shootdown::{shootdown, Initiator, Inval};
use crate::os::Vma;
use crate::stats::Stats;
use tierlab_core::{PageSize, HUGE_1G_SIZE, HUGE_SIZE, PAGE_SIZE};

use super::{Env, MemoryBackend, NOT_WALKED};
use crate::os::Migrated;

/// The flat backend's state.
pub struct Flat {
    /// The page tables.
    pub pt: PageTables,
    fault_4k_ps: u64,
    fault_2m_ps: u64,
    /// A 1 GiB fault: the same fixed cost plus zeroing 1 GiB at `zero_gbps` (an assumption:
    /// Linux zeroes a gigantic page in the fault, like a 2 MiB one).
    fault_1g_ps: u64,
}

impl Flat {
    /// A flat backend with the machine's cost model.
    pub fn new(cost: &crate::hw::cost::CostConfig, dirty_upper_levels: bool) -> Self {
        let mut pt = PageTables::new();
        pt.dirty_upper_levels = dirty_upper_levels;
        Flat {
            pt,
            fault_4k_ps: ps(cost.fault_ns + PAGE_SIZE as f64 / cost.zero_gbps),
            fault_2m_ps: ps(cost.fault_ns + HUGE_SIZE as f64 / cost.zero_gbps),
            fault_1g_ps: ps(cost.fault_ns + HUGE_1G_SIZE as f64 / cost.zero_gbps),
        }
    }

    /// Handle a page fault of `core` at `addr`: find the mapping, place and map the page,
    /// charge the fault to the core.
    fn fault(&mut self, env: &mut Env, core: usize, addr: u64) -> Result<()> {
        let vma = match env.vmas.range(..=addr).next_back() {
            Some((_, v)) if addr < v.start + v.len => v,
            _ => {
                *env.segfaults += 1;
                return Err(SimError::runtime(format!(
                    "core {core} accessed {addr:#x}, which is outside every mapping (segmentation fault)"
                )));
            }
        };
        let size = vma.page_size;
        let cost = match size {
            PageSize::Huge2M => self.fault_2m_ps,
            PageSize::Huge1G => self.fault_1g_ps,
            _ => self.fault_4k_ps,
        };
        let base = size.base(addr);
        let node = env.mem.allocate_at(core, base, size.base_pages()).ok_or_else(|| {
            SimError::runtime(format!(
                "out of memory: no node has room for a {} page at {addr:#x} (all {} nodes full, {} bytes total)",
                match size {
                    PageSize::Huge2M => "2 MiB",
                    PageSize::Huge1G => "1 GiB",
                    _ => "4 KiB",
                },
                env.mem.nodes.len(),
                env.mem.capacity_bytes()
            ))
        })?;
        if size == PageSize::Huge2M {
            self.pt.map_2m(base, node);
        } else if size == PageSize::Huge1G {
            self.pt.map_1g(base, node);
        } else {
            self.pt.map_4k_after_walk(&env.hw.cores[core].walk_memo, base, node);
        }
        // A page reclaimed to swap is read back (a major fault).
        let cost = cost + env.mem.swap.refault(base, size.base_pages());
        let c = &mut env.hw.cores[core];
        c.c.page_faults += 1;
        c.c.fault_ps += cost;
        c.clock_ps = c.clock_ps.saturating_add(cost);
        Ok(())
    }
}

impl MemoryBackend for Flat {
    fn name(&self) -> &'static str {
        "flat"
    }

    /// Walk for `addr`; on a fault allocate the page and walk again.
    #[inline]
    fn translate(&mut self, env: &mut Env, core: usize, addr: u64, write: bool) -> Translated {
        let level_ps = env.hw.walk_level_ps;
        match self.walk_present(&mut env.hw.cores[core], level_ps, addr, write) {
            Ok(f) => Ok(f),
            Err(spent) => self.translate_after(env, core, addr, write, spent),
        }
    }

    /// The first walk (all a TLB miss needs unless the page is not present), without the
    /// rest of the machine. Inlined into the hardware's miss path with the walk: its state
    /// stays in registers (callgrind, uniform 1 GiB: -39 instructions per access against a
    /// call; before the fault path was split off, inlining the walk cost +16).
    #[inline(always)]
    fn walk_present(&mut self, c: &mut Core, level_ps: u64, addr: u64, write: bool) -> Result<Fill, u64> {
        let w = self.pt.walk(addr, write, &mut c.walk_memo, &mut c.psc);
        // A walk reads 1 to 4 levels (the clamp only spares a bounds check).
        c.c.walks_by_levels[w.levels.min(4) as usize] += 1;
        let spent = w.levels as u64 * level_ps;
        let size = match w.translation {
            Translation::Page4K { node } => {
                return Ok(Fill { node, size: PageSize::Base4K, dirty: write, walk_ps: spent })
            }
            Translation::Page2M { node } => (node, PageSize::Huge2M),
            Translation::Page1G { node } => (node, PageSize::Huge1G),
            Translation::NotPresent => return Err(spent),
        };
        Ok(Fill { node: size.0, size: size.1, dirty: write, walk_ps: spent })
    }

    /// The page was not present at the first walk (which took `spent` ps): take the page
    /// fault and walk again.
    #[inline(never)]
    fn translate_after(
        &mut self,
        env: &mut Env,
        core: usize,
        addr: u64,
        write: bool,
        spent: u64,
    ) -> Translated {
        if spent == NOT_WALKED {
            return self.translate(env, core, addr, write);
        }
        self.fault(env, core, addr)?;
        let c = &mut env.hw.cores[core];
        let w = self.pt.walk(addr, write, &mut c.walk_memo, &mut c.psc);
        // A walk reads 1 to 4 levels (the clamp only spares a bounds check).
        c.c.walks_by_levels[w.levels.min(4) as usize] += 1;
        let spent = spent + w.levels as u64 * env.hw.walk_level_ps;
        let (node, size) = match w.translation {
            Translation::Page4K { node } => (node, PageSize::Base4K),
            Translation::Page2M { node } => (node, PageSize::Huge2M),
            Translation::Page1G { node } => (node, PageSize::Huge1G),
            Translation::NotPresent => {
                return Err(Box::new(SimError::runtime(format!(
                    "page at {addr:#x} still not present after its fault"
                ))))
            }
        };
        Ok(Fill { node, size, dirty: write, walk_ps: spent })
    }

    #[inline]
    fn set_dirty(&mut self, _core: usize, addr: u64, _size: PageSize) {
        self.pt.set_dirty(addr);
    }

    fn unmap(&mut self, env: &mut Env, v: &Vma) {
        let mut freed: Vec<(u8, u64)> = Vec::new();
        self.pt.unmap_range(v.start, v.start + v.len, &mut |n, p| freed.push((n, p)));
        for (n, p) in freed {
            env.mem.free(n, p);
        }
        let mm = env.mm_cpumask;
        shootdown(
            env.hw,
            Inval::Range(v.start, v.start + v.len),
            Initiator::Core { core: 0, local: true },
            |i| mm[i],
        );
    }

    fn populate(&mut self, env: &mut Env, vma: &Vma, start: u64, len: u64, core: usize) -> Result<()> {
        let end = start + len;
        let core = core.min(env.hw.cores.len() - 1);
        if vma.page_size == PageSize::Huge1G {
            // Whole 1 GiB pages covering the range (the mapping is 1 GiB aligned and sized).
            let mut va = PageSize::Huge1G.base(start);
            while va < end {
                if !self.pt.is_giant(va) {
                    let node = env.mem.allocate_at(core, va, PageSize::Huge1G.base_pages()).ok_or_else(|| {
                        SimError::runtime(format!(
                            "out of memory while populating `{}`: no node has room for a 1 GiB page at {va:#x}",
                            vma.name
                        ))
                    })?;
                    self.pt.map_1g(va, node);
                }
                va += HUGE_1G_SIZE;
            }
            return Ok(());
        }
        let mut va = start;
        while va < end {
            let mut chunk_end = (PageSize::Huge2M.base(va) + HUGE_SIZE).min(end);
            if vma.page_size == PageSize::Base4K && !env.mem.preferred.is_empty() {
                // A placement plan may prefer different nodes within the chunk.
                chunk_end = chunk_end.min(env.mem.preferred_run(va).1.max(va + PAGE_SIZE));
            }
            let pages = tierlab_core::pages_for(chunk_end - va);
            let node = env.mem.allocate_at(core, va, pages).ok_or_else(|| {
                SimError::runtime(format!(
                    "out of memory while populating `{}`: {} of {} bytes placed, every node is full",
                    vma.name,
                    va - start,
                    len
                ))
            })?;
            match vma.page_size {
                PageSize::Huge2M => {
                    self.pt.map_2m(va, node);
                }
                _ => {
                    self.pt.populate_4k(va, chunk_end, node);
                }
            }
            va = chunk_end;
        }
        Ok(())
    }

    fn populate_on(&mut self, env: &mut Env, vma: &Vma, start: u64, len: u64, node: u8) -> Result<()> {
        let Some(n) = env.mem.nodes.get(node as usize) else {
            return Err(SimError::runtime(format!(
                "populate `{}` on node {node}: the machine has {} nodes",
                vma.name,
                env.mem.nodes.len()
            )));
        };
        let len = len.min(vma.len);
        if vma.page_size == PageSize::Huge1G {
            // Whole 1 GiB pages covering the range.
            let first = PageSize::Huge1G.base(start);
            let missing: Vec<u64> = (first..start + len)
                .step_by(HUGE_1G_SIZE as usize)
                .filter(|&va| !self.pt.is_giant(va))
                .collect();
            let pages = missing.len() as u64 * PageSize::Huge1G.base_pages();
            if !env.mem.has_room(node, pages) {
                return Err(SimError::runtime(format!(
                    "out of memory while populating `{}` ({} 1 GiB pages) on node {node} (`{}`): {} bytes free",
                    vma.name,
                    missing.len(),
                    n.cfg.name,
                    tierlab_core::bytes_of(n.capacity_pages - n.used_pages)
                )));
            }
            let n = &mut env.mem.nodes[node as usize];
            n.used_pages += pages;
            n.allocated_pages += pages;
            for va in missing {
                self.pt.map_1g(va, node);
            }
            return Ok(());
        }
        if !env.mem.has_room(node, tierlab_core::pages_for(len)) {
            return Err(SimError::runtime(format!(
                "out of memory while populating `{}` ({len} bytes) on node {node} (`{}`): {} bytes free",
                vma.name,
                n.cfg.name,
                tierlab_core::bytes_of(n.capacity_pages - n.used_pages)
            )));
        }
        let end = start + len;
        let mut va = start;
        while va < end {
            let chunk_end = (PageSize::Huge2M.base(va) + HUGE_SIZE).min(end);
            let pages = tierlab_core::pages_for(chunk_end - va);
            let n = &mut env.mem.nodes[node as usize];
            n.used_pages += pages;
            n.allocated_pages += pages;
            match vma.page_size {
                PageSize::Huge2M => {
                    self.pt.map_2m(va, node);
                }
                _ => {
                    self.pt.populate_4k(va, chunk_end, node);
                }
            }
            va = chunk_end;
        }
        Ok(())
    }

    fn node_of(&self, va: u64) -> Option<u8> {
        self.pt.node_of(va)
    }

    fn page_size_of(&self, va: u64) -> Option<PageSize> {
        self.pt.page_size_of(va)
    }

    fn migrate(&mut self, env: &mut Env, vas: &[u64], to: u8, core: usize) -> Result<Migrated> {
        let mut out = Migrated::default();
        let mut entries: Vec<u64> = Vec::with_capacity(vas.len().min(1 << 10));
        let mut copy_ps = 0u64;
        for &va in vas {
            let from = self
                .pt
                .node_of(va)
                .ok_or_else(|| SimError::runtime(format!("migrate_page: {va:#x} is not present")))?;
            if from == to {
                continue;
            }
            let size = self.pt.page_size_of(va).unwrap_or(PageSize::Base4K);
            let bytes = size.bytes();
            if !env.mem.transfer(from, to, size.base_pages()) {
                out.out_of_room = true;
                break;
            }
            let base = size.base(va);
            self.pt.set_node(base, to)?;
            let (nf, nt) = (&env.mem.nodes[from as usize].cfg, &env.mem.nodes[to as usize].cfg);
            // GB/s = bytes per ns.
            copy_ps += ps(bytes as f64 / nf.bandwidth_gbps.min(nt.bandwidth_gbps));
            let mc = &mut *env.migration;
            mc.moves += 1;
            mc.huge_moves += (size >= PageSize::Huge2M) as u64;
            mc.bytes += bytes;
            mc.promotions += (nt.tier < nf.tier) as u64;
            mc.demotions += (nt.tier > nf.tier) as u64;
            mc.count_copy(from, to, bytes);
            entries.push(base);
            out.pages += 1;
            out.bytes += bytes;
        }
        if entries.is_empty() {
            return Ok(out);
        }
        let before = env.hw.cores[core].clock_ps;
        env.hw.charge(core, copy_ps);
        env.migration.copy_ps += copy_ps;
        env.migration.shootdowns += 1;
        let mm = env.mm_cpumask;
        let copied = env.hw.cores[core].clock_ps;
        shootdown(env.hw, Inval::Pages(&entries), Initiator::Core { core, local: true }, |i| mm[i]);
        out.ns = (env.hw.cores[core].clock_ps - before) as f64 / 1000.0;
        out.shootdown_ns = (env.hw.cores[core].clock_ps - copied) as f64 / 1000.0;
        Ok(out)
    }

    fn page_tables(&mut self) -> Option<&mut PageTables> {
        Some(&mut self.pt)
    }

    fn page_tables_ref(&self) -> Option<&PageTables> {
        Some(&self.pt)
    }

    fn report_stats(&self, _hw: &Hardware, _mm: &[bool], out: &mut Stats) {
        out.set("machine.pagetable.present_4k", self.pt.present_4k());
        out.set("machine.pagetable.present_2m", self.pt.present_2m());
        let (u, p) = self.pt.tables();
        out.set("machine.pagetable.upper_tables", u);
        out.set("machine.pagetable.pte_tables", p);
        out.set("machine.pagetable.materialized", self.pt.stats.materialized);
    }
}

/// Selected by a machine without `[machine.hmem]`.
impl super::BackendKind for Flat {
    fn for_config(cfg: &crate::os::MachineConfig, _hw: &mut crate::hw::Hardware) -> Option<Self> {
        cfg.hmem.is_none().then(|| Flat::new(&cfg.cost, cfg.dirty_upper_levels))
    }
}
