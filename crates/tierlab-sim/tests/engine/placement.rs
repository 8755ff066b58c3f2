//! Simulated ccNUMA placement: first-touch, interleave and profile-guided placement of the
//! serially initialized `omp-kernel` workloads of the built-in `numa-placement` scenario,
//! run small (footprints a few MiB, few iterations).

use tierlab_sim::driver::{run_spec, RunResult};
use tierlab_sim::scenario;
use tierlab_sim::stats::StatValue;

/// Overrides that shrink a point of `numa-placement` for tests.
fn small(kernel: &str) -> Vec<String> {
    let w = match kernel {
        "stream" => {
            "workload = { kind = \"omp-kernel\", kernel = \"stream\", init = \"serial\", array_size = \"1MiB\", iterations = 8, threads = 8 }"
        }
        _ => {
            "workload = { kind = \"omp-kernel\", kernel = \"jacobi\", init = \"serial\", nx = 32, ny = 32, nz = 32, iterations = 16, threads = 8 }"
        }
    };
    // A small cache so the small arrays still miss once per line per sweep.
    vec![w.to_string(), "machine.cache.size = \"32KiB\"".to_string()]
}

/// Run sweep point `label` of `numa-placement` with `extra` overrides after its own.
fn point(label: &str, extra: &[String], seed: Option<u64>) -> RunResult {
    let (sc, _) = scenario::open("numa-placement", &[], None).unwrap();
    let p = sc.sweep.iter().find(|p| p.label == label).unwrap_or_else(|| panic!("no point {label}"));
    let mut ov = p.set.clone();
    ov.extend(extra.iter().cloned());
    run_spec("numa-placement", &ov, seed).unwrap_or_else(|e| panic!("{label}: {e}"))
}

fn f(r: &RunResult, k: &str) -> f64 {
    r.stats.get(k).unwrap_or_else(|| panic!("no stat {k}")).as_f64()
}

fn run_time(r: &RunResult) -> f64 {
    f(r, "placement.run_time_s")
}

#[test]
fn profile_guided_beats_first_touch_on_serial_init_kernels() {
    for kernel in ["stream", "jacobi"] {
        for nodes in [2, 4] {
            let mut ov = small(kernel);
            ov.push("placement.period = 100".into());
            let ft = point(&format!("{kernel}/{nodes}-nodes/first-touch"), &small(kernel), None);
            let il = point(&format!("{kernel}/{nodes}-nodes/interleave"), &small(kernel), None);
            let pg = point(&format!("{kernel}/{nodes}-nodes/profile-guided"), &ov, None);
            let (t_ft, t_il, t_pg) = (run_time(&ft), run_time(&il), run_time(&pg));
            // First touch of serially initialized data: everything on node 0.
            let on0 = f(&ft, "placement.resident_pages.node0");
            let total: f64 = (0..nodes).map(|n| f(&ft, &format!("placement.resident_pages.node{n}"))).sum();
            assert!(
                on0 >= 0.999 * total,
                "{kernel}/{nodes}: first touch put {on0} of {total} pages on node 0"
            );
            assert!(
                t_pg < 0.9 * t_ft,
                "{kernel}/{nodes}: profile-guided {t_pg} s is not 10% faster than first touch {t_ft} s"
            );
            assert!(t_pg < t_il, "{kernel}/{nodes}: profile-guided {t_pg} s vs interleave {t_il} s");
            assert!(t_il < t_ft, "{kernel}/{nodes}: interleave {t_il} s vs first touch {t_ft} s");
            // Affinity placement makes more accesses local (the spinning of the waiting
            // threads on the flag during the serial initialization counts too).
            let (l_ft, l_pg) =
                (f(&ft, "placement.local_access_fraction"), f(&pg, "placement.local_access_fraction"));
            assert!(l_pg > l_ft + 0.1, "{kernel}/{nodes}: local fraction {l_pg} vs first touch {l_ft}");
            // Every node holds a fair share of the pages.
            for n in 0..nodes {
                let p = f(&pg, &format!("placement.resident_pages.node{n}"));
                assert!(p > 0.5 * total / nodes as f64, "{kernel}/{nodes}: node{n} has {p} of {total} pages");
            }
            // The profiling run's interrupts are the reported overhead.
            let over = f(&pg, "placement.profiling_overhead_pct");
            assert!(over > 0.0 && over < 50.0, "{kernel}/{nodes}: overhead {over}%");
            assert!(f(&pg, "placement.profile.samples") > 0.0);
            assert_eq!(f(&ft, "placement.profiling_overhead_pct"), 0.0);
        }
    }
}

