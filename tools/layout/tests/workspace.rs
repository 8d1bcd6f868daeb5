//! The layout rules on every library of the workspace: no module imports another
//! that imports it back, file by file and folder by folder (ergon-io's pool,
//! transports and event loop used to call each other in a circle: issue 14), no
//! emulator source file over 800 lines, and no source file of any crate over
//! 1,000 (issue 42: a file is read in one sitting).

use std::path::{Path, PathBuf};

use ergon_layout::{cycle, graphs, paths, sources, Graph};

/// Crates by folder, each with a dependency the reader must see (proof it read them).
const CRATES: [(&str, &str, &str); 9] = [
    ("core", "budget::charge", "budget"),
    ("lease", "thread", "store"),
    ("venues", "binance_spot", "adapt"),
    ("io", "transport", "pool"),
    ("gateway", "machine", "ledger"),
    ("tools/gatewayd", "shm::hub", "shm::journal"),
    ("tools/replay", "replay", "trace"),
    ("tools/sim", "run", "check"),
    ("tools/venue-sim", "server::http_conn", "engine::state"),
];

const EMULATOR_MAX_LINES: usize = 800;
const MAX_LINES: usize = 1_000;

/// Every package's sources: the workspace's members and the projects outside it.
const ALL_SRC: [&str; 14] = [
    "src",
    "core/src",
    "venues/src",
    "io/src",
    "gateway/src",
    "lease/src",
    "tools/gatewayd/src",
    "tools/replay/src",
    "tools/sim/src",
    "tools/venue-sim/src",
    "tools/cpucheck/src",
    "tools/layout/src",
    "io/benches/src",
    "io/client-bench/src",
];

fn src(krate: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(krate)
        .join("src")
}

fn no_cycle(krate: &str, g: &Graph, what: &str) {
    assert_eq!(cycle(g), None, "{krate}: a cycle between {what}");
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    for (krate, from, to) in CRATES {
        let (files, folders) = graphs(&src(krate));
        assert!(
            files.get(from).is_some_and(|d| d.contains(to)),
            "{krate}: the reader sees {from} -> {to}: {:?}",
            files.get(from)
        );
        no_cycle(krate, &files, "files");
        no_cycle(krate, &folders, "folders");
    }
}

#[test]
fn no_emulator_source_file_is_longer_than_800_lines() {
    let mut files = Vec::new();
    sources(&src("tools/venue-sim"), &mut files);
    assert!(files.len() > 15, "found the emulator's sources");
    for f in files {
        let n = std::fs::read_to_string(&f).unwrap().lines().count();
        assert!(n <= EMULATOR_MAX_LINES, "{} has {n} lines", f.display());
    }
}

#[test]
fn no_source_file_is_longer_than_1000_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in ALL_SRC {
        let before = files.len();
        sources(&root.join(dir), &mut files);
        assert!(files.len() > before, "found the sources of {dir}");
    }
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n > MAX_LINES).then(|| format!("{} has {n} lines", f.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "split along the concepts inside: {long:#?}"
    );
}

#[test]
fn the_cycle_finder_finds_one() {
    let mut g = Graph::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("a".into());
    assert!(cycle(&g).is_some());
    g.remove("b");
    assert_eq!(cycle(&g), None);
    assert_eq!(
        paths("use super::x::Y; // crate::z", "p::q"),
        vec!["z".to_string(), "p::x::Y".to_string()]
    );
}

#[test]
fn only_the_unit_test_module_is_cut_off() {
    let text = "use crate::a;\n#[cfg(test)]\nfn adopt() { crate::b::x(); }\nuse crate::c;\n#[cfg(test)]\nmod tests {\n use crate::d;\n}\n";
    let kept = ergon_layout::without_unit_tests(text);
    assert!(
        kept.contains("crate::b") && kept.contains("crate::c"),
        "{kept}"
    );
    assert!(!kept.contains("crate::d"), "{kept}");
    assert_eq!(
        ergon_layout::without_unit_tests("use crate::a;"),
        "use crate::a;"
    );
}
