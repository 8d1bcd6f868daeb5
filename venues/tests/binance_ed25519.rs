//! Binance with an Ed25519 API key: the key read from its PKCS#8 PEM file, REST
//! signatures (Spot and USD-M) as "SIGNED Endpoint Examples ... Ed25519 Keys"
//! documents them (base64, URL-encoded), WebSocket API signatures as "SIGNED
//! request example (Ed25519)" does (base64 over the sorted payload), and
//! `session.logon`: the logon frame, orders without `apiKey`/`signature` once
//! logged on, an HMAC key refused, a revocation read.
//!
//! Binance's documented Ed25519 example publishes the payload and the signature
//! but not its private key, so the signatures are checked against two other
//! implementations instead: OpenSSL in a subprocess (the cross-check command the
//! page gives, with `pkeyutl -rawin`, which OpenSSL 3.0 needs for Ed25519; Ed25519
//! is deterministic, so its signature must equal ours byte for byte) and ring's
//! verifier on every signature a request carries.

use std::process::Command;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ergon_core::Budget;
use ergon_venues::adapt::{Clock, Error};
use ergon_venues::binance_futures::{self, BinanceFutures};
use ergon_venues::binance_spot::{Auth, BinanceSpot};
use ergon_venues::binance_spot_ws::{
    read_logon, signature_text, Call, Incoming, PrepareError, Session,
};
use ergon_venues::classify::{BINANCE_GUARD_NS, FIXTURE_NOW_UTC_MS, SPOT_EXCHANGE_INFO};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Ed25519Key, Endpoints, NewOrder, OrderType, Prepared, Side, SignKey,
    Symbol, TimeInForce,
};

/// A throwaway test key (`openssl genpkey -algorithm ed25519`), and its public
/// key as `openssl pkey -pubout` printed it.
const TEST_PEM: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIOphjDnj177uXH0N7VA8AvzH1KwCiMvsNlT6fbyHUhAr
-----END PRIVATE KEY-----
";
const TEST_PUBLIC_DER_B64: &str = "MCowBQYDK2VwAyEAny3I38iivRKuGGf8RcAq5jE4+qqOpU1Lw7CMdMY0mbk=";

/// The first payload of "SIGNED request example (Ed25519)" (WebSocket API).
const DOC_PAYLOAD: &str = "apiKey=4yNzx3yWC5bS6YTwEkSRaC0nRmSQIIStAUOh1b6kqaBrTLIhjCpI5lJH8q8R8WNO&price=52000.00&quantity=0.01000000&recvWindow=100&side=SELL&symbol=BTCUSDT&timeInForce=GTC&timestamp=1645423376532&type=LIMIT";
/// What `openssl pkeyutl -sign -inkey TEST_PEM -rawin | openssl enc -base64 -A`
/// printed for [`DOC_PAYLOAD`].
const DOC_PAYLOAD_SIGNED_BY_OPENSSL: &str =
    "PjjRTeDHW3bSQFTT2FhSNtT/5RvLz6tvFzs2PnQeQXC8Depnu9oJeLANrwMx+x0Xfarm+knNvbgPuZq8BEZWDg==";
const API_KEY: &str = "4yNzx3yWC5bS6YTwEkSRaC0nRmSQIIStAUOh1b6kqaBrTLIhjCpI5lJH8q8R8WNO";
const SEC: i64 = 1_000_000_000;
const NOW: i64 = 1_000 * SEC;

fn key() -> Ed25519Key {
    Ed25519Key::from_pkcs8_pem(TEST_PEM).unwrap()
}

fn public_key() -> [u8; 32] {
    let der = STANDARD.decode(TEST_PUBLIC_DER_B64).unwrap();
    der[der.len() - 32..].try_into().unwrap()
}

/// ring's verdict on `sig` over `msg` under the test key's public key.
fn ring_verifies(msg: &[u8], sig: &[u8]) -> bool {
    ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, public_key())
        .verify(msg, sig)
        .is_ok()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

