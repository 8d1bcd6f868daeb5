//! Loom model of the hand-off's seqlock: whatever the interleaving and the memory
//! orderings allow, a reader sees either no post or one whole post, never a limit
//! with another post's deadline, and never an older post after a newer one.
//!
//! `RUSTFLAGS="--cfg ergon_loom" CARGO_TARGET_DIR=target/loom \
//!  cargo test --release -p ergon-lease --test loom_handoff`
#![cfg(ergon_loom)]

use ergon_lease::Shared;

#[test]
fn a_reader_sees_whole_posts_in_order() {
    loom::model(|| {
        let shared = Shared::new(1, std::time::Instant::now());
        let writer = {
            let shared = shared.clone();
            loom::thread::spawn(move || {
                shared.post(10, 10_000);
                shared.post(20, 20_000);
            })
        };
        let mut last = 0;
        for _ in 0..2 {
            if let Some((seq, limit, deadline)) = shared.last_post() {
                if seq > 0 {
                    assert_eq!(deadline, limit as i64 * 1000, "a torn post");
                    assert!(seq >= last, "an older post after a newer one");
                    last = seq;
                }
            }
        }
        writer.join().unwrap();
        assert_eq!(shared.last_post(), Some((4, 20, 20_000)));
    });
}
