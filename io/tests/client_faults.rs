//! Faults at every point of an exchange over plain TCP (the cases are in
//! common/faults.rs; client_faults_tls.rs runs them over TLS).

mod common;

use common::faults::{self, Transport};

#[test]
fn server_reads_k_bytes_then_closes_for_every_k() {
    faults::server_reads_k_bytes_then_closes_for_every_k(&Transport::Plain);
}

#[test]
fn server_reads_the_request_and_closes_without_replying() {
    faults::server_reads_the_request_and_closes_without_replying(&Transport::Plain);
}

#[test]
fn server_replies_partially_then_closes() {
    faults::server_replies_partially_then_closes(&Transport::Plain);
}

#[test]
fn server_replies_with_garbage() {
    faults::server_replies_with_garbage(&Transport::Plain);
}

#[test]
fn server_resets_after_the_first_record() {
    faults::server_resets_after_the_first_record(&Transport::Plain);
}
