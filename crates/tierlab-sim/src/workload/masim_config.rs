//! Parser of masim configuration files, accepted unchanged.
//!
//! The grammar (see `reference/masim-format.md`):
//! - lines whose first non-blank character is `#` are removed first;
//! - paragraphs are separated by blank lines (one or more; lines holding only blanks count as
//!   blank, CRLF line ends and a missing final newline are accepted);
//! - paragraph 1 lists the regions, one per line: `NAME, SIZE[, INIT_DATA_FILE|none]`;
//! - every later paragraph is a phase: its first line is the phase name (the whole line), the
//!   second its duration in milliseconds, then one or more access patterns
//!   `REGION, RANDOM(0|1), STRIDE, WEIGHT[, ro|wo|rw]` (mode defaults to `wo`, as in masim).
//!
//! Sizes and strides are plain byte counts or carry a `K`/`M`/`G`/`T` suffix (masim's Python
//! helper accepts them; see [`crate::units::parse_size`]). Every error names the file and
//! the 1-based line number in the original file (comment lines counted).

use crate::error::{Location, Result, SimError};
use crate::units::parse_size;
use std::path::Path;

/// Read/write mode of an access pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RwMode {
    /// `ro`: every access is a load.
    ReadOnly,
    /// `wo` (masim's default): every access is a store.
    WriteOnly,
    /// `rw`: every access loads then stores the same byte (masim's `read_val + 1`).
    ReadWrite,
}

impl RwMode {
    /// The mode's keyword in a config file.
    pub fn keyword(self) -> &'static str {
        match self {
            RwMode::ReadOnly => "ro",
            RwMode::WriteOnly => "wo",
            RwMode::ReadWrite => "rw",
        }
    }
}

/// One memory region of a masim config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MasimRegion {
    /// Region name (used by patterns, shown in reports).
    pub name: String,
    /// Size in bytes (> 0).
    pub size: u64,
    /// Initial-data file, if given (`none` gives `None`); the simulator does not model data.
    pub init_data: Option<String>,
    /// 1-based line of the definition in the original file.
    pub line: usize,
}

/// One access pattern of a phase.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MasimPattern {
    /// Index into [`MasimConfig::regions`].
    pub region: usize,
    /// Random (`1`) or sequential (`0`) access.
    pub random: bool,
    /// Stride in bytes (sequential patterns only; > 0 for them).
    pub stride: u64,
    /// Relative weight of the pattern when choosing.
    pub weight: u64,
    /// Read/write mode.
    pub mode: RwMode,
    /// 1-based line in the original file.
    pub line: usize,
}

/// One phase of a masim config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MasimPhase {
    /// Phase name (the whole first line).
    pub name: String,
    /// Duration in milliseconds.
    pub duration_ms: u64,
    /// Access patterns (at least one, total weight > 0).
    pub patterns: Vec<MasimPattern>,
    /// 1-based line of the phase name in the original file.
    pub line: usize,
}

impl MasimPhase {
    /// Sum of the patterns' weights.
    pub fn total_weight(&self) -> u64 {
        self.patterns.iter().map(|p| p.weight).sum()
    }
}

/// A parsed masim config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MasimConfig {
    /// The regions, in file order.
    pub regions: Vec<MasimRegion>,
    /// The phases, in file order (at least one).
    pub phases: Vec<MasimPhase>,
}

impl MasimConfig {
    /// Index of the region called `name`.
    pub fn region_index(&self, name: &str) -> Option<usize> {
        self.regions.iter().position(|r| r.name == name)
    }
    /// Sum of the phases' durations in milliseconds.
    pub fn total_duration_ms(&self) -> u64 {
        self.phases.iter().fold(0u64, |a, p| a.saturating_add(p.duration_ms))
    }
}

/// Read and parse a masim config file (I/O errors become [`SimError::Input`]).
pub fn load_masim(path: &Path) -> Result<MasimConfig> {
    let file = path.display().to_string();
    let text = crate::limits::read_text(path, crate::limits::MAX_TEXT_FILE).map_err(|m| SimError::Input {
        at: Location { file: file.clone(), line: None, field: None },
        msg: format!("masim config: {m}"),
    })?;
    let cfg = parse_masim(&text, &file)?;
    check_init_files(&cfg, path.parent().unwrap_or(Path::new(".")), &file)?;
    Ok(cfg)
}

