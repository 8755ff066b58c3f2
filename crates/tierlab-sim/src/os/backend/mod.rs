//! Memory backends: how the OS keeps a process's pages and translates its addresses.
//!
//! # Contract ([`MemoryBackend`])
//! A backend owns the page tables (their format, their Accessed/Dirty bits) and decides where
//! a page lives. The OS layer ([`super::Os`]) calls it:
//! - on every TLB miss ([`MemoryBackend::translate`]): walk, set the bits the hardware walker
//!   sets, take a page fault when the page is not present (allocate it, charge the fault to
//!   the core), return the translation the TLB caches;
//! - on a store through a clean cached translation ([`MemoryBackend::set_dirty`]);
//! - when mappings appear and disappear ([`MemoryBackend::map`], [`MemoryBackend::unmap`]),
//!   are bulk-populated ([`MemoryBackend::populate`], [`MemoryBackend::populate_on`]);
//! - when a policy moves pages ([`MemoryBackend::migrate`]): every backend supports
//!   placement and tiering, each with its own meaning of "move to a node";
//! - for periodic OS work of its own (a replacement policy's scanner:
//!   [`MemoryBackend::next_event_ps`], [`MemoryBackend::tick`], driven by an agent);
//! - for the page-table view telemetry needs ([`MemoryBackend::page_tables`]).
//!
//! Translations, TLB invalidations and costs go through the hardware ([`crate::hw`]);
//! shootdowns through [`super::shootdown`], the one implementation.
//!
//! # Registry
//! One file per backend, implementing [`MemoryBackend`] and [`BackendKind`] (which machine
//! configurations select it, how it is built from one), and one line in [`backends!`] below.
//! The machine is built with [`Backend::for_config`]: the registered backend its
//! configuration selects. `[machine.hmem]` in a scenario selects the hierarchical backend;
//! without it the flat one runs.

use std::collections::BTreeMap;

use crate::error::Result;
use crate::hw::pagetable::PageTables;
use crate::hw::{Core, Fill, Hardware, Translated};
use crate::stats::Stats;
use tierlab_core::PageSize;

use super::memory::Memory;
use super::replacement::PolicyConfig;
use super::{MachineConfig, Migrated, MigrationCounters, Vma};

pub mod flat;
pub mod hier;

/// [`MemoryBackend::walk_present`]: no walk was done.
pub const NOT_WALKED: u64 = u64::MAX;

/// What a backend may use of the rest of the machine.
pub struct Env<'a> {
    /// The hardware (cores, TLBs, clocks).
    pub hw: &'a mut Hardware,
    /// Memory nodes (capacity accounting, the placement rule).
    pub mem: &'a mut Memory,
    /// The mappings.
    pub vmas: &'a BTreeMap<u64, Vma>,
    /// Cores in the address space's CPU mask.
    pub mm_cpumask: &'a [bool],
    /// Accesses outside every mapping so far.
    pub segfaults: &'a mut u64,
    /// Page-migration counters.
    pub migration: &'a mut MigrationCounters,
}

