//! `ergon-gateway`: one process owns the venue connections and the budget of an
//! IP and an account; strategy processes attach by name and share it over shared
//! memory (`ergon_gateway::shm`). The command line is [`USAGE`].

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ergon_gateway::metrics::{self, MetricsThread};
use ergon_gateway::observe::{self, Observed};
use ergon_gateway::shm::{self, Hub, HubConfig};
use ergon_gateway::{self as gateway, Account, Control, Gateway, Keys, Start, WsApiStart};
use ergon_io::core::Class;
use ergon_venues::binance_spot::BinanceSpot;
use ergon_venues::bybit::Bybit;
use ergon_venues::okx::Okx;

const USAGE: &str = "usage:
  ergon-gateway --venue binance-spot|bybit|okx --base URL --api-key K --api-secret S --name NAME
                [--cpu N] [--max-clients N] [--passphrase P] [--symbol S] [--in-flight N]
                [--share PCT] [--keep SECS] [--busy] [--guard-ms MS] [--journal PATH]
                [--class-ceiling urgent|normal|bulk] [--order-entry ws|rest] [--ws-api URL]
                [--no-stream] [--metrics ADDR:PORT] [--degraded-pct P] [--degraded-secs S]
                [--unreachable-secs S]
  ergon-gateway --config gateway.toml [flags]   (every flag as a key; flags override the file)
  ergon-gateway --stats --name NAME [--once]
  ergon-gateway clear-halt BUCKET --name NAME";

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
    api_secret: Option<String>,
    passphrase: Option<String>,
    name: Option<String>,
    symbol: Option<String>,
    cpu: Option<usize>,
    max_clients: usize,
    in_flight: usize,
    share: Option<f64>,
    keep_s: f64,
    busy: bool,
    guard_ms: i64,
    stats: bool,
    once: bool,
    clear_halt: Option<String>,
    journal: Option<std::path::PathBuf>,
    class_ceiling: Option<Class>,
    /// `--order-entry`: Some(true) ws, Some(false) rest, None rest unless
    /// `--ws-api` is given.
    order_entry_ws: Option<bool>,
    ws_api: Option<String>,
    /// The user data stream over the WebSocket API (false: `--no-stream`).
    stream: bool,
    /// `--metrics` and the health thresholds.
    ops: gateway::metrics::OpsFlags,
}

impl Args {
    /// Whether orders go over the WebSocket API (with its order stream).
    fn ws(&self) -> bool {
        self.order_entry_ws.unwrap_or(self.ws_api.is_some())
    }
}

fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args {
        max_clients: 16,
        in_flight: 64,
        keep_s: 300.0,
        guard_ms: 30,
        stream: true,
        ..Args::default()
    };
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let num = |v: String, lo: f64, hi: f64| {
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= lo && *x <= hi)
                .ok_or_else(|| format!("{flag} {v:?}: expected a number in {lo}..={hi}"))
        };
        match flag.as_str() {
            "--venue" => a.venue = Some(value()?),
            "--base" => a.base = Some(value()?),
            "--api-key" => a.api_key = Some(value()?),
            "--api-secret" => a.api_secret = Some(value()?),
            "--passphrase" => a.passphrase = Some(value()?),
            "--name" => a.name = Some(value()?),
            "--symbol" => a.symbol = Some(value()?),
            "--cpu" => a.cpu = Some(num(value()?, 0.0, 4095.0)? as usize),
            "--max-clients" => a.max_clients = num(value()?, 1.0, 255.0)? as usize,
            "--in-flight" => a.in_flight = num(value()?, 1.0, 4096.0)? as usize,
            "--share" => a.share = Some(num(value()?, 1.0, 100.0)? / 100.0),
            "--keep" => a.keep_s = num(value()?, 0.0, 1e6)?,
            "--guard-ms" => a.guard_ms = num(value()?, 0.0, 10_000.0)? as i64,
            "--journal" => a.journal = Some(value()?.into()),
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
            "--no-stream" => a.stream = false,
            f if gateway::metrics::OpsFlags::takes(f) => a.ops.set(f, &value()?)?,
            "--busy" => a.busy = true,
            "--stats" => a.stats = true,
            "--once" => a.once = true,
            "clear-halt" => a.clear_halt = Some(value()?),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let name = a.name.as_deref().ok_or("--name is required")?;
    if name.is_empty() || name.len() > 64 || !name.bytes().all(|c| c.is_ascii_graphic()) {
        return Err(format!("--name {name:?}: 1 to 64 visible characters"));
    }
    if a.stats || a.clear_halt.is_some() {
        return Ok(a);
    }
    for (v, f) in [
        (&a.venue, "--venue"),
        (&a.base, "--base"),
        (&a.api_key, "--api-key"),
        (&a.api_secret, "--api-secret"),
    ] {
        if v.is_none() {
            return Err(format!("{f} is required"));
        }
    }
    match a.venue.as_deref() {
        Some("binance-spot" | "bybit") => {}
        Some("okx") if a.passphrase.is_some() => {}
        Some("okx") => return Err("--venue okx needs --passphrase".into()),
        Some(v) => return Err(format!("--venue {v:?}: binance-spot, bybit or okx")),
        None => {}
    }
    if a.ws_api.is_some() && a.order_entry_ws == Some(false) {
        return Err("--ws-api goes with --order-entry ws".into());
    }
    if a.ws() && a.venue.as_deref() != Some("binance-spot") {
        return Err("--order-entry ws: only binance-spot has a WebSocket API here".into());
    }
    Ok(a)
}

