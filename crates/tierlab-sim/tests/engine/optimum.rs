//! The optimum bound (`optimum.*`): never below what a policy achieved.

use crate::common::{f, run, KV};

#[test]
fn the_bound_is_never_below_a_policy() {
    let ts =
        r#"telemetry=[{name = "ts", kind = "telescope", sample_interval = "5ms", aggr_interval = "100ms"}]"#;
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("baseline", vec![]),
        ("hottest-first", vec![ts, r#"tiering={kind = "hottest-first", telemetry = "ts"}"#]),
        (
            "hemem",
            vec![
                r#"telemetry=[{name = "p", kind = "pebs", period = 101}]"#,
                r#"tiering={kind = "hemem", telemetry = "p"}"#,
            ],
        ),
        (
            "colloid",
            vec![
                r#"telemetry=[{name = "p", kind = "pebs", period = 101}]"#,
                r#"tiering={kind = "colloid", telemetry = "p", quantum = "100ms"}"#,
            ],
        ),
        (
            "numa-tiering",
            vec![r#"tiering={kind = "numa-tiering", scan_period = "50ms", scan_delay = "50ms"}"#],
        ),
        (
            "damon-mtier",
            vec![r#"tiering={kind = "damon-mtier", apply_interval = "50ms", quota_reset_interval = "50ms"}"#],
        ),
    ];
    let mut base_bound = 0.0;
    for (label, ov) in cases {
        let mut ov = ov;
        ov.push(r#"duration="2s""#);
        let r = run(KV, &ov);
        let thr = f(&r, "workload.kv.throughput");
        let speedup = f(&r, "optimum.speedup");
        let (acc, best, got) =
            (f(&r, "optimum.accesses"), f(&r, "optimum.fast_accesses"), f(&r, "optimum.run_fast_accesses"));
        assert_eq!(acc, f(&r, "machine.accesses"), "{label}: the truth counts every access");
        assert!(best >= got, "{label}: the epoch bound serves {best} from the fast tier, the run {got}");
        assert!(speedup >= 1.0, "{label}: speedup {speedup}");
        assert!(f(&r, "optimum.app_seconds") <= f(&r, "run.app_seconds"));
        eprintln!(
            "{label}: thr {thr:.0} bound {:.0} fast share {:.3} / {:.3} speedup {speedup:.3}",
            thr * speedup,
            got / acc,
            best / acc
        );
        if label == "baseline" {
            assert_eq!(got, 0.0);
            base_bound = thr * speedup;
            assert!(speedup > 1.2, "the hot data fits the fast tier: much to gain");
        } else {
            assert!(f(&r, "tiering.promoted_pages") > 0.0, "{label}");
        }
        // The bound from the baseline's run is above every policy's throughput.
        assert!(thr <= base_bound, "{label}: {thr} > the baseline's bound {base_bound}");
        let share = r.timeseries.column("optimum.fast_share").unwrap();
        assert!(share.iter().all(|&x| (0.0..=1.0).contains(&x)));
    }
}
