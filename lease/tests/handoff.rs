//! The loop's side of a leased bucket: nothing is applied before a reservation or a
//! grant is posted, the posted limit applies at the next poll, the reserved safe
//! share comes back by itself at the renewal deadline (jumped `Instant`s,
//! no sleep), a refused limit is never acknowledged, and a reader never sees a
//! limit with another post's deadline.
// Real threads and the lease thread: not a loom model (tests/loom_handoff.rs is).
#![cfg(not(ergon_loom))]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ergon_core::{Budget, Class, ConfigError, Part, Spec, Why};
use ergon_lease::{Leased, Shared};

const SEC: i64 = 1_000_000_000;

fn setup() -> (Budget, ergon_core::BucketId, Arc<Shared>, Leased, Instant) {
    let mut b = Budget::builder();
    let id = b.add("orders", Spec::sliding(1, SEC, 10)).unwrap();
    let budget = b.build(0).unwrap();
    let origin = Instant::now();
    let shared = Shared::new(10, origin);
    let leased = Leased::new(shared.clone(), id);
    (budget, id, shared, leased, origin)
}

fn at(origin: Instant, ns: i64) -> Instant {
    origin + Duration::from_nanos(ns as u64)
}

#[test]
fn the_safe_share_first_then_the_grant_until_its_deadline() {
    let (mut budget, id, shared, mut leased, origin) = setup();
    // Nothing reserved yet: the bucket is closed (issue 40: it was left at its
    // declared limit, with Err(ZeroLimit)), nothing acknowledged.
    assert_eq!(leased.poll(&mut budget, origin, 0), Ok(0));
    let refused = budget.try_charge(&[Part::new(id, 1)], Class::Urgent, 0);
    assert_eq!(refused.map_err(|l| l.why).err(), Some(Why::Closed));
    assert_eq!(shared.applied(), 0);
    assert_eq!(shared.safe_share(), 0);
    // The lease thread read the reservation: it posts it, with no grant.
    shared.reserve(10);
    shared.post(10, i64::MIN);
    assert_eq!(leased.poll(&mut budget, origin, 0), Ok(10));
    assert_eq!(budget.stats(id).unwrap().limit, 10);
    let seq = shared.post(60, 2 * SEC);
    assert!(shared.applied() < seq, "not applied before the loop polls");
    assert_eq!(leased.poll(&mut budget, at(origin, SEC), SEC), Ok(60));
    assert_eq!(budget.stats(id).unwrap().limit, 60);
    assert_eq!(shared.applied(), seq);
    assert_eq!(shared.in_force(), 60);
    // The lease thread says nothing more: at the deadline the loop falls back alone,
    // to the safe share reserved, and no higher than the safe share asked for.
    shared.reserve(12);
    assert_eq!(
        leased.poll(&mut budget, at(origin, 2 * SEC - 1), 2 * SEC - 1),
        Ok(60)
    );
    assert_eq!(
        leased.poll(&mut budget, at(origin, 2 * SEC), 2 * SEC),
        Ok(10)
    );
    assert_eq!(budget.stats(id).unwrap().limit, 10);
    // A renewal moves the deadline: the grant is usable again.
    shared.post(60, 5 * SEC);
    assert_eq!(
        leased.poll(&mut budget, at(origin, 3 * SEC), 3 * SEC),
        Ok(60)
    );
}

#[test]
fn a_lowered_grant_binds_at_once_with_the_count_kept() {
    let (mut budget, id, shared, mut leased, origin) = setup();
    shared.post(60, 10 * SEC);
    leased.poll(&mut budget, origin, 0).unwrap();
    for _ in 0..50 {
        let t = budget
            .try_charge(&[Part::new(id, 1)], Class::Normal, 0)
            .unwrap();
        budget.complete(t.sent(), 0).unwrap();
    }
    shared.post(30, 10 * SEC);
    leased.poll(&mut budget, origin, 1).unwrap();
    assert!(budget
        .try_charge(&[Part::new(id, 1)], Class::Normal, 2)
        .is_err());
}

