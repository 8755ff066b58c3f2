//! Run a scenario from the command line without Python (for profiling):
//! `cargo run --release -p tierlab-sim --example run -- SPEC [key=value ...] [only=TECH,...]`
//! `cargo run --release -p tierlab-sim --example run -- --bench`

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(|s| s.as_str()) == Some("--bench") {
        match tierlab_sim::bench::engine(args.get(1).map(|s| s == "quick").unwrap_or(false)) {
            Ok(r) => {
                for (k, v) in r {
                    println!("{k:24} {:>8.2} M accesses/s", v / 1e6);
                }
            }
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let Some(spec) = args.first() else {
        eprintln!("usage: run SPEC [key=value ...] | --bench [quick]");
        std::process::exit(2);
    };
    // `only=A,B` keeps those telemetry techniques (`only=` none); other args are overrides.
    let only: Option<Vec<String>> = args[1..]
        .iter()
        .find_map(|a| a.strip_prefix("only="))
        .map(|v| v.split(',').filter(|s| !s.is_empty()).map(String::from).collect());
    let overrides: Vec<String> = args[1..].iter().filter(|a| !a.starts_with("only=")).cloned().collect();
    let result = tierlab_sim::scenario::open(spec, &overrides, None).and_then(|(mut sc, src)| {
        tierlab_sim::scenario::select_techniques(&mut sc, &src, only.as_deref())?;
        tierlab_sim::driver::Simulation::new(sc, &src, None)?
            .run(&mut |_| tierlab_sim::driver::Control::Continue)
    });
    match result {
        Ok(r) => {
            for (k, v) in r.stats.iter() {
                if !k.starts_with("machine.core.") {
                    println!("{k} = {v:?}");
                }
            }
            let acc = r.stats.get_u64("machine.accesses") as f64;
            println!("wall_seconds = {:.3}", r.wall_seconds);
            println!("accesses_per_wall_second = {:.0}", acc / r.wall_seconds);
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
