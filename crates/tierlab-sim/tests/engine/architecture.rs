//! The architecture's rules, checked on the sources (see `docs/architecture.md`):
//! - the top-level modules of `tierlab-sim` form layers that only call downward, and no two
//!   modules of the crate, at any depth, use each other in a cycle;
//! - the decision layers (agents, replacement policies) never downcast;
//! - no page-size literal outside `tierlab-core` (page sizes and page arithmetic are spelled
//!   through core's names);
//! - `tierlab-live` and `tierlab-sim` depend on `tierlab-core`.
//!
//! Test code (every `#[cfg(test)]`-gated item) and comments are not checked; every other line
//! is ([`scan`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers of `tierlab-sim`, bottom first: a module may use modules of its own layer
/// or of a lower one, and modules of one layer may not use each other in a cycle.
const LAYERS: &[&[&str]] = &[
    &["error", "units", "limits", "rng", "stats", "stats_keys", "params"],
    &["truth"],
    &["hw"],
    &["os"],
    &["workload"],
    &["agents"],
    &["scoring"],
    &["scenario"],
    &["driver"],
    &["bench"],
];

/// Module cycles that exist and are to be removed, each as the modules of its strongly
/// connected component: any other cycle fails the test, and so does an entry here that is no
/// longer one.
/// - `hw::pagetable` <-> `hw::psc`: the walker (`PageTables::walk`) takes the core's
///   paging-structure caches (`Psc`), which name the page-table levels (`Level`,
///   `LEVEL_SHIFT`); moving the levels into a module of their own removes it (hot-path code:
///   compare the engine's instruction count).
const KNOWN_CYCLES: &[&[&str]] = &[&["hw::pagetable", "hw::psc"]];

fn crate_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join(name)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// One line of a source file as the checks read it.
#[derive(Clone, Debug, PartialEq)]
struct Line {
    /// Line number (from 1).
    n: usize,
    /// The line as written.
    text: String,
    /// Its code: comments removed, the contents of string and char literals blanked (the
    /// quotes stay), `#[cfg(test)]`-gated items removed.
    code: String,
}

/// What a character of a source text is, for [`scan`].
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Code,
    /// Inside a comment (the delimiters included).
    Comment,
    /// Inside a string or char literal (the quotes are code).
    Literal,
}

/// Classify every character of `src`: code, comment or literal content. Line and block
/// comments (nested), strings with escapes, raw strings (`r#"..."#`, `br"..."`), byte
/// strings, char literals (`'{'`, `'\''`, `'\u{7b}'`) and lifetimes (`'a`, code) are told
/// apart.
fn classify(src: &[char]) -> Vec<Kind> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut kinds = vec![Kind::Code; src.len()];
    let mut i = 0;
    while i < src.len() {
        let c = src[i];
        let next = src.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < src.len() && src[i] != '\n' {
                kinds[i] = Kind::Comment;
                i += 1;
            }
            continue;
        }
        if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < src.len() {
                if src[i] == '/' && src.get(i + 1) == Some(&'*') {
                    depth += 1;
                    kinds[i] = Kind::Comment;
                    kinds[i + 1] = Kind::Comment;
                    i += 2;
                } else if src[i] == '*' && src.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    kinds[i] = Kind::Comment;
                    kinds[i + 1] = Kind::Comment;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    kinds[i] = Kind::Comment;
                    i += 1;
                }
            }
            continue;
        }
        // A raw string: `r`, `br` (not the end of an identifier), hashes, a quote.
        let starts_word = i == 0 || !ident(src[i - 1]);
        let raw_at = if c == 'r' && starts_word {
            Some(i + 1)
        } else if c == 'b' && next == Some('r') && starts_word {
            Some(i + 2)
        } else {
            None
        };
        if let Some(mut j) = raw_at {
            let mut hashes = 0;
            while src.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if src.get(j) == Some(&'"') {
                // The content runs to a quote followed by as many hashes.
                let mut k = j + 1;
                while k < src.len() && !(src[k] == '"' && (1..=hashes).all(|h| src.get(k + h) == Some(&'#')))
                {
                    kinds[k] = Kind::Literal;
                    k += 1;
                }
                i = k + 1 + hashes;
                continue;
            }
        }
        if c == '"' {
            let mut k = i + 1;
            while k < src.len() && src[k] != '"' {
                kinds[k] = Kind::Literal;
                if src[k] == '\\' && k + 1 < src.len() {
                    kinds[k + 1] = Kind::Literal;
                    k += 1;
                }
                k += 1;
            }
            i = k + 1;
            continue;
        }
        if c == '\'' {
            // A char literal (`'x'`, `'\n'`, `'\u{..}'`), else a lifetime or a label.
            let end = if next == Some('\\') {
                (i + 2..src.len()).find(|&k| src[k] == '\'' && k > i + 2)
            } else if src.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            if let Some(end) = end {
                for k in kinds.iter_mut().take(end).skip(i + 1) {
                    *k = Kind::Literal;
                }
                i = end + 1;
                continue;
            }
        }
        i += 1;
    }
    kinds
}

