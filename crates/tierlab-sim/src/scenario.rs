//! Scenarios: TOML files naming the machine, the workload, observers/policies, the run
//! length, the window and the seed.
//!
//! A scenario is data. Unknown keys are errors (with file and line), every default can be
//! printed with [`export`], and `--set key=value` overrides any key. A scenario spec is a
//! file path, the name of a built-in scenario, or `masim:PATH` (a masim config run as it is
//! on the default machine).

use std::path::{Path, PathBuf};

use tierlab_core::param::{params, Declared};

use crate::error::{Location, Result, SimError};
use crate::os::MachineConfig;
use crate::units::Duration;
use crate::workload::{BuildCtx, WorkloadConfig};

/// A whole scenario.
#[params]
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Name shown in reports.
    #[param(default)]
    pub name: String,
    /// One line saying what it shows.
    #[param(default)]
    pub description: String,
    /// The one seed every random choice flows from.
    #[param(default = 1, range = "[0, 9.223372036854776e18]", setting)]
    pub seed: u64,
    /// Simulated run length; when absent, the workload's natural length (masim: the sum of
    /// its phases times `repeat`) or until every thread finishes.
    #[param(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration: Option<Duration>,
    /// Length of a ground-truth/statistics window.
    #[param(default = Duration(1_000_000_000))]
    pub window: Duration,
    /// Interleaving quantum of multi-core runs: cores advance in lockstep steps this long.
    #[param(default = Duration(10_000))]
    pub quantum: Duration,
    /// The machine.
    #[param(default)]
    pub machine: MachineConfig,
    /// The workload.
    #[param(required)]
    pub workload: WorkloadConfig,
    /// Telemetry observers (`[[telemetry]]` tables; `kind` = pte-scan, damon, telescope,
    /// pebs). `tierlab run` runs them all on one machine; `tierlab telemetry` runs each on a
    /// machine of its own.
    #[param(default)]
    pub telemetry: Vec<crate::agents::telemetry::TelemetryConfig>,
    /// How telemetry is scored against ground truth.
    #[param(default)]
    pub scoring: crate::scoring::ScoringConfig,
    /// Memory-management policies (`[[policies]]` tables; `kind` = fifo, lru, lru-exact,
    /// clock, cmcp: the page-replacement policy of the hierarchical memory mode, which
    /// `[machine.hmem]` turns on; at most one).
    #[param(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<crate::os::replacement::PolicyConfig>,
    /// Page placement policy (`[placement]`, `kind` = first-touch, interleave,
    /// profile-guided; see `placement`); absent = the machine's `placement` rule.
    #[param(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<crate::agents::placement::PlacementConfig>,
    /// Tiering policy (`[tiering]`, `kind` = hottest-first, hemem, memtis, numa-tiering;
    /// see `tiering`): promotion to the fast node and demotion, following the telemetry
    /// technique named by `telemetry`; absent = pages stay where they were placed.
    #[param(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tiering: Option<crate::agents::tiering::TieringConfig>,
    /// Report options.
    #[param(default)]
    pub report: ReportConfig,
    /// Stages (`[[stages]]`): the run as several simulations in order, each with its own
    /// overrides, a stage's output (placement plan, stats) the input of a later one (see
    /// `driver::stages`). Empty: one stage (or the stages a policy asks for).
    #[param(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageConfig>,
    /// Sweep points: each runs the scenario with its overrides applied (e.g. one point per
    /// footprint). Empty: the scenario runs as it is.
    #[param(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sweep: Vec<SweepPoint>,
}

/// One `[[stages]]` entry.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct StageConfig {
    /// Name (unique; `input` of a later stage refers to it).
    #[param(required)]
    pub name: String,
    /// Overrides (`key=value`, as `--set` takes them) applied to the scenario for this stage.
    #[param(default)]
    pub set: Vec<String>,
    /// The stage whose output (placement plan, stats) this one takes.
    #[param(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
}

/// One point of a sweep.
#[params]
#[derive(Clone, Debug)]
pub struct SweepPoint {
    /// Label in tables and plots (`1GB`, `cores=8`).
    #[param(required)]
    pub label: String,
    /// Overrides (`key=value`, as `--set` takes them) applied for this point.
    #[param(default)]
    pub set: Vec<String>,
}

/// Options of the built-in reports.
#[params]
#[derive(Clone, Debug)]
pub struct ReportConfig {
    /// Address bins of the access heatmap (split among mappings by size, at least one each).
    #[param(default = 128, range = "[1, 100000]", unit = "bins", setting)]
    pub heatmap_bins: usize,
    /// What the sweep points are called in reports and JSON (`footprints`, `cores`, ...).
    #[param(default = "points".into())]
    pub sweep_name: String,
    /// Count every access of the workload per page and window (exact ground truth; default
    /// true). `false` counts nothing per page: the run then has no heatmap, no
    /// `pages_touched`/`bytes_touched` columns, no optimum bound, no `tiering.fast_hot_bytes`
    /// and no `run.ground_truth_accesses`, and its telemetry can be scored only by the
    /// declared rule. Nothing simulated depends on it (agents never see ground truth): for
    /// runs that only time the application, such as `tierlab telemetry`'s baseline runs.
    #[param(default = true)]
    pub ground_truth: bool,
}

/// Where a scenario's text came from.
#[derive(Clone, Debug)]
pub struct Source {
    /// The TOML text.
    pub text: String,
    /// Name for messages (the path, or `<built-in NAME>`).
    pub file: String,
    /// Folder relative paths are resolved against.
    pub base_dir: PathBuf,
}

/// A built-in scenario: (name, description, TOML text).
pub struct Builtin {
    /// Name.
    pub name: &'static str,
    /// One line.
    pub description: &'static str,
    /// TOML.
    pub text: &'static str,
}

