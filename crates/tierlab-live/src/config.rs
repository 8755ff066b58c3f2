//! The live recorder's configuration: every knob `tierlab record` (and `overhead`, `tier`)
//! sets, declared once in the table of [`RecorderConfig`] below with its default, unit,
//! valid range and one-line description.
//!
//! Everything else is produced from that table: the struct and its `Default`, serde
//! (`deny_unknown_fields`), [`RecorderConfig::validate`] (the ranges), [`RecorderConfig::set`]
//! (one field from a JSON value, errors naming the field: the Python binding's path), and
//! [`RecorderConfig::fields`], the description list the Python package builds its dataclass,
//! command-line options and help texts from (`tierlab._native.recorder_config_fields()`). No
//! default is written anywhere else.

use std::fmt;
use std::path::PathBuf;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::events::{intel, Backend, BackendChoice, SYSFS_PMUS};

/// The unit of a field's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Bytes,
    Nanoseconds,
    Cycles,
    /// Counted events (the period: one sample every R events).
    Events,
    /// No unit (names, flags, paths).
    None,
}

impl Unit {
    /// The unit's name in the description list (`""` for none).
    pub fn name(self) -> &'static str {
        match self {
            Unit::Bytes => "bytes",
            Unit::Nanoseconds => "ns",
            Unit::Cycles => "cycles",
            Unit::Events => "events",
            Unit::None => "",
        }
    }

    /// A value in this unit as people write it, exactly: `64 KiB`, `20 ms`, `500 ms`, `30`.
    /// Sizes and durations use the largest unit that divides the value; the text parses
    /// back to the value on the command line.
    pub fn format(self, v: u64) -> String {
        let scaled = |units: &[(&str, u64)]| {
            units
                .iter()
                .find(|(_, size)| v >= *size && v.is_multiple_of(*size))
                .map(|(name, size)| format!("{} {name}", v / size))
                .unwrap_or_else(|| v.to_string())
        };
        match self {
            Unit::Bytes if v > 0 => {
                scaled(&[("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1)])
            }
            Unit::Nanoseconds if v > 0 => {
                scaled(&[("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000), ("ns", 1)])
            }
            _ => v.to_string(),
        }
    }
}

/// The types a field may have, and what the description list says about each.
pub trait FieldValue {
    /// The type as Python spells it.
    const PY_TYPE: &'static str;
    /// The whole range of the type, for an integer (`(min, max)`).
    const INT_RANGE: Option<(u64, u64)> = None;
    /// The value to check against a range (`None`: nothing to check).
    fn as_int(&self) -> Option<u64> {
        None
    }
    /// The value as help texts and the docs show it; `none` says what an absent value means.
    fn text(&self, unit: Unit, none: &str) -> String;
    /// The values allowed, when they are a short list.
    fn choices() -> Option<Vec<&'static str>> {
        None
    }
}

impl FieldValue for u64 {
    const PY_TYPE: &'static str = "int";
    const INT_RANGE: Option<(u64, u64)> = Some((0, u64::MAX));
    fn as_int(&self) -> Option<u64> {
        Some(*self)
    }
    fn text(&self, unit: Unit, _none: &str) -> String {
        unit.format(*self)
    }
}

impl FieldValue for Option<u64> {
    const PY_TYPE: &'static str = "int | None";
    const INT_RANGE: Option<(u64, u64)> = Some((0, u64::MAX));
    fn as_int(&self) -> Option<u64> {
        *self
    }
    fn text(&self, unit: Unit, none: &str) -> String {
        self.map_or_else(|| none.to_string(), |v| unit.format(v))
    }
}

impl FieldValue for bool {
    const PY_TYPE: &'static str = "bool";
    fn text(&self, _unit: Unit, _none: &str) -> String {
        (if *self { "on" } else { "off" }).to_string()
    }
}

impl FieldValue for Option<String> {
    const PY_TYPE: &'static str = "str | None";
    fn text(&self, _unit: Unit, none: &str) -> String {
        self.clone().unwrap_or_else(|| none.to_string())
    }
}

impl FieldValue for Option<PathBuf> {
    const PY_TYPE: &'static str = "str | None";
    fn text(&self, _unit: Unit, none: &str) -> String {
        self.as_ref().map_or_else(|| none.to_string(), |p| p.display().to_string())
    }
}

impl FieldValue for BackendChoice {
    const PY_TYPE: &'static str = "str";
    fn text(&self, _unit: Unit, _none: &str) -> String {
        self.name().to_string()
    }
    fn choices() -> Option<Vec<&'static str>> {
        Some(BackendChoice::all().map(BackendChoice::name).collect())
    }
}

impl Serialize for BackendChoice {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for BackendChoice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Name;
        impl Visitor<'_> for Name {
            type Value = BackendChoice;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a backend name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<BackendChoice, E> {
                BackendChoice::parse(v).ok_or_else(|| {
                    let names: Vec<&str> = BackendChoice::all().map(BackendChoice::name).collect();
                    E::custom(format!("unknown backend `{v}` (choose from {})", names.join(", ")))
                })
            }
        }
        d.deserialize_str(Name)
    }
}

/// One field of the configuration, as the description list gives it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Field {
    pub name: &'static str,
    /// The value's type as Python spells it: `int`, `bool`, `str`, `int | None`, `str | None`.
    #[serde(rename = "type")]
    pub ty: &'static str,
    /// The default value (JSON: what Python receives).
    pub default: serde_json::Value,
    /// The default as help texts and the docs show it (`64 KiB`, `20 ms`, or what an
    /// absent value means).
    pub default_text: String,
    /// `bytes`, `ns`, `cycles`, `events`, or `""`.
    pub unit: &'static str,
    pub description: &'static str,
    /// The valid range of an integer field (inclusive).
    pub min: Option<u64>,
    pub max: Option<u64>,
    /// The values allowed, when they are a short list.
    pub choices: Option<Vec<&'static str>>,
}

