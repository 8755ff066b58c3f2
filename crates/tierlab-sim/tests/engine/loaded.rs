//! Loaded latency on a running machine: idle latency at zero load, latency rising with the
//! bandwidth a node serves (own traffic, background traffic), determinism.

use crate::common::{f, run, src};
use tierlab_sim::scenario::load;

/// Two cores reading a 16 MiB heap at random, every page on node `fast` (the slow node sees
/// no traffic); `fast` has a peak of 2 GB/s so the two cores load it.
const BASE: &str = r#"
duration = "100ms"
window = "50ms"
[machine]
cores = 2
[[machine.nodes]]
name = "fast"
capacity = "64MiB"
latency_ns = 90.0
bandwidth_gbps = 2.0
[machine.nodes.loaded]
[[machine.nodes]]
name = "slow"
capacity = "64MiB"
latency_ns = 300.0
bandwidth_gbps = 1.0
tier = 1
[machine.nodes.loaded]
[workload]
kind = "uniform"
footprint = "16MiB"
threads = 2
populate = true
"#;

#[test]
fn zero_load_is_idle_latency_and_load_raises_it() {
    let r = run(BASE, &[]);
    // The slow node serves nothing: its latency stays idle.
    assert_eq!(f(&r, "node.slow.accesses"), 0.0);
    assert_eq!(f(&r, "node.slow.loaded.max_factor"), 1.0);
    assert_eq!(f(&r, "node.slow.loaded.mean_latency_ns"), 300.0);
    // The fast node serves two cores of random 64-byte reads: ~1.4 GB/s of its 2 GB/s.
    let u = f(&r, "node.fast.loaded.mean_utilization");
    assert!(u > 0.3 && u < 1.0, "utilization {u}");
    let lat = f(&r, "node.fast.loaded.mean_latency_ns");
    assert!(lat > 90.0 && lat < 90.0 * 1.6, "{lat}");
    // Without the model the same run is faster (more accesses in the same time).
    let idle = run(&BASE.replace("[machine.nodes.loaded]\n", ""), &[]);
    assert!(f(&idle, "machine.accesses") > f(&r, "machine.accesses") * 1.02);
    // More load, more latency: background traffic (an antagonist) on the fast node.
    let bg = run(BASE, &["machine.nodes[0].loaded.background_read_gbps=1.0"]);
    let lat_bg = f(&bg, "node.fast.loaded.mean_latency_ns");
    assert!(lat_bg > lat, "{lat_bg} vs {lat}");
    assert!(f(&bg, "machine.accesses") < f(&r, "machine.accesses"));
    let cols = r.timeseries.column("node.fast.loaded_latency_ns").unwrap();
    assert!(cols.iter().all(|&l| l >= 90.0));
    // Deterministic.
    let again = run(BASE, &[]);
    assert_eq!(again.stats.to_flat_json(), r.stats.to_flat_json());
}

#[test]
fn bad_loaded_fields_are_named() {
    let s = src(BASE);
    let e = load(&s, &["machine.nodes[1].loaded.peak_write_gbps=-1.0".into()], None).unwrap_err().to_string();
    assert!(e.contains("machine.nodes[1].loaded.peak_write_gbps"), "{e}");
    let e = load(&s, &["machine.nodes[0].loaded.curve=\"points\"".into()], None).unwrap_err().to_string();
    assert!(e.contains("machine.nodes[0].loaded.points"), "{e}");
}
