//! Page-replacement policies of the hierarchical memory mode (see [`super::hmem`]).
//!
//! # Contract
//! A policy decides which resident page of the fast memory leaves when a fault needs a
//! frame. It sees pages as dense [`PageId`]s (one per page of the computation area, at the
//! mode's page size) and is told about:
//! - [`Replacement::on_fault_in`]: a page became resident (a fault brought it in); it must
//!   be tracked from now on;
//! - [`Replacement::on_map`]: with per-core page tables, one more core installed a PTE for a
//!   resident page (its core-map count, [`Frames::mapcount`], grew);
//! - [`Replacement::on_access`]: every access the machine sees to a resident page, only when
//!   [`Replacement::wants_accesses`] says so (exact LRU; real hardware offers no such thing);
//! - [`Replacement::evict`]: memory is full: choose a resident victim, stop tracking it and
//!   return it (the machine unmaps it, invalidates TLBs and writes it back if dirty);
//! - [`Replacement::remove`]: a resident page was unmapped by the program (munmap);
//! - [`Replacement::tick`]: periodic work every [`Replacement::period`] of simulated time
//!   (zero = none), run on a dedicated core (the Linux-like LRU's Accessed-bit scanner).
//!
//! A policy learns about references only through [`Frames::test_and_clear_young`]: the
//! Accessed bits of the PTEs mapping a page. Clearing a set bit costs a TLB invalidation on
//! every core whose PTE had it (charged by the machine to whoever runs the policy code: the
//! faulting core in `evict`, the scanner core in `tick`). Policies are deterministic.
//!
//! # Registry
//! One file per policy, one line in [`registry!`] below: kind name, enum variant, parameter
//! type (deserialized with unknown fields rejected). A scenario names its policy as
//! `[[policies]]` with `kind = "fifo" | "lru" | "lru-exact" | "clock" | "cmcp"`.

use crate::error::{Result, SimError};
use crate::stats::Stats;
use crate::units::Ps;

pub mod clock;
pub mod cmcp;
pub mod external;
pub mod fifo;
pub mod lru;
pub mod lru_exact;

/// Dense index of a page of the computation area (at the replacement granularity).
pub type PageId = u32;

/// "No page".
pub const NIL: u32 = u32::MAX;

/// What a policy may ask of the memory system it runs in.
pub trait Frames {
    /// Test and clear the Accessed bits of every PTE that maps `page`; returns how many were
    /// set (with per-core page tables one per core, with shared page tables at most 1). The
    /// memory system invalidates the cleared translations on the cores that may cache them
    /// and charges the cost (PTE reads, IPIs) to the core running the policy.
    fn test_and_clear_young(&mut self, page: PageId) -> u32;
    /// Number of cores mapping `page` (the PSPT core map); 0 when the memory system cannot
    /// know (shared page tables).
    fn mapcount(&self, page: PageId) -> u32;
    /// Frames of fast memory (its capacity in pages).
    fn capacity(&self) -> u64;
}

/// A page-replacement policy. See the module docs for the contract.
pub trait Replacement: Send {
    /// `page` became resident.
    fn on_fault_in(&mut self, page: PageId, f: &mut dyn Frames);
    /// One more core mapped resident `page` (per-core page tables only).
    fn on_map(&mut self, _page: PageId, _f: &mut dyn Frames) {}
    /// Whether [`Replacement::on_access`] must be called on every access.
    fn wants_accesses(&self) -> bool {
        false
    }
    /// An access to resident `page`.
    fn on_access(&mut self, _page: PageId) {}
    /// Choose a victim among the resident pages, forget it and return it.
    fn evict(&mut self, f: &mut dyn Frames) -> PageId;
    /// Forget resident `page` (unmapped by the program).
    fn remove(&mut self, page: PageId);
    /// Period of [`Replacement::tick`] ([`Ps::ZERO`]: no periodic work).
    fn period(&self) -> Ps {
        Ps::ZERO
    }
    /// Periodic work at simulated time `now`.
    fn tick(&mut self, _now: Ps, _f: &mut dyn Frames) {}
    /// Publish the policy's own counters under `prefix`.
    fn report_stats(&self, _prefix: &str, _out: &mut Stats) {}
    /// An error the policy met in a callback since the last call (a policy written outside
    /// the engine: an exception, a victim that is not resident): the memory system stops the
    /// run with it after the callback. Built-in policies have none.
    fn error(&mut self) -> Option<SimError> {
        None
    }
}