/// Every region's initial-data file must exist as a regular file (masim reads it to fill the
/// region; the simulator does not model data, but a config naming a missing file would fail
/// on the real tool). Relative names are resolved against `dir`, the config's directory.
pub fn check_init_files(cfg: &MasimConfig, dir: &Path, file: &str) -> Result<()> {
    for r in &cfg.regions {
        if let Some(name) = &r.init_data {
            let p = Path::new(name);
            let full = if p.is_relative() { dir.join(p) } else { p.to_path_buf() };
            match std::fs::metadata(&full) {
                Ok(m) if m.is_file() => {}
                Ok(_) => {
                    return Err(err(
                        file,
                        r.line,
                        format!("region `{}`: initial-data file `{name}` is not a regular file", r.name),
                    ))
                }
                Err(e) => {
                    return Err(err(
                        file,
                        r.line,
                        format!("region `{}`: initial-data file `{name}` cannot be read: {e}", r.name),
                    ))
                }
            }
        }
    }
    Ok(())
}

/// Longest error message, in characters: a message quotes the line it is about, and a line
/// can be megabytes long (a damaged or foreign file); the rest is cut, its length said.
const MAX_MESSAGE: usize = 300;

fn err(file: &str, line: usize, msg: impl Into<String>) -> SimError {
    let mut msg: String = msg.into();
    if msg.chars().count() > MAX_MESSAGE {
        let cut: String = msg.chars().take(MAX_MESSAGE).collect();
        msg = format!("{cut}... (message cut: {} bytes in all)", msg.len());
    }
    SimError::Masim { at: Location { file: file.to_string(), line: Some(line), field: None }, msg }
}

/// A non-comment line with its 1-based line number in the original text.
struct Line<'a> {
    no: usize,
    text: &'a str,
}

/// Split `text` into paragraphs of non-comment lines (comments removed first, then blank lines
/// separate paragraphs).
fn paragraphs(text: &str) -> Vec<Vec<Line<'_>>> {
    let mut paras: Vec<Vec<Line<'_>>> = Vec::new();
    let mut cur: Vec<Line<'_>> = Vec::new();
    // `lines()` handles `\n` and `\r\n` and a missing final newline; strip a lone `\r` too.
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_end_matches('\r');
        let trimmed = line.trim();
        if trimmed.starts_with('#') {
            continue;
        }
        if trimmed.is_empty() {
            if !cur.is_empty() {
                paras.push(std::mem::take(&mut cur));
            }
            continue;
        }
        cur.push(Line { no: i + 1, text: trimmed });
    }
    if !cur.is_empty() {
        paras.push(cur);
    }
    paras
}

fn fields(s: &str) -> Vec<&str> {
    s.split(',').map(str::trim).collect()
}

fn parse_bytes(file: &str, line: usize, what: &str, s: &str) -> Result<u64> {
    parse_size(s).map_err(|e| err(file, line, format!("bad number for {what}: {e}")))
}

