//! Tests of tierlab_core::plan.

use std::collections::BTreeMap;
use tierlab_core::plan::*;

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
    assert_eq!(nodes(&plan.targets), vec![(0x1000, 1), (0x2000, 1), (0x3000, 0), (0x4000, 0), (0x5000, 0)]);
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
    for (cap, fast) in [(0, 0), (P - 1, 0), (P, 1), (2 * P - 1, 1), (2 * P, 2), (3 * P, 3), (u64::MAX, 3)] {
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
    assert_eq!(pages, vec![(0, P, vec![0, 1]), (0x1000, P, vec![1, 5]), (0x20_0000, 2 << 20, vec![2, 0])]);
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
        let new: Vec<(u64, u64, u8)> = new.targets.iter().map(|t| (t.addr, t.bytes, t.node as u8)).collect();
        assert_eq!(new, old, "round {round}");
    }
}