/// What every policy gets at build time.
#[derive(Clone, Debug, Default)]
pub struct PolicyBuildCtx {
    /// Frames of fast memory.
    pub frames: u64,
    /// Bytes of fast memory.
    pub capacity_bytes: u64,
    /// Pages of the computation area (page ids are below this; more may be added later).
    pub pages: u64,
    /// Per-core page tables (the core map is known).
    pub per_core_page_tables: bool,
    /// Scenario file, for error messages.
    pub scenario_file: String,
    /// Index of the policy in `policies`.
    pub index: usize,
    /// The scenario's seed: a policy that draws random numbers draws them from
    /// `Rng::derived(seed, "policies.<kind>", index)`.
    pub seed: u64,
}

impl PolicyBuildCtx {
    /// A located configuration error on field `field` of this policy.
    pub fn error(&self, field: &str, msg: impl Into<String>) -> SimError {
        SimError::config(&self.scenario_file, format!("policies[{}].{field}", self.index), msg)
    }
}

/// Parameters of one policy kind.
pub trait PolicyParams {
    /// Build the policy (validating parameters: errors name the field).
    fn build(&self, ctx: &PolicyBuildCtx) -> Result<Box<dyn Replacement>>;
    /// Check the parameters without building (scenario validation): (field, problem).
    fn check(&self) -> std::result::Result<(), (String, String)> {
        Ok(())
    }
}

crate::registry! {
    /// A policy's configuration (`[[policies]]`): `kind` picks the implementation, the other
    /// keys are its parameters.
    pub enum PolicyConfig: PolicyParams {
    "fifo" => Fifo(fifo::FifoParams),
    "lru-exact" => LruExact(lru_exact::LruExactParams),
    "clock" => Clock(clock::ClockParams),
    "lru" => Lru(lru::LruParams),
    "cmcp" => Cmcp(cmcp::CmcpParams),
    "python" => Python(crate::params::External<crate::params::Unshared>),
    }
}

impl PolicyConfig {
    /// Build the policy.
    pub fn build(&self, ctx: &PolicyBuildCtx) -> Result<Box<dyn Replacement>> {
        self.params().build(ctx)
    }
    /// Check the parameters: (field below `policies[i]`, problem).
    pub fn check(&self) -> std::result::Result<(), (String, String)> {
        self.params().check()
    }
}

impl PolicyConfig {
    /// Parse a policy from TOML text (`kind = "cmcp"\np = 0.5`).
    pub fn from_toml(text: &str) -> std::result::Result<PolicyConfig, String> {
        toml::from_str(text).map_err(|e| e.message().to_string())
    }
}

// -- intrusive doubly linked lists over page ids -------------------------------------------------

/// `prev`/`next` links of every page, shared by the lists of one policy (a page is on at
/// most one list at a time).
#[derive(Clone, Debug, Default)]
pub struct Links {
    prev: Vec<u32>,
    next: Vec<u32>,
}

impl Links {
    /// Links for `n` pages (grows on demand).
    pub fn with_pages(n: usize) -> Self {
        Links { prev: vec![NIL; n], next: vec![NIL; n] }
    }
    /// Make room for page `p`.
    #[inline]
    pub fn ensure(&mut self, p: PageId) {
        let need = p as usize + 1;
        if self.prev.len() < need {
            let n = need.max(self.prev.len() * 2);
            self.prev.resize(n, NIL);
            self.next.resize(n, NIL);
        }
    }
}

/// A list of pages; front = oldest, back = newest.
#[derive(Clone, Copy, Debug)]
pub struct DList {
    head: u32,
    tail: u32,
    len: usize,
}

impl Default for DList {
    fn default() -> Self {
        DList { head: NIL, tail: NIL, len: 0 }
    }
}

impl DList {
    /// Pages on the list.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The oldest page.
    #[inline]
    pub fn front(&self) -> Option<PageId> {
        (self.head != NIL).then_some(self.head)
    }
    /// Append `p` as the newest page (it must not be on any list).
    #[inline]
    pub fn push_back(&mut self, l: &mut Links, p: PageId) {
        l.ensure(p);
        l.prev[p as usize] = self.tail;
        l.next[p as usize] = NIL;
        if self.tail != NIL {
            l.next[self.tail as usize] = p;
        } else {
            self.head = p;
        }
        self.tail = p;
        self.len += 1;
    }
    /// Prepend `p` as the oldest page (it must not be on any list).
    #[inline]
    pub fn push_front(&mut self, l: &mut Links, p: PageId) {
        l.ensure(p);
        l.next[p as usize] = self.head;
        l.prev[p as usize] = NIL;
        if self.head != NIL {
            l.prev[self.head as usize] = p;
        } else {
            self.tail = p;
        }
        self.head = p;
        self.len += 1;
    }
    /// Remove and return the oldest page.
    #[inline]
    pub fn pop_front(&mut self, l: &mut Links) -> Option<PageId> {
        let p = self.front()?;
        self.remove(l, p);
        Some(p)
    }
    /// Unlink `p` (it must be on this list).
    #[inline]
    pub fn remove(&mut self, l: &mut Links, p: PageId) {
        let (pr, nx) = (l.prev[p as usize], l.next[p as usize]);
        if pr != NIL {
            l.next[pr as usize] = nx;
        } else {
            self.head = nx;
        }
        if nx != NIL {
            l.prev[nx as usize] = pr;
        } else {
            self.tail = pr;
        }
        l.prev[p as usize] = NIL;
        l.next[p as usize] = NIL;
        self.len -= 1;
    }
    /// Move `p` (on this list) to the back.
    #[inline]
    pub fn move_to_back(&mut self, l: &mut Links, p: PageId) {
        if self.tail != p {
            self.remove(l, p);
            self.push_back(l, p);
        }
    }
    /// The pages from oldest to newest (for tests and reports).
    pub fn to_vec(&self, l: &Links) -> Vec<PageId> {
        let mut v = Vec::with_capacity(self.len);
        let mut p = self.head;
        while p != NIL {
            v.push(p);
            p = l.next[p as usize];
        }
        v
    }
}