#[test]
fn migrate_mode_moves_pages_and_charges_them() {
    let mut ov = small("stream");
    ov.push("placement.period = 100".into());
    ov.push("placement.interval = \"15ms\"".into());
    let ft = point("stream/2-nodes/first-touch", &small("stream"), None);
    let mg = point("stream/2-nodes/profile-guided-migrate", &ov, None);
    assert!(f(&mg, "placement.migrate.pages") > 100.0);
    assert!(f(&mg, "placement.migrate.time_s") > 0.0);
    assert!(f(&mg, "placement.overhead_pct") > 0.0);
    assert!(f(&mg, "node.node1.resident_bytes") > 0.0, "pages moved to node 1");
    assert!(run_time(&mg) < run_time(&ft), "{} vs {}", run_time(&mg), run_time(&ft));
}

#[test]
fn tlb_miss_source_also_finds_affinities() {
    let mut ov = small("jacobi");
    ov.push("placement.source = \"tlb-misses\"".into());
    ov.push("placement.period = 1".into());
    let ft = point("jacobi/2-nodes/first-touch", &small("jacobi"), None);
    let pg = point("jacobi/2-nodes/profile-guided", &ov, None);
    assert_eq!(pg.stats.get("placement.profile.source"), Some(&StatValue::Str("tlb-misses".into())));
    assert!(f(&pg, "placement.profile.pages_with_affinity") > 0.0);
    assert!(run_time(&pg) < run_time(&ft));
}

#[test]
fn interleave_spreads_pages_evenly() {
    for nodes in [2usize, 4] {
        let r = point(&format!("stream/{nodes}-nodes/interleave"), &small("stream"), None);
        let pages: Vec<f64> =
            (0..nodes).map(|n| f(&r, &format!("placement.resident_pages.node{n}"))).collect();
        let total: f64 = pages.iter().sum();
        assert!(total >= 3.0 * 256.0, "{pages:?}");
        for p in &pages {
            assert!((p - total / nodes as f64).abs() <= 2.0, "{nodes} nodes: {pages:?} is not even");
        }
    }
}

#[test]
fn same_seed_same_numbers() {
    let mut ov = small("jacobi");
    ov.push("placement.period = 100".into());
    for label in ["jacobi/4-nodes/profile-guided", "jacobi/4-nodes/profile-guided-migrate"] {
        let mut o = ov.clone();
        if label.ends_with("migrate") {
            o.push("placement.interval = \"3ms\"".into());
        }
        let a = point(label, &o, Some(7));
        let b = point(label, &o, Some(7));
        assert_eq!(a.stats, b.stats, "{label}");
        assert_eq!(a.timeseries.columns, b.timeseries.columns, "{label}");
    }
}

#[test]
fn bad_placement_config_names_the_field() {
    let err = |ov: &[&str]| {
        let ov: Vec<String> = ov.iter().map(|s| s.to_string()).collect();
        scenario::open("numa-placement", &ov, None).err().map(|e| e.to_string()).unwrap_or_default()
    };
    let e = err(&["placement = { kind = \"profile-guided\", period = 0 }"]);
    assert!(e.contains("placement.period"), "{e}");
    let e = err(&["placement = { kind = \"profile-guided\", perod = 10 }"]);
    assert!(e.contains("perod"), "{e}");
    let e = err(&["placement = { kind = \"profile-guided\", mode = \"later\" }"]);
    assert!(e.contains("later"), "{e}");
    let e = err(&["placement = { kind = \"nearest\" }"]);
    assert!(e.contains("nearest"), "{e}");
    let e = err(&["placement = { kind = \"profile-guided\", core = 99 }"]);
    assert!(e.contains("placement.core"), "{e}");
    let e = err(&["workload.iterations = 0"]);
    let e2 = scenario::open("numa-placement", &["workload.iterations=0".to_string()], None)
        .map(|(sc, src)| tierlab_sim::driver::Simulation::new(sc, &src, None).err().map(|e| e.to_string()))
        .unwrap()
        .unwrap_or_default();
    assert!(e.is_empty() && e2.contains("workload.iterations"), "{e} / {e2}");
    // In a file, the error carries the line.
    let text = "[machine]\ncores = 2\n[workload]\nkind = \"omp-kernel\"\n[placement]\nkind = \"profile-guided\"\nbuffer_records = 0\n";
    let src = scenario::Source { text: text.into(), file: "p.toml".into(), base_dir: ".".into() };
    let e = scenario::load(&src, &[], None).unwrap_err().to_string();
    assert!(e.contains("p.toml:7") && e.contains("placement.buffer_records"), "{e}");
}
