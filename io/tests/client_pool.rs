//! The pool: connections opened ahead of need, each connect charged to the budget
//! (and refused when the budget says so), idle timeout, over real sockets. Maximum
//! age, deadlines and backoff on jumped time: io/tests/pool_sim.rs.

mod common;

use common::driver::{order, Answer, Driver, SEC};
use common::server::Server;
use ergon_io::core::Spec;

#[test]
fn connections_open_ahead_of_need_and_each_connect_is_charged() {
    let server = Server::start(|p| p.echo());
    let mut d = Driver::new(server.addr, |pc| pc.connections = 3);
    let pool = d.pool;
    d.run_until(|cx| cx.client().idle(pool) == 3);
    assert!(server.wait_for(|l| l.conns.len() == 3));
    assert_eq!(
        server.log.lock().unwrap().total(),
        0,
        "a request went out unasked"
    );
    assert_eq!(d.lp.budget().stats(d.connects).unwrap().used, 3);
    let (a, _) = d.send(&order("id=1"), 10 * SEC);
    assert_eq!(a, Answer::ok(b"id=1"));
}

#[test]
fn a_connect_the_budget_refuses_is_not_made() {
    // The server closes every connection after one answer; the connect bucket
    // allows one connect per minute, so the second is refused and never made.
    let server = Server::start(|p| {
        if p.read_request().is_some() {
            p.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let mut b = ergon_io::core::Budget::builder();
    let requests = b
        .add("requests", Spec::sliding(1000, 60 * SEC, 60))
        .unwrap();
    let connects = b.add("connects", Spec::sliding(1, 60 * SEC, 60)).unwrap();
    let budget = b.build(ergon_io::clock::now_ns()).unwrap();
    let mut lp = ergon_io::event_loop::EventLoop::new(Default::default(), budget).unwrap();
    let mut pc = ergon_io::client::PoolConfig::new(server.addr, "x");
    pc.connect_parts = vec![ergon_io::core::Part::new(connects, 1)];
    let pool = lp.add_pool(pc).unwrap();
    let mut d = Driver {
        lp,
        pool,
        requests,
        connects,
        resent: 0,
        last_id: None,
    };
    let (a, _) = d.send(&order("id=1"), 10 * SEC);
    assert_eq!(
        a,
        Answer::Response {
            status: 200,
            body: vec![]
        }
    );
    d.run_until(|cx| cx.client().counters().connects_limited >= 2);
    let c = *d.lp.client().counters();
    assert_eq!((c.connects, c.connected), (1, 1));
    assert_eq!(d.lp.client().idle(pool), 0);
    // No wait for a late connection: the counters say no other connect started.
    assert_eq!(server.log.lock().unwrap().conns.len(), 1);
}

#[test]
fn an_idle_connection_is_replaced_after_the_idle_timeout() {
    let server = Server::start(|p| p.echo());
    let mut d = Driver::new(server.addr, |pc| pc.idle_timeout_ns = 100_000_000);
    let (a, _) = d.send(&order("id=1"), 10 * SEC);
    assert!(matches!(a, Answer::Response { .. }));
    // Let it sit idle past the timeout: it is closed and a fresh one opened.
    let pool = d.pool;
    d.run_until(|cx| cx.client().counters().connected >= 2 && cx.client().idle(pool) == 1);
    let (a, _) = d.send(&order("id=2"), 10 * SEC);
    assert!(matches!(a, Answer::Response { .. }));
    let log = server.log.lock().unwrap();
    assert_eq!(log.conns_with(b"id=1"), vec![0]);
    assert_eq!(log.conns_with(b"id=2"), vec![1]);
}