/// A per-page byte vector that grows on demand (policy-private page state).
#[derive(Clone, Debug, Default)]
pub struct PageVec<T: Copy + Default> {
    v: Vec<T>,
}

impl<T: Copy + Default> PageVec<T> {
    /// For `n` pages.
    pub fn with_pages(n: usize) -> Self {
        PageVec { v: vec![T::default(); n] }
    }
    /// The value of page `p` (default when never set).
    #[inline]
    pub fn get(&self, p: PageId) -> T {
        self.v.get(p as usize).copied().unwrap_or_default()
    }
    /// Set page `p`'s value.
    #[inline]
    pub fn set(&mut self, p: PageId, x: T) {
        let i = p as usize;
        if i >= self.v.len() {
            let n = (i + 1).max(self.v.len() * 2);
            self.v.resize(n, T::default());
        }
        self.v[i] = x;
    }
}

// -- trace replay (no machine: every access is seen, as with TLB effects off) -------------------

/// A bare memory system for replaying a page trace through a policy: a resident bitmap and
/// one Accessed bit per page, set by every access (no TLB hides any), no costs.
pub struct TraceFrames {
    capacity: u64,
    resident: Vec<u64>,
    young: Vec<u64>,
    /// Resident pages.
    pub used: u64,
    /// Accessed bits tested (and cleared) by the policy.
    pub tests: u64,
}

impl TraceFrames {
    /// For pages `0..pages` and `capacity` frames.
    pub fn new(pages: usize, capacity: u64) -> Self {
        let w = pages.div_ceil(64);
        TraceFrames { capacity, resident: vec![0; w], young: vec![0; w], used: 0, tests: 0 }
    }
    /// Whether `p` is resident.
    #[inline]
    pub fn is_resident(&self, p: PageId) -> bool {
        self.resident[(p >> 6) as usize] >> (p & 63) & 1 != 0
    }
    #[inline]
    fn set_resident(&mut self, p: PageId, on: bool) {
        let w = &mut self.resident[(p >> 6) as usize];
        if on {
            *w |= 1 << (p & 63);
        } else {
            *w &= !(1 << (p & 63));
        }
    }
    /// Set `p`'s Accessed bit (an access).
    #[inline]
    pub fn touch(&mut self, p: PageId) {
        self.young[(p >> 6) as usize] |= 1 << (p & 63);
    }
}

impl Frames for TraceFrames {
    #[inline]
    fn test_and_clear_young(&mut self, p: PageId) -> u32 {
        self.tests += 1;
        let w = &mut self.young[(p >> 6) as usize];
        let was = (*w >> (p & 63)) & 1;
        *w &= !(1 << (p & 63));
        was as u32
    }
    fn mapcount(&self, p: PageId) -> u32 {
        self.is_resident(p) as u32
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
}

/// Outcome of a trace replay.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceOutcome {
    /// Requests replayed.
    pub requests: u64,
    /// Misses (page faults).
    pub misses: u64,
    /// Evictions.
    pub evictions: u64,
    /// The victims in eviction order (only when asked for).
    pub victims: Vec<PageId>,
}

/// Replay a trace of dense page ids (all `< pages`) through `policy` with `capacity` frames:
/// each request is one access that sets the page's Accessed bit; a miss evicts when full,
/// then the page is faulted in and its Accessed bit set by the faulting access (as the
/// hardware's re-walk after a fault does). Periodic work is not run.
pub fn replay_ids<P: Replacement + ?Sized>(
    policy: &mut P,
    trace: &[PageId],
    pages: usize,
    capacity: u64,
    keep_victims: bool,
) -> TraceOutcome {
    let mut f = TraceFrames::new(pages, capacity);
    let mut out = TraceOutcome { requests: trace.len() as u64, ..Default::default() };
    let every = policy.wants_accesses();
    for &p in trace {
        if f.is_resident(p) {
            f.touch(p);
            if every {
                policy.on_access(p);
            }
            continue;
        }
        out.misses += 1;
        if f.used >= capacity {
            let v = policy.evict(&mut f);
            debug_assert!(f.is_resident(v), "policy evicted non-resident page {v}");
            f.set_resident(v, false);
            f.used -= 1;
            out.evictions += 1;
            if keep_victims {
                out.victims.push(v);
            }
        }
        f.set_resident(p, true);
        f.used += 1;
        policy.on_fault_in(p, &mut f);
        f.touch(p);
        if every {
            policy.on_access(p);
        }
    }
    out
}

