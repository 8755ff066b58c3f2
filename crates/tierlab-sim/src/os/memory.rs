//! Memory nodes and tiers, and where a new page goes (placement).
//!
//! A node has a capacity, a load latency, a bandwidth, the cores attached to it (none for a
//! CPU-less node such as CXL memory or PMem exposed through dax/kmem) and a tier rank (0 =
//! fastest). The latency a core sees for a node comes from the distance matrix
//! `latency_ns[core_node][mem_node]`; by default a node's own latency, times
//! `remote_factor` when both nodes have cores and differ (a remote socket).

use serde::{Deserialize, Serialize};
use tierlab_core::param::params;

use crate::units::ByteSize;

/// One memory node.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct NodeConfig {
    /// Name used in stats (`node.<name>.accesses`).
    #[param(required)]
    pub name: String,
    /// Capacity.
    #[param(required, unit = "bytes", setting)]
    pub capacity: ByteSize,
    /// Idle load latency from a core of this node (or from any core for a CPU-less node).
    #[param(required, range = "(0, 1e9]", unit = "ns", setting)]
    pub latency_ns: f64,
    /// Bandwidth (used for page migration and fault-in over a link).
    #[param(
        default = 100.0,
        range = "(0, 1e6]",
        unit = "GB/s",
        assumed = "a round figure for a node that does not give its own"
    )]
    pub bandwidth_gbps: f64,
    /// Cores attached to this node (empty = CPU-less). Cores listed by no node belong to
    /// the first node that has cores, or to node 0.
    #[param(default, range = "[0, 4095]", setting)]
    pub cores: Vec<usize>,
    /// Tier rank: 0 is the fastest; used for fallback order when a node is full.
    #[param(default = 0, range = "[0, 255]", setting)]
    pub tier: u32,
    /// Loaded latency (`[machine.nodes.loaded]`): the latency rises with the node's bandwidth
    /// use ([`crate::hw::loaded`]); absent = the idle latency always.
    #[param(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loaded: Option<crate::hw::loaded::LoadedLatency>,
}

/// The default two-tier machine's memory: 16 GiB of local DDR (90 ns, DDR4-3200 x8 204.8
/// GB/s) and 64 GiB of CXL-attached DRAM (90 + 80 ns, ~32 GB/s for a PCIe Gen5 expander),
/// from `cost-model.md`.
pub fn default_nodes() -> Vec<NodeConfig> {
    vec![
        NodeConfig {
            name: "dram".into(),
            capacity: ByteSize(16 << 30),
            latency_ns: 90.0,
            bandwidth_gbps: 204.8,
            cores: vec![],
            tier: 0,
            loaded: None,
        },
        NodeConfig {
            name: "cxl".into(),
            capacity: ByteSize(64 << 30),
            latency_ns: 170.0,
            bandwidth_gbps: 32.0,
            cores: vec![],
            tier: 1,
            loaded: None,
        },
    ]
}

/// Runtime state of a node.
#[derive(Clone, Debug)]
pub struct Node {
    /// Its configuration.
    pub cfg: NodeConfig,
    /// Capacity in 4 KiB pages.
    pub capacity_pages: u64,
    /// 4 KiB pages in use.
    pub used_pages: u64,
    /// Accesses served.
    pub accesses: u64,
    /// Pages allocated here over the run.
    pub allocated_pages: u64,
}

/// Pages reclaimed to swap (DAMOS `pageout`): a later touch of one is a major fault that
/// reads it back ([`Swap::refault`]).
#[derive(Clone, Debug, Default)]
pub struct Swap {
    /// Base addresses of the pages out on swap.
    pub pages: std::collections::BTreeSet<u64>,
    /// Pages written out.
    pub pageouts: u64,
    /// Pages read back by a fault.
    pub refaults: u64,
    /// Time of those reads, ps.
    pub refault_time_ps: u64,
    /// Extra time of a refault, ps (`cost.swap_in_ns` plus the read at `cost.swap_gbps`), per
    /// 4 KiB page.
    pub refault_ps: u64,
}