fn serve<E: Account>(a: &Args, start: &Start, keys: &Keys<'_>, symbol: &str) -> Result<(), String> {
    let declare = |boot: &gateway::Boot, b: &mut _| E::declare(boot, b, keys, a.guard_ms * MS);
    let (mut lp, mut gw, pool) =
        Gateway::start(start, symbol, declare).map_err(|e| e.to_string())?;
    if start.ws_api.is_some() {
        // One warning line per fallback, before `ready`: orders over REST,
        // polling without a stream.
        let probe;
        (gw, probe) = gateway::open_ws_api(&mut lp, gw, pool, WS_OPEN_NS);
        for w in probe.warnings(a.stream) {
            eprintln!("{w}");
        }
    }
    gw.poll_open_orders(500 * MS);
    let name = a.name.clone().unwrap_or_default();
    let cfg = HubConfig {
        name: name.clone(),
        max_clients: a.max_clients,
        in_flight: a.in_flight,
        keep_ns: (a.keep_s * 1e9) as i64,
        share: a.share,
        class_ceiling: a.class_ceiling,
        journal: Some(a.journal.clone().unwrap_or_else(|| journal_path(&name))),
        ..HubConfig::default()
    };
    let journal = cfg.journal.clone();
    let hub = Hub::bind(cfg, Some(&STOP)).map_err(|e| e.to_string())?;
    hub.attach(&mut lp).map_err(|e| e.to_string())?;
    let (hub, metrics) = observed(a, &name, &mut lp, &mut gw, hub)?;
    install_sigterm();
    let mut out = std::io::stdout();
    let _ = writeln!(out, "ready {name}");
    let _ = out.flush();
    gateway::run(&mut lp, gw, pool, hub, Arc::new(Control::default()))
        .map_err(|e| e.to_string())?;
    metrics.stop();
    // A clean stop settled everything in flight: nothing for a successor to query.
    if let Some(j) = journal {
        let _ = std::fs::remove_file(j);
    }
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
    };
    let t = metrics::spawn(name, a.ops.metrics, src).map_err(|e| format!("--metrics: {e}"))?;
    if let Some(addr) = t.addr {
        eprintln!("metrics http://{addr}/metrics");
    }
    Ok((hub, t))
}

/// The journal's default place: /dev/shm (survives the process, not the host),
/// else the temporary directory.
fn journal_path(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new("/dev/shm");
    let dir = if dir.is_dir() {
        dir.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    dir.join(format!("ergon-gateway-{name}.journal"))
}

#[allow(unsafe_code)]
fn install_sigterm() {
    let h: extern "C" fn(libc::c_int) = on_term;
    // SAFETY: the handler only stores to a static atomic (async-signal-safe).
    unsafe { libc::signal(libc::SIGTERM, h as libc::sighandler_t) };
}

fn run(a: &Args) -> Result<(), String> {
    let name = a.name.as_deref().unwrap_or_default();
    if let Some(bucket) = &a.clear_halt {
        let answer = shm::clear_halt(name, bucket).map_err(|e| e.to_string())?;
        println!("{answer}");
        return if answer.starts_with("ok") {
            Ok(())
        } else {
            Err(answer)
        };
    }
    if a.stats {
        loop {
            let text = shm::read_stats(name).map_err(|e| e.to_string())?;
            print!("{text}");
            if let Some(health) = metrics::read_health(name) {
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
    start.loop_cfg.cpu = a.cpu;
    start.loop_cfg.busy_poll = a.busy;
    if a.ws() {
        let ws = WsApiStart::of(&start, a.ws_api.as_deref(), a.stream);
        start.ws_api = Some(ws.map_err(|e| e.to_string())?);
    }
    let venue = a.venue.as_deref().unwrap_or_default();
    let symbol = a.symbol.clone().unwrap_or_else(|| {
        match venue {
            "okx" => "BTC-USDT-SWAP",
            _ => "BTCUSDT",
        }
        .to_string()
    });
    let (key, secret) = (
        a.api_key.clone().unwrap_or_default(),
        a.api_secret.clone().unwrap_or_default(),
    );
    let keys = Keys {
        api_key: &key,
        secret: secret.as_bytes(),
        passphrase: a.passphrase.as_deref(),
    };
    match venue {
        "bybit" => serve::<Bybit>(a, &start, &keys, &symbol),
        "okx" => serve::<Okx>(a, &start, &keys, &symbol),
        _ => serve::<BinanceSpot>(a, &start, &keys, &symbol),
    }
}

/// Checks one setting of a config file with the command line's own parser.
fn check_setting(args: &[String]) -> Result<(), String> {
    let probe = ["--stats", "--name", "config-check"].map(String::from);
    parse(args.iter().cloned().chain(probe)).map(drop)
}

fn main() -> ExitCode {
    let args = gateway::config::expand(std::env::args().skip(1).collect(), check_setting);
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