/// The built-in scenarios shipped with the engine.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "demo",
        description:
            "masim zigzag-style phases on a two-tier machine whose fast tier holds one of the two regions",
        text: include_str!("../scenarios/demo.toml"),
    },
    Builtin {
        name: "heap-5tb",
        description:
            "a fully populated 5 TiB heap of 4 KiB pages with a 10 GB hot region, 60 simulated seconds",
        text: include_str!("../scenarios/heap-5tb.toml"),
    },
    Builtin {
        name: "stencil-8core",
        description: "3-D 7-point stencil partitioned among 8 cores on two NUMA nodes",
        text: include_str!("../scenarios/stencil-8core.toml"),
    },
    Builtin {
        name: "cg-16core",
        description: "CG-like sparse matrix-vector products (27-point matrix) on 16 cores",
        text: include_str!("../scenarios/cg-16core.toml"),
    },
    Builtin {
        name: "telescope-5tb",
        description: "10 GB of hot needles in a 5 TiB heap, 250 s: DAMON, PEBS and Telescope (bounded, flex) as in the paper",
        text: include_str!("../scenarios/telescope-5tb.toml"),
    },
    Builtin {
        name: "telescope-footprints",
        description: "hot-data detection of DAMON vs Telescope at 1 GB, 10 GB, 100 GB (10% hot) and 5 TiB (10 GB hot)",
        text: include_str!("../scenarios/telescope-footprints.toml"),
    },
    Builtin {
        name: "pebs-minife",
        description: "PEBS paper's MiniFE experiment: CG on a 6 MiB buffer sampled with R = 64/128/256 and B = 8/16/32 KiB",
        text: include_str!("../scenarios/pebs-minife.toml"),
    },
    Builtin {
        name: "pebs-lulesh",
        description: "PEBS paper's Fig. 5: LULESH-like time steps on a 30^3 mesh sampled with R = 64/128/256 and B = 8 KiB",
        text: include_str!("../scenarios/pebs-lulesh.toml"),
    },
    Builtin {
        name: "cmcp-table1",
        description: "CMCP paper Table 1: per-core page faults, remote TLB invalidations, dTLB misses of FIFO, LRU, CMCP at 8..56 cores",
        text: include_str!("../scenarios/cmcp-table1.toml"),
    },
    Builtin {
        name: "cmcp-scaling",
        description: "CMCP paper Figure 7: performance vs cores, shared page tables vs PSPT, per policy",
        text: include_str!("../scenarios/cmcp-scaling.toml"),
    },
    Builtin {
        name: "cmcp-p",
        description: "CMCP paper Figure 9: CMCP's relative performance vs p (fraction of prioritized pages) at 56 cores",
        text: include_str!("../scenarios/cmcp-p.toml"),
    },
    Builtin {
        name: "cmcp-pagesize",
        description: "CMCP paper Figure 10: 4 KiB / 64 KiB / 2 MiB pages vs memory provided (FIFO, 56 cores)",
        text: include_str!("../scenarios/cmcp-pagesize.toml"),
    },
    Builtin {
        name: "cmcp-memory",
        description: "CMCP paper Figure 8: relative performance vs memory provided for FIFO, LRU, CMCP on PSPT (56 cores, 4 KiB pages)",
        text: include_str!("../scenarios/cmcp-memory.toml"),
    },
    Builtin {
        name: "zipf-tiered",
        description: "YCSB-like Zipfian accesses over 24 GiB on a 16 GiB DRAM + CXL machine",
        text: include_str!("../scenarios/zipf-tiered.toml"),
    },
    Builtin {
        name: "tiering-kv",
        description: "Telescope's Redis+YCSB tiering scaled: a 1 TB key-value store in the slow tier, loaded latency, hot data promoted by DAMON, PEBS, Telescope (hottest-first), HeMem, Memtis, NUMA tiering, DAMON-mtier, Colloid, HybridTier, NOMAD, ARMS, pghot, kmmscand, klruscand, M5, PACT",
        text: include_str!("../scenarios/tiering-kv.toml"),
    },
    Builtin {
        name: "tiering-kv-long",
        description: "tiering-kv's 1 TB store on a 1 GiB DRAM tier starting empty, 150 simulated seconds: DAMON-mtier and NUMA tiering promote and demote",
        text: include_str!("../scenarios/tiering-kv-long.toml"),
    },
    Builtin {
        name: "numa-placement",
        description: "profile-guided ccNUMA placement vs first touch and interleave on 2 and 4 nodes (serially initialized STREAM and Jacobi)",
        text: include_str!("../scenarios/numa-placement.toml"),
    },
    Builtin {
        name: "numa-sources",
        description: "profile-guided ccNUMA placement from long-latency loads vs TLB misses at several sampling periods: time to trace, samples, accuracy, savings (2 nodes, remote 2x)",
        text: include_str!("../scenarios/numa-sources.toml"),
    },
    Builtin {
        name: "numa-opteron",
        description: "profile-guided ccNUMA placement on an Opteron-like machine (remote 1.5x local) next to the Altix-like one (2x), 2 nodes, STREAM and Jacobi",
        text: include_str!("../scenarios/numa-opteron.toml"),
    },
    Builtin {
        name: "cmcp-replay",
        description: "a real OpenMP stencil trace replayed through FIFO, LRU and CMCP on per-core page tables, fast memory 50% of the touched pages",
        text: include_str!("../scenarios/cmcp-replay.toml"),
    },
    Builtin {
        name: "tiering-replay",
        description: "a real OpenMP stencil trace replayed through DAMON, PEBS, Telescope, HeMem-, Memtis-, NUMA-tiering-like, DAMON-mtier and Colloid policies, DRAM = half the touched pages",
        text: include_str!("../scenarios/tiering-replay.toml"),
    },
    Builtin {
        name: "tiering-replay-kv",
        description: "a real key-value store trace (Zipfian gets over a hash index and a value slab) replayed through DAMON, PEBS, Telescope, HeMem-, Memtis-, NUMA-tiering-like, DAMON-mtier, Colloid, HybridTier, NOMAD, ARMS, pghot, kmmscand, klruscand, M5 and PACT policies, the store loaded in PMem, DRAM under half the touched pages",
        text: include_str!("../scenarios/tiering-replay-kv.toml"),
    },
    Builtin {
        name: "tiering-ablations",
        description: "NOMAD on a replayed key-value trace (DRAM under half the touched pages) with transactional migration, shadow pages, batched shootdowns, the batch size and the rate limit turned off or changed in turn, beside NUMA tiering; Memtis and hottest-first with exchanges instead of migrations",
        text: include_str!("../scenarios/tiering-ablations.toml"),
    },
    Builtin {
        name: "tiering-masim",
        description: "a phase-changing masim config (the hot region alternates every 500 ms) through DAMON, PEBS, Telescope, HeMem-, Memtis-, NUMA-tiering-like, DAMON-mtier, Colloid, HybridTier and NOMAD policies, DRAM holding one hot region",
        text: include_str!("../scenarios/tiering-masim.toml"),
    },
    Builtin {
        name: "tiering-graph",
        description: "a GAP-style PageRank (pull) on a Kronecker graph of 2^17 vertices loaded in PMem, DRAM a quarter of the touched pages, through DAMON, PEBS, Telescope, HeMem-, Memtis-, NUMA-tiering-like, DAMON-mtier, Colloid, HybridTier, NOMAD, ARMS, pghot, kmmscand, klruscand, M5 and PACT policies",
        text: include_str!("../scenarios/tiering-graph.toml"),
    },
];

/// Find a built-in by name.
pub fn builtin(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}

/// Resolve a spec: a path to a TOML file, a built-in name, or `masim:PATH`.
pub fn resolve(spec: &str) -> Result<Source> {
    if let Some(path) = spec.strip_prefix("masim:") {
        let p = Path::new(path);
        match std::fs::metadata(p) {
            Err(_) => {
                return Err(SimError::Input {
                    at: Location { file: path.to_string(), line: None, field: None },
                    msg: "masim config file not found".into(),
                })
            }
            Ok(m) if !m.is_file() => {
                return Err(SimError::Input {
                    at: Location { file: path.to_string(), line: None, field: None },
                    msg: "cannot read masim config: not a regular file".into(),
                })
            }
            Ok(_) => {}
        }
        let abs = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let name = p.file_name().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
        let text = format!(
            "name = {}\ndescription = {}\n\n[workload]\nkind = \"masim\"\nconfig = {}\n",
            toml_str(&format!("masim:{name}")),
            toml_str(&format!("masim config {path} run as it is on the default machine")),
            toml_str(&abs.to_string_lossy())
        );
        return Ok(Source { text, file: path.to_string(), base_dir: PathBuf::from(".") });
    }
    let p = Path::new(spec);
    // Anything but a directory at that path (a FIFO or a device too) is the user's file: read
    // it bounded (special files are refused before any read), never fall back to a built-in.
    if std::fs::metadata(p).is_ok_and(|m| !m.is_dir()) {
        let text = crate::limits::read_text(p, crate::limits::MAX_TEXT_FILE).map_err(|msg| {
            SimError::Input { at: Location { file: spec.to_string(), line: None, field: None }, msg }
        })?;
        let base_dir = p.parent().map(|d| d.to_path_buf()).unwrap_or_else(|| PathBuf::from("."));
        let base_dir = if base_dir.as_os_str().is_empty() { PathBuf::from(".") } else { base_dir };
        return Ok(Source { text, file: spec.to_string(), base_dir });
    }
    if let Some(b) = builtin(spec) {
        return Ok(Source {
            text: b.text.to_string(),
            file: format!("<built-in {}>", b.name),
            base_dir: PathBuf::from("."),
        });
    }
    if p.is_dir() {
        return Err(SimError::Input {
            at: Location { file: spec.to_string(), line: None, field: None },
            msg: directory_message(p),
        });
    }
    let names: Vec<&str> = BUILTINS.iter().map(|b| b.name).collect();
    Err(SimError::Input {
        at: Location { file: spec.to_string(), line: None, field: None },
        msg: format!(
            "no such scenario file, and not a built-in scenario (built-ins: {}; or use masim:PATH)",
            names.join(", ")
        ),
    })
}