impl Swap {
    /// A fault at `base` (a page of `pages` base pages): the extra time when the page was out
    /// on swap (it is read back), else 0.
    pub fn refault(&mut self, base: u64, pages: u64) -> u64 {
        if self.pages.is_empty() || !self.pages.remove(&base) {
            return 0;
        }
        self.refaults += 1;
        self.refault_time_ps += self.refault_ps * pages;
        self.refault_ps * pages
    }
}

/// Pages marked active or inactive by DAMOS `lru_prio` / `lru_deprio` (the LRU lists' view of
/// them): disjoint `[start, end)` ranges marked active. Reclaim-side demotion consults it.
#[derive(Clone, Debug, Default)]
pub struct LruMarks {
    active: std::collections::BTreeMap<u64, u64>,
}

impl LruMarks {
    /// Mark `[start, end)` active (`true`) or inactive.
    pub fn mark(&mut self, start: u64, end: u64, active: bool) {
        if start >= end {
            return;
        }
        // Cut every range overlapping [start, end) out, then insert the new one if active.
        let overlapping: Vec<(u64, u64)> =
            self.active.range(..end).rev().take_while(|&(_, &e)| e > start).map(|(&s, &e)| (s, e)).collect();
        let (mut lo, mut hi) = (start, end);
        for (s, e) in overlapping {
            self.active.remove(&s);
            if active {
                lo = lo.min(s);
                hi = hi.max(e);
            } else {
                if s < start {
                    self.active.insert(s, start);
                }
                if e > end {
                    self.active.insert(end, e);
                }
            }
        }
        if active {
            // Merge with touching neighbours.
            if let Some((&s, &e)) = self.active.range(..lo).next_back() {
                if e == lo {
                    self.active.remove(&s);
                    lo = s;
                }
            }
            if let Some(&e) = self.active.get(&hi) {
                self.active.remove(&hi);
                hi = e;
            }
            self.active.insert(lo, hi);
        }
    }

    /// Whether `va` is marked active.
    pub fn is_active(&self, va: u64) -> bool {
        self.active.range(..=va).next_back().is_some_and(|(_, &e)| va < e)
    }

    /// Bytes marked active.
    pub fn active_bytes(&self) -> u64 {
        self.active.iter().map(|(s, e)| e - s).sum()
    }
}

/// How a new page's node is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// The faulting core's node; when full, the next node by tier then distance.
    FirstTouch,
    /// Round-robin over the nodes (by page); full nodes are skipped.
    Interleave,
}
tierlab_core::choice_param!(Placement);

/// The machine's memory.
#[derive(Clone, Debug)]
pub struct Memory {
    /// Nodes in configuration order (index = node id).
    pub nodes: Vec<Node>,
    /// `latency_ps[core_node][mem_node]`.
    pub latency_ps: Vec<Vec<u64>>,
    /// Node of each core.
    pub core_node: Vec<u8>,
    /// For each node with cores: all nodes in fallback order (itself first).
    fallback: Vec<Vec<u8>>,
    placement: Placement,
    next_interleave: usize,
    /// Preferred nodes by virtual address (a placement plan, e.g. profile-guided affinity):
    /// sorted, disjoint `(start, end, node)` byte ranges consulted by [`Memory::allocate_at`].
    pub preferred: Vec<(u64, u64, u8)>,
    /// Pages out on swap.
    pub swap: Swap,
    /// LRU activity marks.
    pub lru: LruMarks,
}

