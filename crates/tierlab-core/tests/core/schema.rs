//! Tests of tierlab_core::schema.

use serde::Serialize;
use tierlab_core::schema::*;
use tierlab_core::{AccessKind, AccessRecord, Drain, MappingEvent, MappingEventKind, Region, Sample};

/// The field names of a row type, in declaration order (the order serde writes them).
fn fields<T: Serialize>(row: &T) -> Vec<String> {
    let text = serde_json::to_string(row).unwrap();
    let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text).unwrap();
    let mut keys: Vec<(usize, String)> =
        map.keys().map(|k| (text.find(&format!("\"{k}\":")).unwrap(), k.clone())).collect();
    keys.sort();
    keys.into_iter().map(|(_, k)| k).collect()
}

fn names(t: &Table) -> Vec<String> {
    t.column_names().map(String::from).collect()
}

#[test]
fn row_types_have_the_tables_columns_in_order() {
    let s = Sample {
        time_ns: 1,
        tid: 2,
        cpu: 3,
        addr: 4,
        ip: 5,
        weight: 6,
        data_src: 7,
        event: "e".into(),
        drain: 8,
    };
    assert_eq!(fields(&s), names(&SAMPLES));
    let a = AccessRecord { time_ns: 1, tid: 2, addr: 3, kind: AccessKind::Write };
    assert_eq!(fields(&a), names(&ACCESSES));
    let m = MappingEvent { time_ns: 1, event: MappingEventKind::Map, start: 2, length: 3, name: "n".into() };
    assert_eq!(fields(&m), names(&MAPPINGS));
    let d = Drain { time_ns: 1, cpu: 2, drain: 3, records: 4 };
    assert_eq!(fields(&d), names(&DRAINS));
    let r = Region { time_ns: 1, end_ns: 2, target: 3, start: 4, end: 5, nr_accesses: 6, age: 7 };
    assert_eq!(fields(&r), names(&REGIONS));
    // Coded columns serialize as their codes.
    let v = serde_json::to_value(a).unwrap();
    assert_eq!(v["kind"], serde_json::json!(1));
    let v = serde_json::to_value(&m).unwrap();
    assert_eq!(v["event"], serde_json::json!("map"));
}

#[test]
fn tables_are_unique_and_core_tables_come_first() {
    let mut seen = std::collections::BTreeSet::new();
    for t in TABLES {
        assert!(seen.insert(t.name), "table {} twice", t.name);
        let cols: std::collections::BTreeSet<_> = t.column_names().collect();
        assert_eq!(cols.len(), t.columns.len(), "a column of {} twice", t.name);
        assert_eq!(table(t.name), Some(t));
    }
    let first_optional = TABLES.iter().position(|t| t.optional).unwrap_or(TABLES.len());
    assert!(TABLES[first_optional..].iter().all(|t| t.optional));
    assert_eq!(
        TABLES.iter().filter(|t| !t.optional).map(|t| t.name).collect::<Vec<_>>(),
        ["accesses", "samples", "mappings", "drains"]
    );
    assert_eq!(table("nope"), None);
    assert_eq!(SAMPLES.column("cpu").map(|c| c.ty), Some(ColumnType::UInt32));
}

#[test]
fn code_tables_match_the_enums_and_their_columns() {
    for ct in CODES {
        let col = table(ct.table).and_then(|t| t.column(ct.column)).expect("coded column exists");
        for c in ct.codes {
            match c.value {
                CodeValue::Int(_) => assert_ne!(col.ty, ColumnType::Utf8),
                CodeValue::Str(_) => assert_eq!(col.ty, ColumnType::Utf8),
            }
        }
    }
    for c in ACCESS_KINDS.codes {
        let CodeValue::Int(v) = c.value else { panic!() };
        assert!(AccessKind::from_code(v as u8).is_some());
    }
    assert_eq!(ACCESS_KINDS.codes.len(), 2);
    let kinds: Vec<_> = MAPPING_EVENT_KINDS.codes.iter().map(|c| c.value).collect();
    assert_eq!(kinds, [CodeValue::Str("map"), CodeValue::Str("unmap")]);
}

#[test]
fn meta_fields() {
    let required: Vec<_> = META_FIELDS.iter().filter(|f| f.required).map(|f| f.name).collect();
    assert_eq!(required, ["format", "version"]);
    let managed: Vec<_> = META_FIELDS.iter().filter(|f| f.managed).map(|f| f.name).collect();
    assert_eq!(managed, ["format", "version", "created", "complete", "tables"]);
    assert_eq!(ColumnType::UInt64.width(), Some(8));
    assert_eq!(ColumnType::Utf8.arrow(), "string");
}
