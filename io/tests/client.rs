//! The native client against a loopback server: round trips on a keep-alive pool,
//! connects charged to the budget, Busy and Invalid hand the ticket back.

mod common;

use common::driver::{order, Answer, Driver, SEC};
use common::server::Server;
use ergon_io::client::{ClientHandler, Error, PoolId, Refused, RequestId, Sent};
use ergon_io::core::{Class, Flight, Part};
use ergon_io::event_loop::Context;
use ergon_io::http::{InvalidRequest, Request};
use ergon_venues::response::Response;

#[test]
fn requests_reuse_one_keep_alive_connection() {
    let server = Server::start(|p| p.echo());
    let mut d = Driver::new(server.addr, |_| {});
    for i in 0..20 {
        let body = format!("id={i}");
        let (answer, _) = d.send(&order(&body), 10 * SEC);
        assert_eq!(
            answer,
            Answer::Response {
                status: 200,
                body: body.clone().into_bytes()
            }
        );
    }
    let c = *d.lp.client().counters();
    assert_eq!(
        (c.requests, c.responses, c.sent_no, c.sent_maybe),
        (20, 20, 0, 0)
    );
    assert_eq!(c.connected, 1, "{c:?}");
    // Every connect was charged to the connects bucket.
    assert_eq!(d.lp.budget().stats(d.connects).unwrap().used, c.connects);
    let log = server.log.lock().unwrap();
    assert_eq!(log.conns.len(), 1);
    assert_eq!(log.count(b"POST /api/v3/order HTTP/1.1\r\n"), 20);
}

#[test]
fn a_get_and_a_chunked_answer_round_trip() {
    let server = Server::start(|p| {
        while let Some(req) = p.read_request() {
            assert!(req.starts_with(b"GET /time HTTP/1.1\r\nHost: 127.0.0.1:"));
            assert!(!req
                .windows(15)
                .any(|w| w.eq_ignore_ascii_case(b"content-length:")));
            p.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=1\r\n{\"a\"\r\n2\r\n:1\r\n1\r\n}\r\n0\r\nT: v\r\n\r\n");
        }
    });
    let mut d = Driver::new(server.addr, |_| {});
    for _ in 0..3 {
        let (answer, _) = d.send(&Request::get("/time"), 10 * SEC);
        assert_eq!(
            answer,
            Answer::Response {
                status: 200,
                body: b"{\"a\":1}".to_vec()
            }
        );
    }
    assert_eq!(server.log.lock().unwrap().conns.len(), 1);
}

#[test]
fn connection_close_opens_a_fresh_connection_for_the_next_request() {
    let server = Server::start(|p| {
        if p.read_request().is_some() {
            p.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok");
        }
    });
    let mut d = Driver::new(server.addr, |_| {});
    for i in 0..3 {
        let body = format!("id={i}");
        let (answer, _) = d.send(&order(&body), 10 * SEC);
        assert_eq!(answer, Answer::ok(b"ok"));
    }
    let log = server.log.lock().unwrap();
    for i in 0..3 {
        assert_eq!(log.conns_with(format!("id={i}").as_bytes()), vec![i]);
    }
}

/// Sends two requests in the same turn on a pool of one connection.
struct Two {
    pool: PoolId,
    parts: [Part; 1],
    outcome: Vec<String>,
}

impl ClientHandler for Two {
    fn on_response(&mut self, cx: &mut Context<'_>, _: RequestId, r: Response<'_>, flight: Flight) {
        let now = cx.now();
        cx.budget().complete(flight, now).unwrap();
        self.outcome
            .push(format!("response {}", String::from_utf8_lossy(r.body)));
        cx.stop();
    }
    fn on_error(&mut self, cx: &mut Context<'_>, _: RequestId, _: Sent, e: Error) {
        self.outcome.push(format!("error {e}"));
        cx.stop();
    }
    fn on_ready(&mut self, cx: &mut Context<'_>, pool: PoolId) {
        let now = cx.now();
        let t1 = cx
            .budget()
            .try_charge(&self.parts, Class::Normal, now)
            .unwrap();
        let first = cx.request(pool, &order("id=1"), t1, now + 10 * SEC);
        assert!(first.is_ok());
        let t2 = cx
            .budget()
            .try_charge(&self.parts, Class::Normal, now)
            .unwrap();
        match cx.request(pool, &order("id=2"), t2, now + 10 * SEC) {
            Err(Refused::Busy(t)) => {
                cx.budget().refund(t, now).unwrap();
                self.outcome.push("busy".into());
            }
            other => panic!("expected Busy, got {other:?}"),
        }
        let t3 = cx
            .budget()
            .try_charge(&self.parts, Class::Normal, now)
            .unwrap();
        match cx.request(
            PoolId::clone(&self.pool),
            &Request {
                method: "BAD METHOD",
                ..Request::get("/")
            },
            t3,
            now + SEC,
        ) {
            Err(Refused::Busy(t)) => cx.budget().refund(t, now).unwrap(),
            other => panic!("expected Busy before validation, got {other:?}"),
        }
    }
}