/// The end (exclusive) of the item that starts at `from` in `code` (comments and literal
/// contents blanked): the first `;` or `,` outside brackets (a `use`, a field, a match arm or
/// a registry line), or the `}` closing the first `{` outside brackets (a module, a function,
/// an `impl`), then a `;` right after it. Angle brackets count as brackets before the first
/// `=` (a field's or a signature's generics; after it, `<` compares), `->` and `=>` not.
fn item_end(code: &[char], from: usize) -> usize {
    let (mut round, mut angle) = (0i32, 0i32);
    let mut generics = true;
    let mut i = from;
    while i < code.len() {
        let c = code[i];
        let prev = if i > from { code[i - 1] } else { ' ' };
        match c {
            '(' | '[' => round += 1,
            ')' | ']' => round -= 1,
            '=' => generics = false,
            '<' if generics => angle += 1,
            '>' if generics && prev != '-' && prev != '=' => angle -= 1,
            ';' | ',' if round == 0 && angle <= 0 => return i + 1,
            '{' if round == 0 => {
                let mut depth = 0;
                while i < code.len() {
                    match code[i] {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
                let mut j = i + 1;
                while j < code.len() && code[j].is_whitespace() {
                    j += 1;
                }
                return if code.get(j) == Some(&';') { j + 1 } else { i + 1 };
            }
            _ => {}
        }
        i += 1;
    }
    code.len()
}

/// `src` with its comments removed and the contents of its literals blanked (newlines kept).
fn code_of(src: &[char]) -> Vec<char> {
    let kinds = classify(src);
    src.iter()
        .zip(&kinds)
        .map(|(&c, &k)| match k {
            Kind::Code => c,
            _ if c == '\n' => '\n',
            _ => ' ',
        })
        .collect()
}

/// Read a source text as the checks do: every line that has code outside the
/// `#[cfg(test)]`-gated items, with that code (see [`Line`]). A gated item is skipped from its
/// attribute to its end ([`item_end`]); what follows it is read again.
fn scan(text: &str) -> Vec<Line> {
    let mut code = code_of(&text.chars().collect::<Vec<_>>());
    let mut i = 0;
    while i < code.len() {
        if code[i] == '#' && code.get(i + 1) == Some(&'[') {
            let close = (i..code.len()).find(|&k| code[k] == ']').unwrap_or(code.len() - 1);
            let attr: String = code[i..=close].iter().filter(|c| !c.is_whitespace()).collect();
            if attr == "#[cfg(test)]" {
                let end = item_end(&code, close + 1);
                for c in &mut code[i..end] {
                    if *c != '\n' {
                        *c = ' ';
                    }
                }
                i = end;
                continue;
            }
        }
        i += 1;
    }
    let code: String = code.into_iter().collect();
    text.lines()
        .zip(code.split('\n'))
        .enumerate()
        .filter(|(_, (_, c))| !c.trim().is_empty())
        .map(|(i, (t, c))| Line { n: i + 1, text: t.to_string(), code: c.trim_end().to_string() })
        .collect()
}

/// The library code of a file ([`scan`]).
fn code_lines(p: &Path) -> Vec<Line> {
    scan(&std::fs::read_to_string(p).unwrap())
}

#[test]
fn scan_skips_exactly_the_test_items() {
    let src = r##"//! Doc { of the module.
use crate::a::B; // a { brace in a comment

const OPEN: char = '{';
const QUOTE: char = '\'';
const S: &str = "}}} // not a comment";
const RAW: &str = r#"a "quoted" } brace"#;

/* a block comment { /* nested } */ still comment } */
fn before<'a>(x: &'a str) -> &'a str {
    x
}

