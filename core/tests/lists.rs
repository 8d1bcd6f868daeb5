//! The table of part lists behind small tickets: a ticket of `try_charge` names an
//! entry of its budget's table, one per distinct list. At `MAX_LISTS` lists held by
//! outstanding tickets, a new list takes the entry of the least recently charged list
//! that charges no in-flight bucket; only when every entry holds a list that charges
//! one is a new list refused as `Why::Receipts`, all or none.

use ergon_core::{BucketId, Budget, Class, Flight, ForeignId, Part, Spec, Ticket, Why, MAX_LISTS};

const SEC: i64 = 1_000_000_000;

/// A roomy sliding window (100 ms slots), an in-flight limit and a gate.
fn budget() -> (Budget, BucketId, BucketId, BucketId) {
    let mut b = Budget::builder();
    let w = b.add("w", Spec::sliding(1_000_000, SEC, 10)).unwrap();
    let f = b.add("f", Spec::in_flight(1_000)).unwrap();
    let ip = b.add("ip", Spec::gate()).unwrap();
    (b.build(0).unwrap(), w, f, ip)
}

/// The `k`-th distinct list.
fn list(w: BucketId, ip: BucketId, k: u32) -> [Part; 2] {
    [Part::new(w, k + 1), Part::new(ip, 0)]
}

#[test]
fn a_ticket_is_small_and_keeps_no_part() {
    assert_eq!(core::mem::size_of::<Ticket>(), 24);
    assert!(core::mem::size_of::<Flight>() <= 24);
}

#[test]
fn tickets_of_one_list_share_one_entry() {
    let (mut budget, w, f, ip) = budget();
    let order = [Part::new(w, 1), Part::new(f, 1), Part::new(ip, 0)];
    let tickets: Vec<Ticket> = (0..500)
        .map(|_| budget.try_charge(&order, Class::Normal, 1).unwrap())
        .collect();
    assert_eq!(budget.lists_held(), 1);
    for t in &tickets {
        assert_eq!(budget.ticket_parts(t).unwrap(), &order);
    }
    for t in tickets {
        let flight = t.sent();
        assert_eq!(budget.flight_parts(&flight).unwrap(), &order);
        budget.complete(flight, 2).unwrap();
    }
    assert_eq!(budget.lists_held(), 0);
    assert_eq!(budget.stats(f).unwrap().used, 0);
    assert_eq!(budget.receipts_outstanding(), 0);
}

/// The `k`-th distinct list that charges the in-flight bucket `f`.
fn flying(w: BucketId, f: BucketId, ip: BucketId, k: u32) -> [Part; 3] {
    [Part::new(w, k + 1), Part::new(f, 1), Part::new(ip, 0)]
}

/// Fills the table with `MAX_LISTS` distinct lists that charge the in-flight bucket
/// `f`, one ticket each, at `now`.
fn fill(budget: &mut Budget, w: BucketId, f: BucketId, ip: BucketId, now: i64) -> Vec<Ticket> {
    let held: Vec<Ticket> = (0..MAX_LISTS as u32)
        .map(|k| {
            budget
                .try_charge(&flying(w, f, ip, k), Class::Normal, now)
                .unwrap()
        })
        .collect();
    assert_eq!(budget.lists_held(), MAX_LISTS);
    held
}

