//! The classify binary answers every shipped fixture as it did when the adapters
//! became a crate: `fixtures/expected.txt` is the output of `cargo run -p
//! ergon-venues` at that commit. Every one of its lines comes back, in order; lines
//! it lacks are either a batch's per-item lines (`  item N ...`) or fixtures added
//! since.
//!
//! One change is by design (issue 12 item 3): a hold for a server's wait now adds
//! ergon-core's default hold guard ([`DEFAULT_HOLD_GUARD_NS`], 50 ms), so a
//! `Throttled` line may end exactly that much later; verdict, bucket and every other
//! word stay the same.
//!
//! Two lines changed by design (issue 39, item 1): the cancel-replace answers
//! -2022 and -2021 whose `data` says each part's fate are `Done` with their parts
//! as items (`item 0` the new order, `item 1` the cancel), where they said `NotRun`
//! and `Unknown` for the request as a whole.

use std::process::Command;

use ergon_core::DEFAULT_HOLD_GUARD_NS;

/// `line` as expected, or a Throttled line later by the hold guard alone.
fn same(now: &str, want: &str) -> bool {
    if now == want {
        return true;
    }
    let split = |l: &str| -> Option<(String, i64, String)> {
        let at = l.find("Throttled ")?;
        let u = l.find("until_ms=")? + "until_ms=".len();
        let digits: String = l[u..].chars().take_while(char::is_ascii_digit).collect();
        let rest = l[u + digits.len()..].to_string();
        Some((l[..u].to_string(), digits.parse().ok()?, rest)).filter(|_| at < u)
    };
    match (split(now), split(want)) {
        (Some((a, n, r)), Some((b, w, q))) => {
            a == b && r == q && n == w + DEFAULT_HOLD_GUARD_NS / 1_000_000
        }
        _ => false,
    }
}

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
        assert!(
            same(now[at + found], want),
            "{name} answers differently:\n now  {}\n was  {want}",
            now[at + found]
        );
        at += found + 1;
    }
    assert!(expected.lines().count() >= 69, "the expected file is whole");
    // The tolerance is the guard and nothing else.
    let was = "v/c [order]: Throttled bucket=W until_ms=37000";
    assert!(same("v/c [order]: Throttled bucket=W until_ms=37050", was));
    assert!(!same("v/c [order]: Throttled bucket=W until_ms=37049", was));
    assert!(!same("v/c [order]: Throttled bucket=X until_ms=37050", was));
}