/// Parse the text of a masim config; `file` names it in errors.
pub fn parse_masim(text: &str, file: &str) -> Result<MasimConfig> {
    // A UTF-8 byte order mark (some editors write one) is not part of the first region name.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let paras = paragraphs(text);
    let total_lines = text.lines().count().max(1);
    let Some((region_para, phase_paras)) = paras.split_first() else {
        return Err(err(
            file,
            total_lines,
            "empty config: expected a paragraph of regions and at least one phase",
        ));
    };

    let mut regions: Vec<MasimRegion> = Vec::with_capacity(region_para.len());
    for (i, l) in region_para.iter().enumerate() {
        let f = fields(l.text);
        // Until one region line has parsed, the file is not known to be a masim config (it
        // may be any file a scenario named): its content is not quoted in errors.
        if i == 0 {
            let why = if f.len() < 2 {
                Some("missing field")
            } else if f.len() > 3 {
                Some("too many fields")
            } else if f[0].is_empty() {
                Some("missing field: empty region name")
            } else if !f[1].starts_with(|c: char| c.is_ascii_digit()) {
                // A number that is out of range (0, too large) is reported below as such.
                Some("bad number for the size")
            } else {
                None
            };
            if let Some(why) = why {
                return Err(err(
                    file,
                    l.no,
                    format!(
                        "not a masim config: its first line is not a region \
                         (`NAME, SIZE[, INIT_DATA_FILE|none]`): {why}"
                    ),
                ));
            }
        }
        if f.len() < 2 {
            return Err(err(
                file,
                l.no,
                format!(
                    "missing field: a region line is `NAME, SIZE[, INIT_DATA_FILE|none]`, got `{}`",
                    l.text
                ),
            ));
        }
        if f.len() > 3 {
            return Err(err(
                file,
                l.no,
                format!(
                    "too many fields: a region line is `NAME, SIZE[, INIT_DATA_FILE|none]`, got `{}`",
                    l.text
                ),
            ));
        }
        let name = f[0];
        if name.is_empty() {
            return Err(err(file, l.no, "missing field: empty region name"));
        }
        if let Some(prev) = regions.iter().find(|r| r.name == name) {
            return Err(err(
                file,
                l.no,
                format!("duplicate region `{name}` (first defined at line {})", prev.line),
            ));
        }
        let size = parse_bytes(file, l.no, &format!("the size of region `{name}`"), f[1])?;
        if size == 0 {
            return Err(err(file, l.no, format!("region `{name}` has size 0")));
        }
        let init_data = match f.get(2) {
            None => None,
            Some(s) if s.is_empty() || *s == "none" => None,
            Some(s) => Some(s.to_string()),
        };
        regions.push(MasimRegion { name: name.to_string(), size, init_data, line: l.no });
    }

    if phase_paras.is_empty() {
        let last = region_para.last().map_or(1, |l| l.no);
        return Err(err(
            file,
            last,
            "no phases: the regions paragraph must be followed by a blank line and at least one phase",
        ));
    }

    let mut phases = Vec::with_capacity(phase_paras.len());
    for para in phase_paras {
        let name_line = &para[0];
        let Some(time_line) = para.get(1) else {
            return Err(err(
                file,
                name_line.no,
                format!(
                    "empty phase `{}`: expected its duration in ms and at least one access pattern",
                    name_line.text
                ),
            ));
        };
        let duration_ms: u64 = time_line.text.parse().map_err(|_| {
            err(
                file,
                time_line.no,
                format!("bad number: phase duration must be whole milliseconds, got `{}`", time_line.text),
            )
        })?;
        if duration_ms > MAX_PHASE_MS {
            return Err(err(
                file,
                time_line.no,
                format!(
                    "phase `{}` lasts {duration_ms} ms, longer than the longest simulated time accepted \
                     ({MAX_PHASE_MS} ms, about 11.6 days)",
                    name_line.text
                ),
            ));
        }
        if para.len() < 3 {
            return Err(err(
                file,
                time_line.no,
                format!("empty phase `{}`: no access pattern after its duration", name_line.text),
            ));
        }
        let mut patterns = Vec::with_capacity(para.len() - 2);
        for l in &para[2..] {
            patterns.push(parse_pattern(file, l, &regions)?);
        }
        let mut total: u64 = 0;
        for p in &patterns {
            total = total
                .checked_add(p.weight)
                .ok_or_else(|| err(file, p.line, "bad number: total weight of the phase overflows"))?;
        }
        if total == 0 {
            return Err(err(
                file,
                name_line.no,
                format!("phase `{}` has a total weight of zero", name_line.text),
            ));
        }
        phases.push(MasimPhase {
            name: name_line.text.to_string(),
            duration_ms,
            patterns,
            line: name_line.no,
        });
    }
    let cfg = MasimConfig { regions, phases };
    let total = cfg.total_duration_ms();
    if total == 0 {
        return Err(err(file, cfg.phases[0].line, "every phase lasts 0 ms: the config runs no accesses"));
    }
    if total > MAX_PHASE_MS {
        return Err(err(
            file,
            cfg.phases[0].line,
            format!(
                "the phases last {total} ms in all, longer than the longest simulated time accepted \
                 ({MAX_PHASE_MS} ms, about 11.6 days)"
            ),
        ));
    }
    Ok(cfg)
}

/// The longest phase (and sum of phases) accepted, ms: the longest simulated time, 10^15 ns.
const MAX_PHASE_MS: u64 = 1_000_000_000;

