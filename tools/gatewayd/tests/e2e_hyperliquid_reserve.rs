//! `ergon-gateway --venue hyperliquid --reserve-budget USDC_PER_DAY` against the
//! emulator's `hyperliquid` profile, whose address starts nearly spent (a cap
//! of 500 requests): off by default, nothing is bought; on, the gateway buys
//! address requests (`reserveRequestWeight`, 0.0005 USDC each, paid by the
//! emulator's account) before the budget runs out, and never more than the
//! day's USDC, counted across a restart from the runtime directory's record.

#[path = "common/proc.rs"]
mod proc;
#[path = "common/ready.rs"]
mod ready;

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use ergon_venue_sim::{Config, Server, HYPERLIQUID_TEST_KEY};

/// A private directory of the test's own (0700).
fn private_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ergon-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&d)
        .expect("runtime dir");
    d
}

/// An emulator whose address may send 500 requests in all.
fn nearly_spent() -> Server {
    let mut cfg = Config::hyperliquid();
    cfg.hyperliquid.initial_requests = 500;
    Server::start(cfg).expect("emulator")
}

fn gateway(s: &Server, name: &str, dir: &Path, reserve: Option<&str>) -> proc::Proc {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ergon-gateway"));
    cmd.args(["--venue", "hyperliquid", "--base"])
        .arg(format!("http://{}", s.addr()))
        .args(["--name", name])
        .env("ERGON_API_SECRET", HYPERLIQUID_TEST_KEY)
        .args(["--protection", "required", "--protection-timeout", "60"])
        .arg("--runtime-dir")
        .arg(dir)
        .arg("--journal")
        .arg(dir.join(format!("journal-{}", s.addr().port())))
        .stdout(Stdio::piped());
    if let Some(usdc) = reserve {
        cmd.args(["--reserve-budget", usdc]);
    }
    let mut child = cmd.spawn().expect("spawn ergon-gateway");
    let out = ready::ready(&mut child, name)
        .unwrap_or_else(|e| panic!("the gateway did not start: {e:?}"));
    proc::Proc { child, _out: out }
}

/// exchangeStatus, meta, scheduleCancel, then the first userRateLimit.
fn read_the_budget(s: &Server) {
    let r = s.wait_report(Duration::from_secs(10), |r| r.requests >= 4);
    assert!(r.requests >= 4, "no userRateLimit read: {r:?}");
}

#[test]
fn off_by_default_nothing_is_bought() {
    let s = nearly_spent();
    let dir = private_dir("reserve-off");
    let name = format!("hl-reserve-off-{}", std::process::id());
    let _gw = gateway(&s, &name, &dir, None);
    read_the_budget(&s);
    // A purchase follows its reading at once when it is on (below): give it
    // as long again as that takes. (A sleep: that nothing comes has no hand-off.)
    std::thread::sleep(Duration::from_millis(500));
    let r = s.stop();
    assert_eq!((r.reserved_requests, r.reserve_paid_e8), (0, 0), "{r:?}");
    assert!(!dir.join("reserve").exists(), "no record written");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn on_it_buys_before_the_budget_runs_out_and_the_day_cap_holds_across_a_restart() {
    let dir = private_dir("reserve-on");
    let name = format!("hl-reserve-on-{}", std::process::id());
    // 1.5 USDC a day: 3,000 requests.
    let s = nearly_spent();
    let mut gw = gateway(&s, &name, &dir, Some("1.5"));
    // 499 of 500 left (the switch's arm took one): under the low water of
    // 1,000, no forecast yet: the least purchase, 2,000 requests, 1 USDC.
    let r = s.wait_report(Duration::from_secs(10), |r| r.reserved_requests > 0);
    assert!(r.reserved_requests > 0, "nothing bought: {r:?}");
    let day = s.clock().now_ms().div_euclid(86_400_000);
    gw.child.kill().expect("kill");
    gw.child.wait().expect("wait");
    let r = s.stop();
    assert_eq!(
        (r.reserved_requests, r.reserve_paid_e8, r.throttled),
        (2_000, 100_000_000, 0),
        "{r:?}"
    );
    let record = std::fs::read_to_string(dir.join("reserve")).expect("the record");
    assert_eq!(record, format!("day={day} micro_usdc=1000000\n"));

    // Restarted (against an address as spent as the first): 0.5 USDC is left
    // of the day's 1.5, 1,000 requests, where it would buy 2,000.
    let s = nearly_spent();
    let _gw = gateway(&s, &name, &dir, Some("1.5"));
    let r = s.wait_report(Duration::from_secs(10), |r| r.reserved_requests > 0);
    assert!(r.reserved_requests > 0, "nothing bought: {r:?}");
    let r = s.report();
    assert_eq!(
        (r.reserved_requests, r.reserve_paid_e8),
        (1_000, 50_000_000),
        "{r:?}"
    );
    let record = std::fs::read_to_string(dir.join("reserve")).expect("the record");
    assert_eq!(record, format!("day={day} micro_usdc=1500000\n"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unreadable_record_stops_the_start_naming_the_file() {
    let s = nearly_spent();
    let dir = private_dir("reserve-bad");
    std::fs::write(dir.join("reserve"), "day=x\n").expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_ergon-gateway"))
        .args(["--venue", "hyperliquid", "--base"])
        .arg(format!("http://{}", s.addr()))
        .args(["--name", &format!("hl-reserve-bad-{}", std::process::id())])
        .env("ERGON_API_SECRET", HYPERLIQUID_TEST_KEY)
        .arg("--runtime-dir")
        .arg(&dir)
        .args(["--reserve-budget", "1"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&dir.join("reserve").display().to_string()) && err.contains("day=N"),
        "{err}"
    );
    assert_eq!(s.stop().requests, 0, "refused before the venue is asked");
    let out = Command::new(env!("CARGO_BIN_EXE_ergon-gateway"))
        .args([
            "--venue",
            "bybit",
            "--base",
            "http://127.0.0.1:1",
            "--api-key",
            "k",
        ])
        .args(["--name", "x", "--reserve-budget", "1"])
        .env("ERGON_API_SECRET", "s")
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--reserve-budget: hyperliquid only"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
