//! `ergon-gateway` as a security boundary (issue 27), with real processes: the
//! gateway binary against the venue emulator (in this process), strategy and
//! attacker processes (this test binary again, in the `role` test).
//!
//! Access tests run the attacker as a second uid (`ergon-test-attacker`, created
//! if absent); they need root for that and skip, saying so, when not root.
//!
//! No test sleeps to let time pass for a verdict: each waits on `ready NAME`, on a
//! process's output lines or exit, or polls with a bounded deadline.

#[path = "common/exit.rs"]
mod exit;
#[path = "common/ready.rs"]
mod ready;
#[path = "common/sec.rs"]
mod sec;
use sec::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ergon_core::Class;
use ergon_gateway::shm::{self, Call, ShmClient, ShmEvent};
use ergon_venue_sim::{Config, Fault, Server};
use ergon_venues::endpoint::{CancelReplace, ClientOrderId, OrderRef, OrderState, Symbol};

// ---- item 1: access ----

#[test]
fn another_uid_is_refused_at_accept_and_nothing_is_signed() {
    let Some(att) = attacker() else { return };
    let (s, _dir, name, gw) = start_gateway("refused", vec![]);
    let r = run_role(&["attack", &name, "victim"], Some(att));
    let attach = r["attach"].as_str().unwrap();
    assert!(attach.contains("not allowed"), "attach as another uid: {r}");
    assert!(
        r["clear_halt"].as_str().unwrap().contains("not allowed"),
        "clear-halt as another uid: {r}"
    );
    assert!(
        r["stats"].as_str().unwrap().contains("not allowed"),
        "stats as another uid: {r}"
    );
    assert_eq!(r["applied"], 0, "{r}");
    let rep = s.report();
    assert_eq!(
        rep.executions, 0,
        "an order of another uid was signed and run"
    );
    let t = stats_until(&name, |t| t.contains("refused=3"));
    assert!(t.contains("refused=3"), "three refused connections: {t}");
    // The owner itself is served (the same check would have seen its order).
    let me = run_role(&["order", &name, "owner"], None);
    assert_eq!(me["applied"], 1, "{me}");
    assert_eq!(s.report().executions, 1);
    let (_, err) = gw.finish();
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn an_allowed_uid_trades_but_only_the_owner_clears_a_halt() {
    let Some(att) = attacker() else { return };
    let (_s, _dir, name, _gw) =
        start_gateway("allowed", vec!["--allow-uid".into(), att.0.to_string()]);
    let r = run_role(&["attack", &name, "listed"], Some(att));
    assert_eq!(r["attach"], "attached", "{r}");
    assert_eq!(r["applied"], 1, "{r}");
    assert!(
        r["clear_halt"]
            .as_str()
            .unwrap()
            .contains("for the gateway's owner"),
        "{r}"
    );
    // The owner's clear-halt reaches the budget (nothing is halted here).
    let t = stats_until(&name, |t| t.contains("\nbucket "));
    let bucket = t
        .lines()
        .find_map(|l| l.strip_prefix("bucket "))
        .and_then(|l| l.split(' ').next())
        .unwrap_or_else(|| panic!("no bucket in the stats: {t}"));
    let owner = shm::clear_halt(&name, bucket).expect("clear-halt");
    assert_eq!(owner, format!("err {bucket} is not halted"));
}

// ---- item 2: the secret ----

/// Every byte the gateway left behind: its stdout, stderr, and every file in
/// the scratch directory (journal, runtime files).
fn outputs(dir: &Path, out: &str, err: &str) -> Vec<(String, Vec<u8>)> {
    let mut all = vec![
        ("stdout".to_string(), out.as_bytes().to_vec()),
        ("stderr".to_string(), err.as_bytes().to_vec()),
    ];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(b) = std::fs::read(&p) {
                all.push((p.display().to_string(), b));
            }
        }
    }
    all
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn write_secret(dir: &Path, secret: &str, mode: u32) -> PathBuf {
    let p = dir.join(format!("secret-{mode:o}"));
    std::fs::write(&p, format!("{secret}\n")).expect("write secret");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    p
}

