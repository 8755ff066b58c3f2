//! damo's formats: DAMOS scheme specifications as damo writes them (parsed into
//! [`SchemeConfig`]s with damo's units) and damo records of region snapshots (written).

use super::config::{
    Action, FilterConfig, FilterKind, GoalConfig, GoalTuner, Metric, SchemeConfig, WmarkMetric,
};
use crate::agents::telemetry::monitor::intervals_in;
use crate::units::{ByteSize, Duration, Ps};

// ---------------------------------------------------------------------------------------
// damo's scheme specifications.

/// Parse schemes as written for damo (`damo args damos --format json`, `damo start
/// --damos ...` files): a JSON list of schemes, an object with `schemes`, or damo's whole
/// DAMON parameters (`kdamonds[].contexts[].schemes`, every context's schemes in order).
/// damo's units are understood: sizes (`"4.000 KiB"`, `"max"`), `nr_accesses` in percent
/// (`"5 %"`) or samples (`"3 samples"`), ages in time (`"10 s"`) or aggregation intervals
/// (`"3 aggr_intervals"`), times (`"1 s"`, microseconds as numbers), per-mille weights
/// and watermarks (`"10 %"`, `"100 permil"` or numbers). Percent and time values are
/// converted with the context's intervals (`sample`, `aggr`), as damo does when it commits
/// them to the kernel. Errors name the scheme index and the field.
pub fn schemes_from_damo_json(
    text: &str,
    sample: Ps,
    aggr: Ps,
) -> std::result::Result<Vec<SchemeConfig>, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let list: Vec<serde_json::Value> = if let Some(a) = v.as_array() {
        a.clone()
    } else if let Some(s) = v.get("schemes").and_then(|s| s.as_array()) {
        s.clone()
    } else if let Some(k) = v.get("kdamonds").and_then(|k| k.as_array()) {
        let mut out = Vec::new();
        for kd in k {
            for ctx in kd.get("contexts").and_then(|c| c.as_array()).into_iter().flatten() {
                out.extend(ctx.get("schemes").and_then(|s| s.as_array()).into_iter().flatten().cloned());
            }
        }
        out
    } else {
        return Err(
            "expected a list of schemes, {\"schemes\": [...]}, or damo's {\"kdamonds\": [...]}".into()
        );
    };
    list.iter()
        .enumerate()
        .map(|(i, s)| damo_scheme(s, sample, aggr).map_err(|(f, e)| format!("schemes[{i}].{f}: {e}")))
        .collect()
}

type FieldErr = (String, String);

fn ferr(f: &str, e: impl Into<String>) -> FieldErr {
    (f.to_string(), e.into())
}

/// A damo text or number: `Ok(None)` for "max" (no limit), `Ok(Some(0))`... for "min".
fn damo_text(v: &serde_json::Value) -> std::result::Result<String, String> {
    match v {
        serde_json::Value::String(s) => Ok(s.trim().to_string()),
        serde_json::Value::Number(n) => Ok(n.to_string()),
        serde_json::Value::Bool(b) => Ok(b.to_string()),
        serde_json::Value::Null => Err("missing value".into()),
        _ => Err(format!("expected a number or a string, got {v}")),
    }
}

fn damo_nr(s: &str) -> std::result::Result<f64, String> {
    let t: String = s.chars().filter(|&c| c != ',').collect();
    t.trim().parse::<f64>().map_err(|_| format!("`{s}` is not a number"))
}

/// `text_to_bytes`; `None` for "max".
fn damo_bytes(v: &serde_json::Value) -> std::result::Result<Option<u64>, String> {
    let s = damo_text(v)?;
    match s.as_str() {
        "max" => return Ok(None),
        "min" => return Ok(Some(0)),
        _ => {}
    }
    if let Ok(n) = damo_nr(&s) {
        // damo writes "no limit" as ULONG_MAX.
        return Ok(if n >= u64::MAX as f64 { None } else { Some(n as u64) });
    }
    let units = [
        ("EiB", 60),
        ("PiB", 50),
        ("TiB", 40),
        ("GiB", 30),
        ("MiB", 20),
        ("KiB", 10),
        ("EB", 60),
        ("PB", 50),
        ("TB", 40),
        ("GB", 30),
        ("MB", 20),
        ("KB", 10),
        ("E", 60),
        ("P", 50),
        ("T", 40),
        ("G", 30),
        ("M", 20),
        ("K", 10),
        ("B", 0),
    ];
    for (u, shift) in units {
        if let Some(num) = s.strip_suffix(u) {
            let n = damo_nr(num)?;
            return Ok(Some((n * (1u64 << shift) as f64) as u64));
        }
    }
    Err(format!("`{s}` is not a size"))
}

