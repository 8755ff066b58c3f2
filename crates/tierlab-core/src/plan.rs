//! Page placement decisions from per-page evidence: the rules of `tierlab place plan` (through
//! the binding) and of the simulator's `profile-guided` placement, in one place. (The
//! simulator still computes the affinity rule in its own `affinities()`, checked equal to
//! [`affinity`] by a test here, until it calls this module.)
//!
//! **Evidence** is what was observed of a page: per node, the samples (or the summed latency
//! weight of the samples) taken by that node's CPUs, and a total over every sample of the page
//! (which also counts samples whose CPU is on no known node). Nodes are **columns** `0..n`:
//! column `i` of a page's counts is node `i` for the simulator; a caller whose node numbers are
//! not `0..n` (the Python plan, whose nodes come from a CPU map) keeps its nodes sorted so
//! that a lower column is a lower node number, and maps columns back.
//!
//! Two rules turn evidence into [`Target`]s (page address, page bytes, node):
//!
//! - [`affinity`] (profile-guided ccNUMA placement, Marathe and Mueller): each page goes to the
//!   node with the most evidence among the allowed nodes, ties to the lowest node; a page with
//!   less than `min_samples` evidence from the allowed nodes is left out, and so is a page
//!   with none.
//! - [`hot_fast`] (tiering): pages ranked by total evidence, most first (ties: lower address
//!   first); the hottest go to the fast node until the next one would exceed the fast
//!   capacity in bytes (the ranking is cut there: a colder page never goes fast while a hotter
//!   one does not); the rest go to the slow node if there is one, else are left out. Pages
//!   below `min_samples` are never promoted.
//!
//! Both take plain iterators, return their targets in address order, and count what they left
//! out and why. [`Evidence`] accumulates samples into per-page evidence (the aggregation step,
//! with the semantics of both callers: a sample adds its weight to its page's node column and
//! total): [`Evidence::add`] for one sample (the simulator's way: its page size comes from the
//! sample's mapping), [`aggregate`] for many samples with a CPU -> node map (`place plan`).
//!
//! ```
//! use tierlab_core::plan::{affinity, hot_fast, AffinityRule, HotFastRule, Target};
//! // (page address, page bytes, samples per node)
//! let pages: [(u64, u64, &[u32]); 3] = [(0x1000, 4096, &[3, 1]), (0x2000, 4096, &[1, 1]), (0x3000, 4096, &[0, 2])];
//! let plan = affinity(pages, &AffinityRule::default());
//! assert_eq!(plan.targets[1], Target { addr: 0x2000, bytes: 4096, node: 0 }); // a tie: node 0
//! // (page address, page bytes, total evidence)
//! let hot = hot_fast([(0x1000, 4096, 4), (0x2000, 4096, 2), (0x3000, 4096, 2)],
//!                    &HotFastRule { fast_node: 1, fast_capacity: 8192, slow_node: Some(0), min_samples: 1 });
//! assert_eq!(hot.targets.iter().map(|t| t.node).collect::<Vec<_>>(), [1, 1, 0]);
//! ```

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use crate::page::page_base;

/// Where one page should live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    /// First byte of the page.
    pub addr: u64,
    /// Bytes in the page.
    pub bytes: u64,
    /// Target node: the evidence column for [`affinity`], the rule's fast or slow node for
    /// [`hot_fast`].
    pub node: u32,
}

/// Parameters of [`affinity`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AffinityRule {
    /// Nodes (columns) a page may go to; `None`: every column. Columns a page has no count for
    /// hold no evidence.
    pub allowed: Option<Vec<u32>>,
    /// Evidence from the allowed nodes a page needs to be placed (the simulator and `place
    /// plan` require at least 1).
    pub min_samples: u64,
}

impl Default for AffinityRule {
    /// Every node allowed, `min_samples` 1: the paper's "most frequently accessing node".
    fn default() -> Self {
        AffinityRule { allowed: None, min_samples: 1 }
    }
}

/// What [`affinity`] decided.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AffinityPlan {
    /// The placed pages, by address.
    pub targets: Vec<Target>,
    /// Pages left out: no evidence from any allowed node.
    pub no_evidence: u64,
    /// Pages left out: some evidence from the allowed nodes, but less than `min_samples`.
    pub below_min_samples: u64,
    /// The rule restricted the nodes (`allowed` was given).
    pub restricted: bool,
}

