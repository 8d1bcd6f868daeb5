//! The report as JSON, the binary, loopback-only binding and bad bytes.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{order_params, Client};
use ergon_venue_sim::{Config, ConfigError, Server, StartError};

#[test]
fn the_report_counts_what_happened() {
    let s = Server::start(Config::binance_spot()).unwrap();
    let mut c = Client::connect(s.addr());
    c.get("/api/v3/ping");
    c.signed(&s, "POST", "/api/v3/order", &order_params("r1"))
        .unwrap();
    c.signed(&s, "POST", "/api/v3/order", &order_params("r1"))
        .unwrap();
    let rep = s.stop();
    let v = rep.to_json();
    assert_eq!(v["profile"], "binance-spot");
    assert_eq!(v["requests"], 3);
    assert_eq!(v["connections"], 1, "one keep-alive connection");
    assert_eq!(v["executions"], 1);
    assert_eq!(v["duplicateRejects"], 1);
    assert_eq!(v["duplicates"], 0);
    assert_eq!(v["throttled429"], 0);
    assert_eq!(v["bans"], 0);
    assert_eq!(v["responses"]["200"], 2);
    assert_eq!(v["responses"]["400"], 1);
    let limits = v["limits"].as_array().unwrap();
    assert_eq!(limits.len(), 4);
    assert_eq!(limits[0]["rateLimitType"], "REQUEST_WEIGHT");
    assert_eq!(limits[0]["scope"], "ip");
    assert_eq!(limits[1]["scope"], "account");
    // ping 1 + two orders 1 each, unless a minute boundary fell between them.
    assert!((1..=3).contains(&limits[0]["peak"].as_u64().unwrap()));
    // Both placements reached the engine and count as orders, the refused one too.
    assert!((1..=2).contains(&limits[1]["peak"].as_u64().unwrap()));
    assert!(!limits[1]["windows"].as_array().unwrap().is_empty());
}

#[test]
fn it_refuses_to_bind_beyond_loopback() {
    let mut cfg = Config::binance_spot();
    cfg.bind = "0.0.0.0:0".parse().unwrap();
    assert!(matches!(
        Server::start(cfg),
        Err(StartError::Config(ConfigError::NotLoopback(_)))
    ));
}

#[test]
fn bad_bytes_get_a_4xx_and_a_closed_connection_not_a_panic() {
    let s = Server::start(Config::binance_spot()).unwrap();
    for junk in [
        &b"\x16\x03\x01\x02\x00garbage\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
    ] {
        let mut t = TcpStream::connect(s.addr()).unwrap();
        t.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        t.write_all(junk).unwrap();
        let mut out = String::new();
        t.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 400"), "{out}");
    }
    // Still serving.
    assert_eq!(Client::connect(s.addr()).get("/api/v3/ping").status, 200);
    assert_eq!(s.stop().malformed, 2);
}

#[test]
fn the_binary_serves_then_prints_the_report() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ergon-venue-sim"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--duration",
            "2",
            "--limit",
            "REQUEST_WEIGHT:SECOND:1:100",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on http://")
        .expect(&line)
        .to_string();
    let mut c = Client::connect(url.parse().unwrap());
    let r = c.get("/api/v3/ping");
    assert_eq!(r.header_u64("X-MBX-USED-WEIGHT-1S"), 1);
    drop(c);
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(child.wait().unwrap().success());
    let v: serde_json::Value = serde_json::from_str(rest.trim()).unwrap();
    assert_eq!(v["requests"], 1);
    assert_eq!(v["limits"][0]["interval"], "SECOND");
}

#[test]
fn the_binary_refuses_a_public_address() {
    let out = Command::new(env!("CARGO_BIN_EXE_ergon-venue-sim"))
        .args(["--listen", "0.0.0.0:8080", "--duration", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("loopback"));
}
