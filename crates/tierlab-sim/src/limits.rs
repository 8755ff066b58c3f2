//! The range of every numeric scenario parameter, checked when a scenario loads.
//!
//! Sizes and durations are bounded where they are parsed ([`crate::units::MAX_SIZE`],
//! [`crate::units::MAX_DURATION_NS`]); every other number of a scenario (an integer or a
//! float, in any table, defaults included) must match one rule of [`RULES`], the first that
//! matches its dotted path, and lie in that rule's range. A number no rule covers is refused
//! too (a test walks every kind's defaults so that none is left out). The ranges are wide:
//! they exclude what no machine or program has (a fault that takes more than a second, a
//! TLB of more than 65,536 entries), which is also what would make the engine's 64-bit
//! picosecond clock wrap or its tables outgrow the host; the kinds' own checks then say
//! what is inconsistent (ways that do not divide entries, a threshold above a count).
//!
//! `docs/scenarios.md` ("Ranges") lists the same table; a test keeps the two in step.

use tierlab_core::param::{FieldSpec, Shape};

/// One range rule.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    /// Dotted path with list indices removed; a segment may hold one `*` (any characters) and
    /// `**` matches any number of segments.
    pub pattern: &'static str,
    /// Smallest value accepted.
    pub min: f64,
    /// Whether `min` itself is refused (an open interval: `> min`).
    pub min_open: bool,
    /// Largest value accepted.
    pub max: f64,
    /// Whether the value must be an integer.
    pub integer: bool,
    /// Unit and meaning, for messages and the docs.
    pub what: &'static str,
}

const fn r(pattern: &'static str, min: f64, max: f64, what: &'static str) -> Rule {
    Rule { pattern, min, min_open: false, max, integer: false, what }
}
const fn pos(pattern: &'static str, max: f64, what: &'static str) -> Rule {
    Rule { pattern, min: 0.0, min_open: true, max, integer: false, what }
}
const fn int(pattern: &'static str, min: f64, max: f64, what: &'static str) -> Rule {
    Rule { pattern, min, min_open: false, max, integer: true, what }
}

/// Most cores and threads a scenario may have (core numbers are below it).
const MAX_CORES: f64 = 4096.0; // not a page size
/// Largest cache line or access, bytes.
const MAX_LINE: f64 = 4096.0; // not a page size

/// 2^63 - 1 as an f64 bound (TOML integers are signed 64-bit).
const I64_MAX: f64 = 9.223_372_036_854_776e18;
/// 2^48: pages of a 48-bit address space at 4 KiB are 2^36; counts of things in a scenario
/// (items, keys, iterations, accesses) stay far below this.
const COUNT_MAX: f64 = 281_474_976_710_656.0;

