//! A key revoked under a logged-on WebSocket API lane, for any Binance venue:
//! the order that meets the revocation is rejected, the revocation frame halts
//! order entry with a named reason, and the next order is refused locally. The
//! emulator's truth is the check (its revocations and executions).

use std::sync::Arc;

use ergon_core::Why;
use ergon_gateway::{self as gateway, Account, Api, Event, Gateway, Prepared, Strategy};
use ergon_io::client::PoolId;
use ergon_io::event_loop::EventLoop;
use ergon_venue_sim::{Server, ED25519_TEST_API_KEY};

use crate::chain::{text, Place};

const MS: i64 = 1_000_000;

/// Places `rv-1`; once it is applied, the venue revokes the key and `rv-2` meets
/// it; once the lane says why, `rv-3` is tried and must be refused locally.
struct RevokeProbe<E> {
    server: Arc<Server>,
    place: Place<E>,
    req: Prepared,
    step: u8,
    events: Vec<String>,
    third: Option<Event<'static>>,
    why: Option<String>,
}

impl<E: Account> Strategy<E> for RevokeProbe<E> {
    fn on_event(&mut self, api: &mut Api<'_, '_, E>, ev: Event<'_>) {
        self.events.push(text(&ev));
        if ev.is_final() && ev.tag() == 1 {
            assert!(self.server.revoke_api_key(ED25519_TEST_API_KEY));
            assert_eq!((self.place)(&mut self.req, api, "rv-2", 2), None);
        }
    }

    fn on_turn(&mut self, api: &mut Api<'_, '_, E>) {
        let now = api.now();
        if self.step == 0 {
            self.step = 1;
            assert_eq!((self.place)(&mut self.req, api, "rv-1", 1), None);
        }
        let why = api.ws_api().and_then(|l| l.why()).map(str::to_string);
        if self.step == 1 && why.is_some() {
            self.step = 2;
            self.why = why;
            self.third = (self.place)(&mut self.req, api, "rv-3", 3);
            api.stop();
        }
        let _ = api.set_timer(1, now + 10 * MS);
    }
}

/// Runs the revocation on `server` through the gateway `started` (its lane
/// logged on with [`ED25519_TEST_API_KEY`]), orders placed by `place`, and checks
/// what the module doc says.
pub fn a_revoked_logon_halts_order_entry<E: Account>(
    server: &Arc<Server>,
    started: (EventLoop, Gateway<E>, PoolId),
    place: Place<E>,
) {
    let (mut lp, gw, pool) = started;
    let strategy = RevokeProbe {
        server: Arc::clone(server),
        place,
        req: Prepared::with_capacity(1024),
        step: 0,
        events: Vec::new(),
        third: None,
        why: None,
    };
    let control = Arc::new(gateway::Control::default());
    let d = gateway::run(&mut lp, gw, pool, strategy, control).unwrap();
    let st = &d.strategy;
    assert_eq!(st.events.first().map(String::as_str), Some("Applied 1"));
    assert_eq!(
        st.events.get(1).map(String::as_str),
        Some("Rejected { tag: 2 }"),
        "{:?}",
        st.events
    );
    let why = st.why.as_deref().unwrap_or("");
    assert!(
        why.contains("revoked") && why.contains("session.logon") && why.contains("halted"),
        "{why}"
    );
    assert!(
        matches!(
            st.third,
            Some(Event::Limited {
                tag: 3,
                why: Why::Halted,
                ..
            })
        ),
        "{:?}",
        st.third
    );
    let lane = d.gateway.ws_api().unwrap();
    assert_eq!(lane.stats().revoked, 1);
    assert!(!lane.ready(), "no order over a revoked session");
    let r = server.report();
    assert_eq!(r.ws.api_revocations, 1);
    assert_eq!(r.executions, 1, "rv-1 only");
}
