//! `ergon-gateway`: one process owns the venue connections and the budget of an
//! IP and an account; strategy processes attach by name and share it over shared
//! memory (`ergon_gateway::shm`). The command line is [`USAGE`].

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ergon_gateway::observe::{self, Observed};
use ergon_gateway::protection::{Mode, Protected, Protection, Shutdown, Startup, State};
use ergon_gateway::shm::{self, ChargeLog, Recent};
use ergon_gateway::wall;
use ergon_gateway::{self as gateway, Account, Control, Gateway, Keys, Start, WsApiStart};
use ergon_gatewayd::metrics::{self, MetricsThread};
use ergon_gatewayd::shm::{self as hub, runtime_dir, Halt, HaltLog, Hub, HubConfig};
use ergon_io::core::Class;
use ergon_venues::binance_futures::BinanceFutures;
use ergon_venues::binance_spot::BinanceSpot;
use ergon_venues::bybit::Bybit;
use ergon_venues::deribit::Deribit;
use ergon_venues::okx::Okx;

mod reserve;

use ergon_gatewayd::secret::{
    check_key_type, load_passphrase, load_secret, KeyType, PassphraseFrom, Secret, SecretFrom,
    PASSPHRASE_ENV,
};

const USAGE: &str = "usage:
  ergon-gateway --venue binance-spot|binance-futures|bybit|okx|deribit --base URL --api-key K --name NAME
                (--api-secret-file PATH | --api-secret-stdin | env ERGON_API_SECRET
                 | --api-secret S, deprecated: visible to every user in ps)
                [--key-type hmac|ed25519]   (Binance: an Ed25519 key is the PKCS#8 PEM private key
                 in the secret file, and is detected without the flag; HMAC otherwise)
                [--passphrase-file PATH | env ERGON_PASSPHRASE
                 | --passphrase P, deprecated: visible to every user in ps]
                [--cpu N] [--max-clients N] [--symbol S] [--in-flight N]
                [--share PCT] [--keep SECS] [--busy] [--guard-ms MS] [--journal PATH]
                [--runtime-dir DIR] [--start-timeout SECS] [--forget-names DAYS]
                [--class-ceiling urgent|normal|bulk] [--order-entry ws|rest] [--ws-api URL]
                [--no-stream] [--allow-uid UID[,UID..]]... [--allow-gid GID[,GID..]]...
                [--protection auto|required|off] [--protection-timeout SECS]
                [--private-ws URL]   (bybit: the private stream DCP's connection uses)
                [--etcd URL[,URL...] --account NAME --safe-share PCT
                 [--host NAME] [--lease-ttl SECS]
                 [--etcd-ca PEM --etcd-cert PEM --etcd-key PEM]   (https:// endpoints)
                 [--etcd-user NAME --etcd-password-file FILE]]
                [--metrics ADDR:PORT] [--degraded-pct P] [--degraded-secs S] [--unreachable-secs S]
  ergon-gateway --venue hyperliquid --base URL --name NAME
                (--private-key-file PATH | env ERGON_API_SECRET)   (the account's key or an API wallet's)
                [--account-address 0x..]   (the master account an API wallet trades for)
                [--vault-address 0x..] [--testnet] [--symbol COIN]   (and the flags above)
                [--reserve-budget USDC_PER_DAY]   (buy address requests when the forecast runs short)
  ergon-gateway --config gateway.toml [flags]   (every flag as a key; flags override the file)
  ergon-gateway --stats --name NAME [--once] [--gateway-uid UID]
  ergon-gateway clear-halt BUCKET --name NAME [--gateway-uid UID]
                (both refuse a gateway that does not run as UID, default their own uid)
  ergon-gateway release-host HOST --etcd URL[,URL...] --account NAME
                (gives back the safe shares etcd reserves for HOST, a host stopped for good)";

const MS: i64 = 1_000_000;

/// How long the WebSocket API (and its order stream) may take to open before
/// the gateway serves over REST alone.
const WS_OPEN_NS: i64 = 3_000 * MS;

/// Set by SIGTERM: stop accepting, settle what is in flight, exit 0.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_term(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// What the command line asks for.
#[derive(Debug, Default)]
struct Args {
    venue: Option<String>,
    base: Option<String>,
    api_key: Option<String>,
    /// Where the secret comes from (None: the environment, [`ergon_gatewayd::secret::SECRET_ENV`]).
    api_secret: Option<SecretFrom>,
    /// `--key-type`: the kind the secret must be (None: detected).
    key_type: Option<KeyType>,
    passphrase: Option<PassphraseFrom>,
    name: Option<String>,
    symbol: Option<String>,
    cpu: Option<usize>,
    max_clients: usize,
    in_flight: usize,
    share: Option<f64>,
    keep_s: f64,
    /// `--forget-names DAYS`: a client name not attached this long leaves the
    /// owners file.
    forget_names_days: f64,
    busy: bool,
    guard_ms: i64,
    stats: bool,
    once: bool,
    /// `--gateway-uid`: the uid `--stats` and `clear-halt` expect the gateway's to be.
    gateway_uid: Option<u32>,
    clear_halt: Option<String>,
    /// `release-host HOST`: the host whose safe shares to release in etcd.
    release_host: Option<String>,
    journal: Option<std::path::PathBuf>,
    /// `--runtime-dir`: the gateway's private directory (the journal's default
    /// place, the halts file's only one).
    runtime_dir: Option<std::path::PathBuf>,
    /// `--start-timeout`: how long start-up may take, holds after a 429 included.
    start_timeout_s: f64,
    class_ceiling: Option<Class>,
    /// `--order-entry`: Some(true) ws, Some(false) rest, None rest unless
    /// `--ws-api` is given.
    order_entry_ws: Option<bool>,
    ws_api: Option<String>,
    /// The user data stream over the WebSocket API (false: `--no-stream`).
    stream: bool,
    /// `--allow-uid`: uids besides the gateway's own that may attach.
    allow_uids: Vec<u32>,
    /// `--allow-gid`: gids whose members may attach.
    allow_gids: Vec<u32>,
    /// `--etcd` and the flags that go with it: the account's limits leased.
    lease: ergon_gatewayd::lease::LeaseFlags,
    /// `--protection`: the venue's dead man's switch.
    protection: Mode,
    /// `--protection-timeout`, ms (None: the venue's recommended timeout).
    protection_timeout_ms: Option<u32>,
    /// `--private-ws`: Bybit's private stream, for DCP (default: on `--base`'s
    /// host, `/v5/private`).
    private_ws: Option<String>,
    /// `--metrics` and the health thresholds.
    ops: ergon_gatewayd::metrics::OpsFlags,
    /// Hyperliquid: `--account-address`, `--vault-address`, `--testnet`.
    hl_account: Option<String>,
    hl_vault: Option<String>,
    testnet: bool,
    /// `--reserve-budget`: micro-USDC a day the gateway may spend on address
    /// requests (None: buys none).
    reserve_micro: Option<u64>,
}

impl Args {
    /// Whether orders go over the WebSocket API (with its order stream); on
    /// Deribit by default (its cancel-on-disconnect covers only the orders of
    /// that connection).
    fn ws(&self) -> bool {
        let deribit = self.venue.as_deref() == Some("deribit");
        self.order_entry_ws
            .unwrap_or(self.ws_api.is_some() || deribit)
    }
}

fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args {
        max_clients: 16,
        in_flight: 64,
        keep_s: 300.0,
        forget_names_days: f64::from(hub::FORGET_NAMES_DAYS),
        guard_ms: 30,
        stream: true,
        start_timeout_s: 60.0,
        ..Args::default()
    };
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let num =
            |v: String, lo: f64, hi: f64| ergon_gatewayd::config::flag_number(&flag, &v, lo, hi);
        match flag.as_str() {
            "--venue" => a.venue = Some(value()?),
            "--base" => a.base = Some(value()?),
            "--api-key" => a.api_key = Some(value()?),
            "--api-secret" | "--api-secret-file" | "--api-secret-stdin" | "--private-key-file" => {
                if a.api_secret.is_some() {
                    return Err("the API secret is given twice".into());
                }
                a.api_secret = Some(match flag.as_str() {
                    "--api-secret" => SecretFrom::Arg(Secret::new(value()?.into_bytes())?),
                    "--api-secret-file" | "--private-key-file" => SecretFrom::File(value()?.into()),
                    _ => SecretFrom::Stdin,
                });
            }
            "--passphrase" | "--passphrase-file" => {
                if a.passphrase.is_some() {
                    return Err("the API passphrase is given twice".into());
                }
                a.passphrase = Some(match flag.as_str() {
                    "--passphrase" => PassphraseFrom::Arg(
                        Secret::new(value()?.into_bytes())
                            .map_err(|_| "--passphrase: empty".to_string())?,
                    ),
                    _ => PassphraseFrom::File(value()?.into()),
                });
            }
            "--key-type" => a.key_type = Some(value()?.parse()?),
            "--name" => a.name = Some(value()?),
            "--account-address" => a.hl_account = Some(value()?),
            "--vault-address" => a.hl_vault = Some(value()?),
            "--testnet" => a.testnet = true,
            "--reserve-budget" => a.reserve_micro = Some(reserve::parse_usdc(&value()?)?),
            "--symbol" => a.symbol = Some(value()?),
            "--cpu" => a.cpu = Some(num(value()?, 0.0, 4095.0)? as usize),
            "--max-clients" => a.max_clients = num(value()?, 1.0, 255.0)? as usize,
            "--in-flight" => a.in_flight = num(value()?, 1.0, 4096.0)? as usize,
            "--share" => a.share = Some(num(value()?, 1.0, 100.0)? / 100.0),
            "--keep" => a.keep_s = num(value()?, 0.0, 1e6)?,
            "--forget-names" => a.forget_names_days = num(value()?, 0.0, 36_500.0)?,
            "--guard-ms" => a.guard_ms = num(value()?, 0.0, 10_000.0)? as i64,
            "--journal" => a.journal = Some(value()?.into()),
            "--runtime-dir" => a.runtime_dir = Some(value()?.into()),
            "--start-timeout" => a.start_timeout_s = num(value()?, 1.0, 3600.0)?,
            "--class-ceiling" => {
                a.class_ceiling = match value()?.as_str() {
                    "urgent" => None,
                    "normal" => Some(Class::Normal),
                    "bulk" => Some(Class::Bulk),
                    v => return Err(format!("--class-ceiling {v:?}: urgent, normal or bulk")),
                }
            }
            "--order-entry" => {
                a.order_entry_ws = match value()?.as_str() {
                    "ws" => Some(true),
                    "rest" => Some(false),
                    v => return Err(format!("--order-entry {v:?}: expected ws or rest")),
                }
            }
            "--ws-api" => a.ws_api = Some(value()?),
            "--private-ws" => a.private_ws = Some(value()?),
            "--no-stream" => a.stream = false,
            "--allow-uid" | "--allow-gid" => {
                let v = value()?;
                let mut ids = Vec::new();
                for id in v.split(',') {
                    ids.push(id.trim().parse::<u32>().map_err(|_| {
                        format!("{flag} {v:?}: expected numeric ids separated by commas")
                    })?);
                }
                match flag.as_str() {
                    "--allow-uid" => a.allow_uids.extend(ids),
                    _ => a.allow_gids.extend(ids),
                }
            }
            f if ergon_gatewayd::lease::LeaseFlags::takes(f) => a.lease.set(f, &value()?)?,
            "--protection" => {
                let v = value()?;
                a.protection = Mode::parse(&v)
                    .ok_or_else(|| format!("--protection {v:?}: auto, required or off"))?;
            }
            "--protection-timeout" => {
                a.protection_timeout_ms = Some((num(value()?, 1.0, 86_400.0)? * 1e3) as u32)
            }
            f if ergon_gatewayd::metrics::OpsFlags::takes(f) => a.ops.set(f, &value()?)?,
            "--busy" => a.busy = true,
            "--stats" => a.stats = true,
            "--once" => a.once = true,
            "--gateway-uid" => {
                a.gateway_uid = Some(
                    value()?
                        .parse()
                        .map_err(|_| "--gateway-uid: a numeric uid")?,
                )
            }
            "clear-halt" => a.clear_halt = Some(value()?),
            "release-host" => a.release_host = Some(value()?),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if a.release_host.is_some() {
        a.lease.release_target()?;
        return Ok(a);
    }
    let name = a.name.as_deref().ok_or("--name is required")?;
    if name.is_empty() || name.len() > 64 || !name.bytes().all(|c| c.is_ascii_graphic()) {
        return Err(format!("--name {name:?}: 1 to 64 visible characters"));
    }
    if a.stats || a.clear_halt.is_some() {
        return Ok(a);
    }
    let hl = a.venue.as_deref() == Some("hyperliquid");
    for (v, f) in [
        (&a.venue, "--venue"),
        (&a.base, "--base"),
        (&a.api_key, "--api-key"),
    ] {
        // Hyperliquid signs with a private key: no API key.
        if v.is_none() && !(hl && f == "--api-key") {
            return Err(format!("{f} is required"));
        }
    }
    match a.venue.as_deref() {
        Some("binance-spot" | "binance-futures" | "bybit" | "deribit" | "hyperliquid") => {}
        Some("okx") if a.passphrase.is_some() || std::env::var_os(PASSPHRASE_ENV).is_some() => {}
        Some("okx") => {
            return Err(format!(
                "--venue okx needs the API passphrase: --passphrase-file PATH or {PASSPHRASE_ENV}"
            ))
        }
        Some(v) => {
            return Err(format!(
                "--venue {v:?}: binance-spot, binance-futures, bybit, okx, deribit or hyperliquid"
            ))
        }
        None => {}
    }
    if a.ws_api.is_some() && a.order_entry_ws == Some(false) {
        return Err("--ws-api goes with --order-entry ws".into());
    }
    if a.ws()
        && !matches!(
            a.venue.as_deref(),
            Some("binance-spot" | "binance-futures" | "deribit")
        )
    {
        return Err(
            "--order-entry ws: only binance-spot, binance-futures and deribit have a WebSocket API here"
                .into(),
        );
    }
    if !hl
        && (a.hl_account.is_some()
            || a.hl_vault.is_some()
            || a.testnet
            || a.reserve_micro.is_some())
    {
        return Err(
            "--account-address, --vault-address, --testnet, --reserve-budget: hyperliquid only"
                .into(),
        );
    }
    if a.private_ws.is_some() && a.venue.as_deref() != Some("bybit") {
        return Err("--private-ws: only bybit's DCP uses a private stream".into());
    }
    a.lease.check()?;
    Ok(a)
}

fn serve<E: Account>(
    a: &Args,
    start: &Start,
    keys: &Keys<'_>,
    symbol: &str,
    halts: HaltLog,
    charges: Kept,
) -> Result<(), String> {
    let declare = |boot: &gateway::Boot, b: &mut _| E::declare(boot, b, keys, a.guard_ms * MS);
    serve_with(a, start, declare, symbol, halts, charges)
}

/// [`serve`] with the venue's endpoints declared by `declare` (Hyperliquid's
/// take more than [`Keys`]: the network, the account, the vault).
fn serve_with<E: Account>(
    a: &Args,
    start: &Start,
    declare: impl FnOnce(&gateway::Boot, &mut ergon_core::Builder) -> Result<E, gateway::DeclareError>,
    symbol: &str,
    mut halts: HaltLog,
    charges: Kept,
) -> Result<(), String> {
    let (mut lp, mut gw, pool) = match Gateway::start(start, symbol, declare) {
        Ok(started) => started,
        Err(e) => return Err(ban_at_start(a, &e, &mut halts)),
    };
    // Halted as the previous gateway left it, before anything is sent.
    let now = lp.now();
    halts.restore(lp.budget_mut(), now, wall::ms())?;
    keep_charges(&mut lp, &mut gw, charges)?;
    if start.ws_api.is_some() {
        // One warning line per fallback, before `ready`: orders over REST,
        // polling without a stream.
        let probe;
        (gw, probe) = gateway::open_ws_api(&mut lp, gw, pool, WS_OPEN_NS);
        let stream = a.stream && a.venue.as_deref() == Some("binance-spot");
        for w in probe.warnings(stream) {
            eprintln!("{w}");
        }
    }
    let name = a.name.clone().unwrap_or_default();
    // Kept until the loop returns: dropping it stops the lease thread; a clean
    // stop hands the reservations over.
    let (lease_thread, leases) = a
        .lease
        .start(
            lp.budget_mut(),
            gw.venue_mut(),
            &name,
            std::time::Duration::from_secs_f64(a.start_timeout_s),
        )?
        .unzip();
    let leases = leases.unwrap_or_default();
    let leased: Vec<_> = leases.iter().map(|(id, _)| *id).collect();
    // The dead man's switch: armed before the strategies can attach.
    let machine = Protection::for_gateway(a.protection, &gw, a.protection_timeout_ms, lp.now())
        .map_err(|e| e.to_string())?;
    // Held open and written relative to its descriptor (openat, O_NOFOLLOW):
    // a swapped directory or a planted symlink redirects nothing.
    let status = Arc::new(
        hub::PrivateDir::open(&runtime_dir(a.runtime_dir.as_deref(), &name)?)
            .map_err(|e| format!("runtime directory: {e}"))?,
    );
    let sym = gw.symbol().as_str().to_string();
    let symbol = ergon_venues::endpoint::Symbol::new(&sym).map_err(|e| format!("{e:?}"))?;
    // Bybit's DCP: armed by a private WebSocket of the gateway's own.
    let mut link = match machine.state() {
        State::Arming => gateway::dcp::DcpLink::for_account(
            gw.venue(),
            start,
            a.private_ws.as_deref(),
            lp.budget(),
            machine.timeout_ms(),
        )?,
        _ => None,
    };
    let machine = match machine.state() {
        State::Unavailable => {
            eprintln!(
                "ergon-gateway: warning: {}: {}: quotes stay on the book if this process dies",
                a.venue.as_deref().unwrap_or_default(),
                machine.not_armed()
            );
            machine
        }
        State::Arming => {
            let first = Protected::new(Startup::new(lp.now() + START_ARM_NS), machine, symbol)
                .with_link(link)
                .with_lane()
                .stop_when_answered();
            let d = gateway::run(&mut lp, gw, pool, first, Arc::new(Control::default()))
                .map_err(|e| e.to_string())?;
            gw = d.gateway;
            let why = d.strategy.not_armed();
            let m = d.strategy.machine;
            link = d.strategy.link;
            if m.state() != State::Armed {
                if a.protection == Mode::Required {
                    return Err(format!("--protection required: {why}"));
                }
                eprintln!(
                    "ergon-gateway: warning: {}: {why}; trading without it",
                    a.venue.as_deref().unwrap_or_default()
                );
            }
            m
        }
        _ => machine,
    };
    if let Err(e) = write_status(&status, &machine, lp.now()) {
        eprintln!("ergon-gateway: warning: protection file: {e}: --stats shows no protection line");
    }
    // Hyperliquid's openOrders weighs 20 of its 1200 a minute: every 5 s is a
    // fifth of the minute, every 500 ms would be twice all of it.
    let poll_every = match a.venue.as_deref() {
        Some("hyperliquid") => 5_000 * MS,
        _ => 500 * MS,
    };
    gw.poll_open_orders(poll_every);
    let cfg = HubConfig {
        name: name.clone(),
        // Its socket file there: no other uid can take it (the abstract name
        // anyone can).
        socket_dir: Some(runtime_dir(a.runtime_dir.as_deref(), &name)?),
        max_clients: a.max_clients,
        in_flight: a.in_flight,
        keep_ns: (a.keep_s * 1e9) as i64,
        forget_names_ms: (a.forget_names_days * 86_400_000.0) as i64,
        share: a.share,
        class_ceiling: a.class_ceiling,
        journal: Some(match &a.journal {
            Some(j) => j.clone(),
            None => runtime_dir(a.runtime_dir.as_deref(), &name)?.join("journal"),
        }),
        // The account the journal's orders are queried on: refused if it holds
        // live orders of another venue, base URL or API key.
        journal_owner: Some(journal_owner(a)),
        allow_uids: a.allow_uids.clone(),
        allow_gids: a.allow_gids.clone(),
        leases,
        halts: Some(halts),
        ..HubConfig::default()
    };
    let hub = Hub::bind(cfg, Some(&STOP)).map_err(|e| e.to_string())?;
    // The journal's epoch: above every earlier start's on this journal, on disk.
    if let Some(epoch) = hub.boot_epoch() {
        gw.set_boot_epoch(epoch)
            .map_err(|e| format!("boot epoch {epoch}: {e}"))?;
    }
    hub.attach(&mut lp).map_err(|e| e.to_string())?;
    let (hub, metrics) = observed(a, &name, &mut lp, &mut gw, hub)?;
    install_sigterm();
    let mut out = std::io::stdout();
    let _ = writeln!(out, "ready {name}");
    let _ = out.flush();
    let st = status.clone();
    let published = hub.protection_cell();
    published.set(machine.published());
    let served = Protected::new(hub, machine, symbol)
        .with_link(link)
        .with_lane()
        .on_change(move |m, now| {
            let _ = write_status(&st, m, now);
            published.set(m.published());
        });
    let d = gateway::run(&mut lp, gw, pool, served, Arc::new(Control::default()))
        .map_err(|e| e.to_string())?;
    // A clean stop (SIGTERM): cancel every open order, then disarm the switch.
    let (gw, machine, link) = (d.gateway, d.strategy.machine, d.strategy.link);
    if matches!(machine.state(), State::Armed | State::AtRisk | State::Fired) {
        let st = status.clone();
        let last = Protected::new(Shutdown::new(lp.now() + STOP_NS), machine, symbol)
            .with_link(link)
            .with_lane()
            .disarm_when(Shutdown::ready_to_disarm)
            .on_change(move |m, now| drop(write_status(&st, m, now)));
        let d = gateway::run(&mut lp, gw, pool, last, Arc::new(Control::default()))
            .map_err(|e| e.to_string())?;
        let m = &d.strategy.machine;
        if m.state() != State::Disarmed {
            eprintln!(
                "ergon-gateway: warning: stopped with the switch still {} ({} cancelled, {} failed)",
                m.state().as_str(),
                d.strategy.inner.cancelled,
                d.strategy.inner.failed
            );
        }
    }
    let _ = status.remove("protection");
    metrics.stop();
    // Nothing more is sent: the next process of this --host need not wait the hold.
    if let Some(t) = lease_thread {
        let now = lp.now();
        eprintln!(
            "ergon-gateway: {}",
            ergon_gatewayd::lease::hand_over(t, lp.budget_mut(), &leased, now)
        );
    }
    // A clean stop settled everything in flight: the journal holds nothing for a
    // successor to query, and it stays for its boot epoch (a successor's ids start
    // above it even if the clock stepped back).
    Ok(())
}

/// The hub wrapped to publish its state, and the metrics and health thread that
/// reads it (`--metrics`; the health lines of `--stats` in any case).
fn observed<E: Account>(
    a: &Args,
    name: &str,
    lp: &mut ergon_io::event_loop::EventLoop,
    gw: &mut Gateway<E>,
    hub: Hub,
) -> Result<(Observed<Hub>, MetricsThread), String> {
    let budget = lp.budget();
    let names = budget
        .ids()
        .map(|id| budget.name(id).unwrap_or("?").to_string())
        .collect();
    let (hub, reader) = observe::observe(hub);
    let src = metrics::Source {
        observed: reader,
        labels: Some(gw.label_reader()),
        names,
        health: a.ops.health,
        share: a.share,
        runtime_dir: Some(runtime_dir(a.runtime_dir.as_deref(), name)?),
    };
    let t = metrics::spawn(name, a.ops.metrics, src).map_err(|e| format!("--metrics: {e}"))?;
    if let Some(addr) = t.addr {
        eprintln!("metrics http://{addr}/metrics");
    }
    Ok((hub, t))
}

/// Why start-up failed, in words; a ban of the IP is recorded in the halts file
/// first, so the next start comes up with the IP halted until `clear-halt`.
fn ban_at_start(a: &Args, e: &gateway::StartError, halts: &mut HaltLog) -> String {
    let Some(until_ns) = e.ban_until_ns() else {
        return e.to_string();
    };
    let now = ergon_io::clock::now_ns();
    let until_ms = wall::ms().saturating_add(until_ns.saturating_sub(now) / MS);
    let name = a.name.as_deref().unwrap_or_default();
    let ip = gateway::IP_GATE;
    match halts.record(Halt::new(ip, until_ms, &e.to_string())) {
        Ok(()) => format!(
            "{e}; recorded in {}: the next start comes up with {ip} halted until `ergon-gateway clear-halt {ip} --name {name}`",
            halts.path().display()
        ),
        Err(w) => format!(
            "{e}; the halt could not be recorded in {}: {w}",
            halts.path().display()
        ),
    }
}

/// How long the first arm may take before start-up gives up on it.
const START_ARM_NS: i64 = 5_000 * MS;

/// How long the clean stop may take to cancel and disarm.
const STOP_NS: i64 = 5_000 * MS;

/// Where the switch's state is written for `--stats`: the gateway's private
/// runtime directory, beside the journal.
fn protection_path(
    dir: Option<&std::path::Path>,
    name: &str,
) -> Result<std::path::PathBuf, String> {
    Ok(runtime_dir(dir, name)?.join("protection"))
}

/// Writes the switch's state line into `dir`'s `protection` file, its deadline
/// as UTC ms (the loop's `now` taken as the wall clock's now).
fn write_status(dir: &hub::PrivateDir, m: &Protection, now: i64) -> std::io::Result<()> {
    let wall_ms = wall::ms();
    let mut line = format!(
        "protection {} timeout_ms={} lapses={}",
        m.state().as_str(),
        m.timeout_ms(),
        m.stats().lapses
    );
    if let Some(u) = m.armed_until_ns() {
        line.push_str(&format!(" armed_until_ms={}", wall_ms + (u - now) / MS));
    }
    if let Some(why) = m.why() {
        line.push_str(&format!(" why={}", why.as_str()));
    }
    if let Some(left) = m.fires_left() {
        line.push_str(&format!(" fires_left={left}"));
    }
    dir.write("protection", &(line + "\n"))
}

/// The charges file beside the journal and what a previous gateway left in it.
struct Kept {
    path: std::path::PathBuf,
    recent: Recent,
    /// No charges file, but a journal: a gateway ran here without keeping its
    /// charges (it may have used up the account's windows).
    unrecorded: bool,
}

/// The account this start queries the journal's orders on.
fn journal_owner(a: &Args) -> hub::JournalOwner {
    hub::JournalOwner::new(
        a.venue.as_deref().unwrap_or_default(),
        a.base.as_deref().unwrap_or_default(),
        a.api_key.as_deref().unwrap_or_default(),
    )
}

/// Refuses, before anything is sent, a journal with live orders of another
/// account; then reads the charges a previous gateway left beside it
/// (`JOURNAL.charges`: they go where the journal goes).
fn read_charges(a: &Args, name: &str) -> Result<Kept, String> {
    let journal = match &a.journal {
        Some(j) => j.clone(),
        None => runtime_dir(a.runtime_dir.as_deref(), name)?.join("journal"),
    };
    hub::check_journal(&journal, &journal_owner(a))
        .map_err(|e| format!("journal {}: {e}", journal.display()))?;
    let mut path = journal.clone().into_os_string();
    path.push(".charges");
    let path = std::path::PathBuf::from(path);
    let (now, wall_ns) = (ergon_io::clock::now_ns(), wall::ms().saturating_mul(MS));
    let recent = ChargeLog::read(&path, now, wall_ns).map_err(|e| format!("charges file {e}"))?;
    let unrecorded = !recent.found() && journal.exists();
    Ok(Kept {
        path,
        recent,
        unrecorded,
    })
}

/// Account-wide order limits with a window up to this long are taken as full
/// for one window when a gateway ran here without keeping its charges.
const UNRECORDED_FULL_MAX_NS: i64 = 60_000 * MS;

/// From here every charge is kept in the charges file. With no record of a
/// gateway that ran here, the account's order limits of short windows
/// (`ORDERS_*`) are held full for one window: it may have spent them.
fn keep_charges<E: Account>(
    lp: &mut ergon_io::event_loop::EventLoop,
    gw: &mut Gateway<E>,
    kept: Kept,
) -> Result<(), String> {
    let (now, wall_ns) = (lp.now(), wall::ms().saturating_mul(MS));
    if kept.unrecorded {
        let b = lp.budget_mut();
        for id in b.ids().collect::<Vec<_>>() {
            let short = b.spec(id).ok().and_then(|s| match s.kind() {
                ergon_io::core::Kind::Fixed { window_ns, .. }
                | ergon_io::core::Kind::Sliding { window_ns, .. } => {
                    Some(window_ns <= UNRECORDED_FULL_MAX_NS)
                }
                _ => None,
            });
            if short == Some(true) && b.name(id).is_ok_and(|n| n.starts_with("ORDERS_")) {
                let _ = b.throttled(id, None, now);
            }
        }
        eprintln!(
            "ergon-gateway: warning: no charges file at {} beside a journal: the account's order limits are held full for one window",
            kept.path.display()
        );
    }
    let log = ChargeLog::create(&kept.path, lp.budget(), &kept.recent, now, wall_ns)
        .map_err(|e| format!("charges file {}: {e}", kept.path.display()))?;
    gw.keep_charges(log, now);
    Ok(())
}

#[allow(unsafe_code)]
fn install_sigterm() {
    let h: extern "C" fn(libc::c_int) = on_term;
    // SAFETY: the handler only stores to a static atomic (async-signal-safe).
    unsafe { libc::signal(libc::SIGTERM, h as libc::sighandler_t) };
}

fn run(a: &Args) -> Result<(), String> {
    if let Some(host) = &a.release_host {
        for (bucket, units) in ergon_gatewayd::lease::release_host(&a.lease, host)? {
            println!("released {host} {bucket} {units}");
        }
        return Ok(());
    }
    let name = a.name.as_deref().unwrap_or_default();
    let gateway_uid = a.gateway_uid.unwrap_or_else(shm::own_uid);
    if let Some(bucket) = &a.clear_halt {
        let answer = shm::clear_halt_in(a.runtime_dir.as_deref(), name, gateway_uid, bucket)
            .map_err(|e| e.to_string())?;
        println!("{answer}");
        return if answer.starts_with("ok") {
            Ok(())
        } else {
            Err(answer)
        };
    }
    if a.stats {
        loop {
            let text = shm::read_stats_in(a.runtime_dir.as_deref(), name, gateway_uid)
                .map_err(|e| e.to_string())?;
            print!("{text}");
            // The dead man's switch, as the serving gateway last wrote it.
            if let Some(p) = protection_path(a.runtime_dir.as_deref(), name)
                .ok()
                .and_then(|p| std::fs::read_to_string(p).ok())
            {
                print!("{p}");
            }
            let dir = a.runtime_dir.as_deref();
            if let Some(health) = metrics::read_health_in(dir, name, gateway_uid) {
                print!("{health}");
            }
            if a.once {
                return Ok(());
            }
            println!();
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    }
    let mut start =
        Start::from_base(a.base.as_deref().unwrap_or_default()).map_err(|e| e.to_string())?;
    start.timeout_ns = (a.start_timeout_s * 1e9) as i64;
    let halts = runtime_dir(a.runtime_dir.as_deref(), name)?.join("halts");
    let halts = HaltLog::open(&halts).map_err(|e| format!("halts file {e}"))?;
    let charges = read_charges(a, name)?;
    start.recent = charges.recent.charged().to_vec();
    start.kept_limits = charges.recent.limits().to_vec();
    // A ban of the IP still running: nothing is sent before its end.
    let now = ergon_io::clock::now_ns();
    start.ban_until_ns = halts
        .halts()
        .iter()
        .filter(|h| h.bucket == gateway::IP_GATE)
        .map(|h| now.saturating_add(h.until_ms.saturating_sub(wall::ms()).saturating_mul(MS)))
        .max();
    start.loop_cfg.cpu = a.cpu;
    start.loop_cfg.busy_poll = a.busy;
    let venue = a.venue.as_deref().unwrap_or_default();
    if a.ws() {
        // Deribit's JSON-RPC over WebSocket has no order stream here, and USD-M's
        // user data stream is not on its WebSocket API's connection.
        let ws = match venue {
            "deribit" => WsApiStart::of_path(&start, a.ws_api.as_deref(), "/ws/api/v2", false),
            "binance-futures" => {
                let path = ergon_venues::binance_futures_ws::PATH;
                WsApiStart::of_path(&start, a.ws_api.as_deref(), path, false)
            }
            _ => WsApiStart::of(&start, a.ws_api.as_deref(), a.stream),
        };
        start.ws_api = Some(ws.map_err(|e| e.to_string())?);
    }
    let symbol = a.symbol.clone().unwrap_or_else(|| {
        match venue {
            "okx" => "BTC-USDT-SWAP",
            "deribit" => "BTC-PERPETUAL",
            "hyperliquid" => "BTC",
            _ => "BTCUSDT",
        }
        .to_string()
    });
    let key = a.api_key.clone().unwrap_or_default();
    let secret = load_secret(a.api_secret.as_ref())?;
    check_key_type(a.key_type, venue, &secret)?;
    let passphrase = load_passphrase(a.passphrase.as_ref())?;
    let passphrase = match &passphrase {
        Some(p) => Some(
            std::str::from_utf8(&p.0).map_err(|_| "the API passphrase is not UTF-8".to_string())?,
        ),
        None => None,
    };
    let keys = Keys {
        api_key: &key,
        secret: &secret.0,
        passphrase,
    };
    match venue {
        "hyperliquid" => {
            let hl = ergon_gateway::hyperliquid::HlKeys {
                key: &secret.0,
                network: if a.testnet {
                    ergon_venues::hyperliquid::sign::Network::Testnet
                } else {
                    ergon_venues::hyperliquid::sign::Network::Mainnet
                },
                account: a.hl_account.as_deref(),
                vault: a.hl_vault.as_deref(),
            };
            let reserve = match a.reserve_micro {
                Some(cap) => {
                    let name = a.name.as_deref().unwrap_or_default();
                    let dir = runtime_dir(a.runtime_dir.as_deref(), name)?;
                    Some(reserve::policy(&dir, cap)?)
                }
                None => None,
            };
            let declare = |boot: &gateway::Boot, b: &mut _| {
                let mut e = ergon_gateway::hyperliquid::declare(boot, b, &hl)?;
                if let Some(r) = reserve {
                    e.venue.reserve = r;
                }
                Ok(e)
            };
            serve_with(a, &start, declare, &symbol, halts, charges)
        }
        "bybit" => serve::<Bybit>(a, &start, &keys, &symbol, halts, charges),
        "deribit" => serve::<Deribit>(a, &start, &keys, &symbol, halts, charges),
        "okx" => serve::<Okx>(a, &start, &keys, &symbol, halts, charges),
        "binance-futures" => serve::<BinanceFutures>(a, &start, &keys, &symbol, halts, charges),
        _ => serve::<BinanceSpot>(a, &start, &keys, &symbol, halts, charges),
    }
}

/// No core dump, no ptrace by other processes of this uid: the memory holds the
/// account's secret.
#[allow(unsafe_code)]
fn not_dumpable() {
    // SAFETY: plain prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
}

/// Raises the soft limit of open descriptors to the hard one: every client holds
/// a connection and a region, and the venue's sockets need theirs.
#[allow(unsafe_code)]
fn raise_nofile() {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

/// Checks one setting of a config file with the command line's own parser.
fn check_setting(args: &[String]) -> Result<(), String> {
    let probe = ["--stats", "--name", "config-check"].map(String::from);
    parse(args.iter().cloned().chain(probe)).map(drop)
}

fn main() -> ExitCode {
    not_dumpable();
    raise_nofile();
    let args = ergon_gatewayd::config::expand(std::env::args().skip(1).collect(), check_setting);
    let a = match args.and_then(|args| parse(args.into_iter())) {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("ergon-gateway: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ergon-gateway: {e}");
            ExitCode::from(1)
        }
    }
}
