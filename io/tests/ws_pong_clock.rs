//! Pong and close pacing on a synthetic clock, all in memory: when the message
//! budget refuses an automatic pong it is delayed to the time the budget gives
//! (that time is `poll_timeout`), pings that come meanwhile are coalesced into one
//! pong carrying the latest payload, and nothing is dropped without a count. A close
//! echo the budget refuses is delayed the same way, and given up at the close
//! timeout. Frames never written are refunded.

mod ws_common;

use ergon_io::core::{Class, Why};
use ergon_io::ws::{Cause, Closed, SendError, State, WsConfig, WsEvent};
use ws_common::*;

const MS: i64 = 1_000_000;

#[test]
fn refused_pong_waits_for_the_budget_and_answers_the_latest_ping() {
    let (mut budget, limits) = budget(10, 2);
    let mut s = open_in_memory(WsConfig::default(), &mut budget, &limits);
    let ping = |s: &mut ergon_io::ws::Session, b: &mut _, payload: &[u8], now| {
        assert_eq!(
            s.handle_input(&server_frame(true, 0x9, payload)),
            payload.len() + 2
        );
        assert_eq!(s.poll_event(b, now), None);
    };
    ping(&mut s, &mut budget, b"a", 0);
    assert_eq!(
        take_frames(&mut s, &mut budget, 0),
        vec![(0xA, b"a".to_vec())]
    );
    ping(&mut s, &mut budget, b"b", 10 * MS);
    assert_eq!(
        take_frames(&mut s, &mut budget, 10 * MS),
        vec![(0xA, b"b".to_vec())]
    );
    assert_eq!(s.poll_timeout(), None);

    // The limit (2 a second) is reached: the third pong waits.
    let ready = budget
        .clone()
        .try_charge(&limits.message_parts(), Class::Urgent, 20 * MS)
        .unwrap_err();
    assert_eq!(ready.why, Why::Full);
    assert!(
        (1000 * MS..=1250 * MS).contains(&ready.ready_at_ns),
        "{ready:?}"
    );
    ping(&mut s, &mut budget, b"c", 20 * MS);
    assert_eq!(take_frames(&mut s, &mut budget, 20 * MS), vec![]);
    assert_eq!(s.poll_timeout(), Some(ready.ready_at_ns));
    ping(&mut s, &mut budget, b"d", 30 * MS);
    assert_eq!(s.poll_timeout(), Some(ready.ready_at_ns));

    // Not before its time, at any wake-up.
    for t in [500 * MS, ready.ready_at_ns - 1] {
        s.handle_timeout(&mut budget, t);
        assert_eq!(take_frames(&mut s, &mut budget, t), vec![]);
    }
    s.handle_timeout(&mut budget, ready.ready_at_ns);
    assert_eq!(
        take_frames(&mut s, &mut budget, ready.ready_at_ns),
        vec![(0xA, b"d".to_vec())],
        "one pong, for the latest ping"
    );
    assert_eq!(s.poll_timeout(), None);
    let st = s.stats();
    assert_eq!(
        (
            st.pings_received,
            st.pongs_sent,
            st.pongs_delayed,
            st.pongs_coalesced
        ),
        (4, 3, 1, 1)
    );
    assert_eq!(budget.stats(limits.messages).unwrap().admitted, 3);
}

#[test]
fn refused_close_echo_is_delayed_then_sent() {
    let (mut budget, limits) = budget(10, 1);
    let mut s = open_in_memory(WsConfig::default(), &mut budget, &limits);
    s.send_text("spend the budget", Class::Normal, &mut budget, 0)
        .unwrap();
    take_frames(&mut s, &mut budget, 0);
    assert!(matches!(
        s.send_text("one more", Class::Urgent, &mut budget, 0),
        Err(SendError::Limited(l)) if l.why == Why::Full
    ));
    s.handle_input(&server_frame(true, 0x8, &1001u16.to_be_bytes()));
    assert_eq!(
        s.poll_event(&mut budget, 5 * MS),
        Some(WsEvent::Closed(Closed {
            cause: Cause::Peer,
            code: Some(1001),
            reason: ""
        }))
    );
    assert_eq!(s.state(), State::Closed);
    assert!(!s.is_finished(), "a close echo is owed");
    assert_eq!(s.stats().closes_delayed, 1);
    let at = s.poll_timeout().unwrap();
    assert!(at >= 1000 * MS && at < 5 * MS + WsConfig::default().close_timeout_ns);
    s.handle_timeout(&mut budget, at);
    assert_eq!(
        take_frames(&mut s, &mut budget, at),
        vec![(0x8, 1001u16.to_be_bytes().to_vec())]
    );
    assert!(s.is_finished());
}

