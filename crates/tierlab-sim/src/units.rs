//! Human units in scenarios: byte sizes and simulated durations.
//!
//! Sizes accept a plain integer (bytes) or a string with a suffix: binary `K`/`KiB`,
//! `M`/`MiB`, `G`/`GiB`, `T`/`TiB` (powers of 1024, as masim's helper and dd use) and
//! decimal `KB`, `MB`, `GB`, `TB` (powers of 1000). Durations accept a number of seconds or
//! a string with a unit: `ns`, `us`, `ms`, `s`, `min`.

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Largest size a scenario accepts: 2^60 bytes (1 EiB), far beyond any machine modelled,
/// so that sums and products of sizes stay within 64 bits.
pub const MAX_SIZE: u64 = 1 << 60;

/// Longest simulated time a scenario accepts (any duration or interval): 10^15 ns, about
/// 11.6 days. The clock counts picoseconds in 64 bits (up to 1.8e19 ps, 213 days), so every
/// duration fits with room for the costs charged after it.
pub const MAX_DURATION_NS: u64 = 1_000_000_000_000_000;

impl tierlab_core::param::ParamType for ByteSize {
    fn shape() -> tierlab_core::param::Shape {
        tierlab_core::param::Shape::Size
    }
}

impl tierlab_core::param::ParamType for Duration {
    fn shape() -> tierlab_core::param::Shape {
        tierlab_core::param::Shape::Duration
    }
}

/// A size in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

/// Parse a size such as `4096`, `4KiB`, `10G`, `5TB`, `1.5GiB` (at most [`MAX_SIZE`]).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let v = parse_size_unbounded(s)?;
    check_size(v).map_err(|e| format!("`{}`: {e}", s.trim()))
}

fn check_size(v: u64) -> Result<u64, String> {
    if v > MAX_SIZE {
        Err(format!("{v} bytes is more than the largest size accepted, 2^60 bytes (1 EiB)"))
    } else {
        Ok(v)
    }
}

fn check_duration(ns: u64) -> Result<u64, String> {
    if ns > MAX_DURATION_NS {
        Err(format!("{ns} ns is longer than the longest simulated time accepted, 10^15 ns (about 11.6 days)"))
    } else {
        Ok(ns)
    }
}

/// The message for a value whose unit part `unit` is not one of `units`: a minus sign and an
/// exponent are named as such (they would otherwise read as parts of an unknown unit).
fn bad_unit(what: &str, unit: &str, s: &str, units: &str) -> String {
    let t = s.trim();
    if t.starts_with('-') {
        let noun = if what == "time" { "duration" } else { what };
        format!("`{t}` is negative: a {noun} is a number of 0 or more followed by a unit ({units})")
    } else if unit.starts_with(['e', 'E']) && unit.len() > 1 && t.len() > unit.len() {
        format!("`{t}`: exponent notation is not accepted; write the number's digits ({what} units: {units})")
    } else {
        format!("unknown {what} unit `{unit}` in `{s}` (use {units})")
    }
}

fn parse_size_unbounded(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("empty size".into());
    }
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num: String = num.chars().filter(|&c| c != '_').collect();
    let unit = unit.trim();
    let mult: u64 = match unit {
        "" | "B" | "b" => 1,
        "K" | "k" | "KiB" | "kiB" => 1 << 10,
        "M" | "m" | "MiB" => 1 << 20,
        "G" | "g" | "GiB" => 1 << 30,
        "T" | "t" | "TiB" => 1 << 40,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => return Err(bad_unit("size", unit, s, "K, M, G, T, KiB.., or KB..")),
    };
    if num.is_empty() {
        return Err(format!("`{s}` has no number"));
    }
    if num.contains('.') {
        let v: f64 = num.parse().map_err(|_| format!("`{s}` is not a number"))?;
        let bytes = v * mult as f64;
        if !(bytes.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64) {
            return Err(format!("`{s}` is out of range"));
        }
        Ok(bytes.round() as u64)
    } else {
        let v: u64 = num.parse().map_err(|_| format!("`{s}` is not a number"))?;
        v.checked_mul(mult).ok_or_else(|| format!("`{s}` is out of range"))
    }
}

/// Format bytes with the largest binary unit that divides them exactly.
pub fn format_size(b: u64) -> String {
    const UNITS: [(&str, u64); 4] = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (u, m) in UNITS {
        if b >= m && b.is_multiple_of(m) {
            return format!("{}{}", b / m, u);
        }
    }
    format!("{b}")
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let f = format_size(self.0);
        if f.chars().all(|c| c.is_ascii_digit()) {
            s.serialize_u64(self.0)
        } else {
            s.serialize_str(&f)
        }
    }
}

