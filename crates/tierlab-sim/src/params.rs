//! Parameters and registries: the one mechanism every pluggable kind uses.
//!
//! # Registries
//! [`registry!`] declares a kind's configuration enum, tagged by `kind` in a scenario
//! (`kind = "damon"`), with one line per implementation: its registered name, a variant and
//! its parameter type. It also gives the registered names ([`registry!`]'s `kinds()`) and the
//! implementation's parameters as the kind's trait object (`params()`), through which the
//! kind dispatches. Adding an implementation is one new file and one line in its kind's
//! `registry!`.
//!
//! # Composed parameters
//! The fields every implementation of a kind shares (a tiering policy's tiers and rate limit,
//! a region-based technique's intervals) are one struct, flattened into each implementation's
//! parameters with [`With`]: `With<Shared, Own>` reads one TOML table, sends each key to the
//! struct that declares it, and rejects a key neither declares (an error naming the key, as
//! for any other unknown field). An implementation gives its own defaults for the shared
//! fields ([`SharedDefaults`]); `tierlab export` writes both parts, every default included.

use std::fmt;

use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

/// Declare a kind's registry. See the module docs.
///
/// ```ignore
/// registry! {
///     /// A telemetry technique's configuration.
///     pub enum TelemetryConfig: TelemetryParams {
///         "damon" => Damon(damon::DamonParams),
///         "telescope" => Telescope(telescope::TelescopeParams),
///     }
/// }
/// ```
#[macro_export]
macro_rules! registry {
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
        }
    };
}

/// Field names of a struct, read from its `Deserialize` implementation (which tells the
/// deserializer the fields it expects).
pub fn fields_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    struct Probe(std::cell::Cell<&'static [&'static str]>);
    #[derive(Debug)]
    struct Stop;
    impl fmt::Display for Stop {
        fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("field probe")
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
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            self.0.set(fields);
            Err(Stop)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }
    let p = Probe(std::cell::Cell::new(&[]));
    let _ = T::deserialize(&p);
    p.0.get()
}

/// A parameter struct that can be part of a [`With`]: it names its fields.
pub trait Params: Serialize + DeserializeOwned + Clone + fmt::Debug {
    /// The keys it reads.
    fn fields() -> Vec<&'static str> {
        fields_of::<Self>().to_vec()
    }
}

/// An implementation's defaults for its kind's shared parameters `S`.
pub trait SharedDefaults<S> {
    /// The shared parameters as this implementation has them by default.
    fn shared_defaults() -> S;
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
}

impl<S: Params, P: Params + SharedDefaults<S>> Params for With<S, P> {
    fn fields() -> Vec<&'static str> {
        let mut f = S::fields();
        f.extend(P::fields());
        f
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
                let (sf, pf) = (S::fields(), P::fields());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Shared {
        #[serde(default)]
        name: Option<String>,
        rate: f64,
    }
    impl Params for Shared {}

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Own {
        #[serde(default = "d_thr")]
        threshold: u32,
    }
    fn d_thr() -> u32 {
        3
    }
    impl Params for Own {}
    impl SharedDefaults<Shared> for Own {
        fn shared_defaults() -> Shared {
            Shared { name: None, rate: 2048.0 }
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
    fn fields_are_read_from_deserialize() {
        assert_eq!(fields_of::<Own>(), &["threshold"]);
        assert_eq!(<With<Shared, Own>>::fields(), vec!["name", "rate", "threshold"]);
    }
}
