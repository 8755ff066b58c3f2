//! A streaming parser of Valgrind lackey's memory trace (`--tool=lackey --trace-mem=yes`).
//!
//! Lackey prints one line per event: `I  ADDR,SIZE` (an instruction), ` L ADDR,SIZE` (a load),
//! ` S ADDR,SIZE` (a store), ` M ADDR,SIZE` (a modify: a load then a store of the same bytes).
//! Addresses are hex without `0x`. Valgrind's own messages start with `==PID==` or `--PID--`.
//!
//! The parser takes the output in chunks of any size (a line may span chunks) and appends
//! accesses to column vectors; `time` is a logical clock: the number of instructions executed
//! before the access.

use std::fmt;

use tierlab_core::AccessKind;

/// Code of a load in the recording's `kind` column.
const LOAD: u8 = AccessKind::Read.code();
/// Code of a store.
const STORE: u8 = AccessKind::Write.code();

/// Accesses decoded so far, as the columns of the recording's `accesses` table (without
/// `tid`, which the caller knows).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Accesses {
    pub time: Vec<u64>,
    pub addr: Vec<u64>,
    /// [`AccessKind`] codes: 0 load, 1 store.
    pub kind: Vec<u8>,
}

impl Accesses {
    pub fn len(&self) -> usize {
        self.addr.len()
    }
    pub fn is_empty(&self) -> bool {
        self.addr.is_empty()
    }
    pub fn clear(&mut self) {
        self.time.clear();
        self.addr.clear();
        self.kind.clear();
    }
}

/// A line that is neither a trace line nor a Valgrind message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LackeyError {
    pub line: u64,
    pub text: String,
    pub reason: &'static str,
}

impl fmt::Display for LackeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "lackey output line {}: {}: {:?}", self.line, self.reason, self.text)
    }
}

impl std::error::Error for LackeyError {}

/// Streaming state.
#[derive(Debug, Default)]
pub struct Parser {
    partial: Vec<u8>,
    pub line: u64,
    pub instructions: u64,
    pub loads: u64,
    pub stores: u64,
    pub modifies: u64,
    /// Valgrind's own lines (`==PID== ...`), in order, for the caller to show.
    pub messages: Vec<String>,
}

fn parse_hex_size(s: &[u8]) -> Option<u64> {
    let comma = s.iter().position(|&b| b == b',')?;
    let hex = &s[..comma];
    if hex.is_empty() || hex.len() > 16 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in hex {
        let d = (b as char).to_digit(16)?;
        v = (v << 4) | u64::from(d);
    }
    let size = &s[comma + 1..];
    if size.is_empty() || !size.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v)
}

impl Parser {
    pub fn new() -> Self {
        Parser::default()
    }

    /// Accesses counted so far (an `M` counts twice).
    pub fn accesses(&self) -> u64 {
        self.loads + self.stores + 2 * self.modifies
    }

    fn line(&mut self, raw: &[u8], out: &mut Accesses) -> Result<(), LackeyError> {
        self.line += 1;
        let l = raw.strip_suffix(b"\r").unwrap_or(raw);
        // A UTF-8 byte order mark before the first line (a log saved by an editor).
        let l = if self.line == 1 { l.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(l) } else { l };
        if l.is_empty() {
            return Ok(());
        }
        let bad =
            |reason| LackeyError { line: self.line, text: String::from_utf8_lossy(l).into_owned(), reason };
        if l.len() > 3 && l[0] == b' ' && l[2] == b' ' {
            let kind = l[1];
            if matches!(kind, b'L' | b'S' | b'M') {
                let addr = parse_hex_size(&l[3..]).ok_or_else(|| bad("expected ADDR,SIZE (hex address)"))?;
                let t = self.instructions;
                match kind {
                    b'L' => {
                        self.loads += 1;
                        out.time.push(t);
                        out.addr.push(addr);
                        out.kind.push(LOAD);
                    }
                    b'S' => {
                        self.stores += 1;
                        out.time.push(t);
                        out.addr.push(addr);
                        out.kind.push(STORE);
                    }
                    _ => {
                        self.modifies += 1;
                        out.time.extend([t, t]);
                        out.addr.extend([addr, addr]);
                        out.kind.extend([LOAD, STORE]);
                    }
                }
                return Ok(());
            }
        }
        if l.starts_with(b"I ") {
            parse_hex_size(l[1..].trim_ascii_start())
                .ok_or_else(|| bad("expected an instruction ADDR,SIZE"))?;
            self.instructions += 1;
            return Ok(());
        }
        if l.starts_with(b"==") || l.starts_with(b"--") || l.starts_with(b"**") {
            self.messages.push(String::from_utf8_lossy(l).into_owned());
            return Ok(());
        }
        Err(bad("not a lackey trace line nor a Valgrind message"))
    }

