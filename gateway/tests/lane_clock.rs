//! The venue clock re-anchored on the WebSocket API lane's answers: the
//! gateway's own lane ([`WsLane`] over an in-memory pipe, driven by
//! [`Gateway::drive_ws`]) against the emulator's WebSocket API engine
//! (`ergon_venue_sim::sansio_ws`), whose venue clock stepped. An order's answer
//! over the lane carries the venue's `transactTime` in its `result` (Binance
//! Spot WebSocket API, "Place new order (TRADE)", response `result.transactTime`),
//! the same evidence as an HTTP answer's body.

#[path = "common/lane.rs"]
mod lane;

use ergon_gateway::WsLane;
use lane::{place, pump, setup, MS, SEC};

/// A step of the venue's clock beyond the guard is corrected by the first
/// stamped answer over the lane, by as much as the stamp proves (within the
/// round trip, never past the truth), in the REST adapter and the lane's
/// session alike; the fixed windows move with it. A stamp read within half
/// the guard moves nothing.
#[test]
fn a_lane_answer_reanchors_a_stepped_venue_clock_at_once() {
    let (mut gw, mut w, mut v) = setup();
    pump(&mut gw, &mut w, &mut v, MS);
    assert!(gw.ws_api().unwrap().ready(), "the lane is up");
    assert_eq!(gw.stats().reanchors, 0);
    let before = gw.venue().limits.clock;
    v.step_ms = -120;
    w.now += 5 * SEC;
    place(&mut gw, &mut w, "lane1", 1);
    let evs = pump(&mut gw, &mut w, &mut v, MS);
    assert!(
        evs.iter().any(|e| e.starts_with("Applied { tag: 1")),
        "{evs:?}"
    );
    assert_eq!(w.sent, 0, "the order went over the lane");
    assert_eq!(gw.stats().reanchors, 1);
    let c = gw.venue().limits.clock;
    assert_ne!(c, before);
    // Written at `now - 2 ms`, stamped at `now - 1 ms`, read now: the clock is
    // within the round trip of the venue's, never past it.
    let err = c.utc_ms(w.now) - v.ms(w.now);
    assert!((0..=2).contains(&err), "{err} ms off");
    // 10 ms off and read at once: within half the 30 ms guard, left alone.
    v.step_ms += err - 10;
    place(&mut gw, &mut w, "lane2", 2);
    let evs = pump(&mut gw, &mut w, &mut v, MS / 2);
    assert!(
        evs.iter().any(|e| e.starts_with("Applied { tag: 2")),
        "{evs:?}"
    );
    assert_eq!((gw.stats().reanchors, gw.venue().limits.clock), (1, c));
}

/// A write whose frame waited in a full send buffer left when its last byte
/// was written, not when the gateway handed it to the lane: the round trip
/// that bounds the venue's stamp starts there. Counted from the hand-over
/// (200 ms earlier), a 120 ms step hides inside the round trip and the
/// windows stay misaligned until some later stamp; counted from the write,
/// the first answer re-anchors at once, within the real 2 ms round trip.
#[test]
fn a_lane_write_held_in_a_full_send_buffer_counts_its_round_trip_from_the_write() {
    let (mut gw, mut w, mut v) = setup();
    pump(&mut gw, &mut w, &mut v, MS);
    assert!(gw.ws_api().unwrap().ready(), "the lane is up");
    v.step_ms = -120;
    w.now += 5 * SEC;
    let pipe = gw.ws_api_mut().and_then(WsLane::pipe_mut).unwrap();
    pipe.set_room(0);
    place(&mut gw, &mut w, "held1", 1);
    let evs = pump(&mut gw, &mut w, &mut v, MS);
    assert!(evs.is_empty(), "nothing left yet: {evs:?}");
    let id = 0..1_000u64;
    assert!(
        id.clone()
            .all(|i| gw.ws_api().unwrap().written_at(i).is_none()),
        "a frame still in the send buffer is not written"
    );
    // The socket drains 200 ms later: the frame leaves now.
    w.now += 200 * MS;
    let left = w.now;
    let pipe = gw.ws_api_mut().and_then(WsLane::pipe_mut).unwrap();
    pipe.set_room(usize::MAX);
    // One drive writes the frame; its write time is the drive's.
    gw.drive_ws(&mut w, &mut |_| {});
    let written = id.clone().find_map(|i| gw.ws_api().unwrap().written_at(i));
    let evs = pump(&mut gw, &mut w, &mut v, MS);
    assert_eq!(written, Some(left));
    assert!(
        evs.iter().any(|e| e.starts_with("Applied { tag: 1")),
        "{evs:?}"
    );
    assert_eq!(w.sent, 0, "the order went over the lane");
    assert_eq!(gw.stats().reanchors, 1, "re-anchored on the first stamp");
    let err = gw.venue().limits.clock.utc_ms(w.now) - v.ms(w.now);
    assert!((0..=2).contains(&err), "{err} ms off");
}
