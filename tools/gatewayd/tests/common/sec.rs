//! What the security tests share (`security.rs`, `security_*.rs`): the
//! attacker's second uid, a scratch directory, a gateway process against the
//! emulator, this binary's `role` run as another process (each binary that
//! includes this has its own `role` test). Included by path
//! (`#[path = "common/sec.rs"] mod sec;`) next to `mod ready;`.
#![allow(dead_code)] // Each binary uses its own part.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use super::ready;
use ergon_core::Class;
use ergon_gateway::shm::{self, Call, ShmClient, ShmEvent};
use ergon_venue_sim::{Config, Server};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, NewOrder, OrderType, Side, Symbol, TimeInForce,
};
use serde_json::Value;

pub const ATTACKER: &str = "ergon-test-attacker";

pub fn sim() -> Server {
    Server::start(Config::binance_spot()).expect("emulator")
}

pub fn unique(test: &str) -> String {
    format!("sec-{test}-{}", std::process::id())
}

/// A private scratch directory of this test (removed at drop).
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(test: &str) -> Scratch {
        let p = std::env::temp_dir().join(unique(test));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("scratch dir");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Scratch(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn is_root() -> bool {
    std::fs::metadata("/proc/self").map(|m| m.uid()).ok() == Some(0)
}

/// The attacker's (uid, gid), the user created if absent; None (test skipped)
/// when not root.
pub fn attacker() -> Option<(u32, u32)> {
    if !is_root() {
        eprintln!("SKIPPED: needs root to run an attacker as a second uid (CI runs as root)");
        return None;
    }
    let id = |flag: &str| -> Option<u32> {
        let o = Command::new("id").args([flag, ATTACKER]).output().ok()?;
        String::from_utf8(o.stdout).ok()?.trim().parse().ok()
    };
    if id("-u").is_none() {
        // Two tests may race here: the loser's "already exists" is fine.
        let _ = Command::new("useradd")
            .args(["-M", "-r", ATTACKER])
            .status();
    }
    Some((
        id("-u").expect("attacker uid"),
        id("-g").expect("attacker gid"),
    ))
}

/// How a gateway is started.
#[derive(Default)]
pub struct Opts<'a> {
    pub extra: Vec<String>,
    pub env: Vec<(&'a str, String)>,
    pub stdin: Option<String>,
    /// Give the secret with `--api-secret` (the deprecated way) unless false.
    pub secret_by_flag: bool,
    /// Start under this limit of open descriptors (soft and hard), if given.
    pub nofile: Option<u32>,
}

/// A gateway process, its stdout, and its stderr in a file.
pub struct Gw {
    pub child: Child,
    pub out: BufReader<ChildStdout>,
    pub stderr: PathBuf,
}

impl Drop for Gw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Gw {
    /// Everything it wrote, after it exits (or is killed): stdout, stderr.
    pub fn finish(mut self) -> (String, String) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut out = String::new();
        let _ = self.out.read_to_string(&mut out);
        let err = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        (out, err)
    }
}

pub fn spawn_gateway(s: &Server, name: &str, dir: &Path, o: Opts<'_>) -> (Child, PathBuf) {
    let c = s.config();
    let a = &c.accounts[0];
    let stderr = dir.join(format!("{name}.stderr"));
    let mut cmd = match o.nofile {
        // `ulimit -n` in sh sets both limits; exec keeps the pid.
        Some(n) => {
            let mut c = Command::new("sh");
            c.arg("-c")
                .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
                .arg(env!("CARGO_BIN_EXE_ergon-gateway"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_ergon-gateway")),
    };
    cmd.args(["--venue", "binance-spot", "--base"])
        .arg(format!("http://{}", s.addr()))
        .args(["--api-key", &a.api_key, "--name", name]);
    if o.secret_by_flag {
        cmd.args(["--api-secret", &a.secret]);
    }
    cmd.args(&o.extra)
        .env_remove("ERGON_API_SECRET")
        .env_remove("RUNTIME_DIRECTORY")
        .envs(o.env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(if o.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr).expect("stderr file"));
    let mut child = cmd.spawn().expect("spawn ergon-gateway");
    if let Some(text) = o.stdin {
        let mut i = child.stdin.take().expect("stdin");
        i.write_all(text.as_bytes()).expect("write stdin");
    }
    (child, stderr)
}

/// Starts a gateway and waits for its `ready NAME`.
pub fn gateway(s: &Server, name: &str, dir: &Path, o: Opts<'_>) -> Gw {
    let (mut child, stderr) = spawn_gateway(s, name, dir, o);
    let out = ready::ready(&mut child, name).unwrap_or_else(|e| {
        let err = std::fs::read_to_string(&stderr).unwrap_or_default();
        panic!("the gateway did not start: {e:?}; stderr: {err}")
    });
    Gw { child, out, stderr }
}

/// The start most tests share: the emulator, the scratch directory and the
/// gateway name of `test`, and the gateway ([`journaled_gateway`]). Bound in
/// this order, they drop in the reverse one (the gateway first).
pub fn start_gateway(test: &str, extra: Vec<String>) -> (Server, Scratch, String, Gw) {
    let s = sim();
    let dir = Scratch::new(test);
    let name = unique(test);
    let gw = journaled_gateway(&s, &name, &dir.0, extra);
    (s, dir, name, gw)
}

/// A gateway started with its journal in `dir`, the secret by flag, and `extra`
/// after the journal's flags; waited for until `ready NAME`.
pub fn journaled_gateway(s: &Server, name: &str, dir: &Path, extra: Vec<String>) -> Gw {
    let mut all = journal_args(dir);
    all.extend(extra);
    gateway(
        s,
        name,
        dir,
        Opts {
            extra: all,
            secret_by_flag: true,
            ..Opts::default()
        },
    )
}

/// The gateway's journal in a test's scratch directory.
pub fn journal_args(dir: &Path) -> Vec<String> {
    vec![
        "--journal".into(),
        dir.join("journal").to_string_lossy().into_owned(),
    ]
}

/// The command that runs this binary's `role` with `args` (the gateway's uid
/// told in `ERGON_SEC_GW_UID`), as `uid`/`gid` when given, stdout piped.
fn role_command(args: &[&str], as_user: Option<(u32, u32)>) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("exe"));
    cmd.args(["--ignored", "--exact", "role", "--nocapture", "--quiet"])
        .env("ERGON_SEC_ROLE", args.join(" "))
        .env("ERGON_SEC_GW_UID", shm::own_uid().to_string())
        .stdout(Stdio::piped());
    if let Some((uid, gid)) = as_user {
        cmd.uid(uid).gid(gid).current_dir("/");
    }
    cmd
}

/// The role `order GW ME` every `role` test plays: attach to gateway `gw`
/// (run as `gw_uid`) as `me`, one order; its result.
pub fn order_role(gw: &str, gw_uid: u32, me: &str) -> Value {
    let mut c = ShmClient::attach_uid(gw, gw_uid, me, false).expect("attach");
    serde_json::json!({ "applied": one_order(&mut c) })
}

/// Prints a role's `result` line, which [`run_role`] reads.
pub fn say_result(result: &Value) {
    let mut o = std::io::stdout();
    let _ = writeln!(o, "result {result}");
    let _ = o.flush();
}

/// Runs this binary's `role` with `args`, as `uid`/`gid` when given; its
/// `result` line as JSON.
pub fn run_role(args: &[&str], as_user: Option<(u32, u32)>) -> Value {
    let mut child = role_command(args, as_user).spawn().expect("spawn role");
    let out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut result = None;
    for l in out.lines() {
        let l = l.expect("read");
        if let Some(rest) = l.trim().strip_prefix("result ") {
            result = Some(serde_json::from_str(rest).expect("json"));
        }
    }
    let status = child.wait().expect("wait");
    result.unwrap_or_else(|| panic!("role {args:?} printed no result ({status})"))
}

/// A role process's words (`ROLE GW ME ...`, from `ERGON_SEC_ROLE`, which
/// [`run_role`] and [`spawn_role`] set) and the uid its gateway runs as (the
/// test's, not necessarily this role's); None outside a role process.
pub fn role_spec() -> Option<(Vec<String>, u32)> {
    let spec = std::env::var("ERGON_SEC_ROLE").ok()?;
    Some((spec.split(' ').map(str::to_string).collect(), gateway_uid()))
}

/// The uid the gateways of the test run as (the test's own), as a role process
/// run as another uid learns it.
pub fn gateway_uid() -> u32 {
    std::env::var("ERGON_SEC_GW_UID")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(shm::own_uid)
}

/// Starts this binary's `role` with `args` as `uid`/`gid` when given, without
/// waiting for it: the child (killed when dropped) once it printed a line that
/// starts with `line` (kept in [`Role::said`]).
pub fn spawn_role(args: &[&str], as_user: Option<(u32, u32)>, line: &str) -> Role {
    let mut child = role_command(args, as_user).spawn().expect("spawn role");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut l = String::new();
    while !l.trim().starts_with(line) {
        l.clear();
        if out.read_line(&mut l).expect("read") == 0 {
            panic!("role {args:?} ended before saying {line:?}");
        }
    }
    Role {
        child,
        out,
        said: l.trim().to_string(),
    }
}

/// A role process started by [`spawn_role`]: killed and reaped when dropped.
pub struct Role {
    /// The process.
    pub child: Child,
    /// Its standard output after the line waited for.
    pub out: BufReader<ChildStdout>,
    /// The line waited for.
    pub said: String,
}

impl Role {
    /// Kills it and returns everything it printed after the line waited for.
    pub fn finish(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut rest = String::new();
        let _ = self.out.read_to_string(&mut rest);
        rest
    }
}

impl Drop for Role {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// CPU time (user + system, clock ticks) process `pid` has used so far.
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // Fields after the command name (which may hold spaces): utime is the 12th.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().expect("utime") + f[12].parse::<u64>().expect("stime")
}

/// The gateway's stats text, read as the owner, polled until `pred` holds
/// (bounded: the gateway publishes every 100 ms).
pub fn stats_until(name: &str, pred: impl Fn(&str) -> bool) -> String {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let t = shm::read_stats(name).unwrap_or_default();
        if pred(&t) || Instant::now() > until {
            return t;
        }
        // No hand-off: the gateway publishes its stats every 100 ms; poll them.
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn order(symbol: Symbol<'_>, id: ClientOrderId) -> NewOrder<'_> {
    NewOrder {
        symbol,
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Decimal::new("49000.00").ok(),
        quantity: Decimal::new("0.001").expect("decimal"),
        client_order_id: id,
        reduce_only: false,
    }
}

/// One order through `c`; 1 if it was applied, 0 otherwise (bounded wait).
pub fn one_order(c: &mut ShmClient) -> u64 {
    let symbol = Symbol::new("BTCUSDT").expect("symbol");
    let id = c.next_client_order_id().expect("id");
    applied(c, order(symbol, id))
}

/// `o` through `c`; 1 if it was applied, 0 otherwise (bounded wait).
pub fn applied(c: &mut ShmClient, o: NewOrder<'_>) -> u64 {
    c.submit(&Call::NewOrder(o), Class::Normal, 1)
        .expect("submit");
    let until = Instant::now() + Duration::from_secs(20);
    while Instant::now() < until {
        c.wait(100);
        while let Some((ev, _)) = c.poll() {
            if ev.is_final() {
                return u64::from(matches!(ev, ShmEvent::Applied { .. }));
            }
        }
    }
    0
}

/// An impostor's health name: binds `@ergon-gateway-health/NAME` first and
/// answers every connection with `forged health`, on a thread of its own.
pub fn forge_health(name: &str) -> std::thread::JoinHandle<()> {
    use std::os::linux::net::SocketAddrExt;
    let a =
        std::os::unix::net::SocketAddr::from_abstract_name(format!("ergon-gateway-health/{name}"))
            .expect("addr");
    let l = std::os::unix::net::UnixListener::bind_addr(&a).expect("bind health");
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let _ = s.write_all(b"forged health\n");
        }
    })
}

/// An impostor's forged answer to a control command `cmd` (`clear-halt`,
/// `stats`, else an attach).
pub fn forged_answer(cmd: &str) -> &'static str {
    match cmd.split(' ').next() {
        Some("clear-halt") => "ok cleared orders_1s",
        Some("stats") => "ok stats",
        _ => "ok new 64",
    }
}