fn openssl_sign(payload: &str) -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("ergon-ed25519-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (pem, input) = (dir.join("key.pem"), dir.join("payload"));
    std::fs::write(&pem, TEST_PEM).unwrap();
    std::fs::write(&input, payload).unwrap();
    let out = Command::new("openssl")
        .args(["pkeyutl", "-sign", "-rawin", "-inkey"])
        .arg(&pem)
        .arg("-in")
        .arg(&input)
        .output()
        .expect("openssl is installed");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "openssl failed");
    STANDARD.encode(out.stdout)
}

#[test]
fn the_key_is_read_from_pkcs8_and_its_public_key_is_openssls() {
    let k = key();
    assert_eq!(k.public_key(), public_key());
    // Debug shows the public key, never the private one.
    let shown = format!("{k:?}");
    assert!(shown.starts_with("Ed25519Key(public 9f2dc8df"), "{shown}");
    assert!(!shown.contains("ea618c39"), "{shown}");
    // Garbage, a truncated key, a public key: errors naming the key.
    for bad in [
        "not a key",
        "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2Vw\n-----END PRIVATE KEY-----\n",
        "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAny3I38iivRKuGGf8RcAq5jE4+qqOpU1Lw7CMdMY0mbk=\n-----END PUBLIC KEY-----\n",
    ] {
        match Ed25519Key::from_pkcs8_pem(bad) {
            Err(Error::BadArgument(what)) => assert!(what.contains("Ed25519"), "{what}"),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    // A key file is told from an HMAC secret by its PEM block.
    assert!(SignKey::detect(TEST_PEM.as_bytes()).unwrap().is_ed25519());
    assert!(
        !SignKey::detect(b"NhqPtmdSJYdKjVHjA7PZj4Mge3R5YNiP1e3UZjInClVN65XAbvqqM6A7H5fATj0j")
            .unwrap()
            .is_ed25519()
    );
    assert!(
        SignKey::detect(b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----").is_err()
    );
}

#[test]
fn the_documented_payload_is_signed_as_openssl_signs_it() {
    let sig = signature_text(&SignKey::Ed25519(key()), DOC_PAYLOAD.as_bytes());
    assert_eq!(sig.as_str(), DOC_PAYLOAD_SIGNED_BY_OPENSSL);
    assert_eq!(sig.as_str(), openssl_sign(DOC_PAYLOAD));
    let raw = STANDARD.decode(sig.as_str()).unwrap();
    assert!(ring_verifies(DOC_PAYLOAD.as_bytes(), &raw));
    assert!(!ring_verifies(b"apiKey=x", &raw));
}

fn dec(s: &str) -> Decimal<'_> {
    Decimal::new(s).unwrap()
}

fn order(cloid: &str) -> NewOrder<'static> {
    NewOrder {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        side: Side::Sell,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Some(dec("52000.00")),
        quantity: dec("0.01000000"),
        client_order_id: ClientOrderId::new(cloid).unwrap(),
        reduce_only: false,
    }
}

fn spot() -> (BinanceSpot, Budget) {
    let mut b = Budget::builder();
    let spot = BinanceSpot::from_exchange_info(
        SPOT_EXCHANGE_INFO,
        &mut b,
        Clock::anchor(NOW, FIXTURE_NOW_UTC_MS),
        BINANCE_GUARD_NS,
    )
    .unwrap()
    .with_auth(Auth::ed25519(API_KEY, key(), 5000).unwrap());
    (spot, b.build(NOW).unwrap())
}

/// The query a REST request signed, and its signature as sent.
fn signed(p: &Prepared) -> (String, String) {
    let (_, query) = p.target().split_once('?').unwrap();
    let (payload, sig) = query.split_once("&signature=").unwrap();
    (payload.to_string(), sig.to_string())
}

fn check_rest(p: &Prepared) {
    let (payload, sig) = signed(p);
    // URL-encoded: no character of base64 that a query would misread.
    assert!(!sig.contains(['+', '/', '=']), "{sig}");
    let sig = percent_decode(&sig);
    assert_eq!(sig, openssl_sign(&payload));
    let raw = STANDARD.decode(&sig).unwrap();
    assert!(ring_verifies(payload.as_bytes(), &raw), "{payload}");
    let h = p.headers().find(|(n, _)| *n == "X-MBX-APIKEY").unwrap();
    assert_eq!(h.1, API_KEY);
}

#[test]
fn spot_rest_requests_carry_an_ed25519_signature_ring_verifies() {
    let (mut spot, _) = spot();
    let mut p = Prepared::default();
    spot.new_order(&mut p, &order("ed-1"), NOW).unwrap();
    check_rest(&p);
    let before = signed(&p);
    // A re-send is re-signed with the same key.
    spot.restamp(&mut p, NOW + SEC).unwrap();
    check_rest(&p);
    assert_ne!(signed(&p), before);
}

#[test]
fn usdm_rest_requests_carry_an_ed25519_signature_ring_verifies() {
    let mut b = Budget::builder();
    let clock = Clock::anchor(10 * SEC, 1_591_702_613_943);
    let mut venue = BinanceFutures::new(&mut b, clock, 0, binance_futures::DEFAULT_TABLE)
        .unwrap()
        .with_auth(Auth::ed25519(API_KEY, key(), 5000).unwrap());
    let mut p = Prepared::default();
    venue.new_order(&mut p, &order("ed-2"), 10 * SEC).unwrap();
    check_rest(&p);
}

/// The WebSocket API payload of a frame: every param but `signature`, sorted.
fn ws_payload(params: &serde_json::Map<String, serde_json::Value>) -> String {
    let mut pairs: Vec<(String, String)> = params
        .iter()
        .filter(|(k, _)| *k != "signature")
        .map(|(k, v)| {
            let v = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), v)
        })
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

