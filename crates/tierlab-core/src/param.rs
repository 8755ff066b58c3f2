//! Parameters declared once.
//!
//! Every configurable number or switch of tierlab (a scenario's machine, workload, telemetry,
//! policies, the live recorder) is a field of a struct marked [`params`]; the field's one
//! declaration gives its name, type, default, unit, range, description and provenance:
//!
//! ```ignore
//! #[params]
//! /// DAMON's own parameters.
//! #[derive(Clone, Debug, PartialEq)]
//! pub struct DamonOwn {
//!     /// CPU time of walking one page of a region a scheme's action is applied to.
//!     #[param(default = 20.0, unit = "ns", range = "[0, 1e9]",
//!             assumed = "as change_prot_numa per PTE")]
//!     pub damos_ns_per_page: f64,
//! }
//! ```
//!
//! From that declaration the macro derives `Serialize` and `Deserialize` (unknown keys
//! refused, each missing key taking its default), `Default` (when every field has one) and
//! [`Declared`], the field list every consumer reads: the scenario loader checks each number
//! against its field's [`Range`], `tierlab params` and `docs/parameters.md` list the fields,
//! the reproduce report labels a parameter at its default with the field's [`Provenance`].
//!
//! # The `#[param(...)]` keys
//! - `default = EXPR` (the default, any expression of the field's type; a bare `default`
//!   means `Default::default()`), or `required` (no default: the key must be given);
//! - `unit = "ns"`; `range = "[0, 1e9]"` (`[`/`]` closed, `(`/`)` open, `inf` allowed) or
//!   `range = PATH` (a [`Range`] constant); numeric fields must declare one; sizes may
//!   declare one in bytes and durations in ns (checked on the parsed value);
//! - provenance, one of: `sourced = "where the value comes from"`, `calibrated = "the
//!   figure it was fitted to"`, `assumed = "why this value"` or `setting` (a choice of the
//!   experiment, not a fact about a machine or mechanism); numeric fields must declare one;
//! - `serde(...)` attributes on the field are kept (`skip_serializing_if`, `alias`, ...).
//!
//! The description is the field's doc comment.

use std::fmt;

pub use tierlab_macros::params;

/// The range a number must lie in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    /// Smallest value accepted (`-inf`: no bound).
    pub min: f64,
    /// `min` itself refused (`(min, ...`).
    pub min_open: bool,
    /// Largest value accepted (`inf`: no bound).
    pub max: f64,
    /// `max` itself refused (`..., max)`).
    pub max_open: bool,
}

impl Range {
    /// `[min, max]`.
    pub const fn closed(min: f64, max: f64) -> Range {
        Range { min, min_open: false, max, max_open: false }
    }
    /// `(min, max]`.
    pub const fn above(min: f64, max: f64) -> Range {
        Range { min, min_open: true, max, max_open: false }
    }
    /// Whether `x` lies in the range.
    pub fn contains(&self, x: f64) -> bool {
        let lo = if self.min_open { x > self.min } else { x >= self.min };
        let hi = if self.max_open { x < self.max } else { x <= self.max };
        lo && hi
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let (l, r) = (if self.min_open { '(' } else { '[' }, if self.max_open { ')' } else { ']' });
        write!(f, "{l}{}, {}{r}", fmt_number(self.min), fmt_number(self.max))
    }
}

