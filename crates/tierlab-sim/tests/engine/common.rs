//! Helpers the test modules share: load a scenario text with overrides and run it to the end.

use tierlab_sim::driver::{Control, RunResult, Simulation};
use tierlab_sim::scenario::{load, Source};

pub fn src(text: &str) -> Source {
    Source { text: text.into(), file: "t.toml".into(), base_dir: ".".into() }
}

/// Run `text` with `key=value` overrides; panics with the error's message.
pub fn run(text: &str, overrides: &[&str]) -> RunResult {
    let s = src(text);
    let ov: Vec<String> = overrides.iter().map(|o| o.to_string()).collect();
    let sc = load(&s, &ov, None).unwrap_or_else(|e| panic!("{e}"));
    Simulation::new(sc, &s, None).unwrap().run(&mut |_| Control::Continue).unwrap()
}

/// A statistic as a number; panics when the run has no such statistic.
pub fn f(r: &RunResult, k: &str) -> f64 {
    r.stats.get(k).unwrap_or_else(|| panic!("no stat {k}")).as_f64()
}

/// A small tiered key-value store: 200 k keys (218 MB) in the slow tier, 32 MiB of DRAM; its
/// scenario text for a run length and window (`kv_store!("4s", "250ms")`).
macro_rules! kv_store {
    ($duration:literal, $window:literal) => {
        concat!(
            "\nseed = 3\nduration = \"",
            $duration,
            "\"\nwindow = \"",
            $window,
            "\"\n",
            r#"[machine]
cores = 2
[[machine.nodes]]
name = "dram"
capacity = "32MiB"
latency_ns = 90.0
bandwidth_gbps = 100.0
[[machine.nodes]]
name = "slow"
capacity = "1GiB"
latency_ns = 300.0
bandwidth_gbps = 20.0
tier = 1
[workload]
kind = "kv"
keys = 200000
distribution = "zipfian"
clients = 4
node = 1
"#
        )
    };
}
pub(crate) use kv_store;

/// The key-value store as the DAMOS and optimum tests run it: 4 s in 250 ms windows.
pub const KV: &str = kv_store!("4s", "250ms");