#[test]
fn a_refused_limit_is_not_acknowledged() {
    let mut b = Budget::builder();
    let id = b
        .add("orders", Spec::sliding(100, SEC, 10).headroom(20, 40))
        .unwrap();
    let mut budget = b.build(0).unwrap();
    let origin = Instant::now();
    let shared = Shared::new(50, origin);
    let mut leased = Leased::new(shared.clone(), id);
    shared.reserve(50);
    shared.post(50, i64::MIN);
    assert_eq!(leased.poll(&mut budget, origin, 0), Ok(50));
    let ok = shared.post(80, 10 * SEC);
    leased.poll(&mut budget, origin, 0).unwrap();
    assert_eq!(shared.applied(), ok);
    // Not above Bulk's headroom: the budget refuses it, the bucket closes (issue
    // 40: the last limit, 80, stayed in force), and the lease thread must not
    // acknowledge the post.
    let bad = shared.post(30, 10 * SEC);
    assert_eq!(
        leased.poll(&mut budget, origin, 0),
        Err(ConfigError::BadHeadroom)
    );
    assert!(shared.applied() < bad);
    assert_eq!(budget.stats(id).unwrap().limit, 0);
}

/// Issue 40, item 2: when the host may use nothing (its reservation released or
/// another process's, no grant), the bucket is closed, never left at its last limit.
#[test]
fn a_limit_of_zero_closes_the_bucket() {
    let (mut budget, id, shared, mut leased, origin) = setup();
    shared.reserve(10);
    shared.post(60, 10 * SEC);
    assert_eq!(leased.poll(&mut budget, origin, 0), Ok(60));
    shared.reserve(0);
    let seq = shared.post(0, 10 * SEC);
    assert_eq!(leased.poll(&mut budget, at(origin, 1), 1), Ok(0));
    assert_eq!(shared.applied(), seq, "a closed bucket is applied");
    let l = budget
        .try_charge(&[Part::new(id, 1)], Class::Urgent, 2)
        .unwrap_err();
    assert_eq!((l.bucket, l.why), (id, Why::Closed));
    assert_eq!(budget.stats(id).unwrap().limit, 0);
}

/// Issue 40, item 4: the grant's deadline holds at every charge, not only at the
/// loop's next poll: a process stopped between its turn and its submits charges
/// nothing past the deadline.
#[test]
fn a_grant_is_refused_at_admission_past_its_deadline() {
    let (mut budget, id, shared, mut leased, origin) = setup();
    shared.reserve(10);
    shared.post(60, 2 * SEC);
    assert_eq!(leased.poll(&mut budget, at(origin, SEC), SEC), Ok(60));
    let before = budget.try_charge(&[Part::new(id, 1)], Class::Urgent, 2 * SEC - 1);
    assert!(before.is_ok(), "before the deadline");
    // No poll: the loop was stopped. The budget refuses on its own.
    let l = budget
        .try_charge(&[Part::new(id, 1)], Class::Urgent, 2 * SEC)
        .unwrap_err();
    assert_eq!((l.bucket, l.why), (id, Why::Closed));
    // The next poll falls back to the safe share.
    assert_eq!(
        leased.poll(&mut budget, at(origin, 2 * SEC), 2 * SEC),
        Ok(10)
    );
}

/// Issue 40, item 1, the loop's side: the reservation is usable only until its
/// hold ends (the host cut off from etcd stops), at admission too.
#[test]
fn a_reservation_past_its_hold_closes_the_bucket() {
    let (mut budget, id, shared, mut leased, origin) = setup();
    shared.reserve_until(10, 5 * SEC);
    shared.post(10, i64::MIN);
    assert_eq!(leased.poll(&mut budget, at(origin, SEC), SEC), Ok(10));
    let l = budget
        .try_charge(&[Part::new(id, 1)], Class::Urgent, 5 * SEC)
        .unwrap_err();
    assert_eq!(
        l.why,
        Why::Closed,
        "closed at the hold's end, without a poll"
    );
    assert_eq!(
        leased.poll(&mut budget, at(origin, 5 * SEC), 5 * SEC),
        Ok(0)
    );
}

#[test]
fn a_reader_never_sees_a_torn_post() {
    let origin = Instant::now();
    let shared = Shared::new(1, origin);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (shared, stop) = (shared.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n: u64 = 1;
            while !stop.load(Ordering::Relaxed) {
                // Every post pairs limit n with deadline n * 1000.
                shared.post(n, n as i64 * 1000);
                n += 1;
            }
            n
        })
    };
    let (mut reads, mut busy) = (0u64, 0u64);
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(300) {
        match shared.last_post() {
            Some((seq, limit, deadline)) if seq > 0 => {
                assert_eq!(deadline, limit as i64 * 1000, "a torn post at {seq}");
                reads += 1;
            }
            Some(_) => {}
            None => busy += 1,
        }
    }
    stop.store(true, Ordering::Relaxed);
    let posts = writer.join().unwrap();
    assert!(
        posts > 1000 && reads > 1000,
        "{posts} posts, {reads} reads, {busy} under way"
    );
}
