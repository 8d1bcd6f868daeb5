//! The `Handle`'s contract: refusals are immediate and change nothing, queued
//! requests are answered even when the loop shuts down, and a `Settle` hook reads
//! each response on the loop thread before the answer goes back.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::server::Server;
use ergon_io::boundary::handle::{Outcome, Refusal, SubmitError, MAX_REQUEST_HEADERS};
use ergon_io::boundary::service::Settle;
use ergon_io::boundary::{build, BoundaryConfig, BuildError};
use ergon_io::client::PoolConfig;
use ergon_io::clock;
use ergon_io::core::{BucketId, Budget, Class, Part, Spec, MAX_PARTS};
use ergon_io::event_loop::{EventLoop, LoopConfig};
use ergon_io::http::Request;
use ergon_venues::response::Response;

fn budget() -> (Budget, BucketId) {
    let mut b = Budget::builder();
    let w = b
        .add("weight", Spec::sliding(1200, 60_000_000_000, 60))
        .unwrap();
    (b.build(clock::now_ns()).unwrap(), w)
}

#[test]
fn handles_and_the_service_move_to_their_threads() {
    fn send<T: Send>() {}
    send::<ergon_io::boundary::handle::Handle>();
    send::<ergon_io::boundary::service::Service>();
    send::<ergon_io::boundary::service::Stopper>();
    send::<ergon_io::boundary::stats::StatsReader>();
}

#[test]
fn bad_configurations_are_refused() {
    let bad = |cfg: BoundaryConfig| build(cfg).unwrap_err();
    assert_eq!(
        bad(BoundaryConfig {
            handles: 0,
            ..BoundaryConfig::default()
        }),
        BuildError::Handles(0)
    );
    assert_eq!(
        bad(BoundaryConfig {
            per_turn: 0,
            ..BoundaryConfig::default()
        }),
        BuildError::PerTurn
    );
    assert!(matches!(
        bad(BoundaryConfig {
            queue: 3,
            ..BoundaryConfig::default()
        }),
        BuildError::Capacity(_)
    ));
    assert!(matches!(
        bad(BoundaryConfig {
            per_handle: 1,
            ..BoundaryConfig::default()
        }),
        BuildError::Capacity(_)
    ));
}

#[test]
fn refusals_are_immediate_and_queued_requests_are_answered_at_shutdown() {
    let (budget, w) = budget();
    let (mut service, mut handles, _stats, stopper) = build(BoundaryConfig {
        handles: 2,
        queue: 2,
        per_handle: 2,
        max_request: 64,
        ..BoundaryConfig::default()
    })
    .unwrap();
    let mut lp = EventLoop::new(LoopConfig::default(), budget).unwrap();
    let pool = lp
        .add_pool(PoolConfig::new("127.0.0.1:9".parse().unwrap(), "x"))
        .unwrap();
    let parts = [Part::new(w, 1)];
    let req = Request::get("/a");
    let far = clock::now_ns() + 60_000_000_000;
    let (h1, rest) = handles.split_at_mut(1);
    let (h0, h1) = (&mut h1[0], &mut rest[0]);

    let a = h0.submit(pool, &req, &parts, Class::Normal, far).unwrap();
    let b = h0.submit(pool, &req, &parts, Class::Normal, far).unwrap();
    assert_ne!(a, b);
    // h0 is owed two answers, its mailbox holds two.
    assert_eq!(
        h0.submit(pool, &req, &parts, Class::Normal, far),
        Err(SubmitError::Outstanding)
    );
    // The queue (2 slots) is full: h1 is told at once.
    assert_eq!(
        h1.submit(pool, &req, &parts, Class::Normal, far),
        Err(SubmitError::QueueFull)
    );
    assert_eq!(h1.outstanding(), 0, "a refused submit took a credit");
    let big = vec![b'x'; 65];
    assert!(matches!(
        h1.submit(
            pool,
            &Request { body: &big, ..req },
            &parts,
            Class::Normal,
            far
        ),
        Err(SubmitError::TooLarge { need: 70, max: 64 })
    ));
    let headers = [("a", "b"); MAX_REQUEST_HEADERS + 1];
    assert_eq!(
        h1.submit(
            pool,
            &Request {
                headers: &headers,
                ..req
            },
            &parts,
            Class::Normal,
            far
        ),
        Err(SubmitError::TooManyHeaders)
    );
    let many = [Part::new(w, 1); MAX_PARTS + 1];
    assert_eq!(
        h1.submit(pool, &req, &many, Class::Normal, far),
        Err(SubmitError::TooManyParts)
    );

    stopper.stop();
    assert_eq!(
        h1.submit(pool, &req, &parts, Class::Normal, far),
        Err(SubmitError::Stopped)
    );
    service.shutdown(&mut lp);
    let mut ids = Vec::new();
    while let Some(ans) = h0.poll() {
        assert_eq!(ans.outcome(), Outcome::Refused(Refusal::Shutdown));
        ids.push(ans.id());
    }
    assert_eq!(ids, [a, b], "each queued request answered once, in order");
    assert!(h1.poll().is_none());
    assert_eq!((h0.outstanding(), h1.outstanding()), (0, 0));
    // Nothing was charged for requests that never left.
    assert_eq!(lp.budget().stats(w).unwrap().admitted, 0);
}

