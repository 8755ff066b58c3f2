//! Parameters and registries: the one mechanism every pluggable kind uses.
//!
//! # Declarations
//! Every parameter struct is declared with `#[params]` ([`tierlab_core::param`]): each field
//! states its default, unit, range, description and provenance once. From that declaration
//! come the scenario's validation ([`crate::limits`]), `tierlab export` (every default is
//! serialized), `tierlab params` and `docs/parameters.md` ([`catalogue`], [`markdown`]), and
//! the reproduce report's labels of parameters at their defaults ([`field_at`]).
//!
//! # Registries
//! [`registry!`] declares a kind's configuration enum, tagged by `kind` in a scenario
//! (`kind = "damon"`), with one line per implementation: its registered name, a variant and
//! its parameter type. It also gives the registered names ([`registry!`]'s `kinds()`), each
//! kind's declared fields, and the implementation's parameters as the kind's trait object
//! (`params()`), through which the kind dispatches. Adding an implementation is one new file
//! and one line in its kind's `registry!`.
//!
//! # Composed parameters
//! The fields every implementation of a kind shares (a tiering policy's tiers and rate limit,
//! a technique's label and core) are one struct, flattened into each implementation's
//! parameters with [`With`]; a registry declared `shared S` applies it to each line itself.
//! `With<Shared, Own>` reads one TOML table, sends each key to the struct that declares it,
//! and rejects a key neither declares (an error naming the key, as for any other unknown
//! field). An implementation gives its own defaults for the shared fields, and their
//! provenance where it differs from the shared declaration ([`SharedDefaults`]); `tierlab
//! export` writes both parts, every default included.

use std::fmt;

use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use tierlab_core::param::{Declared, Default as DefaultText, FieldSpec, ParamType, Provenance, Shape};

