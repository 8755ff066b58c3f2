//! Tests of the crate root (accesses, rows, codes).

use tierlab_core::*;

#[test]
fn access_is_sixteen_bytes() {
    assert_eq!(std::mem::size_of::<Access>(), 16);
}

#[test]
fn kind_codes_roundtrip() {
    for k in [AccessKind::Read, AccessKind::Write] {
        assert_eq!(AccessKind::from_code(k.code()), Some(k));
    }
    assert_eq!(AccessKind::from_code(7), None);
    for k in [MappingEventKind::Map, MappingEventKind::Unmap] {
        assert_eq!(MappingEventKind::parse(k.as_str()), Some(k));
    }
    assert_eq!(MappingEventKind::parse("remap"), None);
}

#[test]
fn access_records_store_kind_codes() {
    let a: AccessRecord = serde_json::from_str(r#"{"time_ns":1,"tid":2,"addr":3,"kind":1}"#).unwrap();
    assert_eq!(a.kind, AccessKind::Write);
    let e = serde_json::from_str::<AccessRecord>(r#"{"time_ns":1,"tid":2,"addr":3,"kind":2}"#).unwrap_err();
    assert!(e.to_string().contains("access kind 2: expected 0 or 1"), "{e}");
}
