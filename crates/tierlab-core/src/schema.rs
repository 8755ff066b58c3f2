//! The recording format's schema, declared once.
//!
//! A recording (version [`FORMAT_VERSION`], documented in `docs/formats.md`) is a directory
//! holding [`META_FILE`] and one sub-directory of Parquet parts per table. This module
//! declares every table ([`TABLES`]): its columns in order, each column's Arrow type
//! ([`ColumnType`]) and meaning; the code tables of coded columns ([`CODES`]: access kinds,
//! mapping event kinds); and the fields of `meta.json` ([`META_FIELDS`]).
//!
//! Everything that reads or writes recordings takes the columns from here: the simulator and
//! the live recorder emit the row types of the crate root ([`crate::AccessRecord`],
//! [`crate::Sample`], [`crate::MappingEvent`], [`crate::Drain`], [`crate::Region`], whose
//! fields are these columns, tested below), and the Python package builds its pyarrow schemas
//! from [`TABLES`] through the binding (`tierlab._native.recording_schema()`).
//!
//! Changing anything here changes the on-disk format: follow the versioning policy of
//! `docs/formats.md` (appending a column or a table keeps the version, anything else bumps it).

use crate::{AccessKind, MappingEventKind};

/// Value of `meta.json`'s `format` field.
pub const FORMAT_NAME: &str = "tierlab-recording";
/// The format version this crate describes; readers refuse newer versions.
pub const FORMAT_VERSION: u32 = 1;
/// The recording's header file.
pub const META_FILE: &str = "meta.json";

/// Type of a column: the Arrow logical type, stored in Parquet as [`ColumnType::parquet`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ColumnType {
    /// Unsigned 8-bit integer.
    UInt8,
    /// Unsigned 32-bit integer.
    UInt32,
    /// Unsigned 64-bit integer.
    UInt64,
    /// UTF-8 string.
    Utf8,
}

impl ColumnType {
    /// The Arrow type's name as pyarrow spells it (`pyarrow.type_for_alias` reads it):
    /// `uint8`, `uint32`, `uint64`, `string`.
    pub const fn arrow(self) -> &'static str {
        match self {
            ColumnType::UInt8 => "uint8",
            ColumnType::UInt32 => "uint32",
            ColumnType::UInt64 => "uint64",
            ColumnType::Utf8 => "string",
        }
    }

    /// The Parquet physical type and its annotation.
    pub const fn parquet(self) -> &'static str {
        match self {
            ColumnType::UInt8 => "INT32 (INT(8, false))",
            ColumnType::UInt32 => "INT32 (INT(32, false))",
            ColumnType::UInt64 => "INT64 (INT(64, false))",
            ColumnType::Utf8 => "BYTE_ARRAY (STRING)",
        }
    }

    /// Bytes per value of a fixed-width type (`None` for strings).
    pub const fn width(self) -> Option<usize> {
        match self {
            ColumnType::UInt8 => Some(1),
            ColumnType::UInt32 => Some(4),
            ColumnType::UInt64 => Some(8),
            ColumnType::Utf8 => None,
        }
    }
}

/// One column of a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    pub ty: ColumnType,
    /// What a value means (units, where it comes from).
    pub meaning: &'static str,
}

/// One table of a recording: a sub-directory of Parquet parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Table {
    /// The sub-directory's name.
    pub name: &'static str,
    /// Optional tables exist only in recordings whose source produces them; every recording
    /// has the others (possibly empty; a writer gives them one empty part on close).
    pub optional: bool,
    /// What one row is.
    pub meaning: &'static str,
    /// The columns, in order.
    pub columns: &'static [Column],
}

impl Table {
    /// The column called `name`.
    pub fn column(&self, name: &str) -> Option<&'static Column> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// The column names, in order.
    pub fn column_names(&self) -> impl Iterator<Item = &'static str> {
        self.columns.iter().map(|c| c.name)
    }
}

const fn col(name: &'static str, ty: ColumnType, meaning: &'static str) -> Column {
    Column { name, ty, meaning }
}

use ColumnType::{UInt32, UInt64, UInt8, Utf8};

/// `accesses`: one row per memory access (row type [`crate::AccessRecord`]).
pub const ACCESSES: Table = Table {
    name: "accesses",
    optional: false,
    meaning: "one row per memory access",
    columns: &[
        col("time_ns", UInt64, "time of the access, ns from the start of the recording"),
        col("tid", UInt32, "thread (simulated thread index, or OS thread id)"),
        col("addr", UInt64, "virtual address of the first byte accessed"),
        col("kind", UInt8, "access kind code (see the `kind` code table: 0 load, 1 store)"),
    ],
};