impl Memory {
    /// Build from the configuration (validated by the scenario layer).
    pub fn new(nodes: &[NodeConfig], latency_ns: &[Vec<f64>], cores: usize, placement: Placement) -> Self {
        let mut core_node = vec![u8::MAX; cores];
        for (i, n) in nodes.iter().enumerate() {
            for &c in &n.cores {
                if c < cores {
                    core_node[c] = i as u8;
                }
            }
        }
        let home = nodes.iter().position(|n| !n.cores.is_empty()).unwrap_or(0) as u8;
        for c in core_node.iter_mut() {
            if *c == u8::MAX {
                *c = home;
            }
        }
        let latency_ps: Vec<Vec<u64>> =
            latency_ns.iter().map(|row| row.iter().map(|&l| crate::hw::cost::ps(l)).collect()).collect();
        let mut fallback = Vec::new();
        for (from, row) in latency_ps.iter().enumerate() {
            let mut order: Vec<u8> = (0..nodes.len() as u8).collect();
            order.sort_by_key(|&a| (a as usize != from, nodes[a as usize].tier, row[a as usize], a));
            fallback.push(order);
        }
        Memory {
            nodes: nodes
                .iter()
                .map(|c| Node {
                    cfg: c.clone(),
                    capacity_pages: c.capacity.0 / tierlab_core::PAGE_SIZE,
                    used_pages: 0,
                    accesses: 0,
                    allocated_pages: 0,
                })
                .collect(),
            latency_ps,
            core_node,
            fallback,
            placement,
            next_interleave: 0,
            preferred: Vec::new(),
            swap: Swap::default(),
            lru: LruMarks::default(),
        }
    }

    /// The rule for new pages outside [`Memory::preferred`].
    pub fn placement(&self) -> Placement {
        self.placement
    }

    /// Change the rule for new pages (a placement policy's choice).
    pub fn set_placement(&mut self, p: Placement) {
        self.placement = p;
    }

    /// The preferred node of `va` and the end of the run of addresses from `va` that share
    /// that preference (`None`: no preference up to the returned end).
    pub fn preferred_run(&self, va: u64) -> (Option<u8>, u64) {
        let i = self.preferred.partition_point(|r| r.1 <= va);
        match self.preferred.get(i) {
            Some(&(s, e, n)) if s <= va => (Some(n), e),
            Some(&(s, _, _)) => (None, s),
            None => (None, u64::MAX),
        }
    }

    /// Like [`Memory::allocate`] for pages at `va`: a preferred node with room wins, else the
    /// placement rule decides.
    pub fn allocate_at(&mut self, core: usize, va: u64, pages: u64) -> Option<u8> {
        if let (Some(n), _) = self.preferred_run(va) {
            if (n as usize) < self.nodes.len() && self.has_room(n, pages) {
                let node = &mut self.nodes[n as usize];
                node.used_pages += pages;
                node.allocated_pages += pages;
                return Some(n);
            }
        }
        self.allocate(core, pages)
    }

    /// Choose a node for `pages` 4 KiB pages faulted by `core` and account them. `None` when
    /// no node has room.
    pub fn allocate(&mut self, core: usize, pages: u64) -> Option<u8> {
        let home = self.core_node[core] as usize;
        let pick = match self.placement {
            Placement::FirstTouch => self.fallback[home].iter().copied().find(|&n| self.has_room(n, pages)),
            Placement::Interleave => {
                let k = self.nodes.len();
                let mut found = None;
                for step in 0..k {
                    let n = ((self.next_interleave + step) % k) as u8;
                    if self.has_room(n, pages) {
                        found = Some(n);
                        self.next_interleave = (n as usize + 1) % k;
                        break;
                    }
                }
                found
            }
        }?;
        let n = &mut self.nodes[pick as usize];
        n.used_pages += pages;
        n.allocated_pages += pages;
        Some(pick)
    }

    /// Whether `node` has room for `pages`.
    pub fn has_room(&self, node: u8, pages: u64) -> bool {
        let n = &self.nodes[node as usize];
        n.used_pages + pages <= n.capacity_pages
    }

    /// Return pages to a node.
    pub fn free(&mut self, node: u8, pages: u64) {
        let n = &mut self.nodes[node as usize];
        n.used_pages = n.used_pages.saturating_sub(pages);
    }