#[test]
fn halted_budget_gives_up_the_close_at_its_timeout_and_counts_the_pong() {
    let (mut budget, limits) = budget(10, 100);
    let config = WsConfig {
        close_timeout_ns: 500 * MS,
        ..WsConfig::default()
    };
    let mut s = open_in_memory(config, &mut budget, &limits);
    budget.banned(limits.ip, i64::MAX, 0).unwrap();
    s.handle_input(&server_frame(true, 0x9, b"hb"));
    assert_eq!(s.poll_event(&mut budget, MS), None);
    assert_eq!(s.stats().pongs_delayed, 1);
    // A halt has no ready time: the pong is tried again every second.
    assert_eq!(s.poll_timeout(), Some(1001 * MS));
    s.handle_input(&server_frame(true, 0x8, &[]));
    assert!(matches!(
        s.poll_event(&mut budget, 2 * MS),
        Some(WsEvent::Closed(Closed {
            cause: Cause::Peer,
            code: None,
            ..
        }))
    ));
    assert_eq!(
        s.stats().pongs_abandoned,
        1,
        "the owed pong is counted, not lost"
    );
    // The echo cannot go; the close timeout ends the wait.
    assert_eq!(s.poll_timeout(), Some(502 * MS));
    s.handle_timeout(&mut budget, 502 * MS);
    assert!(s.is_finished());
    assert_eq!(take_frames(&mut s, &mut budget, 502 * MS), vec![]);
    let st = s.stats();
    assert_eq!((st.closes_delayed, st.closes_abandoned), (1, 1));
    assert_eq!(
        st.pings_received,
        st.pongs_sent + st.pongs_coalesced + st.pongs_abandoned
    );
}

#[test]
fn frames_never_written_are_refunded() {
    let (mut budget, limits) = budget(10, 100);
    let mut s = open_in_memory(WsConfig::default(), &mut budget, &limits);
    s.send_text("written", Class::Normal, &mut budget, MS)
        .unwrap();
    take_frames(&mut s, &mut budget, MS);
    s.send_text("queued 1", Class::Normal, &mut budget, MS)
        .unwrap();
    s.send_binary(b"queued 2", Class::Normal, &mut budget, MS)
        .unwrap();
    // One byte of "queued 1" leaves: it is kept; "queued 2" is refunded.
    s.handle_written(1, &mut budget, MS);
    assert_eq!(budget.stats(limits.messages).unwrap().used, 3);
    s.handle_transport_closed(&mut budget, 2 * MS);
    assert!(matches!(
        s.poll_event(&mut budget, 2 * MS),
        Some(WsEvent::Closed(Closed {
            cause: Cause::Transport,
            ..
        }))
    ));
    let st = budget.stats(limits.messages).unwrap();
    assert_eq!((st.admitted, st.refunds, st.used), (3, 1, 2));
    assert_eq!(s.stats().frames_refunded, 1);
    assert_eq!(s.poll_transmit(), None);
}