/// A number as a person writes it: integers without `.0`, large or tiny ones in exponent
/// form, infinities as `inf`.
pub fn fmt_number(x: f64) -> String {
    if x.is_infinite() {
        if x > 0.0 { "inf" } else { "-inf" }.to_string()
    } else if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else if x.abs() >= 1e15 || (x != 0.0 && x.abs() < 1e-4) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// Where a default value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provenance {
    /// From a paper, a manual, kernel source or a measurement: the text names it.
    Sourced(&'static str),
    /// Fitted to a figure: the text names the figure or number.
    Calibrated(&'static str),
    /// No source gives the value: the text says why this one.
    Assumed(&'static str),
    /// A choice of the experiment (a size, a label, a switch), not a fact about a machine or
    /// mechanism.
    Setting,
    /// Not stated (only for fields that are not numbers).
    Unstated,
}

impl Provenance {
    /// `sourced`, `calibrated`, `assumed`, `setting` or `` (unstated).
    pub fn status(&self) -> &'static str {
        match self {
            Provenance::Sourced(_) => "sourced",
            Provenance::Calibrated(_) => "calibrated",
            Provenance::Assumed(_) => "assumed",
            Provenance::Setting => "setting",
            Provenance::Unstated => "",
        }
    }
    /// The source, the figure fitted to, or the reason (empty for the others).
    pub fn text(&self) -> &'static str {
        match self {
            Provenance::Sourced(t) | Provenance::Calibrated(t) | Provenance::Assumed(t) => t,
            Provenance::Setting | Provenance::Unstated => "",
        }
    }
}

/// The shape of a field's value, for the walkers (range checks, listings).
#[derive(Clone, Copy)]
pub enum Shape {
    /// An integer.
    Int,
    /// A number (integer or float).
    Float,
    /// true / false.
    Bool,
    /// A string (or a value with its own parser: sizes, durations, names; bounded where
    /// parsed).
    Text,
    /// A size: bytes, written as an integer or a string with a unit (`"4KiB"`); a range is in
    /// bytes.
    Size,
    /// A duration: seconds as a number, or a string with a unit (`"5ms"`); a range is in ns.
    Duration,
    /// One of named strings (a unit enum), listed.
    Choice(fn() -> &'static [&'static str]),
    /// A table of declared fields.
    Table(fn() -> Vec<&'static FieldSpec>),
    /// A table tagged by `kind`: the registered kinds and each kind's fields.
    Tagged {
        /// The registered kinds.
        kinds: fn() -> Vec<&'static str>,
        /// The fields of a kind (None: not registered).
        fields: fn(&str) -> Option<Vec<&'static FieldSpec>>,
    },
    /// A list of values of one shape.
    List(fn() -> Shape),
    /// An optional value (absent or of the shape).
    Optional(fn() -> Shape),
    /// A table of any keys with values of one shape.
    Map(fn() -> Shape),
    /// Free-form (checked by the field's own code).
    Any,
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.label())
    }
}

impl Shape {
    /// Whether values of this shape are numbers (directly or in lists and options).
    pub fn is_numeric(&self) -> bool {
        match self {
            Shape::Int | Shape::Float => true,
            Shape::List(s) | Shape::Optional(s) | Shape::Map(s) => s().is_numeric(),
            _ => false,
        }
    }
    /// Whether numbers of this shape must be integers.
    pub fn is_integer(&self) -> bool {
        match self {
            Shape::Int => true,
            Shape::List(s) | Shape::Optional(s) | Shape::Map(s) => s().is_integer(),
            _ => false,
        }
    }
    /// A short type label for listings: `integer`, `number`, `bool`, `string`, `table`,
    /// `list of number`, ...
    pub fn label(&self) -> String {
        match self {
            Shape::Int => "integer".into(),
            Shape::Float => "number".into(),
            Shape::Bool => "bool".into(),
            Shape::Text => "string".into(),
            Shape::Size => "size".into(),
            Shape::Duration => "duration".into(),
            Shape::Choice(c) => c().iter().map(|v| format!("\"{v}\"")).collect::<Vec<_>>().join(" | "),
            Shape::Table(_) => "table".into(),
            Shape::Tagged { .. } => "table with `kind`".into(),
            Shape::List(s) => format!("list of {}", s().label()),
            Shape::Optional(s) => s().label(),
            Shape::Map(s) => format!("table of {}", s().label()),
            Shape::Any => "any".into(),
        }
    }
}

/// A field's default, as TOML text.
#[derive(Clone, Copy)]
pub enum Default {
    /// Required: no default.
    Required,
    /// Computed from the default value (None: it has no TOML form, an absent option).
    Computed(fn() -> Option<String>),
    /// Given (a composed table's default for a shared field).
    Text(Option<&'static str>),
}

/// One declared field.
#[derive(Clone, Copy)]
pub struct FieldSpec {
    /// The key in a table.
    pub name: &'static str,
    /// The Rust type as written.
    pub rust_type: &'static str,
    /// The doc comment.
    pub doc: &'static str,
    /// The unit (empty: none).
    pub unit: &'static str,
    /// The range of its numbers.
    pub range: Option<Range>,
    /// Where its default comes from.
    pub provenance: Provenance,
    /// Its default.
    pub default: Default,
    /// Its value's shape.
    pub shape: fn() -> Shape,
    /// Its keys are those of the nested table (`#[serde(flatten)]`).
    pub flatten: bool,
}

impl fmt::Debug for FieldSpec {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.debug_struct("FieldSpec").field("name", &self.name).field("shape", &(self.shape)()).finish()
    }
}