/// Map arbitrary 64-bit page numbers to dense ids `0..n` (first-seen order); returns the ids
/// and `n`. A trace whose numbers span a small range is mapped by offset (no hashing).
pub fn compact_ids(trace: &[u64]) -> (Vec<PageId>, usize) {
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    for &x in trace {
        lo = lo.min(x);
        hi = hi.max(x);
    }
    if trace.is_empty() {
        return (Vec::new(), 0);
    }
    let span = hi - lo + 1;
    if span <= (trace.len() as u64).max(1 << 20) * 4 && span < u32::MAX as u64 {
        return (trace.iter().map(|&x| (x - lo) as u32).collect(), span as usize);
    }
    let mut map: std::collections::HashMap<u64, u32> = std::collections::HashMap::with_capacity(1 << 16);
    let ids = trace
        .iter()
        .map(|&x| {
            let n = map.len() as u32;
            *map.entry(x).or_insert(n)
        })
        .collect();
    let n = map.len();
    (ids, n)
}

/// Build policy `kind` with default parameters for a trace replay of `pages` pages and
/// `capacity` frames (random choices, if the policy makes any, from the default scenario
/// seed, 1).
pub fn build_default(kind: &str, pages: u64, capacity: u64) -> Result<Box<dyn Replacement>> {
    let cfg: PolicyConfig = PolicyConfig::from_toml(&format!("kind = \"{kind}\"")).map_err(|m| {
        SimError::config("<trace>", "policy", format!("{m} (policies: {})", PolicyConfig::kinds().join(", ")))
    })?;
    cfg.build(&PolicyBuildCtx {
        frames: capacity,
        capacity_bytes: tierlab_core::bytes_of(capacity),
        pages,
        per_core_page_tables: true,
        scenario_file: "<trace>".into(),
        index: 0,
        seed: 1,
    })
}

/// Replay a trace of 64-bit page numbers through policy `kind` (default parameters) with
/// `capacity` frames: the misses. The whole replay (including the id compaction) is what
/// `tierlab bench policies` times.
pub fn replay_trace(kind: &str, trace: &[u64], capacity: u64) -> Result<TraceOutcome> {
    if capacity == 0 {
        return Err(SimError::config("<trace>", "capacity", "must be at least 1 page"));
    }
    let (ids, n) = compact_ids(trace);
    // The reference policies with their parameterless defaults run monomorphized.
    Ok(match kind {
        "fifo" => replay_ids(&mut fifo::Fifo::new(n), &ids, n, capacity, false),
        "lru-exact" => replay_ids(&mut lru_exact::LruExact::new(n), &ids, n, capacity, false),
        "clock" => replay_ids(&mut clock::Clock::new(n, capacity as usize), &ids, n, capacity, false),
        _ => {
            let mut p = build_default(kind, n as u64, capacity)?;
            replay_ids(p.as_mut(), &ids, n, capacity, false)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dlist_operations() {
        let mut l = Links::default();
        let mut d = DList::default();
        for p in [3, 1, 4] {
            d.push_back(&mut l, p);
        }
        d.push_front(&mut l, 9);
        assert_eq!(d.to_vec(&l), vec![9, 3, 1, 4]);
        d.move_to_back(&mut l, 3);
        assert_eq!(d.to_vec(&l), vec![9, 1, 4, 3]);
        d.remove(&mut l, 4);
        assert_eq!(d.pop_front(&mut l), Some(9));
        assert_eq!(d.to_vec(&l), vec![1, 3]);
        assert_eq!(d.len(), 2);
    }

    #[test]
    fn compaction_by_offset_and_by_hash() {
        let (ids, n) = compact_ids(&[100, 101, 100, 105]);
        assert_eq!((ids, n), (vec![0, 1, 0, 5], 6));
        let (ids, n) = compact_ids(&[1 << 40, 7, 1 << 40, 9]);
        assert_eq!((ids, n), (vec![0, 1, 0, 2], 3));
    }

    #[test]
    fn unknown_kind_is_an_error() {
        let e = replay_trace("nope", &[1, 2], 1).unwrap_err().to_string();
        assert!(e.contains("nope"), "{e}");
    }
}
