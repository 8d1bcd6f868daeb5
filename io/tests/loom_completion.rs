//! Loom model of a request's round trip through the boundary: the submitter takes
//! a credit, submits into the ring, the loop takes the request and delivers the
//! answer into the submitter's mailbox. Every request is answered exactly once, a
//! delivery never finds the mailbox full, and the credits come back. Both rings
//! wrap around during the race.
//!
//! Attempts start with a `yield_now` so loom also tries the other thread first
//! (its DPOR alone misses some load-then-store orders; see `loom_ring.rs`).
//!
//! `RUSTFLAGS="--cfg ergon_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p ergon-io --test loom_completion`
#![cfg(ergon_loom)]

use ergon_io::boundary::mailbox::{mailbox, Credit, Inbox, Outbox};
use ergon_io::boundary::ring::{bounded, Consumer, Producer};
use loom::thread;

struct Req {
    id: u32,
    credit: Credit,
}

/// Takes every request waiting (at most `max`), answering each with `id * 100`.
fn serve(rx: &mut Consumer<Req>, outbox: &Outbox<u32>, max: usize) -> usize {
    let mut served = 0;
    while served < max {
        thread::yield_now();
        let Some(req) = rx.pop() else { break };
        assert!(
            outbox.deliver(req.credit, req.id * 100).is_ok(),
            "a delivery found the mailbox full"
        );
        served += 1;
    }
    served
}

fn submit(tx: &Producer<Req>, inbox: &mut Inbox<u32>, id: u32) {
    let credit = inbox
        .reserve()
        .expect("a credit while answers are owed < capacity");
    assert!(tx.push(Req { id, credit }).is_ok(), "room was there");
}

#[test]
fn each_request_answered_exactly_once() {
    loom::model(|| {
        let (tx, mut rx) = bounded::<Req>(2).unwrap();
        let (outbox, mut inbox) = mailbox::<u32>(2).unwrap();
        // One round trip first, so the next two cross both rings' wrap-around.
        submit(&tx, &mut inbox, 0);
        assert_eq!(serve(&mut rx, &outbox, 1), 1);
        assert_eq!(inbox.pop(), Some(0));

        let lp = thread::spawn(move || {
            let served = serve(&mut rx, &outbox, 2);
            (rx, outbox, served)
        });
        submit(&tx, &mut inbox, 1);
        submit(&tx, &mut inbox, 2);
        assert!(inbox.reserve().is_none(), "more credits than mailbox slots");
        thread::yield_now();
        let mut answers: Vec<u32> = inbox.pop().into_iter().collect();
        let (mut rx, outbox, served) = lp.join().unwrap();
        // The loop's next turns, after the race.
        serve(&mut rx, &outbox, 2 - served);
        answers.extend(std::iter::from_fn(|| inbox.pop()));
        assert_eq!(answers, [100, 200], "lost, duplicated or reordered");
        assert_eq!(inbox.outstanding(), 0);
        assert!(rx.pop().is_none());
    });
}

#[test]
fn two_submitters_each_get_their_own_answer_once() {
    loom::model(|| {
        let (tx, mut rx) = bounded::<(usize, Req)>(2).unwrap();
        let (out_a, in_a) = mailbox::<u32>(2).unwrap();
        let (out_b, in_b) = mailbox::<u32>(2).unwrap();
        let submitter = |tx: Producer<(usize, Req)>, mut inbox: Inbox<u32>, who: usize| {
            thread::spawn(move || {
                let credit = inbox.reserve().unwrap();
                let id = who as u32 + 1;
                assert!(tx.push((who, Req { id, credit })).is_ok());
                thread::yield_now();
                let early = inbox.pop();
                (inbox, early)
            })
        };
        let a = submitter(tx.clone(), in_a, 0);
        let b = submitter(tx, in_b, 1);
        let outboxes = [out_a, out_b];
        let mut served = 0;
        // The loop: a bounded number of turns now, the rest after the joins.
        for _ in 0..2 {
            thread::yield_now();
            if let Some((who, req)) = rx.pop() {
                assert!(outboxes[who].deliver(req.credit, req.id * 100).is_ok());
                served += 1;
            }
        }
        let (mut in_a, early_a) = a.join().unwrap();
        let (mut in_b, early_b) = b.join().unwrap();
        while let Some((who, req)) = rx.pop() {
            assert!(outboxes[who].deliver(req.credit, req.id * 100).is_ok());
            served += 1;
        }
        assert_eq!(served, 2, "a request served twice or never");
        let got_a: Vec<u32> = early_a.into_iter().chain(in_a.pop()).collect();
        let got_b: Vec<u32> = early_b.into_iter().chain(in_b.pop()).collect();
        assert_eq!(got_a, [100], "submitter A's answers");
        assert_eq!(got_b, [200], "submitter B's answers");
        assert_eq!((in_a.outstanding(), in_b.outstanding()), (0, 0));
    });
}
