//! The boundary on real threads against a loopback server: several producer
//! threads submit through their handles, the loop charges the budget on its own
//! thread and sends; every accepted submit is answered exactly once, to the thread
//! that made it, with the answer to its own request, and the counts add up with
//! the budget's: a bucket of `CAP` admits exactly `CAP` requests, the rest come
//! back `Limited`.

mod common;

use std::collections::HashMap;
use std::thread;
use std::time::{Duration, Instant};

use common::server::Server;
use ergon_io::boundary::handle::{Outcome, Refusal, SubmitError};
use ergon_io::boundary::{build, BoundaryConfig};
use ergon_io::client::PoolConfig;
use ergon_io::core::{Budget, Class, Part, Spec};
use ergon_io::event_loop::EventLoop;
use ergon_io::http::Request;
use ergon_io::{clock, event_loop::LoopConfig};

const PRODUCERS: usize = 4;
const PER_PRODUCER: usize = 150;
const CAP: u64 = 250;

#[derive(Default, Debug)]
struct Tally {
    responses: u64,
    limited: u64,
    busy: u64,
    queue_full: u64,
    outstanding: u64,
}

fn run(busy_poll: bool) {
    let server = Server::start(|peer| peer.echo());
    let mut b = Budget::builder();
    let cap = b.add("cap", Spec::fixed(CAP, 3_600_000_000_000)).unwrap();
    let budget = b.build(clock::now_ns()).unwrap();
    let (mut service, handles, stats, stopper) = build(BoundaryConfig {
        handles: PRODUCERS,
        queue: 8,
        per_handle: 4,
        ..BoundaryConfig::default()
    })
    .unwrap();

    let addr = server.addr;
    let (pool_tx, pool_rx) = std::sync::mpsc::channel();
    let lp = thread::spawn(move || {
        let cfg = LoopConfig {
            busy_poll,
            ..LoopConfig::default()
        };
        let mut lp = EventLoop::new(cfg, budget).unwrap();
        let mut pool = PoolConfig::new(addr, "127.0.0.1");
        pool.connections = 3;
        pool_tx.send(lp.add_pool(pool).unwrap()).unwrap();
        service.attach(&mut lp).unwrap();
        lp.run(&mut service).unwrap();
        service.shutdown(&mut lp);
        (service.taken(), lp.budget().stats(cap).unwrap())
    });

    // The loop thread made the pool; its id is plain data the producers share.
    let pool = pool_rx.recv().unwrap();

    let producers: Vec<_> = handles
        .into_iter()
        .enumerate()
        .map(|(p, mut h)| {
            thread::spawn(move || {
                let parts = [Part::new(cap, 1)];
                let mut tally = Tally::default();
                let mut owed: HashMap<u64, String> = HashMap::new();
                let mut accepted = 0u64;
                let mut done = 0;
                let mut next = 0;
                // Busy requests are submitted again, as new submits.
                let mut retry: Vec<usize> = Vec::new();
                let give_up = Instant::now() + Duration::from_secs(60);
                while done < PER_PRODUCER {
                    assert!(Instant::now() < give_up, "producer {p} stuck: {tally:?}");
                    let job = retry
                        .pop()
                        .or_else(|| (next < PER_PRODUCER).then_some(next));
                    if let Some(n) = job {
                        let body = format!("p{p}-n{n}");
                        let req = Request {
                            method: "POST",
                            target: "/order",
                            headers: &[("X-Producer", "yes")],
                            body: body.as_bytes(),
                        };
                        let deadline = clock::now_ns() + 20_000_000_000;
                        match h.submit(pool, &req, &parts, Class::Urgent, deadline) {
                            Ok(id) => {
                                accepted += 1;
                                assert!(owed.insert(id.0, body).is_none(), "id reused");
                                if n == next {
                                    next += 1;
                                }
                            }
                            Err(e) => {
                                match e {
                                    SubmitError::QueueFull => tally.queue_full += 1,
                                    SubmitError::Outstanding => tally.outstanding += 1,
                                    other => panic!("{other}"),
                                }
                                if n != next {
                                    retry.push(n);
                                }
                            }
                        }
                    }
                    while let Some(a) = h.poll() {
                        let body = owed
                            .remove(&a.id().0)
                            .unwrap_or_else(|| panic!("answer {:?} twice or not ours", a.id()));
                        match a.outcome() {
                            Outcome::Response => {
                                assert_eq!(a.status(), 200);
                                assert_eq!(a.body(), body.as_bytes(), "someone else's answer");
                                tally.responses += 1;
                                done += 1;
                            }
                            Outcome::Limited(l) => {
                                assert_eq!(l.bucket, cap);
                                tally.limited += 1;
                                done += 1;
                            }
                            Outcome::Refused(Refusal::Busy) => {
                                tally.busy += 1;
                                let n: usize = body.rsplit('n').next().unwrap().parse().unwrap();
                                retry.push(n);
                            }
                            other => panic!("producer {p}: unexpected {other:?}"),
                        }
                    }
                    if job.is_none() {
                        thread::yield_now();
                    }
                }
                assert!(owed.is_empty(), "answers missing: {owed:?}");
                assert_eq!(h.outstanding(), 0);
                (tally, accepted, h.eventfd_writes(), h.loop_parks())
            })
        })
        .collect();

    let mut total = Tally::default();
    let mut accepted = 0;
    let (mut writes, mut parks) = (0, 0);
    for h in producers {
        let (t, a, w, p) = h.join().unwrap();
        // Shared counters: the last thread's reading is the largest.
        (writes, parks) = (writes.max(w), parks.max(p));
        total.responses += t.responses;
        total.limited += t.limited;
        total.busy += t.busy;
        total.queue_full += t.queue_full;
        total.outstanding += t.outstanding;
        accepted += a;
    }
    stopper.stop();
    let (taken, cap_stats) = lp.join().unwrap();

    let logical = (PRODUCERS * PER_PRODUCER) as u64;
    assert_eq!(total.responses + total.limited, logical, "{total:?}");
    assert_eq!(
        total.responses, CAP,
        "the bucket admits exactly its limit: {total:?}"
    );
    assert_eq!(total.limited, logical - CAP);
    assert_eq!(
        accepted,
        logical + total.busy,
        "every accepted submit answered once"
    );
    assert_eq!(taken, accepted, "the loop took each submission once");
    // Busy refusals were charged, then refunded on the loop thread.
    assert_eq!(cap_stats.refunds, total.busy);
    assert_eq!(cap_stats.admitted - cap_stats.refunds, CAP);
    // The server saw each admitted request exactly once.
    assert!(server.wait_for(|l| l.count(b"POST /order") == CAP as usize));

    let snap = stats.read();
    assert!(snap.version > 0);
    assert_eq!(
        snap.buckets()[cap.index()],
        cap_stats,
        "the last snapshot is the final state"
    );
    assert_eq!(snap.client.requests, CAP, "client requests in the snapshot");
    assert_eq!(snap.client.busy, total.busy);
    assert_eq!((snap.client.sent_no, snap.client.sent_maybe), (0, 0));
    if busy_poll {
        assert_eq!(
            (writes, parks),
            (0, 0),
            "busy-poll: no park, no eventfd write"
        );
    } else {
        assert!(writes <= parks, "{writes} eventfd writes for {parks} parks");
    }
    eprintln!("busy_poll={busy_poll}: {total:?}, accepted {accepted}, eventfd writes {writes}, parks {parks}");
}

#[test]
fn producers_parked_loop_every_request_answered_once() {
    run(false);
}

#[test]
fn producers_busy_poll_loop_every_request_answered_once() {
    run(true);
}
