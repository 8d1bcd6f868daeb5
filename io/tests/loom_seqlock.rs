//! Loom model of the stats seqlock (`boundary::seqlock`): a reader racing the
//! writer either gives up or returns one whole publication, never a mix.
//!
//! `RUSTFLAGS="--cfg ergon_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p ergon-io --test loom_seqlock`
#![cfg(ergon_loom)]

use ergon_io::boundary::seqlock::seqlock;
use loom::thread;

#[test]
fn reader_never_sees_a_torn_snapshot() {
    loom::model(|| {
        let (mut w, r) = seqlock::<3>();
        let writer = thread::spawn(move || {
            for i in 1..=2u64 {
                w.publish(&[i, i * 10, i * 100]);
            }
        });
        let mut out = [0; 3];
        for _ in 0..2 {
            if let Some(version) = r.try_read(&mut out) {
                // Publication `version` wrote [v, 10v, 100v]; version 0 is the zeros.
                assert_eq!(out, [version, version * 10, version * 100], "torn");
            }
        }
        writer.join().unwrap();
        // Once the writer is done, a read always succeeds and sees the last one.
        assert_eq!(r.read(&mut out), 2);
        assert_eq!(out, [2, 20, 200]);
    });
}