#[test]
fn a_new_list_is_refused_when_every_entry_holds_an_in_flight_list_and_nothing_is_charged() {
    let (mut budget, w, f, ip) = budget();
    let held = fill(&mut budget, w, f, ip, 1);
    let before = budget.stats(w).unwrap();
    let outstanding = budget.receipts_outstanding();
    let new = flying(w, f, ip, MAX_LISTS as u32);
    // Through the lanes (same slot) and past them (a new slot: the full path).
    for now in [1, SEC / 2] {
        let mut b = budget.clone();
        let l = b.try_charge(&new, Class::Urgent, now).unwrap_err();
        assert_eq!(
            (l.why, l.ready_at_ns, l.bucket),
            (Why::Receipts, i64::MAX, w)
        );
        let s = b.stats(w).unwrap();
        assert_eq!((s.used, s.refusals), (before.used, before.refusals));
        assert_eq!(b.receipts_outstanding(), outstanding);
        assert_eq!(b.lists_held(), MAX_LISTS);
        // A list already held still passes, and so does a shape.
        let again = b
            .try_charge(&flying(w, f, ip, 3), Class::Normal, now)
            .unwrap();
        assert_eq!(b.ticket_parts(&again).unwrap(), &flying(w, f, ip, 3));
        // A list that charges no in-flight bucket finds no entry to take either.
        let rate = b
            .try_charge(&list(w, ip, 7), Class::Normal, now)
            .unwrap_err();
        assert_eq!(rate.why, Why::Receipts);
        let shape = b.shape(&new).unwrap();
        let t = b.try_charge_shape(shape, Class::Normal, now).unwrap();
        b.refund(t, now).unwrap();
        b.refund(again, now).unwrap();
    }
    // An empty list names no bucket: the refusal's id has index 255.
    let l = budget.try_charge(&[], Class::Urgent, 1).unwrap_err();
    assert_eq!((l.why, l.bucket.index()), (Why::Receipts, 255));
    // One list's last ticket back frees its entry for the new list.
    let mut held = held.into_iter();
    budget.refund(held.next().unwrap(), 2).unwrap();
    assert_eq!(budget.lists_held(), MAX_LISTS - 1);
    let t = budget.try_charge(&new, Class::Urgent, 2).unwrap();
    assert_eq!(budget.ticket_parts(&t).unwrap(), &new);
    assert_eq!(
        budget.stats(w).unwrap().used,
        before.used - 1 + new[0].cost as u64
    );
    for t in held.chain([t]) {
        budget.complete(t.sent(), 3).unwrap();
    }
    assert_eq!((budget.lists_held(), budget.receipts_outstanding()), (0, 0));
}

#[test]
fn a_dropped_ticket_of_an_in_flight_list_keeps_its_entry() {
    let (mut budget, w, f, ip) = budget();
    for k in 0..MAX_LISTS as u32 {
        let _dropped = budget
            .try_charge(&flying(w, f, ip, k), Class::Normal, 1)
            .unwrap();
    }
    assert_eq!(budget.lists_held(), MAX_LISTS);
    // The lists held still pass; no other does, and none panics.
    assert!(budget
        .try_charge(&flying(w, f, ip, 0), Class::Normal, 1)
        .is_ok());
    for k in MAX_LISTS as u32..MAX_LISTS as u32 + 100 {
        let l = budget
            .try_charge(&flying(w, f, ip, k), Class::Normal, 1)
            .unwrap_err();
        assert_eq!(l.why, Why::Receipts);
    }
}

#[test]
fn dropped_tickets_of_rate_lists_block_nothing() {
    let (mut budget, w, _f, ip) = budget();
    for k in 0..MAX_LISTS as u32 + 500 {
        let _dropped = budget
            .try_charge(&list(w, ip, k), Class::Normal, 1)
            .unwrap();
    }
    assert_eq!(budget.lists_held(), MAX_LISTS);
}

#[test]
fn a_given_up_list_gives_nothing_back_and_the_kept_ones_stay_exact() {
    let (mut budget, w, f, ip) = budget();
    // One in-flight list, then more rate lists than entries, all held at once.
    let pinned = budget
        .try_charge(&flying(w, f, ip, 0), Class::Normal, 1)
        .unwrap();
    let n = MAX_LISTS as u32 + 10;
    let tickets: Vec<Ticket> = (1..=n)
        .map(|k| {
            budget
                .try_charge(&list(w, ip, k), Class::Normal, 1)
                .unwrap()
        })
        .collect();
    let used = budget.stats(w).unwrap().used;
    // The 11 charged least recently (the in-flight list's entry is kept) lost their
    // entries: their refunds give nothing back, and are not refused.
    let mut tickets = tickets.into_iter();
    for k in 1..=11u32 {
        let t = tickets.next().unwrap();
        assert_eq!(budget.ticket_parts(&t), Err(ForeignId), "list {k}");
        budget.refund(t, 2).unwrap();
        assert_eq!(budget.stats(w).unwrap().used, used);
    }
    // The rest give back exactly what they charged.
    let mut expect = used;
    for (k, t) in (12..=n).zip(tickets) {
        assert_eq!(budget.ticket_parts(&t).unwrap(), &list(w, ip, k));
        budget.refund(t, 2).unwrap();
        expect -= u64::from(k) + 1;
        assert_eq!(budget.stats(w).unwrap().used, expect);
    }
    // The in-flight list was never given up: its flight releases its unit.
    assert_eq!(budget.stats(f).unwrap().used, 1);
    budget.complete(pinned.sent(), 3).unwrap();
    assert_eq!(budget.stats(f).unwrap().used, 0);
    assert_eq!(budget.receipts_outstanding(), 0);
}

