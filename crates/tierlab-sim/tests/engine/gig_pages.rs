//! 1 GiB pages (`machine.page_size = "1GiB"`) end to end on the flat backend: faults, TLB,
//! ground truth, page-table telemetry; the hierarchical backend rejects them.

use crate::common::{f, run, src};
use tierlab_sim::driver::Simulation;
use tierlab_sim::scenario::load;

/// Uniform random loads over 2 GiB on a Skylake-SP (which has 1 GiB TLB entries).
const UNIFORM: &str = r#"
seed = 1
duration = "10s"
[machine]
cores = 1
cpu = "skylake-sp"
[[machine.nodes]]
name = "dram"
capacity = "4GiB"
latency_ns = 90.0
bandwidth_gbps = 100.0
[[machine.nodes]]
name = "slow"
capacity = "4GiB"
latency_ns = 300.0
bandwidth_gbps = 20.0
tier = 1
[workload]
kind = "uniform"
footprint = "2GiB"
accesses = 100000
"#;

#[test]
fn gigantic_pages_fault_twice_and_miss_the_tlb_least() {
    let runs: Vec<_> = ["4KiB", "2MiB", "1GiB"]
        .iter()
        .map(|p| run(UNIFORM, &[&format!("machine.page_size=\"{p}\"")]))
        .collect();
    let [k4, m2, g1] = [&runs[0], &runs[1], &runs[2]];
    assert_eq!(f(g1, "machine.page_faults"), 2.0, "two 1 GiB pages");
    assert_eq!(f(m2, "machine.page_faults"), 1024.0);
    assert_eq!(f(g1, "machine.tlb.misses"), 2.0);
    assert!(f(m2, "machine.tlb.misses") > 100.0 * f(g1, "machine.tlb.misses"));
    assert!(f(k4, "machine.tlb.misses") > f(m2, "machine.tlb.misses"));
    for r in &runs {
        assert_eq!(f(r, "run.ground_truth_accesses"), f(k4, "machine.accesses"));
        assert_eq!(f(r, "machine.accesses"), 100000.0);
    }
    // Each fault costs `cost.fault_ns` plus zeroing 1 GiB at `cost.zero_gbps` (defaults 1 us
    // and 10 GB/s).
    let want = 2.0 * (1e-6 + (1u64 << 30) as f64 / 10e9);
    assert!((f(g1, "machine.time.fault_s") - want).abs() < 1e-9, "{}", f(g1, "machine.time.fault_s"));
}

#[test]
fn page_table_telemetry_sees_gigantic_pages() {
    let ov =
        ["machine.page_size=\"1GiB\"", "workload.accesses=0", "workload.populate=true", "duration=\"300ms\""];
    let pte = r#"telemetry=[{name = "p", kind = "pte-scan", interval = "50ms", flush = true}]"#;
    let r = run(UNIFORM, &[&ov[..], &[pte]].concat());
    let passes = f(&r, "telemetry.p.passes");
    assert!(passes >= 5.0);
    assert_eq!(f(&r, "telemetry.p.ptes_scanned"), 2.0 * passes, "two PUD leaves per pass");
    assert_eq!(f(&r, "telemetry.p.pages_found_accessed"), 2.0 * 262_144.0 * passes);
    let damon =
        r#"telemetry=[{name = "d", kind = "damon", schemes = [{action = "stat", min_nr_accesses = 1}]}]"#;
    let r = run(UNIFORM, &[&ov[..], &[damon]].concat());
    assert!(f(&r, "telemetry.d.huge_page_samples") > 0.0);
    assert!(f(&r, "telemetry.d.damos.0.sz_tried") > 0.0, "regions seen accessed");
    // Telescope profiles a 1 GiB page at its PUD leaf, never below.
    let ts = r#"telemetry=[{name = "t", kind = "telescope"}]"#;
    let r = run(UNIFORM, &[&ov[..], &[ts]].concat());
    assert!(f(&r, "telemetry.t.entries_checked_pud") > 0.0);
    assert_eq!(f(&r, "telemetry.t.entries_checked_pmd") + f(&r, "telemetry.t.entries_checked_pte"), 0.0);
}

#[test]
fn hierarchical_backend_rejects_gigantic_pages() {
    let text = format!("{UNIFORM}\n[machine.hmem]\nfast_memory = \"64MiB\"\n");
    let text = text.replace("cpu = \"skylake-sp\"", "cpu = \"skylake-sp\"\npage_size = \"1GiB\"");
    let s = src(&text);
    let e = match load(&s, &[], None) {
        Err(e) => e.to_string(),
        Ok(sc) => Simulation::new(sc, &s, None).err().expect("an error").to_string(),
    };
    assert!(e.contains("machine.page_size") && e.contains("flat"), "{e}");
}
