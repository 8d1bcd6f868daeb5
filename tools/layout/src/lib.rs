//! The workspace's layout rules, read from its sources (`tests/workspace.rs` applies
//! them to every crate): no module imports another that imports it back, file by
//! file and folder by folder, and, where a crate asks for it, no long files.
//!
//! A dependency is any `crate::path` or `super::path` a file names outside comments
//! and unit tests (from `#[cfg(test)] mod` on). Paths are resolved to the longest
//! module they start with; a module's own children are part of it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file below `dir`.
pub fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `src/a/b.rs` -> `a::b`, `src/a/mod.rs` -> `a`, `src/lib.rs` -> ``.
pub fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts.join("::")
}

/// Every path after `crate::` or `super::` in `text`, resolved from module `me`.
pub fn paths(text: &str, me: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (prefix, base) in [("crate::", String::new()), ("super::", parent(me))] {
        let mut rest = text;
        while let Some(i) = rest.find(prefix) {
            let before = rest[..i].chars().last();
            rest = &rest[i + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let p = rest[..end].trim_end_matches(':');
            let full = if base.is_empty() {
                p.to_string()
            } else {
                format!("{base}::{p}")
            };
            out.push(full);
        }
    }
    out
}

fn parent(m: &str) -> String {
    m.rsplit_once("::")
        .map(|(p, _)| p.to_string())
        .unwrap_or_default()
}

/// The longest known module that `path` starts with.
fn resolve(path: &str, modules: &BTreeSet<String>) -> Option<String> {
    let mut p = path.to_string();
    loop {
        if modules.contains(&p) && !p.is_empty() {
            return Some(p);
        }
        match p.rsplit_once("::") {
            Some((head, _)) => p = head.to_string(),
            None => return None,
        }
    }
}

/// A cycle in `graph` (its modules in order, the first repeated at the end), if any.
pub fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(2) => return None,
            Some(1) => {
                let i = stack.iter().position(|s| s == n).unwrap_or(0);
                let mut c = stack[i..].to_vec();
                c.push(n.to_string());
                return Some(c);
            }
            _ => {}
        }
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, g, state, stack) {
                return Some(c);
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if let Some(c) = visit(n, graph, &mut state, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

/// `text` up to its unit-test module (`#[cfg(test)] mod ...`): unit tests may
/// reach anywhere. Other `#[cfg(test)]` items (a test-only method in the middle
/// of a file) are code of the module and stay in.
pub fn without_unit_tests(text: &str) -> &str {
    const MARK: &str = "#[cfg(test)]";
    let mut from = 0;
    while let Some(i) = text[from..].find(MARK) {
        let at = from + i;
        let rest = text[at + MARK.len()..].trim_start();
        if rest.starts_with("mod ") || rest.starts_with("pub(crate) mod ") {
            return &text[..at];
        }
        from = at + MARK.len();
    }
    text
}

/// A module's dependencies, by module path.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// The dependency graphs of the library below `src`: file by file, and folder by
/// folder (a top-level module and everything under it). A binary's `main.rs` is a
/// crate root of its own and is left out.
pub fn graphs(src: &Path) -> (Graph, Graph) {
    let mut files = Vec::new();
    sources(src, &mut files);
    files.retain(|f| !f.ends_with("main.rs"));
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(src, f)).collect();
    let mut by_file = BTreeMap::new();
    let mut by_folder: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let me = module_of(src, f);
        let text = std::fs::read_to_string(f).unwrap_or_default();
        let text = without_unit_tests(&text);
        // Comments name modules without depending on them.
        let text: String = text
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let mut deps = BTreeSet::new();
        for p in paths(&text, &me) {
            if let Some(m) = resolve(&p, &modules) {
                // A module's own children are part of it.
                if m != me && !m.starts_with(&format!("{me}::")) {
                    deps.insert(m);
                }
            }
        }
        let top = |m: &str| m.split("::").next().unwrap_or("").to_string();
        for d in &deps {
            if top(d) != top(&me) && !me.is_empty() {
                by_folder.entry(top(&me)).or_default().insert(top(d));
            }
        }
        by_file.insert(me, deps);
    }
    (by_file, by_folder)
}