/// `samples`: one row per telemetry sample (row type [`crate::Sample`]).
pub const SAMPLES: Table = Table {
    name: "samples",
    optional: false,
    meaning: "one row per telemetry sample (PEBS/IBS record, sampled fault, ...), simulated or live",
    columns: &[
        col("time_ns", UInt64, "time of the sample, ns from the start of the recording"),
        col("tid", UInt32, "thread"),
        col("cpu", UInt32, "CPU (core) that took the sample"),
        col("addr", UInt64, "sampled data address"),
        col("ip", UInt64, "instruction pointer, 0 if unknown"),
        col("weight", UInt64, "access latency weight in cycles, 0 if unknown"),
        col("data_src", UInt64, "raw data-source word (perf PERF_SAMPLE_DATA_SRC), 0 if unknown"),
        col("event", Utf8, "event name: mem-loads, mem-stores, page-faults, pebs-model, ..."),
        col("drain", UInt64, "index of the drain (row of `drains`) that delivered the sample"),
    ],
};

/// `mappings`: one row per change of the address space (row type [`crate::MappingEvent`]).
pub const MAPPINGS: Table = Table {
    name: "mappings",
    optional: false,
    meaning: "one row per change of the address space",
    columns: &[
        col("time_ns", UInt64, "time of the event, ns from the start of the recording"),
        col("event", Utf8, "mapping event kind (see the `event` code table: map, unmap)"),
        col("start", UInt64, "first byte of the range"),
        col("length", UInt64, "length of the range in bytes"),
        col("name", Utf8, "region name, file path, [heap], [stack], ...; may be empty"),
    ],
};

/// `drains`: one row per buffer drain (row type [`crate::Drain`]).
pub const DRAINS: Table = Table {
    name: "drains",
    optional: false,
    meaning: "one row per buffer drain (a PEBS interrupt, a perf ring-buffer wake-up)",
    columns: &[
        col("time_ns", UInt64, "time of the drain, ns from the start of the recording"),
        col("cpu", UInt32, "CPU whose buffer was drained"),
        col("drain", UInt64, "drain index (referenced by samples.drain)"),
        col("records", UInt32, "samples delivered by this drain"),
    ],
};

/// `regions` (optional): DAMON-style region snapshots (row type [`crate::Region`]).
pub const REGIONS: Table = Table {
    name: "regions",
    optional: true,
    meaning: "one row per DAMON region per snapshot (tierlab import damo)",
    columns: &[
        col("time_ns", UInt64, "start of the snapshot's aggregation interval"),
        col("end_ns", UInt64, "end of the aggregation interval"),
        col("target", UInt32, "DAMON target (the record's target_id, or its index)"),
        col("start", UInt64, "first byte of the region"),
        col("end", UInt64, "end of the region (exclusive)"),
        col(
            "nr_accesses",
            UInt32,
            "sampling intervals of the aggregation interval in which the region was seen accessed",
        ),
        col("age", UInt32, "aggregation intervals the region kept its access pattern"),
    ],
};

/// `sync` (optional): the program's synchronisation (row type [`crate::SyncEvent`]), written
/// by `tierlab trace --cc`; replay makes threads wait at its barriers and locks.
pub const SYNC: Table = Table {
    name: "sync",
    optional: true,
    meaning: "one row per synchronisation event of a thread (barrier arrival, lock acquire or release, ...)",
    columns: &[
        col("time_ns", UInt64, "time of the event, ns from the start of the recording"),
        col("tid", UInt32, "thread (the OS thread id of its accesses' rows)"),
        col("seq", UInt64, "order of the event among all threads' events (0, 1, 2, ...: the order they happened)"),
        col("index", UInt64, "the thread's accesses before the event (its position in the thread's access stream)"),
        col("kind", UInt8, "event kind code (see the `kind` code table of `sync`)"),
        col("object", UInt64, "what is synchronised on: the mutex, condition variable or barrier address, the OpenMP region, lock or critical section"),
        col("arg", UInt64, "barrier arrivals: the barrier's participants (0 unknown); else 0"),
    ],
};

/// `allocations` (optional): the program's allocation events, written by `tierlab trace --cc`
/// and by the allocation interposer (`tierlab record --alloc-sites`); `tierlab view` gives
/// every access to the allocation live at its address and time.
pub const ALLOCATIONS: Table = Table {
    name: "allocations",
    optional: true,
    meaning: "one row per allocation event (malloc, calloc, realloc, free, posix_memalign, aligned_alloc, memalign, C++ new/delete, mmap, munmap, mremap)",
    columns: &[
        col("time_ns", UInt64, "time of the event, ns from the start of the recording"),
        col("tid", UInt32, "thread that called the allocator"),
        col("seq", UInt64, "order of the event among all threads' events (0, 1, 2, ...)"),
        col("index", UInt64, "the thread's accesses before the event (its position in the thread's access stream); 2^64-1 when the recording has no access stream"),
        col("kind", UInt8, "event kind code (see the `kind` code table of `allocations`)"),
        col("addr", UInt64, "the block: returned address (allocations), freed address (free, delete, munmap), new address (realloc, mremap)"),
        col("size", UInt64, "bytes requested (calloc: count x size; free and delete: 0; munmap: the length)"),
        col("old_addr", UInt64, "realloc and mremap: the block it replaces (0: none); else 0"),
        col("site", UInt32, "the call site (row `site` of `alloc_sites`)"),
    ],
};