/// The rules, most specific first.
pub const RULES: &[Rule] = &[
    int("seed", 0.0, I64_MAX, "the seed (any TOML integer >= 0)"),
    int("report.heatmap_bins", 1.0, 100_000.0, "address bins of the heatmap"),
    // The machine.
    int("machine.cores", 1.0, MAX_CORES, "cores"),
    int("machine.nodes.cores", 0.0, MAX_CORES - 1.0, "core numbers"),
    int("machine.nodes.tier", 0.0, 255.0, "tier number"),
    pos("machine.cpu_ghz", 100.0, "GHz"),
    r("machine.remote_factor", 1.0, 1000.0, "latency multiplier of a remote socket"),
    r("machine.cost.cache_hit_fraction", 0.0, 1.0, "fraction"),
    int("machine.cost.flush_ceiling_pages", 0.0, COUNT_MAX, "pages"),
    int("machine.cache.ways", 1.0, 64.0, "ways"),
    int("machine.cache.line", 8.0, MAX_LINE, "bytes"),
    int("machine.**.*_entries", 0.0, 65_536.0, "entries of a TLB or paging-structure cache"),
    // A lookup compares a set's every way: 65,536 ways (a fully associative 65,536-entry TLB)
    // made a one-second run take minutes. Real TLBs have at most a few hundred ways.
    int("machine.**.*_ways", 1.0, 256.0, "ways, all compared on every lookup"),
    int("machine.hmem.scanner_threads", 1.0, MAX_CORES, "threads"),
    // Loaded latency of a node.
    r("machine.nodes.loaded.max_factor", 1.0, 1e6, "latency multiplier at saturation"),
    r(
        "machine.nodes.loaded.points",
        0.0,
        1e9,
        "(bandwidth fraction or GB/s, latency multiplier or ns) points",
    ),
    r("machine.nodes.loaded.background_*_gbps", 0.0, 1e6, "GB/s of background traffic"),
    int("machine.nodes.loaded.line_bytes", 1.0, MAX_LINE, "bytes per access"),
    // Time and bandwidth, anywhere.
    r("**.*_ns", 0.0, 1e9, "ns: the time of one event (at most one second)"),
    r("**.*ns_per_*", 0.0, 1e9, "ns per item (at most one second)"),
    r("**.*_cycles", 0.0, 1e12, "CPU cycles of one event"),
    pos("**.*_gbps", 1e6, "GB/s"),
    pos("**.*_hz", 1e10, "Hz"),
    pos("**.*_ghz", 100.0, "GHz"),
    // Fractions and probabilities.
    r("**.*_fraction", 0.0, 1.0, "fraction"),
    r("**.p", 0.0, 1.0, "fraction of prioritized pages"),
    r("**.flex_*", 0.0, 1.0, "fraction of a level's entries"),
    r("scoring.target", 0.0, 1.0, "fraction"),
    r("**.theta", 0.0, 100.0, "Zipf exponent"),
    r("**.aging", 0.0, 1e6, "aging factor"),
    // Telemetry counts.
    int("telemetry.period", 1.0, 1e12, "events per sample (the PMU's reset value)"),
    int("telemetry.record_size", 1.0, 65_536.0, "bytes per PEBS record"),
    int("**.*_nr_regions", 1.0, 1e8, "regions"),
    int("**.tune_access_bp", 1.0, 10_000.0, "basis points of accesses"),
    // PEBS as perf drives it, IBS.
    r("**.cpu_time_max_percent", 0.0, 100.0, "percent of CPU time (perf_cpu_time_max_percent)"),
    r("**.*_cycles_per_record", 0.0, 1e12, "CPU cycles per record"),
    pos("**.hz", 1e6, "Hz (CONFIG_HZ)"),
    pos("**.max_sample_rate", 1e9, "samples per second"),
    int("telemetry.*_period", 1.0, 1e12, "events per sample"),
    int("**.pebs_counters", 1.0, 64.0, "PEBS-capable counters"),
    // DAMOS schemes.
    int("telemetry.schemes.*_nr_accesses", 0.0, 1e9, "accesses per aggregation interval"),
    int("telemetry.schemes.*_age", 0.0, 4_294_967_295.0, "aggregation intervals"),
    int("**.*nid", 0.0, 255.0, "node number"),
    int("telemetry.schemes.quota.ms", 0.0, 1e9, "ms of applying per reset interval"),
    int("telemetry.schemes.quota.weight_*", 0.0, 4_294_967_295.0, "priority weight"),
    int(
        "telemetry.schemes.quota.goals.*",
        0.0,
        I64_MAX,
        "a goal's target or current value (its metric's unit)",
    ),
    int("telemetry.schemes.watermarks.*", 0.0, 1000.0, "per mille"),
    int("telemetry.schemes.filters.*", 0.0, I64_MAX, "address"),
    int("**.*_bp", 0.0, 10_000.0, "basis points"),
    int("**.*threshold*", 0.0, COUNT_MAX, "count"),
    int("**.min_samples", 0.0, COUNT_MAX, "samples"),
    int("**.tune_aggrs", 1.0, 1e6, "aggregation intervals"),
    int("telemetry.chunk_ptes", 1.0, COUNT_MAX, "PTE slots scanned per event"),
    pos("telemetry.max_cpu", 1.0, "fraction of one core"),
    // Placement and tiering.
    int("placement.period", 1.0, 1e12, "events per sample (the PMU's reset value)"),
    int("placement.buffer_records", 1.0, 1e9, "samples buffered per interrupt"),
    int("tiering.cooling_samples", 1.0, COUNT_MAX, "samples between coolings"),
    int("tiering.*_period", 1.0, 1e12, "events per sample"),
    pos("tiering.cpu_limit", 1.0, "fraction of one core"),
    r("tiering.demote_watermark", 0.0, 1.0, "fraction of the fast tier kept free"),
    r("tiering.fill", 0.0, 1.0, "fraction of the fast tier filled"),
    int("tiering.adjust_steps", 1.0, 1e6, "steps of the hot threshold's adjustment"),
    r("tiering.enough_free_fraction", 0.0, 1.0, "fraction of the fast tier free"),
    int("tiering.ewma_exp", 0.0, 16.0, "EWMA weight exponent"),
    r("tiering.delta", 0.0, 1.0, "fraction of a latency"),
    r("tiering.epsilon", 0.0, 1.0, "fraction of the accesses"),
    int("tiering.*_node", 0.0, 255.0, "node number"),
    pos("tiering.rate_limit_mbps", 1e9, "MB/s of migration"),
    // Replacement policies.
    r("policies.scan_ratio", 0.0, 1e6, "inactive pages scanned per page evicted (0 = all)"),
    r("policies.active_scan", 0.0, 1.0, "fraction of the active list aged per scan"),
    // Workloads: counts and sizes of the program's own structures.
    int("workload.threads", 1.0, MAX_CORES, "threads"),
    int("workload.node", 0.0, 255.0, "node number"),
    int("workload.nx", 1.0, 1e7, "grid points"),
    int("workload.ny", 1.0, 1e7, "grid points"),
    int("workload.nz", 1.0, 1e7, "grid points"),
    int("workload.points", 1.0, 1e4, "stencil points"),
    int("workload.repeat", 1.0, 1e9, "repetitions"),
    int("workload.accesses_per_choice", 1.0, 1e12, "accesses"),
    int("workload.*", 0.0, COUNT_MAX, "count (items, keys, clients, iterations, accesses)"),
    int("**.*_size", 0.0, crate::units::MAX_SIZE as f64, "bytes"),
    // Sizes are written as integers when they are not a whole number of a unit (`100000000`,
    // `0`); every size field is bounded where it is parsed too.
    int("**.size", 0.0, crate::units::MAX_SIZE as f64, "bytes"),
    int("**.sz", 0.0, crate::units::MAX_SIZE as f64, "bytes"),
    int("**.*_sz", 0.0, crate::units::MAX_SIZE as f64, "bytes"),
    int("**.footprint", 0.0, crate::units::MAX_SIZE as f64, "bytes"),
    int("**.capacity", 0.0, crate::units::MAX_SIZE as f64, "bytes"),
    int("**.align", 0.0, crate::units::MAX_SIZE as f64, "bytes"),
    int("**.line", 0.0, crate::units::MAX_SIZE as f64, "bytes"),
    int("**.max_migrate", 0.0, crate::units::MAX_SIZE as f64, "bytes"),
    int("**.*_pages", 0.0, COUNT_MAX, "pages"),
    int("**.*_regions", 0.0, 1e8, "regions"),
    int("**.cores", 0.0, MAX_CORES - 1.0, "core numbers"),
    int("**.core", 0.0, MAX_CORES - 1.0, "core number"),
    int("**.node", 0.0, 255.0, "node number"),
    int("**.nodes", 0.0, 255.0, "node numbers"),
];