impl AffinityPlan {
    /// The pages left out by reason, as a placement plan's `summary.skipped_pages` names them
    /// (`docs/formats.md`); reasons with no page are omitted. Pages without evidence are a
    /// reason only when the nodes were restricted (otherwise every page has evidence, except
    /// pages whose samples all weigh 0, which are not reported).
    pub fn skipped_pages(&self) -> Vec<(&'static str, u64)> {
        let mut out = Vec::new();
        if self.restricted && self.no_evidence > 0 {
            out.push((SKIPPED_NO_EVIDENCE, self.no_evidence));
        }
        if self.below_min_samples > 0 {
            out.push((SKIPPED_BELOW_MIN_SAMPLES, self.below_min_samples));
        }
        out
    }
}

/// `summary.skipped_pages` reason of an affinity plan with restricted nodes.
pub const SKIPPED_NO_EVIDENCE: &str = "no evidence from the allowed nodes";
/// `summary.skipped_pages` reason: less evidence than `--min-samples`.
pub const SKIPPED_BELOW_MIN_SAMPLES: &str = "below --min-samples";
/// `summary.skipped_pages` reason of a hot-fast plan without a slow node.
pub const SKIPPED_NOT_HOTTEST: &str = "not among the hottest (no --slow-node)";

/// The affinity rule: each page to the allowed node (column) with the most evidence, ties to
/// the lowest; pages with no evidence from the allowed nodes, or less than
/// `rule.min_samples` of it, are left out (and counted).
///
/// `pages` yields `(page address, page bytes, evidence per node)`, each page at most once, in
/// any order; counts may be any unsigned integer type (`u32` sample counts, `u64` weights).
/// The targets come back in address order.
pub fn affinity<'a, C, I>(pages: I, rule: &AffinityRule) -> AffinityPlan
where
    I: IntoIterator<Item = (u64, u64, &'a [C])>,
    C: Copy + Into<u64> + 'a,
{
    let allowed: Option<Vec<usize>> = rule.allowed.as_ref().map(|a| {
        let set: BTreeSet<usize> = a.iter().map(|&n| n as usize).collect();
        set.into_iter().collect()
    });
    let mut plan = AffinityPlan { restricted: allowed.is_some(), ..AffinityPlan::default() };
    for (addr, bytes, counts) in pages {
        // Candidates in ascending node order; a strictly larger count replaces the best, so a
        // tie keeps the lower node.
        let mut best: Option<(usize, u64)> = None;
        let mut sum: u64 = 0;
        let mut consider = |node: usize, n: u64| {
            sum = sum.saturating_add(n);
            if best.is_none_or(|(_, b)| n > b) {
                best = Some((node, n));
            }
        };
        match &allowed {
            None => counts.iter().enumerate().for_each(|(i, &c)| consider(i, c.into())),
            Some(cols) => cols.iter().for_each(|&i| consider(i, counts.get(i).map_or(0, |&c| c.into()))),
        }
        match best {
            _ if sum == 0 => plan.no_evidence += 1,
            _ if sum < rule.min_samples => plan.below_min_samples += 1,
            Some((node, _)) => plan.targets.push(Target { addr, bytes, node: node as u32 }),
            None => plan.no_evidence += 1,
        }
    }
    plan.targets.sort_unstable_by_key(|t| t.addr);
    plan
}

/// Parameters of [`hot_fast`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HotFastRule {
    /// Node of the fast tier.
    pub fast_node: u32,
    /// Bytes of the fast tier the plan may fill.
    pub fast_capacity: u64,
    /// Node of the slow tier: every page not promoted goes there; `None`: such pages are left
    /// out of the plan.
    pub slow_node: Option<u32>,
    /// Total evidence a page needs to be promoted.
    pub min_samples: u64,
}