/// Binance's Spot limits as the gateway declares them (request weight 6000/min,
/// raw requests 61000/5 min, orders 100/10 s and 200000/day, the IP gate).
fn binance() -> (Budget, [BucketId; 5]) {
    let mut b = Budget::builder();
    let weight = b.add("weight", Spec::sliding(6000, 60 * SEC, 60)).unwrap();
    let raw = b.add("raw", Spec::sliding(61_000, 300 * SEC, 60)).unwrap();
    let orders = b
        .add("orders", Spec::fixed(100, 10 * SEC).guard(20_000_000))
        .unwrap();
    let day = b
        .add("day", Spec::fixed(200_000, 86_400 * SEC).guard(20_000_000))
        .unwrap();
    let ip = b.add("ip", Spec::gate()).unwrap();
    (b.build(0).unwrap(), [weight, raw, orders, day, ip])
}

#[test]
fn more_concurrent_distinct_charges_than_entries_within_the_venues_limits_all_pass() {
    let (mut budget, [weight, raw, orders, day, ip]) = binance();
    // 300 requests in flight at once, 300 distinct part lists (every weight from 1
    // to 10, with or without an order, ten raw-request costs), over 15 ms: 1,650
    // weight, 1,650 raw requests and 100 orders, inside every limit, so the venue
    // takes every one.
    let mut flights = Vec::new();
    let mut charged = 0u64;
    for k in 0..300u32 {
        let w = k % 10 + 1;
        let mut parts = vec![Part::new(weight, w), Part::new(raw, k / 30 + 1)];
        if k % 3 == 0 {
            parts.push(Part::new(orders, 1));
            parts.push(Part::new(day, 1));
        }
        parts.push(Part::new(ip, 0));
        let now = SEC + i64::from(k) * 50_000;
        let t = budget
            .try_charge(&parts, Class::Normal, now)
            .unwrap_or_else(|l| panic!("charge {k} refused: {l:?}"));
        charged += u64::from(w);
        flights.push(t.sent());
    }
    assert_eq!(budget.stats(weight).unwrap().used, charged);
    assert_eq!(budget.stats(orders).unwrap().used, 100);
    for f in flights {
        budget.complete(f, 2 * SEC).unwrap();
    }
    assert_eq!(budget.receipts_outstanding(), 0);
}

#[test]
fn a_ticket_of_a_clone_charged_after_it_is_refused_once_its_entry_moved_on() {
    let (mut a, w, _f, ip) = budget();
    let mut b = a.clone();
    let from_b = b.try_charge(&list(w, ip, 1), Class::Normal, 1).unwrap();
    // `a` never held that entry: refused, nothing changed.
    let used = a.stats(w).unwrap().used;
    assert_eq!(a.refund(from_b, 2), Err(ForeignId));
    assert_eq!(a.stats(w).unwrap().used, used);
    let from_b = b.try_charge(&list(w, ip, 2), Class::Normal, 1).unwrap();
    assert_eq!(a.ticket_parts(&from_b), Err(ForeignId));
    assert_eq!(a.complete(from_b.sent(), 2), Err(ForeignId));
    assert_eq!(a.receipts_outstanding(), 0);
}
