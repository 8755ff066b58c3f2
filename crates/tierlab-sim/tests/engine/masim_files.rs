//! The masim configuration files shipped with ../shared (real files from the masim project)
//! run unchanged through the full machine, and each region's share of accesses in each phase
//! matches the config's weights.

use std::path::PathBuf;

use tierlab_sim::driver::run_spec;
use tierlab_sim::stats::{StatValue, Stats};

/// A masim config of ../shared/data/masim. Its absence fails the test (a test that passes
/// without running would say nothing): the shared directory lies beside the repository in
/// every checkout the tests run in, CI's included.
fn shared_masim(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/masim").join(name);
    assert!(
        p.is_file(),
        "{}: not found; these tests run masim's own configuration files from ../shared/data/masim \
         (the shared directory beside the repository)",
        p.display()
    );
    p.to_string_lossy().to_string()
}

/// (phase index, phase name, [(region, accesses)]) of one phase.
type Phase = (usize, String, Vec<(String, u64)>);

/// The phases read back from the stats.
fn phases(stats: &Stats) -> Vec<Phase> {
    let mut out = Vec::new();
    for i in 0.. {
        let name = match stats.get(&format!("workload.phase.{i}.name")) {
            Some(StatValue::Str(s)) => s.clone(),
            _ => break,
        };
        let prefix = format!("workload.phase.{i}.region.");
        let regions = stats
            .iter()
            .filter_map(|(k, v)| {
                let rest = k.strip_prefix(&prefix)?;
                let region = rest.strip_suffix(".accesses")?;
                Some((region.to_string(), v.as_f64() as u64))
            })
            .collect();
        out.push((i, name, regions));
    }
    out
}

/// Every region's share in every phase equals its weight share within 1 percentage point;
/// `weights[phase] = [(region, weight)]` as written in the config.
fn check_shares(stats: &Stats, weights: &[Vec<(&str, f64)>]) {
    let ph = phases(stats);
    assert_eq!(ph.len(), weights.len(), "phases run: {ph:?}");
    for ((i, name, regions), w) in ph.iter().zip(weights) {
        let total: u64 = regions.iter().map(|r| r.1).sum();
        assert!(total > 0, "phase {i} ({name}) made no accesses");
        let wsum: f64 = w.iter().map(|x| x.1).sum();
        for (region, weight) in w {
            let got = regions.iter().find(|r| r.0 == *region).map(|r| r.1).unwrap_or(0);
            let share = got as f64 / total as f64;
            let want = weight / wsum;
            assert!(
                (share - want).abs() <= 0.01,
                "phase {i} ({name}) region {region}: share {share:.4}, weight share {want:.4}"
            );
        }
        for (region, n) in regions {
            assert!(w.iter().any(|x| x.0 == region) || *n == 0, "phase {i}: unexpected region {region}");
        }
    }
}

/// The long configs (70 s zigzag, 60 s stairs) on a scale model of the default machine:
/// every access takes ten times longer (~1 us: 900 ns of CPU time on top of the ~96 ns of
/// memory access, TLB miss and walk), and a pattern choice makes a tenth of masim's 131,072
/// accesses. The config runs unchanged, with its phases at their natural lengths and about
/// as many pattern choices per phase as on the default machine (the choices are what the
/// shares are made of), but with a tenth of the accesses (~70 M instead of ~700 M for
/// zigzag) and so a tenth of the run time.
fn scale_model() -> Vec<String> {
    vec!["machine.cost.cpu_ns_per_access=900".to_string(), "workload.accesses_per_choice=13107".to_string()]
}

#[test]
fn zigzag_shares_match_weights() {
    let path = shared_masim("zigzag.cfg");
    let r = run_spec(&format!("masim:{path}"), &scale_model(), None).expect("zigzag runs");
    let mut w = vec![vec![("a", 1.0), ("b", 1.0)]];
    for _ in 0..6 {
        w.push(vec![("a", 50.0)]);
        w.push(vec![("b", 50.0)]);
    }
    check_shares(&r.stats, &w);
    // Natural length: 10 s + 12 x 5 s.
    let sim = r.stats.get("run.simulated_seconds").unwrap().as_f64();
    assert!((70.0..71.0).contains(&sim), "simulated {sim} s");
}

#[test]
fn stairs_shares_match_weights() {
    let path = shared_masim("stairs.cfg");
    let r = run_spec(&format!("masim:{path}"), &scale_model(), None).expect("stairs runs");
    let names: Vec<String> = (0..10).map(|i| format!("s{i}")).collect();
    let mut w: Vec<Vec<(&str, f64)>> = vec![names.iter().map(|n| (n.as_str(), 1.0)).collect()];
    for n in &names {
        w.push(vec![(n.as_str(), 50.0)]);
    }
    check_shares(&r.stats, &w);
}

#[test]
fn small_shared_configs_run_unchanged() {
    // default: 256/64/128-byte regions and explicit ro/wo/rw modes.
    let mut hint_test = None;
    for (name, phases_expected) in [("default", 2usize), ("2mb.cfg", 1), ("hint_test", 2)] {
        let path = shared_masim(name);
        let r = run_spec(&format!("masim:{path}"), &[], None).unwrap_or_else(|e| panic!("{name}: {e}"));
        let ph = phases(&r.stats);
        assert_eq!(ph.len(), phases_expected, "{name}: {ph:?}");
        assert!(r.stats.get_u64("machine.accesses") > 0, "{name}");
        assert_eq!(
            r.stats.get_u64("machine.accesses"),
            r.stats.get_u64("workload.accesses"),
            "{name}: every generated access executed"
        );
        if name == "hint_test" {
            hint_test = Some(r);
        }
    }
    // hint_test (the same run): weights 99:1 then 1:99.
    let r = hint_test.expect("hint_test ran");
    check_shares(&r.stats, &[vec![("a", 99.0), ("b", 1.0)], vec![("a", 1.0), ("b", 99.0)]]);
}

#[test]
fn same_seed_same_stats_other_seed_differs() {
    let path = shared_masim("hint_test");
    let spec = format!("masim:{path}");
    let short = vec!["duration=\"300ms\"".to_string()];
    let a = run_spec(&spec, &short, Some(7)).unwrap().stats;
    let b = run_spec(&spec, &short, Some(7)).unwrap().stats;
    let c = run_spec(&spec, &short, Some(8)).unwrap().stats;
    assert_eq!(a, b);
    assert_ne!(a, c);
}
