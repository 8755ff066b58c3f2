//! The range of every numeric scenario parameter, checked when a scenario loads.
//!
//! Every number of a scenario (an integer or a float, in any table, defaults included) is a
//! declared field (`#[param(range = ...)]`, `tierlab_core::param`) and must lie in the range
//! its declaration gives; sizes and durations that declare one are checked on their parsed
//! value (bytes, ns), and all of them are bounded where they are parsed
//! ([`crate::units::MAX_SIZE`], [`crate::units::MAX_DURATION_NS`]). The ranges exclude what
//! no machine or program has (a fault that takes more than a second, a TLB of more than
//! 65,536 entries), which is also what would make the engine's 64-bit picosecond clock wrap
//! or its tables outgrow the host; the kinds' own checks then say what is inconsistent (ways
//! that do not divide entries, a threshold above a count). `docs/parameters.md` lists them.

use tierlab_core::param::{FieldSpec, Shape};

/// A number out of range: (dotted path with indices, message).
pub type Violation = (String, String);

/// Check every number of `value` (a table of parameters as TOML, defaults included, whose
/// keys are `fields`: a scenario) against the range its field declares.
pub fn check(value: &toml::Value, fields: &[&'static FieldSpec]) -> Result<(), Violation> {
    let toml::Value::Table(t) = value else { return Ok(()) };
    check_table(t, fields, &mut String::new())
}

/// Check the numbers of a declared struct against their ranges (configurations built in code
/// and checks that run again after a scenario's load); errors name `prefix.field`.
pub fn check_ranges<P: tierlab_core::param::Declared + serde::Serialize>(
    p: &P,
    prefix: &str,
) -> Result<(), Violation> {
    let value = toml::Value::try_from(p).map_err(|e| (prefix.to_string(), e.to_string()))?;
    let toml::Value::Table(t) = value else { return Ok(()) };
    check_table(&t, &P::fields(), &mut prefix.to_string())
}

/// Check the numbers of the table `t` whose keys are `fields` (`path`: its dotted path).
pub fn check_table(
    t: &toml::Table,
    fields: &[&'static FieldSpec],
    path: &mut String,
) -> Result<(), Violation> {
    for (k, x) in t {
        let p0 = path.len();
        *path = join(path, k);
        // A key no field declares is a tagged table's `kind` (serde refused any other).
        if let Some(f) = tierlab_core::param::find(fields.to_vec(), k) {
            check_value(x, (f.shape)(), f, path)?;
        }
        path.truncate(p0);
    }
    Ok(())
}

fn check_value(
    v: &toml::Value,
    shape: Shape,
    f: &'static FieldSpec,
    path: &mut String,
) -> Result<(), Violation> {
    match (shape, v) {
        (Shape::Table(fields), toml::Value::Table(t)) => check_table(t, &fields(), path),
        (Shape::Tagged { fields, .. }, toml::Value::Table(t)) => {
            match t.get("kind").and_then(|k| k.as_str()).and_then(fields) {
                Some(fs) => check_table(t, &fs, path),
                None => Ok(()),
            }
        }
        (Shape::List(inner), toml::Value::Array(a)) => {
            for (i, x) in a.iter().enumerate() {
                let p0 = path.len();
                path.push_str(&format!("[{i}]"));
                check_value(x, inner(), f, path)?;
                path.truncate(p0);
            }
            Ok(())
        }
        (Shape::Optional(inner), _) => check_value(v, inner(), f, path),
        (Shape::Map(inner), toml::Value::Table(t)) => {
            for (k, x) in t {
                let p0 = path.len();
                *path = join(path, k);
                check_value(x, inner(), f, path)?;
                path.truncate(p0);
            }
            Ok(())
        }
        (Shape::Int | Shape::Float, toml::Value::Integer(i)) => check_declared(*i as f64, f, path),
        (Shape::Int, toml::Value::Float(x)) => {
            Err((path.to_string(), format!("{x} must be an integer ({})", f.unit_or("count"))))
        }
        (Shape::Float, toml::Value::Float(x)) => check_declared(*x, f, path),
        // Sizes and durations: bounded where parsed; a declared range is checked on the
        // parsed value (bytes, ns).
        (Shape::Size, _) if f.range.is_some() => match size_of(v) {
            Some(b) => check_declared(b as f64, f, path),
            None => Ok(()),
        },
        (Shape::Duration, _) if f.range.is_some() => match duration_of(v) {
            Some(ns) => check_declared(ns as f64, f, path),
            None => Ok(()),
        },
        // Strings, booleans, choices; free-form values checked by their own code.
        _ => Ok(()),
    }
}

fn join(base: &str, k: &str) -> String {
    if base.is_empty() {
        k.to_string()
    } else {
        format!("{base}.{k}")
    }
}

/// The bytes of a size as written (an integer or a string with a unit).
fn size_of(v: &toml::Value) -> Option<u64> {
    match v {
        toml::Value::Integer(i) => u64::try_from(*i).ok(),
        toml::Value::String(s) => crate::units::parse_size(s).ok(),
        _ => None,
    }
}

/// The ns of a duration as written (seconds as a number, or a string with a unit).
fn duration_of(v: &toml::Value) -> Option<u64> {
    v.clone().try_into::<crate::units::Duration>().ok().map(|d| d.0)
}

fn check_declared(x: f64, f: &FieldSpec, path: &str) -> Result<(), Violation> {
    let Some(range) = f.range else {
        return Err((
            path.to_string(),
            "no range is declared for this number (a bug: declare its `range`)".into(),
        ));
    };
    if !x.is_finite() {
        return Err((path.to_string(), format!("{x} is not a finite number")));
    }
    if !range.contains(x) {
        let unit = if f.unit.is_empty() { String::new() } else { format!(" ({})", f.unit) };
        return Err((path.to_string(), format!("{} is out of range: must be in {range}{unit}", fmt(x))));
    }
    Ok(())
}

/// A number as a person writes it (integers without `.0`, large ones in exponent form).
pub fn fmt(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else if x.abs() >= 1e15 || (x != 0.0 && x.abs() < 1e-4) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// Largest scenario or masim config file read (16 MiB: the biggest built-in is a few KiB).
pub const MAX_TEXT_FILE: u64 = 16 << 20;

/// Read a text file an input names, bounded: it must be a regular file (a FIFO, a device
/// such as `/dev/zero` or a directory is refused before any read), at most `max` bytes, and
/// UTF-8. The error says what is wrong without quoting the content.
pub fn read_text(path: &std::path::Path, max: u64) -> Result<String, String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    if !meta.is_file() {
        let kind =
            if meta.is_dir() { "a directory" } else { "not a regular file (a FIFO, socket or device)" };
        return Err(format!("cannot read: {kind}"));
    }
    if meta.len() > max {
        return Err(format!("too large: {} bytes (at most {max})", meta.len()));
    }
    let f = std::fs::File::open(path).map_err(|e| format!("cannot read: {e}"))?;
    let mut buf = Vec::with_capacity(meta.len() as usize);
    // The size may change between the check and the read: read at most one byte more.
    f.take(max + 1).read_to_end(&mut buf).map_err(|e| format!("cannot read: {e}"))?;
    if buf.len() as u64 > max {
        return Err(format!("too large: more than {max} bytes"));
    }
    String::from_utf8(buf)
        .map_err(|e| format!("not a text file: invalid UTF-8 at byte {}", e.utf8_error().valid_up_to()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn read_text_refuses_what_is_not_a_small_text_file() {
        let dir = std::env::temp_dir().join(format!("tierlab-limits-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ok = dir.join("ok.toml");
        std::fs::write(&ok, "a = 1\n").unwrap();
        assert_eq!(read_text(&ok, 100).unwrap(), "a = 1\n");
        assert!(read_text(&ok, 3).unwrap_err().contains("too large"));
        let bin = dir.join("bin");
        std::fs::write(&bin, [b'a', 0xff, 0xfe]).unwrap();
        assert!(read_text(&bin, 100).unwrap_err().contains("invalid UTF-8 at byte 1"));
        assert!(read_text(&dir, 100).unwrap_err().contains("a directory"));
        assert!(read_text(std::path::Path::new("/dev/zero"), 100)
            .unwrap_err()
            .contains("not a regular file"));
        assert!(read_text(&dir.join("missing"), 100).unwrap_err().contains("cannot read"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    use super::*;

    fn table(s: &str) -> toml::Value {
        toml::Value::Table(toml::from_str(s).unwrap())
    }

    fn check(v: &toml::Value) -> Result<(), Violation> {
        use tierlab_core::param::Declared;
        super::check(v, &crate::scenario::Scenario::fields())
    }

    #[test]
    fn out_of_range_and_non_finite() {
        let e = check(&table("[machine.cost]\nfault_ns = 1e17\n")).unwrap_err();
        assert_eq!(e.0, "machine.cost.fault_ns");
        assert!(e.1.contains("1e17 is out of range: must be in [0, 1000000000]"), "{}", e.1);
        let e = check(&table("[machine]\nremote_factor = nan\n")).unwrap_err();
        assert!(e.1.contains("not a finite"), "{}", e.1);
        let e = check(&table("[[machine.nodes]]\nlatency_ns = 90.0\n[[machine.nodes]]\nlatency_ns = inf\n"))
            .unwrap_err();
        assert_eq!(e.0, "machine.nodes[1].latency_ns");
        let e = check(&table("[machine.tlb]\nl2_entries = 1200000000\n")).unwrap_err();
        assert!(e.1.contains("65536"), "{}", e.1);
        let e = check(&table("[machine.tlb]\nl1_4k_entries = 65536\nl1_4k_ways = 65536\n")).unwrap_err();
        assert_eq!(e.0, "machine.tlb.l1_4k_ways");
        assert!(e.1.contains("must be in [1, 256]"), "{}", e.1);
        let e = check(&table("[workload]\nkind = \"uniform\"\nthreads = 2.5\n")).unwrap_err();
        assert!(e.1.contains("integer"), "{}", e.1);
        check(&table("seed = 7\n[machine.cost]\nfault_ns = 1000.0\n")).unwrap();
    }

    #[test]
    fn sizes_and_durations_are_checked_on_their_parsed_value() {
        let e = check(&table("[[telemetry]]\nkind = \"pebs\"\nrecord_size = \"128KiB\"\n")).unwrap_err();
        assert_eq!(e.0, "telemetry[0].record_size");
        assert!(e.1.contains("131072 is out of range: must be in [1, 65536]"), "{}", e.1);
        check(&table("[[telemetry]]\nkind = \"pebs\"\nrecord_size = 256\n")).unwrap();
    }
}