#[test]
fn a_secret_from_a_file_is_in_no_argv_and_no_output() {
    let s = sim();
    let secret = s.config().accounts[0].secret.clone();
    let dir = Scratch::new("secretfile");
    let name = unique("secretfile");
    let file = write_secret(&dir.0, &secret, 0o600);
    let mut extra = journal_args(&dir.0);
    extra.extend(["--api-secret-file".into(), file.display().to_string()]);
    let gw = gateway(
        &s,
        &name,
        &dir.0,
        Opts {
            extra,
            ..Opts::default()
        },
    );
    let pid = gw.child.id();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("cmdline");
    assert!(!contains(&cmdline, secret.as_bytes()), "the secret in argv");
    // Signed with it: the emulator ran the order.
    let me = run_role(&["order", &name, "owner"], None);
    assert_eq!(me["applied"], 1, "{me}");
    std::fs::remove_file(&file).expect("rm secret");
    let (out, err) = gw.finish();
    let all = outputs(&dir.0, &out, &err);
    assert!(all.len() >= 3, "stdout, stderr and the journal: {all:?}");
    for (what, bytes) in &all {
        assert!(!contains(bytes, secret.as_bytes()), "the secret in {what}");
    }
    assert!(!err.contains("deprecated"), "{err}");
}

#[test]
fn a_secret_from_the_environment_or_stdin_signs() {
    let s = sim();
    let secret = s.config().accounts[0].secret.clone();
    let dir = Scratch::new("secretenv");
    for how in ["env", "stdin"] {
        let name = unique(&format!("secret{how}"));
        let mut o = Opts {
            extra: journal_args(&dir.0),
            ..Opts::default()
        };
        match how {
            "env" => o.env.push(("ERGON_API_SECRET", secret.clone())),
            _ => {
                o.extra.push("--api-secret-stdin".into());
                o.stdin = Some(format!("{secret}\n"));
            }
        }
        let gw = gateway(&s, &name, &dir.0, o);
        let me = run_role(&["order", &name, how], None);
        assert_eq!(me["applied"], 1, "{how}: {me}");
        let (out, err) = gw.finish();
        for (what, bytes) in outputs(&dir.0, &out, &err) {
            assert!(
                !contains(&bytes, secret.as_bytes()),
                "{how}: the secret in {what}"
            );
        }
    }
}

#[test]
fn the_secret_flag_still_works_with_one_deprecation_warning() {
    let (_s, _dir, name, gw) = start_gateway("secretflag", vec![]);
    let me = run_role(&["order", &name, "flag"], None);
    assert_eq!(me["applied"], 1, "{me}");
    let (_, err) = gw.finish();
    assert_eq!(err.matches("deprecated").count(), 1, "{err}");
}

/// Starts a gateway that must refuse to start; its stderr.
fn refused_start(s: &Server, dir: &Path, extra: Vec<String>) -> String {
    // One name per start: on main, refused ones start and would share it.
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = unique(&format!("refusedstart{n}"));
    let (mut child, stderr) = spawn_gateway(
        s,
        &name,
        dir,
        Opts {
            extra,
            ..Opts::default()
        },
    );
    // Its first line, or end of file when it exits: bounded either way.
    let mut out = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut out)
        .expect("read");
    if out.contains("ready") {
        let _ = child.kill();
    }
    let status = child.wait().expect("wait");
    let err = std::fs::read_to_string(stderr).unwrap_or_default();
    assert!(!out.contains("ready"), "started: {out} {err}");
    assert_eq!(status.code(), Some(1), "{err}");
    err
}

#[test]
fn a_secret_file_another_user_could_touch_is_refused() {
    let s = sim();
    let secret = s.config().accounts[0].secret.clone();
    let dir = Scratch::new("secretbad");
    let with = |p: &Path| {
        let mut e = journal_args(&dir.0);
        e.extend(["--api-secret-file".into(), p.display().to_string()]);
        e
    };
    let open = write_secret(&dir.0, &secret, 0o644);
    let err = refused_start(&s, &dir.0, with(&open));
    assert!(err.contains("other users may read it"), "{err}");
    let good = write_secret(&dir.0, &secret, 0o600);
    let link = dir.0.join("link");
    std::os::unix::fs::symlink(&good, &link).expect("symlink");
    let err = refused_start(&s, &dir.0, with(&link));
    assert!(err.contains("symlink"), "{err}");
    assert!(
        refused_start(&s, &dir.0, with(&dir.0)).contains("not a regular file"),
        "a directory"
    );
    if let Some((uid, gid)) = attacker() {
        std::os::unix::fs::chown(&good, Some(uid), Some(gid)).expect("chown");
        let err = refused_start(&s, &dir.0, with(&good));
        assert!(err.contains("not by the gateway's uid"), "{err}");
    }
}