struct UsedWeight {
    bucket: BucketId,
    thread: thread::ThreadId,
}

impl Settle for UsedWeight {
    fn on_response(&mut self, budget: &mut Budget, parts: &[Part], r: &Response<'_>, now: i64) {
        assert_eq!(
            thread::current().id(),
            self.thread,
            "settle off the loop thread"
        );
        assert_eq!(parts, [Part::new(self.bucket, 3)]);
        let used = r
            .header("x-mbx-used-weight-1m")
            .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
            .expect("usage header");
        budget.observe_used(self.bucket, used, now).unwrap();
    }
}

#[test]
fn settle_reads_each_response_on_the_loop_thread() {
    let server = Server::start(|peer| {
        while peer.read_request().is_some() {
            peer.write(
                b"HTTP/1.1 200 OK\r\nX-MBX-USED-WEIGHT-1M: 40\r\nContent-Length: 2\r\n\r\n{}",
            );
        }
    });
    let (budget, w) = budget();
    let (mut service, handles, stats, stopper) = build(BoundaryConfig::default()).unwrap();
    let addr = server.addr;
    let (tx, rx) = std::sync::mpsc::channel();
    let lp = thread::spawn(move || {
        let mut lp = EventLoop::new(LoopConfig::default(), budget).unwrap();
        tx.send(lp.add_pool(PoolConfig::new(addr, "127.0.0.1")).unwrap())
            .unwrap();
        service.settle_with(Box::new(UsedWeight {
            bucket: w,
            thread: thread::current().id(),
        }));
        service.attach(&mut lp).unwrap();
        lp.run(&mut service).unwrap();
        service.shutdown(&mut lp);
    });
    let pool = rx.recv().unwrap();
    let mut h = handles.into_iter().next().unwrap();
    let parts = [Part::new(w, 3)];
    let give_up = Instant::now() + Duration::from_secs(30);
    let answer = loop {
        assert!(Instant::now() < give_up, "no response");
        let deadline = clock::now_ns() + 10_000_000_000;
        h.submit(
            pool,
            &Request::get("/api/v3/time"),
            &parts,
            Class::Normal,
            deadline,
        )
        .unwrap();
        let outcome = loop {
            if let Some(a) = h.poll() {
                break (
                    a.outcome(),
                    a.header("X-MBX-USED-WEIGHT-1M").map(<[u8]>::to_vec),
                );
            }
            // A submitter thread polling its answer, as a strategy would.
            thread::sleep(Duration::from_micros(100));
        };
        match outcome {
            // Connecting still: submit again.
            // (the loop's connect runs on real sockets: give it a moment)
            (Outcome::Refused(Refusal::Busy), _) => thread::sleep(Duration::from_millis(2)),
            other => break other,
        }
    };
    assert_eq!(answer, (Outcome::Response, Some(b"40".to_vec())));
    stopper.stop();
    lp.join().unwrap();
    // The loop published after the hook ran: the server's 40 over our 3.
    let snap = stats.read();
    let s = snap.buckets()[w.index()];
    assert_eq!(s.used, 40);
    assert_eq!(s.drift, 37);
}
