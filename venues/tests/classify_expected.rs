//! The classify binary answers every shipped fixture as it did when the adapters
//! became a crate: `fixtures/expected.txt` is the output of `cargo run -p
//! ergon-venues` at that commit. Every one of its lines comes back, in order; lines
//! it lacks are either a batch's per-item lines (`  item N ...`) or fixtures added
//! since.

use std::process::Command;

#[test]
fn every_shipped_fixture_answers_as_before() {
    let expected = include_str!("fixtures/expected.txt");
    let out = Command::new(env!("CARGO_BIN_EXE_ergon-venues"))
        .output()
        .expect("the binary runs");
    assert!(out.status.success(), "exit {:?}", out.status);
    let text = String::from_utf8(out.stdout).expect("UTF-8 output");
    let now: Vec<&str> = text.lines().collect();
    let mut at = 0;
    for want in expected.lines() {
        let name = want.split(' ').next().unwrap_or(want);
        let found = now[at..]
            .iter()
            .position(|l| l.split(' ').next() == Some(name))
            .unwrap_or_else(|| panic!("{name}: no line in today's output"));
        assert_eq!(now[at + found], want, "{name} answers differently");
        at += found + 1;
    }
    assert!(expected.lines().count() >= 69, "the expected file is whole");
}