/// An OKX gateway (the venue that signs with a passphrase) with the passphrase
/// given `how`: its stdout's first line, its exit status if it did not start,
/// its stderr, and its argv. `--protection required` arms the dead man's switch
/// before `ready`: a signed request, which the emulator refuses under a wrong
/// passphrase.
fn okx_start(
    s: &Server,
    dir: &Path,
    name: &str,
    how: &[String],
    env: Option<&str>,
) -> (String, Option<i32>, String, Vec<u8>) {
    let c = s.config();
    let a = &c.accounts[0];
    let stderr = dir.join(format!("{name}.stderr"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ergon-gateway"));
    cmd.args(["--venue", "okx", "--base"])
        .arg(format!("http://{}", s.addr()))
        .args(["--api-key", &a.api_key, "--name", name])
        .args(["--protection", "required", "--protection-timeout", "10"])
        .args(["--start-timeout", "10"])
        .args(journal_args(&dir.join(name)))
        .args(how)
        .env("ERGON_API_SECRET", &a.secret)
        .env_remove("ERGON_PASSPHRASE")
        .env_remove("RUNTIME_DIRECTORY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr).expect("stderr file"));
    if let Some(p) = env {
        cmd.env("ERGON_PASSPHRASE", p);
    }
    std::fs::create_dir_all(dir.join(name)).expect("dir");
    let mut child = cmd.spawn().expect("spawn ergon-gateway");
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", child.id())).unwrap_or_default();
    let mut line = String::new();
    let _ = BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line);
    let status = if line.contains("ready") {
        let _ = child.kill();
        let _ = child.wait();
        None
    } else {
        child.wait().expect("wait").code()
    };
    let err = std::fs::read_to_string(&stderr).unwrap_or_default();
    (line, status, err, cmdline)
}

#[test]
fn the_passphrase_comes_from_a_file_or_the_environment_and_is_in_no_argv_and_no_output() {
    let s = Server::start(Config::okx()).expect("emulator");
    let pass = s.config().passphrase.clone();
    let dir = Scratch::new("passphrase");
    let file = dir.0.join("passphrase");
    std::fs::write(&file, format!("{pass}\n")).expect("write");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let by_file = vec!["--passphrase-file".to_string(), file.display().to_string()];
    for (how, args, env) in [
        ("file", by_file.clone(), None),
        ("env", vec![], Some(pass.as_str())),
    ] {
        let name = unique(&format!("pass{how}"));
        let (line, status, err, cmdline) = okx_start(&s, &dir.0, &name, &args, env);
        assert_eq!(
            line.trim(),
            format!("ready {name}"),
            "{how}: {status:?} {err}"
        );
        assert!(
            !contains(&cmdline, pass.as_bytes()),
            "{how}: the passphrase in argv"
        );
        assert!(!err.contains("deprecated"), "{how}: {err}");
    }
    // The old flag still works, with one warning line.
    let name = unique("passflag");
    let flag = vec!["--passphrase".to_string(), pass.clone()];
    let (line, status, err, _) = okx_start(&s, &dir.0, &name, &flag, None);
    assert_eq!(
        line.trim(),
        format!("ready {name}"),
        "flag: {status:?} {err}"
    );
    assert_eq!(err.matches("deprecated").count(), 1, "{err}");
    // The file is what signs: a wrong one does not start.
    let wrong = dir.0.join("wrong");
    std::fs::write(&wrong, "not-the-passphrase\n").expect("write");
    std::fs::set_permissions(&wrong, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let args = vec!["--passphrase-file".to_string(), wrong.display().to_string()];
    let (line, status, err, _) = okx_start(&s, &dir.0, &unique("passwrong"), &args, None);
    assert!(
        !line.contains("ready") && status == Some(1),
        "{line} {status:?} {err}"
    );
    // In the venue's words: OKX answers 50105 "OK-ACCESS-PASSPHRASE incorrect"
    // (https://www.okx.com/docs-v5/en/#error-code-rest-api-authentication). On
    // main the operator read only "the switch is not armed (refused)".
    eprintln!("a wrong passphrase: {err}");
    assert!(
        err.contains("50105") && err.contains("PASSPHRASE"),
        "the venue's reason: {err}"
    );
    // A file other users may read is refused, before anything is signed.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let (line, status, err, _) = okx_start(&s, &dir.0, &unique("passopen"), &by_file, None);
    assert!(
        !line.contains("ready") && status == Some(1),
        "{line} {status:?} {err}"
    );
    assert!(
        err.contains("--passphrase-file") && err.contains("other users may read it"),
        "{err}"
    );
    // Nowhere in what any of these gateways left behind but the flag's argv.
    std::fs::remove_file(&file).expect("rm");
    for (what, bytes) in outputs(&dir.0, "", "") {
        assert!(
            !contains(&bytes, pass.as_bytes()),
            "the passphrase in {what}"
        );
    }
}

// ---- item 3: sealed regions ----

#[test]
fn a_client_cannot_resize_its_region_or_write_the_stats_and_the_gateway_lives_on() {
    let (_s, _dir, name, mut gw) = start_gateway("sealed", vec![]);
    // A hostile client takes its region's descriptor and tries to shrink it
    // under the gateway's mapping (a SIGBUS at the gateway's next write, on main).
    let (_sock, answer, mut fds) =
        shm::raw_command(&name, "attach hostile protocol=3").expect("attach");
    assert!(answer.starts_with("ok new"), "{answer}");
    assert_eq!(
        fds.len(),
        1,
        "the region alone (wake-ups go over the connection)"
    );
    let region = std::fs::File::from(fds.remove(0));
    let len = region.metadata().expect("fstat").len();
    assert!(region.set_len(0).is_err(), "the region shrank");
    assert!(region.set_len(len * 2).is_err(), "the region grew");
    assert_eq!(region.metadata().expect("fstat").len(), len);
    // The stats region goes to every allowed reader: nobody may write it.
    let (_sock, answer, mut fds) = shm::raw_command(&name, "stats").expect("stats");
    assert!(answer.starts_with("ok"), "{answer}");
    let mut stats = std::fs::File::from(fds.remove(0));
    assert!(stats.write_all(b"forged").is_err(), "wrote into the stats");
    assert!(stats.set_len(0).is_err(), "shrank the stats");
    // The gateway writes every client's region each turn: still alive, and
    // another client's order goes through.
    let me = run_role(&["order", &name, "other"], None);
    assert_eq!(me["applied"], 1, "{me}");
    assert!(
        gw.child.try_wait().expect("try_wait").is_none(),
        "the gateway died"
    );
    let t = stats_until(&name, |t| t.contains("client hostile"));
    assert!(t.contains("client hostile attached"), "{t}");
}

// ---- items 9 and 10: the journal ----

fn with_journal(p: &Path) -> Vec<String> {
    vec![
        "--journal".into(),
        p.display().to_string(),
        "--api-secret".into(),
        "unused-secret".into(),
    ]
}

#[test]
fn a_symlink_planted_at_the_journal_is_refused_and_its_target_untouched() {
    let s = sim();
    let dir = Scratch::new("jsymlink");
    let victim = dir.0.join("victim");
    std::fs::write(&victim, b"precious").expect("victim");
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let journal = dir.0.join("journal");
    std::os::unix::fs::symlink(&victim, &journal).expect("plant");
    let err = refused_start(&s, &dir.0, with_journal(&journal));
    assert!(err.contains("symlink"), "{err}");
    assert_eq!(std::fs::read(&victim).expect("victim"), b"precious");
}

#[test]
fn a_journal_pre_created_by_another_uid_is_refused() {
    let Some((uid, gid)) = attacker() else { return };
    let s = sim();
    let dir = Scratch::new("jowner");
    let journal = dir.0.join("journal");
    std::fs::write(&journal, b"theirs").expect("plant");
    std::fs::set_permissions(&journal, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    std::os::unix::fs::chown(&journal, Some(uid), Some(gid)).expect("chown");
    let err = refused_start(&s, &dir.0, with_journal(&journal));
    assert!(err.contains("not by the gateway's uid"), "{err}");
    assert_eq!(std::fs::read(&journal).expect("journal"), b"theirs");
}

#[test]
fn a_truncated_journal_is_refused_and_kept() {
    let s = sim();
    let dir = Scratch::new("jtrunc");
    let journal = dir.0.join("journal");
    // A journal's header (magic, 8 entries) cut short of its entries.
    let mut b = b"ergonjnl".to_vec();
    b.extend(8u64.to_le_bytes());
    b.resize(100, 0);
    std::fs::write(&journal, &b).expect("write");
    std::fs::set_permissions(&journal, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let err = refused_start(&s, &dir.0, with_journal(&journal));
    assert!(err.contains("does not fit"), "{err}");
    assert_eq!(std::fs::read(&journal).expect("journal"), b);
}

#[test]
fn the_journal_lives_in_a_private_runtime_directory() {
    use std::os::unix::fs::MetadataExt;
    let s = sim();
    let dir = Scratch::new("jrundir");
    let run = dir.0.join("run").join("gw");
    let name = unique("jrundir");
    let gw = gateway(
        &s,
        &name,
        &dir.0,
        Opts {
            extra: vec!["--runtime-dir".into(), run.display().to_string()],
            secret_by_flag: true,
            ..Opts::default()
        },
    );
    assert_eq!(std::fs::metadata(&run).expect("dir").mode() & 0o777, 0o750);
    let j = std::fs::symlink_metadata(run.join("journal")).expect("journal");
    assert!(j.file_type().is_file());
    assert_eq!(j.mode() & 0o777, 0o600);
    drop(gw);
    // A directory other users may write (to plant a link) is refused.
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let mut extra = vec!["--runtime-dir".into(), run.display().to_string()];
    extra.extend(["--api-secret".into(), "unused-secret".into()]);
    let err = refused_start(&s, &dir.0, extra);
    assert!(err.contains("other users may write it"), "{err}");
}

// ---- items 4 and 8: one attach per connection; a stop that finishes ----

#[test]
fn a_second_attach_on_one_connection_is_refused_and_the_first_detaches_at_hang_up() {
    let (_s, _dir, name, _gw) = start_gateway("twice", vec![]);
    let (sock, answer, _fds) = shm::raw_command(&name, "attach first protocol=3").expect("attach");
    assert!(answer.starts_with("ok new"), "{answer}");
    let mut sock = std::fs::File::from(sock);
    sock.write_all(b"attach second protocol=3").expect("send");
    let mut buf = [0u8; 512];
    let n = sock.read(&mut buf).expect("answer");
    let answer = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert_eq!(answer, "err already attached on this connection");
    drop(sock); // hang-up: "first" is detached, its name free to attach again
    let t = stats_until(&name, |t| t.contains("client first detached"));
    assert!(t.contains("client first detached"), "{t}");
    assert!(!t.contains("client second"), "{t}");
    let me = run_role(&["order", &name, "first"], None);
    assert_eq!(me["applied"], 1, "{me}");
}

#[test]
fn sigterm_finishes_while_a_client_keeps_submitting() {
    // Every order held 1.5 s by the venue: with a client that keeps submitting,
    // something is always in flight unless the gateway stops taking submits.
    let mut cfg = Config::binance_spot();
    cfg.faults.chances = vec![(Fault::Delay, 1.0)];
    cfg.faults.delay_ms = 1500;
    let s = Server::start(cfg).expect("emulator");
    let dir = Scratch::new("stop");
    let name = unique("stop");
    let mut gw = journaled_gateway(&s, &name, &dir.0, Vec::new());
    let mut spam = Command::new(std::env::current_exe().expect("exe"))
        .args(["--ignored", "--exact", "role", "--nocapture", "--quiet"])
        .env("ERGON_SEC_ROLE", format!("spam {name} spammer"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = BufReader::new(spam.stdout.take().expect("stdout"));
    let mut line = String::new();
    while !line.starts_with("spamming") {
        line.clear();
        assert!(out.read_line(&mut line).expect("read") > 0, "spammer died");
    }
    let pid = gw.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill")
        .success());
    let status = exit::exited(&mut gw.child, Duration::from_secs(30));
    let _ = spam.kill();
    let _ = spam.wait();
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "SIGTERM did not finish within 30 s under a client that keeps submitting"
    );
}

// ---- item 6: a client acts on its own orders only ----

/// Reads `c`'s events until `pred` holds for one (bounded); the events read.
fn events_until(c: &mut ShmClient, pred: impl Fn(&ShmEvent) -> bool) -> Vec<(ShmEvent, Vec<u8>)> {
    let until = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    while Instant::now() < until {
        c.wait(100);
        while let Some((ev, body)) = c.poll() {
            let hit = pred(&ev);
            seen.push((ev, body.to_vec()));
            if hit {
                return seen;
            }
        }
    }
    panic!("no such event within 20 s; seen {seen:?}");
}

#[test]
fn a_client_can_neither_cancel_nor_query_anothers_order_nor_hear_its_updates() {
    // Over the WebSocket API, with its user data stream: order updates flow.
    let (s, _dir, name, gw) = start_gateway("owners", vec!["--order-entry".into(), "ws".into()]);
    let symbol = Symbol::new("BTCUSDT").expect("symbol");
    let mut a = ShmClient::attach(&name, "owner", false).expect("attach");
    let mut b = ShmClient::attach(&name, "other", false).expect("attach");
    let mine = a.next_client_order_id().expect("id");
    a.submit(&Call::NewOrder(order(symbol, mine)), Class::Normal, 1)
        .expect("submit");
    events_until(
        &mut a,
        |ev| matches!(ev, ShmEvent::OrderUpdate(x) if x.client_order_id == mine),
    );
    // The other client names the owner's order every way it can.
    let theirs = OrderRef {
        symbol,
        client_order_id: mine,
    };
    let own_new = b.next_client_order_id().expect("id");
    let calls = [
        Call::Cancel(theirs),
        Call::Query(theirs),
        Call::NewOrder(order(symbol, mine)),
        Call::CancelReplace(CancelReplace {
            cancel: mine,
            new: order(symbol, own_new),
        }),
        // An id no block holds.
        Call::NewOrder(order(symbol, ClientOrderId::new("made-up-1").expect("id"))),
    ];
    // The account's open orders: the owner's is one, but not the other's to see.
    b.submit(&Call::OpenOrders(Some(symbol)), Class::Normal, 19)
        .expect("submit");
    let listed = events_until(&mut b, |ev| ev.is_final() && ev.tag() == 19);
    assert_eq!(
        listed.last().map(|e| e.0),
        Some(ShmEvent::Applied { tag: 19 }),
        "{listed:?}"
    );
    // Every event the other client reads, to look through at the end.
    let mut other = Vec::new();
    for (i, call) in calls.iter().enumerate() {
        let tag = 10 + i as u64;
        b.submit(call, Class::Urgent, tag).expect("submit");
        let seen = events_until(&mut b, |ev| ev.is_final() && ev.tag() == tag);
        let (last, _) = seen.last().expect("an event");
        assert_eq!(*last, ShmEvent::NotYours { tag }, "call {i}: {seen:?}");
        other.extend(seen);
    }
    other.extend(listed);
    // Still resting: its owner's own query finds it open, then its own cancel ends it.
    a.submit(&Call::Query(theirs), Class::Normal, 2)
        .expect("query");
    let seen = events_until(&mut a, |ev| ev.is_final() && ev.tag() == 2);
    let (last, body) = seen.last().expect("an event");
    assert_eq!(*last, ShmEvent::Applied { tag: 2 }, "{seen:?}");
    assert!(
        String::from_utf8_lossy(body).contains("\"NEW\""),
        "{}",
        String::from_utf8_lossy(body)
    );
    a.submit(&Call::Cancel(theirs), Class::Normal, 3)
        .expect("cancel");
    events_until(&mut a, |ev| {
        matches!(ev, ShmEvent::OrderUpdate(x)
            if x.orig_client_order_id == Some(mine) || x.client_order_id == mine)
            && matches!(ev, ShmEvent::OrderUpdate(x) if x.state == OrderState::Canceled)
    });
    // Whatever reached the other client: none of the owner's updates or ids.
    // (Its own order's update, had it placed one, would be its to read.)
    b.submit(&Call::Account, Class::Normal, 20).expect("submit");
    other.extend(events_until(&mut b, |ev| ev.is_final() && ev.tag() == 20));
    while let Some((ev, body)) = b.poll() {
        other.push((ev, body.to_vec()));
    }
    for (ev, body) in &other {
        assert!(
            !matches!(ev, ShmEvent::OrderUpdate(_)),
            "the owner's update reached the other client: {ev:?}"
        );
        assert!(!contains(body, mine.as_str().as_bytes()), "{ev:?}");
    }
    let t = stats_until(&name, |t| t.contains("not_yours=5"));
    assert!(
        t.contains("client other attached") && t.contains("not_yours=5"),
        "{t}"
    );
    drop((a, b));
    drop(gw);
    let r = s.stop();
    // One order placed, cancelled once (by its owner); nothing of the other's ran.
    assert_eq!((r.executions, r.duplicates, r.cancels), (1, 0, 1));
}

/// Item 6 across a restart: the blocks of ids each client name was issued are
/// kept beside the journal (`JOURNAL.owners`), so a restarted gateway still
/// refuses another client's cancel of an earlier life's order, and takes its
/// owner's (the same name, attached again). Before the owners file any client
/// could act on an earlier life's ids.
#[test]
fn after_a_restart_another_client_still_cannot_cancel_an_earlier_order() {
    let s = sim();
    let dir = Scratch::new("owners-restart");
    let name = unique("owners-restart");
    let start = || journaled_gateway(&s, &name, &dir.0, Vec::new());
    let gw = start();
    let symbol = Symbol::new("BTCUSDT").expect("symbol");
    let mut a = ShmClient::attach(&name, "owner", false).expect("attach");
    let mine = a.next_client_order_id().expect("id");
    a.submit(&Call::NewOrder(order(symbol, mine)), Class::Normal, 1)
        .expect("submit");
    let placed = events_until(&mut a, |ev| ev.is_final() && ev.tag() == 1);
    assert_eq!(
        placed.last().map(|e| e.0),
        Some(ShmEvent::Applied { tag: 1 }),
        "{placed:?}"
    );
    drop(a);
    // SIGKILL, and a new life on the same journal.
    drop(gw);
    let gw = start();
    let theirs = OrderRef {
        symbol,
        client_order_id: mine,
    };
    let mut b = ShmClient::attach(&name, "other", false).expect("attach");
    b.submit(&Call::Cancel(theirs), Class::Urgent, 5)
        .expect("submit");
    let seen = events_until(&mut b, |ev| ev.is_final() && ev.tag() == 5);
    assert_eq!(
        seen.last().map(|e| e.0),
        Some(ShmEvent::NotYours { tag: 5 }),
        "{seen:?}"
    );
    let mut a = ShmClient::attach(&name, "owner", false).expect("attach");
    a.submit(&Call::Cancel(theirs), Class::Normal, 6)
        .expect("cancel");
    let seen = events_until(&mut a, |ev| ev.is_final() && ev.tag() == 6);
    assert_eq!(
        seen.last().map(|e| e.0),
        Some(ShmEvent::Applied { tag: 6 }),
        "{seen:?}"
    );
    drop((a, b));
    drop(gw);
    let r = s.stop();
    assert_eq!(
        (r.executions, r.cancels),
        (1, 1),
        "only the owner's cancel ran"
    );
}

// ---- item 8: a doorbell of one's own ----

/// Whether two descriptors of this process are one open file (`kcmp`).
#[allow(unsafe_code)]
fn same_file(a: &std::os::fd::OwnedFd, b: &std::os::fd::OwnedFd) -> bool {
    use std::os::fd::AsRawFd;
    let pid = std::process::id() as libc::c_long;
    // SAFETY: a plain syscall on two descriptors this process owns.
    let r = unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            pid,
            pid,
            0 as libc::c_long, // KCMP_FILE
            a.as_raw_fd() as libc::c_long,
            b.as_raw_fd() as libc::c_long,
        )
    };
    assert!(r >= 0, "kcmp: {}", std::io::Error::last_os_error());
    r == 0
}

#[test]
fn each_client_has_its_own_doorbell_and_a_thief_draining_one_steals_no_wake_up() {
    use std::os::fd::AsRawFd;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    let (_s, _dir, name, _gw) = start_gateway("doorbell", vec![]);
    // The thief: attached, it reads its connection instead of using it (where
    // wake-ups arrive since issue 41; before, from the eventfds it was handed,
    // each read of which emptied them).
    let (_tsock, answer, tfds) =
        shm::raw_command(&name, "attach thief protocol=3").expect("attach");
    assert!(answer.starts_with("ok new"), "{answer}");
    let (_osock, answer, ofds) =
        shm::raw_command(&name, "attach other protocol=3").expect("attach");
    assert!(answer.starts_with("ok new"), "{answer}");
    assert_eq!(
        (tfds.len(), ofds.len()),
        (1, 1),
        "a region each, no eventfd"
    );
    assert!(
        !same_file(&tfds[0], &ofds[0]),
        "two clients were handed one region"
    );
    assert!(
        !same_file(&_tsock, &_osock),
        "two clients were handed one connection"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let stolen = Arc::new(AtomicU64::new(0));
    let thief = {
        let (stop, stolen) = (stop.clone(), stolen.clone());
        let fd = _tsock.as_raw_fd();
        std::thread::spawn(move || {
            let mut v = [0u8; 64];
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: reads into a local buffer from a descriptor the test
                // keeps open until this thread is joined; never blocks.
                #[allow(unsafe_code)]
                let n =
                    unsafe { libc::recv(fd, v.as_mut_ptr().cast(), v.len(), libc::MSG_DONTWAIT) };
                if n > 0 {
                    stolen.fetch_add(1, Ordering::Relaxed);
                }
                std::hint::spin_loop();
            }
        })
    };
    // The victim sleeps on its wake between round trips, so the gateway parks
    // and each submit needs the victim's doorbell to be heard at once (the
    // gateway's own timer would only come round every 100 ms).
    let mut c = ShmClient::attach(&name, "victim", false).expect("attach");
    let symbol = Symbol::new("BTCUSDT").expect("symbol");
    const ROUNDS: u64 = 60;
    let (mut finals, mut slow_waits) = (0u64, 0u64);
    for tag in 1..=ROUNDS {
        c.submit(&Call::Book { symbol, depth: 5 }, Class::Normal, tag)
            .expect("submit");
        let until = Instant::now() + Duration::from_secs(20);
        let mut done = false;
        while !done && Instant::now() < until {
            if !c.wait(40) {
                slow_waits += 1;
            }
            while let Some((ev, _)) = c.poll() {
                done |= ev.is_final() && ev.tag() == tag;
            }
        }
        finals += u64::from(done);
    }
    stop.store(true, Ordering::Relaxed);
    thief.join().expect("thief");
    assert_eq!(finals, ROUNDS, "every round trip ends");
    assert_eq!(
        stolen.load(Ordering::Relaxed),
        0,
        "the thief read a wake-up meant for another client"
    );
    // A wait of 40 ms that heard nothing means the gateway slept through a
    // doorbell: a loaded machine may cost one or two, a thief most of them.
    assert!(
        slow_waits <= ROUNDS / 10,
        "{slow_waits} waits of {ROUNDS} missed their wake-up"
    );
    drop(ofds);
}

// ---- the roles: run by the tests above as separate processes ----

#[test]
#[ignore = "a client or attacker process's role, run by the other tests"]
fn role() {
    let Some((a, gw_uid)) = role_spec() else {
        return;
    };
    let (gw, me) = (a[1].as_str(), a[2].as_str());
    let result = match a[0].as_str() {
        // attack GW ME: attach and trade, clear a halt, read the stats.
        "attack" => {
            let (attach, applied) = match ShmClient::attach_uid(gw, gw_uid, me, false) {
                Ok(mut c) => ("attached".to_string(), one_order(&mut c)),
                Err(e) => (e.to_string(), 0),
            };
            let clear = match shm::clear_halt_uid(gw, gw_uid, "orders_1s") {
                Ok(a) => a,
                Err(e) => e.to_string(),
            };
            let stats = match shm::read_stats_uid(gw, gw_uid) {
                Ok(_) => "read".to_string(),
                Err(e) => e.to_string(),
            };
            serde_json::json!({
                "attach": attach, "applied": applied, "clear_halt": clear, "stats": stats,
            })
        }
        // spam GW ME: orders without end; says "spamming" after the first applied.
        "spam" => {
            let mut c = ShmClient::attach_uid(gw, gw_uid, me, false).expect("attach");
            let symbol = Symbol::new("BTCUSDT").expect("symbol");
            let (mut seq, mut said) = (0u64, false);
            while !c.is_gone() {
                seq += 1;
                let Ok(id) = c.next_client_order_id() else {
                    break;
                };
                let _ = c.submit(&Call::NewOrder(order(symbol, id)), Class::Normal, seq);
                while let Some((ev, _)) = c.poll() {
                    if !said && matches!(ev, ShmEvent::Applied { .. }) {
                        said = true;
                        println!("spamming");
                    }
                }
                c.check_gateway();
            }
            serde_json::json!({ "sent": seq })
        }
        // order GW ME: one order.
        "order" => order_role(gw, gw_uid, me),
        other => panic!("unknown role {other}"),
    };
    say_result(&result);
}

/// Opens a connection to `@ergon-gateway/NAME` that never says anything (a
/// non-blocking connect; None if the kernel refused it at once).
#[allow(unsafe_code)]
fn idle_connection(name: &str) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: plain syscalls on a zeroed address and a descriptor owned at once.
    unsafe {
        let fd = libc::socket(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        );
        if fd < 0 {
            return None;
        }
        let fd = std::os::fd::OwnedFd::from_raw_fd(fd);
        let mut a: libc::sockaddr_un = core::mem::zeroed();
        a.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let path = format!("ergon-gateway/{name}");
        for (i, b) in path.bytes().enumerate() {
            a.sun_path[i + 1] = b as libc::c_char;
        }
        let len = core::mem::size_of::<libc::sa_family_t>() + 1 + path.len();
        let r = libc::connect(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            (&a as *const libc::sockaddr_un).cast(),
            len as libc::socklen_t,
        );
        (r == 0).then_some(fd)
    }
}

#[test]
fn idle_connections_neither_spin_the_loop_nor_keep_a_client_out() {
    let s = sim();
    let dir = Scratch::new("fds");
    let name = unique("fds");
    let gw = gateway(
        &s,
        &name,
        &dir.0,
        Opts {
            extra: journal_args(&dir.0),
            secret_by_flag: true,
            nofile: Some(64),
            ..Opts::default()
        },
    );
    // More idle connections than the gateway has descriptors: on main the
    // listener stayed readable after EMFILE and the loop spun at 100 % CPU, and
    // the idle connections kept every later attach out for good.
    let idle: Vec<_> = (0..120).filter_map(|_| idle_connection(&name)).collect();
    assert!(idle.len() > 64, "only {} connections opened", idle.len());
    let pid = gw.child.id();
    let before = cpu_ticks(pid);
    // A wait for time to pass is the measurement itself here: CPU per second.
    std::thread::sleep(Duration::from_secs(1));
    let spent = cpu_ticks(pid) - before;
    // SAFETY: sysconf with a constant.
    #[allow(unsafe_code)]
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    assert!(
        spent * 2 < hz,
        "the gateway used {spent} of {hz} ticks in one second with idle connections"
    );
    // The idle ones are closed after a second of silence; a client then attaches
    // and trades while they are all still open on this side.
    let me = run_role(&["order", &name, "after-idle"], None);
    assert_eq!(me["applied"], 1, "{me}");
    let t = stats_until(&name, |_| true);
    drop(idle);
    drop(gw);
    eprintln!("{t}");
}
