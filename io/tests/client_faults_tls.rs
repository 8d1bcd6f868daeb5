//! The fault cases of common/faults.rs (every byte offset, silent, partial,
//! garbage) over TLS: the same guarantees hold with rustls between the HTTP
//! connection and the socket.
#![cfg(feature = "tls")]

mod common;

use common::faults::{self, Transport};
use common::tls::Pki;

fn tls() -> Transport {
    let pki = Pki::new();
    Transport::Tls(pki.server.clone(), pki.client("localhost"))
}

#[test]
fn server_reads_k_bytes_then_closes_for_every_k() {
    faults::server_reads_k_bytes_then_closes_for_every_k(&tls());
}

#[test]
fn server_reads_the_request_and_closes_without_replying() {
    faults::server_reads_the_request_and_closes_without_replying(&tls());
}

#[test]
fn server_replies_partially_then_closes() {
    faults::server_replies_partially_then_closes(&tls());
}

#[test]
fn server_replies_with_garbage() {
    faults::server_replies_with_garbage(&tls());
}

#[test]
fn server_resets_after_the_first_record() {
    faults::server_resets_after_the_first_record(&tls());
}
