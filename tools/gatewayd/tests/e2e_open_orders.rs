//! The daemon's open-orders polls are opt-in per client (issue 47, item 4): the
//! `ergon-gateway` process against the venue emulator's Binance Spot profile,
//! two strategies attached over shared memory in this process.
//!
//! A client that did not ask hears no `OpenOrders` event, and while no client
//! asks (and no order is unresolved) the emulator counts no `GET openOrders` at
//! all: on main every client got one twice a second and the daemon spent weight
//! 6 on each (720 of the IP's 6000 a minute) for nobody. A client that asks
//! gets them, listing its own orders only, and `--stats` shows what they cost.
//! And a client that does not say it speaks protocol 3 (every client of 2 or
//! older) is refused at attach, the message naming both versions.

#[path = "common/ready.rs"]
mod ready;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ergon_core::Class;
use ergon_gateway::shm::{raw_command, read_stats, AttachOptions, Call, ShmClient, ShmEvent};
use ergon_venue_sim::{Config, Server};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, NewOrder, OrderType, Side, Symbol, TimeInForce,
};

const OPEN_ORDERS: &str = "GET /api/v3/openOrders";

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

/// Places one resting order; its client order id once it is Applied.
fn rest_one(c: &mut ShmClient, tag: u64) -> ClientOrderId {
    let id = c.next_client_order_id().expect("id");
    c.submit(&Call::NewOrder(order(id)), Class::Normal, tag)
        .expect("submit");
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        c.wait(20);
        while let Some((ev, _)) = c.poll() {
            if ev.tag() == tag && ev.is_final() {
                assert_eq!(ev, ShmEvent::Applied { tag });
                return id;
            }
        }
    }
    panic!("no final event for {tag}");
}

/// The bodies of the OpenOrders events `c` hears for `ms`.
fn polls_heard(c: &mut ShmClient, ms: u64) -> Vec<String> {
    let until = Instant::now() + Duration::from_millis(ms);
    let mut heard = Vec::new();
    while Instant::now() < until {
        c.wait(20);
        while let Some((ev, body)) = c.poll() {
            if let ShmEvent::OpenOrders { .. } = ev {
                heard.push(String::from_utf8_lossy(body).into_owned());
            }
        }
    }
    heard
}

fn polls_counted(s: &Server) -> u64 {
    s.report()
        .by_endpoint
        .get(OPEN_ORDERS)
        .copied()
        .unwrap_or(0)
}

#[test]
fn open_orders_polls_go_only_to_a_client_that_asked_and_cost_nothing_otherwise() {
    let s = Server::start(Config::binance_spot()).expect("emulator");
    let a = &s.config().accounts[0];
    let name = format!("polls-{}", std::process::id());
    let mut child = Command::new(env!("CARGO_BIN_EXE_ergon-gateway"))
        .args(["--venue", "binance-spot", "--base"])
        .arg(format!("http://{}", s.addr()))
        .args(["--api-key", &a.api_key, "--api-secret", &a.secret])
        .args(["--name", &name])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn ergon-gateway");
    let _out = ready::ready(&mut child, &name).expect("the gateway starts");
    let _gw = Gw(child);

    // A client of protocol 2 says no protocol: refused, both versions named.
    let (_sock, answer, fds) = raw_command(&name, "attach old-client").expect("answer");
    assert!(
        answer.starts_with("err") && answer.contains("protocol 3") && answer.contains("protocol 2"),
        "{answer}"
    );
    assert!(
        fds.is_empty(),
        "no region to a client that would misread it"
    );

    // A quiet client: its order rests; it hears no poll, and none is sent
    // (nothing unresolved: the gateway's own Late detection needs none).
    let mut quiet = ShmClient::attach(&name, "quiet", false).expect("attach");
    let quiet_id = rest_one(&mut quiet, 1);
    let heard = polls_heard(&mut quiet, 1500);
    assert!(
        heard.is_empty(),
        "a client that did not ask heard {heard:?}"
    );
    assert_eq!(polls_counted(&s), 0, "{:?}", s.report().by_endpoint);

    // A client that asks: polls come (about two a second), listing its own
    // orders only, and --stats says what they cost.
    let with = AttachOptions::new().open_orders(true);
    let mut watcher = ShmClient::attach_with(&name, "watcher", with).expect("attach");
    let watcher_id = rest_one(&mut watcher, 2);
    let heard = polls_heard(&mut watcher, 1500);
    assert!(!heard.is_empty(), "a client that asked heard no poll");
    let last = heard.last().expect("one");
    assert!(last.lines().any(|l| l == watcher_id.as_str()), "{last:?}");
    assert!(
        !last.contains(quiet_id.as_str()),
        "another client's order: {last:?}"
    );
    assert!(polls_counted(&s) >= 1);
    let heard = polls_heard(&mut quiet, 100);
    assert!(heard.is_empty(), "the quiet client heard {heard:?}");
    let stats = read_stats(&name).expect("stats");
    let line = stats
        .lines()
        .find(|l| l.starts_with("open_orders "))
        .unwrap_or_else(|| panic!("no open_orders line in {stats}"));
    eprintln!("--stats: {line}");
    assert!(line.contains(" asked_by=1"), "{line}");
    // Binance Spot's openOrders of one symbol weighs 6 (its docs): the
    // weight bucket shows 6 a poll sent.
    let units: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.split_once('=').and_then(|(_, v)| v.parse().ok()))
        .collect();
    assert!(units.iter().any(|&u| u >= 6 && u % 6 == 0), "{line}");

    // It goes: the polls stop.
    drop(watcher);
    // A poll on the wire when it left lands meanwhile.
    assert!(polls_heard(&mut quiet, 700).is_empty());
    let before = polls_counted(&s);
    let heard = polls_heard(&mut quiet, 1200);
    assert!(heard.is_empty(), "{heard:?}");
    assert_eq!(polls_counted(&s), before, "polls after the last asker left");
}