#[cfg(test)]
mod tests {
    fn helper() -> char {
        let s = "{ unbalanced";
        let c = '}';
        // }
        c
    }
}

fn after() -> u32 {
    let b = b"}";
    1
}

#[cfg(test)]
pub mod toy;

#[cfg(test)]
fn test_only<T: Into<u64>>(x: T) -> u64 { x.into() }
pub fn also_after() {}

pub struct Fields {
    pub kept: u32,
    #[cfg(test)]
    pub hidden: std::collections::BTreeMap<u64, u64>,
    pub kept_too: u32,
}
"##;
    let lines = scan(src);
    let kept: Vec<usize> = lines.iter().map(|l| l.n).collect();
    assert_eq!(kept, vec![2, 4, 5, 6, 7, 10, 11, 12, 24, 25, 26, 27, 34, 36, 37, 40, 41]);
    let code = |n: usize| lines.iter().find(|l| l.n == n).unwrap().code.clone();
    assert_eq!(code(2), "use crate::a::B;", "the trailing comment is removed");
    assert_eq!(code(4), "const OPEN: char = ' ';");
    assert_eq!(code(6), format!("const S: &str = \"{}\";", " ".repeat(20)));
    assert_eq!(code(7), "const RAW: &str = r#\"                  \"#;");
    assert_eq!(code(10), "fn before<'a>(x: &'a str) -> &'a str {");
    assert_eq!(code(25), "    let b = b\" \";");
    assert_eq!(code(34), "pub fn also_after() {}");
    assert_eq!(code(40), "    pub kept_too: u32,");
    assert_eq!(lines.iter().find(|l| l.n == 2).unwrap().text, "use crate::a::B; // a { brace in a comment");
}

/// A module of `tierlab-sim`: its path below the crate root (`["agents", "telemetry"]`) and
/// its file.
struct Module {
    path: Vec<String>,
    file: PathBuf,
}

/// The crate's modules with a file, from `lib.rs` through their `mod name;` declarations
/// (`name.rs` or `name/mod.rs`, or a `#[path]`); test-gated declarations included (their
/// files' code is read like any other).
fn modules(src: &Path) -> Vec<Module> {
    let mut out = Vec::new();
    let mut todo = vec![(Vec::<String>::new(), src.join("lib.rs"))];
    while let Some((path, file)) = todo.pop() {
        let text = std::fs::read_to_string(&file).unwrap();
        let code: String = code_of(&text.chars().collect::<Vec<_>>()).into_iter().collect();
        let name = file.file_name().unwrap().to_string_lossy();
        let dir = if name == "mod.rs" || name == "lib.rs" {
            file.parent().unwrap().to_path_buf()
        } else {
            file.with_extension("")
        };
        for (n, line) in code.lines().enumerate() {
            let words: Vec<&str> =
                line.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ';')).collect();
            let Some(k) = words.iter().position(|w| *w == "mod") else { continue };
            let Some(child) = words.get(k + 1).and_then(|w| w.strip_suffix(';')) else { continue };
            // A `#[path = "..."]` on the line before names the file, relative to this one's.
            let attr = text.lines().nth(n.wrapping_sub(1)).unwrap_or("").trim();
            let child_file = match attr.strip_prefix("#[path = \"").and_then(|a| a.strip_suffix("\"]")) {
                Some(p) => file.parent().unwrap().join(p),
                None if dir.join(format!("{child}.rs")).exists() => dir.join(format!("{child}.rs")),
                None => dir.join(child).join("mod.rs"),
            };
            let mut child_path = path.clone();
            child_path.push(child.to_string());
            todo.push((child_path, child_file));
        }
        out.push(Module { path, file });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// Where a module uses another: the `use` declarations and the paths in code that start with
