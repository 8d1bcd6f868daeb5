//! Hyperliquid's WebSocket limits under arbitrary input: any bytes as an incoming
//! frame never panic, and only the error channel holds a bucket; any sequence of
//! user subscriptions, unsubscriptions, drops and polls keeps the tracked users
//! and the `ws_users` bucket in step, never above the limit, and never lets another
//! connection take a freed slot before its 60 s are over.

use ergon_core::{Budget, Spec};
use ergon_venues::hyperliquid_ws::{Config, HyperliquidWs, Track, WsAnswer};
use proptest::prelude::*;

const SEC: i64 = 1_000_000_000;

fn setup() -> (HyperliquidWs, Budget) {
    let mut b = Budget::builder();
    let ip = b.add("ip", Spec::gate()).unwrap();
    let ws = HyperliquidWs::new(&mut b, ip, Config::default()).unwrap();
    (ws, b.build(0).unwrap())
}

const FRAMES: [&str; 5] = [
    r#"{"channel":"error","data":"Cannot track more than 15 total users"}"#,
    r#"{"channel":"post","data":{"id":7,"response":{"type":"action","payload":{"status":"ok","response":{"type":"order","data":{"statuses":[{"resting":{"oid":1}},{"error":"bad"}]}}}}}}"#,
    r#"{"channel":"post","data":{"id":9,"response":{"type":"error","payload":"Invalid nonce"}}}"#,
    r#"{"channel":"subscriptionResponse","data":{"method":"subscribe","subscription":{"type":"userFills","user":"0x0000000000000000000000000000000000000000"}}}"#,
    r#"{"channel":"l2Book","data":{"coin":"BTC","levels":[[],[]]}}"#,
];

#[derive(Clone, Debug)]
enum Op {
    Track(u8, u8),
    Untrack(u8, u8),
    Close(u8),
    Wait(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..16, 0u8..3).prop_map(|(u, c)| Op::Track(u, c)),
        (0u8..16, 0u8..3).prop_map(|(u, c)| Op::Untrack(u, c)),
        (0u8..3).prop_map(Op::Close),
        (0u16..90).prop_map(Op::Wait),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, rng_seed: proptest::test_runner::RngSeed::Fixed(19), ..ProptestConfig::default() })]

    #[test]
    fn any_frame_never_panics_and_only_errors_hold(
        which in 0..FRAMES.len(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        cut in prop_oneof![Just(usize::MAX), 0usize..200],
        random in proptest::collection::vec(any::<u8>(), 0..200),
        use_random in proptest::bool::weighted(0.3),
    ) {
        let mut frame = if use_random { random } else { FRAMES[which].as_bytes().to_vec() };
        for (at, byte) in edits {
            if !frame.is_empty() {
                let i = at % frame.len();
                frame[i] = byte;
            }
        }
        frame.truncate(cut);
        let (mut ws, mut budget) = setup();
        let answer = ws.on_frame(&frame, &mut budget, 0);
        let held = budget.ids().any(|b| budget.stats(b).unwrap().held_until_ns.is_some());
        prop_assert!(!held || matches!(answer, WsAnswer::Refused(_)), "{answer:?} held a bucket");
        prop_assert!(budget.halted().next().is_none());
    }

    #[test]
    fn tracked_users_follow_the_model(ops in proptest::collection::vec(op(), 0..80)) {
        let (mut ws, mut budget) = setup();
        let mut now = 0i64;
        // The model: per slot, (user, conn, live subs, freed at).
        let mut model: Vec<(u8, u8, u32, Option<i64>)> = Vec::new();
        for op in ops {
            // Releases due now, in the model.
            model.retain(|s| s.3.is_none_or(|at| at + 60 * SEC > now));
            match op {
                Op::Track(u, c) => {
                    let got = ws.tracked.track(&mut budget, [u; 20], u64::from(c), now);
                    let live = model.iter().position(|s| s.0 == u && s.3.is_none());
                    let mine = model.iter().position(|s| s.3.is_some() && s.1 == c && s.0 == u)
                        .or_else(|| model.iter().position(|s| s.3.is_some() && s.1 == c));
                    let want = if let Some(i) = live {
                        model[i].2 += 1;
                        Some(Track::Shared)
                    } else if let Some(i) = mine {
                        model[i] = (u, c, 1, None);
                        Some(Track::Reused)
                    } else if model.len() < 10 {
                        model.push((u, c, 1, None));
                        Some(Track::New)
                    } else {
                        None
                    };
                    prop_assert_eq!(got.ok(), want);
                }
                Op::Untrack(u, c) => {
                    ws.tracked.untrack([u; 20], u64::from(c), now);
                    if let Some(s) = model.iter_mut().find(|s| s.0 == u && s.1 == c && s.3.is_none()) {
                        s.2 -= 1;
                        if s.2 == 0 {
                            s.3 = Some(now);
                        }
                    }
                }
                Op::Close(c) => {
                    ws.tracked.connection_closed(u64::from(c), now);
                    for s in model.iter_mut().filter(|s| s.1 == c) {
                        s.3.get_or_insert(now);
                        s.1 = u8::MAX;
                    }
                }
                Op::Wait(s) => {
                    now += i64::from(s) * SEC;
                    ws.tracked.poll(&mut budget, now);
                }
            }
            prop_assert!(ws.tracked.len() <= 10);
            prop_assert_eq!(budget.stats(ws.users).unwrap().used, ws.tracked.len() as u64);
        }
        ws.tracked.poll(&mut budget, now);
        model.retain(|s| s.3.is_none_or(|at| at + 60 * SEC > now));
        prop_assert_eq!(ws.tracked.len(), model.len());
    }
}