/// `alloc_sites` (optional): the call stacks of `allocations.site`, symbolised when the
/// recording was made.
pub const ALLOC_SITES: Table = Table {
    name: "alloc_sites",
    optional: true,
    meaning: "one row per distinct allocation call stack (innermost frame first)",
    columns: &[
        col("site", UInt32, "the site number (referenced by allocations.site)"),
        col("frames", Utf8, "return addresses, innermost first, as `0xADDR` separated by spaces"),
        col("objects", Utf8, "per frame, the file it lies in and its offset in that file (`PATH+0xOFF`), separated by newlines; `?` when unknown"),
        col("locations", Utf8, "per frame, `function file:line` of the call (DWARF line info of the call instruction; `function+0xOFF` without it; `?` unknown), separated by newlines"),
    ],
};

/// Every table, the ones every recording has first, in the order writers create them.
pub const TABLES: &[Table] = &[ACCESSES, SAMPLES, MAPPINGS, DRAINS, REGIONS, SYNC, ALLOCATIONS, ALLOC_SITES];

/// The table called `name`.
pub fn table(name: &str) -> Option<&'static Table> {
    TABLES.iter().find(|t| t.name == name)
}

/// A value of a coded column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeValue {
    /// An integer code (integer columns).
    Int(u64),
    /// A string code (string columns).
    Str(&'static str),
}

/// One code of a coded column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Code {
    /// What is stored in the column.
    pub value: CodeValue,
    /// Its name in words.
    pub name: &'static str,
    pub meaning: &'static str,
}

/// The codes a column may hold; any other value is invalid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeTable {
    pub table: &'static str,
    pub column: &'static str,
    pub codes: &'static [Code],
}

/// `accesses.kind`: [`AccessKind`] codes.
pub const ACCESS_KINDS: CodeTable = CodeTable {
    table: "accesses",
    column: "kind",
    codes: &[
        Code {
            value: CodeValue::Int(AccessKind::Read.code() as u64),
            name: "load",
            meaning: "a load (read)",
        },
        Code {
            value: CodeValue::Int(AccessKind::Write.code() as u64),
            name: "store",
            meaning: "a store (write)",
        },
    ],
};

/// `mappings.event`: [`MappingEventKind`] names.
pub const MAPPING_EVENT_KINDS: CodeTable = CodeTable {
    table: "mappings",
    column: "event",
    codes: &[
        Code {
            value: CodeValue::Str(MappingEventKind::Map.as_str()),
            name: MappingEventKind::Map.as_str(),
            meaning: "the range became mapped",
        },
        Code {
            value: CodeValue::Str(MappingEventKind::Unmap.as_str()),
            name: MappingEventKind::Unmap.as_str(),
            meaning: "the range was unmapped",
        },
    ],
};

/// `sync.kind`: [`crate::SyncKind`] codes.
pub const SYNC_KINDS: CodeTable = CodeTable {
    table: "sync",
    column: "kind",
    codes: &{
        let mut out = [Code { value: CodeValue::Int(0), name: "", meaning: "" }; crate::SyncKind::ALL.len()];
        let mut i = 0;
        while i < out.len() {
            let k = crate::SyncKind::ALL[i];
            out[i] = Code { value: CodeValue::Int(k as u64), name: k.name(), meaning: k.meaning() };
            i += 1;
        }
        out
    },
};