/// The error for a scenario given as a directory (a built-in of that name was looked up
/// first), naming the scenario files in it.
fn directory_message(dir: &Path) -> String {
    let mut tomls: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n.ends_with(".toml"))
                .collect()
        })
        .unwrap_or_default();
    tomls.sort();
    let hint = match tomls.len() {
        0 => String::new(),
        n => format!(
            " (it holds {}{}: give one of those)",
            tomls[..n.min(3)].join(", "),
            if n > 3 { ", ..." } else { "" }
        ),
    };
    format!("is a directory, not a scenario file{hint}")
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// Parse a source, apply `overrides` (`dotted.key=value`) and an optional seed override.
pub fn load(src: &Source, overrides: &[String], seed: Option<u64>) -> Result<Scenario> {
    let mut table: toml::Table =
        toml::from_str(&src.text).map_err(|e| toml_error(&src.text, &src.file, &e))?;
    // Typed parse of the file as written, so errors carry its line numbers.
    let mut sc: Scenario = toml::from_str(&src.text).map_err(|e| toml_error(&src.text, &src.file, &e))?;
    if !overrides.is_empty() {
        for o in overrides {
            apply_override(&mut table, o)?;
        }
        let text = toml::to_string(&table).expect("table serializes");
        sc = toml::from_str(&text).map_err(|e| {
            let err = toml_error(&text, "--set", &e);
            match err {
                SimError::Config { at, msg } => SimError::Config {
                    at: Location {
                        file: format!("{} (after --set {})", src.file, overrides.join(" ")),
                        line: None,
                        field: at.field,
                    },
                    msg,
                },
                other => other,
            }
        })?;
    }
    if let Some(cpu) = sc.machine.cpu.clone() {
        sc = apply_cpu_preset(src, overrides, &mut table, &cpu)?;
    }
    if let Some(s) = seed {
        sc.seed = s;
    }
    if sc.name.is_empty() {
        sc.name =
            Path::new(&src.file).file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
    }
    resolve_external_paths(&mut sc, &src.base_dir);
    validate(&sc, src).map_err(|e| overridden(e, src, overrides))?;
    Ok(sc)
}

/// The `path` of every `kind = "python"` entry, resolved against the scenario's folder (a
/// stage and a sweep's worker read the same file whatever their working directory).
pub fn resolve_external_paths(sc: &mut Scenario, base_dir: &Path) {
    let resolve = |p: &mut String| {
        let path = Path::new(p.as_str());
        if path.is_relative() && base_dir != Path::new(".") {
            *p = base_dir.join(path).to_string_lossy().to_string();
        }
    };
    for t in &mut sc.telemetry {
        if let crate::agents::telemetry::TelemetryConfig::Python(e) = t {
            resolve(&mut e.keys.path);
        }
    }
    if let Some(crate::agents::tiering::TieringConfig::Python(e)) = &mut sc.tiering {
        resolve(&mut e.keys.path);
    }
    for p in &mut sc.policies {
        if let crate::os::replacement::PolicyConfig::Python(e) = p {
            resolve(&mut e.keys.path);
        }
    }
}

/// A check's error about a field an override set: the value is the override's, not the
/// file's, so the error names the overrides and no line of the file (which holds the value
/// the override replaced).
fn overridden(e: SimError, src: &Source, overrides: &[String]) -> SimError {
    let SimError::Config { at, msg } = e else { return e };
    let Some(field) = at.field.as_deref() else { return SimError::Config { at, msg } };
    let set_here = overrides.iter().filter_map(|o| o.split_once('=')).map(|(k, _)| k.trim()).any(|k| {
        let (k, f) = (k.replace(' ', ""), field.replace(' ', ""));
        k == f
            || f.starts_with(&format!("{k}."))
            || f.starts_with(&format!("{k}["))
            || k.starts_with(&format!("{f}."))
    });
    if !set_here {
        return SimError::Config { at, msg };
    }
    SimError::Config {
        at: Location {
            file: format!("{} (after --set {})", src.file, overrides.join(" ")),
            line: None,
            field: at.field,
        },
        msg,
    }
}

/// `machine.cpu = NAME`: write the preset's values into `table` where the scenario (with its
/// overrides) gives no value, and parse it again.
fn apply_cpu_preset(
    src: &Source,
    overrides: &[String],
    table: &mut toml::Table,
    cpu: &str,
) -> Result<Scenario> {
    let at = |field: &str| Location {
        file: if overrides.is_empty() {
            src.file.clone()
        } else {
            format!("{} (after --set {})", src.file, overrides.join(" "))
        },
        line: if overrides.is_empty() { line_of_key(&src.text, field) } else { None },
        field: Some(field.to_string()),
    };
    let Some(p) = crate::hw::cpu::preset(cpu) else {
        return Err(SimError::Config {
            at: at("machine.cpu"),
            msg: format!("unknown CPU preset `{cpu}`; the presets are {}", crate::hw::cpu::names()),
        });
    };
    let machine = table.entry("machine").or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if let toml::Value::Table(m) = machine {
        p.merge_into(m);
    }
    let text = toml::to_string(&*table).expect("table serializes");
    toml::from_str(&text)
        .map_err(|e| SimError::Config { at: at("machine.cpu"), msg: e.message().trim().to_string() })
}

/// The build context of a scenario's workload.
pub fn build_ctx(sc: &Scenario, src: &Source) -> BuildCtx {
    BuildCtx {
        seed: sc.seed,
        base_dir: src.base_dir.clone(),
        scenario_file: src.file.clone(),
        cores: sc.machine.cores,
        duration: sc.duration.map(|d| d.ps()).unwrap_or(crate::units::Ps::ZERO),
        replay: None,
    }
}

/// Check the scenario of stage `index` (the scenario with the stage's `set` overrides) as a
/// scenario file is checked: a value a file may not hold (a zero duration, no cores) is
/// refused in a stage's overrides too, the error naming the stage's `set` and the field.
pub(crate) fn validate_stage(sc: &Scenario, file: &str, index: usize) -> Result<()> {
    let src = Source { text: String::new(), file: file.to_string(), base_dir: ".".into() };
    validate(sc, &src).map_err(|e| match e {
        SimError::Config { at, msg } => SimError::Config {
            at: Location { file: file.to_string(), line: None, field: Some(format!("stages[{index}].set")) },
            msg: match at.field {
                Some(f) if !f.is_empty() => format!("{f}: {msg}"),
                _ => msg,
            },
        },
        other => other,
    })
}

