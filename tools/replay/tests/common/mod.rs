//! What the newer test files share: run `ergon-replay` as a user runs it, a real
//! process with arguments and a trace on stdin, and read its JSON lines.

#![allow(dead_code)] // each test file uses its own subset

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// Runs `ergon-replay ARGS` with `stdin` as its standard input.
pub fn replay(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ergon-replay"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ergon-replay starts");
    let mut input = child.stdin.take().expect("stdin is piped");
    let stdin = stdin.to_owned();
    // Written from a thread: a long trace's output fills the stdout pipe before the
    // whole trace is in. A replay that stops at a bad line closes stdin early: a
    // broken pipe is fine.
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(stdin.as_bytes());
    });
    let out = child.wait_with_output().expect("ergon-replay ends");
    writer.join().expect("the writer thread ends");
    out
}

/// The JSON lines of stdout.
pub fn lines(out: &Output) -> Vec<Value> {
    String::from_utf8(out.stdout.clone())
        .expect("utf-8 output")
        .lines()
        .map(|l| serde_json::from_str(l).expect("every output line is JSON"))
        .collect()
}

/// Standard error, as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts exit status 1 and an error naming `line` (with `prefix` before "line",
/// e.g. a file name) and containing `needle`.
pub fn fails_at(out: &Output, line: usize, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "a bad line is exit 1: {err}");
    assert!(
        err.contains(&format!("line {line}:")) && err.contains(needle),
        "stderr {err:?} should name line {line} and say {needle:?}"
    );
}

/// A file of the repository's `examples/traces/`.
pub fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/traces")
        .join(name)
}

/// A scratch file path unique to this test process and `name`.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ergon-replay-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir.join(name)
}
