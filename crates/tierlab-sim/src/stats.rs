//! The stats registry.
//!
//! Every component reports its counters here under dotted names
//! (`machine.core.0.tlb.l1_4k.misses`, `workload.region.a.accesses`). Components keep plain
//! fields on their hot paths and implement [`StatsSource`] to publish them; the driver
//! collects all sources into one [`Stats`] at the end of a run. Results come back as a
//! nested dict (JSON) or a flat table, never as ad-hoc prints.

use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// One stat's value.
#[derive(Clone, Debug, PartialEq)]
pub enum StatValue {
    /// A counter.
    U64(u64),
    /// A measured or derived quantity.
    F64(f64),
    /// A label.
    Str(String),
}

impl From<u64> for StatValue {
    fn from(v: u64) -> Self {
        StatValue::U64(v)
    }
}
impl From<usize> for StatValue {
    fn from(v: usize) -> Self {
        StatValue::U64(v as u64)
    }
}
impl From<f64> for StatValue {
    fn from(v: f64) -> Self {
        StatValue::F64(v)
    }
}
impl From<&str> for StatValue {
    fn from(v: &str) -> Self {
        StatValue::Str(v.to_string())
    }
}
impl From<String> for StatValue {
    fn from(v: String) -> Self {
        StatValue::Str(v)
    }
}

impl StatValue {
    /// As a float (labels give NaN).
    pub fn as_f64(&self) -> f64 {
        match self {
            StatValue::U64(v) => *v as f64,
            StatValue::F64(v) => *v,
            StatValue::Str(_) => f64::NAN,
        }
    }
    fn to_json(&self) -> Value {
        match self {
            StatValue::U64(v) => Value::from(*v),
            StatValue::F64(v) => serde_json::Number::from_f64(*v).map(Value::Number).unwrap_or(Value::Null),
            StatValue::Str(s) => Value::from(s.clone()),
        }
    }
}

/// A flat, ordered set of named stats.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    entries: BTreeMap<String, StatValue>,
}

impl Stats {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }
    /// Set `name` to `value` (replacing any earlier value).
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<StatValue>) {
        let name = name.into();
        debug_assert!(valid_name(&name), "bad stat name {name}");
        self.entries.insert(name, value.into());
    }
    /// Add `delta` to counter `name` (created at 0).
    pub fn add(&mut self, name: impl Into<String>, delta: u64) {
        let e = self.entries.entry(name.into()).or_insert(StatValue::U64(0));
        if let StatValue::U64(v) = e {
            *v += delta;
        }
    }
    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&StatValue> {
        self.entries.get(name)
    }
    /// The value of `name` as u64 (0 when absent or not a counter).
    pub fn get_u64(&self, name: &str) -> u64 {
        match self.entries.get(name) {
            Some(StatValue::U64(v)) => *v,
            _ => 0,
        }
    }
    /// All entries in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &StatValue)> {
        self.entries.iter()
    }
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// Collect a component's stats.
    pub fn collect(&mut self, src: &dyn StatsSource) {
        src.report_stats(self);
    }
    /// The stats as a nested JSON object (`a.b.c = 1` becomes `{"a": {"b": {"c": 1}}}`).
    /// A name that is both a leaf and a prefix keeps the leaf under the key `value`.
    pub fn to_nested_json(&self) -> Value {
        let mut root = Map::new();
        for (name, v) in &self.entries {
            let parts: Vec<&str> = name.split('.').collect();
            insert_nested(&mut root, &parts, v.to_json());
        }
        Value::Object(root)
    }
    /// The stats as a flat JSON object.
    pub fn to_flat_json(&self) -> Value {
        Value::Object(self.entries.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
    }
}

fn insert_nested(map: &mut Map<String, Value>, parts: &[&str], v: Value) {
    if parts.len() == 1 {
        match map.get_mut(parts[0]) {
            Some(Value::Object(inner)) => {
                inner.insert("value".into(), v);
            }
            _ => {
                map.insert(parts[0].to_string(), v);
            }
        }
        return;
    }
    let entry = map.entry(parts[0].to_string()).or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        let old = entry.take();
        let mut m = Map::new();
        m.insert("value".into(), old);
        *entry = Value::Object(m);
    }
    if let Value::Object(inner) = entry {
        insert_nested(inner, &parts[1..], v);
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.split('.').all(|p| !p.is_empty())
}

/// A component that publishes named stats.
pub trait StatsSource {
    /// Write this component's stats into `out`.
    fn report_stats(&self, out: &mut Stats);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_json() {
        let mut s = Stats::new();
        s.set("a.b.c", 1u64);
        s.set("a.b.d", 2.5);
        s.set("a.e", "x");
        s.add("a.f", 3);
        s.add("a.f", 4);
        let j = s.to_nested_json();
        assert_eq!(j["a"]["b"]["c"], 1);
        assert_eq!(j["a"]["b"]["d"], 2.5);
        assert_eq!(j["a"]["e"], "x");
        assert_eq!(j["a"]["f"], 7);
    }

    #[test]
    fn leaf_and_prefix_coexist() {
        let mut s = Stats::new();
        s.set("a.b", 1u64);
        s.set("a.b.c", 2u64);
        let j = s.to_nested_json();
        assert_eq!(j["a"]["b"]["value"], 1);
        assert_eq!(j["a"]["b"]["c"], 2);
    }
}