struct SizeVisitor;
impl Visitor<'_> for SizeVisitor {
    type Value = ByteSize;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a size: bytes as an integer, or a string like \"4KiB\", \"10GB\", \"5TiB\"")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
        if v < 0 {
            return Err(E::custom(format!("size must not be negative, got {v}")));
        }
        check_size(v as u64).map(ByteSize).map_err(E::custom)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
        check_size(v).map(ByteSize).map_err(E::custom)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
        parse_size(v).map(ByteSize).map_err(E::custom)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SizeVisitor)
    }
}

/// A simulated duration in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub u64);

impl Duration {
    /// From seconds.
    pub fn from_secs_f64(s: f64) -> Self {
        Duration((s * 1e9).round() as u64)
    }
    /// In seconds.
    pub fn secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
}

impl Duration {
    /// As simulated time ([`Ps`]).
    #[inline]
    pub fn ps(self) -> Ps {
        Ps::from_ns(self.0)
    }
}

/// Simulated time, or a span of it, in picoseconds: the one time type of the engine's
/// interfaces (agent hooks, feeds, charges, replacement ticks, workload batches). Scenario
/// values (durations in ns, costs in ns) become `Ps` where they are read; outputs convert back
/// (seconds, ns) where they are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ps(u64);

impl Ps {
    /// Time zero; no time.
    pub const ZERO: Ps = Ps(0);
    /// "Never" (no event): later than every time.
    pub const NEVER: Ps = Ps(u64::MAX);
    /// One nanosecond.
    pub const NS: Ps = Ps(1000);

    /// `ps` picoseconds.
    #[inline]
    pub const fn from_ps(ps: u64) -> Ps {
        Ps(ps)
    }
    /// `ns` nanoseconds (saturating).
    #[inline]
    pub const fn from_ns(ns: u64) -> Ps {
        Ps(ns.saturating_mul(1000))
    }
    /// `ns` nanoseconds as a number (a cost: rounded to the picosecond; negative and NaN are 0).
    #[inline]
    pub fn from_ns_f64(ns: f64) -> Ps {
        Ps((ns * 1000.0).round() as u64)
    }
    /// `s` seconds (rounded to the picosecond).
    pub fn from_secs_f64(s: f64) -> Ps {
        Ps((s * 1e12).round() as u64)
    }
    /// Picoseconds.
    #[inline]
    pub const fn ps(self) -> u64 {
        self.0
    }
    /// Whole nanoseconds (truncated: for outputs and the recording format, whose times are ns).
    #[inline]
    pub const fn whole_ns(self) -> u64 {
        self.0 / 1000
    }
    /// Nanoseconds as a number.
    #[inline]
    pub fn ns_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }
    /// Seconds.
    #[inline]
    pub fn secs_f64(self) -> f64 {
        self.0 as f64 / 1e12
    }
    /// Whether this is [`Ps::NEVER`].
    #[inline]
    pub const fn is_never(self) -> bool {
        self.0 == u64::MAX
    }
    /// `self + d`, at most [`Ps::NEVER`].
    #[inline]
    pub const fn saturating_add(self, d: Ps) -> Ps {
        Ps(self.0.saturating_add(d.0))
    }
    /// `self - d`, at least zero.
    #[inline]
    pub const fn saturating_sub(self, d: Ps) -> Ps {
        Ps(self.0.saturating_sub(d.0))
    }
    /// `self * n`, at most [`Ps::NEVER`].
    #[inline]
    pub const fn times(self, n: u64) -> Ps {
        Ps(self.0.saturating_mul(n))
    }
}

impl std::ops::Add for Ps {
    type Output = Ps;
    #[inline]
    fn add(self, d: Ps) -> Ps {
        Ps(self.0 + d.0)
    }
}

impl std::ops::AddAssign for Ps {
    #[inline]
    fn add_assign(&mut self, d: Ps) {
        self.0 += d.0;
    }
}

impl std::ops::Sub for Ps {
    type Output = Ps;
    #[inline]
    fn sub(self, d: Ps) -> Ps {
        Ps(self.0 - d.0)
    }
}

impl std::iter::Sum for Ps {
    fn sum<I: Iterator<Item = Ps>>(it: I) -> Ps {
        Ps(it.map(|p| p.0).sum())
    }
}

impl fmt::Display for Ps {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if self.is_never() {
            f.write_str("never")
        } else {
            f.write_str(&format_duration(self.whole_ns()))
        }
    }
}

