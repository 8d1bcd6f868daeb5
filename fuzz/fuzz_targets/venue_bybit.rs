//! The bybit adapter: a structured response (status, the headers venues read,
//! a fixture's body edited or raw bytes, framing) written as HTTP/1.1, read by
//! ergon-io's decoder, then by the adapter as the answer to several request kinds,
//! and by its reconcile readers. Nothing panics.
#![no_main]

include!("shared/venue.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    if let Ok(input) = Input::arbitrary_for("bybit", &mut u) {
        run("bybit", &input);
    }
});