/// `crate::`, `super::` or `self::`. Returns (line, the module used: the longest prefix of the
/// path that names a module) for each, relative to the module `at`.
fn module_uses(
    at: &[String],
    lines: &[Line],
    is_module: &dyn Fn(&[String]) -> bool,
) -> Vec<(usize, Vec<String>)> {
    // Tokens: identifiers (with `$crate`), `::` and the punctuation of use trees.
    let mut toks: Vec<(usize, String)> = Vec::new();
    for l in lines {
        let c: Vec<char> = l.code.chars().collect();
        let mut i = 0;
        while i < c.len() {
            if c[i].is_alphanumeric() || c[i] == '_' || c[i] == '$' {
                let s = i;
                i += 1;
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
                let w: String = c[s..i].iter().collect();
                toks.push((l.n, if w == "$crate" { "crate".into() } else { w }));
            } else if c[i] == ':' && c.get(i + 1) == Some(&':') {
                toks.push((l.n, "::".into()));
                i += 2;
            } else {
                if !c[i].is_whitespace() {
                    toks.push((l.n, c[i].to_string()));
                }
                i += 1;
            }
        }
    }
    // A path from its first segment: `crate`, `super`s, `self`, then names.
    let resolve = |segs: &[String]| -> Option<Vec<String>> {
        let mut base: Vec<String> = match segs.first()?.as_str() {
            "crate" => Vec::new(),
            "self" | "super" => at.to_vec(),
            _ => return None,
        };
        let mut k = 0;
        if segs[0] == "crate" || segs[0] == "self" {
            k = 1;
        }
        while segs.get(k).is_some_and(|s| s == "super") {
            base.pop()?;
            k += 1;
        }
        for s in &segs[k..] {
            let mut next = base.clone();
            next.push(s.clone());
            if !is_module(&next) {
                break;
            }
            base = next;
        }
        Some(base)
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i].1 == "use" {
            // A use tree: expand `a::{b::{c, d}, e}` into its paths.
            let line = toks[i].0;
            let mut prefix: Vec<Vec<String>> = vec![Vec::new()];
            let mut cur: Vec<String> = Vec::new();
            let mut paths: Vec<Vec<String>> = Vec::new();
            i += 1;
            while i < toks.len() && toks[i].1 != ";" {
                match toks[i].1.as_str() {
                    "{" => {
                        let mut p = prefix.last().unwrap().clone();
                        p.append(&mut cur);
                        prefix.push(p);
                    }
                    "}" | "," => {
                        if !cur.is_empty() {
                            let mut p = prefix.last().unwrap().clone();
                            p.append(&mut cur);
                            paths.push(p);
                        }
                        if toks[i].1 == "}" {
                            prefix.pop();
                        }
                    }
                    "as" => {
                        // The alias is not part of the path.
                        i += 1;
                    }
                    "::" => {}
                    w => cur.push(w.to_string()),
                }
                i += 1;
            }
            if !cur.is_empty() {
                let mut p = prefix.last().unwrap().clone();
                p.append(&mut cur);
                paths.push(p);
            }
            for p in paths {
                if let Some(t) = resolve(&p) {
                    out.push((line, t));
                }
            }
            continue;
        }
        let first = toks[i].1.as_str();
        let after_path = i > 0 && toks[i - 1].1 == "::";
        if matches!(first, "crate" | "super" | "self")
            && !after_path
            && toks.get(i + 1).is_some_and(|t| t.1 == "::")
        {
            let line = toks[i].0;
            let mut segs = vec![toks[i].1.clone()];
            let mut k = i + 1;
            while k + 1 < toks.len()
                && toks[k].1 == "::"
                && toks[k + 1].1.chars().all(|c| c.is_alphanumeric() || c == '_')
            {
                segs.push(toks[k + 1].1.clone());
                k += 2;
            }
            if let Some(t) = resolve(&segs) {
                out.push((line, t));
            }
            i = k;
            continue;
        }
        i += 1;
    }
    out
}

/// Uses between modules: for each module, the modules it uses and where it first does.
type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// A use between two modules neither of which contains the other, as a use between the two
/// modules below their deepest common ancestor: `agents::telemetry::damon` using
/// `agents::telemetry::regions::Region` is `agents::telemetry::damon ->
/// agents::telemetry::regions`, `agents::tiering::x` using `agents::telemetry::y` is
/// `agents::tiering -> agents::telemetry`. A module using an ancestor or a descendant is no
/// such use (a parent declares and re-exports its children; children use their parent's
/// contract).
fn sibling_edge(from: &[String], to: &[String]) -> Option<(String, String)> {
    let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    if common == from.len() || common == to.len() {
        return None;
    }
    Some((from[..=common].join("::"), to[..=common].join("::")))
}

/// A cycle: the modules in order, the first repeated at the end, each with where it uses the
/// next.
type Cycle = Vec<(String, String)>;