/// What [`hot_fast`] decided.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HotFastPlan {
    /// The placed pages, by address.
    pub targets: Vec<Target>,
    /// Pages and bytes given to the fast node.
    pub fast_pages: u64,
    pub fast_bytes: u64,
    /// Pages not promoted because their total is below `min_samples`.
    pub below_min_samples: u64,
    /// Pages not promoted because the fast capacity was used (they rank after the cut).
    pub past_capacity: u64,
    /// Pages not promoted and left out (no slow node): `below_min_samples + past_capacity`
    /// then, else 0.
    pub left_out: u64,
}

impl HotFastPlan {
    /// The pages left out by reason, as a placement plan's `summary.skipped_pages` names them;
    /// reasons with no page are omitted.
    pub fn skipped_pages(&self) -> Vec<(&'static str, u64)> {
        if self.left_out > 0 {
            vec![(SKIPPED_NOT_HOTTEST, self.left_out)]
        } else {
            Vec::new()
        }
    }
}

/// The hot-fast rule: pages ranked by total evidence, most first, ties by lower address;
/// each page with at least `rule.min_samples` goes to the fast node while it fits in what is
/// left of `rule.fast_capacity` bytes; the first that does not fit ends promotion. Every other
/// page goes to `rule.slow_node`, or is left out (and counted) without one.
///
/// `pages` yields `(page address, page bytes, total evidence)`, each page at most once, in any
/// order. The targets come back in address order.
pub fn hot_fast<I>(pages: I, rule: &HotFastRule) -> HotFastPlan
where
    I: IntoIterator<Item = (u64, u64, u64)>,
{
    let mut ranked: Vec<(u64, u64, u64)> = pages.into_iter().collect();
    ranked.sort_unstable_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    let mut plan = HotFastPlan::default();
    let mut room = rule.fast_capacity;
    let mut full = false;
    for (addr, bytes, total) in ranked {
        let fast = if total < rule.min_samples {
            plan.below_min_samples += 1;
            false
        } else if !full && bytes <= room {
            room -= bytes;
            true
        } else {
            full = true;
            plan.past_capacity += 1;
            false
        };
        let node = if fast {
            plan.fast_pages += 1;
            plan.fast_bytes += bytes;
            Some(rule.fast_node)
        } else {
            rule.slow_node
        };
        match node {
            Some(node) => plan.targets.push(Target { addr, bytes, node }),
            None => plan.left_out += 1,
        }
    }
    plan.targets.sort_unstable_by_key(|t| t.addr);
    plan
}

/// Per-page evidence accumulated from samples: for every page with a sample, its bytes, the
/// evidence per node (column) and the total (which includes samples on no node).
#[derive(Clone, Debug, Default)]
pub struct Evidence {
    nodes: usize,
    /// Page address -> row; built on the first [`Evidence::add`] (evidence made by
    /// [`aggregate`] has none until then).
    index: Option<HashMap<u64, usize, BuildHasherDefault<PageHasher>>>,
    /// The rows are in address order.
    sorted: bool,
    addrs: Vec<u64>,
    bytes: Vec<u64>,
    /// Row-major, `nodes` per row.
    counts: Vec<u64>,
    totals: Vec<u64>,
}

/// Hash of page addresses (whose low bits are zero): the splitmix64 finalizer.
#[derive(Clone, Copy, Debug, Default)]
struct PageHasher(u64);

