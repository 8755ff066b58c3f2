//! What a run will hold in memory, estimated before it starts; a run that would not fit in
//! the memory the host has available is refused with the estimate (issue 18).
//!
//! The estimate counts what grows with the scenario's numbers rather than with the
//! simulated program: per core, the TLB arrays (tag, data and replacement stamp: 24 bytes
//! an entry) and the data cache's tags (8 bytes a line); per window, a heatmap row (8 bytes
//! a bin), a timeseries row (8 bytes a column) and their copies in the result handed to
//! Python (about 40 bytes a value: a Python int or float and its list slot). The program's
//! own footprint (page tables, ground truth) is bounded by the nodes' capacities and kept in
//! bulk for large mappings; it is not part of this estimate.

use crate::error::{Result, SimError};
use crate::scenario::Scenario;

/// Bytes per value in the engine's per-window arrays.
const ENGINE_BYTES_PER_VALUE: u64 = 8;
/// Bytes per value once the result is a Python object (int/float object + list slot).
const PYTHON_BYTES_PER_VALUE: u64 = 40;
/// Timeseries columns of a run without agents (17 in the demo), plus those of each agent.
const BASE_COLUMNS: u64 = 24;
/// Timeseries columns an agent adds, at most (tiering: promotions, demotions, hot bytes, ...).
const COLUMNS_PER_AGENT: u64 = 12;
/// Bytes per TLB entry: tag, translation, replacement stamp.
const TLB_ENTRY_BYTES: u64 = 24;
/// Bytes per data-cache line: its tag.
const CACHE_LINE_BYTES: u64 = 8;

/// One part of the estimate.
#[derive(Clone, Debug, PartialEq)]
pub struct Part {
    /// What it is, with the numbers it comes from.
    pub what: String,
    /// Bytes.
    pub bytes: u64,
}

/// The estimate for `sc` running `end_ns` of simulated time (0: until the workload ends,
/// unknown: its windows are not counted).
pub fn estimate(sc: &Scenario, end_ns: u64, agents: usize) -> Vec<Part> {
    let m = &sc.machine;
    let cores = m.cores as u64;
    let t = &m.tlb;
    let entries = (t.l1_4k_entries + t.l1_2m_entries + t.l2_entries) as u64;
    let mut parts = vec![Part {
        what: format!("TLBs: {cores} cores x {entries} entries"),
        bytes: cores.saturating_mul(entries).saturating_mul(TLB_ENTRY_BYTES),
    }];
    if let Some(c) = &m.cache {
        let lines = c.size.0 / c.line.0.max(1);
        parts.push(Part {
            what: format!("data caches: {cores} cores x {lines} lines"),
            bytes: cores.saturating_mul(lines).saturating_mul(CACHE_LINE_BYTES),
        });
    }
    let window_ns = sc.window.0.max(1);
    if end_ns > 0 {
        let windows = end_ns.div_ceil(window_ns);
        let values = sc.report.heatmap_bins as u64 + BASE_COLUMNS + COLUMNS_PER_AGENT * agents as u64;
        parts.push(Part {
            what: format!(
                "timeseries and heatmap: {windows} windows of {} x {values} values",
                crate::units::format_duration(window_ns)
            ),
            bytes: windows
                .saturating_mul(values)
                .saturating_mul(ENGINE_BYTES_PER_VALUE + PYTHON_BYTES_PER_VALUE),
        });
    }
    parts
}

/// Memory the host has available (`MemAvailable` of `/proc/meminfo`), if it says.
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
}

/// Refuse the run when the estimate exceeds `available` bytes; the error lists the parts.
pub fn check(file: &str, parts: &[Part], available: Option<u64>) -> Result<()> {
    let total = parts.iter().fold(0u64, |a, p| a.saturating_add(p.bytes));
    let Some(avail) = available else { return Ok(()) };
    if total <= avail {
        return Ok(());
    }
    let mut big: Vec<&Part> = parts.iter().filter(|p| p.bytes > 0).collect();
    big.sort_by_key(|p| std::cmp::Reverse(p.bytes));
    let detail: Vec<String> = big.iter().map(|p| format!("{} ({})", p.what, gib(p.bytes))).collect();
    let field = if big.first().is_some_and(|p| p.what.starts_with("timeseries")) {
        "window"
    } else if big.first().is_some_and(|p| p.what.starts_with("data caches")) {
        "machine.cache.size"
    } else {
        "machine.tlb"
    };
    Err(SimError::config(
        file,
        field,
        format!(
            "this run would need about {} of memory but {} are available: {}; \
             use a longer window, a shorter duration or a smaller machine",
            gib(total),
            gib(avail),
            detail.join(", ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(text: &str) -> Scenario {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn a_one_ns_window_is_refused_with_the_estimate() {
        let sc = scenario("window = \"1ns\"\n[workload]\nkind = \"uniform\"\n");
        let parts = estimate(&sc, 8_000_000_000, 0);
        let e = check("demo", &parts, Some(24 << 30)).unwrap_err().to_string();
        assert!(e.contains("field `window`") && e.contains("8000000000 windows"), "{e}");
        // The default window (10 ms) fits easily.
        let sc = scenario("[workload]\nkind = \"uniform\"\n");
        check("demo", &estimate(&sc, 8_000_000_000, 2), Some(1 << 30)).unwrap();
        // Without a known host budget nothing is refused.
        check("demo", &parts, None).unwrap();
    }

    #[test]
    fn tlbs_and_caches_count_per_core() {
        let sc = scenario(
            "[machine]\ncores = 4096\n[machine.tlb]\nl2_entries = 65536\nl2_ways = 16\n[workload]\nkind = \"uniform\"\n",
        );
        let parts = estimate(&sc, 0, 0);
        assert_eq!(parts.len(), 1);
        assert!(parts[0].bytes > 6 << 30, "{parts:?}");
        assert!(check("t", &parts, Some(1 << 30)).unwrap_err().to_string().contains("machine.tlb"));
    }

    #[test]
    fn available_is_read_here() {
        // Linux hosts have /proc/meminfo; elsewhere the check is skipped.
        if std::path::Path::new("/proc/meminfo").exists() {
            assert!(available_bytes().unwrap() > 0);
        }
    }
}
