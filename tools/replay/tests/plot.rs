//! `--plot OUT.svg|OUT.html [--compare FILE] [--by-label]`: a picture of what the
//! budget did, written besides the unchanged output lines.

mod common;

use std::fs;
use std::path::PathBuf;

use common::{example, lines, replay, scratch, stderr};

fn shipped() -> (String, String) {
    let path = |n| example(n).to_str().expect("path").to_owned();
    (path("binance-spot.jsonl"), path("binance-spot-tight.jsonl"))
}

#[test]
fn the_picture_changes_nothing_in_the_output() {
    let (trace, tight) = shipped();
    let plain = replay(&[&trace], "");
    let svg = scratch("same.svg");
    let svg = svg.to_str().expect("path");
    let drawn = replay(
        &["--plot", svg, "--compare", &tight, "--by-label", &trace],
        "",
    );
    assert!(drawn.status.success(), "{}", stderr(&drawn));
    assert_eq!(plain.stdout, drawn.stdout, "the same lines, byte for byte");
    assert!(drawn.stderr.is_empty(), "{}", stderr(&drawn));
}

#[test]
fn the_svg_draws_each_bucket_with_its_refusals_and_the_compare() {
    let (trace, tight) = shipped();
    let path = scratch("compare.svg");
    let out = replay(
        &[
            "--plot",
            path.to_str().expect("path"),
            "--compare",
            &tight,
            &trace,
        ],
        "",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let summary = lines(&out).pop().expect("summary")["summary"].take();
    let svg = fs::read_to_string(&path).expect("picture written");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    let tight_out = replay(&["--config", &tight, &trace], "");
    let tight_summary = lines(&tight_out).pop().expect("summary")["summary"].take();
    for (name, bucket) in summary["buckets"].as_object().expect("buckets") {
        let refused = |b: &serde_json::Value| {
            let r = &b["refusals"];
            ["full", "held", "halted", "too_big"]
                .iter()
                .map(|w| r[*w].as_u64().unwrap())
                .sum::<u64>()
        };
        assert!(svg.contains(&format!("{name}  (")), "a panel for {name}");
        if name == "ip" {
            continue;
        }
        // The caption counts what the summary counts, for both replays.
        let caption = format!("{} refused; compare: peak", refused(bucket));
        assert!(svg.contains(&caption), "{name}: {caption:?}");
        let compare = format!("{} refused)", refused(&tight_summary["buckets"][name]));
        assert!(svg.contains(&compare), "{name}: {compare:?}");
    }
    for key in [
        "refused: full",
        "refused: held",
        "held (throttle)",
        "throttle (venue)",
        "use (compare)",
        "compare: 4000 / 3800 / 3000",
        "normal up to 5700",
        "bulk up to 4500",
    ] {
        assert!(svg.contains(key), "the legend has {key:?}");
    }
}

#[test]
fn by_label_stacks_the_use_of_each_label() {
    let (trace, _) = shipped();
    let path = scratch("labels.svg");
    let out = replay(
        &["--plot", path.to_str().expect("path"), "--by-label", &trace],
        "",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let svg = fs::read_to_string(&path).expect("picture written");
    for label in ["trade:quote", "mon:book", "trade:close"] {
        assert!(svg.contains(label), "a legend entry for {label}");
    }
    let plain = scratch("no-labels.svg");
    replay(&["--plot", plain.to_str().expect("path"), &trace], "");
    let plain = fs::read_to_string(&plain).expect("picture written");
    assert!(!plain.contains("mon:book"), "labels only with --by-label");
}

#[test]
fn holds_halts_and_bans_are_drawn() {
    let trace = r#"{"bucket":"weight","kind":"sliding","limit":3,"window_ms":1000,"slots":10}
{"bucket":"ip","kind":"gate"}
{"t":0,"charge":"a","parts":{"weight":1,"ip":0}}
{"t":1000,"throttled":"weight","wait_ms":200}
{"t":2000,"charge":"b","parts":{"weight":1}}
{"t":300000000,"banned":"ip"}
{"t":400000000,"charge":"c","parts":{"ip":0}}
{"t":500000000,"clear_halt":"ip"}
{"t":600000000,"charge":"d","parts":{"weight":9}}
"#;
    let path = scratch("bands.html");
    let out = replay(&["--plot", path.to_str().expect("path")], trace);
    assert!(out.status.success(), "{}", stderr(&out));
    let html = fs::read_to_string(&path).expect("picture written");
    for key in [
        "held (throttle)",
        "halted (ban)",
        "ban (venue)",
        "refused: held",
        "refused: halted",
        "refused: too big",
    ] {
        assert!(html.contains(key), "{key:?} drawn");
    }
    // Self-contained: the SVG inline, nothing to fetch.
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<svg"));
    let outside: Vec<&str> = html
        .match_indices("http")
        .map(|(i, _)| &html[i..(i + 30).min(html.len())])
        .filter(|u| !u.starts_with("http://www.w3.org/2000/svg"))
        .collect();
    assert!(
        outside.is_empty(),
        "no address but the SVG namespace: {outside:?}"
    );
    assert!(!html.contains("<script") && !html.contains("<link") && !html.contains("<img"));
}

#[test]
fn a_failed_replay_leaves_no_picture_and_bad_flags_are_exit_2() {
    let path = scratch("failed.svg");
    let out = replay(
        &["--plot", path.to_str().expect("path")],
        "{\"t\":1,\"tick\":true}\n",
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(!path.exists(), "no half picture");
    for args in [
        &["--compare", "x.jsonl"][..],
        &["--by-label"],
        &["--plot", "out.png"],
        &["--plot"],
        &["--progress-ms", "soon"],
        &["--colour"],
        &["a.jsonl", "b.jsonl"],
    ] {
        let out = replay(args, "");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("usage:"), "{args:?} prints the usage");
    }
    let out = replay(&["--plot", "/nonexistent/dir/out.svg"], "");
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unwritable picture, before replaying"
    );
}

#[test]
fn help_documents_every_flag() {
    let out = replay(&["--help"], "");
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).expect("utf-8");
    for flag in [
        "--config FILE",
        "--plot OUT",
        "--compare FILE",
        "--by-label",
        "--progress-ms N",
        "-h, --help",
        "interval_ms",
        "label",
    ] {
        assert!(help.contains(flag), "--help documents {flag}");
    }
}

#[test]
fn the_committed_picture_is_what_the_readme_command_draws() {
    let (trace, tight) = shipped();
    let path = scratch("readme.svg");
    let args = [
        "--plot",
        path.to_str().expect("path"),
        "--compare",
        &tight,
        "--by-label",
        &trace,
    ];
    let out = replay(&args, "");
    assert!(out.status.success(), "{}", stderr(&out));
    let drawn = fs::read_to_string(&path).expect("picture written");
    let book =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/book/src/img/binance-spot.svg");
    let committed = fs::read_to_string(book).expect("committed picture");
    assert!(
        drawn == committed,
        "docs/book/src/img/binance-spot.svg is stale: rerun the book's --plot command (replay.md)"
    );
}
