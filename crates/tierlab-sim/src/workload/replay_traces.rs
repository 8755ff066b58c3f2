//! Recordings of real programs shipped inside the engine, for the built-in replay scenarios:
//! `path = "builtin:NAME"` in a `replay` workload. On first use a recording is written to
//! the system's temporary directory (once per content; later runs reuse it) and replayed
//! from there like any other.
//!
//! - `omp-stencil`: `tests/programs/traced/omp_stencil.c 512 6` (2-D 5-point Jacobi on two 512 x 512
//!   grids of doubles, six sweeps) with 4 OpenMP threads, traced by `tierlab trace --cc`
//!   (gcc 12 -O2 -fopenmp): 8,327,396 accesses (6,242,487 loads), 1,030 touched pages.
//! - `kv-zipf`: `tests/programs/traced/kv_zipf.c 32768 256 60000 5` (a key-value store: an
//!   open-addressing hash index and a slab of 256-byte values in insertion order; 60,000
//!   Zipfian requests, theta 0.99 over insertion order, 5% updates), one thread, traced by
//!   `tierlab trace --cc` (gcc 12 -O2 -lm): 491,722 accesses (294,770 loads).

use std::path::PathBuf;

use crate::error::{Location, Result, SimError};

/// A built-in recording: its name and its files (path relative to the recording, bytes).
pub struct BuiltinTrace {
    /// Name after `builtin:`.
    pub name: &'static str,
    /// The recording's files.
    pub files: &'static [(&'static str, &'static [u8])],
}

macro_rules! trace_files {
    ($dir:literal: $($f:literal),* $(,)?) => {
        &[$(($f, include_bytes!(concat!("../../scenarios/traces/", $dir, "/", $f)) as &[u8])),*]
    };
}

/// The built-in recordings.
pub const TRACES: &[BuiltinTrace] = &[
    BuiltinTrace {
        name: "omp-stencil",
        files: trace_files!("omp-stencil":
            "meta.json",
            "accesses/part-00000.parquet",
            "mappings/part-00000.parquet",
            "samples/part-00000.parquet",
            "drains/part-00000.parquet",
        ),
    },
    BuiltinTrace {
        name: "kv-zipf",
        files: trace_files!("kv-zipf":
            "meta.json",
            "accesses/part-00000.parquet",
            "mappings/part-00000.parquet",
            "samples/part-00000.parquet",
            "drains/part-00000.parquet",
        ),
    },
];

/// The directory holding built-in recording `name` (written on first use).
pub fn materialize(name: &str) -> Result<PathBuf> {
    let err = |msg: String| SimError::Input {
        at: Location { file: format!("builtin:{name}"), line: None, field: Some("workload.path".into()) },
        msg,
    };
    let Some(t) = TRACES.iter().find(|t| t.name == name) else {
        let names: Vec<&str> = TRACES.iter().map(|t| t.name).collect();
        return Err(err(format!("no built-in recording of that name (built-in: {})", names.join(", "))));
    };
    // FNV-1a of the contents names the directory: a new version gets a new one.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (f, bytes) in t.files {
        for b in f.bytes().chain(bytes.iter().copied()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    let dir = std::env::temp_dir().join(format!("tierlab-builtin-{name}-{h:016x}"));
    if dir.join("meta.json").is_file() {
        return Ok(dir);
    }
    let tmp = std::env::temp_dir().join(format!(".tierlab-builtin-{name}-{h:016x}-{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        for (f, bytes) in t.files {
            let p = tmp.join(f);
            std::fs::create_dir_all(p.parent().expect("parent"))?;
            std::fs::write(p, bytes)?;
        }
        match std::fs::rename(&tmp, &dir) {
            // Another process was first: use its copy.
            Err(_) if dir.join("meta.json").is_file() => {
                let _ = std::fs::remove_dir_all(&tmp);
                Ok(())
            }
            r => r,
        }
    };
    write().map_err(|e| err(format!("cannot write it to {}: {e}", dir.display())))?;
    Ok(dir)
}
