//! The architecture's rules, checked on the sources (see `docs/architecture.md`):
//! - the top-level modules of `tierlab-sim` form layers that only call downward (so the
//!   module graph has no cycle);
//! - the decision layers (agents, replacement policies) never downcast;
//! - no page-size literal outside `tierlab-core` (page sizes and page arithmetic are spelled
//!   through core's names);
//! - `tierlab-live` and `tierlab-sim` depend on `tierlab-core`.
//!
//! Test code (everything after a file's `#[cfg(test)]`) and comments are not checked.

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

/// The library code of a file: up to its `#[cfg(test)]`, comment lines and trailing
/// comments removed.
fn code_lines(p: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(p).unwrap();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        out.push((i + 1, line.to_string()));
    }
    out
}

/// Top-level module of a source file of `tierlab-sim/src`.
fn module_of(src: &Path, p: &Path) -> String {
    let rel = p.strip_prefix(src).unwrap();
    let first = rel.components().next().unwrap().as_os_str().to_string_lossy().to_string();
    first.trim_end_matches(".rs").to_string()
}

#[test]
fn modules_form_layers_without_cycles() {
    let src = crate_dir("tierlab-sim").join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let layer_of: BTreeMap<&str, usize> =
        LAYERS.iter().enumerate().flat_map(|(i, l)| l.iter().map(move |m| (*m, i))).collect();
    let mut uses: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut problems = Vec::new();
    for f in &files {
        let m = module_of(&src, f);
        if m == "lib" {
            continue;
        }
        assert!(
            layer_of.contains_key(m.as_str()),
            "module `{m}` is in no layer: add it to LAYERS and docs/architecture.md"
        );
        for (n, line) in code_lines(f) {
            let code = line.split("//").next().unwrap_or("");
            for (i, _) in code.match_indices("crate::") {
                let rest = &code[i + "crate::".len()..];
                let target: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if target.is_empty() || target == m || !layer_of.contains_key(target.as_str()) {
                    continue;
                }
                if layer_of[target.as_str()] > layer_of[m.as_str()] {
                    problems.push(format!("{}:{n}: `{m}` uses `{target}`, a higher layer", f.display()));
                }
                uses.entry(m.clone()).or_default().insert(target);
            }
        }
    }
    assert!(problems.is_empty(), "layering violations:\n{}", problems.join("\n"));
    // Within a layer: no cycle (depth-first search over the graph).
    fn visit(
        m: &str,
        uses: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(m) {
            Some(1) => {
                let i = path.iter().position(|x| x == m).unwrap();
                let mut cycle = path[i..].to_vec();
                cycle.push(m.to_string());
                return Some(cycle);
            }
            Some(2) => return None,
            _ => {}
        }
        state.insert(m.to_string(), 1);
        path.push(m.to_string());
        for t in uses.get(m).into_iter().flatten() {
            if let Some(c) = visit(t, uses, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(m.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in uses.keys() {
        if let Some(c) = visit(m, &uses, &mut state, &mut Vec::new()) {
            panic!("module cycle: {}", c.join(" -> "));
        }
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
        for (n, line) in code_lines(f) {
            if line.contains("downcast") || line.contains("std::any::Any") || line.contains("dyn Any") {
                found.push(format!("{}:{n}: {}", f.display(), line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "downcasts in the decision layers:\n{}", found.join("\n"));
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
        for (n, line) in code_lines(f) {
            // A line may say what a number that looks like a page size is instead.
            if line.contains("// not a page size") {
                continue;
            }
            let code = line.split("//").next().unwrap_or("");
            // Strings and identifiers do not count: look at the code between quotes.
            let unquoted: String = code.split('"').step_by(2).collect::<Vec<_>>().join(" ");
            for lit in PAGE_LITERALS {
                let hit = unquoted.match_indices(lit).any(|(i, _)| {
                    let before = unquoted[..i].chars().next_back();
                    let after = unquoted[i + lit.len()..].chars().next();
                    !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                        && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
                });
                if hit {
                    found.push(format!("{}:{n}: `{lit}` in {}", f.display(), line.trim()));
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
