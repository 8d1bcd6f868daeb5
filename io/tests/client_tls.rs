//! The native client over TLS (rustls) against a rustls server thread on loopback,
//! with certificates made in the test: a full round trip on one keep-alive
//! connection; a wrong name or an untrusted certificate fails the handshake before
//! any request byte is written, so every ticket comes back unsent.
#![cfg(feature = "tls")]

mod common;

use common::driver::{order, Answer, Driver, SEC};
use common::server::Server;
use common::tls::Pki;
use ergon_io::client::{ClientHandler, Error, PoolId, RequestId, Sent};
use ergon_io::core::{Class, Flight, Part};
use ergon_io::event_loop::Context;
use ergon_io::tls::{TlsConfig, TlsError};
use ergon_venues::response::Response;

#[test]
fn requests_round_trip_over_one_tls_connection() {
    let pki = Pki::new();
    let server = Server::start_tls(pki.server.clone(), |p| p.echo());
    let client = pki.client("localhost");
    let mut d = Driver::new(server.addr, |pc| pc.tls = Some(client));
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
    assert_eq!((c.requests, c.responses, c.connected), (20, 20, 1), "{c:?}");
    // Session tickets arrive on the idle connection; they must not end it.
    assert_eq!(c.stale, 0, "{c:?}");
    let log = server.log.lock().unwrap();
    assert_eq!(log.conns.len(), 1);
    assert_eq!(log.count(b"POST /api/v3/order HTTP/1.1\r\n"), 20);
}

#[test]
fn a_large_response_crosses_many_records() {
    let pki = Pki::new();
    let big: Vec<u8> = (0..200_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let body = big.clone();
    let server = Server::start_tls(pki.server.clone(), move |p| {
        while p.read_request().is_some() {
            p.respond(&body);
        }
    });
    let client = pki.client("localhost");
    let mut d = Driver::new(server.addr, |pc| pc.tls = Some(client));
    for _ in 0..3 {
        let (answer, _) = d.send(&order("id=big"), 10 * SEC);
        assert_eq!(
            answer,
            Answer::Response {
                status: 200,
                body: big.clone()
            }
        );
    }
}

/// Tries to send every turn until a connect error arrives.
struct Refusing {
    pool: PoolId,
    parts: [Part; 1],
    busy: u64,
    errors: Vec<Error>,
    turns: u64,
}

impl ClientHandler for Refusing {
    fn on_response(&mut self, _: &mut Context<'_>, _: RequestId, _: Response<'_>, _: Flight) {
        panic!("a request went out over an unverified connection");
    }
    fn on_error(&mut self, _: &mut Context<'_>, _: RequestId, _: Sent, _: Error) {
        panic!("a request went out over an unverified connection");
    }
    fn on_connect_error(&mut self, cx: &mut Context<'_>, _: PoolId, e: Error) {
        self.errors.push(e);
        if self.errors.len() == 2 {
            cx.stop();
        }
    }
    fn on_turn(&mut self, cx: &mut Context<'_>) {
        self.turns += 1;
        assert!(self.turns < 50_000_000, "no connect error came");
        let now = cx.now();
        let t = cx
            .budget()
            .try_charge(&self.parts, Class::Normal, now)
            .unwrap();
        match cx.request(self.pool, &order("id=never"), t, now + 10 * SEC) {
            Ok(_) => panic!("a request was accepted on an unverified connection"),
            Err(refused) => {
                self.busy += 1;
                cx.refund(refused.into_ticket());
            }
        }
    }
}

fn refused_handshake(pki: &Pki, client: TlsConfig) -> Vec<Error> {
    let server = Server::start_tls(pki.server.clone(), |p| p.echo());
    let mut d = Driver::new(server.addr, |pc| {
        pc.tls = Some(client);
        pc.reconnect_delay_ns = 1_000_000;
    });
    let mut h = Refusing {
        pool: d.pool,
        parts: [Part::new(d.requests, 1)],
        busy: 0,
        errors: Vec::new(),
        turns: 0,
    };
    d.lp.run(&mut h).unwrap();
    assert!(h.busy > 0);
    let c = *d.lp.client().counters();
    assert_eq!(
        (c.requests, c.sent_no, c.sent_maybe, c.connected),
        (0, 0, 0, 0)
    );
    // Every ticket came back unsent and was refunded.
    assert_eq!(d.lp.budget().stats(d.requests).unwrap().used, 0);
    assert!(server.wait_for(|l| l.tls_failures >= 2));
    let log = server.log.lock().unwrap();
    assert_eq!(log.total(), 0, "plaintext reached the server");
    h.errors
}

#[test]
fn a_wrong_server_name_fails_before_any_request_byte() {
    let pki = Pki::new();
    let errors = refused_handshake(&pki, pki.client("venue.example"));
    assert_eq!(errors, vec![Error::Tls(TlsError::NotValidForName); 2]);
}

#[test]
fn an_untrusted_certificate_fails_before_any_request_byte() {
    let errors = refused_handshake(&Pki::new(), Pki::stranger("localhost"));
    assert_eq!(errors, vec![Error::Tls(TlsError::UnknownIssuer); 2]);
}

#[test]
fn the_compiled_in_roots_do_not_trust_a_private_ca() {
    let errors = refused_handshake(&Pki::new(), TlsConfig::webpki_roots("localhost").unwrap());
    assert_eq!(errors, vec![Error::Tls(TlsError::UnknownIssuer); 2]);
}