fn validate(sc: &Scenario, src: &Source) -> Result<()> {
    let err = |field: &str, msg: String| SimError::Config {
        at: Location {
            file: src.file.clone(),
            line: line_of_key(&src.text, field),
            field: Some(field.to_string()),
        },
        msg,
    };
    let value =
        toml::Value::try_from(sc).map_err(|e| err("", format!("scenario does not serialize: {e}")))?;
    crate::limits::check(&value, &Scenario::fields()).map_err(|(f, m)| err(&f, m))?;
    sc.machine.validate().map_err(|(f, m)| err(&f, m))?;
    if sc.window.0 == 0 {
        return Err(err("window", "must be > 0".into()));
    }
    if sc.quantum.0 == 0 {
        return Err(err("quantum", "must be > 0".into()));
    }
    if let Some(d) = sc.duration {
        if d.0 == 0 {
            return Err(err("duration", "must be > 0".into()));
        }
    }
    if let crate::workload::WorkloadConfig::Replay(r) = &sc.workload {
        if let Some(n) = r.node.filter(|&n| n as usize >= sc.machine.nodes.len()) {
            return Err(err(
                "workload.node",
                format!(
                    "node {n} does not exist: the machine has {} node(s), numbered from 0",
                    sc.machine.nodes.len()
                ),
            ));
        }
    }
    if sc.report.heatmap_bins == 0 || sc.report.heatmap_bins > 100_000 {
        return Err(err("report.heatmap_bins", format!("{} is not in 1..=100000", sc.report.heatmap_bins)));
    }
    for (i, st) in sc.stages.iter().enumerate() {
        if st.name.is_empty() || sc.stages[..i].iter().any(|q| q.name == st.name) {
            return Err(err(
                &format!("stages[{i}].name"),
                format!("`{}` must be non-empty and unique", st.name),
            ));
        }
        for o in &st.set {
            let mut t = toml::Table::new();
            apply_override(&mut t, o).map_err(|e| err(&format!("stages[{i}].set"), e.to_string()))?;
            if o.split('=').next().is_some_and(|k| k.trim() == "machine.cpu") {
                return Err(err(
                    &format!("stages[{i}].set"),
                    "machine.cpu applies to the whole scenario (set it in [machine] or with --set), not per stage"
                        .into(),
                ));
            }
        }
    }
    for (i, p) in sc.sweep.iter().enumerate() {
        if p.label.is_empty() || sc.sweep[..i].iter().any(|q| q.label == p.label) {
            return Err(err(
                &format!("sweep[{i}].label"),
                format!("`{}` must be non-empty and unique", p.label),
            ));
        }
        for o in &p.set {
            let mut t = toml::Table::new();
            apply_override(&mut t, o).map_err(|e| err(&format!("sweep[{i}].set"), e.to_string()))?;
        }
    }
    if let Some(p) = sc.machine.cpu.as_deref().and_then(crate::hw::cpu::preset) {
        p.check_telemetry(sc.telemetry.iter().map(|t| t.kind()))
            .map_err(|(i, m)| err(&format!("telemetry[{i}].kind"), m))?;
    }
    let mut labels: Vec<String> = Vec::new();
    for (i, t) in sc.telemetry.iter().enumerate() {
        let l = t.label();
        if l.is_empty() || l.contains('.') || l.contains(char::is_whitespace) {
            return Err(err(
                &format!("telemetry[{i}].name"),
                format!("`{l}` must be non-empty, without dots or spaces"),
            ));
        }
        if labels.contains(&l) {
            return Err(err(
                &format!("telemetry[{i}].name"),
                format!("two techniques are named `{l}`; give each a distinct `name`"),
            ));
        }
        labels.push(l);
    }
    if !(sc.scoring.target > 0.0 && sc.scoring.target <= 1.0) {
        return Err(err("scoring.target", format!("{} is not in (0, 1]", sc.scoring.target)));
    }
    for (i, p) in sc.policies.iter().enumerate() {
        p.check().map_err(|(f, m)| err(&format!("policies[{i}].{f}"), m))?;
    }
    if let Some(p) = &sc.placement {
        let ctx = crate::agents::placement::PlacementCheckCtx {
            cores: sc.machine.cores,
            pebs_telemetry: sc.telemetry.iter().any(|t| matches!(t.kind(), "pebs" | "perf-pebs" | "ibs")),
        };
        p.check(&ctx).map_err(|(f, m)| err(&format!("placement.{f}"), m))?;
    }
    if let Some(t) = &sc.tiering {
        let relocate = |e: SimError| match e {
            SimError::Config { at, msg } => err(at.field.as_deref().unwrap_or("tiering"), msg),
            other => other,
        };
        let tctx = crate::agents::tiering::TieringBuildCtx {
            seed: sc.seed,
            scenario_file: src.file.clone(),
            cores: sc.machine.cores,
            threads: 1,
            nodes: sc.machine.nodes.len(),
        };
        t.common().check(&tctx).map_err(relocate)?;
        t.build(&tctx).map_err(relocate)?;
    }
    // Classes written outside the engine: their own keys are checked against what the
    // class declares (the host loads it), errors located like any other field's.
    let relocate = |e: SimError| match e {
        SimError::Config { at, msg } => err(at.field.as_deref().unwrap_or(""), msg),
        other => other,
    };
    for (index, t) in sc.telemetry.iter().enumerate() {
        if t.kind() == "python" {
            let tctx = crate::agents::telemetry::TelemetryBuildCtx {
                seed: sc.seed,
                scenario_file: src.file.clone(),
                index,
                cores: sc.machine.cores,
                threads: 1,
                nodes: sc.machine.nodes.len(),
            };
            t.build(&tctx).map_err(relocate)?;
        }
    }
    for (index, p) in sc.policies.iter().enumerate() {
        if p.kind() == "python" {
            let pctx = crate::os::replacement::PolicyBuildCtx {
                scenario_file: src.file.clone(),
                index,
                seed: sc.seed,
                ..Default::default()
            };
            p.build(&pctx).map_err(relocate)?;
        }
    }
    if sc.policies.len() > 1 {
        return Err(err("policies", "only one replacement policy can run at a time".into()));
    }
    match (sc.policies.first(), &sc.machine.hmem) {
        (Some(p), None) => {
            return Err(err(
                "policies[0].kind",
                format!(
                    "replacement policy `{}` needs the hierarchical memory mode: add [machine.hmem] with fast_memory",
                    p.kind()
                ),
            ))
        }
        (None, Some(_)) => {
            return Err(err(
                "machine.hmem",
                "the hierarchical memory mode needs a replacement policy: add [[policies]] with kind = \"fifo\", \"lru\", \"lru-exact\", \"clock\" or \"cmcp\"".into(),
            ))
        }
        _ => {}
    }
    Ok(())
}

/// Print a scenario fully expanded, every default written out.
pub fn export(sc: &Scenario) -> String {
    let body = toml::to_string_pretty(sc).expect("scenario serializes");
    let mut out = String::from("# tierlab scenario, fully expanded (tierlab export)\n");
    if sc.duration.is_none() {
        out.push_str("# duration: not set; the run lasts the workload's natural length\n");
    }
    out.push_str(&body);
    out
}

/// Every declared parameter of a scenario, table by table (see [`crate::params::catalogue`]).
pub fn catalogue() -> Vec<crate::params::Section> {
    crate::params::catalogue(Scenario::fields())
}

/// `docs/parameters.md`: the page, generated from the declarations (`tierlab params
/// --markdown` prints it; a test keeps the file equal to it).
pub fn parameters_page() -> String {
    let mut out = String::from(PARAMETERS_HEAD);
    out.push_str(&crate::params::markdown(&catalogue()));
    out
}

const PARAMETERS_HEAD: &str = "# Parameters