/// `text_to_ns`; `None` for "max". Multi-field values ("1 m 30 s") are summed.
fn damo_ns(v: &serde_json::Value, number_unit_ns: f64) -> std::result::Result<Option<u64>, String> {
    let s = damo_text(v)?;
    match s.as_str() {
        "max" => return Ok(None),
        "min" => return Ok(Some(0)),
        _ => {}
    }
    if let Ok(n) = damo_nr(&s) {
        return Ok(Some((n * number_unit_ns) as u64));
    }
    let fields: Vec<&str> = s.split_whitespace().collect();
    let mut total = 0f64;
    let mut k = 0;
    while k < fields.len() {
        let (num, unit, step) = if k + 1 < fields.len() && damo_nr(fields[k]).is_ok() {
            (damo_nr(fields[k])?, fields[k + 1], 2)
        } else {
            let f = fields[k];
            let split =
                f.find(|c: char| c.is_ascii_alphabetic()).ok_or_else(|| format!("`{s}` is not a time"))?;
            (damo_nr(&f[..split])?, &f[split..], 1)
        };
        let mult = match unit {
            "ns" => 1.0,
            "us" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "d" => 86400e9,
            _ => return Err(format!("`{s}`: unknown time unit `{unit}`")),
        };
        total += num * mult;
        k += step;
    }
    Ok(Some(total as u64))
}

/// `text_to_ratio` of a percent, per-mille or basis-point value, as a ratio.
fn damo_ratio(v: &serde_json::Value, number_is: f64) -> std::result::Result<f64, String> {
    let s = damo_text(v)?;
    if let Ok(n) = damo_nr(&s) {
        return Ok(n / number_is);
    }
    if let Some(p) = s.strip_suffix('%') {
        return Ok(damo_nr(p)? / 100.0);
    }
    if let Some(p) = s.strip_suffix("permil") {
        return Ok(damo_nr(p)? / 1000.0);
    }
    if let Some(p) = s.strip_suffix("bp") {
        return Ok(damo_nr(p)? / 10_000.0);
    }
    Err(format!("`{s}` is not a ratio"))
}

fn damo_bool(v: &serde_json::Value) -> std::result::Result<bool, String> {
    match v {
        serde_json::Value::Bool(b) => Ok(*b),
        serde_json::Value::String(s) => match s.to_lowercase().as_str() {
            "y" | "yes" | "true" => Ok(true),
            "n" | "no" | "false" => Ok(false),
            _ => Err(format!("`{s}` is not a boolean")),
        },
        _ => Err(format!("{v} is not a boolean")),
    }
}

fn get<'a>(v: &'a serde_json::Value, k: &str) -> Option<&'a serde_json::Value> {
    v.get(k).filter(|x| !x.is_null())
}