impl FieldSpec {
    /// The default as TOML text, when the field has one that serializes.
    pub fn default_text(&self) -> Option<String> {
        match self.default {
            Default::Required => None,
            Default::Computed(f) => f(),
            Default::Text(t) => t.map(str::to_string),
        }
    }
    /// The unit, or `or` when it has none.
    pub fn unit_or<'a>(&'a self, or: &'a str) -> &'a str {
        if self.unit.is_empty() {
            or
        } else {
            self.unit
        }
    }
    /// Whether the field must be given.
    pub fn required(&self) -> bool {
        matches!(self.default, Default::Required)
    }
    /// The doc comment's first sentence (up to the first period followed by a space or the
    /// end), on one line.
    pub fn summary(&self) -> String {
        let one = self.doc.split_whitespace().collect::<Vec<_>>().join(" ");
        match one.find(". ") {
            Some(i) => one[..=i].to_string(),
            None => one,
        }
    }
}

/// A type whose fields are declared ([`params`] implements it).
pub trait Declared {
    /// The fields, in declaration order (flattened parts expanded by the walkers).
    fn fields() -> Vec<&'static FieldSpec>;
}

/// A type that can be a parameter's value: it knows its [`Shape`].
pub trait ParamType {
    /// The shape of its values.
    fn shape() -> Shape;
}

macro_rules! leaf {
    ($shape:expr => $($t:ty),*) => {
        $(impl ParamType for $t {
            fn shape() -> Shape {
                $shape
            }
        })*
    };
}

leaf!(Shape::Int => u8, u16, u32, u64, usize, i8, i16, i32, i64);
leaf!(Shape::Float => f32, f64);
leaf!(Shape::Bool => bool);
leaf!(Shape::Text => String, std::path::PathBuf, crate::PageSize);

impl<T: ParamType> ParamType for Option<T> {
    fn shape() -> Shape {
        Shape::Optional(T::shape)
    }
}

impl<T: ParamType> ParamType for Vec<T> {
    fn shape() -> Shape {
        Shape::List(T::shape)
    }
}

impl<T: ParamType, const N: usize> ParamType for [T; N] {
    fn shape() -> Shape {
        Shape::List(T::shape)
    }
}

impl<A: ParamType, B: ParamType> ParamType for (A, B) {
    fn shape() -> Shape {
        // Pairs of numbers (curve points) are lists of numbers in TOML.
        if A::shape().is_integer() && B::shape().is_integer() {
            Shape::List(|| Shape::Int)
        } else if A::shape().is_numeric() && B::shape().is_numeric() {
            Shape::List(|| Shape::Float)
        } else {
            Shape::Any
        }
    }
}

impl<K, V: ParamType> ParamType for std::collections::BTreeMap<K, V> {
    fn shape() -> Shape {
        Shape::Map(V::shape)
    }
}

/// Declare unit enums (serde renames them to strings) as [`Shape::Choice`] parameters: their
/// accepted names are read from their `Deserialize` implementation.
#[macro_export]
macro_rules! choice_param {
    ($($t:ty),* $(,)?) => {
        $(impl $crate::param::ParamType for $t {
            fn shape() -> $crate::param::Shape {
                $crate::param::Shape::Choice(|| $crate::param::variants_of::<$t>())
            }
        })*
    };
}

/// Names of the variants of an enum, read from its `Deserialize` implementation.
pub fn variants_of<'de, T: serde::Deserialize<'de>>() -> &'static [&'static str] {
    use serde::de::{self, Deserializer, Visitor};
    struct Probe(std::cell::Cell<&'static [&'static str]>);
    #[derive(Debug)]
    struct Stop;
    impl fmt::Display for Stop {
        fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("variant probe")
        }
    }
    impl std::error::Error for Stop {}
    impl de::Error for Stop {
        fn custom<T: fmt::Display>(_: T) -> Self {
            Stop
        }
    }
    impl<'de> Deserializer<'de> for &Probe {
        type Error = Stop;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }
        fn deserialize_enum<V: Visitor<'de>>(
            self,
            _: &'static str,
            variants: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            self.0.set(variants);
            Err(Stop)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map struct identifier
            ignored_any
        }
    }
    let p = Probe(std::cell::Cell::new(&[]));
    let _ = T::deserialize(&p);
    p.0.get()
}

/// A default as TOML text (`"5ms"`, `1000`, `false`, `[]`); None when it has no TOML form
/// (an absent optional value).
pub fn default_text<T: serde::Serialize>(v: &T) -> Option<String> {
    let value = toml::Value::try_from(v).ok()?;
    Some(match &value {
        toml::Value::Table(t) if t.is_empty() => "{}".to_string(),
        toml::Value::Table(t) => {
            let items: Vec<String> = t.iter().map(|(k, x)| format!("{k} = {x}")).collect();
            format!("{{ {} }}", items.join(", "))
        }
        _ => value.to_string(),
    })
}