#[test]
fn closes_crossing_still_answer_the_server() {
    let (mut budget, limits) = budget(10, 100);
    let mut s = open_in_memory(WsConfig::default(), &mut budget, &limits);
    s.close(1000, "bye", Class::Normal, &mut budget, MS)
        .unwrap();
    assert_eq!(s.state(), State::Closing);
    // The server's close arrives before ours has left.
    s.handle_input(&server_frame(true, 0x8, &1001u16.to_be_bytes()));
    assert!(matches!(
        s.poll_event(&mut budget, 2 * MS),
        Some(WsEvent::Closed(Closed {
            cause: Cause::Local,
            code: Some(1001),
            ..
        }))
    ));
    assert_eq!(
        take_frames(&mut s, &mut budget, 2 * MS),
        vec![(0x8, 1001u16.to_be_bytes().to_vec())],
        "one close frame goes out"
    );
    assert!(s.is_finished());
    let st = budget.stats(limits.messages).unwrap();
    assert_eq!((st.admitted, st.refunds, st.used), (2, 1, 1));
}

/// Drives `s` at `now`: fires its deadline if due, takes in what arrived (no event
/// expected: pings are answered inside the session), and records what it writes.
fn step(
    s: &mut ergon_io::ws::Session,
    budget: &mut ergon_io::core::Budget,
    now: i64,
    sent: &mut Vec<(i64, u8, Vec<u8>)>,
) {
    if s.poll_timeout().is_some_and(|t| t <= now) {
        s.handle_timeout(budget, now);
    }
    assert_eq!(s.poll_event(budget, now), None);
    for (opcode, payload) in take_frames(s, budget, now) {
        sent.push((now, opcode, payload));
    }
}

/// A server flooding pings at ten times the message limit (50 a second for two
/// seconds against 5 a second), on jumped time: no one-second window of what the
/// client writes holds more than the limit, the pongs that wait are coalesced
/// into one for the latest ping, and every ping is answered, coalesced or
/// counted. Over a real socket the same flood takes 3.5 s of wall time.
#[test]
fn a_ping_flood_stays_under_the_message_limit() {
    const LIMIT: u64 = 5;
    const PINGS: i64 = 100;
    let (mut budget, limits) = budget(10, LIMIT);
    let mut s = open_in_memory(WsConfig::default(), &mut budget, &limits);
    let mut sent = Vec::new();
    for i in 0..PINGS {
        let now = i * 20 * MS;
        let ping = server_frame(true, 0x9, format!("ping-{i}").as_bytes());
        assert_eq!(s.handle_input(&ping), ping.len());
        step(&mut s, &mut budget, now, &mut sent);
    }
    // After the flood, time jumps from one deadline to the next until nothing is
    // owed.
    let mut now = (PINGS - 1) * 20 * MS;
    for _ in 0..1000 {
        let Some(t) = s.poll_timeout() else { break };
        now = now.max(t);
        step(&mut s, &mut budget, now, &mut sent);
    }
    assert_eq!(s.poll_timeout(), None, "a pong still owed");

    // The venue's view: no window of one second holds more than the limit.
    for (i, (at, ..)) in sent.iter().enumerate() {
        let in_window = sent[i..].iter().take_while(|f| f.0 - at < SEC).count();
        assert!(
            in_window as u64 <= LIMIT,
            "{in_window} frames within a second from frame {i} at {at} ns"
        );
    }
    let pongs: Vec<_> = sent.iter().filter(|f| f.1 == 0xA).collect();
    assert_eq!(pongs.len(), sent.len(), "only pongs were written");
    // Two seconds of flood at a one-slot-conservative 5 a second, and the last.
    assert!(pongs.len() >= 8, "only {} pongs got through", pongs.len());
    assert_eq!(
        pongs.last().unwrap().2,
        format!("ping-{}", PINGS - 1).into_bytes(),
        "the pong after the flood answers the latest ping"
    );
    let st = s.stats();
    assert_eq!(st.pings_received, PINGS as u64);
    assert!(st.pongs_delayed > 0, "{st:?}");
    assert!(st.pongs_coalesced > 0, "{st:?}");
    assert_eq!(
        st.pongs_sent + st.pongs_coalesced + st.pongs_abandoned,
        st.pings_received,
        "{st:?}"
    );
    assert_eq!(st.pongs_sent as usize, pongs.len());
    // What the budget admitted is exactly what was written.
    assert_eq!(
        budget.stats(limits.messages).unwrap().admitted as usize,
        sent.len()
    );
}