fn parse_pattern(file: &str, l: &Line<'_>, regions: &[MasimRegion]) -> Result<MasimPattern> {
    const SHAPE: &str = "`REGION, RANDOM(0|1), STRIDE, WEIGHT[, ro|wo|rw]`";
    let f = fields(l.text);
    if f.len() < 4 {
        return Err(err(
            file,
            l.no,
            format!("missing field: an access pattern is {SHAPE}, got `{}`", l.text),
        ));
    }
    if f.len() > 5 {
        return Err(err(
            file,
            l.no,
            format!("too many fields: an access pattern is {SHAPE}, got `{}`", l.text),
        ));
    }
    let region = regions
        .iter()
        .position(|r| r.name == f[0])
        .ok_or_else(|| err(file, l.no, format!("unknown region `{}`", f[0])))?;
    let random = match f[1] {
        "0" => false,
        "1" => true,
        other => return Err(err(file, l.no, format!("random flag must be 0 or 1, got `{other}`"))),
    };
    let stride = parse_bytes(file, l.no, "the stride", f[2])?;
    if !random && stride == 0 {
        return Err(err(file, l.no, "stride 0 in a sequential pattern (it would never move)"));
    }
    let weight: u64 = f[3]
        .parse()
        .map_err(|_| err(file, l.no, format!("bad number: weight must be a whole number, got `{}`", f[3])))?;
    let mode = match f.get(4).copied() {
        None | Some("") => RwMode::WriteOnly,
        Some("ro") => RwMode::ReadOnly,
        Some("wo") => RwMode::WriteOnly,
        Some("rw") => RwMode::ReadWrite,
        Some(other) => return Err(err(file, l.no, format!("unknown mode `{other}` (use ro, wo or rw)"))),
    };
    Ok(MasimPattern { region, random, stride, weight, mode, line: l.no })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn data_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/masim")
    }

    fn parse_err(text: &str) -> (usize, String) {
        match parse_masim(text, "t.cfg") {
            Err(SimError::Masim { at, msg }) => {
                assert_eq!(at.file, "t.cfg");
                (at.line.expect("line"), msg)
            }
            other => panic!("expected a masim error, got {other:?}"),
        }
    }

    #[test]
    fn a_file_that_is_not_masim_is_not_quoted() {
        let (line, msg) = parse_err("root:$6$saltsalt$secret:19000:0:99999:7:::\nbin:*:19000\n");
        assert_eq!(line, 1);
        assert!(msg.contains("not a masim config"), "{msg}");
        assert!(!msg.contains("root") && !msg.contains("secret"), "{msg}");
        let (_, msg) = parse_err("secret, value\n\np\n1\nsecret, 0, 64, 1\n");
        assert!(!msg.contains("secret") && !msg.contains("value"), "{msg}");
    }

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tierlab-masim-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn special_files_and_missing_init_files_are_refused() {
        let e = load_masim(Path::new("/dev/zero")).unwrap_err().to_string();
        assert!(e.contains("/dev/zero") && e.contains("not a regular file"), "{e}");
        let d = scratch("init");
        let cfg = d.join("c.cfg");
        std::fs::write(&cfg, "a, 4096, data.bin\nb, 4096, none\n\np\n1\na, 0, 64, 1\n").unwrap();
        let e = load_masim(&cfg).unwrap_err().to_string();
        assert!(e.contains("c.cfg:1") && e.contains("initial-data file `data.bin`"), "{e}");
        std::fs::write(d.join("data.bin"), [0u8; 16]).unwrap();
        let c = load_masim(&cfg).unwrap();
        assert_eq!(c.regions[0].init_data.as_deref(), Some("data.bin"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let d = scratch("fifo");
        let f = d.join("fifo.cfg");
        let c = std::ffi::CString::new(f.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates the file.
        assert_eq!(unsafe { libc_mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = load_masim(&f).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[cfg(unix)]
    extern "C" {
        #[link_name = "mkfifo"]
        fn libc_mkfifo(path: *const std::os::raw::c_char, mode: u32) -> i32;
    }

    #[test]
    fn parses_all_shipped_files() {
        let dir = data_dir();
        if !dir.exists() {
            eprintln!("skipping: {} not found", dir.display());
            return;
        }
        for name in ["2mb.cfg", "default", "hint_test", "stairs.cfg", "zigzag.cfg"] {
            let cfg = load_masim(&dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!cfg.regions.is_empty() && !cfg.phases.is_empty(), "{name}");
        }
        let z = load_masim(&dir.join("zigzag.cfg")).unwrap();
        assert_eq!(z.regions.len(), 2);
        assert_eq!(z.regions[0].size, 100_000_000);
        assert_eq!(z.phases.len(), 13);
        assert_eq!(z.phases[0].name, "initial phase");
        assert_eq!(z.phases[0].duration_ms, 10_000);
        assert_eq!(z.phases[1].patterns[0].stride, 4096);
        assert_eq!(z.total_duration_ms(), 10_000 + 12 * 5000);
        let d = load_masim(&dir.join("default")).unwrap();
        assert_eq!(d.regions[1].size, 64);
        assert_eq!(d.regions[0].init_data, None);
        assert_eq!(d.phases[0].patterns[0].mode, RwMode::WriteOnly);
        assert_eq!(d.phases[1].patterns[0].mode, RwMode::ReadOnly);
        assert_eq!(d.phases[1].patterns[1].mode, RwMode::ReadWrite);
        assert!(d.phases[0].patterns[0].random);
        assert_eq!(d.phases[1].name, "example phase 2");
        let s = load_masim(&dir.join("stairs.cfg")).unwrap();
        assert_eq!(s.phases.len(), 11);
        assert_eq!(s.phases[0].patterns.len(), 10);
    }

    #[test]
    fn tolerant_layout() {
        let text = "# regions\r\na, 4K\r\nb,1M , none\r\n\r\n\r\n  \r\n# phase\r\nfirst phase  \r\n10\r\na, 1, 64, 3, ro\r\nb,0,4096,1\r\n\n\nsecond\n5\nb, 0, 64, 2, rw";
        let cfg = parse_masim(text, "x").unwrap();
        assert_eq!(cfg.regions[0].size, 4096);
        assert_eq!(cfg.regions[1].size, 1 << 20);
        assert_eq!(cfg.phases.len(), 2);
        assert_eq!(cfg.phases[0].name, "first phase");
        assert_eq!(cfg.phases[0].line, 8);
        assert_eq!(cfg.phases[0].patterns[1].region, 1);
        assert_eq!(cfg.phases[1].patterns[0].mode, RwMode::ReadWrite);
        assert_eq!(cfg.phases[1].patterns[0].line, 16);
    }

    #[test]
    fn missing_field() {
        let (line, msg) = parse_err("# c\na, 100\n\np\n10\n# pattern\na, 0, 64\n");
        assert_eq!(line, 7);
        assert!(msg.contains("missing field"), "{msg}");
        let (line, msg) = parse_err("a\n\np\n10\na, 0, 64, 1\n");
        assert_eq!(line, 1);
        assert!(msg.contains("missing field"), "{msg}");
    }

    #[test]
    fn odd_but_explainable_configs() {
        // A byte order mark before the first region is not part of its name.
        let cfg = parse_masim("\u{feff}a, 4096\n\np\n10\na, 0, 64, 1\n", "t.cfg").unwrap();
        assert_eq!(cfg.regions[0].name, "a");
        // Sizes out of range are named as such (not "bad number"), on the first line too.
        let (line, msg) = parse_err("a, 0\n\np\n10\na, 0, 64, 1\n");
        assert!(line == 1 && msg.contains("size 0"), "{msg}");
        let (line, msg) = parse_err("a, 18446744073709551615\n\np\n10\na, 0, 64, 1\n");
        assert!(line == 1 && msg.contains("largest"), "{msg}");
        // Phase times beyond the longest simulated time, or none at all.
        let (line, msg) = parse_err("a, 4096\n\np\n18446744073709551615\na, 0, 64, 1\n");
        assert!(line == 4 && msg.contains("longest simulated time"), "{msg}");
        let (line, msg) = parse_err("a, 4096\n\np\n600000000\na, 0, 64, 1\n\nq\n600000000\na, 0, 64, 1\n");
        assert!(line == 3 && msg.contains("in all"), "{msg}");
        let (line, msg) = parse_err("a, 4096\n\np\n0\na, 0, 64, 1\n");
        assert!(line == 3 && msg.contains("0 ms"), "{msg}");
        // One phase of 0 ms among others is kept (masim runs it for no time).
        assert!(parse_masim("a, 4096\n\np\n0\na, 0, 64, 1\n\nq\n5\na, 0, 64, 1\n", "t.cfg").is_ok());
    }

    #[test]
    fn too_many_fields() {
        let (line, msg) = parse_err("a, 100\n\np\n10\na, 0, 64, 1, ro, x\n");
        assert_eq!(line, 5);
        assert!(msg.contains("too many fields"), "{msg}");
    }

    #[test]
    fn unknown_region() {
        let (line, msg) = parse_err("# regions\n# more\na, 100\n\np\n10\nb, 0, 64, 1\n");
        assert_eq!(line, 7);
        assert!(msg.contains("unknown region `b`"), "{msg}");
    }

    #[test]
    fn bad_numbers() {
        let (line, msg) = parse_err("a, 1x0\n\np\n10\na, 0, 64, 1\n");
        assert_eq!((line, msg.contains("bad number")), (1, true), "{msg}");
        let (line, msg) = parse_err("a, 100\n\np\nten\na, 0, 64, 1\n");
        assert_eq!((line, msg.contains("bad number")), (4, true), "{msg}");
        let (line, msg) = parse_err("a, 100\n\np\n10\na, 0, sixty, 1\n");
        assert_eq!((line, msg.contains("bad number")), (5, true), "{msg}");
        let (line, msg) = parse_err("a, 100\n\np\n10\na, 0, 64, -1\n");
        assert_eq!((line, msg.contains("bad number")), (5, true), "{msg}");
    }

    #[test]
    fn empty_phase() {
        // A name and a time but no pattern.
        let (line, msg) = parse_err("a, 100\n\np\n10\n\nq\n10\na, 0, 64, 1\n");
        assert_eq!(line, 4);
        assert!(msg.contains("empty phase `p`"), "{msg}");
        // Only a name.
        let (line, msg) = parse_err("a, 100\n\np\n10\na, 0, 64, 1\n\n# lonely\nq\n");
        assert_eq!(line, 8);
        assert!(msg.contains("empty phase `q`"), "{msg}");
    }

    #[test]
    fn duplicate_region() {
        let (line, msg) = parse_err("a, 100\nb, 100\na, 200\n\np\n10\na, 0, 64, 1\n");
        assert_eq!(line, 3);
        assert!(msg.contains("duplicate region `a`") && msg.contains("line 1"), "{msg}");
    }

    #[test]
    fn zero_size() {
        let (line, msg) = parse_err("a, 100\nb, 0\n\np\n10\na, 0, 64, 1\n");
        assert_eq!(line, 2);
        assert!(msg.contains("size 0"), "{msg}");
    }

    #[test]
    fn zero_total_weight() {
        let (line, msg) = parse_err("a, 100\n\np\n10\na, 0, 64, 0\na, 1, 64, 0\n");
        assert_eq!(line, 3);
        assert!(msg.contains("total weight of zero"), "{msg}");
    }

    #[test]
    fn zero_stride_sequential() {
        let (line, msg) = parse_err("a, 100\n\np\n10\na, 0, 0, 1\n");
        assert_eq!(line, 5);
        assert!(msg.contains("stride 0"), "{msg}");
        // A random pattern ignores its stride.
        assert!(parse_masim("a, 100\n\np\n10\na, 1, 0, 1\n", "t").is_ok());
    }

    #[test]
    fn unknown_mode() {
        let (line, msg) = parse_err("a, 100\n\np\n10\na, 0, 64, 1, rx\n");
        assert_eq!(line, 5);
        assert!(msg.contains("unknown mode `rx`"), "{msg}");
    }

    #[test]
    fn random_flag_not_bit() {
        let (line, msg) = parse_err("a, 100\n\np\n10\na, 2, 64, 1\n");
        assert_eq!(line, 5);
        assert!(msg.contains("random flag must be 0 or 1"), "{msg}");
    }

    #[test]
    fn no_phases() {
        let (line, msg) = parse_err("# regions\na, 100\nb, 200\n\n# nothing else\n");
        assert_eq!(line, 3);
        assert!(msg.contains("no phases"), "{msg}");
        let (line, msg) = parse_err("# only comments\n");
        assert_eq!(line, 1);
        assert!(msg.contains("empty config"), "{msg}");
    }

    #[test]
    fn missing_file_is_input_error() {
        let e = load_masim(Path::new("/nonexistent/masim.cfg")).unwrap_err();
        assert_eq!(e.kind(), "input");
        assert!(e.to_string().contains("/nonexistent/masim.cfg"), "{e}");
    }
}