/// The fields of a table, flattened parts expanded in place.
pub fn expand(fields: Vec<&'static FieldSpec>) -> Vec<&'static FieldSpec> {
    let mut out = Vec::new();
    for f in fields {
        match (f.flatten, (f.shape)()) {
            (true, Shape::Table(inner)) => out.extend(expand(inner())),
            _ => out.push(f),
        }
    }
    out
}

/// The field named `name` among `fields` (flattened parts searched).
pub fn find(fields: Vec<&'static FieldSpec>, name: &str) -> Option<&'static FieldSpec> {
    expand(fields).into_iter().find(|f| f.name == name)
}

/// One declared leaf of a tree of tables, with its dotted path (`telemetry.damon.sample_interval`).
#[derive(Debug)]
pub struct Leaf {
    /// Dotted path (list items and kinds named as the walker was told).
    pub path: String,
    /// The field.
    pub field: &'static FieldSpec,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_display_and_contain() {
        let r = Range::above(0.0, 100.0);
        assert_eq!(r.to_string(), "(0, 100]");
        assert!(!r.contains(0.0) && r.contains(1e-9) && r.contains(100.0) && !r.contains(100.5));
        let r = Range { min: 1.0, min_open: false, max: f64::INFINITY, max_open: false };
        assert_eq!(r.to_string(), "[1, inf]");
        assert!(r.contains(1e300) && !r.contains(0.5));
        assert_eq!(fmt_number(1e17), "1e17");
        assert_eq!(fmt_number(0.25), "0.25");
    }

    #[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    #[serde(rename_all = "kebab-case")]
    #[allow(dead_code)]
    enum Mode {
        FirstTouch,
        Interleave,
    }
    choice_param!(Mode);

    /// A toy parameter struct.
    #[params]
    #[derive(Clone, Debug, PartialEq)]
    struct Toy {
        /// Reset value of the counter. Second sentence.
        #[param(default = 10_000, range = "[1, 1e12]", unit = "events", sourced = "the paper, Table 2")]
        period: u64,
        /// Cost of one record.
        #[param(default = 250.0, range = "(0, inf)", unit = "ns", assumed = "a Xeon figure")]
        record_ns: f64,
        /// Label.
        #[param(default)]
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// Modes.
        #[param(default = vec![Mode::Interleave])]
        modes: Vec<Mode>,
    }

    #[test]
    fn params_declare_defaults_ranges_and_provenance() {
        let t: Toy = toml::from_str("period = 5").unwrap();
        assert_eq!((t.period, t.record_ns, t.name.as_deref()), (5, 250.0, None));
        assert_eq!(Toy::default().period, 10_000);
        let e = toml::from_str::<Toy>("perod = 5").unwrap_err().to_string();
        assert!(e.contains("unknown field `perod`"), "{e}");
        let f = Toy::fields();
        assert_eq!(f.iter().map(|f| f.name).collect::<Vec<_>>(), ["period", "record_ns", "name", "modes"]);
        assert_eq!(f[0].summary(), "Reset value of the counter.");
        assert_eq!(f[0].range.unwrap().to_string(), "[1, 1000000000000]");
        assert_eq!(f[0].provenance, Provenance::Sourced("the paper, Table 2"));
        assert_eq!(f[0].default_text().as_deref(), Some("10000"));
        assert_eq!(f[1].range.unwrap().to_string(), "(0, inf)");
        assert_eq!(f[1].provenance.status(), "assumed");
        assert_eq!(f[2].default_text(), None, "no TOML form for an absent value");
        assert_eq!(f[3].default_text().as_deref(), Some("[\"interleave\"]"));
        assert_eq!((f[3].shape)().label(), "list of \"first-touch\" | \"interleave\"");
        assert_eq!(f[0].rust_type, "u64");
        assert_eq!(f[2].rust_type, "Option<String>");
    }

    #[test]
    fn choices_are_read_from_serde() {
        assert_eq!(variants_of::<Mode>(), &["first-touch", "interleave"]);
        assert_eq!(<Mode as ParamType>::shape().label(), "\"first-touch\" | \"interleave\"");
        assert_eq!(<Vec<Option<u32>> as ParamType>::shape().label(), "list of integer");
        assert!(<Vec<Option<u32>> as ParamType>::shape().is_integer());
    }
}