/// The cycles of `graph`: one per strongly connected component of more than one module (the
/// shortest through its first module), with the component's modules.
fn find_cycles(graph: &Graph) -> Vec<(BTreeSet<String>, Cycle)> {
    // Tarjan's strongly connected components.
    struct Tarjan<'a> {
        graph: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        sccs: Vec<Vec<&'a str>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, m: &'a str) {
            let i = self.index.len();
            self.index.insert(m, i);
            self.low.insert(m, i);
            self.stack.push(m);
            self.on_stack.insert(m);
            for t in self.graph.get(m).into_iter().flat_map(|e| e.keys()) {
                let t = t.as_str();
                if !self.index.contains_key(t) {
                    self.visit(t);
                    let l = self.low[m].min(self.low[t]);
                    self.low.insert(m, l);
                } else if self.on_stack.contains(t) {
                    let l = self.low[m].min(self.index[t]);
                    self.low.insert(m, l);
                }
            }
            if self.low[m] == self.index[m] {
                let mut scc = Vec::new();
                while let Some(x) = self.stack.pop() {
                    self.on_stack.remove(x);
                    scc.push(x);
                    if x == m {
                        break;
                    }
                }
                self.sccs.push(scc);
            }
        }
    }
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        sccs: Vec::new(),
    };
    for m in graph.keys() {
        if !t.index.contains_key(m.as_str()) {
            t.visit(m);
        }
    }
    let mut cycles = Vec::new();
    for scc in t.sccs.iter().filter(|c| c.len() > 1) {
        let inside: BTreeSet<&str> = scc.iter().copied().collect();
        let start = *inside.iter().next().unwrap();
        // Breadth first from `start` back to it, inside the component.
        let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        'search: while let Some(m) = queue.pop_front() {
            for n in graph[m].keys().map(String::as_str).filter(|n| inside.contains(n)) {
                if n == start {
                    parent.insert(start, m);
                    break 'search;
                }
                if !parent.contains_key(n) {
                    parent.insert(n, m);
                    queue.push_back(n);
                }
            }
        }
        let mut path = vec![start];
        let mut at = parent[start];
        while at != start {
            path.push(at);
            at = parent[at];
        }
        path.push(start);
        path.reverse();
        cycles.push((
            inside.iter().map(|m| m.to_string()).collect(),
            path.windows(2)
                .map(|w| (w[0].to_string(), graph[w[0]][w[1]].clone()))
                .chain([(start.to_string(), String::new())])
                .collect(),
        ));
    }
    cycles.sort();
    cycles
}

/// The use graph of `modules` (path, code) as [`sibling_edge`]s, each with its first place.
fn use_graph(modules: &[(Vec<String>, String, Vec<Line>)]) -> Graph {
    let paths: BTreeSet<&[String]> = modules.iter().map(|m| m.0.as_slice()).collect();
    let is_module = |p: &[String]| paths.contains(p);
    let mut graph = Graph::new();
    for (path, file, lines) in modules {
        for (n, target) in module_uses(path, lines, &is_module) {
            if let Some((a, b)) = sibling_edge(path, &target) {
                graph.entry(a).or_default().entry(b).or_insert_with(|| format!("{file}:{n}"));
            }
        }
    }
    graph
}

/// The cycles, one paragraph each: the modules, then where each uses the next.
fn cycle_message(cycles: &[(BTreeSet<String>, Cycle)]) -> String {
    let one = |c: &[(String, String)]| {
        let names: Vec<&str> = c.iter().map(|(m, _)| m.as_str()).collect();
        let places: Vec<String> =
            c.windows(2).map(|w| format!("  {} uses {} at {}", w[0].0, w[1].0, w[0].1)).collect();
        format!("module cycle: {}\n{}", names.join(" -> "), places.join("\n"))
    };
    cycles.iter().map(|(_, c)| one(c)).collect::<Vec<_>>().join("\n")
}

