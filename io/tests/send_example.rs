//! The `send` example's command line and output lines are a contract: run the
//! built example against loopback servers and read what it prints.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::server::Server;

/// The example binary next to this test's profile directory, built on demand when
/// the test runs alone (cargo builds examples only for unfiltered test runs).
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
    let bin = profile_dir.join("examples").join("send");
    if bin.exists() {
        return bin;
    }
    let release = profile_dir.file_name().is_some_and(|n| n == "release");
    let target = profile_dir.parent().unwrap().join("send-example");
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args([
        "build",
        "-q",
        "-p",
        "ergon-io",
        "--example",
        "send",
        "--target-dir",
    ])
    .arg(&target);
    if release {
        cmd.arg("--release");
    }
    assert!(
        cmd.status().unwrap().success(),
        "building the send example failed"
    );
    target
        .join(if release { "release" } else { "debug" })
        .join("examples")
        .join("send")
}

fn send(args: &[&str]) -> (Vec<String>, bool) {
    let out = Command::new(example()).args(args).output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    (
        stdout.lines().map(str::to_string).collect(),
        out.status.success(),
    )
}

#[test]
fn prints_one_response_line_per_attempt_over_one_connection() {
    let server = Server::start(|p| p.echo());
    let url = format!("http://{}/api/v3/order", server.addr);
    let (lines, ok) = send(&[
        "--method", "POST", "--header", "X-K: v", "--body", "id=42", "--repeat", "3", &url,
    ]);
    assert!(ok);
    assert_eq!(lines.len(), 3, "{lines:?}");
    for l in &lines {
        let f: Vec<&str> = l.split(' ').collect();
        assert_eq!(f.len(), 4, "{l}");
        assert_eq!((f[0], f[1], f[2]), ("response", "200", "5"), "{l}");
        assert!(f[3].parse::<u64>().is_ok(), "RTT_US not a number: {l}");
    }
    let log = server.log.lock().unwrap();
    assert_eq!(log.conns.len(), 1);
    assert_eq!(log.count(b"POST /api/v3/order HTTP/1.1\r\n"), 3);
    assert_eq!(log.count(b"X-K: v\r\n"), 3);
}

#[test]
fn a_silent_server_gets_each_attempt_once_and_maybe_sent_errors() {
    let server = Server::start(|p| {
        p.read_request();
        // Never answer; wait for the client to close.
        let _ = p.read_request();
    });
    let url = format!("http://{}/x", server.addr);
    let (lines, ok) = send(&[
        "--repeat",
        "2",
        "--timeout-ms",
        "300",
        "--interval-ms",
        "10",
        &url,
    ]);
    assert!(ok);
    assert_eq!(
        lines,
        vec!["error sent=maybe timeout", "error sent=maybe timeout"]
    );
    assert!(server.wait_for(|l| l.count(b"GET /x HTTP/1.1") == 2));
    // Two attempts, two requests on the wire: never a re-send.
    // A late third copy would still be in flight on loopback: give it time to
    // land before counting (a negative check on real sockets).
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(server.log.lock().unwrap().count(b"GET /x HTTP/1.1"), 2);
}

#[test]
fn a_refused_connect_sends_nothing() {
    // A port with no listener: bind, note it, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (lines, ok) = send(&["--timeout-ms", "200", &format!("http://127.0.0.1:{port}/")]);
    assert!(ok);
    assert_eq!(lines, vec!["error sent=no refused"]);
}

#[test]
fn bad_arguments_are_refused_with_usage() {
    for args in [
        &["--repeat", "x", "http://127.0.0.1:1/"][..],
        &["ftp://x/"],
        &[],
        &["--header", "Host: y", "http://127.0.0.1:1/"],
    ] {
        let out = Command::new(example()).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty());
        assert!(!out.stderr.is_empty());
    }
}

#[cfg(feature = "tls")]
mod tls {
    use super::*;
    use common::tls::Pki;

    fn cafile(pki: &Pki, tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ergon-send-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ca.pem");
        std::fs::write(&path, &pki.ca_pem).unwrap();
        path
    }

    #[test]
    fn https_with_a_cafile_round_trips() {
        let pki = Pki::new();
        let server = Server::start_tls(pki.server.clone(), |p| p.echo());
        let ca = cafile(&pki, "ok");
        let url = format!("https://{}/api/v3/order", server.addr);
        let (lines, ok) = send(&[
            "--method",
            "POST",
            "--body",
            "id=7",
            "--repeat",
            "2",
            "--cafile",
            ca.to_str().unwrap(),
            &url,
        ]);
        assert!(ok);
        assert_eq!(lines.len(), 2, "{lines:?}");
        for l in &lines {
            assert!(l.starts_with("response 200 4 "), "{l}");
        }
        let log = server.log.lock().unwrap();
        assert_eq!(log.conns.len(), 1);
        assert_eq!(log.count(b"id=7"), 2);
    }

    #[test]
    fn an_untrusted_certificate_sends_nothing() {
        let pki = Pki::new();
        let server = Server::start_tls(pki.server.clone(), |p| p.echo());
        // No --cafile: the compiled-in roots do not know the test CA.
        let url = format!("https://{}/x", server.addr);
        let (lines, ok) = send(&["--timeout-ms", "300", &url]);
        assert!(ok);
        assert_eq!(lines, vec!["error sent=no tls"]);
        assert!(server.wait_for(|l| l.tls_failures >= 1));
        assert_eq!(server.log.lock().unwrap().total(), 0);
    }

    #[test]
    fn a_cafile_without_a_certificate_is_refused_with_usage() {
        let dir = std::env::temp_dir().join(format!("ergon-send-{}-bad", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("empty.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        for args in [
            &["--cafile", path.to_str().unwrap(), "https://127.0.0.1:1/"][..],
            &["--cafile", "/nonexistent/ca.pem", "https://127.0.0.1:1/"],
            &["--cafile", path.to_str().unwrap(), "http://127.0.0.1:1/"],
        ] {
            let out = Command::new(example()).args(args).output().unwrap();
            assert_eq!(out.status.code(), Some(2), "{args:?}");
            assert!(out.stdout.is_empty());
            assert!(!out.stderr.is_empty());
        }
    }
}