    /// Move accounting of `pages` from one node to another (migration).
    pub fn transfer(&mut self, from: u8, to: u8, pages: u64) -> bool {
        if !self.has_room(to, pages) {
            return false;
        }
        self.free(from, pages);
        self.nodes[to as usize].used_pages += pages;
        true
    }

    /// Total capacity in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        self.nodes.iter().map(|n| tierlab_core::bytes_of(n.capacity_pages)).sum()
    }
}

/// The default distance matrix for `nodes`: node latency, times `remote_factor` between
/// distinct nodes that both have cores.
pub fn default_latency_matrix(nodes: &[NodeConfig], remote_factor: f64) -> Vec<Vec<f64>> {
    (0..nodes.len())
        .map(|from| {
            (0..nodes.len())
                .map(|to| {
                    let l = nodes[to].latency_ns;
                    if from != to && !nodes[from].cores.is_empty() && !nodes[to].cores.is_empty() {
                        l * remote_factor
                    } else {
                        l
                    }
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_sockets() -> Vec<NodeConfig> {
        vec![
            NodeConfig {
                name: "n0".into(),
                capacity: ByteSize(8192),
                latency_ns: 90.0,
                bandwidth_gbps: 100.0,
                cores: vec![0],
                tier: 0,
                loaded: None,
            },
            NodeConfig {
                name: "n1".into(),
                capacity: ByteSize(8192),
                latency_ns: 90.0,
                bandwidth_gbps: 100.0,
                cores: vec![1],
                tier: 0,
                loaded: None,
            },
            NodeConfig {
                name: "cxl".into(),
                capacity: ByteSize(1 << 20),
                latency_ns: 170.0,
                bandwidth_gbps: 32.0,
                cores: vec![],
                tier: 1,
                loaded: None,
            },
        ]
    }

    #[test]
    fn first_touch_falls_back_by_tier_then_distance() {
        let nodes = two_sockets();
        let lat = default_latency_matrix(&nodes, 1.5);
        let mut m = Memory::new(&nodes, &lat, 2, Placement::FirstTouch);
        assert_eq!(m.allocate(1, 1), Some(1));
        assert_eq!(m.allocate(1, 1), Some(1));
        assert_eq!(m.allocate(1, 1), Some(0), "same tier, remote socket before the slower tier");
        assert_eq!(m.allocate(1, 1), Some(0));
        assert_eq!(m.allocate(1, 1), Some(2));
        assert_eq!(lat[0][1], 135.0);
        assert_eq!(lat[0][2], 170.0);
    }

    #[test]
    fn lru_marks_are_an_interval_set() {
        let mut l = LruMarks::default();
        l.mark(100, 200, true);
        l.mark(200, 300, true);
        assert_eq!(l.active_bytes(), 200);
        assert!(l.is_active(150) && l.is_active(299) && !l.is_active(300) && !l.is_active(99));
        l.mark(150, 250, false);
        assert_eq!(l.active_bytes(), 100);
        assert!(l.is_active(149) && !l.is_active(150) && !l.is_active(249) && l.is_active(250));
        l.mark(0, 1000, true);
        assert_eq!(l.active_bytes(), 1000);
        l.mark(0, 1000, false);
        assert_eq!(l.active_bytes(), 0);
    }

    #[test]
    fn interleave_round_robins_and_skips_full() {
        let nodes = two_sockets();
        let lat = default_latency_matrix(&nodes, 1.5);
        let mut m = Memory::new(&nodes, &lat, 2, Placement::Interleave);
        let picks: Vec<u8> = (0..6).map(|_| m.allocate(0, 1).unwrap()).collect();
        assert_eq!(picks, vec![0, 1, 2, 0, 1, 2]);
        assert_eq!(m.allocate(0, 1), Some(2), "n0 and n1 are full");
    }
}