/// Whether dotted `path` (indices removed) matches `pattern`.
pub fn matches(pattern: &str, path: &str) -> bool {
    let p: Vec<&str> = pattern.split('.').collect();
    let s: Vec<&str> = path.split('.').collect();
    match_segs(&p, &s)
}

fn match_segs(p: &[&str], s: &[&str]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((&"**", rest)) => (0..=s.len()).any(|k| match_segs(rest, &s[k..])),
        Some((first, rest)) => match s.split_first() {
            Some((seg, srest)) => match_seg(first, seg) && match_segs(rest, srest),
            None => false,
        },
    }
}

fn match_seg(p: &str, s: &str) -> bool {
    match p.split_once('*') {
        None => p == s,
        Some((pre, post)) => {
            if let Some((mid, post2)) = post.split_once('*') {
                // `*a*`: `pre` and `post2` at the ends, `mid` somewhere between.
                s.len() >= pre.len() + post2.len()
                    && s.starts_with(pre)
                    && s.ends_with(post2)
                    && s[pre.len()..s.len() - post2.len()].contains(mid)
            } else {
                s.len() >= pre.len() + post.len() && s.starts_with(pre) && s.ends_with(post)
            }
        }
    }
}

/// The rule for `path` (indices removed).
pub fn rule_for(path: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| matches(r.pattern, path))
}

