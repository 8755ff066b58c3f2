//! DAMOS in scenarios: `damon-mtier` promotes and demotes toward its quota goals, DAMON
//! telemetry runs schemes, damo scheme files and records.

use crate::common::{f, run, src, KV};
use tierlab_sim::driver::Simulation;
use tierlab_sim::scenario::load;

const MTIER: &str =
    r#"tiering={kind = "damon-mtier", apply_interval = "50ms", quota_reset_interval = "50ms"}"#;

/// mtier.c's two schemes on a 32 MiB fast tier, with 50 ms windows so the quota's
/// feedback loop (at most 2x per window from one byte) ramps up within the run: the fast
/// node fills toward its 99.7% goal, then the demotion scheme (goal 0.5% free) demotes.
#[test]
fn mtier_promotes_and_demotes_toward_its_goals() {
    let base = run(KV, &["duration=\"8s\"", "window=\"500ms\""]);
    let r = run(KV, &[MTIER, "duration=\"8s\"", "window=\"500ms\""]);
    assert!(f(&r, "tiering.promoted_pages") > 1000.0);
    assert!(f(&r, "tiering.demoted_pages") > 0.0, "the demotion scheme ran");
    assert_eq!(f(&r, "tiering.damon.damos.schemes"), 2.0);
    assert!(f(&r, "tiering.damon.damos.0.qt_exceeds") > 0.0);
    assert!(f(&r, "tiering.damon.interval_tunings") > 0.0, "intervals auto-tuning is on");
    let used = r.timeseries.column("tiering.fast_used_bytes").unwrap();
    let cap = (32u64 << 20) as f64;
    let tail = &used[used.len() / 2..];
    let mean = tail.iter().sum::<f64>() / tail.len() as f64;
    assert!(mean > 0.9 * cap && mean <= cap, "fast node use {mean} of {cap}: {used:?}");
    // The promotion quota grows while the node is below its goal, from one byte.
    let esz = r.timeseries.column("tiering.damon.damos.0.esz_bytes").unwrap();
    assert!(esz[0] < 4096.0 && esz[4] > 1e6, "{esz:?}");
    assert!(f(&r, "workload.kv.throughput") > 1.3 * f(&base, "workload.kv.throughput"));
}

/// Schemes of a DAMON telemetry technique, inline and from a damo file; watermarks that
/// keep every scheme off stop the sampling; a damo record of the snapshots.
#[test]
fn damon_telemetry_runs_schemes() {
    // `pageout` of regions unaccessed for 5 aggregations, `lru_prio` of the hot ones.
    let dir = std::env::temp_dir().join(format!("tierlab-damos-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("schemes.json");
    std::fs::write(
        &file,
        r#"[{"action": "lru_prio", "access_pattern": {"sz_bytes": {"min": "4 KiB", "max": "max"},
            "nr_accesses": {"min": "5 %", "max": "max"}, "age": {"min": "0 ns", "max": "max"}}}]"#,
    )
    .unwrap();
    let tel = format!(
        r#"telemetry=[{{name = "d", kind = "damon", record = true, damo_schemes = "{}", schemes = [{{action = "pageout", max_nr_accesses = 0, min_age = 5, quota = {{sz = "4MiB", reset_interval = "100ms"}}}}]}}]"#,
        file.display()
    );
    let r = run(KV, &[&tel, "duration=\"2s\""]);
    assert_eq!(f(&r, "telemetry.d.damos.schemes"), 2.0);
    assert!(f(&r, "telemetry.d.damos.0.sz_applied") > 0.0, "pages reclaimed");
    assert!(f(&r, "machine.swap.pageouts") > 0.0);
    assert!(f(&r, "telemetry.d.damos.1.sz_applied") > 0.0, "hot pages marked active");
    // The record: one snapshot per aggregation.
    let (label, json) = &r.damo_records[0];
    assert_eq!(label, "d");
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(v[0]["snapshots"].as_array().unwrap().len() as f64, f(&r, "telemetry.d.aggregations"));
    // Watermarks that keep the only scheme inactive (free memory is ~80% > high = 50%): no
    // sampling at all, only watermark checks every 100 ms.
    let off = r#"telemetry=[{name = "d", kind = "damon", schemes = [{action = "stat", watermarks = {metric = "free_mem_rate", interval = "100ms", high = 500, mid = 400, low = 200}}]}]"#;
    let r = run(KV, &[off, "duration=\"1s\""]);
    assert_eq!(f(&r, "telemetry.d.samples_checked"), 0.0);
    assert!(f(&r, "telemetry.d.damos.inactive_checks") >= 9.0);
    // Errors name the scheme and the field.
    let bad = r#"telemetry=[{name = "d", kind = "damon", schemes = [{action = "migrate_hot"}]}]"#;
    let s = src(KV);
    let sc = load(&s, &[bad.to_string()], None).unwrap();
    let e = Simulation::new(sc, &s, None).err().unwrap().to_string();
    assert!(e.contains("telemetry[0].schemes[0].target_nid"), "{e}");
}