/// `allocations.kind`: what the program called.
pub const ALLOCATION_KINDS: CodeTable = CodeTable {
    table: "allocations",
    column: "kind",
    codes: &[
        Code { value: CodeValue::Int(0), name: "malloc", meaning: "malloc: a new block" },
        Code { value: CodeValue::Int(1), name: "calloc", meaning: "calloc: a new zeroed block" },
        Code { value: CodeValue::Int(2), name: "realloc", meaning: "realloc (and reallocarray): old_addr freed, addr allocated (the same address when it grew in place)" },
        Code { value: CodeValue::Int(3), name: "free", meaning: "free: the block at addr ends" },
        Code { value: CodeValue::Int(4), name: "posix_memalign", meaning: "posix_memalign: a new aligned block" },
        Code { value: CodeValue::Int(5), name: "aligned_alloc", meaning: "aligned_alloc: a new aligned block" },
        Code { value: CodeValue::Int(6), name: "memalign", meaning: "memalign, valloc, pvalloc: a new aligned block" },
        Code { value: CodeValue::Int(7), name: "new", meaning: "C++ operator new (any variant): a new block" },
        Code { value: CodeValue::Int(8), name: "new[]", meaning: "C++ operator new[] (any variant): a new block" },
        Code { value: CodeValue::Int(9), name: "delete", meaning: "C++ operator delete: the block at addr ends" },
        Code { value: CodeValue::Int(10), name: "delete[]", meaning: "C++ operator delete[]: the block at addr ends" },
        Code { value: CodeValue::Int(11), name: "mmap", meaning: "the program's mmap: a new mapping" },
        Code { value: CodeValue::Int(12), name: "munmap", meaning: "the program's munmap: [addr, addr+size) ends" },
        Code { value: CodeValue::Int(13), name: "mremap", meaning: "the program's mremap: old_addr ends, addr begins" },
    ],
};

/// Every coded column.
pub const CODES: &[CodeTable] = &[ACCESS_KINDS, MAPPING_EVENT_KINDS, SYNC_KINDS, ALLOCATION_KINDS];

/// JSON type of a `meta.json` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonType {
    String,
    Integer,
    Bool,
    Object,
}

impl JsonType {
    /// `string`, `integer`, `bool`, `object`.
    pub const fn name(self) -> &'static str {
        match self {
            JsonType::String => "string",
            JsonType::Integer => "integer",
            JsonType::Bool => "bool",
            JsonType::Object => "object",
        }
    }
}

/// One field of `meta.json`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetaField {
    pub name: &'static str,
    pub ty: JsonType,
    /// A reader refuses a recording without it (or with a wrong value).
    pub required: bool,
    /// The writer maintains it; callers cannot set it.
    pub managed: bool,
    pub meaning: &'static str,
}

/// The fields every writer writes into `meta.json`, in order. Writers may add others; readers
/// ignore fields they do not know.
pub const META_FIELDS: &[MetaField] = &[
    MetaField {
        name: "format",
        ty: JsonType::String,
        required: true,
        managed: true,
        meaning: "always \"tierlab-recording\"",
    },
    MetaField {
        name: "version",
        ty: JsonType::Integer,
        required: true,
        managed: true,
        meaning: "format version; a reader refuses versions newer than it knows",
    },
    MetaField {
        name: "source",
        ty: JsonType::String,
        required: false,
        managed: false,
        meaning: "what wrote it (python, tierlab-sim, perf, a tool name and version)",
    },
    MetaField {
        name: "created",
        ty: JsonType::String,
        required: false,
        managed: true,
        meaning: "ISO 8601 time the recording was started (UTC)",
    },
    MetaField {
        name: "complete",
        ty: JsonType::Bool,
        required: false,
        managed: true,
        meaning: "true once the writer closed it; false while writing or if the writer died",
    },
    MetaField {
        name: "parameters",
        ty: JsonType::Object,
        required: false,
        managed: false,
        meaning: "the recording's settings (sampling period, buffer size, events, ...), free-form",
    },
    MetaField {
        name: "machine",
        ty: JsonType::Object,
        required: false,
        managed: false,
        meaning: "the machine it ran on (CPUs, nodes, page size, cpu_nodes, ...), free-form",
    },
    MetaField {
        name: "tables",
        ty: JsonType::Object,
        required: false,
        managed: true,
        meaning: "rows per table, counting the parts written when meta.json was last written",
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AccessRecord, Drain, MappingEvent, Region, Sample};
    use serde::Serialize;

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
        let m =
            MappingEvent { time_ns: 1, event: MappingEventKind::Map, start: 2, length: 3, name: "n".into() };
        assert_eq!(fields(&m), names(&MAPPINGS));
        let d = Drain { time_ns: 1, cpu: 2, drain: 3, records: 4 };
        assert_eq!(fields(&d), names(&DRAINS));
        let r = Region { time_ns: 1, end_ns: 2, target: 3, start: 4, end: 5, nr_accesses: 6, age: 7 };
        assert_eq!(fields(&r), names(&REGIONS));
        let e = crate::SyncEvent {
            time_ns: 1,
            tid: 2,
            seq: 3,
            index: 4,
            kind: crate::SyncKind::MutexLock,
            object: 5,
            arg: 6,
        };
        assert_eq!(fields(&e), names(&SYNC));
        assert_eq!(serde_json::to_value(e).unwrap()["kind"], serde_json::json!(2));
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
}
