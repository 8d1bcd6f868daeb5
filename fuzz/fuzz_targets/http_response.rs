//! Response bytes into the sans-IO HTTP/1.1 connection (ergon-io), in pieces whose sizes the input
//! chooses, under small limits so every bound is reachable. Must never panic; a
//! complete response must be readable and consistent.
#![no_main]

use ergon_io::http::{Conn, Headers, Limits, Progress, Request};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, bytes)) = data.split_first() else {
        return;
    };
    let step = 1 + usize::from(ctl & 0x0f);
    let method = if ctl & 0x10 != 0 { "HEAD" } else { "GET" };
    let limits = Limits {
        max_head: 512,
        max_headers: 16,
        max_line: 128,
        max_chunk: 256,
        max_response: 1024,
        max_request: 256,
    };
    let mut conn = Conn::new(limits);
    conn.send(
        &Request {
            method,
            target: "/",
            headers: &[],
            body: b"",
        },
        "h",
    )
    .unwrap();
    let n = conn.transmit().len();
    conn.handle_written(n);
    let mut at = 0;
    let mut done = false;
    while at < bytes.len() {
        let buf = conn.recv_buf();
        let n = step.min(bytes.len() - at).min(buf.len());
        if n == 0 {
            return;
        }
        buf[..n].copy_from_slice(&bytes[at..at + n]);
        at += n;
        match conn.handle_recv(n) {
            Ok(Progress::Partial) => {}
            Ok(Progress::Complete) => {
                done = true;
                break;
            }
            Err(_) => return,
        }
    }
    if !done && (ctl & 0x20 == 0 || conn.handle_eof().is_none()) {
        return;
    }
    let mut hs = Headers::new();
    let r = conn.response(&mut hs).expect("complete");
    assert!(r.body.len() <= limits.max_response);
    assert!(r.headers.len() <= limits.max_headers);
    drop(hs);
    let _ = conn.finish();
});