#[test]
fn a_busy_pool_hands_the_ticket_back() {
    let server = Server::start(|p| p.echo());
    let mut d = Driver::new(server.addr, |_| {});
    let mut h = Two {
        pool: d.pool,
        parts: [Part::new(d.requests, 1)],
        outcome: Vec::new(),
    };
    d.lp.run(&mut h).unwrap();
    assert_eq!(
        h.outcome,
        vec!["busy".to_string(), "response id=1".to_string()]
    );
    // id=1 charged and sent; id=2 and the third refunded.
    assert_eq!(d.lp.budget().stats(d.requests).unwrap().used, 1);
    assert_eq!(server.log.lock().unwrap().count(b"id=2"), 0);
}

#[test]
fn an_invalid_or_late_request_hands_the_ticket_back_and_writes_nothing() {
    let server = Server::start(|p| p.echo());
    let mut d = Driver::new(server.addr, |_| {});
    d.wait_ready();
    let pool = d.pool;
    let parts = [Part::new(d.requests, 1)];
    d.run_until(|cx| {
        let now = cx.now();
        let t = cx.budget().try_charge(&parts, Class::Normal, now).unwrap();
        let headers = [("Content-Length", "5")];
        let bad = Request {
            headers: &headers,
            ..order("id=9")
        };
        match cx.request(pool, &bad, t, now + SEC) {
            Err(Refused::Invalid(t, InvalidRequest::ReservedHeader)) => {
                cx.budget().refund(t, now).unwrap()
            }
            other => panic!("expected Invalid, got {other:?}"),
        }
        let t = cx.budget().try_charge(&parts, Class::Normal, now).unwrap();
        match cx.request(pool, &order("id=late"), t, now) {
            Err(Refused::Expired(t)) => cx.budget().refund(t, now).unwrap(),
            other => panic!("expected Expired, got {other:?}"),
        }
        true
    });
    let (answer, _) = d.send(&order("id=10"), 10 * SEC);
    assert_eq!(answer, Answer::ok(b"id=10"));
    let log = server.log.lock().unwrap();
    assert_eq!(log.count(b"id=9"), 0);
    assert_eq!(log.count(b"id=late"), 0);
    assert_eq!(log.conns.len(), 1);
}

/// Every target that is not origin-form (`/...`, or `*` for OPTIONS) is refused
/// with `Refused::Invalid` and the ticket back: not a byte reaches the server.
fn refuses_targets_without_a_leading_slash(d: &mut Driver, server: &Server) {
    d.wait_ready();
    let pool = d.pool;
    let parts = [Part::new(d.requests, 1)];
    d.run_until(|cx| {
        for target in [
            "@other-host/x",
            "other-host/x",
            "http://evil/x",
            "*",
            "/a#b",
            "",
        ] {
            for method in ["GET", "DELETE"] {
                let now = cx.now();
                let t = cx.budget().try_charge(&parts, Class::Normal, now).unwrap();
                let req = Request {
                    method,
                    ..Request::get(target)
                };
                match cx.request(pool, &req, t, now + SEC) {
                    Err(Refused::Invalid(t, InvalidRequest::Target)) => cx.refund(t),
                    other => panic!("{method} {target:?}: expected Invalid, got {other:?}"),
                }
            }
        }
        true
    });
    assert_eq!(d.lp.budget().stats(d.requests).unwrap().used, 0);
    assert_eq!(server.log.lock().unwrap().total(), 0);
    assert_eq!(d.lp.client().counters().requests, 0);
}