Every parameter a scenario may set, with its type, default, unit, range and provenance, table by
table. This page is generated from the declarations in the code (`#[param(...)]` on each field):
do not edit it; regenerate it with `tierlab params --markdown > docs/parameters.md` (a test
fails when it is stale). `tierlab params SECTION` prints one table at the terminal, and
`tierlab export SCENARIO` writes a scenario with every value it uses.

Provenance says where a default comes from: **sourced** (a paper, a manual, kernel source or a
measurement, named), **calibrated** (fitted to the figure named), **assumed** (no source gives
the value; the reason is given) or **setting** (a choice of the experiment, not a fact about a
machine or mechanism). A scenario that sets a value states its own provenance (the reproduction
files of `tierlab reproduce`). Numbers outside their range are refused when the scenario loads,
with the file, line and field. Sizes accept `4096`, `\"4KiB\"`, `\"10GB\"`; durations `\"5ms\"`,
`\"1s\"`.

";

/// The declared field a scenario key names (`telemetry[0].sample_interval`), looked up in the
/// expanded scenario `sc` (a `kind` picks its implementation's fields).
pub fn declared_field(sc: &Scenario, key: &str) -> Option<&'static tierlab_core::param::FieldSpec> {
    let value = toml::Value::try_from(sc).ok()?;
    crate::params::field_at(Scenario::fields(), &value, key)
}

/// Apply one `dotted.key=value` override to a TOML table. The value is parsed as a TOML value
/// (`4`, `true`, `"10s"`, `[0, 1]`); anything that does not parse is taken as a string.
pub fn apply_override(table: &mut toml::Table, o: &str) -> Result<()> {
    let bad = |msg: String| SimError::Config {
        at: Location { file: "--set".into(), line: None, field: Some(o.to_string()) },
        msg,
    };
    let (key, value) = o.split_once('=').ok_or_else(|| bad("expected key=value".into()))?;
    let key = key.trim();
    if key.is_empty() || key.split('.').any(|p| p.trim().is_empty()) {
        return Err(bad(format!("`{key}` is not a dotted key")));
    }
    let value = value.trim();
    let parsed: toml::Value = match toml::from_str::<toml::Table>(&format!("v = {value}")) {
        Ok(mut t) => t.remove("v").expect("v"),
        Err(_) => toml::Value::String(value.to_string()),
    };
    let parts: Vec<&str> = key.split('.').map(|p| p.trim()).collect();
    let mut cur = table;
    for (i, p) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            cur.insert(p.to_string(), parsed);
            return Ok(());
        }
        // Array index: nodes[1] or nodes.1
        let (name, idx) = match p.split_once('[') {
            Some((n, rest)) => (n, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (*p, None),
        };
        let entry = cur.entry(name.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let next = match (entry, idx) {
            (toml::Value::Table(t), None) => t,
            (toml::Value::Array(a), Some(k)) => match a.get_mut(k) {
                Some(toml::Value::Table(t)) => t,
                _ => return Err(bad(format!("`{name}` has no table at index {k}"))),
            },
            (toml::Value::Array(a), None) => {
                let k: usize = parts
                    .get(i + 1)
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| bad(format!("`{name}` is a list: index it as {name}[N]")))?;
                let _ = a;
                return Err(bad(format!("`{name}` is a list: index it as {name}[{k}]")));
            }
            _ => return Err(bad(format!("`{name}` is not a table"))),
        };
        cur = next;
    }
    Ok(())
}

/// Turn a toml error into a located config error.
fn toml_error(text: &str, file: &str, e: &toml::de::Error) -> SimError {
    let mut msg = e.message().trim().to_string();
    let mut line = e.span().map(|s| line_of_offset(text, s.start));
    let mut field = e.span().and_then(|s| field_at(text, s.start));
    // serde's internally tagged enums (`[workload]`, `[[telemetry]]`, ...) lose spans: the
    // error points at the table, the key is named at the end of the message (`in `key``) or
    // not at all (an unknown variant: the key holding that value). Find it inside the table.
    let in_key = msg.rsplit_once("\nin `").and_then(|(head, tail)| {
        tail.strip_suffix('`').filter(|k| !k.contains('`')).map(|k| (head.trim().to_string(), k.to_string()))
    });
    let located =
        |pred: &dyn Fn(&str, &str) -> bool| e.span().and_then(|span| find_in_span(text, span, pred));
    if let Some((head, key)) = in_key {
        msg = head;
        match located(&|k, _| k == key) {
            Some((l, f)) => {
                line = Some(l);
                field = Some(f);
            }
            None => field = Some(field.map_or(key.clone(), |t| format!("{t}.{key}"))),
        }
    } else if let Some(name) = backticked_after(&msg, "unknown field `") {
        if let Some((l, f)) = located(&|k, _| k == name) {
            line = Some(l);
            field = Some(f);
        } else if let Some(f) = &field {
            // An unknown table (`[a.b.c]`, `a.b.c = 1` from --set): the path up to it.
            let parts: Vec<&str> = f.split('.').collect();
            if let Some(i) = parts.iter().position(|p| *p == name) {
                field = Some(parts[..=i].join("."));
            }
        }
        if field.is_none() {
            field = Some(name);
        }
    } else if let Some(value) = backticked_after(&msg, "unknown variant `") {
        let quoted = |v: &str| {
            let v = v.trim();
            v.strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                == Some(value.as_str())
        };
        if let Some((l, f)) = located(&|_, v| quoted(v)) {
            line = Some(l);
            field = Some(f);
        }
    } else if let Some(name) = backticked_after(&msg, "missing field `") {
        // A field missing at the top level: the error spans the whole document.
        let top = e.span().is_none_or(|s| s.start == 0 && s.end >= text.trim_end().len());
        let table = if top { String::new() } else { field.clone().unwrap_or_default() };
        field = Some(if table.is_empty() { name } else { format!("{table}.{name}") });
        if top {
            line = None;
        }
    }
    if let Some(i) = msg.find("expected internally tagged enum ") {
        msg = format!("{}expected a table with a `kind`", &msg[..i]);
    }
    SimError::Config { at: Location { file: file.to_string(), line, field }, msg }
}

fn backticked_after(msg: &str, prefix: &str) -> Option<String> {
    let i = msg.find(prefix)? + prefix.len();
    let rest = &msg[i..];
    Some(rest[..rest.find('`')?].to_string())
}

fn line_of_offset(text: &str, off: usize) -> usize {
    text[..off.min(text.len())].bytes().filter(|&b| b == b'\n').count() + 1
}

/// The dotted path of the key whose line contains `off` (or of the enclosing table).
fn field_at(text: &str, off: usize) -> Option<String> {
    let line_no = line_of_offset(text, off);
    let mut table = String::new();
    let mut key = None;
    for (i, l) in text.lines().enumerate() {
        let t = l.trim();
        if i + 1 > line_no {
            break;
        }
        if t.starts_with('[') {
            table = t.trim_matches(|c| c == '[' || c == ']').trim().to_string();
            key = None;
        } else if i + 1 == line_no {
            key = t
                .split('=')
                .next()
                .map(|k| k.trim().to_string())
                .filter(|k| !k.is_empty() && !k.starts_with('#'));
        }
    }
    match (table.is_empty(), key) {
        (true, Some(k)) => Some(k),
        (false, Some(k)) => Some(format!("{table}.{k}")),
        (false, None) => Some(table),
        (true, None) => None,
    }
}