/// A memory backend. See the module docs for the contract.
pub trait MemoryBackend: Send {
    /// Registered name.
    fn name(&self) -> &'static str;
    /// A TLB miss of `core` at `addr` (see the module docs).
    fn translate(&mut self, env: &mut Env, core: usize, addr: u64, write: bool) -> Translated;
    /// The fast part of [`MemoryBackend::translate`] that needs only the core `c` (a
    /// page-table level read costs `level_ps`): the first walk when the backend
    /// has one. `Ok`: the translation; `Err(walk_ps)`: the walk (of `walk_ps`) found the page
    /// not present, [`MemoryBackend::translate_after`] completes it; `Err(NOT_WALKED)`:
    /// nothing done (the default).
    #[inline]
    fn walk_present(&mut self, _c: &mut Core, _level_ps: u64, _addr: u64, _write: bool) -> Result<Fill, u64> {
        Err(NOT_WALKED)
    }
    /// Complete a translation [`MemoryBackend::walk_present`] did not (see there); the
    /// default translates from the start.
    fn translate_after(
        &mut self,
        env: &mut Env,
        core: usize,
        addr: u64,
        write: bool,
        _spent: u64,
    ) -> Translated {
        self.translate(env, core, addr, write)
    }
    /// A store through the clean cached translation of `addr`.
    fn set_dirty(&mut self, core: usize, addr: u64, size: PageSize);
    /// A TLB hit (only when the backend asked the hardware to report hits).
    fn on_hit(&mut self, _core: usize, _addr: u64) {}
    /// A new mapping.
    fn map(&mut self, _env: &mut Env, _vma: &Vma) {}
    /// A mapping went away: free its pages and invalidate its translations.
    fn unmap(&mut self, env: &mut Env, vma: &Vma);
    /// Bulk-populate `[start, start+len)` of `vma` as if touched by `core` (no fault cost).
    fn populate(&mut self, env: &mut Env, vma: &Vma, start: u64, len: u64, core: usize) -> Result<()>;
    /// Bulk-populate `[start, start+len)` of `vma` on node `node` (no fault cost).
    fn populate_on(&mut self, env: &mut Env, vma: &Vma, start: u64, len: u64, node: u8) -> Result<()>;
    /// The node holding the page of `va` (None: not present).
    fn node_of(&self, va: u64) -> Option<u8>;
    /// The size of the present page holding `va`.
    fn page_size_of(&self, va: u64) -> Option<PageSize>;
    /// Move the pages holding `vas` to node `to` as one batch from `core` (see
    /// [`super::Machine::migrate_pages`]).
    fn migrate(&mut self, env: &mut Env, vas: &[u64], to: u8, core: usize) -> Result<Migrated>;
    /// The radix page tables with Accessed/Dirty bits at every level, where the backend has
    /// them (telemetry that reads page-table bits needs them).
    fn page_tables(&mut self) -> Option<&mut PageTables> {
        None
    }
    /// Read-only [`MemoryBackend::page_tables`].
    fn page_tables_ref(&self) -> Option<&PageTables> {
        None
    }
    /// Called once after the workload mapped its memory (build the replacement policy, size
    /// the fast memory).
    fn start(
        &mut self,
        _env: &mut Env,
        _policies: &[PolicyConfig],
        _scenario_file: &str,
        _seed: u64,
    ) -> Result<()> {
        Ok(())
    }
    /// Time of the backend's next periodic work, ps (`u64::MAX`: none).
    fn next_event_ps(&self) -> u64 {
        u64::MAX
    }
    /// Run the periodic work due at `now_ps`; returns the time of the next one.
    fn tick(&mut self, _env: &mut Env, _now_ps: u64) {}
    /// Publish the backend's stats.
    fn report_stats(&self, _hw: &Hardware, _mm_cpumask: &[bool], _out: &mut Stats) {}
}

/// How the registry chooses and builds a backend ([`Backend::for_config`]).
pub trait BackendKind: MemoryBackend + Sized {
    /// The backend for the machine configuration `cfg` when `cfg` selects it, else `None`
    /// (every valid configuration selects exactly one registered backend). `hw`, the
    /// machine's hardware, is built already; the backend may configure it.
    fn for_config(cfg: &MachineConfig, hw: &mut Hardware) -> Option<Self>;
}