impl Hasher for PageHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = self.0.rotate_left(32) ^ x;
    }

    fn finish(&self) -> u64 {
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl PartialEq for Evidence {
    /// The same pages with the same bytes, evidence and totals (whatever the order of the
    /// samples that built them).
    fn eq(&self, other: &Self) -> bool {
        self.nodes == other.nodes && self.pages().eq(other.pages()) && self.totals().eq(other.totals())
    }
}

impl Eq for Evidence {}

impl Evidence {
    /// Empty evidence over `nodes` node columns.
    pub fn new(nodes: usize) -> Self {
        Evidence { nodes, sorted: true, ..Evidence::default() }
    }

    /// Node columns.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// One sample of `weight` (1 to count samples) at `addr`, in a page of `page_bytes` bytes
    /// (a power of two), taken on `node` (`None`: a CPU on no known node, or no CPU at all,
    /// counted in the page's total only). A page keeps the size of its first sample.
    ///
    /// Panics if `node` is not below [`Evidence::nodes`].
    pub fn add(&mut self, addr: u64, page_bytes: u64, node: Option<u32>, weight: u64) {
        let page = page_base(addr, page_bytes);
        let addrs = &self.addrs;
        let index = self.index.get_or_insert_with(|| addrs.iter().copied().zip(0..).collect());
        let row = *index.entry(page).or_insert_with(|| {
            self.sorted &= self.addrs.last().is_none_or(|&last| last < page);
            self.addrs.push(page);
            self.bytes.push(page_bytes);
            self.counts.extend(std::iter::repeat_n(0, self.nodes));
            self.totals.push(0);
            self.totals.len() - 1
        });
        if let Some(n) = node {
            let n = n as usize;
            assert!(n < self.nodes, "node column {n} of {} columns", self.nodes);
            let c = &mut self.counts[row * self.nodes + n];
            *c = c.saturating_add(weight);
        }
        self.totals[row] = self.totals[row].saturating_add(weight);
    }

    /// Pages with evidence.
    pub fn len(&self) -> usize {
        self.addrs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.addrs.is_empty()
    }

    /// Rows in address order.
    fn order(&self) -> Vec<usize> {
        if self.sorted {
            return (0..self.addrs.len()).collect();
        }
        let mut by_addr: Vec<(u64, usize)> = self.addrs.iter().copied().zip(0..).collect();
        by_addr.sort_unstable();
        by_addr.into_iter().map(|(_, r)| r).collect()
    }

    /// `(page address, page bytes, evidence per node)` by address: the input of [`affinity`].
    pub fn pages(&self) -> impl Iterator<Item = (u64, u64, &[u64])> + '_ {
        let n = self.nodes;
        self.order()
            .into_iter()
            .map(move |r| (self.addrs[r], self.bytes[r], &self.counts[r * n..(r + 1) * n]))
    }

    /// `(page address, page bytes, total evidence)` by address: the input of [`hot_fast`].
    pub fn totals(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.order().into_iter().map(|r| (self.addrs[r], self.bytes[r], self.totals[r]))
    }

    /// The affinity rule on this evidence.
    pub fn affinity(&self, rule: &AffinityRule) -> AffinityPlan {
        affinity(self.pages(), rule)
    }

    /// The hot-fast rule on this evidence.
    pub fn hot_fast(&self, rule: &HotFastRule) -> HotFastPlan {
        hot_fast(self.totals(), rule)
    }
}

/// [`aggregate`]'s result: the evidence and what could not be attributed to a node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Aggregated {
    pub evidence: Evidence,
    /// Samples taken on a CPU the map gives no node (counted in their page's total only).
    pub points_on_cpus_without_node: u64,
    /// Those CPUs.
    pub cpus_without_node: BTreeSet<u32>,
}

