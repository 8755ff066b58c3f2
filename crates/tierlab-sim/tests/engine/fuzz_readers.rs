//! Fuzz harness of the engine's readers (issue 18): every built-in scenario and a corpus of
//! masim configs, mutated deterministically (byte flips, hostile numbers in place of
//! numbers, lines deleted, duplicated and swapped, truncation), through the scenario loader,
//! the simulation's build and the masim parser. None may panic; every error names its place (the scenario's file,
//! line and field, or a file it names).
//! A scenario that loads and builds is also run for one short window.
//!
//! `TIERLAB_FUZZ_CASES` sets the mutations per input (default 40; the corpus of hostile cases
//! of issue 18 is in `scenario::tests` and `masim_config::tests`).

use std::panic::{catch_unwind, AssertUnwindSafe};

use tierlab_sim::driver::{Control, Simulation};
use tierlab_sim::rng::Rng;
use tierlab_sim::scenario::{load, Source, BUILTINS};
use tierlab_sim::workload::masim_config::parse_masim;

const HOSTILE: &[&str] = &[
    "0",
    "-1",
    "1e300",
    "-1e300",
    "nan",
    "inf",
    "18446744073709551615",
    "9223372036854775807",
    "-9223372036854775808",
    "4294967296",
    "0.5",
    "\"\"",
    "\"1ns\"",
    "\"1e300s\"",
    "\"16EiB\"",
    "\"-5MiB\"",
    "[]",
    "{}",
    "true",
];

const MASIM: &[&str] = &[
    "a, 4096\nb, 2M, none\n\nfirst\n10\na, 0, 64, 1\nb, 1, 4096, 3, ro\n\nsecond\n5\nb, 0, 64, 2, rw\n",
    "#regions\na, 100000000\n\n#phase\np\n1000\na, 1, 4096, 50, wo\n",
];

fn cases() -> usize {
    std::env::var("TIERLAB_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(40)
}

/// One mutation of `text`.
fn mutate(text: &str, rng: &mut Rng) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if lines.is_empty() {
        return String::new();
    }
    let n = 1 + rng.below(3);
    for _ in 0..n {
        let i = rng.below(lines.len() as u64) as usize;
        match rng.below(7) {
            // A number (or a quoted value) replaced by a hostile one.
            0 | 1 => {
                let l = &lines[i];
                if let Some(eq) = l.find('=') {
                    let h = HOSTILE[rng.below(HOSTILE.len() as u64) as usize];
                    lines[i] = format!("{} {h}", &l[..=eq]);
                } else if let Some(c) = l.rfind(',') {
                    let h = HOSTILE[rng.below(HOSTILE.len() as u64) as usize].trim_matches('"');
                    lines[i] = format!("{}, {h}", &l[..c]);
                }
            }
            2 => {
                lines.remove(i);
                if lines.is_empty() {
                    return String::new();
                }
            }
            3 => {
                let l = lines[i].clone();
                lines.insert(i, l);
            }
            4 => {
                let j = rng.below(lines.len() as u64) as usize;
                lines.swap(i, j);
            }
            5 => {
                // A byte flipped (kept valid UTF-8 by flipping within ASCII).
                let mut b = lines[i].clone().into_bytes();
                if !b.is_empty() {
                    let k = rng.below(b.len() as u64) as usize;
                    b[k] = (b[k] ^ (1 << rng.below(7))) & 0x7f;
                }
                lines[i] = String::from_utf8(b).unwrap_or_default();
            }
            _ => lines.truncate(i.max(1)),
        }
    }
    lines.join("\n") + "\n"
}

#[test]
fn mutated_scenarios_never_panic() {
    let per = cases();
    let mut rng = Rng::new(0x5eed);
    let (mut loaded, mut ran) = (0, 0);
    for b in BUILTINS {
        for k in 0..per {
            let text = mutate(b.text, &mut rng);
            let src = Source {
                text: text.clone(),
                file: format!("fuzz-{}-{k}.toml", b.name),
                base_dir: ".".into(),
            };
            // A short run: the mutated scenario's own duration is not what is tested here.
            let overrides = vec!["duration=\"2ms\"".to_string(), "window=\"1ms\"".to_string()];
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                let sc = match load(&src, &[], None) {
                    Ok(sc) => sc,
                    Err(e) => return Err(e.to_string()),
                };
                let sc2 = match load(&src, &overrides, None) {
                    Ok(sc) => sc,
                    // The original loaded: the same text with two valid overrides may not
                    // (stages, sweeps): that is an error with a place too.
                    Err(e) => return Err(e.to_string()),
                };
                drop(sc);
                let sim = Simulation::new(sc2, &src, None).map_err(|e| e.to_string())?;
                sim.run(&mut |_| Control::Continue).map(|_| true).map_err(|e| e.to_string())
            }));
            match outcome {
                Err(_) => panic!("panic on this scenario ({}, case {k}):\n{text}", b.name),
                Ok(Err(msg)) => {
                    assert!(!msg.trim().is_empty(), "empty error for:\n{text}");
                    // The scenario's place, or the place in a file it names (a recording).
                    let place = msg.split(": ").next().unwrap_or("");
                    assert!(
                        msg.contains(": ") && !place.is_empty() && !msg.contains("panicked"),
                        "error without its place: {msg}\n{text}"
                    );
                }
                Ok(Ok(_)) => ran += 1,
            }
            loaded += 1;
        }
    }
    assert_eq!(loaded, BUILTINS.len() * per);
    // Most mutations break a scenario; some must still run (the harness reaches the engine).
    assert!(ran > 0, "no mutated scenario ran");
}

#[test]
fn mutated_masim_configs_never_panic() {
    let per = cases() * 10;
    let mut rng = Rng::new(0xcafe);
    let mut ok = 0;
    for (i, base) in MASIM.iter().enumerate() {
        for k in 0..per {
            let text = mutate(base, &mut rng);
            let file = format!("fuzz-{i}-{k}.cfg");
            match catch_unwind(|| parse_masim(&text, &file)) {
                Err(_) => panic!("panic on this masim config:\n{text}"),
                Ok(Err(e)) => assert!(e.to_string().starts_with(&file), "{e}"),
                Ok(Ok(c)) => {
                    assert!(!c.regions.is_empty() && !c.phases.is_empty());
                    ok += 1;
                }
            }
        }
    }
    assert!(ok > 0);
}