/// A number out of range: (dotted path with indices, message).
pub type Violation = (String, String);

/// Check every number of `value` (a table of parameters as TOML, defaults included, whose
/// keys are `fields`: a scenario) against the range its field declares (`#[param(range =
/// ...)]`); a field of a struct not declared yet falls back to [`RULES`].
pub fn check(value: &toml::Value, fields: &[&'static FieldSpec]) -> Result<(), Violation> {
    let toml::Value::Table(t) = value else { return Ok(()) };
    check_table(t, fields, &mut String::new(), &mut String::new())
}

/// Check the numbers of a declared struct against their ranges (configurations built in code
/// and checks that run again after a scenario's load); errors name `prefix.field`.
pub fn check_ranges<P: tierlab_core::param::Declared + serde::Serialize>(
    p: &P,
    prefix: &str,
) -> Result<(), Violation> {
    let value = toml::Value::try_from(p).map_err(|e| (prefix.to_string(), e.to_string()))?;
    let toml::Value::Table(t) = value else { return Ok(()) };
    let (mut path, mut bare) = (prefix.to_string(), prefix.to_string());
    check_table(&t, &P::fields(), &mut path, &mut bare)
}

/// Check the numbers of the table `t` whose keys are `fields`.
pub fn check_table(
    t: &toml::Table,
    fields: &[&'static FieldSpec],
    path: &mut String,
    bare: &mut String,
) -> Result<(), Violation> {
    for (k, x) in t {
        let (p0, b0) = (path.len(), bare.len());
        *path = join(path, k);
        *bare = join(bare, k);
        match tierlab_core::param::find(fields.to_vec(), k) {
            Some(f) => check_value(x, (f.shape)(), f, path, bare)?,
            // `kind` of a tagged table; a key of a struct not declared yet.
            None => walk(x, path, bare)?,
        }
        path.truncate(p0);
        bare.truncate(b0);
    }
    Ok(())
}

fn check_value(
    v: &toml::Value,
    shape: Shape,
    f: &'static FieldSpec,
    path: &mut String,
    bare: &mut String,
) -> Result<(), Violation> {
    match (shape, v) {
        (Shape::Table(fields), toml::Value::Table(t)) => check_table(t, &fields(), path, bare),
        (Shape::Tagged { fields, .. }, toml::Value::Table(t)) => {
            match t.get("kind").and_then(|k| k.as_str()).and_then(fields) {
                Some(fs) => check_table(t, &fs, path, bare),
                None => Ok(()),
            }
        }
        (Shape::List(inner), toml::Value::Array(a)) => {
            for (i, x) in a.iter().enumerate() {
                let p0 = path.len();
                path.push_str(&format!("[{i}]"));
                check_value(x, inner(), f, path, bare)?;
                path.truncate(p0);
            }
            Ok(())
        }
        (Shape::Optional(inner), _) => check_value(v, inner(), f, path, bare),
        (Shape::Map(inner), toml::Value::Table(t)) => {
            for (k, x) in t {
                let p0 = path.len();
                *path = join(path, k);
                check_value(x, inner(), f, path, bare)?;
                path.truncate(p0);
            }
            Ok(())
        }
        (Shape::Int | Shape::Float, toml::Value::Integer(i)) => {
            check_declared(*i as f64, true, f, path, bare)
        }
        (Shape::Int, toml::Value::Float(x)) => {
            Err((path.to_string(), format!("{x} must be an integer ({})", f.unit_or("count"))))
        }
        (Shape::Float, toml::Value::Float(x)) => check_declared(*x, false, f, path, bare),
        // Sizes and durations: bounded where parsed; a declared range is checked on the
        // parsed value (bytes, ns).
        (Shape::Size, _) if f.range.is_some() => match size_of(v) {
            Some(b) => check_declared(b as f64, true, f, path, bare),
            None => Ok(()),
        },
        (Shape::Duration, _) if f.range.is_some() => match duration_of(v) {
            Some(ns) => check_declared(ns as f64, true, f, path, bare),
            None => Ok(()),
        },
        (Shape::Any, _) => walk(v, path, bare),
        // Strings, booleans, sizes and durations (bounded where parsed).
        _ => Ok(()),
    }
}

/// The bytes of a size as written (an integer or a string with a unit).
fn size_of(v: &toml::Value) -> Option<u64> {
    match v {
        toml::Value::Integer(i) => u64::try_from(*i).ok(),
        toml::Value::String(s) => crate::units::parse_size(s).ok(),
        _ => None,
    }
}

/// The ns of a duration as written (seconds as a number, or a string with a unit).
fn duration_of(v: &toml::Value) -> Option<u64> {
    v.clone().try_into::<crate::units::Duration>().ok().map(|d| d.0)
}

fn check_declared(x: f64, is_int: bool, f: &FieldSpec, path: &str, bare: &str) -> Result<(), Violation> {
    let Some(range) = f.range else {
        return check_number(x, is_int, path, bare);
    };
    if !x.is_finite() {
        return Err((path.to_string(), format!("{x} is not a finite number")));
    }
    if !range.contains(x) {
        let unit = if f.unit.is_empty() { String::new() } else { format!(" ({})", f.unit) };
        return Err((path.to_string(), format!("{} is out of range: must be in {range}{unit}", fmt(x))));
    }
    Ok(())
}

/// Every number of `value` that no rule covers, as `(path, value)` (for the test that keeps
/// [`RULES`] complete).
pub fn uncovered(value: &toml::Value) -> Vec<(String, String)> {
    fn go(v: &toml::Value, path: &str, bare: &str, out: &mut Vec<(String, String)>) {
        match v {
            toml::Value::Table(t) => t.iter().for_each(|(k, x)| go(x, &join(path, k), &join(bare, k), out)),
            toml::Value::Array(a) => {
                a.iter().enumerate().for_each(|(i, x)| go(x, &format!("{path}[{i}]"), bare, out))
            }
            toml::Value::Integer(_) | toml::Value::Float(_) if rule_for(bare).is_none() => {
                out.push((path.to_string(), v.to_string()))
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    go(value, "", "", &mut out);
    out
}

fn join(base: &str, k: &str) -> String {
    if base.is_empty() {
        k.to_string()
    } else {
        format!("{base}.{k}")
    }
}

fn walk(v: &toml::Value, path: &mut String, bare: &mut String) -> Result<(), Violation> {
    match v {
        toml::Value::Table(t) => {
            for (k, x) in t {
                // Free-form tables of strings (sweep `set`) have no numbers to check.
                let (p0, b0) = (path.len(), bare.len());
                *path = join(path, k);
                *bare = join(bare, k);
                walk(x, path, bare)?;
                path.truncate(p0);
                bare.truncate(b0);
            }
            Ok(())
        }
        toml::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                let p0 = path.len();
                path.push_str(&format!("[{i}]"));
                walk(x, path, bare)?;
                path.truncate(p0);
            }
            Ok(())
        }
        toml::Value::Integer(i) => check_number(*i as f64, true, path, bare),
        toml::Value::Float(f) => check_number(*f, false, path, bare),
        _ => Ok(()),
    }
}

fn check_number(x: f64, is_int: bool, path: &str, bare: &str) -> Result<(), Violation> {
    // Sweep points and stages carry overrides as strings; their numbers are checked when
    // the override is applied. Nothing numeric lives there.
    let Some(rule) = rule_for(bare) else {
        return Err((
            path.to_string(),
            "no range is declared for this number (a bug: add it to limits::RULES)".into(),
        ));
    };
    if !x.is_finite() {
        return Err((path.to_string(), format!("{x} is not a finite number")));
    }
    if rule.integer && !is_int {
        return Err((path.to_string(), format!("{x} must be an integer ({})", rule.what)));
    }
    let low_ok = if rule.min_open { x > rule.min } else { x >= rule.min };
    if !low_ok || x > rule.max {
        let lo = if rule.min_open { "(" } else { "[" };
        return Err((
            path.to_string(),
            format!(
                "{} is out of range: must be in {lo}{}, {}] ({})",
                fmt(x),
                fmt(rule.min),
                fmt(rule.max),
                rule.what
            ),
        ));
    }
    Ok(())
}

/// A number as a person writes it (integers without `.0`, large ones in exponent form).
pub fn fmt(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else if x.abs() >= 1e15 || (x != 0.0 && x.abs() < 1e-4) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// The rules as a Markdown table (for `docs/scenarios.md`).
pub fn markdown() -> String {
    let mut s = String::from("| parameter | range | meaning |\n| --- | --- | --- |\n");
    for r in RULES {
        let lo = if r.min_open { "(" } else { "[" };
        let int = if r.integer { ", integer" } else { "" };
        s.push_str(&format!("| `{}` | {lo}{}, {}]{int} | {} |\n", r.pattern, fmt(r.min), fmt(r.max), r.what));
    }
    s
}

/// Largest scenario or masim config file read (16 MiB: the biggest built-in is a few KiB).
pub const MAX_TEXT_FILE: u64 = 16 << 20;

/// Read a text file an input names, bounded: it must be a regular file (a FIFO, a device
/// such as `/dev/zero` or a directory is refused before any read), at most `max` bytes, and
/// UTF-8. The error says what is wrong without quoting the content.
pub fn read_text(path: &std::path::Path, max: u64) -> Result<String, String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    if !meta.is_file() {
        let kind =
            if meta.is_dir() { "a directory" } else { "not a regular file (a FIFO, socket or device)" };
        return Err(format!("cannot read: {kind}"));
    }
    if meta.len() > max {
        return Err(format!("too large: {} bytes (at most {max})", meta.len()));
    }
    let f = std::fs::File::open(path).map_err(|e| format!("cannot read: {e}"))?;
    let mut buf = Vec::with_capacity(meta.len() as usize);
    // The size may change between the check and the read: read at most one byte more.
    f.take(max + 1).read_to_end(&mut buf).map_err(|e| format!("cannot read: {e}"))?;
    if buf.len() as u64 > max {
        return Err(format!("too large: more than {max} bytes"));
    }
    String::from_utf8(buf)
        .map_err(|e| format!("not a text file: invalid UTF-8 at byte {}", e.utf8_error().valid_up_to()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn read_text_refuses_what_is_not_a_small_text_file() {
        let dir = std::env::temp_dir().join(format!("tierlab-limits-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ok = dir.join("ok.toml");
        std::fs::write(&ok, "a = 1\n").unwrap();
        assert_eq!(read_text(&ok, 100).unwrap(), "a = 1\n");
        assert!(read_text(&ok, 3).unwrap_err().contains("too large"));
        let bin = dir.join("bin");
        std::fs::write(&bin, [b'a', 0xff, 0xfe]).unwrap();
        assert!(read_text(&bin, 100).unwrap_err().contains("invalid UTF-8 at byte 1"));
        assert!(read_text(&dir, 100).unwrap_err().contains("a directory"));
        assert!(read_text(std::path::Path::new("/dev/zero"), 100)
            .unwrap_err()
            .contains("not a regular file"));
        assert!(read_text(&dir.join("missing"), 100).unwrap_err().contains("cannot read"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    use super::*;

    #[test]
    fn patterns() {
        assert!(matches("**.*_ns", "machine.cost.fault_ns"));
        assert!(matches("**.*_ns", "fault_ns"));
        assert!(!matches("**.*_ns", "machine.cost.fault_nsx"));
        assert!(matches("machine.**.*_entries", "machine.tlb.l2_entries"));
        assert!(matches("machine.**.*_entries", "machine.hmem.l1_64k_entries"));
        assert!(!matches("machine.**.*_entries", "telemetry.l2_entries"));
        assert!(matches("**.*threshold*", "telemetry.hot_threshold"));
        assert!(matches("**.*threshold*", "scoring.truth_threshold"));
        assert!(matches("workload.*", "workload.keys"));
        assert!(!matches("workload.*", "workload.a.b"));
    }

    fn table(s: &str) -> toml::Value {
        toml::Value::Table(toml::from_str(s).unwrap())
    }

    fn check(v: &toml::Value) -> Result<(), Violation> {
        use tierlab_core::param::Declared;
        super::check(v, &crate::scenario::Scenario::fields())
    }

    #[test]
    fn out_of_range_and_non_finite() {
        let e = check(&table("[machine.cost]\nfault_ns = 1e17\n")).unwrap_err();
        assert_eq!(e.0, "machine.cost.fault_ns");
        assert!(e.1.contains("1e17 is out of range: must be in [0, 1000000000]"), "{}", e.1);
        let e = check(&table("[machine]\nremote_factor = nan\n")).unwrap_err();
        assert!(e.1.contains("not a finite"), "{}", e.1);
        let e = check(&table("[[machine.nodes]]\nlatency_ns = 90.0\n[[machine.nodes]]\nlatency_ns = inf\n"))
            .unwrap_err();
        assert_eq!(e.0, "machine.nodes[1].latency_ns");
        let e = check(&table("[machine.tlb]\nl2_entries = 1200000000\n")).unwrap_err();
        assert!(e.1.contains("65536"), "{}", e.1);
        let e = check(&table("[machine.tlb]\nl1_4k_entries = 65536\nl1_4k_ways = 65536\n")).unwrap_err();
        assert_eq!(e.0, "machine.tlb.l1_4k_ways");
        assert!(e.1.contains("must be in [1, 256]"), "{}", e.1);
        let e = check(&table("[workload]\nkind = \"uniform\"\nthreads = 2.5\n")).unwrap_err();
        assert!(e.1.contains("integer"), "{}", e.1);
        check(&table("seed = 7\n[machine.cost]\nfault_ns = 1000.0\n")).unwrap();
    }

    #[test]
    fn unknown_numbers_are_refused() {
        let e = check(&table("[foo]\nbar = 1\n")).unwrap_err();
        assert!(e.1.contains("no range"), "{}", e.1);
    }
}