#[test]
fn cycles_are_found_at_any_depth() {
    let m = |path: &str, code: &str| {
        let p: Vec<String> = path.split("::").map(String::from).collect();
        (p, format!("{path}.rs"), scan(code))
    };
    let tree = [
        m("agents", "pub mod telemetry;"),
        m("agents::telemetry", "pub mod damos;\npub mod regions;\npub mod damon;"),
        m("agents::telemetry::damos", "pub mod engine;\npub use engine::Damos;"),
        m("agents::telemetry::damos::engine", "use super::super::regions::{Monitor, Region};"),
        m("agents::telemetry::damon", "use super::{damos::Damos, regions::Region};\nuse super::*;"),
        m(
            "agents::telemetry::regions",
            "use crate::agents::Feed;\n#[cfg(test)]\nmod tests { use super::super::damos::Damos; }\n",
        ),
    ];
    assert_eq!(find_cycles(&use_graph(&tree)), Vec::new(), "test code and parents do not count");
    let mut cyclic = tree.to_vec();
    cyclic[5] = m("agents::telemetry::regions", "pub struct R {\n    d: self::super::damos::Damos,\n}\n");
    let c = find_cycles(&use_graph(&cyclic));
    assert_eq!(
        cycle_message(&c),
        "module cycle: agents::telemetry::damos -> agents::telemetry::regions -> agents::telemetry::damos\n  \
         agents::telemetry::damos uses agents::telemetry::regions at agents::telemetry::damos::engine.rs:1\n  \
         agents::telemetry::regions uses agents::telemetry::damos at agents::telemetry::regions.rs:2"
    );
    cyclic[5] = m("agents::telemetry::regions", "fn f() { crate::agents::telemetry::damos::engine::g() }");
    assert_eq!(find_cycles(&use_graph(&cyclic)).len(), 1, "a path in code counts as a use");
}

#[test]
fn modules_form_layers_without_cycles() {
    let src = crate_dir("tierlab-sim").join("src");
    let layer_of: BTreeMap<&str, usize> =
        LAYERS.iter().enumerate().flat_map(|(i, l)| l.iter().map(move |m| (*m, i))).collect();
    let mods = modules(&src);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let declared: BTreeSet<&Path> = mods.iter().map(|m| m.file.as_path()).collect();
    for f in &files {
        assert!(declared.contains(f.as_path()), "{} is no module of the crate", f.display());
    }
    let read: Vec<(Vec<String>, String, Vec<Line>)> = mods
        .iter()
        .map(|m| {
            (m.path.clone(), m.file.strip_prefix(&src).unwrap().display().to_string(), code_lines(&m.file))
        })
        .collect();
    let paths: BTreeSet<&[String]> = read.iter().map(|m| m.0.as_slice()).collect();
    let is_module = |p: &[String]| paths.contains(p);
    let mut problems = Vec::new();
    for (path, file, lines) in &read {
        let Some(top) = path.first() else { continue };
        assert!(
            layer_of.contains_key(top.as_str()),
            "module `{top}` is in no layer: add it to LAYERS and docs/architecture.md"
        );
        for (n, target) in module_uses(path, lines, &is_module) {
            let Some(t) = target.first() else { continue };
            if t != top && layer_of.get(t.as_str()).is_some_and(|&l| l > layer_of[top.as_str()]) {
                problems.push(format!("{file}:{n}: `{top}` uses `{t}`, a higher layer"));
            }
        }
    }
    assert!(problems.is_empty(), "layering violations:\n{}", problems.join("\n"));
    let cycles = find_cycles(&use_graph(&read));
    let known: Vec<BTreeSet<String>> =
        KNOWN_CYCLES.iter().map(|c| c.iter().map(|m| m.to_string()).collect()).collect();
    let (old, new): (Vec<_>, Vec<_>) = cycles.into_iter().partition(|(members, _)| known.contains(members));
    assert!(new.is_empty(), "{}", cycle_message(&new));
    for k in &known {
        assert!(
            old.iter().any(|(members, _)| members == k),
            "{k:?} is no longer a module cycle: remove it from KNOWN_CYCLES"
        );
    }
}

#[test]
fn decision_layers_never_downcast() {
    let src = crate_dir("tierlab-sim").join("src");
    let mut files = Vec::new();
    rust_files(&src.join("agents"), &mut files);
    rust_files(&src.join("os").join("replacement"), &mut files);
    let mut found = Vec::new();
    for f in &files {
        for Line { n, text, code } in code_lines(f) {
            if code.contains("downcast") || code.contains("std::any::Any") || code.contains("dyn Any") {
                found.push(format!("{}:{n}: {}", f.display(), text.trim()));
            }
        }
    }
    assert!(found.is_empty(), "downcasts in the decision layers:\n{}", found.join("\n"));
}