/// A configuration the recorder cannot take: the error names the key or field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    UnknownKey(String),
    /// The value has the wrong type (serde's message).
    Type {
        field: &'static str,
        message: String,
    },
    /// The value is outside the field's range.
    Range {
        field: &'static str,
        value: u64,
        min: u64,
        max: u64,
        unit: Unit,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::UnknownKey(key) => {
                let names: Vec<&str> = RecorderConfig::NAMES.to_vec();
                write!(f, "recorder config: unknown key `{key}` (the keys: {})", names.join(", "))
            }
            ConfigError::Type { field, message } => write!(f, "recorder config: `{field}`: {message}"),
            ConfigError::Range { field, value, min, max, unit } => {
                let unit = if unit.name().is_empty() { String::new() } else { format!(" {}", unit.name()) };
                let range = match (*min, *max) {
                    (lo, u64::MAX) => format!("at least {lo}{unit}"),
                    (0, hi) => format!("at most {hi}{unit}"),
                    (lo, hi) => format!("from {lo} to {hi}{unit}"),
                };
                write!(f, "recorder config: `{field}` = {value}: must be {range}")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

/// Declares [`RecorderConfig`] from one row per field:
/// `[/// notes] name: Type = default, Unit, [min lo,] [max hi,] [none what-absent-means,]
/// "description";` (`none`: an expression giving the text of an absent optional value).
macro_rules! recorder_config {
    ($(
        $(#[doc = $note:literal])*
        $name:ident: $ty:ty = $default:expr, $unit:ident,
        $(min $lo:expr,)? $(max $hi:expr,)? $(none $none:expr,)?
        $about:literal;
    )*) => {
        /// Everything the live recorder can be told (`tierlab record`'s options). Rows of
        /// the table in `config.rs` give each field's default, unit, range and description.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct RecorderConfig {
            $(
                #[doc = $about]
                $(#[doc = ""] #[doc = $note])*
                pub $name: $ty,
            )*
        }

        impl Default for RecorderConfig {
            fn default() -> Self {
                RecorderConfig { $($name: $default,)* }
            }
        }

        impl RecorderConfig {
            /// The fields' names, in table order.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];

            /// The description list: every field's type, default, unit, range, description.
            pub fn fields() -> Vec<Field> {
                let defaults = RecorderConfig::default();
                vec![$({
                    let (lo, hi) = RecorderConfig::range_of::<$ty>(
                        None $(.or(Some($lo)))?, None $(.or(Some($hi)))?,
                    );
                    let none: String = String::new() $(+ &$none)?;
                    Field {
                        name: stringify!($name),
                        ty: <$ty as FieldValue>::PY_TYPE,
                        default: serde_json::to_value(&defaults.$name).expect("a default serializes"),
                        default_text: defaults.$name.text(Unit::$unit, &none),
                        unit: Unit::$unit.name(),
                        description: $about,
                        min: lo,
                        max: hi,
                        choices: <$ty as FieldValue>::choices(),
                    }
                }),*]
            }

            /// Check every field against its range.
            pub fn validate(&self) -> Result<(), ConfigError> {
                $(
                    let (lo, hi) = RecorderConfig::range_of::<$ty>(
                        None $(.or(Some($lo)))?, None $(.or(Some($hi)))?,
                    );
                    if let (Some(v), Some(lo), Some(hi)) = (self.$name.as_int(), lo, hi) {
                        if !(lo..=hi).contains(&v) {
                            return Err(ConfigError::Range {
                                field: stringify!($name), value: v, min: lo, max: hi, unit: Unit::$unit,
                            });
                        }
                    }
                )*
                Ok(())
            }

            /// Set field `key` from a JSON value (of the field's type: `null` for an absent
            /// optional value). Does not check the range: [`RecorderConfig::validate`] does.
            pub fn set(&mut self, key: &str, value: serde_json::Value) -> Result<(), ConfigError> {
                $(
                    if key == stringify!($name) {
                        self.$name = serde_json::from_value(value).map_err(|e| ConfigError::Type {
                            field: stringify!($name),
                            message: e.to_string(),
                        })?;
                        return Ok(());
                    }
                )*
                Err(ConfigError::UnknownKey(key.to_string()))
            }
        }
    };
}

/// The largest reset value every kernel takes (`sample_period` is a u64 whose top bit the
/// kernel refuses).
pub const MAX_PERIOD: u64 = i64::MAX as u64;

/// The smallest buffer size (bytes of records per drain): a few records.
pub const MIN_BUFFER_SIZE: u64 = 64;

/// The shortest interval the recorder keeps between snapshots and between timer drains:
/// a smaller `snapshot_interval_ns`, or half a smaller `flush_interval_ns`, counts as this.
pub const MIN_INTERVAL_NS: u64 = 1_000_000;

recorder_config! {
    backend: BackendChoice = BackendChoice::Auto, None,
        "sample source (auto: the first of the backends listed after it that this machine supports)";
    event: Option<String> = None, None, none event_defaults(),
        "event of the backend (`tierlab record --list-backends` lists each backend's)";
    /// Absent: each backend's default (`Backend::default_period`: the McKernel driver's 100
    /// for PEBS, 4096 ops for IBS, every page fault).
    period: Option<u64> = None, Events, min 1, max MAX_PERIOD, none period_defaults(),
        "reset value, perf's sample_period: one sample every R events";
    /// 64 KiB: the McKernel PEBS driver's buffer.
    buffer_size: u64 = 64 << 10, Bytes, min MIN_BUFFER_SIZE,
        "bytes of records per drain (the wake-up watermark: the drain rate); each CPU's ring \
         buffer holds at least twice this";
    /// 30 cycles: perf's default (`perf mem record`).
    ldlat: u64 = 30, Cycles, max intel::LDLAT_MAX,
        "mem-loads latency threshold: only loads slower than this are sampled";
    l3_miss_only: bool = false, None,
        "amd-ibs: sample only ops that missed L3 (Zen 4 and later)";
    min_mapping: u64 = 0, Bytes,
        "keep only mappings at least this large, 0 keeping every mapping (the McKernel \
         driver kept 4 MiB and more)";
    snapshot_interval_ns: u64 = 20_000_000, Nanoseconds,
        "longest time between two /proc/PID/maps snapshots, which date unmaps";
    flush_interval_ns: u64 = 500_000_000, Nanoseconds,
        "write a chunk of the recording at least this often (at most that is lost on SIGKILL); \
         a CPU's ring not drained for half of it is drained anyway";
    pmus_root: Option<PathBuf> = None, None, none format!("the system's, {SYSFS_PMUS}"),
        "directory listing the PMUs (tests use fake sysfs trees)";
}

/// What an absent `event` means: each backend's first event.
fn event_defaults() -> String {
    let per: Vec<String> = Backend::ALL.iter().map(|b| format!("{b} {}", b.events()[0])).collect();
    format!("the backend's first: {}", per.join(", "))
}

/// What an absent `period` means: each backend's default.
fn period_defaults() -> String {
    let per: Vec<String> = Backend::ALL.iter().map(|b| format!("{b} {}", b.default_period())).collect();
    format!("the backend's: {}", per.join(", "))
}

impl RecorderConfig {
    /// A field's range: the one its row declares, within its type's (`None` for
    /// non-integers).
    fn range_of<T: FieldValue + ?Sized>(lo: Option<u64>, hi: Option<u64>) -> (Option<u64>, Option<u64>) {
        match T::INT_RANGE {
            Some((tlo, thi)) => (Some(lo.unwrap_or(tlo)), Some(hi.unwrap_or(thi))),
            None => (None, None),
        }
    }

    /// A configuration from `(key, value)` pairs over the defaults, validated: an unknown key,
    /// a value of the wrong type or out of range is an error naming it.
    pub fn from_pairs<K: AsRef<str>>(
        pairs: impl IntoIterator<Item = (K, serde_json::Value)>,
    ) -> Result<Self, ConfigError> {
        let mut cfg = RecorderConfig::default();
        for (k, v) in pairs {
            cfg.set(k.as_ref(), v)?;
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// How long the recorder goes at most between two `/proc/PID/maps` snapshots.
    pub fn snapshot_every_ns(&self) -> u64 {
        self.snapshot_interval_ns.max(MIN_INTERVAL_NS)
    }

    /// A ring not drained for this long is drained anyway: half the flush interval, so each
    /// chunk written holds what the kernel had.
    pub fn drain_timer_ns(&self) -> u64 {
        (self.flush_interval_ns / 2).max(MIN_INTERVAL_NS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_are_the_table_rows() {
        let d = RecorderConfig::default();
        assert_eq!(d.backend, BackendChoice::Auto);
        assert_eq!((d.event.as_deref(), d.period, d.pmus_root.as_deref()), (None, None, None));
        assert_eq!((d.buffer_size, d.ldlat, d.l3_miss_only, d.min_mapping), (65536, 30, false, 0));
        assert_eq!((d.snapshot_interval_ns, d.flush_interval_ns), (20_000_000, 500_000_000));
        // The recorder's timers: 20 ms snapshots, a ring drained after 250 ms without one.
        assert_eq!((d.snapshot_every_ns(), d.drain_timer_ns()), (20_000_000, 250_000_000));
        d.validate().unwrap();
    }

    #[test]
    fn the_description_list_has_every_field_once() {
        let fields = RecorderConfig::fields();
        let names: Vec<&str> = fields.iter().map(|f| f.name).collect();
        assert_eq!(names, RecorderConfig::NAMES);
        // Serialized defaults, field by field, are the struct's.
        let whole = serde_json::to_value(RecorderConfig::default()).unwrap();
        let obj = whole.as_object().unwrap();
        assert_eq!(obj.len(), fields.len());
        for f in &fields {
            assert_eq!(obj[f.name], f.default, "{}", f.name);
            assert!(!f.description.is_empty(), "{}", f.name);
        }
        let get = |n: &str| fields.iter().find(|f| f.name == n).unwrap().clone();
        let b = get("buffer_size");
        assert_eq!(
            (b.ty, b.unit, b.default_text.as_str(), b.min, b.max),
            ("int", "bytes", "64 KiB", Some(64), Some(u64::MAX))
        );
        let p = get("period");
        assert_eq!((p.ty, p.min, p.max), ("int | None", Some(1), Some(i64::MAX as u64)));
        assert_eq!(p.default, serde_json::Value::Null);
        assert_eq!(p.default_text, "the backend's: intel-pebs 100, amd-ibs 4096, page-faults 1");
        let e = get("event");
        assert_eq!(
            e.default_text,
            "the backend's first: intel-pebs mem-loads, amd-ibs ibs-op, page-faults page-faults"
        );
        assert_eq!(get("ldlat").max, Some(0xffff));
        assert_eq!(get("snapshot_interval_ns").default_text, "20 ms");
        assert_eq!(get("flush_interval_ns").default_text, "500 ms");
        assert_eq!(get("l3_miss_only").default_text, "off");
        let be = get("backend");
        assert_eq!(be.choices, Some(vec!["auto", "intel-pebs", "amd-ibs", "page-faults"]));
        assert_eq!((be.min, be.max), (None, None));
    }

    #[test]
    fn units_format_exactly() {
        assert_eq!(Unit::Bytes.format(0), "0");
        assert_eq!(Unit::Bytes.format(64 << 10), "64 KiB");
        assert_eq!(Unit::Bytes.format(1000), "1000 B");
        assert_eq!(Unit::Bytes.format(3 << 30), "3 GiB");
        assert_eq!(Unit::Nanoseconds.format(20_000_000), "20 ms");
        assert_eq!(Unit::Nanoseconds.format(2_000_000_000), "2 s");
        assert_eq!(Unit::Nanoseconds.format(1_500), "1500 ns");
        assert_eq!(Unit::Cycles.format(30), "30");
    }

    #[test]
    fn serde_round_trips_and_denies_unknown_fields() {
        let d = RecorderConfig::default();
        let back: RecorderConfig = serde_json::from_value(serde_json::to_value(&d).unwrap()).unwrap();
        assert_eq!(back, d);
        let partial: RecorderConfig =
            serde_json::from_value(json!({"backend": "page-faults", "period": 4})).unwrap();
        assert_eq!(partial.backend, BackendChoice::Use(Backend::PageFaults));
        assert_eq!((partial.period, partial.buffer_size), (Some(4), d.buffer_size));
        let e = serde_json::from_value::<RecorderConfig>(json!({"buffer_sise": 1})).unwrap_err().to_string();
        assert!(e.contains("unknown field `buffer_sise`"), "{e}");
        let e = serde_json::from_value::<RecorderConfig>(json!({"backend": "pebs"})).unwrap_err().to_string();
        assert!(
            e.contains("unknown backend `pebs` (choose from auto, intel-pebs, amd-ibs, page-faults)"),
            "{e}"
        );
    }

    #[test]
    fn errors_name_the_key_or_field() {
        let e = RecorderConfig::from_pairs([("buffer_sise", json!(1))]).unwrap_err();
        assert_eq!(e, ConfigError::UnknownKey("buffer_sise".into()));
        let text = e.to_string();
        assert!(
            text.starts_with("recorder config: unknown key `buffer_sise` (the keys: backend, event,"),
            "{text}"
        );
        let e = RecorderConfig::from_pairs([("buffer_size", json!("big"))]).unwrap_err().to_string();
        assert_eq!(e, "recorder config: `buffer_size`: invalid type: string \"big\", expected u64");
        let e = RecorderConfig::from_pairs([("ldlat", json!(-5))]).unwrap_err().to_string();
        assert!(e.starts_with("recorder config: `ldlat`: invalid value: integer `-5`"), "{e}");
        let e = RecorderConfig::from_pairs([("l3_miss_only", json!(1))]).unwrap_err().to_string();
        assert!(e.starts_with("recorder config: `l3_miss_only`: invalid type: integer `1`"), "{e}");
        let e = RecorderConfig::from_pairs([("backend", json!("pebs"))]).unwrap_err().to_string();
        assert!(e.starts_with("recorder config: `backend`: unknown backend `pebs`"), "{e}");
        let e = RecorderConfig::from_pairs([("buffer_size", json!(10))]).unwrap_err().to_string();
        assert_eq!(e, "recorder config: `buffer_size` = 10: must be at least 64 bytes");
        let e = RecorderConfig::from_pairs([("ldlat", json!(70000))]).unwrap_err().to_string();
        assert_eq!(e, "recorder config: `ldlat` = 70000: must be at most 65535 cycles");
        let e = RecorderConfig::from_pairs([("period", json!(0))]).unwrap_err().to_string();
        assert_eq!(e, "recorder config: `period` = 0: must be from 1 to 9223372036854775807 events");
        // Absent optional values are null; the defaults fill the rest.
        let c = RecorderConfig::from_pairs([("period", json!(null)), ("event", json!("all-loads"))]).unwrap();
        assert_eq!((c.period, c.event.as_deref()), (None, Some("all-loads")));
        assert_eq!(c.buffer_size, RecorderConfig::default().buffer_size);
    }

    #[test]
    fn short_intervals_count_as_the_shortest() {
        let c = RecorderConfig { snapshot_interval_ns: 0, flush_interval_ns: 0, ..RecorderConfig::default() };
        assert_eq!((c.snapshot_every_ns(), c.drain_timer_ns()), (MIN_INTERVAL_NS, MIN_INTERVAL_NS));
        let c = RecorderConfig { flush_interval_ns: 100_000_000, ..RecorderConfig::default() };
        assert_eq!(c.drain_timer_ns(), 50_000_000);
    }
}
