//! A cancel-replace's parts through shared memory (issue 39): the `ergon-gateway`
//! process against the venue emulator's Binance Spot profile, a strategy
//! attached over shared memory in this process. Its cancel-replace whose cancel
//! runs and whose new order fails (-2021) ends with one final event,
//! `BatchSettled`, whose body says each part's fate: the new order refused, the
//! cancel done. On main the hub dropped the parts and the final event, and the
//! client's request never ended.
//!
//! And every reconcile ends (issue 39, item 3): an order whose outcome is unknown
//! (the emulator closes the connection before executing it) is being reconciled
//! when a ban of the IP starts: it ends Unresolved within seconds, and the
//! gateway, sent SIGTERM during the ban, exits 0. On main its queries were
//! refused by the halt every 100 ms for ever, the request held its slot, and the
//! stop waited for `in_flight() == 0` for ever.

#[path = "common/exit.rs"]
mod exit;
#[path = "common/ready.rs"]
mod ready;

use std::net::{IpAddr, Ipv4Addr};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ergon_core::Class;
use ergon_gateway::shm::{item_fates, Call, ShmClient, ShmEvent, PROTOCOL};
use ergon_gateway::ItemFate;
use ergon_venue_sim::{Config, Fault, Server};
use ergon_venues::endpoint::{
    CancelReplace, ClientOrderId, Decimal, NewOrder, OrderType, Side, Symbol, TimeInForce,
};

struct Gw(Child);

impl Drop for Gw {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn order(id: ClientOrderId) -> NewOrder<'static> {
    NewOrder {
        symbol: Symbol::new("BTCUSDT").expect("symbol"),
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Decimal::new("49000.00").ok(),
        quantity: Decimal::new("0.001").expect("decimal"),
        client_order_id: id,
        reduce_only: false,
    }
}

/// The final event of `tag` and its body (the other events on the way are skipped).
fn final_of(c: &mut ShmClient, tag: u64) -> (ShmEvent, Vec<u8>) {
    let (ev, body, _) = final_and_items(c, tag);
    (ev, body)
}

/// The final event of `tag`, its body, and the `Item` events of `tag` before it.
fn final_and_items(c: &mut ShmClient, tag: u64) -> (ShmEvent, Vec<u8>, Vec<ShmEvent>) {
    let until = Instant::now() + Duration::from_secs(20);
    let mut items = Vec::new();
    while Instant::now() < until {
        c.wait(50);
        while let Some((ev, body)) = c.poll() {
            if ev.tag() == tag && matches!(ev, ShmEvent::Item { .. }) {
                items.push(ev);
            }
            if ev.tag() == tag && ev.is_final() {
                return (ev, body.to_vec(), items);
            }
        }
    }
    panic!("no final event for {tag}");
}

/// Starts `ergon-gateway` named `name` against `s`; returns it once ready (its
/// stdout kept open).
fn gateway(s: &Server, name: &str) -> (Gw, std::io::BufReader<std::process::ChildStdout>) {
    let a = &s.config().accounts[0];
    let mut child = Command::new(env!("CARGO_BIN_EXE_ergon-gateway"))
        .args(["--venue", "binance-spot", "--base"])
        .arg(format!("http://{}", s.addr()))
        .args(["--api-key", &a.api_key, "--api-secret", &a.secret])
        .args(["--name", name])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn ergon-gateway");
    let out = ready::ready(&mut child, name).expect("the gateway starts");
    (Gw(child), out)
}

#[test]
fn a_cancel_replace_over_shared_memory_ends_with_each_parts_fate() {
    assert_eq!(PROTOCOL, 3);
    let s = Server::start(Config::binance_spot()).expect("emulator");
    let name = format!("parts-{}", std::process::id());
    let (_gw, _out) = gateway(&s, &name);
    let mut c = ShmClient::attach(&name, "parts", false).expect("attach");
    let (old, new) = (
        c.next_client_order_id().expect("id"),
        c.next_client_order_id().expect("id"),
    );
    c.submit(&Call::NewOrder(order(old)), Class::Normal, 1)
        .expect("submit");
    assert_eq!(final_of(&mut c, 1).0, ShmEvent::Applied { tag: 1 });
    c.submit(&Call::NewOrder(order(new)), Class::Normal, 2)
        .expect("submit");
    assert_eq!(final_of(&mut c, 2).0, ShmEvent::Applied { tag: 2 });
    // `new` rests: the venue cancels `old`, then refuses the new order (-2010).
    let cr = CancelReplace {
        cancel: old,
        new: order(new),
    };
    c.submit(&Call::CancelReplace(cr), Class::Normal, 3)
        .expect("submit");
    let (ev, body, items) = final_and_items(&mut c, 3);
    assert_eq!(ev, ShmEvent::BatchSettled { tag: 3 });
    // Issue 47: as in-process, one Item per part before the BatchSettled.
    let item = |item, fate| ShmEvent::Item { tag: 3, item, fate };
    assert_eq!(
        items,
        [item(0, ItemFate::Rejected), item(1, ItemFate::Applied)]
    );
    let fates: Vec<_> = item_fates(&body).collect();
    assert_eq!(
        fates,
        [Ok((0, ItemFate::Rejected)), Ok((1, ItemFate::Applied))],
        "item 0 the new order, item 1 the cancel"
    );
    assert_eq!(c.in_flight(), 0, "the request ended");
    drop(c);
    let r = s.stop();
    assert_eq!((r.duplicates, r.cancels), (0, 1), "{r:?}");
}

#[test]
fn a_reconcile_under_a_ban_ends_and_sigterm_during_the_ban_exits() {
    let mut cfg = Config::binance_spot();
    // The first order is read, counted, and its connection closed unexecuted.
    cfg.faults.script = vec![(1, Fault::CloseBeforeExecute)];
    let s = Server::start(cfg).expect("emulator");
    let name = format!("banrec-{}", std::process::id());
    // An earlier process of this id (another run) left the ban below recorded
    // in its runtime directory's halts file: a start on it is halted.
    if let Ok(dir) = ergon_gateway::shm::rundir::runtime_dir(None, &name) {
        let _ = std::fs::remove_dir_all(dir);
    }
    let (mut gw, _out) = gateway(&s, &name);
    let mut c = ShmClient::attach(&name, "banrec", false).expect("attach");
    let id = c.next_client_order_id().expect("id");
    c.submit(&Call::NewOrder(order(id)), Class::Normal, 1)
        .expect("submit");
    // Reconciling: its queries go out (the venue's bound is seconds away).
    let until = Instant::now() + Duration::from_secs(20);
    let mut reconciling = false;
    while !reconciling && Instant::now() < until {
        c.wait(50);
        while let Some((ev, _)) = c.poll() {
            reconciling |= ev == ShmEvent::Reconciling { tag: 1 };
        }
    }
    assert!(reconciling, "the order's outcome is unknown");
    s.ban(IpAddr::V4(Ipv4Addr::LOCALHOST), 600_000);
    let t0 = Instant::now();
    let (ev, _) = final_of(&mut c, 1);
    assert_eq!(ev, ShmEvent::Unresolved { tag: 1 }, "halted while unknown");
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
    drop(c);
    // SIGTERM during the ban: nothing is in flight, it exits.
    let pid = gw.0.id() as libc::pid_t;
    // SAFETY: a signal to our own child, still running.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = exit::exited(&mut gw.0, Duration::from_secs(20))
        .expect("SIGTERM during a ban did not stop the gateway");
    assert!(status.success(), "{status:?}");
    let r = s.stop();
    assert_eq!((r.executions, r.duplicates), (0, 0), "{r:?}");
}