/// The first `key = value` line of the table starting at `span` for which `pred(key, value)`
/// holds: its line and dotted field.
fn find_in_span(
    text: &str,
    span: std::ops::Range<usize>,
    pred: &dyn Fn(&str, &str) -> bool,
) -> Option<(usize, String)> {
    // Search from the table's start to the next table header.
    let start_line = line_of_offset(text, span.start);
    let mut table = String::new();
    for (i, l) in text.lines().enumerate() {
        let t = l.trim();
        if t.starts_with('[') {
            if i + 1 > start_line {
                break;
            }
            table = t.trim_matches(|c| c == '[' || c == ']').trim().to_string();
            continue;
        }
        if i + 1 < start_line {
            continue;
        }
        if let Some((k, v)) = t.split_once('=') {
            let key = k.trim().trim_matches('"');
            if pred(key, v) {
                let f = if table.is_empty() { key.to_string() } else { format!("{table}.{key}") };
                return Some((i + 1, f));
            }
        }
    }
    None
}

/// Line of a dotted key (`machine.tlb.l1_4k_ways`, `machine.nodes[1].capacity`) in a TOML
/// text, when it is written there.
pub fn line_of_key(text: &str, dotted: &str) -> Option<usize> {
    let doc = toml_edit::ImDocument::parse(text.to_string()).ok()?;
    let mut item: &toml_edit::Item = doc.as_item();
    let mut span = None;
    for part in dotted.split('.') {
        let (name, idx) = match part.split_once('[') {
            Some((n, r)) => (n, r.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        let next = item.get(name)?;
        if let Some(tbl) = item.as_table_like() {
            if let Some((k, _)) = tbl.get_key_value(name) {
                span = k.span().or(span);
            }
        }
        item = next;
        if let Some(k) = idx {
            item = item.get(k)?;
            if let Some(s) = item.as_table().and_then(|t| t.span()) {
                span = Some(s);
            }
        }
        if let Some(s) = item.span() {
            span = Some(s);
        }
    }
    span.map(|s| line_of_offset(text, s.start))
}

/// Keep only the telemetry techniques named in `only` (labels); `Some(&[])` removes all (a
/// baseline run). Unknown names are an error listing the available ones.
pub fn select_techniques(sc: &mut Scenario, src: &Source, only: Option<&[String]>) -> Result<()> {
    let Some(only) = only else { return Ok(()) };
    let labels: Vec<String> = sc.telemetry.iter().map(|t| t.label()).collect();
    for o in only {
        if !labels.contains(o) {
            return Err(SimError::Config {
                at: Location { file: src.file.clone(), line: None, field: Some("telemetry".into()) },
                msg: format!("no technique named `{o}` (the scenario has: {})", labels.join(", ")),
            });
        }
    }
    sc.telemetry.retain(|t| only.contains(&t.label()));
    Ok(())
}

/// Resolve, load and build-context in one step (what the CLI does).
pub fn open(spec: &str, overrides: &[String], seed: Option<u64>) -> Result<(Scenario, Source)> {
    let src = resolve(spec)?;
    let sc = load(&src, overrides, seed)?;
    Ok((sc, src))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(text: &str) -> Source {
        Source { text: text.into(), file: "t.toml".into(), base_dir: ".".into() }
    }

    const OK: &str = "duration = \"10ms\"\n[workload]\nkind = \"uniform\"\n";

    #[test]
    fn unknown_top_level_key_names_line() {
        let e = load(&src("duraton = \"1s\"\n[workload]\nkind = \"uniform\"\n"), &[], None).unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("t.toml:1"), "{s}");
        assert!(s.contains("unknown field `duraton`"), "{s}");
    }

    #[test]
    fn unknown_machine_key_names_line_and_field() {
        let e = load(&src("[machine]\ncores = 2\ncorez = 3\n[workload]\nkind = \"uniform\"\n"), &[], None)
            .unwrap_err();
        let s = e.to_string();
        assert!(s.contains("t.toml:3"), "{s}");
        assert!(s.contains("corez"), "{s}");
    }

    #[test]
    fn unknown_workload_param_names_line() {
        let e = load(&src("[workload]\nkind = \"uniform\"\n\nfootprnt = \"1GiB\"\n"), &[], None).unwrap_err();
        let s = e.to_string();
        assert!(s.contains("t.toml:4"), "{s}");
        assert!(s.contains("footprnt"), "{s}");
    }

    #[test]
    fn unknown_workload_kind() {
        let e = load(&src("[workload]\nkind = \"nope\"\n"), &[], None).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
    }

    #[test]
    fn bad_value_names_line() {
        let e =
            load(&src("window = \"5 parsecs\"\n[workload]\nkind = \"uniform\"\n"), &[], None).unwrap_err();
        let s = e.to_string();
        assert!(s.contains("t.toml:1"), "{s}");
        assert!(s.contains("parsecs"), "{s}");
    }

    #[test]
    fn semantic_error_names_field_and_line() {
        let text =
            "[machine]\ncores = 2\n[machine.tlb]\nl1_4k_entries = 10\n[workload]\nkind = \"uniform\"\n";
        let e = load(&src(text), &[], None).unwrap_err();
        let s = e.to_string();
        assert!(s.contains("machine.tlb.l1_4k_entries"), "{s}");
        assert!(s.contains("t.toml:4"), "{s}");
    }

    #[test]
    fn overrides_apply_and_are_checked() {
        let sc = load(&src(OK), &["machine.cores=4".into(), "window=\"5ms\"".into()], Some(9)).unwrap();
        assert_eq!(sc.machine.cores, 4);
        assert_eq!(sc.window.0, 5_000_000);
        assert_eq!(sc.seed, 9);
        let e = load(&src(OK), &["machine.corez=4".into()], None).unwrap_err();
        assert!(e.to_string().contains("corez"), "{e}");
        let e = load(&src(OK), &["nokey".into()], None).unwrap_err();
        assert!(e.to_string().contains("key=value"), "{e}");
    }

    #[test]
    fn export_roundtrips() {
        let sc = load(&src(OK), &[], None).unwrap();
        let text = export(&sc);
        assert!(text.contains("[machine.tlb]"), "{text}");
        assert!(text.contains("l1_4k_entries = 64"), "{text}");
        let again = load(&src(&text), &[], None).unwrap();
        assert_eq!(export(&again), text);
    }

    /// Every number of every built-in scenario and of every kind's defaults is a declared
    /// field with a range, and the defaults lie in it; no declared field is free-form.
    #[test]
    fn every_number_has_a_range() {
        let mut texts: Vec<String> = BUILTINS.iter().map(|b| b.text.to_string()).collect();
        let base = "duration = \"1ms\"\n[workload]\nkind = \"uniform\"\n";
        let mut checked = 0;
        // Sizes that are not a whole number of a unit are written as integers.
        texts.push(format!(
            "{base}footprint = 100000001\n[[machine.nodes]]\nname = \"a\"\ncapacity = 1000000001\nlatency_ns = 90.0\n\
             [[telemetry]]\nkind = \"damon\"\nschemes = [{{ action = \"stat\", quota = {{ sz = 0 }} }}]\n"
        ));
        // Every field of a DAMOS scheme and of a node's loaded-latency model.
        texts.push(format!(
            "{base}[[machine.nodes]]\nname = \"a\"\ncapacity = \"1GiB\"\nlatency_ns = 90.0\nloaded = {{ points = [[0.5, 1.2]], background_read_gbps = 1.0 }}\n\
             [[telemetry]]\nkind = \"damon\"\nschemes = [{{ action = \"migrate_hot\", target_nid = 0, max_size = \"1GiB\", max_nr_accesses = 5, max_age = 9, \
             quota = {{ ms = 10, sz = \"4MiB\", reset_interval = \"1s\", weight_sz = 1, weight_nr_accesses = 2, weight_age = 3, goals = [{{ metric = \"node_mem_used_bp\", target = 9970, nid = 0, current = 1 }}] }}, \
             watermarks = {{ metric = \"free_mem_rate\", interval = \"1s\", high = 500, mid = 400, low = 200 }}, \
             filters = [{{ type = \"addr\", start = 0, end = 4096 }}] }}]\n"
        ));
        for k in crate::workload::WorkloadConfig::kinds() {
            let extra = match k {
                "masim" => "text = \"a, 4096\\n\\np\\n1\\na, 0, 64, 1\\n\"\n",
                "replay" => "path = \"builtin:omp-stencil\"\n",
                _ => "",
            };
            texts.push(format!("duration = \"1ms\"\n[workload]\nkind = \"{k}\"\n{extra}"));
        }
        // A class written in Python: its file and class are required (its own keys are the
        // class's to check).
        let ext = |k: &str| if k == "python" { "path = \"p.py\"\nclass = \"C\"\n" } else { "" };
        for k in crate::agents::telemetry::TelemetryConfig::kinds() {
            texts.push(format!("{base}[[telemetry]]\nkind = \"{k}\"\n{}", ext(k)));
        }
        for k in crate::os::replacement::PolicyConfig::kinds() {
            texts.push(format!(
                "{base}[machine.hmem]\nfast_memory = \"50%\"\n[[policies]]\nkind = \"{k}\"\n{}",
                ext(k)
            ));
        }
        for k in crate::agents::placement::PlacementConfig::kinds() {
            texts.push(format!("{base}[placement]\nkind = \"{k}\"\n{}", ext(k)));
        }
        for k in crate::agents::tiering::TieringConfig::kinds() {
            texts
                .push(format!("{base}[[telemetry]]\nkind = \"pebs\"\n[tiering]\nkind = \"{k}\"\n{}", ext(k)));
        }
        for t in &texts {
            // Load without the range check, then check the expanded scenario (a number
            // without a declared range is an error naming it).
            let sc: Scenario = toml::from_str(t).unwrap_or_else(|e| panic!("{t}: {e}"));
            let v = toml::Value::try_from(&sc).unwrap();
            if let Err((f, m)) = crate::limits::check(&v, &Scenario::fields()) {
                panic!("{t}\n{f}: {m}");
            }
            checked += 1;
        }
        assert!(checked >= 20, "{checked}");
        // Every field of every table: a shape the checker walks, a range for each number.
        let mut problems = Vec::new();
        for sec in catalogue() {
            for f in &sec.fields {
                let shape = (f.shape)();
                if matches!(shape, tierlab_core::param::Shape::Any) {
                    problems.push(format!("{}:{} `{}` is free-form", sec.path, sec.kind, f.name));
                }
                if shape.is_numeric() && f.range.is_none() {
                    problems.push(format!("{}:{} `{}` declares no range", sec.path, sec.kind, f.name));
                }
                if shape.is_numeric() && f.provenance == tierlab_core::param::Provenance::Unstated {
                    problems.push(format!("{}:{} `{}` declares no provenance", sec.path, sec.kind, f.name));
                }
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    #[test]
    fn parameters_page_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/parameters.md");
        let page = parameters_page();
        if std::env::var_os("TIERLAB_BLESS").is_some() {
            std::fs::write(path, &page).expect("write docs/parameters.md");
        }
        let doc = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            doc == page,
            "docs/parameters.md is not the declarations' page: regenerate it with \
             `tierlab params --markdown > docs/parameters.md` (or TIERLAB_BLESS=1 cargo test ... parameters_page)"
        );
    }

    #[test]
    fn fields_are_found_by_scenario_keys() {
        let text = "[workload]\nkind = \"uniform\"\n[[telemetry]]\nkind = \"pebs\"\n[tiering]\nkind = \"hottest-first\"\ntelemetry = \"pebs\"\n";
        let sc = load(&src(text), &[], None).unwrap();
        let f = declared_field(&sc, "tiering.fill").expect("tiering.fill");
        assert_eq!((f.name, f.provenance.status()), ("fill", "assumed"));
        assert_eq!(
            declared_field(&sc, "tiering.rate_limit_mbps").unwrap().default_text().as_deref(),
            Some("2048.0")
        );
        assert_eq!(
            declared_field(&sc, "report.heatmap_bins").unwrap().range.unwrap().to_string(),
            "[1, 100000]"
        );
        assert!(declared_field(&sc, "tiering.nope").is_none());
        assert!(declared_field(&sc, "seed").is_some());
        let cat = catalogue();
        assert!(cat.iter().any(|s| s.path == "tiering" && s.kind == "hottest-first"));
        assert!(cat.iter().any(|s| s.path == "telemetry[]" && s.kind == "damon"));
    }

    #[test]
    fn special_files_are_refused_where_a_file_is_read() {
        let e = resolve("/dev/zero").unwrap_err().to_string();
        assert!(e.starts_with("/dev/zero") && e.contains("not a regular file"), "{e}");
        let e = resolve("masim:/dev/zero").unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        // A masim workload whose `config` is a device: refused when the workload is built.
        let text = "[workload]\nkind = \"masim\"\nconfig = \"/dev/zero\"\n";
        let sc = load(&src(text), &[], None).unwrap();
        let e = crate::driver::Simulation::new(sc, &src(text), None).err().expect("refused").to_string();
        assert!(e.contains("/dev/zero") && e.contains("not a regular file"), "{e}");
    }

    #[test]
    fn hostile_numbers_are_refused_with_their_place() {
        for (set, field) in [
            ("machine.cost.fault_ns=1e17", "machine.cost.fault_ns"),
            ("machine.tlb.l2_entries=1200000000", "machine.tlb.l2_entries"),
            ("machine.cost.walk_ns_per_level=nan", "machine.cost.walk_ns_per_level"),
            ("duration=18446744073", "duration"),
            ("window=\"1e300s\"", "window"),
        ] {
            let e = load(&src(OK), &[set.to_string()], None).unwrap_err().to_string();
            assert!(e.contains(field), "{set}: {e}");
        }
        let text = "[machine]\ncores = 2\n\n[[machine.nodes]]\nname = \"a\"\ncapacity = \"1GiB\"\nlatency_ns = 1e17\n[workload]\nkind = \"uniform\"\n";
        let e = load(&src(text), &[], None).unwrap_err().to_string();
        assert!(e.starts_with("t.toml:7: field `machine.nodes[0].latency_ns`"), "{e}");
    }

    #[test]
    fn builtins_parse() {
        for b in BUILTINS {
            let s = Source { text: b.text.into(), file: b.name.into(), base_dir: ".".into() };
            load(&s, &[], None).unwrap_or_else(|e| panic!("{}: {e}", b.name));
        }
    }

    #[test]
    fn every_cpu_preset_parses_with_its_sizes() {
        // (preset, L1 4K entries/ways, L1 1G entries, L2 entries/ways, L2 1G entries, splinter, GHz)
        let want = [
            ("skylake-sp", 64, 4, 4, 1536, 12, 16, false, 2.5),
            ("icelake-sp", 64, 4, 8, 2048, 16, 1024, false, 2.3),
            ("sapphire-rapids", 96, 6, 8, 2048, 16, 1024, false, 2.0),
            ("zen3", 64, 64, 64, 2048, 16, 0, true, 2.45),
            ("zen4", 72, 72, 72, 3072, 12, 0, true, 2.4),
            ("knl", 64, 8, 16, 256, 8, 0, false, 1.4),
            ("knc", 64, 4, 0, 64, 4, 0, false, 1.053),
        ];
        assert_eq!(want.len(), crate::hw::cpu::PRESETS.len());
        for (name, l1, l1w, g1, l2, l2w, l2g, spl, ghz) in want {
            let sc = load(&src(OK), &[format!("machine.cpu=\"{name}\"")], None).unwrap();
            let t = &sc.machine.tlb;
            assert_eq!(
                (t.l1_4k_entries, t.l1_4k_ways, t.l1_1g_entries, t.l2_entries, t.l2_ways, t.l2_1g_entries),
                (l1, l1w, g1, l2, l2w, l2g),
                "{name}"
            );
            assert_eq!((t.l2_1g_splinter, sc.machine.cpu_ghz), (spl, ghz), "{name}");
            // Walk and STLB latencies are cycles at the preset's clock.
            let p = crate::hw::cpu::preset(name).unwrap();
            let walk = sc.machine.cost.walk_ns_per_level;
            assert!((walk - p.walk_cycles_per_level / ghz).abs() < 1e-3, "{name}: {walk}");
            assert_eq!(sc.machine.psc.pde_entries, 32, "{name}");
        }
    }

    #[test]
    fn explicit_keys_override_the_cpu_preset() {
        let text = "[machine]\ncpu = \"skylake-sp\"\ncpu_ghz = 3.1\n[machine.tlb]\nl2_entries = 768\n\
                    [machine.psc]\npde_entries = 8\npde_ways = 8\n[workload]\nkind = \"uniform\"\n";
        let sc = load(&src(text), &["machine.tlb.l1_1g_entries=0".into()], None).unwrap();
        let m = &sc.machine;
        assert_eq!((m.cpu_ghz, m.tlb.l2_entries, m.tlb.l1_1g_entries, m.psc.pde_entries), (3.1, 768, 0, 8));
        // Keys not given come from the preset.
        assert_eq!((m.tlb.l2_ways, m.tlb.l2_1g_entries, m.psc.pdpte_entries), (12, 16, 4));
        // Exported and loaded again: the same machine.
        let again = load(&src(&export(&sc)), &[], None).unwrap();
        assert_eq!(again.machine, sc.machine);
        // Without the preset nothing changes from the defaults.
        let plain = load(&src(OK), &[], None).unwrap();
        assert_eq!(plain.machine, MachineConfig::default());
    }

    #[test]
    fn unknown_cpu_preset_and_missing_sampling_hardware_are_errors() {
        let e = load(&src(OK), &["machine.cpu=\"pentium\"".into()], None).unwrap_err().to_string();
        assert!(e.contains("machine.cpu") && e.contains("pentium"), "{e}");
        for p in crate::hw::cpu::PRESETS {
            assert!(e.contains(&format!("\"{}\"", p.name)), "{e}");
        }
        let text =
            "[machine]\ncpu = \"zen3\"\n[workload]\nkind = \"uniform\"\n[[telemetry]]\nkind = \"pebs\"\n";
        let e = load(&src(text), &[], None).unwrap_err().to_string();
        assert!(e.contains("telemetry[0].kind") && e.contains("PEBS") && e.contains("zen3"), "{e}");
        let text = "[workload]\nkind = \"uniform\"\n[[telemetry]]\nkind = \"ibs\"\n";
        let e = load(&src(text), &["machine.cpu=\"icelake-sp\"".into()], None).unwrap_err().to_string();
        assert!(e.contains("telemetry[0].kind") && e.contains("IBS"), "{e}");
        assert!(load(&src(text), &["machine.cpu=\"zen4\"".into()], None).is_ok());
        let text =
            "[workload]\nkind = \"uniform\"\n[[stages]]\nname = \"a\"\nset = ['machine.cpu=\"zen4\"']\n";
        let e = load(&src(text), &[], None).unwrap_err().to_string();
        assert!(e.contains("stages[0].set") && e.contains("machine.cpu"), "{e}");
    }

    #[test]
    fn errors_inside_a_kind_table_name_the_key_and_its_line() {
        let e = |text: &str, over: &[&str]| {
            let over: Vec<String> = over.iter().map(|s| s.to_string()).collect();
            load(&src(text), &over, None).unwrap_err().to_string()
        };
        // A bad size in [workload]: the key's line and dotted field, the message on one line.
        let m = e("name = \"t\"\n[workload]\nkind = \"uniform\"\n\nfootprint = \"16XB\"\n", &[]);
        assert!(m.contains(":5:") && m.contains("workload.footprint") && !m.contains('\n'), "{m}");
        // An unknown variant: the key holding it.
        let m = e("[workload]\nkind = \"replay\"\npath = \"x\"\nmappings = \"bogus\"\n", &[]);
        assert!(m.contains(":4:") && m.contains("workload.mappings"), "{m}");
        // A missing top-level table is named alone (not after the first key of the file).
        let m = e("name = \"t\"\n", &[]);
        assert!(m.contains("field `workload`") && !m.contains("name.workload"), "{m}");
        // --set of a whole table to a number; an unknown nested key.
        let ok = "[workload]\nkind = \"uniform\"\n";
        let m = e(ok, &["workload=3"]);
        assert!(m.contains("expected a table with a `kind`"), "{m}");
        let m = e(ok, &["a.b.c.d.e=1"]);
        assert!(m.contains("field `a`:"), "{m}");
        // A value an override set is not the file's: no line of the file, the overrides named.
        let m = e("[machine]\ncores = 2\n[workload]\nkind = \"uniform\"\n", &["machine.cores = 0"]);
        assert!(m.contains("after --set machine.cores = 0") && !m.contains(":2:"), "{m}");
        let m = e("[machine]\ncores = 0\n[workload]\nkind = \"uniform\"\n", &["seed=3"]);
        assert!(m.contains(":2:") && m.contains("machine.cores"), "{m}");
        let m = e("[workload]\nkind = \"replay\"\npath = \"r\"\npopulate = true\nnode = 5\n", &[]);
        assert!(m.contains(":5:") && m.contains("workload.node") && m.contains("does not exist"), "{m}");
        let m = e(ok, &["workload.footprint=\"-5MiB\""]);
        assert!(m.contains("workload.footprint") && m.contains("negative"), "{m}");
    }

    #[test]
    fn a_stage_override_is_checked_as_a_scenario_file() {
        // A zero duration in a stage's overrides ran forever; a file may not hold it, and
        // neither may a stage: the error names the stage's `set` and the field.
        for (set, field) in [
            ("duration=\"0s\"", "duration"),
            ("window=\"0s\"", "window"),
            ("machine.cores=0", "machine.cores"),
        ] {
            let text = format!(
                "duration = \"20ms\"\n[workload]\nkind = \"uniform\"\nfootprint = \"16MiB\"\n\
                 [[stages]]\nname = \"a\"\n[[stages]]\nname = \"b\"\nset = ['{set}']\n"
            );
            let sc = load(&src(&text), &[], None).expect("the file itself is valid");
            let e = crate::driver::stages::plan(&sc, "s.toml").unwrap_err().to_string();
            assert!(e.contains("stages[1].set") && e.contains(field), "{set}: {e}");
        }
        let text = "duration = \"20ms\"\n[workload]\nkind = \"uniform\"\nfootprint = \"16MiB\"\n\
                    [[stages]]\nname = \"a\"\nset = ['duration=\"1ms\"']\n";
        let sc = load(&src(text), &[], None).unwrap();
        assert!(crate::driver::stages::plan(&sc, "s.toml").is_ok());
    }
}
