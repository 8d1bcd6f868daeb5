//! The coinbase-exchange adapter: any bytes as a captured response file, read as the answer to
//! every request kind. A file that is not HTTP is an error; nothing panics.
#![no_main]

include!("shared/venue.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| run("coinbase-exchange", data));
