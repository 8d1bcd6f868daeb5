//! `ergon-gateway` with a Binance Ed25519 key, as a real process against the
//! emulator (which verifies Ed25519 with ring): the key's PKCS#8 PEM in a secret
//! file (0600, ours), detected without a flag or named by `--key-type ed25519`;
//! an order through shared memory signed with it and run by the venue; a
//! `--key-type` that does not match the file refused at start, naming the flag
//! and never the key; a USD-M account's orders over `/ws-fapi/v1` after
//! `session.logon`, unsigned.

#[path = "common/ready.rs"]
mod ready;
#[path = "common/sec.rs"]
mod sec;
use sec::*;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use ergon_gateway::shm::ShmClient;
use ergon_venue_sim::{Account, Config, Server, ED25519_TEST_PRIVATE_PEM};
use ergon_venues::endpoint::{Decimal, Symbol};

/// The emulator whose one account is an Ed25519 key.
fn ed_sim() -> Server {
    let mut c = Config::binance_spot();
    c.accounts = vec![Account::ed25519_test()];
    Server::start(c).expect("emulator")
}

fn key_file(dir: &Path) -> PathBuf {
    let p = dir.join("ed25519.pem");
    std::fs::write(&p, ED25519_TEST_PRIVATE_PEM).expect("write key");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    p
}

fn order_with(s: &Server, test: &str, flags: &[&str]) -> u64 {
    order_placing(s, test, flags, one_order)
}

/// [`order_with`], the order placed by `place` (1 if applied).
fn order_placing(s: &Server, test: &str, flags: &[&str], place: fn(&mut ShmClient) -> u64) -> u64 {
    let dir = Scratch::new(test);
    let name = unique(test);
    let file = key_file(&dir.0);
    let mut extra = journal_args(&dir.0);
    extra.extend(["--api-secret-file".into(), file.display().to_string()]);
    extra.extend(flags.iter().map(|f| f.to_string()));
    let gw = gateway(
        s,
        &name,
        &dir.0,
        Opts {
            extra,
            ..Opts::default()
        },
    );
    let mut c = ShmClient::attach(&name, "owner", false).expect("attach");
    let applied = place(&mut c);
    drop(c);
    let (out, err) = gw.finish();
    assert!(
        !out.contains("MC4CAQ") && !err.contains("MC4CAQ"),
        "the key shown"
    );
    applied
}

#[test]
fn an_ed25519_key_file_signs_orders_detected_or_named() {
    let s = ed_sim();
    assert_eq!(order_with(&s, "ed-detect", &[]), 1);
    assert_eq!(order_with(&s, "ed-named", &["--key-type", "ed25519"]), 1);
    let r = s.stop();
    assert_eq!(r.signature_rejects, 0);
    assert_eq!(r.executions, 2);
}

/// One USD-M order through `c` (0.01 BTC: above USD-M's minimum notional),
/// 1 if it was applied.
fn usdm_order(c: &mut ShmClient) -> u64 {
    let id = c.next_client_order_id().expect("id");
    let mut o = order(Symbol::new("BTCUSDT").expect("symbol"), id);
    o.quantity = Decimal::new("0.01").expect("decimal");
    applied(c, o)
}

#[test]
fn a_usdm_account_sends_its_orders_over_the_websocket_api_logged_on() {
    let mut c = Config::binance_futures();
    c.accounts = vec![Account::ed25519_test()];
    let s = Server::start(c).expect("emulator");
    let flags = ["--venue", "binance-futures", "--order-entry", "ws"];
    assert_eq!(order_placing(&s, "ed-usdm", &flags, usdm_order), 1);
    let r = s.stop();
    assert_eq!(r.ws.api_logons, 1, "{:?}", r.ws);
    assert_eq!(r.ws.api_unsigned, 1, "the order, unsigned: {:?}", r.ws);
    assert_eq!((r.executions, r.signature_rejects), (1, 0));
}

#[test]
fn a_key_type_that_does_not_match_the_file_is_refused() {
    let s = ed_sim();
    let dir = Scratch::new("ed-wrong");
    let file = key_file(&dir.0);
    let mut extra = journal_args(&dir.0);
    extra.extend([
        "--api-secret-file".into(),
        file.display().to_string(),
        "--key-type".into(),
        "hmac".into(),
    ]);
    let (mut child, stderr) = spawn_gateway(
        &s,
        &unique("ed-wrong"),
        &dir.0,
        Opts {
            extra,
            ..Opts::default()
        },
    );
    let mut line = String::new();
    let _ = BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line);
    let status = child.wait().expect("wait");
    let err = std::fs::read_to_string(stderr).unwrap_or_default();
    assert!(!line.contains("ready"), "started: {line}");
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("--key-type hmac"), "{err}");
    assert!(!err.contains("MC4CAQ"), "{err}");
}
