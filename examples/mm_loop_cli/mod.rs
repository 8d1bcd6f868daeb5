//! mm_loop's command line and what it prints: [`USAGE`], [`Options`] and
//! [`parse_args`], the table and the `--json` object (a contract: scripts read them).

use super::Summary;

/// The usage line `--help` and a bad argument print.
pub const USAGE: &str = "usage: mm_loop [--venue binance-spot|bybit|okx|hyperliquid] [--base URL] \
[--duration SECS] [--demand X] [--cpu N] [--api-key K (--api-secret S | --api-secret-file PATH) \
[--key-type hmac|ed25519]] [--json] [--no-stream] [--record FILE] \
[--order-entry ws|rest] [--ws-api URL] [--labels SECS] [--gateway NAME [--gateway-uid UID]] \
[--protection auto|required|off] [--protection-timeout SECS] \
[--etcd URL[,URL...] --account NAME --safe-share PCT [--host NAME] [--lease-ttl SECS] \
[--etcd-ca PEM --etcd-cert PEM --etcd-key PEM] [--etcd-user NAME --etcd-password-file FILE]]";

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// The venue profile.
    pub venue: String,
    /// `http://host:port` of the venue; None starts the emulator.
    pub base: Option<String>,
    /// How long to offer load, in seconds.
    pub duration_s: f64,
    /// Offered load as a multiple of what the binding limit admits.
    pub demand: f64,
    /// Pin the loop thread here.
    pub cpu: Option<usize>,
    /// API key (needed with `--base`).
    pub api_key: Option<String>,
    /// HMAC secret (needed with `--base`, or `--api-secret-file`).
    pub api_secret: Option<String>,
    /// `--api-secret-file`: the secret (an HMAC secret, or a Binance Ed25519
    /// key's PKCS#8 PEM), read by `ergon-gateway`'s rules (0600, ours, no
    /// symlink, zeroized).
    pub api_secret_file: Option<std::path::PathBuf>,
    /// `--key-type`: the kind the secret must be (None: detected, a PEM private
    /// key being Ed25519).
    pub key_type: Option<ergon_gatewayd::secret::KeyType>,
    /// One JSON object instead of the table; progress to stderr.
    pub json: bool,
    /// Print no progress and no table (tests).
    pub quiet: bool,
    /// The fixed-window guard around boundaries (clock error plus one-way latency).
    pub guard_ms: i64,
    /// The emulator to start when `base` is None.
    pub sim: ergon_venue_sim::Config,
    /// Asked for the user data stream (false: `--no-stream`).
    pub stream: bool,
    /// Record the budget's calls here as an `ergon-replay` trace (`--record FILE`).
    pub record: Option<std::path::PathBuf>,
    /// `--order-entry`: Some(true) ws, Some(false) rest, None ws if the venue answers.
    pub ws: Option<bool>,
    /// `--ws-api URL` (default: `ws://HOST:PORT/ws-api/v3` of `--base` or the emulator).
    pub ws_api: Option<String>,
    /// Print the counters by label every this many seconds (`--labels SECS`).
    pub labels: Option<f64>,
    /// Run through this running `ergon-gateway` instead of own connections.
    pub gateway: Option<String>,
    /// `--gateway-uid`: the uid that gateway must run as (None: this process's
    /// own); a process of any other uid under its name is refused.
    pub gateway_uid: Option<u32>,
    /// `--protection`: the venue's dead man's switch (default auto).
    pub protection: ergon_gateway::protection::Mode,
    /// `--protection-timeout`, ms (None: the venue's recommended timeout).
    pub protection_timeout_ms: Option<u32>,
    /// `--etcd` and the flags that go with it, as `ergon-gateway` takes them: the
    /// account's limits leased (default host name: `mm_loop-PID`).
    pub lease: ergon_gatewayd::lease::LeaseFlags,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            venue: "binance-spot".into(),
            base: None,
            duration_s: 10.0,
            demand: 3.0,
            cpu: None,
            api_key: None,
            api_secret: None,
            api_secret_file: None,
            key_type: None,
            json: false,
            quiet: false,
            guard_ms: 30,
            sim: ergon_venue_sim::Config::binance_spot(),
            stream: true,
            record: None,
            ws: None,
            ws_api: None,
            labels: None,
            gateway: None,
            gateway_uid: None,
            protection: ergon_gateway::protection::Mode::Auto,
            protection_timeout_ms: None,
            lease: Default::default(),
        }
    }
}