fn params(frame: &[u8]) -> serde_json::Map<String, serde_json::Value> {
    let v: serde_json::Value = serde_json::from_slice(frame).unwrap();
    v["params"].as_object().cloned().unwrap_or_default()
}

fn session() -> Session {
    let (spot, _) = spot();
    Session::over(spot, 8).unwrap()
}

#[test]
fn websocket_api_frames_carry_an_ed25519_signature_ring_verifies() {
    let mut s = session();
    let mut out = Vec::new();
    for call in [Call::Place(order("ed-3")), Call::Account, Call::Logon] {
        s.prepare(&call, &mut out, NOW).unwrap();
        let p = params(&out);
        let sig = p["signature"].as_str().unwrap();
        let raw = STANDARD.decode(sig).unwrap();
        let payload = ws_payload(&p);
        assert!(ring_verifies(payload.as_bytes(), &raw), "{payload}");
        assert_eq!(p["apiKey"], API_KEY);
    }
    // A REST request's twin is signed again, with the same key.
    let (mut spot, _) = spot();
    let mut rest = Prepared::default();
    spot.new_order(&mut rest, &order("ed-4"), NOW).unwrap();
    s.prepare_rest(&rest, &mut out).unwrap();
    let p = params(&out);
    let raw = STANDARD.decode(p["signature"].as_str().unwrap()).unwrap();
    assert!(ring_verifies(ws_payload(&p).as_bytes(), &raw));
}

#[test]
fn the_logon_frame_is_documented_and_weighs_2() {
    let mut s = session();
    let mut out = Vec::new();
    let pending = s.prepare(&Call::Logon, &mut out, NOW).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["method"], "session.logon");
    let mut names: Vec<&String> = v["params"].as_object().unwrap().keys().collect();
    names.sort();
    assert_eq!(names, ["apiKey", "recvWindow", "signature", "timestamp"]);
    assert_eq!(v["params"]["timestamp"], FIXTURE_NOW_UTC_MS);
    assert_eq!(Call::Logon.kind(), ergon_venues::adapt::Request::Read(2));
    assert_eq!(
        Call::SessionStatus.kind(),
        ergon_venues::adapt::Request::Read(2)
    );
    assert_eq!(Call::Logout.kind(), ergon_venues::adapt::Request::Read(2));
    assert!(!pending.parts.is_empty());
    // The answer as documented ("Log in with API key").
    let answer = format!(
        r#"{{"id":{},"status":200,"result":{{"apiKey":"{API_KEY}","authorizedSince":1649729878532,"connectedSince":1649729873021,"returnRateLimits":false,"serverTime":1649729878630,"userDataStream":false}}}}"#,
        pending.id
    );
    assert_eq!(read_logon(answer.as_bytes(), API_KEY), Ok(()));
    assert_eq!(read_logon(answer.as_bytes(), "another"), Err(0));
    let refused = r#"{"id":1,"status":401,"error":{"code":-2015,"msg":"Invalid API-key, IP, or permissions for action."}}"#;
    assert_eq!(read_logon(refused.as_bytes(), API_KEY), Err(-2015));
    assert_eq!(read_logon(b"\xff not json", API_KEY), Err(0));
}