macro_rules! backends {
    ($( $name:literal => $variant:ident ( $ty:ty ) ),* $(,)?) => {
        /// The machine's memory backend (static dispatch over the registered backends).
        pub enum Backend {
            $( #[allow(missing_docs)] $variant(Box<$ty>), )*
        }
        impl Backend {
            /// The registered backend `cfg` selects ([`BackendKind::for_config`]).
            pub fn for_config(cfg: &MachineConfig, hw: &mut Hardware) -> Backend {
                $(
                    if let Some(b) = <$ty as BackendKind>::for_config(cfg, hw) {
                        return Self::$variant(Box::new(b));
                    }
                )*
                unreachable!("no registered memory backend is selected by this machine configuration")
            }
        }
        impl MemoryBackend for Backend {
            fn name(&self) -> &'static str { match self { $( Self::$variant(_) => $name, )* } }
            #[inline]
            fn translate(&mut self, env: &mut Env, core: usize, addr: u64, write: bool) -> Translated {
                match self { $( Self::$variant(b) => b.translate(env, core, addr, write), )* }
            }
            #[inline]
            fn walk_present(&mut self, c: &mut Core, level_ps: u64, addr: u64, write: bool) -> Result<Fill, u64> {
                match self { $( Self::$variant(b) => b.walk_present(c, level_ps, addr, write), )* }
            }
            fn translate_after(&mut self, env: &mut Env, core: usize, addr: u64, write: bool, spent: u64) -> Translated {
                match self { $( Self::$variant(b) => b.translate_after(env, core, addr, write, spent), )* }
            }
            #[inline]
            fn set_dirty(&mut self, core: usize, addr: u64, size: PageSize) {
                match self { $( Self::$variant(b) => b.set_dirty(core, addr, size), )* }
            }
            fn on_hit(&mut self, core: usize, addr: u64) {
                match self { $( Self::$variant(b) => b.on_hit(core, addr), )* }
            }
            fn map(&mut self, env: &mut Env, vma: &Vma) {
                match self { $( Self::$variant(b) => b.map(env, vma), )* }
            }
            fn unmap(&mut self, env: &mut Env, vma: &Vma) {
                match self { $( Self::$variant(b) => b.unmap(env, vma), )* }
            }
            fn populate(&mut self, env: &mut Env, vma: &Vma, start: u64, len: u64, core: usize) -> Result<()> {
                match self { $( Self::$variant(b) => b.populate(env, vma, start, len, core), )* }
            }
            fn populate_on(&mut self, env: &mut Env, vma: &Vma, start: u64, len: u64, node: u8) -> Result<()> {
                match self { $( Self::$variant(b) => b.populate_on(env, vma, start, len, node), )* }
            }
            fn node_of(&self, va: u64) -> Option<u8> {
                match self { $( Self::$variant(b) => b.node_of(va), )* }
            }
            fn page_size_of(&self, va: u64) -> Option<PageSize> {
                match self { $( Self::$variant(b) => b.page_size_of(va), )* }
            }
            fn migrate(&mut self, env: &mut Env, vas: &[u64], to: u8, core: usize) -> Result<Migrated> {
                match self { $( Self::$variant(b) => b.migrate(env, vas, to, core), )* }
            }
            fn page_tables(&mut self) -> Option<&mut PageTables> {
                match self { $( Self::$variant(b) => b.page_tables(), )* }
            }
            fn page_tables_ref(&self) -> Option<&PageTables> {
                match self { $( Self::$variant(b) => b.page_tables_ref(), )* }
            }
            fn start(&mut self, env: &mut Env, policies: &[PolicyConfig], file: &str, seed: u64) -> Result<()> {
                match self { $( Self::$variant(b) => b.start(env, policies, file, seed), )* }
            }
            fn next_event_ps(&self) -> u64 {
                match self { $( Self::$variant(b) => b.next_event_ps(), )* }
            }
            fn tick(&mut self, env: &mut Env, now_ps: u64) {
                match self { $( Self::$variant(b) => b.tick(env, now_ps), )* }
            }
            fn report_stats(&self, hw: &Hardware, mm: &[bool], out: &mut Stats) {
                match self { $( Self::$variant(b) => b.report_stats(hw, mm, out), )* }
            }
        }
    };
}

backends! {
    "flat" => Flat(flat::Flat),
    "hierarchical" => Hier(hier::Hier),
}
