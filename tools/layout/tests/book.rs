//! The book (docs/book) and the README cannot rot: every `{{#include}}` names a
//! file that exists and, with an anchor, an anchor that holds code; every relative
//! link and image of a chapter points at a file; every chapter is in SUMMARY.md
//! and every SUMMARY entry is a chapter; the README stays a front door (at most
//! 150 lines), and each of its Rust snippets is, line for line, in a file that
//! `cargo test` compiles. (`mdbook build` only logs a missing include, and
//! includes nothing for a wrong anchor.)

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn chapters() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("docs/book/src"))
        .expect("docs/book/src")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    v.sort();
    v
}

/// `{{#include PATH}}` and `{{#include PATH:ANCHOR}}` in `text`.
fn includes(text: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("{{#include ") {
        rest = &rest[i + "{{#include ".len()..];
        let end = rest.find("}}").expect("an include ends with }}");
        let spec = rest[..end].trim();
        match spec.split_once(':') {
            Some((p, a)) => out.push((p.to_string(), Some(a.to_string()))),
            None => out.push((spec.to_string(), None)),
        }
        rest = &rest[end..];
    }
    out
}

/// Relative link targets `](target)` outside code, without their `#fragment`.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            let Some(end) = rest.find(')') else { break };
            let t = rest[..end].split('#').next().unwrap_or("");
            if !t.is_empty() && !t.contains("://") && !t.starts_with("mailto:") {
                out.push(t.to_string());
            }
            rest = &rest[end..];
        }
    }
    out
}

#[test]
fn every_include_names_a_file_and_an_anchor_that_hold_code() {
    let mut seen = 0;
    for ch in chapters() {
        let text = std::fs::read_to_string(&ch).unwrap();
        for (path, anchor) in includes(&text) {
            seen += 1;
            let file = ch.parent().unwrap().join(&path);
            let src = std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("{}: {{{{#include {path}}}}}: {e}", ch.display()));
            let Some(a) = anchor else { continue };
            let (start, end) = (format!("ANCHOR: {a}\n"), format!("ANCHOR_END: {a}"));
            let body = src
                .split_once(&start)
                .and_then(|(_, rest)| rest.split_once(&end))
                .map(|(body, _)| body)
                .unwrap_or_else(|| panic!("{}: no anchor {a:?} in {path}", ch.display()));
            assert!(
                body.lines().filter(|l| !l.trim().is_empty()).count() > 2,
                "{}: anchor {a:?} of {path} holds no code",
                ch.display()
            );
        }
    }
    assert!(seen >= 8, "found the book's includes ({seen})");
}

#[test]
fn every_relative_link_points_at_a_file() {
    for ch in chapters() {
        let text = std::fs::read_to_string(&ch).unwrap();
        for t in links(&text) {
            let target = ch.parent().unwrap().join(&t);
            assert!(
                target.exists(),
                "{}: link to {t}: no such file",
                ch.display()
            );
        }
    }
}

#[test]
fn summary_and_chapters_agree() {
    let summary = std::fs::read_to_string(root().join("docs/book/src/SUMMARY.md")).unwrap();
    let listed = links(&summary);
    for ch in chapters() {
        let name = ch.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name == "SUMMARY.md" || listed.contains(&name),
            "{name} is not in SUMMARY.md"
        );
    }
    for l in &listed {
        assert!(
            root().join("docs/book/src").join(l).exists(),
            "SUMMARY.md lists {l}: no such chapter"
        );
    }
}

#[test]
fn the_readme_is_a_front_door_whose_snippets_compile() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let n = readme.lines().count();
    assert!(
        n <= 150,
        "README.md has {n} lines: move the detail into docs/book"
    );
    // Each ```rust block, line for line (trimmed), in a compiled example.
    let compiled: String = [
        "examples/quoter.rs",
        "examples/quoter_core/mod.rs",
        "docs/book/snippets/budget.rs",
        "docs/book/snippets/venue.rs",
    ]
    .iter()
    .map(|f| std::fs::read_to_string(root().join(f)).unwrap())
    .collect();
    let compiled: Vec<&str> = compiled.lines().map(str::trim).collect();
    let mut blocks = 0;
    let mut rest = readme.as_str();
    while let Some(i) = rest.find("```rust") {
        rest = &rest[i..];
        let body_at = rest.find('\n').unwrap() + 1;
        let end = rest[body_at..].find("```").expect("a closed block") + body_at;
        let lines: Vec<&str> = rest[body_at..end].lines().map(str::trim).collect();
        let found = compiled.windows(lines.len()).any(|w| w == lines.as_slice());
        assert!(
            found,
            "a README snippet is not in a compiled file:\n{}",
            lines.join("\n")
        );
        blocks += 1;
        rest = &rest[end + 3..];
    }
    assert!(blocks >= 1, "the README shows one short example");
}