/// The table: one row per number of the JSON summary, the venue's own last.
pub fn table(s: &Summary) -> String {
    let u = s.utilization * 100.0;
    let mut out = format!("utilization{u:>17.1}% of {}\n", s.binding);
    let mut rows = |prefix: &str, v: &serde_json::Value| {
        for (k, v) in v.as_object().into_iter().flatten().filter(|e| e.1.is_u64()) {
            out += &format!("{:<28}{v}\n", format!("{prefix}{k}"));
        }
    };
    let j = to_json(s);
    rows("", &j);
    rows("refused locally: ", &j["refused"]);
    rows("venue: ", &j["venue"]);
    out
}

/// The summary as the one JSON object `--json` prints.
pub fn to_json(s: &Summary) -> serde_json::Value {
    let g = &s.gw;
    serde_json::json!({
        "sent": g.sent, "applied": g.applied,
        "refused": { "full": g.limited_full, "held": g.limited_held, "halted": g.limited_halted,
                     "tooBig": g.limited_too_big, "busy": g.busy, "ledgerFull": g.ledger_full },
        "throttled": g.throttled, "banned": g.banned, "rejected": g.rejected, "expired": g.expired,
        "clockSkew": g.clock_skew, "reanchors": g.reanchors, "unknown": g.unknown,
        "reconciled": g.reconciled, "reconciledFound": g.reconciled_found, "resent": g.resent,
        "polls": s.gw.polls, "quotesEnded": s.quotes_ended, "alerts": s.alerts,
        "utilization": s.utilization, "binding": s.binding,
        "venue": s.venue.as_ref().map(|v| v.to_json()),
    })
}

/// The command line, as the usage line says.
pub fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut o = Options::default();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        let positive = |v: String, what: &str| {
            v.parse::<f64>()
                .ok()
                .filter(|d| d.is_finite() && *d > 0.0)
                .ok_or_else(|| format!("{a} {v:?}: expected {what}"))
        };
        match a.as_str() {
            "--venue" => {
                o.venue = value()?;
                o.sim = match o.venue.as_str() {
                    "bybit" => ergon_venue_sim::Config::bybit(),
                    "okx" => ergon_venue_sim::Config::okx(),
                    "hyperliquid" => ergon_venue_sim::Config::hyperliquid(),
                    _ => ergon_venue_sim::Config::binance_spot(),
                };
            }
            "--base" => o.base = Some(value()?),
            "--duration" => o.duration_s = positive(value()?, "positive seconds")?,
            "--demand" => o.demand = positive(value()?, "a positive number")?,
            "--cpu" => {
                let v = value()?;
                o.cpu = Some(
                    v.parse()
                        .map_err(|_| format!("--cpu {v:?}: expected a CPU number"))?,
                );
            }
            "--api-key" => o.api_key = Some(value()?),
            "--api-secret" => o.api_secret = Some(value()?),
            "--api-secret-file" => o.api_secret_file = Some(value()?.into()),
            "--key-type" => o.key_type = Some(value()?.parse()?),
            "--json" => o.json = true,
            "--no-stream" => o.stream = false,
            "--record" => o.record = Some(value()?.into()),
            "--order-entry" => match value()?.as_str() {
                "ws" => o.ws = Some(true),
                "rest" => o.ws = Some(false),
                v => return Err(format!("--order-entry {v:?}: expected ws or rest")),
            },
            "--ws-api" => o.ws_api = Some(value()?),
            "--labels" => o.labels = Some(positive(value()?, "positive seconds")?),
            "--gateway" => o.gateway = Some(value()?),
            "--gateway-uid" => {
                let v = value()?;
                o.gateway_uid = Some(
                    v.parse::<u32>()
                        .map_err(|_| format!("--gateway-uid {v:?}: expected a numeric uid"))?,
                );
            }
            "--protection" => {
                let v = value()?;
                o.protection = ergon_gateway::protection::Mode::parse(&v)
                    .ok_or_else(|| format!("--protection {v:?}: auto, required or off"))?;
            }
            "--protection-timeout" => {
                let s = positive(value()?, "positive seconds")?;
                o.protection_timeout_ms = Some((s * 1e3).min(86_400_000.0) as u32);
            }
            f if ergon_gatewayd::lease::LeaseFlags::takes(f) => o.lease.set(f, &value()?)?,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    o.lease.check()?;
    if o.lease.etcd.is_some() && o.gateway.is_some() {
        return Err(
            "--etcd leases the in-process gateway's limits: with --gateway, \
                    give it to ergon-gateway"
                .into(),
        );
    }
    Ok(o)
}