#[test]
fn a_target_without_a_leading_slash_is_refused() {
    let server = Server::start(|p| p.echo());
    let mut d = Driver::new(server.addr, |_| {});
    refuses_targets_without_a_leading_slash(&mut d, &server);
}

/// The libcurl client: the same handler contract, and why it refuses POST.
#[cfg(feature = "curl")]
mod curl {
    use super::*;
    use common::driver::SentKind;
    use ergon_io::curl::{CurlConfig, CurlError};

    fn curl_pool(allow: bool) -> impl FnOnce(&mut ergon_io::client::PoolConfig) {
        move |pc| {
            pc.curl = Some(CurlConfig {
                curl_allow_non_idempotent_methods: allow,
            })
        }
    }

    #[test]
    fn gets_round_trip_over_one_keep_alive_connection() {
        let server = Server::start(|p| {
            while let Some(req) = p.read_request() {
                assert!(req.starts_with(b"GET /time HTTP/1.1\r\n"));
                p.write(b"HTTP/1.1 200 OK\r\nX-Used: 7\r\nContent-Length: 2\r\n\r\nok");
            }
        });
        let mut d = Driver::new(server.addr, curl_pool(false));
        for _ in 0..5 {
            let (answer, _) = d.send(&Request::get("/time"), 10 * SEC);
            assert_eq!(answer, Answer::ok(b"ok"));
        }
        let c = *d.lp.client().counters();
        assert_eq!((c.requests, c.responses, c.connects), (5, 5, 1), "{c:?}");
        // The socket libcurl opened was charged as a connect.
        assert_eq!(d.lp.budget().stats(d.connects).unwrap().used, 1);
        assert_eq!(server.log.lock().unwrap().conns.len(), 1);
    }

    #[test]
    fn a_native_and_a_libcurl_pool_share_one_loop_its_ids_and_its_counters() {
        let server = Server::start(|p| {
            while p.read_request().is_some() {
                p.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            }
        });
        let mut d = Driver::new(server.addr, |_| {});
        let native = d.pool;
        let mut pc = ergon_io::client::PoolConfig::new(server.addr, server.addr.to_string());
        pc.connect_parts = vec![Part::new(d.connects, 1)];
        curl_pool(false)(&mut pc);
        let curl = d.lp.add_pool(pc).unwrap();
        let mut ids = Vec::new();
        for pool in [native, curl, native, curl, curl, native] {
            d.pool = pool;
            let (answer, _) = d.send(&Request::get("/time"), 10 * SEC);
            assert_eq!(answer, Answer::ok(b"ok"), "{pool:?}");
            ids.push(d.last_id.unwrap().0);
        }
        // One id sequence across both transports: no id is given twice.
        assert_eq!(ids, [1, 2, 3, 4, 5, 6]);
        let c = *d.lp.client().counters();
        assert_eq!((c.requests, c.responses, c.sent_no), (6, 6, 0), "{c:?}");
        // One native connection and one libcurl socket, each charged once.
        assert_eq!(c.connects, 2, "{c:?}");
        assert_eq!(d.lp.budget().stats(d.connects).unwrap().used, 2);
        assert_eq!(server.log.lock().unwrap().conns.len(), 2);
        // Each pool answers for its own transport.
        assert_eq!(d.lp.client().idle(curl), 1);
        assert_eq!(d.lp.client().idle(native), 1);
        assert_eq!(d.lp.client().in_flight(), 0);
    }

    #[test]
    fn libcurl_sends_the_same_post_twice_when_a_reused_connection_dies() {
        // Connection 0 answers the first request, then reads the second and closes
        // without a reply byte; later connections answer.
        let server = Server::start(|p| {
            if p.no == 0 {
                let _ = p.read_request();
                p.respond(b"first");
                let _ = p.read_request();
            } else {
                p.echo();
            }
        });
        let mut d = Driver::new(server.addr, curl_pool(true));
        let (first, _) = d.send(&order("id=1"), 10 * SEC);
        assert_eq!(first, Answer::ok(b"first"));
        let (second, _) = d.send(&order("id=2"), 10 * SEC);
        assert_eq!(second, Answer::ok(b"id=2"));
        assert_eq!(d.resent, 1);
        // One request from the caller, two on the wire: a duplicated order.
        let log = server.log.lock().unwrap();
        assert_eq!(log.count(b"id=2"), 2);
        assert_eq!(log.conns_with(b"id=2"), vec![0, 1]);
    }

