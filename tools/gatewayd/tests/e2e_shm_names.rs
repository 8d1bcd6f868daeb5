//! A client name's orders outlive the hub's hold on the name (issue 43): the
//! `ergon-gateway` process against the venue emulator's Binance Spot profile
//! (orders over its WebSocket API, so that order updates flow), strategies
//! attached over shared memory in this process.
//!
//! The hub drops a name whose processes are gone when a new name needs its
//! `--max-clients` slot (or `--keep` after its last request settled); the
//! daemon chapter says "its ids stay its name's in the owners file". On main
//! they did not: `Hub::owner` looked this gateway life's ids up in the served
//! clients' blocks only, so the name's next process got `NotYours` for a cancel
//! of its own resting order, and that order's updates went to no one.

#[path = "common/ready.rs"]
mod ready;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ergon_core::Class;
use ergon_gateway::shm::{read_stats, Call, ShmClient, ShmEvent};
use ergon_venue_sim::{Config, Server};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, NewOrder, OrderRef, OrderState, OrderType, Side, Symbol, TimeInForce,
};

struct Gw(Child);

impl Drop for Gw {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn symbol() -> Symbol<'static> {
    Symbol::new("BTCUSDT").expect("symbol")
}

fn order(id: ClientOrderId) -> NewOrder<'static> {
    NewOrder {
        symbol: symbol(),
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Decimal::new("49000.00").ok(),
        quantity: Decimal::new("0.001").expect("decimal"),
        client_order_id: id,
        reduce_only: false,
    }
}

fn cancel(id: ClientOrderId) -> Call<'static> {
    Call::Cancel(OrderRef {
        symbol: symbol(),
        client_order_id: id,
    })
}

/// Starts `ergon-gateway` named `name` against `s` with `extra` flags; returns
/// it once ready (its stdout kept open).
fn gateway(
    s: &Server,
    name: &str,
    extra: &[&str],
) -> (Gw, std::io::BufReader<std::process::ChildStdout>) {
    let a = &s.config().accounts[0];
    let mut child = Command::new(env!("CARGO_BIN_EXE_ergon-gateway"))
        .args(["--venue", "binance-spot", "--base"])
        .arg(format!("http://{}", s.addr()))
        .args(["--api-key", &a.api_key, "--api-secret", &a.secret])
        .args(["--name", name])
        .args(extra)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn ergon-gateway");
    let out = ready::ready(&mut child, name).expect("the gateway starts");
    (Gw(child), out)
}

/// Every event `c` reads until the final event of `tag` (bounded wait on real
/// processes), that one last.
fn until_final(c: &mut ShmClient, tag: u64) -> Vec<ShmEvent> {
    let until = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    while Instant::now() < until {
        c.wait(50);
        while let Some((ev, _)) = c.poll() {
            seen.push(ev);
            if ev.tag() == tag && ev.is_final() {
                return seen;
            }
        }
    }
    panic!("no final event for {tag}; read {seen:?}");
}

/// The final event of `tag`.
fn final_of(c: &mut ShmClient, tag: u64) -> ShmEvent {
    *until_final(c, tag).last().expect("one")
}

/// Whether `evs` hold an update of order `id` (as the order or the one it ended).
fn updates_of(evs: &[ShmEvent], id: ClientOrderId) -> Vec<OrderState> {
    evs.iter()
        .filter_map(|ev| match ev {
            ShmEvent::OrderUpdate(x)
                if x.client_order_id == id || x.orig_client_order_id == Some(id) =>
            {
                Some(x.state)
            }
            _ => None,
        })
        .collect()
}

/// The gateway's stats once `pred` holds for them (they are published every
/// 100 ms; bounded).
fn stats_until(name: &str, pred: impl Fn(&str) -> bool) -> String {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let t = read_stats(name).unwrap_or_default();
        if pred(&t) || Instant::now() > until {
            return t;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_dropped_names_orders_stay_its_own_in_whichever_slot_it_comes_back() {
    let s = Server::start(Config::binance_spot()).expect("emulator");
    let name = format!("names-{}", std::process::id());
    let (_gw, _out) = gateway(&s, &name, &["--max-clients", "2", "--order-entry", "ws"]);
    // bob in slot 0, alice in slot 1; alice's order rests.
    let bob = ShmClient::attach(&name, "bob", false).expect("attach bob");
    let mut alice = ShmClient::attach(&name, "alice", false).expect("attach alice");
    let id = alice.next_client_order_id().expect("id");
    alice
        .submit(&Call::NewOrder(order(id)), Class::Normal, 1)
        .expect("submit");
    assert_eq!(final_of(&mut alice, 1), ShmEvent::Applied { tag: 1 });
    // alice's process goes, then bob's: both names are kept, detached.
    drop(alice);
    stats_until(&name, |t| t.contains("client alice detached"));
    drop(bob);
    let t = stats_until(&name, |t| t.contains("client bob detached"));
    assert!(t.contains("client alice detached"), "{t}");
    // carol needs a slot: alice's, detached longest, goes (its ids stay its name's).
    let mut carol = ShmClient::attach(&name, "carol", false).expect("attach carol");
    let t = stats_until(&name, |t| !t.contains("client alice "));
    assert!(!t.contains("client alice "), "alice dropped for carol: {t}");
    carol.submit(&cancel(id), Class::Normal, 2).expect("submit");
    assert_eq!(
        final_of(&mut carol, 2),
        ShmEvent::NotYours { tag: 2 },
        "alice's order is not carol's"
    );
    // alice's next process lands in bob's slot (bob dropped for it), told new.
    let mut alice = ShmClient::attach(&name, "alice", false).expect("attach alice again");
    assert!(
        !alice.reattached(),
        "alice's name was dropped: a new region"
    );
    carol.submit(&cancel(id), Class::Normal, 3).expect("submit");
    assert_eq!(
        final_of(&mut carol, 3),
        ShmEvent::NotYours { tag: 3 },
        "nor while alice is served again"
    );
    // Its own order of the same gateway life: its to cancel (on main: NotYours),
    // and its updates reach it.
    alice.submit(&cancel(id), Class::Normal, 4).expect("submit");
    let mut seen = until_final(&mut alice, 4);
    assert_eq!(seen.last(), Some(&ShmEvent::Applied { tag: 4 }), "{seen:?}");
    let until = Instant::now() + Duration::from_secs(10);
    while !updates_of(&seen, id).contains(&OrderState::Canceled) && Instant::now() < until {
        alice.wait(50);
        while let Some((ev, _)) = alice.poll() {
            seen.push(ev);
        }
    }
    assert!(
        updates_of(&seen, id).contains(&OrderState::Canceled),
        "the cancel's update did not reach alice's process: {seen:?}"
    );
    // Nothing of alice's order reached carol.
    carol
        .submit(&Call::Account, Class::Normal, 5)
        .expect("submit");
    let other = until_final(&mut carol, 5);
    assert!(updates_of(&other, id).is_empty(), "{other:?}");
    drop((alice, carol));
    let r = s.stop();
    assert_eq!((r.executions, r.duplicates, r.cancels), (1, 0, 1), "{r:?}");
}