/// Names of the ground truth and of the machine's insides that a decision layer must not use:
/// agents reach the machine only through `agents::MachineView` (`agents/view.rs`, the one
/// file that holds the machine, is allowed the machine's fields but not the truth).
const TRUTH_NAMES: &[&str] = &[
    "crate::truth",
    "GroundTruth",
    "WindowTruth",
    "Coalescer",
    "flush_truth",
    "truth_window_ended",
    "ground_truth",
    "close_window",
    "recycle_window",
    "prefetch_truth",
    "crate::scoring",
    "crate::driver",
];
const INSIDES: &[&str] = &["hw_mut", ".hw.", ".hw(", ".os.", "Hardware", "os::Machine"];

/// The forbidden names (`TRUTH_NAMES`, and `INSIDES` unless `view`) found in `code`.
fn truth_uses(code: &str, view: bool) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = TRUTH_NAMES.iter().copied().filter(|n| code.contains(n)).collect();
    if !view {
        out.extend(INSIDES.iter().copied().filter(|n| code.contains(n)));
    }
    out
}

#[test]
fn the_truth_scan_finds_what_it_must() {
    assert_eq!(truth_uses("let gt = GroundTruth::default();", false), ["GroundTruth"]);
    assert_eq!(truth_uses("ctx.machine.hw_mut().cores[0].clock_ps", false), ["hw_mut"]);
    assert_eq!(truth_uses("self.m.hw.cores[core].clock_ps", true), Vec::<&str>::new());
    assert_eq!(truth_uses("self.m.hw.flush_truth(&mut t)", true), ["flush_truth"]);
    assert!(truth_uses("ctx.machine.core_clock(0)", false).is_empty());
}

/// Decision layers (agents, replacement policies) never name the ground truth or the
/// machine's insides (only through the view); the scan covers every non-test line.
#[test]
fn decision_layers_never_touch_ground_truth() {
    let src = crate_dir("tierlab-sim").join("src");
    let mut files = Vec::new();
    rust_files(&src.join("agents"), &mut files);
    rust_files(&src.join("os").join("replacement"), &mut files);
    let mut found = Vec::new();
    let mut lines = 0;
    for f in &files {
        let view = f.ends_with("agents/view.rs");
        for Line { n, text, code } in code_lines(f) {
            lines += 1;
            for name in truth_uses(&code, view) {
                found.push(format!("{}:{n}: `{name}` in {}", f.display(), text.trim()));
            }
        }
    }
    assert!(lines > 5_000, "the scan read {lines} lines: it must read every non-test line");
    assert!(found.is_empty(), "the decision layers reach past their view:\n{}", found.join("\n"));
}

/// Literals that spell a page size or page arithmetic.
const PAGE_LITERALS: &[&str] =
    &["4096", "4095", ">> 12", "<< 12", "2 << 20", "1 << 21", ">> 21", "<< 21", "0x1000", "2097152"];

#[test]
fn no_page_size_literal_outside_core() {
    let mut files = Vec::new();
    for c in ["tierlab-sim", "tierlab-live", "tierlab-py"] {
        rust_files(&crate_dir(c).join("src"), &mut files);
    }
    let mut found = Vec::new();
    for f in &files {
        for Line { n, text, code } in code_lines(f) {
            // A line may say what a number that looks like a page size is instead.
            if text.contains("// not a page size") {
                continue;
            }
            // Strings (blanked in the code) and identifiers do not count.
            let unquoted = code;
            for lit in PAGE_LITERALS {
                let hit = unquoted.match_indices(lit).any(|(i, _)| {
                    let before = unquoted[..i].chars().next_back();
                    let after = unquoted[i + lit.len()..].chars().next();
                    !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                        && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
                });
                if hit {
                    found.push(format!("{}:{n}: `{lit}` in {}", f.display(), text.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "page-size literals outside tierlab-core:\n{}", found.join("\n"));
}

#[test]
fn live_and_sim_depend_on_core() {
    for c in ["tierlab-live", "tierlab-sim", "tierlab-py"] {
        let toml = std::fs::read_to_string(crate_dir(c).join("Cargo.toml")).unwrap();
        let deps = toml.split("[dependencies]").nth(1).unwrap_or("");
        let deps = deps.split("\n[").next().unwrap_or("");
        assert!(deps.contains("tierlab-core"), "{c} does not depend on tierlab-core");
    }
}
