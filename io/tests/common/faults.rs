//! Faults at every point of an exchange, over any transport. For each: the server
//! received the request at most once (counted by the id in its body), Sent::No only
//! when not one byte reached the server, the faulted connection is never reused
//! (the next request arrives on a later connection), and nothing panics.

use ergon_io::client::Error;
use ergon_io::http::{Conn, Limits};

use super::driver::{order, Answer, Driver, SentKind, SEC};
use super::server::{Peer, Server};

/// Plain TCP, or TLS with a server config and a client that trusts it.
#[derive(Clone)]
pub enum Transport {
    Plain,
    #[cfg(feature = "tls")]
    Tls(
        std::sync::Arc<rustls::ServerConfig>,
        ergon_io::tls::TlsConfig,
    ),
}

/// What the server does on its first connection; later ones echo.
fn run_case(
    t: &Transport,
    name: &str,
    fault: impl Fn(&mut Peer) + Send + Sync + 'static,
) -> Answer {
    let behaviour = move |p: &mut Peer| if p.no == 0 { fault(p) } else { p.echo() };
    let server = match t {
        Transport::Plain => Server::start(behaviour),
        #[cfg(feature = "tls")]
        Transport::Tls(cfg, _) => Server::start_tls(cfg.clone(), behaviour),
    };
    let mut d = Driver::new(server.addr, |pc| {
        pc.reconnect_delay_ns = 1_000_000;
        #[cfg(feature = "tls")]
        if let Transport::Tls(_, c) = t {
            pc.tls = Some(c.clone());
        }
    });
    let id = format!("id={name}.first");
    let (answer, _) = d.send(&order(&id), 20 * SEC);
    let Answer::Error { sent, .. } = answer else {
        panic!("{name}: a faulted exchange gave {answer:?}");
    };
    // The next request goes out on a fresh connection and is answered.
    let next = format!("id={name}.next.");
    let (again, _) = d.send(&order(&next), 20 * SEC);
    assert_eq!(
        again,
        Answer::Response {
            status: 200,
            body: next.clone().into_bytes()
        },
        "{name}"
    );
    drop(d);
    let log = server.log.lock().unwrap();
    assert_eq!(log.tls_failures, 0, "{name}");
    assert!(
        log.count(id.as_bytes()) <= 1,
        "{name}: the request reached the server twice"
    );
    let used = log.conns_with(next.as_bytes());
    assert_eq!(used.len(), 1, "{name}");
    assert!(used[0] > 0, "{name}: the faulted connection was reused");
    assert!(
        log.conns_with(id.as_bytes()).iter().all(|&c| c == 0),
        "{name}: the request was written again elsewhere"
    );
    if sent == SentKind::No {
        assert!(
            log.conns[0].is_empty(),
            "{name}: Sent::No but the server got {} bytes",
            log.conns[0].len()
        );
    }
    answer
}

/// The length of the request `order(id)` for a server at `addr`.
fn request_len(name: &str) -> usize {
    // Host is 127.0.0.1:PORT; measure with a port of the same width as a real one.
    let server = Server::start(|_| {});
    let mut conn = Conn::new(Limits::default());
    conn.send(
        &order(&format!("id={name}.first")),
        &server.addr.to_string(),
    )
    .unwrap();
    conn.transmit().len()
}

pub fn server_reads_k_bytes_then_closes_for_every_k(t: &Transport) {
    let mut k = 0;
    loop {
        let name = format!("k{k}");
        let len = request_len(&name);
        if k > len {
            break;
        }
        let answer = run_case(t, &name, move |p| {
            if k == 0 {
                p.wait_readable();
            } else {
                assert_eq!(p.read_exact_k(k), k);
            }
        });
        let Answer::Error { sent, error } = answer else {
            unreachable!()
        };
        // The client wrote the whole request before the server closed.
        assert_eq!(sent, SentKind::Maybe, "k={k}");
        assert!(
            matches!(error, Error::Closed | Error::Io(_)),
            "k={k}: {error:?}"
        );
        k += 1;
    }
    assert!(k > 100, "the request was only {k} bytes");
}

/// A request of several TLS records (a body over 16 KiB) against a server that
/// resets the connection once the first record arrived: whatever the timing, the
/// answer is Maybe (bytes left), never a No that would let the caller re-send.
pub fn server_resets_after_the_first_record(t: &Transport) {
    let behaviour = |p: &mut Peer| {
        if p.no == 0 {
            // One byte of plaintext: the first record arrived (and decrypted).
            assert_eq!(p.read_exact_k(1), 1);
            p.reset_on_close();
        } else {
            p.echo();
        }
    };
    let server = match t {
        Transport::Plain => Server::start(behaviour),
        #[cfg(feature = "tls")]
        Transport::Tls(cfg, _) => Server::start_tls(cfg.clone(), behaviour),
    };
    let mut d = Driver::new(server.addr, |pc| {
        #[cfg(feature = "tls")]
        if let Transport::Tls(_, c) = t {
            pc.tls = Some(c.clone());
        }
        let _ = pc;
    });
    let body = format!("id=big&pad={}", "x".repeat(48 << 10));
    let (answer, _) = d.send(&order(&body), 20 * SEC);
    let Answer::Error { sent, error } = answer else {
        panic!("a reset exchange gave {answer:?}");
    };
    assert_eq!(sent, SentKind::Maybe, "{error:?}");
    assert!(matches!(error, Error::Io(_) | Error::Closed), "{error:?}");
    assert!(!server.log.lock().unwrap().conns[0].is_empty());
}

pub fn server_reads_the_request_and_closes_without_replying(t: &Transport) {
    let answer = run_case(t, "silent", |p| {
        p.read_request().unwrap();
    });
    assert_eq!(
        answer,
        Answer::Error {
            sent: SentKind::Maybe,
            error: Error::Closed
        }
    );
}

pub fn server_replies_partially_then_closes(t: &Transport) {
    let reply: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nX-A: b\r\n\r\n0123456789";
    for m in 1..reply.len() {
        let answer = run_case(t, &format!("partial{m}"), move |p| {
            p.read_request().unwrap();
            p.write(&reply[..m]);
        });
        assert_eq!(
            answer,
            Answer::Error {
                sent: SentKind::Maybe,
                error: Error::Closed
            },
            "m={m}"
        );
    }
}

pub fn server_replies_with_garbage(t: &Transport) {
    let garbage: [&[u8]; 7] = [
        b"garbage\r\n\r\n",
        b"\x00\x01\x02\xff\xfe\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n",
        b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
        b"HTTP/9.9 200 OK\r\n\r\n",
    ];
    for (i, g) in garbage.into_iter().enumerate() {
        let answer = run_case(t, &format!("garbage{i}"), move |p| {
            p.read_request().unwrap();
            p.write(g);
            // Hold the connection open: the client must close it on its own.
            let _ = p.read_request();
        });
        let Answer::Error { sent, error } = answer else {
            unreachable!()
        };
        assert_eq!(sent, SentKind::Maybe, "garbage {i}");
        assert!(matches!(error, Error::Parse(_)), "garbage {i}: {error:?}");
    }
}