fn damo_scheme(s: &serde_json::Value, sample: Ps, aggr: Ps) -> std::result::Result<SchemeConfig, FieldErr> {
    let action = get(s, "action").map_or(Ok("stat".to_string()), damo_text).map_err(|e| ferr("action", e))?;
    let action = Action::from_name(&action).map_err(|e| ferr("action", e))?;
    let mut c = SchemeConfig::new(action);
    if let Some(t) = get(s, "target_nid") {
        let n =
            damo_nr(&damo_text(t).map_err(|e| ferr("target_nid", e))?).map_err(|e| ferr("target_nid", e))?;
        c.target_nid = Some(n as u8);
    }
    if get(s, "dests").and_then(|d| d.as_array()).is_some_and(|d| !d.is_empty()) {
        return Err(ferr("dests", "weighted migration destinations are not modelled; use target_nid"));
    }
    let max_nr = intervals_in(aggr, sample) as f64;
    if let Some(p) = get(s, "access_pattern") {
        if let Some(sz) = get(p, "sz_bytes") {
            if let Some(v) = get(sz, "min") {
                c.min_size = ByteSize(
                    damo_bytes(v).map_err(|e| ferr("access_pattern.sz_bytes.min", e))?.unwrap_or(u64::MAX),
                );
            }
            if let Some(v) = get(sz, "max") {
                c.max_size = damo_bytes(v).map_err(|e| ferr("access_pattern.sz_bytes.max", e))?.map(ByteSize);
            }
        }
        let nr = |v: &serde_json::Value, f: &str| -> std::result::Result<Option<u32>, FieldErr> {
            let t = damo_text(v).map_err(|e| ferr(f, e))?;
            if t == "max" {
                return Ok(None);
            }
            if t == "min" {
                return Ok(Some(0));
            }
            let fields: Vec<&str> = t.split_whitespace().collect();
            if fields.len() == 2 && (fields[1] == "samples" || fields[1] == "sample_intervals") {
                return Ok(Some(damo_nr(fields[0]).map_err(|e| ferr(f, e))? as u32));
            }
            // Percent (damo's default unit): samples = percent x max / 100.
            let pct = if let Some(p) = t.strip_suffix('%') { damo_nr(p) } else { damo_nr(&t) }
                .map_err(|e| ferr(f, e))?;
            Ok(Some((pct * max_nr / 100.0) as u32))
        };
        if let Some(n) = get(p, "nr_accesses") {
            if let Some(v) = get(n, "min") {
                c.min_nr_accesses = nr(v, "access_pattern.nr_accesses.min")?.unwrap_or(u32::MAX);
            }
            if let Some(v) = get(n, "max") {
                c.max_nr_accesses = nr(v, "access_pattern.nr_accesses.max")?;
            }
        }
        let age = |v: &serde_json::Value, f: &str| -> std::result::Result<Option<u32>, FieldErr> {
            let t = damo_text(v).map_err(|e| ferr(f, e))?;
            let fields: Vec<&str> = t.split_whitespace().collect();
            if fields.len() == 2 && fields[1] == "aggr_intervals" {
                return Ok(Some(damo_nr(fields[0]).map_err(|e| ferr(f, e))? as u32));
            }
            // Time (damo's default unit: microseconds as plain numbers).
            Ok(damo_ns(v, 1e3)
                .map_err(|e| ferr(f, e))?
                .map(|ns| intervals_in(Duration(ns).ps(), aggr) as u32))
        };
        if let Some(a) = get(p, "age") {
            if let Some(v) = get(a, "min") {
                c.min_age = age(v, "access_pattern.age.min")?.unwrap_or(u32::MAX);
            }
            if let Some(v) = get(a, "max") {
                c.max_age = age(v, "access_pattern.age.max")?;
            }
        }
    }
    if let Some(v) = get(s, "apply_interval_us") {
        c.apply_interval = Duration(damo_ns(v, 1e3).map_err(|e| ferr("apply_interval_us", e))?.unwrap_or(0));
    }
    if let Some(q) = get(s, "quotas") {
        if let Some(v) = get(q, "time_ms") {
            c.quota.ms = damo_ns(v, 1e6).map_err(|e| ferr("quotas.time_ms", e))?.unwrap_or(0) / 1_000_000;
        }
        if let Some(v) = get(q, "sz_bytes") {
            c.quota.sz = ByteSize(damo_bytes(v).map_err(|e| ferr("quotas.sz_bytes", e))?.unwrap_or(0));
        }
        if let Some(v) = get(q, "reset_interval_ms") {
            c.quota.reset_interval = Duration(
                damo_ns(v, 1e6).map_err(|e| ferr("quotas.reset_interval_ms", e))?.unwrap_or(u64::MAX / 2),
            );
        }
        if let Some(v) = get(q, "goal_tuner") {
            let name = damo_text(v).map_err(|e| ferr("quotas.goal_tuner", e))?;
            c.quota.goal_tuner = GoalTuner::from_name(&name).map_err(|e| ferr("quotas.goal_tuner", e))?;
        }
        if let Some(w) = get(q, "weights") {
            for (k, dst) in [
                ("sz_permil", &mut c.quota.weight_sz),
                ("nr_accesses_permil", &mut c.quota.weight_nr_accesses),
                ("age_permil", &mut c.quota.weight_age),
            ] {
                if let Some(v) = get(w, k) {
                    *dst = (damo_ratio(v, 1000.0).map_err(|e| ferr(&format!("quotas.weights.{k}"), e))?
                        * 1000.0)
                        .round() as u32;
                }
            }
        }
        for (gi, g) in get(q, "goals").and_then(|g| g.as_array()).into_iter().flatten().enumerate() {
            let f = |k: &str| format!("quotas.goals[{gi}].{k}");
            let metric = get(g, "metric")
                .map_or(Ok("user_input".to_string()), damo_text)
                .map_err(|e| ferr(&f("metric"), e))?;
            let metric = Metric::from_name(&metric).map_err(|e| ferr(&f("metric"), e))?;
            let value = |k: &str| -> std::result::Result<u64, FieldErr> {
                let Some(v) = get(g, k) else { return Ok(0) };
                Ok(match metric {
                    Metric::SomeMemPsiUs => {
                        damo_ns(v, 1e3).map_err(|e| ferr(&f(k), e))?.unwrap_or(u64::MAX) / 1000
                    }
                    Metric::UserInput => damo_nr(&damo_text(v).map_err(|e| ferr(&f(k), e))?)
                        .map_err(|e| ferr(&f(k), e))? as u64,
                    _ => (damo_ratio(v, 10_000.0).map_err(|e| ferr(&f(k), e))? * 10_000.0).round() as u64,
                })
            };
            let nid = match get(g, "nid") {
                Some(v) => Some(
                    damo_nr(&damo_text(v).map_err(|e| ferr(&f("nid"), e))?).map_err(|e| ferr(&f("nid"), e))?
                        as u8,
                ),
                None => None,
            };
            c.quota.goals.push(GoalConfig {
                metric,
                target: value("target_value")?,
                nid,
                current: value("current_value")?,
            });
        }
    }
    if let Some(w) = get(s, "watermarks") {
        let metric = get(w, "metric")
            .map_or(Ok("none".to_string()), damo_text)
            .map_err(|e| ferr("watermarks.metric", e))?;
        c.watermarks.metric = match metric.as_str() {
            "none" => WmarkMetric::None,
            "free_mem_rate" => WmarkMetric::FreeMemRate,
            m => return Err(ferr("watermarks.metric", format!("unknown metric `{m}`"))),
        };
        if let Some(v) = get(w, "interval_us") {
            c.watermarks.interval =
                Duration(damo_ns(v, 1e3).map_err(|e| ferr("watermarks.interval_us", e))?.unwrap_or(0));
        }
        for (k, dst) in [
            ("high_permil", &mut c.watermarks.high),
            ("mid_permil", &mut c.watermarks.mid),
            ("low_permil", &mut c.watermarks.low),
        ] {
            if let Some(v) = get(w, k) {
                *dst = (damo_ratio(v, 1000.0).map_err(|e| ferr(&format!("watermarks.{k}"), e))? * 1000.0)
                    .round() as u64;
            }
        }
    }
    for (fi, f) in get(s, "filters").and_then(|x| x.as_array()).into_iter().flatten().enumerate() {
        let fl = |k: &str| format!("filters[{fi}].{k}");
        let kind =
            get(f, "filter_type").map(damo_text).transpose().map_err(|e| ferr(&fl("filter_type"), e))?;
        let kind = match kind.as_deref() {
            Some("anon") => FilterKind::Anon,
            Some("active") => FilterKind::Active,
            Some("memcg") => FilterKind::Memcg,
            Some("young") => FilterKind::Young,
            Some("hugepage_size") => FilterKind::HugepageSize,
            Some("unmapped") => FilterKind::Unmapped,
            Some("addr") => FilterKind::Addr,
            Some("target") => FilterKind::Target,
            other => return Err(ferr(&fl("filter_type"), format!("unknown filter type {other:?}"))),
        };
        let matching =
            get(f, "matching").map_or(Ok(true), damo_bool).map_err(|e| ferr(&fl("matching"), e))?;
        let allow = get(f, "allow")
            .or_else(|| get(f, "filter_pass"))
            .map_or(Ok(false), damo_bool)
            .map_err(|e| ferr(&fl("allow"), e))?;
        let mut fc = FilterConfig {
            kind,
            matching,
            allow,
            start: None,
            end: None,
            min_size: None,
            max_size: None,
            target: None,
            memcg_path: get(f, "memcg_path").and_then(|v| v.as_str()).map(str::to_string),
        };
        if kind == FilterKind::Addr {
            let r = get(f, "address_range").ok_or_else(|| ferr(&fl("address_range"), "missing"))?;
            let num = |k: &str| -> std::result::Result<u64, FieldErr> {
                let v = get(r, k).ok_or_else(|| ferr(&fl(&format!("address_range.{k}")), "missing"))?;
                damo_nr(&damo_text(v).map_err(|e| ferr(&fl(k), e))?)
                    .map(|n| n as u64)
                    .map_err(|e| ferr(&fl(k), e))
            };
            fc.start = Some(num("start")?);
            fc.end = Some(num("end")?);
        }
        if kind == FilterKind::HugepageSize {
            let h = get(f, "hugepage_size")
                .and_then(|h| h.as_array())
                .ok_or_else(|| ferr(&fl("hugepage_size"), "missing [min, max]"))?;
            if h.len() != 2 {
                return Err(ferr(&fl("hugepage_size"), "expected [min, max]"));
            }
            fc.min_size = Some(ByteSize(
                damo_bytes(&h[0]).map_err(|e| ferr(&fl("hugepage_size"), e))?.unwrap_or(u64::MAX),
            ));
            fc.max_size = Some(ByteSize(
                damo_bytes(&h[1]).map_err(|e| ferr(&fl("hugepage_size"), e))?.unwrap_or(u64::MAX),
            ));
        }
        if kind == FilterKind::Target {
            let v = get(f, "damon_target_idx").ok_or_else(|| ferr(&fl("damon_target_idx"), "missing"))?;
            fc.target = Some(
                damo_nr(&damo_text(v).map_err(|e| ferr(&fl("damon_target_idx"), e))?)
                    .map_err(|e| ferr(&fl("damon_target_idx"), e))? as usize,
            );
        }
        c.filters.push(fc);
    }
    Ok(c)
}

