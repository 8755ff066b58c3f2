//! `tierlab bench engine`: simulated accesses per wall-clock second.
//!
//! Three headline figures (keys of [`engine`]'s map):
//! - `generate`: workload generation alone (STREAM triad, batches discarded);
//! - `machine_1core`: the full machine (TLB, page walks setting Accessed bits, faults, the
//!   cost model and exact ground truth) on one core running STREAM triad;
//! - `machine_16core`: the same machine with 16 cores, 16 threads.
//!
//! Extra keys measure harder access patterns on one core: `machine_1core_masim` (the demo's
//! masim zigzag, a new page and a TLB miss on every access) and `machine_1core_random`
//! (uniform random over 1 GiB: almost every access misses the TLB and walks).
//! Benchmarks are measurements, never test assertions.

use std::time::Instant;

use crate::driver::{Control, Simulation};
use crate::error::Result;
use crate::os::{Machine, MachineConfig};
use crate::scenario::{load, Source};
use crate::workload::{BuildCtx, Step};

fn scenario(workload: &str, cores: usize, duration: &str) -> String {
    format!(
        "name = \"bench\"\nduration = \"{duration}\"\nwindow = \"100ms\"\n[machine]\ncores = {cores}\n\
         [[machine.nodes]]\nname = \"dram\"\ncapacity = \"64GiB\"\nlatency_ns = 90.0\n\n[workload]\n{workload}\nthreads = {cores}\n"
    )
}

const TRIAD: &str = "kind = \"stream\"\nkernel = \"triad\"\narray_size = \"64MiB\"";
const RANDOM: &str = "kind = \"uniform\"\nfootprint = \"1GiB\"";

fn machine_rate(text: &str) -> Result<(f64, u64)> {
    let src = Source { text: text.to_string(), file: "<bench>".into(), base_dir: ".".into() };
    let sc = load(&src, &[], None)?;
    let sim = Simulation::new(sc, &src, None)?;
    let r = sim.run(&mut |_| Control::Continue)?;
    let acc = r.stats.get_u64("machine.accesses");
    Ok((acc as f64 / r.wall_seconds, acc))
}

fn generate_rate(accesses: u64) -> Result<f64> {
    let src = Source { text: scenario(TRIAD, 1, "1s"), file: "<bench>".into(), base_dir: ".".into() };
    let sc = load(&src, &[], None)?;
    let ctx = BuildCtx {
        seed: 1,
        cores: 1,
        scenario_file: "<bench>".into(),
        duration: crate::units::Ps::from_ns(1_000_000_000),
        ..Default::default()
    };
    let mut w = sc.workload.build(&ctx)?;
    let mut m = Machine::new(&MachineConfig { cores: 1, ..sc.machine.clone() });
    w.setup(&mut m)?;
    let mut buf = Vec::with_capacity(1 << 17);
    let mut n = 0u64;
    let mut checksum = 0u64;
    let t = Instant::now();
    while n < accesses {
        buf.clear();
        let s = w.next_batch(0, crate::units::Ps::ZERO, &mut buf, &mut m)?;
        n += buf.len() as u64;
        checksum = checksum.wrapping_add(buf.last().map(|a| a.addr).unwrap_or(0));
        if s == Step::Done {
            break;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    std::hint::black_box(checksum);
    Ok(n as f64 / secs)
}

/// Run the engine benchmarks; `quick` shortens every run (for smoke tests).
pub fn engine(quick: bool) -> Result<Vec<(String, f64)>> {
    let scale = if quick { 0.05 } else { 1.0 };
    let dur = |s: f64| format!("{}ms", ((s * scale * 1000.0).round() as u64).max(1));
    let mut out = Vec::new();
    out.push(("generate".to_string(), generate_rate((400_000_000.0 * scale) as u64)?));
    // ~11 ns of simulated time per triad access (mostly TLB hits).
    out.push(("machine_1core".to_string(), machine_rate(&scenario(TRIAD, 1, &dur(4.0)))?.0));
    out.push(("machine_16core".to_string(), machine_rate(&scenario(TRIAD, 16, &dur(0.5)))?.0));
    let demo = crate::scenario::builtin("demo").expect("demo").text;
    let masim = format!("{demo}\n")
        .replace("window = \"100ms\"", &format!("window = \"100ms\"\nduration = \"{}\"", dur(2.0)));
    out.push(("machine_1core_masim".to_string(), machine_rate(&masim)?.0));
    out.push(("machine_1core_random".to_string(), machine_rate(&scenario(RANDOM, 1, &dur(2.0)))?.0));
    Ok(out)
}