    /// Parse a chunk of output; a trailing partial line is kept for the next chunk.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Accesses) -> Result<(), LackeyError> {
        let mut rest = chunk;
        if !self.partial.is_empty() {
            match rest.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    let mut line = std::mem::take(&mut self.partial);
                    line.extend_from_slice(&rest[..i]);
                    self.line(&line, out)?;
                    rest = &rest[i + 1..];
                }
                None => {
                    self.partial.extend_from_slice(rest);
                    return Ok(());
                }
            }
        }
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            self.line(&rest[..i], out)?;
            rest = &rest[i + 1..];
        }
        self.partial.extend_from_slice(rest);
        Ok(())
    }

    /// End of output: parse a last line without a newline.
    pub fn finish(&mut self, out: &mut Accesses) -> Result<(), LackeyError> {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line(&line, out)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = concat!(
        "==123== Lackey, an example Valgrind tool\n",
        "I  04016d0,3\n",
        " S 1ffefffd98,8\n",
        "I  04016d3,5\n",
        " L 0422cac0,8\n",
        " M 0421f8f0,4\n",
        "I  04016d8,2\n",
        " L 1ffefffd98,8\n",
        "==123== \n",
    );

    #[test]
    fn parses_every_kind() {
        let mut p = Parser::new();
        let mut a = Accesses::default();
        p.feed(TRACE.as_bytes(), &mut a).unwrap();
        p.finish(&mut a).unwrap();
        assert_eq!(a.addr, vec![0x1ffefffd98, 0x422cac0, 0x421f8f0, 0x421f8f0, 0x1ffefffd98]);
        assert_eq!(a.kind, vec![1, 0, 0, 1, 0]);
        assert_eq!(a.time, vec![1, 2, 2, 2, 3]);
        assert_eq!((p.loads, p.stores, p.modifies, p.instructions), (2, 1, 1, 3));
        assert_eq!(p.accesses(), 5);
        assert_eq!(p.messages.len(), 2);
    }

    #[test]
    fn any_chunking_gives_the_same_result() {
        let mut whole = Accesses::default();
        let mut p = Parser::new();
        p.feed(TRACE.as_bytes(), &mut whole).unwrap();
        p.finish(&mut whole).unwrap();
        for size in 1..TRACE.len() {
            let mut a = Accesses::default();
            let mut p = Parser::new();
            for chunk in TRACE.as_bytes().chunks(size) {
                p.feed(chunk, &mut a).unwrap();
            }
            p.finish(&mut a).unwrap();
            assert_eq!(a, whole, "chunk size {size}");
        }
    }

    #[test]
    fn last_line_without_newline() {
        let mut a = Accesses::default();
        let mut p = Parser::new();
        p.feed(b" L 10,8", &mut a).unwrap();
        assert!(a.is_empty());
        p.finish(&mut a).unwrap();
        assert_eq!(a.addr, vec![0x10]);
    }

    #[test]
    fn byte_order_mark_before_the_first_line() {
        let mut with = Accesses::default();
        let mut p = Parser::new();
        p.feed(b"\xEF\xBB\xBF", &mut with).unwrap();
        p.feed(TRACE.as_bytes(), &mut with).unwrap();
        p.finish(&mut with).unwrap();
        let mut without = Accesses::default();
        let mut q = Parser::new();
        q.feed(TRACE.as_bytes(), &mut without).unwrap();
        q.finish(&mut without).unwrap();
        assert_eq!(with, without);
        assert_eq!(p.messages, q.messages);
        // Only at the start: further on it is not a trace line.
        let e = Parser::new().feed(b"I  0400,3\n\xEF\xBB\xBF L 10,8\n", &mut with).unwrap_err();
        assert_eq!(e.line, 2);
    }

    #[test]
    fn errors_name_the_line() {
        let mut p = Parser::new();
        let mut a = Accesses::default();
        let e = p.feed(b"I  0400,3\n L zz12,8\n", &mut a).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().starts_with("lackey output line 2: expected ADDR,SIZE"), "{e}");
        let e = Parser::new().feed(b"hello world\n", &mut a).unwrap_err();
        assert!(e.to_string().contains("not a lackey trace line"), "{e}");
    }
}