// ---------------------------------------------------------------------------------------
// damo records of region snapshots.

/// One snapshot for a damo record: `(start, end, regions)`.
pub type RecordSnapshot = (Ps, Ps, Vec<crate::agents::SnapRegion>);

/// A time in whole microseconds (damo's unit), as text.
fn us(t: Ps) -> String {
    (t.whole_ns() / 1000).to_string()
}

/// A damo record (the JSON `damo record` writes and `damo report` reads, machine-friendly
/// numbers): one record for the context's one target, with its intervals and every
/// snapshot (times in ns, `nr_accesses` in samples and percent, age in aggregation intervals
/// and us).
pub fn damo_record_json(sample: Ps, aggr: Ps, ops_update: Ps, snapshots: &[RecordSnapshot]) -> String {
    let max_nr = intervals_in(aggr, sample).max(1);
    let snaps: Vec<serde_json::Value> = snapshots
        .iter()
        .map(|(s, e, regions)| {
            let total: u64 = regions.iter().map(|r| r.end - r.start).sum();
            serde_json::json!({
                "start_time": s.whole_ns().to_string(),
                "end_time": e.whole_ns().to_string(),
                "regions": regions.iter().map(|r| serde_json::json!({
                    "start": r.start.to_string(),
                    "end": r.end.to_string(),
                    "nr_accesses": {"samples": r.nr_accesses, "percent": r.nr_accesses as u64 * 100 / max_nr},
                    "age": {"usec": us(aggr.times(r.age as u64)), "aggr_intervals": r.age},
                })).collect::<Vec<_>>(),
                "total_bytes": total.to_string(),
            })
        })
        .collect();
    let rec = serde_json::json!([{
        "kdamond_idx": 0,
        "context_idx": 0,
        "intervals": {
            "sample_us": us(sample),
            "aggr_us": us(aggr),
            "ops_update_us": us(ops_update),
        },
        "scheme_idx": null,
        "target_id": 0,
        "snapshots": snaps,
    }]);
    serde_json::to_string(&rec).expect("json")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Ps {
        Ps::from_ns(n * 1_000_000)
    }

    #[test]
    fn damo_json_schemes_parse_with_units() {
        // As damo prints them (human-readable), the mtier promotion scheme.
        let text = r#"[{
            "action": "migrate_hot", "target_nid": 0,
            "access_pattern": {"sz_bytes": {"min": "4.000 KiB", "max": "max"},
                               "nr_accesses": {"min": "5 %", "max": "100 %"},
                               "age": {"min": "0 ns", "max": "max"}},
            "apply_interval_us": "1 s",
            "quotas": {"time_ms": "0 ns", "sz_bytes": "200.000 MiB", "reset_interval_ms": "1 s",
                       "goals": [{"metric": "node_mem_used_bp", "nid": "0", "target_value": "99.7 %", "current_value": "0"}],
                       "effective_sz_bytes": "0 B",
                       "weights": {"sz_permil": "0 %", "nr_accesses_permil": "10 %", "age_permil": "10 %"}},
            "watermarks": {"metric": "none", "interval_us": "0 ns", "high_permil": "0 %", "mid_permil": "0 %", "low_permil": "0 %"},
            "filters": [{"filter_type": "young", "matching": true, "allow": true, "memcg_path": null,
                         "address_range": null, "damon_target_idx": null, "hugepage_size": null}]
        }]"#;
        let s = schemes_from_damo_json(text, ms(5), ms(100)).unwrap();
        assert_eq!(s.len(), 1);
        let c = &s[0];
        assert_eq!((c.action, c.target_nid), (Action::MigrateHot, Some(0)));
        assert_eq!((c.min_size.0, c.max_size), (4096, None));
        assert_eq!((c.min_nr_accesses, c.max_nr_accesses), (1, Some(20)), "5 % of 20 samples");
        assert_eq!((c.min_age, c.max_age), (0, None));
        assert_eq!(c.apply_interval.0, 1_000_000_000);
        assert_eq!((c.quota.ms, c.quota.sz.0, c.quota.reset_interval.0), (0, 200 << 20, 1_000_000_000));
        assert_eq!(
            c.quota.goals,
            vec![GoalConfig { metric: Metric::NodeMemUsedBp, target: 9970, nid: Some(0), current: 0 }]
        );
        assert_eq!((c.quota.weight_sz, c.quota.weight_nr_accesses, c.quota.weight_age), (0, 100, 100));
        assert_eq!(c.filters[0].kind, FilterKind::Young);
        assert!(c.filters[0].allow && c.filters[0].matching);
        // Machine-friendly (raw) numbers and samples / aggr_intervals units, inside damo's
        // whole parameters.
        let raw = r#"{"kdamonds": [{"contexts": [{"schemes": [{"action": "pageout",
            "access_pattern": {"sz_bytes": {"min": 4096, "max": 18446744073709551615},
                               "nr_accesses": {"min": "0 samples", "max": "0 samples"},
                               "age": {"min": "10 aggr_intervals", "max": "max"}},
            "apply_interval_us": 0,
            "quotas": {"time_ms": 10, "sz_bytes": 104857600, "reset_interval_ms": 1000,
                       "weights": {"sz_permil": 0, "nr_accesses_permil": 0, "age_permil": 1000}},
            "watermarks": {"metric": "free_mem_rate", "interval_us": 5000000,
                           "high_permil": 500, "mid_permil": 400, "low_permil": 200}}]}]}]}"#;
        let s = schemes_from_damo_json(raw, ms(5), ms(100)).unwrap();
        let c = &s[0];
        assert_eq!(
            (c.action, c.min_nr_accesses, c.max_nr_accesses, c.min_age),
            (Action::Pageout, 0, Some(0), 10)
        );
        assert_eq!((c.quota.ms, c.quota.sz.0, c.quota.reset_interval.0), (10, 100 << 20, 1_000_000_000));
        assert_eq!(
            (c.watermarks.metric, c.watermarks.high, c.watermarks.mid, c.watermarks.low),
            (WmarkMetric::FreeMemRate, 500, 400, 200)
        );
        assert_eq!(c.watermarks.interval.0, 5_000_000_000);
        // Errors name the scheme and the field.
        let e = schemes_from_damo_json(r#"[{"action": "stat"}, {"action": "willneed"}]"#, ms(5), ms(100))
            .unwrap_err();
        assert!(e.starts_with("schemes[1].action") && e.contains("not modelled"), "{e}");
        let e = schemes_from_damo_json(
            r#"[{"action": "stat", "quotas": {"sz_bytes": "12 parsecs"}}]"#,
            ms(5),
            ms(100),
        )
        .unwrap_err();
        assert!(e.starts_with("schemes[0].quotas.sz_bytes"), "{e}");
    }

    #[test]
    fn damo_record_roundtrips_through_json() {
        let snaps = vec![(
            Ps::ZERO,
            ms(100),
            vec![crate::agents::SnapRegion { start: 4096, end: 8192, nr_accesses: 10, age: 3 }],
        )];
        let j: serde_json::Value =
            serde_json::from_str(&damo_record_json(ms(5), ms(100), ms(1000), &snaps)).unwrap();
        let r = &j[0]["snapshots"][0]["regions"][0];
        assert_eq!(r["nr_accesses"]["percent"], 50);
        assert_eq!(r["age"]["aggr_intervals"], 3);
        assert_eq!(r["age"]["usec"], "300000");
        assert_eq!(j[0]["intervals"]["aggr_us"], "100000");
    }
}