#[test]
fn a_logged_on_session_sends_orders_without_key_or_signature() {
    let mut s = session();
    s.set_logged_on(true);
    let mut out = Vec::new();
    s.prepare(&Call::Place(order("ed-5")), &mut out, NOW)
        .unwrap();
    let p = params(&out);
    assert!(
        !p.contains_key("apiKey") && !p.contains_key("signature"),
        "{p:?}"
    );
    // Still timed: "You still have to specify the timestamp parameter".
    assert_eq!(p["timestamp"], FIXTURE_NOW_UTC_MS);
    assert_eq!(p["recvWindow"], 5000);
    // The REST twin too.
    let (mut spot, _) = spot();
    let mut rest = Prepared::default();
    spot.new_order(&mut rest, &order("ed-6"), NOW).unwrap();
    s.prepare_rest(&rest, &mut out).unwrap();
    let p = params(&out);
    assert!(
        !p.contains_key("apiKey") && !p.contains_key("signature"),
        "{p:?}"
    );
    assert!(p.contains_key("timestamp"));
    // The user data stream needs no signature once logged on.
    s.prepare(&Call::Subscribe, &mut out, NOW).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["method"], "userDataStream.subscribe");
    assert!(v.get("params").is_none(), "{v}");
    // A drop ends the logon: the next connection signs until it logs on again.
    for _ in s.on_disconnect() {}
    assert!(!s.logged_on());
    s.prepare(&Call::Place(order("ed-7")), &mut out, NOW)
        .unwrap();
    assert!(params(&out).contains_key("signature"));
}

#[test]
fn logon_takes_only_an_ed25519_key() {
    let mut b = Budget::builder();
    let spot = BinanceSpot::from_exchange_info(
        SPOT_EXCHANGE_INFO,
        &mut b,
        Clock::anchor(NOW, FIXTURE_NOW_UTC_MS),
        BINANCE_GUARD_NS,
    )
    .unwrap();
    let mut s = Session::new(spot, Some((API_KEY, b"an hmac secret")), 5000, 4).unwrap();
    assert!(!s.can_log_on());
    let mut out = Vec::new();
    assert!(matches!(
        s.prepare(&Call::Logon, &mut out, NOW),
        Err(PrepareError::Bad(Error::BadArgument(_)))
    ));
    assert!(out.is_empty());
    assert_eq!(s.in_flight(), 0);
    assert!(session().can_log_on());
}

#[test]
fn a_revocation_ends_the_logon() {
    let mut s = session();
    s.set_logged_on(true);
    let (_, mut budget) = spot();
    let frame = br#"{"id":null,"status":401,"error":{"code":-2015,"msg":"Invalid API-key, IP, or permissions for action."}}"#;
    assert_eq!(
        s.on_frame(frame, &mut budget, NOW).unwrap(),
        Incoming::Revoked(-2015)
    );
    assert!(!s.logged_on());
    // Another error without an id is still unreadable, and changes nothing.
    s.set_logged_on(true);
    let other = br#"{"id":null,"status":400,"error":{"code":-1000,"msg":"Malformed"}}"#;
    assert!(s.on_frame(other, &mut budget, NOW).is_err());
    assert!(s.logged_on());
}