    #[test]
    fn a_get_libcurl_sends_twice_is_charged_twice_and_reported_resent() {
        // Connection 0 answers the first GET, then reads the second one's head and
        // closes without a reply byte: libcurl re-sends it on a new connection.
        let server = Server::start(|p| {
            if p.no == 0 {
                let _ = p.read_request();
                p.respond(b"first");
                let _ = p.read_request();
            } else {
                while p.read_request().is_some() {
                    p.respond(b"second");
                }
            }
        });
        let mut d = Driver::new(server.addr, curl_pool(false));
        let (first, _) = d.send(&Request::get("/x?n=1"), 10 * SEC);
        assert_eq!((first, d.resent), (Answer::ok(b"first"), 0));
        let (second, _) = d.send(&Request::get("/x?n=2"), 10 * SEC);
        assert_eq!(second, Answer::ok(b"second"));
        // Two copies on the wire, and the answer says one of them was libcurl's.
        assert_eq!(server.log.lock().unwrap().count(b"GET /x?n=2 "), 2);
        assert_eq!(d.resent, 1);
        assert_eq!(d.lp.client().counters().resent, 1);
        // Charged for both requests the caller sent and for the copy.
        assert_eq!(d.lp.budget().stats(d.requests).unwrap().used, 3);
    }

    #[test]
    fn a_curl_pool_refuses_post_unless_allowed() {
        let server = Server::start(|p| p.echo());
        let mut d = Driver::new(server.addr, curl_pool(false));
        for method in ["POST", "PUT", "PATCH"] {
            let req = Request {
                method,
                ..order("id=refused")
            };
            let (answer, _) = d.send(&req, 10 * SEC);
            assert_eq!(
                answer,
                Answer::Error {
                    sent: SentKind::No,
                    error: Error::CurlResend
                },
                "{method}"
            );
        }
        // Refunded: nothing left.
        assert_eq!(d.lp.budget().stats(d.requests).unwrap().used, 0);
        for method in ["GET", "DELETE", "OPTIONS", "HEAD"] {
            let (answer, _) = d.send(
                &Request {
                    method,
                    ..Request::get("/x")
                },
                10 * SEC,
            );
            assert!(
                matches!(answer, Answer::Response { status: 200, .. }),
                "{method}: {answer:?}"
            );
        }
        let log = server.log.lock().unwrap();
        assert_eq!(log.count(b"id=refused"), 0);
        assert_eq!(log.count(b"DELETE /x HTTP/1.1\r\n"), 1);
    }

    #[test]
    fn an_invalid_request_is_refused_as_by_the_native_client() {
        let server = Server::start(|p| p.echo());
        let mut d = Driver::new(server.addr, curl_pool(false));
        d.wait_ready();
        let pool = d.pool;
        let parts = [Part::new(d.requests, 1)];
        d.run_until(|cx| {
            let now = cx.now();
            let t = cx.budget().try_charge(&parts, Class::Normal, now).unwrap();
            let headers = [("Content-Length", "5")];
            let bad = Request {
                headers: &headers,
                ..Request::get("/x")
            };
            match cx.request(pool, &bad, t, now + SEC) {
                Err(Refused::Invalid(t, InvalidRequest::ReservedHeader)) => cx.refund(t),
                other => panic!("expected Invalid, got {other:?}"),
            }
            true
        });
        assert_eq!(d.lp.budget().stats(d.requests).unwrap().used, 0);
        assert_eq!(server.log.lock().unwrap().total(), 0);
    }

    #[test]
    fn a_target_without_a_leading_slash_is_refused_by_libcurl_too() {
        let server = Server::start(|p| p.echo());
        let mut d = Driver::new(server.addr, curl_pool(false));
        refuses_targets_without_a_leading_slash(&mut d, &server);
    }

    #[test]
    fn a_refused_connect_is_sent_no() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut d = Driver::new(addr, curl_pool(false));
        let (answer, _) = d.send(&Request::get("/"), 10 * SEC);
        let Answer::Error { sent, error } = answer else {
            panic!("{answer:?}");
        };
        assert_eq!(sent, SentKind::No);
        assert!(
            matches!(error, Error::Curl(CurlError::Transfer(7))),
            "{error:?}"
        );
    }
}