/// Parse a duration such as `60s`, `5ms`, `250us`, `1.5s`, `2min`, `100ns`.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num: String = num.chars().filter(|&c| c != '_').collect();
    let mult: f64 = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" | "" => 1e9,
        "min" => 60e9,
        u => return Err(bad_unit("time", u, s, "ns, us, ms, s, min")),
    };
    let v: f64 = num.parse().map_err(|_| format!("`{s}` is not a duration"))?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("`{s}` is not a valid duration"));
    }
    let ns = v * mult;
    if ns > MAX_DURATION_NS as f64 {
        return Err(format!(
            "`{s}` is longer than the longest simulated time accepted, 10^15 ns (about 11.6 days)"
        ));
    }
    Ok(ns.round() as u64)
}

/// Format nanoseconds with the largest unit that divides them exactly.
pub fn format_duration(ns: u64) -> String {
    if ns == 0 {
        return "0s".into();
    }
    for (u, m) in [("min", 60_000_000_000u64), ("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
        if ns.is_multiple_of(m) {
            return format!("{}{}", ns / m, u);
        }
    }
    format!("{ns}ns")
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_duration(self.0))
    }
}

struct DurVisitor;
impl Visitor<'_> for DurVisitor {
    type Value = Duration;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a duration: seconds as a number, or a string like \"60s\", \"5ms\", \"250us\"")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
        if v < 0 {
            return Err(E::custom(format!("duration must not be negative, got {v}")));
        }
        self.visit_u64(v as u64)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
        let ns = v.saturating_mul(1_000_000_000);
        check_duration(ns).map(Duration).map_err(|e| E::custom(format!("{v} s: {e}")))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Duration, E> {
        if !(v.is_finite() && v >= 0.0) {
            return Err(E::custom(format!("invalid duration {v}")));
        }
        if v * 1e9 > MAX_DURATION_NS as f64 {
            return Err(E::custom(format!("{v} s: {}", check_duration(u64::MAX).unwrap_err())));
        }
        Ok(Duration::from_secs_f64(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
        parse_duration(v).map(Duration).map_err(E::custom)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DurVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("4KiB").unwrap(), 4096);
        assert_eq!(parse_size("10GB").unwrap(), 10_000_000_000);
        assert_eq!(parse_size("5TiB").unwrap(), 5 << 40);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert!(parse_size("12XB").is_err());
        assert!(parse_size("abc").is_err());
        assert!(parse_size("").is_err());
        assert_eq!(format_size(5 << 40), "5TiB");
        assert_eq!(format_size(1000), "1000");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("60s").unwrap(), 60_000_000_000);
        assert_eq!(parse_duration("5ms").unwrap(), 5_000_000);
        assert_eq!(parse_duration("1.5s").unwrap(), 1_500_000_000);
        assert_eq!(parse_duration("250us").unwrap(), 250_000);
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("1000000000000000ns").is_ok());
        assert!(parse_duration("1000000000000001ns").unwrap_err().contains("11.6 days"));
        assert!(parse_duration("1e300s").is_err());
        assert!(parse_size("1024PiB").is_err());
        assert_eq!(parse_size("1048576T").unwrap(), MAX_SIZE);
        assert!(parse_size("1048577T").unwrap_err().contains("1 EiB"));
        let d: Result<Duration, _> =
            toml::from_str::<toml::Table>("v = 18446744073").unwrap()["v"].clone().try_into();
        assert!(d.is_err(), "2^64 ns must not wrap");
        let d: Result<Duration, _> = toml::Value::Float(1e10).try_into();
        assert!(d.is_err());
        assert_eq!(format_duration(5_000_000), "5ms");
        assert_eq!(format_duration(60_000_000_000), "1min");
        assert_eq!(format_duration(1_500_000_000), "1500ms");
    }

    #[test]
    fn a_minus_sign_or_an_exponent_is_named() {
        let e = parse_duration("-1s").unwrap_err();
        assert!(e.contains("negative") && e.contains("-1s"), "{e}");
        let e = parse_size("-16MiB").unwrap_err();
        assert!(e.contains("negative"), "{e}");
        let e = parse_size("1e3MiB").unwrap_err();
        assert!(e.contains("exponent"), "{e}");
        let e = parse_duration("2e3ms").unwrap_err();
        assert!(e.contains("exponent"), "{e}");
        // Units that merely start with an `e` stay unknown units.
        assert!(parse_size("12XB").unwrap_err().contains("unknown size unit `XB`"));
    }
}