/// Aggregate samples into per-page evidence: each sample `(addr, cpu, weight)` adds `weight`
/// to its page (of `page_bytes`, a power of two) under the node column `cpu_node[cpu]`.
/// A sample without a CPU (`None`: a trace access) counts in its page's total only; so does a
/// sample on a CPU without a column (`cpu_node` too short, or `None` there), which is also
/// counted in [`Aggregated::points_on_cpus_without_node`].
pub fn aggregate<I>(samples: I, cpu_node: &[Option<u32>], nodes: usize, page_bytes: u64) -> Aggregated
where
    I: IntoIterator<Item = (u64, Option<u32>, u64)>,
{
    const NO_NODE: u32 = u32::MAX;
    let mut out = Aggregated::default();
    // Sort the samples by page, then sum each run: much faster than a map lookup per sample
    // when there are millions of them (sums saturate, so the order does not matter).
    let mut points: Vec<(u64, u32, u64)> = samples
        .into_iter()
        .map(|(addr, cpu, weight)| {
            let node = match cpu {
                None => None,
                Some(c) => {
                    let node = cpu_node.get(c as usize).copied().flatten();
                    if node.is_none() {
                        out.points_on_cpus_without_node += 1;
                        out.cpus_without_node.insert(c);
                    }
                    node
                }
            };
            if let Some(n) = node {
                assert!((n as usize) < nodes, "node column {n} of {nodes} columns");
            }
            (page_base(addr, page_bytes), node.unwrap_or(NO_NODE), weight)
        })
        .collect();
    points.sort_unstable_by_key(|p| p.0);
    let ev = &mut out.evidence;
    *ev = Evidence::new(nodes);
    for (page, node, weight) in points {
        if ev.addrs.last() != Some(&page) {
            ev.addrs.push(page);
            ev.bytes.push(page_bytes);
            ev.counts.extend(std::iter::repeat_n(0, nodes));
            ev.totals.push(0);
        }
        let row = ev.addrs.len() - 1;
        if node != NO_NODE {
            let c = &mut ev.counts[row * nodes + node as usize];
            *c = c.saturating_add(weight);
        }
        ev.totals[row] = ev.totals[row].saturating_add(weight);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const P: u64 = 4096;

    fn t(addr: u64, node: u32) -> Target {
        Target { addr, bytes: P, node }
    }

    fn nodes(plan: &[Target]) -> Vec<(u64, u32)> {
        plan.iter().map(|t| (t.addr, t.node)).collect()
    }

    #[test]
    fn affinity_most_evidence_wins_ties_to_the_lowest_node() {
        let pages: Vec<(u64, u64, &[u32])> = vec![
            (0x3000, P, &[0, 0, 5]),
            (0x1000, P, &[3, 1, 0]),
            (0x2000, P, &[1, 1, 1]), // three-way tie
            (0x4000, P, &[0, 2, 2]), // tie between 1 and 2
        ];
        let plan = affinity(pages, &AffinityRule::default());
        assert_eq!(plan.targets, vec![t(0x1000, 0), t(0x2000, 0), t(0x3000, 2), t(0x4000, 1)]);
        assert_eq!((plan.no_evidence, plan.below_min_samples), (0, 0));
        assert!(plan.skipped_pages().is_empty());
    }

    #[test]
    fn affinity_min_samples_counts_the_allowed_nodes_only() {
        let pages: Vec<(u64, u64, &[u64])> =
            vec![(0x1000, P, &[2, 1]), (0x2000, P, &[1, 1]), (0x3000, P, &[0, 1]), (0x4000, P, &[5, 0])];
        let plan = affinity(pages.clone(), &AffinityRule { allowed: None, min_samples: 3 });
        assert_eq!(nodes(&plan.targets), vec![(0x1000, 0), (0x4000, 0)]);
        assert_eq!((plan.no_evidence, plan.below_min_samples), (0, 2));
        let plan = affinity(pages.clone(), &AffinityRule { allowed: None, min_samples: 2 });
        assert_eq!(nodes(&plan.targets), vec![(0x1000, 0), (0x2000, 0), (0x4000, 0)]);
        assert_eq!(plan.skipped_pages(), vec![(SKIPPED_BELOW_MIN_SAMPLES, 1)]);
        // Restricted to node 1: only node 1's evidence counts, for the choice and for
        // min_samples.
        let plan = affinity(pages.clone(), &AffinityRule { allowed: Some(vec![1]), min_samples: 1 });
        assert_eq!(nodes(&plan.targets), vec![(0x1000, 1), (0x2000, 1), (0x3000, 1)]);
        assert_eq!((plan.no_evidence, plan.below_min_samples), (1, 0));
        assert_eq!(plan.skipped_pages(), vec![(SKIPPED_NO_EVIDENCE, 1)]);
        let plan = affinity(pages, &AffinityRule { allowed: Some(vec![1]), min_samples: 2 });
        assert!(plan.targets.is_empty());
        assert_eq!(plan.skipped_pages(), vec![(SKIPPED_NO_EVIDENCE, 1), (SKIPPED_BELOW_MIN_SAMPLES, 3)]);
    }

    #[test]
    fn affinity_allowed_nodes() {
        let pages: Vec<(u64, u64, &[u32])> = vec![(0x1000, P, &[9, 4, 4, 1]), (0x2000, P, &[0, 0, 0, 7])];
        // Unsorted, duplicated and out-of-range columns are fine: sorted, deduplicated, and a
        // column the page has no count for holds nothing.
        let rule = AffinityRule { allowed: Some(vec![2, 1, 2, 9]), min_samples: 1 };
        let plan = affinity(pages.clone(), &rule);
        assert_eq!(nodes(&plan.targets), vec![(0x1000, 1)]);
        assert_eq!((plan.no_evidence, plan.below_min_samples, plan.restricted), (1, 0, true));
        // An empty allowed set places nothing.
        let plan = affinity(pages.clone(), &AffinityRule { allowed: Some(vec![]), min_samples: 1 });
        assert!(plan.targets.is_empty());
        assert_eq!(plan.no_evidence, 2);
        // Unrestricted, a page without any evidence (all weights 0) is left out silently.
        let zero: Vec<(u64, u64, &[u32])> = vec![(0x1000, P, &[0, 0])];
        let plan = affinity(zero, &AffinityRule::default());
        assert!(plan.targets.is_empty() && plan.skipped_pages().is_empty());
        assert_eq!(plan.no_evidence, 1);
        // Even with min_samples 0, a page without evidence is never placed.
        let zero: Vec<(u64, u64, &[u32])> = vec![(0x1000, P, &[0, 0])];
        assert!(affinity(zero, &AffinityRule { allowed: None, min_samples: 0 }).targets.is_empty());
    }

    #[test]
    fn affinity_empty_input() {
        let plan = affinity(Vec::<(u64, u64, &[u32])>::new(), &AffinityRule::default());
        assert_eq!(plan, AffinityPlan::default());
        let no_nodes: Vec<(u64, u64, &[u32])> = vec![(0x1000, P, &[])];
        let plan = affinity(no_nodes, &AffinityRule::default());
        assert!(plan.targets.is_empty());
        assert_eq!(plan.no_evidence, 1);
    }

    #[test]
    fn affinity_keeps_page_sizes_and_large_weights() {
        let big = u64::MAX / 2 + 1;
        let (a, b) = ([big, big], [1, big]);
        let pages: Vec<(u64, u64, &[u64])> = vec![(0x20_0000, 2 << 20, &a), (0x1000, P, &b)];
        let plan = affinity(pages, &AffinityRule { allowed: None, min_samples: big });
        // Sums saturate rather than overflow.
        assert_eq!(plan.targets, vec![t(0x1000, 1), Target { addr: 0x20_0000, bytes: 2 << 20, node: 0 }]);
    }

    fn rule(cap: u64, slow: Option<u32>, min: u64) -> HotFastRule {
        HotFastRule { fast_node: 1, fast_capacity: cap, slow_node: slow, min_samples: min }
    }

    #[test]
    fn hot_fast_ranks_by_total_then_address() {
        let pages = vec![(0x1000, P, 4), (0x2000, P, 3), (0x3000, P, 2), (0x4000, P, 3), (0x5000, P, 1)];
        let plan = hot_fast(pages.clone(), &rule(2 * P + 100, None, 1));
        assert_eq!(nodes(&plan.targets), vec![(0x1000, 1), (0x2000, 1)]); // 0x2000 beats 0x4000
        assert_eq!((plan.fast_pages, plan.fast_bytes), (2, 2 * P));
        assert_eq!((plan.past_capacity, plan.below_min_samples, plan.left_out), (3, 0, 3));
        assert_eq!(plan.skipped_pages(), vec![(SKIPPED_NOT_HOTTEST, 3)]);
        let plan = hot_fast(pages.clone(), &rule(2 * P, Some(0), 1));
        assert_eq!(
            nodes(&plan.targets),
            vec![(0x1000, 1), (0x2000, 1), (0x3000, 0), (0x4000, 0), (0x5000, 0)]
        );
        assert_eq!(plan.left_out, 0);
        assert!(plan.skipped_pages().is_empty());
        // Input order does not matter.
        let mut rev = pages.clone();
        rev.reverse();
        assert_eq!(hot_fast(rev, &rule(2 * P, Some(0), 1)), plan);
    }

    #[test]
    fn hot_fast_capacity_boundary() {
        let pages = vec![(0x1000, P, 5), (0x2000, P, 4), (0x3000, P, 3)];
        for (cap, fast) in [(0, 0), (P - 1, 0), (P, 1), (2 * P - 1, 1), (2 * P, 2), (3 * P, 3), (u64::MAX, 3)]
        {
            let plan = hot_fast(pages.clone(), &rule(cap, Some(0), 1));
            assert_eq!(plan.fast_pages, fast, "capacity {cap}");
            assert_eq!(plan.past_capacity, 3 - fast);
            let want: Vec<u32> = (0..3).map(|i| u32::from(i < fast)).collect();
            assert_eq!(plan.targets.iter().map(|t| t.node).collect::<Vec<_>>(), want);
        }
        // Mixed sizes: the ranking is cut at the first page that does not fit; a smaller,
        // colder page after it is not promoted.
        let mixed = vec![(0x20_0000, 2 << 20, 9), (0x1000, P, 8), (0x2000, P, 7)];
        let plan = hot_fast(mixed, &rule(2 * P, None, 1));
        assert!(plan.targets.is_empty());
        assert_eq!((plan.past_capacity, plan.left_out), (3, 3));
    }

    #[test]
    fn hot_fast_min_samples() {
        let pages = vec![(0x1000, P, 1), (0x2000, P, 5), (0x3000, P, 2)];
        let plan = hot_fast(pages.clone(), &rule(10 * P, None, 2));
        assert_eq!(nodes(&plan.targets), vec![(0x2000, 1), (0x3000, 1)]);
        assert_eq!((plan.below_min_samples, plan.past_capacity, plan.left_out), (1, 0, 1));
        // With a slow node, pages below min_samples go there.
        let plan = hot_fast(pages, &rule(10 * P, Some(3), 2));
        assert_eq!(nodes(&plan.targets), vec![(0x1000, 3), (0x2000, 1), (0x3000, 1)]);
        assert_eq!((plan.below_min_samples, plan.left_out), (1, 0));
    }

    #[test]
    fn hot_fast_empty_input() {
        let plan = hot_fast(std::iter::empty(), &rule(P, Some(0), 1));
        assert_eq!(plan, HotFastPlan::default());
    }

    #[test]
    fn evidence_accumulates_per_page() {
        let mut ev = Evidence::new(2);
        ev.add(0x1008, P, Some(0), 1);
        ev.add(0x1ff0, P, Some(1), 5);
        ev.add(0x1000, P, None, 7); // no node: total only
        ev.add(0x0040, P, Some(1), 1);
        ev.add(0x20_0123, 2 << 20, Some(0), 2);
        assert_eq!(ev.len(), 3);
        let pages: Vec<(u64, u64, Vec<u64>)> = ev.pages().map(|(a, b, c)| (a, b, c.to_vec())).collect();
        assert_eq!(
            pages,
            vec![(0, P, vec![0, 1]), (0x1000, P, vec![1, 5]), (0x20_0000, 2 << 20, vec![2, 0])]
        );
        let totals: Vec<_> = ev.totals().collect();
        assert_eq!(totals, vec![(0, P, 1), (0x1000, P, 13), (0x20_0000, 2 << 20, 2)]);
        assert_eq!(
            nodes(&ev.affinity(&AffinityRule::default()).targets),
            vec![(0, 1), (0x1000, 1), (0x20_0000, 0)]
        );
        let hot = ev.hot_fast(&rule(P, None, 1));
        assert_eq!(nodes(&hot.targets), vec![(0x1000, 1)]);
    }

    #[test]
    fn aggregate_equals_adding_one_by_one_and_add_continues_it() {
        let cpu_node = [Some(1), None, Some(0)];
        let mut x: u64 = 7;
        let samples: Vec<(u64, Option<u32>, u64)> = (0..2000)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let cpu = match (x >> 20) % 5 {
                    4 => None,
                    c => Some(c as u32),
                };
                ((x >> 33) % (64 * P), cpu, (x >> 10) % 4)
            })
            .collect();
        let mut a = aggregate(samples.iter().copied(), &cpu_node, 2, P);
        let mut b = Evidence::new(2);
        for &(addr, cpu, w) in &samples {
            b.add(addr, P, cpu.and_then(|c| cpu_node.get(c as usize).copied().flatten()), w);
        }
        assert_eq!(a.evidence, b);
        assert!(a.evidence.len() > 50);
        // Adding to aggregated evidence: its index is built then.
        a.evidence.add(0x10_0000, P, Some(1), 3);
        b.add(0x10_0000, P, Some(1), 3);
        a.evidence.add(0, P, Some(0), 1);
        b.add(0, P, Some(0), 1);
        assert_eq!(a.evidence, b);
        assert_eq!(a.evidence.pages().next().unwrap().0, 0);
    }

    #[test]
    fn evidence_does_not_depend_on_sample_order() {
        let samples = [(0x5000, Some(1), 2), (0x1000, Some(0), 1), (0x5008, None, 4), (0x3000, Some(1), 1)];
        let mut a = Evidence::new(2);
        let mut b = Evidence::new(2);
        samples.iter().for_each(|&(addr, n, w)| a.add(addr, P, n, w));
        samples.iter().rev().for_each(|&(addr, n, w)| b.add(addr, P, n, w));
        assert_eq!(a, b);
        assert_eq!(a.pages().map(|p| p.0).collect::<Vec<_>>(), vec![0x1000, 0x3000, 0x5000]);
        b.add(0x9000, P, None, 1);
        assert_ne!(a, b);
    }

    #[test]
    #[should_panic(expected = "node column 2 of 2 columns")]
    fn evidence_rejects_unknown_columns() {
        Evidence::new(2).add(0, P, Some(2), 1);
    }

    #[test]
    fn aggregate_with_a_cpu_map() {
        // CPUs 0-1 on column 0, 2-3 on column 1, CPU 4 on none; CPU 9 beyond the map.
        let cpu_node = [Some(0), Some(0), Some(1), Some(1), None];
        let samples = [
            (0x1000, Some(0), 1),
            (0x1010, Some(3), 1),
            (0x1020, Some(2), 1),
            (0x1030, Some(4), 1),
            (0x1040, Some(9), 1),
            (0x2000, None, 1),
        ];
        let a = aggregate(samples, &cpu_node, 2, P);
        assert_eq!(a.points_on_cpus_without_node, 2);
        assert_eq!(a.cpus_without_node.into_iter().collect::<Vec<_>>(), vec![4, 9]);
        let pages: Vec<(u64, Vec<u64>)> = a.evidence.pages().map(|(p, _, c)| (p, c.to_vec())).collect();
        assert_eq!(pages, vec![(0x1000, vec![1, 2]), (0x2000, vec![0, 0])]);
        let totals: Vec<u64> = a.evidence.totals().map(|(_, _, t)| t).collect();
        assert_eq!(totals, vec![5, 1]);
    }

    /// The simulator's former rule (`profile_guided.rs`, `affinities()`): most samples wins,
    /// ties to the lower node id, total samples >= min_samples. Equal to [`affinity`] with
    /// every node allowed, on random evidence.
    #[test]
    fn affinity_equals_the_simulators_rule() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..200 {
            let nodes = 1 + (round % 4);
            let mut counts: BTreeMap<u64, (u64, Vec<u32>)> = BTreeMap::new();
            for _ in 0..(next() % 50) {
                let page = (next() % 64) * P;
                let e = counts.entry(page).or_insert_with(|| (P, vec![0; nodes]));
                e.1[(next() % nodes as u64) as usize] += (next() % 3) as u32;
            }
            let min = 1 + (next() % 4) as u32;
            let old: Vec<(u64, u64, u8)> = counts
                .iter()
                .filter(|(_, (_, c))| c.iter().sum::<u32>() >= min)
                .map(|(&va, (len, c))| {
                    let best =
                        c.iter().enumerate().max_by_key(|&(i, &n)| (n, std::cmp::Reverse(i))).map(|(i, _)| i);
                    (va, *len, best.unwrap_or(0) as u8)
                })
                .collect();
            let new = affinity(
                counts.iter().map(|(&a, (b, c))| (a, *b, c.as_slice())),
                &AffinityRule { allowed: None, min_samples: u64::from(min) },
            );
            let new: Vec<(u64, u64, u8)> =
                new.targets.iter().map(|t| (t.addr, t.bytes, t.node as u8)).collect();
            assert_eq!(new, old, "round {round}");
        }
    }
}