/// Declare a kind's registry. See the module docs.
///
/// ```ignore
/// registry! {
///     /// A telemetry technique's configuration.
///     pub enum TelemetryConfig: Technique, shared TelemetryShared {
///         "damon" => Damon(damon::DamonParams),
///         "telescope" => Telescope(telescope::TelescopeParams),
///     }
/// }
/// ```
///
/// With `shared S`, each implementation's parameters `P` are read as `With<S, P>` (the
/// shared keys and its own from one table), except on a line marked `alone` (an
/// implementation that declares those keys its own way); without it, as `P`.
#[macro_export]
macro_rules! registry {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident : $tr:path, shared $shared:ty {
            $( $(#[$attr:meta])* $kind:literal => $variant:ident ( $params:ty ) $($alone:ident)? ),* $(,)?
        }
    ) => {
        $crate::registry! {
            $(#[$meta])*
            $vis enum $name : $tr {
                $( $(#[$attr])* $kind => $variant ( $crate::__registry_params!($shared, $params $(, $alone)?) ) ),*
            }
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident : $tr:path {
            $( $(#[$attr:meta])* $kind:literal => $variant:ident ( $params:ty ) ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
        #[serde(tag = "kind")]
        $vis enum $name {
            $( $(#[$attr])* #[serde(rename = $kind)] #[allow(missing_docs)] $variant($params), )*
        }
        impl $name {
            /// The registered name of this implementation.
            pub fn kind(&self) -> &'static str {
                match self { $( $(#[$attr])* Self::$variant(_) => $kind, )* }
            }
            /// This implementation's parameters, as the kind's trait object.
            pub fn params(&self) -> &dyn $tr {
                match self { $( $(#[$attr])* Self::$variant(p) => p, )* }
            }
            /// The registered names, in registry order.
            #[allow(clippy::vec_init_then_push)]
            pub fn kinds() -> Vec<&'static str> {
                #[allow(unused_mut)]
                let mut v = Vec::new();
                $( $(#[$attr])* v.push($kind); )*
                v
            }
            /// The declared fields of the implementation registered as `kind` (shared ones
            /// first); None when no implementation has that name.
            pub fn fields_of_kind(kind: &str) -> Option<Vec<&'static tierlab_core::param::FieldSpec>> {
                $( $(#[$attr])* if kind == $kind {
                    return Some(<$params as tierlab_core::param::Declared>::fields());
                } )*
                None
            }
        }
        impl tierlab_core::param::ParamType for $name {
            fn shape() -> tierlab_core::param::Shape {
                tierlab_core::param::Shape::Tagged { kinds: $name::kinds, fields: $name::fields_of_kind }
            }
        }
    };
}

/// The parameter type of a registry line: `With<S, P>`, or `P` on a line marked `alone`.
#[doc(hidden)]
#[macro_export]
macro_rules! __registry_params {
    ($shared:ty, $params:ty) => { $crate::params::With<$shared, $params> };
    ($shared:ty, $params:ty, alone) => { $params };
}

/// A parameter struct that can be part of a [`With`]: its fields are declared
/// ([`tierlab_core::param::params`]), so it names the keys it reads.
pub trait Params: Declared + Serialize + DeserializeOwned + Clone + fmt::Debug {
    /// The keys it reads.
    fn keys() -> Vec<&'static str> {
        tierlab_core::param::expand(Self::fields()).iter().map(|f| f.name).collect()
    }
}

impl<T: Declared + Serialize + DeserializeOwned + Clone + fmt::Debug> Params for T {}

/// An implementation's defaults for its kind's shared parameters `S`.
pub trait SharedDefaults<S> {
    /// The shared parameters as this implementation has them by default.
    fn shared_defaults() -> S;
    /// Where this implementation's default of the shared field `field` comes from, when it
    /// is not what the shared struct declares (DAMON's intervals are the kernel's,
    /// Telescope's the paper's).
    fn shared_provenance(_field: &str) -> Option<Provenance> {
        None
    }
}

/// An implementation's parameters: the kind's shared ones and its own, read from one table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct With<S, P> {
    /// The shared parameters.
    #[serde(flatten)]
    pub shared: S,
    /// The implementation's own.
    #[serde(flatten)]
    pub own: P,
}

impl<S, P> std::ops::Deref for With<S, P> {
    type Target = P;
    fn deref(&self) -> &P {
        &self.own
    }
}

impl<S, P, T> SharedDefaults<T> for With<S, P>
where
    P: SharedDefaults<T>,
{
    fn shared_defaults() -> T {
        P::shared_defaults()
    }
    fn shared_provenance(field: &str) -> Option<Provenance> {
        P::shared_provenance(field)
    }
}

impl<S: Params + 'static, P: Params + SharedDefaults<S> + 'static> Declared for With<S, P> {
    /// The shared fields with this implementation's defaults and their provenance, then its
    /// own. (Made once per implementation and kept for the process's life.)
    fn fields() -> Vec<&'static FieldSpec> {
        use std::any::TypeId;
        use std::collections::HashMap;
        use std::sync::{Mutex, OnceLock};
        // One map for every implementation (a static of a generic function is shared); the
        // fields are made outside the lock (a nested `With` takes it too).
        static MADE: OnceLock<Mutex<HashMap<TypeId, Vec<&'static FieldSpec>>>> = OnceLock::new();
        let made = MADE.get_or_init(Default::default);
        let key = TypeId::of::<Self>();
        if let Some(f) = made.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return f.clone();
        }
        let defaults = match toml::Value::try_from(P::shared_defaults()) {
            Ok(toml::Value::Table(t)) => t,
            _ => toml::Table::new(),
        };
        let mut f: Vec<&'static FieldSpec> = S::fields()
            .into_iter()
            .map(|spec| {
                let mut own = *spec;
                if !spec.required() || defaults.contains_key(spec.name) {
                    let text = defaults
                        .get(spec.name)
                        .map(|v| tierlab_core::param::default_text(v).unwrap_or_else(|| v.to_string()));
                    own.default = DefaultText::Text(text.map(|t| &*Box::leak(t.into_boxed_str())));
                }
                if let Some(p) = P::shared_provenance(spec.name) {
                    own.provenance = p;
                }
                &*Box::leak(Box::new(own))
            })
            .collect();
        f.extend(P::fields());
        made.lock().unwrap_or_else(|e| e.into_inner()).entry(key).or_insert(f).clone()
    }
}

impl<S: Params + 'static, P: Params + SharedDefaults<S> + 'static> ParamType for With<S, P> {
    fn shape() -> Shape {
        Shape::Table(<Self as Declared>::fields)
    }
}

impl<S: Params, P: Params + SharedDefaults<S>> Default for With<S, P> {
    fn default() -> Self {
        toml::Value::Table(toml::Table::new()).try_into().expect("every field has a default")
    }
}

impl<'de, S: Params, P: Params + SharedDefaults<S>> Deserialize<'de> for With<S, P> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<S, P>(std::marker::PhantomData<(S, P)>);
        impl<'de, S: Params, P: Params + SharedDefaults<S>> Visitor<'de> for V<S, P> {
            type Value = With<S, P>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table of parameters")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let (sf, pf) = (S::keys(), P::keys());
                let mut shared = match toml::Value::try_from(P::shared_defaults()) {
                    Ok(toml::Value::Table(t)) => t,
                    _ => toml::Table::new(),
                };
                let mut own = toml::Table::new();
                while let Some(k) = map.next_key::<String>()? {
                    if sf.contains(&k.as_str()) {
                        shared.insert(k, map.next_value()?);
                    } else if pf.contains(&k.as_str()) {
                        own.insert(k, map.next_value()?);
                    } else {
                        let all: Vec<&'static str> = sf.iter().chain(&pf).copied().collect();
                        return Err(de::Error::unknown_field(&k, Box::leak(all.into_boxed_slice())));
                    }
                }
                let shared = S::deserialize(toml::Value::Table(shared)).map_err(de::Error::custom)?;
                let own = P::deserialize(toml::Value::Table(own)).map_err(de::Error::custom)?;
                Ok(With { shared, own })
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

// -- the catalogue: every declared parameter, for listings, docs and reports --------------

/// One section of the catalogue: a table of parameters (`machine.tlb`, `[[telemetry]]` of
/// kind `damon`) and its leaf fields.
#[derive(Debug)]
pub struct Section {
    /// Dotted path of the table (`machine.nodes[]`, `telemetry[]`; empty: the top level).
    pub path: String,
    /// The registered kind the table is for (tagged tables), else empty.
    pub kind: String,
    /// Its leaves (fields that are not tables).
    pub fields: Vec<&'static FieldSpec>,
}

/// Every table reachable from `root`, depth first: the top level, then each nested table
/// (list items as `name[]`), a tagged table once per registered kind.
pub fn catalogue(root: Vec<&'static FieldSpec>) -> Vec<Section> {
    let mut out = Vec::new();
    walk_section(String::new(), String::new(), root, &mut out);
    out
}

/// The table shape under lists and options (`Vec<Option<T>>` -> T's).
fn unwrap_shape(mut s: Shape) -> (Shape, bool) {
    let mut list = false;
    loop {
        match s {
            Shape::Optional(i) => s = i(),
            Shape::List(i) => {
                list = true;
                s = i()
            }
            other => return (other, list),
        }
    }
}

/// Kinds registered only in test builds (the toy implementations the architecture tests add
/// as the how-to-add recipe says): not listed, so the catalogue is the same in every build.
pub const TEST_ONLY_KINDS: &[&str] = &["toy"];

fn walk_section(path: String, kind: String, fields: Vec<&'static FieldSpec>, out: &mut Vec<Section>) {
    let fields = tierlab_core::param::expand(fields);
    let mut leaves = Vec::new();
    let mut nested = Vec::new();
    for f in fields {
        match unwrap_shape((f.shape)()) {
            (Shape::Table(inner), list) => nested.push((f.name, list, None, Some(inner))),
            (Shape::Tagged { kinds, fields }, list) => {
                nested.push((f.name, list, Some((kinds, fields)), None))
            }
            _ => leaves.push(f),
        }
    }
    out.push(Section { path: path.clone(), kind, fields: leaves });
    for (name, list, tagged, table) in nested {
        let p = format!(
            "{}{name}{}",
            if path.is_empty() { String::new() } else { format!("{path}.") },
            if list { "[]" } else { "" }
        );
        if let Some(inner) = table {
            walk_section(p, String::new(), inner(), out);
        } else if let Some((kinds, fields)) = tagged {
            for k in kinds().into_iter().filter(|k| !TEST_ONLY_KINDS.contains(k)) {
                if let Some(fs) = fields(k) {
                    walk_section(p.clone(), k.to_string(), fs, out);
                }
            }
        }
    }
}

/// The field a scenario key names (`telemetry[0].sample_interval`, `machine.tlb.l2_entries`,
/// `workload.footprint`), found by walking the declarations beside the scenario `value` (its
/// expanded TOML: a tagged table's `kind` picks its fields). None when no field has that key.
pub fn field_at(root: Vec<&'static FieldSpec>, value: &toml::Value, key: &str) -> Option<&'static FieldSpec> {
    let mut fields = root;
    let mut v = Some(value);
    let segs: Vec<&str> = key.split('.').collect();
    for (n, seg) in segs.iter().enumerate() {
        let (name, index) = match seg.split_once('[') {
            Some((a, rest)) => (a, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (*seg, None),
        };
        let f = tierlab_core::param::find(fields.clone(), name)?;
        v = v.and_then(|x| x.get(name));
        if let (Some(i), Some(x)) = (index, v) {
            v = x.get(i);
        }
        if n + 1 == segs.len() {
            return Some(f);
        }
        fields = match unwrap_shape((f.shape)()).0 {
            Shape::Table(inner) => inner(),
            Shape::Tagged { fields, .. } => {
                let kind = v.and_then(|x| x.get("kind")).and_then(|k| k.as_str())?;
                fields(kind)?
            }
            _ => return None,
        };
    }
    None
}

/// The catalogue as Markdown (`docs/parameters.md`): one table per section.
pub fn markdown(sections: &[Section]) -> String {
    let esc = |s: &str| s.replace('|', "\\|").replace('\n', " ");
    let mut out = String::new();
    for sec in sections {
        if sec.fields.is_empty() {
            continue;
        }
        let title = match (sec.path.as_str(), sec.kind.as_str()) {
            ("", _) => "Top level".to_string(),
            (p, "") => format!("`{p}`"),
            (p, k) => format!("`{p}` kind = \"{k}\""),
        };
        out.push_str(&format!("### {title}\n\n"));
        out.push_str("| key | type | default | unit | range | provenance | description |\n");
        out.push_str("| --- | --- | --- | --- | --- | --- | --- |\n");
        for f in &sec.fields {
            let default = if f.required() {
                "required".to_string()
            } else {
                f.default_text().map(|d| format!("`{}`", esc(&d))).unwrap_or_else(|| "none".into())
            };
            let range = f.range.map(|r| r.to_string()).unwrap_or_default();
            let prov = match f.provenance.text() {
                "" => f.provenance.status().to_string(),
                t => format!("{}: {}", f.provenance.status(), esc(t)),
            };
            out.push_str(&format!(
                "| `{}` | {} | {} | {} | {} | {} | {} |\n",
                f.name,
                esc(&(f.shape)().label()),
                default,
                esc(f.unit),
                range,
                prov,
                esc(&f.doc.split_whitespace().collect::<Vec<_>>().join(" "))
            ));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierlab_core::param::params;

    /// Shared parameters.
    #[params]
    #[derive(Clone, Debug, PartialEq)]
    struct Shared {
        /// Label.
        #[param(default)]
        name: Option<String>,
        /// Rate, MB/s.
        #[param(required, range = "(0, 1e9]", unit = "MB/s", assumed = "each implementation's")]
        rate: f64,
    }

    /// Own parameters.
    #[params]
    #[derive(Clone, Debug, PartialEq)]
    struct Own {
        /// Threshold.
        #[param(default = 3, range = "[0, 100]", setting)]
        threshold: u32,
    }
    impl SharedDefaults<Shared> for Own {
        fn shared_defaults() -> Shared {
            Shared { name: None, rate: 2048.0 }
        }
        fn shared_provenance(field: &str) -> Option<Provenance> {
            (field == "rate").then_some(Provenance::Sourced("the Own paper"))
        }
    }

    #[test]
    fn keys_go_to_the_struct_that_declares_them() {
        let w: With<Shared, Own> = toml::from_str("rate = 5.0\nthreshold = 7").unwrap();
        assert_eq!(w.shared, Shared { name: None, rate: 5.0 });
        assert_eq!(w.threshold, 7);
        let d: With<Shared, Own> = toml::from_str("").unwrap();
        assert_eq!(d.shared.rate, 2048.0, "the implementation's default");
        assert_eq!(d.threshold, 3);
        let text = toml::to_string(&d).unwrap();
        assert!(text.contains("rate = 2048.0") && text.contains("threshold = 3"), "{text}");
    }

    #[test]
    fn unknown_and_bad_keys_are_errors_naming_them() {
        let e = toml::from_str::<With<Shared, Own>>("rte = 5.0").unwrap_err().to_string();
        assert!(e.contains("unknown field `rte`") && e.contains("`threshold`"), "{e}");
        let e = toml::from_str::<With<Shared, Own>>("threshold = \"x\"").unwrap_err().to_string();
        assert!(e.contains("threshold"), "{e}");
    }

    #[test]
    fn composed_fields_carry_the_implementations_defaults_and_provenance() {
        assert_eq!(<With<Shared, Own>>::keys(), vec!["name", "rate", "threshold"]);
        let f = <With<Shared, Own> as Declared>::fields();
        assert_eq!(f[1].default_text().as_deref(), Some("2048.0"));
        assert_eq!(f[1].provenance, Provenance::Sourced("the Own paper"));
        assert!(Shared::fields()[1].required(), "the shared struct alone has no default");
        assert_eq!(f[2].default_text().as_deref(), Some("3"));
        assert_eq!(f[0].default_text(), None);
    }
}

// -- implementations outside the engine ---------------------------------------------------

/// The keys every implementation written outside the engine has (`kind = "python"`): the file
/// that holds it and the class's name.
#[tierlab_core::param::params]
#[derive(Clone, Debug, PartialEq)]
pub struct ExternalKeys {
    /// The file that holds the class (relative to the scenario's folder).
    #[param(required)]
    pub path: String,
    /// The class's name in that file.
    #[param(required)]
    pub class: String,
}

/// The error of a `kind = "python"` entry in a program that installed no host to run it.
pub const NO_HOST: &str = "`kind = \"python\"` runs a Python class, which needs tierlab's Python package (`tierlab run`, `tierlab.run()`): this program has no Python host";

/// No shared parameters (a kind whose registry has none: replacement policies).
#[tierlab_core::param::params]
#[derive(Clone, Debug, PartialEq)]
pub struct Unshared {}

/// The parameters of an implementation written outside the engine (a Python class): the
/// kind's shared ones (`S`), the file and the class ([`ExternalKeys`]), and every other key
/// of the table, which are the class's own parameters (`own`). The engine cannot know what a
/// class declares: the host that runs it (the Python binding) checks `own` against the
/// class's declarations and names a key it does not declare. Read from one TOML table, the
/// shared keys going to `S` as [`With`] does; written back as given.
#[derive(Clone, Debug, PartialEq)]
pub struct External<S> {
    /// The shared parameters.
    pub shared: S,
    /// The file and the class.
    pub keys: ExternalKeys,
    /// The class's own parameters, as written.
    pub own: toml::Table,
}

impl<S: Params + 'static> Declared for External<S>
where
    ExternalKeys: SharedDefaults<S>,
{
    /// The shared fields and the file and class (the class's own parameters are declared
    /// by the class).
    fn fields() -> Vec<&'static FieldSpec> {
        <With<S, ExternalKeys> as Declared>::fields()
    }
}

impl<S: Params + 'static> ParamType for External<S>
where
    ExternalKeys: SharedDefaults<S>,
{
    fn shape() -> Shape {
        Shape::Table(<Self as Declared>::fields)
    }
}

impl<S: Serialize> Serialize for External<S> {
    fn serialize<Z: serde::Serializer>(&self, z: Z) -> Result<Z::Ok, Z::Error> {
        use serde::ser::{Error, SerializeMap};
        let shared = match toml::Value::try_from(&self.shared).map_err(Z::Error::custom)? {
            toml::Value::Table(t) => t,
            _ => toml::Table::new(),
        };
        let mut m = z.serialize_map(Some(shared.len() + 2 + self.own.len()))?;
        for (k, v) in &shared {
            m.serialize_entry(k, v)?;
        }
        m.serialize_entry("path", &self.keys.path)?;
        m.serialize_entry("class", &self.keys.class)?;
        for (k, v) in &self.own {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de, S: Params> Deserialize<'de> for External<S>
where
    ExternalKeys: SharedDefaults<S>,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<S>(std::marker::PhantomData<S>);
        impl<'de, S: Params> Visitor<'de> for V<S>
        where
            ExternalKeys: SharedDefaults<S>,
        {
            type Value = External<S>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table of parameters")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let sf = S::keys();
                let mut shared =
                    match toml::Value::try_from(<ExternalKeys as SharedDefaults<S>>::shared_defaults()) {
                        Ok(toml::Value::Table(t)) => t,
                        _ => toml::Table::new(),
                    };
                let (mut path, mut class) = (None, None);
                let mut own = toml::Table::new();
                while let Some(k) = map.next_key::<String>()? {
                    match k.as_str() {
                        "path" => path = Some(map.next_value::<String>()?),
                        "class" => class = Some(map.next_value::<String>()?),
                        _ if sf.contains(&k.as_str()) => {
                            shared.insert(k, map.next_value()?);
                        }
                        _ => {
                            own.insert(k, map.next_value()?);
                        }
                    }
                }
                let path = path.ok_or_else(|| de::Error::missing_field("path"))?;
                let class = class.ok_or_else(|| de::Error::missing_field("class"))?;
                if path.trim().is_empty() {
                    return Err(de::Error::custom("`path` is empty: give the file that holds the class"));
                }
                if class.trim().is_empty() {
                    return Err(de::Error::custom("`class` is empty: give the class's name"));
                }
                let shared = S::deserialize(toml::Value::Table(shared)).map_err(de::Error::custom)?;
                Ok(External { shared, keys: ExternalKeys { path, class }, own })
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

impl SharedDefaults<Unshared> for ExternalKeys {
    fn shared_defaults() -> Unshared {
        Unshared {}
    }
}

/// Feed-kind lists made at run time (a class's declarations) as the `'static` slices the
/// contracts use: each distinct list is made once per process (at most 15 exist).
pub fn intern<T: Copy + PartialEq + Send + Sync + 'static>(
    list: &[T],
    table: &'static std::sync::Mutex<Vec<&'static [T]>>,
) -> &'static [T] {
    let mut t = table.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = t.iter().find(|s| **s == list) {
        return s;
    }
    let s: &'static [T] = Box::leak(list.to_vec().into_boxed_slice());
    t.push(s);
    s
}
