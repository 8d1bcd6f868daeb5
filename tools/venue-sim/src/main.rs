//! `ergon-venue-sim`: runs the venue emulator standalone on loopback.
//!
//! Prints `listening on http://ADDR` on the first line of stdout, serves until
//! `--duration` has passed (or, without it, until stdin closes), then prints the
//! final report as one JSON object (to stdout, or to `--report FILE`).

use std::io::Read;
use std::process::ExitCode;
use std::time::Duration;

use ergon_venue_sim::{Account, Config, Fault, FaultScope, Profile, RateLimit, Server};

const USAGE: &str = "usage: ergon-venue-sim [--profile binance-spot|binance-futures|bybit|okx|deribit|hyperliquid] [--listen 127.0.0.1:PORT]
  [--clock-offset-ms MS] [--limit TYPE:INTERVAL:NUM:LIMIT]... [--api-key K --api-secret S | --api-key K --api-ed25519-public-key FILE]
  [--ban-after N] [--ban-first-ms MS] [--ban-max-ms MS]
  [--fault KIND:PROBABILITY]... [--fault-at N:KIND]... [--fault-delay-ms MS]
  [--fault-scope orders|all] [--seed N] [--other-sender-weight PER_SECOND]
  [--symbol SYMBOL] [--duration SECS] [--report FILE]
  [--ws-connects N] [--ws-connect-window-ms MS] [--ws-ban-after N]
  [--ws-api-ping-ms MS] [--ws-api-pong-timeout-ms MS] [--credits MAX:REFILL_PER_S:COST] [--matching-credits MAX:REFILL_PER_S:COST]
  [--connections-per-ip N] [--bybit-dcp] [--no-bybit-private-ws]
fault kinds: close-before-execute, execute-then-close, delay, 5xx-after-execute, 5xx-not-executed
limits (default: the profile's published ones): e.g. --limit REQUEST_WEIGHT:MINUTE:1:6000 --limit ORDERS:SECOND:10:100
bybit: --bybit-dcp enables DCP (disconnected-cancel-all) for the accounts; --no-bybit-private-ws answers
  the private WebSocket (/v5/private) upgrade 404
defaults: --profile binance-spot on 127.0.0.1:0 (a free port: the first line of stdout names it),
  the profile's published limits, one account with --api-key ergon-sim-key --api-secret ergon-sim-secret
  (OKX's passphrase: ergon-sim-passphrase), no faults
keys: --api-secret S makes the key an HMAC-SHA256 key; --api-ed25519-public-key FILE (the PEM
  `openssl pkey -pubout` writes) makes it an Ed25519 key (Binance): its REST and WebSocket API
  signatures are verified with that public key, and it is the only kind session.logon takes
ends: after --duration SECS, or without it when stdin closes (Ctrl-D); then prints its report, one
  JSON line, to stdout (or --report FILE). A line to paste into the quoter goes to stderr at start";

#[derive(Debug)]
struct Args {
    config: Config,
    duration: Option<Duration>,
    report: Option<String>,
}

fn parse(it: impl Iterator<Item = String>) -> Result<Args, String> {
    let all: Vec<String> = it.collect();
    // The profile picks the defaults every other flag then adjusts.
    let mut config = match all.iter().position(|a| a == "--profile") {
        Some(i) => {
            let name = all.get(i + 1).ok_or("--profile needs a value")?;
            Config::for_profile(name.parse().map_err(|e| format!("{e}"))?)
        }
        None => Config::binance_spot(),
    };
    let mut it = all.into_iter();
    let mut limits: Vec<RateLimit> = Vec::new();
    let mut key = None;
    let mut secret = None;
    let mut public_key = None;
    let mut duration = None;
    let mut report = None;
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            return Err(String::new());
        }
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let num = |v: String| -> Result<i64, String> {
            v.parse::<i64>()
                .map_err(|_| format!("{flag}: {v:?} is not an integer"))
        };
        match flag.as_str() {
            "--profile" => {
                value()?; // read above
            }
            "--listen" => {
                let v = value()?;
                config.bind = v
                    .parse()
                    .map_err(|_| format!("--listen: bad address {v:?}"))?;
            }
            "--clock-offset-ms" => config.clock_offset_ms = num(value()?)?,
            "--limit" => limits.push(value()?.parse().map_err(|e| format!("{e}"))?),
            "--api-key" => key = Some(value()?),
            "--api-secret" => secret = Some(value()?),
            "--api-ed25519-public-key" => {
                let path = value()?;
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("--api-ed25519-public-key {path}: {e}"))?;
                let key = ergon_venue_sim::ed25519::public_key_from_pem(&text)
                    .map_err(|e| format!("--api-ed25519-public-key {path}: {e}"))?;
                public_key = Some(key);
            }
            "--ban-after" => {
                config.ban.after_violations = u32::try_from(num(value()?)?)
                    .map_err(|_| "--ban-after: out of range".to_string())?
            }
            "--ban-first-ms" => config.ban.first_ms = num(value()?)?,
            "--ban-max-ms" => config.ban.max_ms = num(value()?)?,
            "--fault" => {
                let v = value()?;
                let (k, p) = v
                    .rsplit_once(':')
                    .ok_or_else(|| format!("--fault: want KIND:PROBABILITY, got {v:?}"))?;
                let f: Fault = k.parse().map_err(|e| format!("{e}"))?;
                let p: f64 = p
                    .parse()
                    .map_err(|_| format!("--fault: bad probability {p:?}"))?;
                config.faults.chances.push((f, p));
            }
            "--fault-at" => {
                let v = value()?;
                let (n, k) = v
                    .split_once(':')
                    .ok_or_else(|| format!("--fault-at: want N:KIND, got {v:?}"))?;
                let n: u64 = n.parse().map_err(|_| format!("--fault-at: bad N {n:?}"))?;
                let f: Fault = k.parse().map_err(|e| format!("{e}"))?;
                config.faults.script.push((n, f));
            }
            "--fault-delay-ms" => {
                config.faults.delay_ms = u64::try_from(num(value()?)?)
                    .map_err(|_| "--fault-delay-ms: negative".to_string())?
            }
            "--fault-scope" => {
                config.faults.scope = match value()?.as_str() {
                    "orders" => FaultScope::Orders,
                    "all" => FaultScope::All,
                    v => return Err(format!("--fault-scope: want orders or all, got {v:?}")),
                }
            }
            "--seed" => {
                let v = value()?;
                config.faults.seed = v.parse().map_err(|_| format!("--seed: bad {v:?}"))?;
            }
            "--other-sender-weight" => {
                config.other_sender_weight_per_s = u64::try_from(num(value()?)?)
                    .map_err(|_| "--other-sender-weight: negative".to_string())?
            }
            "--symbol" => config.symbol = value()?,
            "--duration" => {
                let v = value()?;
                let s: f64 = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s >= 0.0)
                    .ok_or_else(|| format!("--duration: bad seconds {v:?}"))?;
                duration = Some(Duration::from_secs_f64(s));
            }
            "--report" => report = Some(value()?),
            "--ws-connects" | "--ws-ban-after" => {
                let v =
                    u32::try_from(num(value()?)?).map_err(|_| format!("{flag}: out of range"))?;
                if flag == "--ws-connects" {
                    config.ws.connects = v;
                } else {
                    config.ws.ban_after_refused = v;
                }
            }
            "--ws-connect-window-ms" => config.ws.connect_window_ms = num(value()?)?,
            "--ws-api-ping-ms" => config.ws.api_ping_interval_ms = num(value()?)?,
            "--ws-api-pong-timeout-ms" => config.ws.api_pong_timeout_ms = num(value()?)?,
            "--credits" | "--matching-credits" => {
                let v = value()?;
                let parts: Vec<u64> = v.split(':').filter_map(|x| x.parse().ok()).collect();
                let [max, refill, cost] = parts[..] else {
                    return Err(format!("{flag}: want MAX:REFILL_PER_S:COST, got {v:?}"));
                };
                let c = &mut config.credits;
                if flag == "--credits" {
                    (c.max, c.refill_per_s, c.cost) = (max, refill, cost);
                } else {
                    (c.matching_max, c.matching_refill_per_s, c.matching_cost) =
                        (max, refill, cost);
                }
            }
            "--bybit-dcp" => config.bybit_dcp = true,
            "--no-bybit-private-ws" => config.bybit_private_ws = false,
            "--connections-per-ip" => {
                config.credits.connections_per_ip = u32::try_from(num(value()?)?)
                    .map_err(|_| "--connections-per-ip: out of range".to_string())?
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if !limits.is_empty() {
        config.rate_limits = limits;
    }
    match (key, secret, public_key) {
        (Some(k), Some(s), None) => {
            config.accounts = vec![Account {
                api_key: k,
                secret: s,
                ed25519_public_key: None,
            }]
        }
        (Some(k), None, Some(pk)) => {
            config.accounts = vec![Account {
                api_key: k,
                secret: String::new(),
                ed25519_public_key: Some(pk),
            }]
        }
        (None, None, None) => {}
        _ => return Err(
            "--api-key goes together with one of --api-secret (HMAC) or --api-ed25519-public-key (Ed25519)"
                .into(),
        ),
    }
    config.validate().map_err(|e| e.to_string())?;
    Ok(Args {
        config,
        duration,
        report,
    })
}

/// One line a newcomer can paste: the first-hour quoter (Binance Spot) or
/// mm_loop (the other profiles) against this emulator, with its keys.
fn try_line(server: &Server) -> String {
    let c = server.config();
    let (url, a) = (server.base_url(), &c.accounts[0]);
    let (k, sec) = (&a.api_key, &a.secret);
    match c.profile {
        Profile::BinanceSpot => format!(
            "try: ERGON_API_KEY={k} ERGON_API_SECRET={sec} cargo run --release --example quoter -- --base {url}"
        ),
        Profile::Bybit | Profile::Okx => format!(
            "try: cargo run --release --example mm_loop -- --venue {} --base {url} --api-key {k} --api-secret {sec}",
            if c.profile == Profile::Bybit { "bybit" } else { "okx" }
        ),
        _ => format!(
            "try: ERGON_API_SECRET={sec} ergon-gateway --venue {} --base {url} --api-key {k} --name main",
            if c.profile == Profile::Deribit { "deribit" } else { "binance-futures" }
        ),
    }
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("ergon-venue-sim: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let server = match Server::start(args.config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ergon-venue-sim: {e}");
            return ExitCode::from(1);
        }
    };
    println!("listening on {}", server.base_url());
    // On stderr: stdout is the listening line, then the report, for programs.
    eprintln!("{}", try_line(&server));
    match args.duration {
        Some(d) => std::thread::sleep(d),
        None => {
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
        }
    }
    let report = server.stop().to_json().to_string();
    match args.report {
        Some(path) => {
            if let Err(e) = std::fs::write(&path, report + "\n") {
                eprintln!("ergon-venue-sim: cannot write {path}: {e}");
                return ExitCode::from(1);
            }
        }
        None => println!("{report}"),
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Result<Args, String> {
        parse(s.split_whitespace().map(String::from))
    }

    #[test]
    fn flags_parse_into_the_config() {
        let a = args("--limit REQUEST_WEIGHT:SECOND:1:50 --fault delay:0.5 --fault-at 3:execute-then-close --clock-offset-ms -200 --duration 1.5").unwrap();
        assert_eq!(a.config.rate_limits.len(), 1);
        assert_eq!(a.config.faults.chances, vec![(Fault::Delay, 0.5)]);
        assert_eq!(a.config.faults.script, vec![(3, Fault::ExecuteThenClose)]);
        assert_eq!(a.config.clock_offset_ms, -200);
        assert_eq!(a.duration, Some(Duration::from_millis(1500)));
    }

    #[test]
    fn an_ed25519_key_is_read_from_its_public_pem() {
        let path = std::env::temp_dir().join(format!("sim-ed25519-{}.pem", std::process::id()));
        let pem = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAny3I38iivRKuGGf8RcAq5jE4+qqOpU1Lw7CMdMY0mbk=\n-----END PUBLIC KEY-----\n";
        std::fs::write(&path, pem).unwrap();
        let a = args(&format!(
            "--api-key k --api-ed25519-public-key {}",
            path.display()
        ))
        .unwrap();
        let acct = &a.config.accounts[0];
        assert_eq!(acct.api_key, "k");
        assert_eq!(acct.ed25519_public_key.map(|k| k[0]), Some(0x9f));
        let both = format!(
            "--api-key k --api-secret s --api-ed25519-public-key {}",
            path.display()
        );
        assert!(args(&both).unwrap_err().contains("one of"));
        std::fs::write(&path, "not a key").unwrap();
        let e = args(&format!(
            "--api-key k --api-ed25519-public-key {}",
            path.display()
        ))
        .unwrap_err();
        assert!(
            e.contains("--api-ed25519-public-key") && e.contains("PEM"),
            "{e}"
        );
        let _ = std::fs::remove_file(&path);
        assert!(USAGE.contains("--api-ed25519-public-key FILE"));
    }

    #[test]
    fn websocket_limits_parse_and_bad_ones_are_refused() {
        let a = args("--ws-connects 7 --ws-connect-window-ms 1000 --ws-ban-after 2").unwrap();
        let w = a.config.ws;
        assert_eq!(
            (w.connects, w.ban_after_refused, w.connect_window_ms),
            (7, 2, 1000)
        );
        assert!(args("--ws-connects -1").unwrap_err().contains("range"));
        assert!(args("--ws-connect-window-ms 0")
            .unwrap_err()
            .contains("WebSocket"));
        assert!(args("--ws-connects x").unwrap_err().contains("integer"));
    }

    #[test]
    fn websocket_api_pings_parse_and_the_removed_stream_flags_are_unknown() {
        for removed in [
            "--listen-key on",
            "--ws-ping-ms 50",
            "--ws-pong-timeout-ms 80",
            "--ws-messages-per-s 3",
        ] {
            assert!(args(removed).unwrap_err().contains("unknown argument"));
        }
        let w = args("--ws-api-ping-ms 30 --ws-api-pong-timeout-ms 90")
            .unwrap()
            .config
            .ws;
        assert_eq!((w.api_ping_interval_ms, w.api_pong_timeout_ms), (30, 90));
        assert!(args("--ws-api-ping-ms 0")
            .unwrap_err()
            .contains("WebSocket"));
    }

    #[test]
    fn deribit_credit_flags_parse() {
        let c = args("--profile deribit --credits 1000:100:10 --matching-credits 300:50:30 --connections-per-ip 4")
            .unwrap()
            .config;
        assert_eq!(c.profile, ergon_venue_sim::Profile::Deribit);
        let k = c.credits;
        assert_eq!((k.max, k.refill_per_s, k.cost), (1000, 100, 10));
        assert_eq!(
            (k.matching_max, k.matching_refill_per_s, k.matching_cost),
            (300, 50, 30)
        );
        assert_eq!(k.connections_per_ip, 4);
        assert!(args("--credits 1:2").unwrap_err().contains("MAX:REFILL"));
        assert!(args("--credits 10:0:1").unwrap_err().contains("credits"));
    }

    #[test]
    fn bybit_flags_parse() {
        let c = args("--profile bybit").unwrap().config;
        assert!(!c.bybit_dcp);
        assert!(c.bybit_private_ws);
        let c = args("--profile bybit --bybit-dcp --no-bybit-private-ws")
            .unwrap()
            .config;
        assert!(c.bybit_dcp);
        assert!(!c.bybit_private_ws);
    }

    #[test]
    fn bad_flags_say_what_is_wrong() {
        assert!(args("--listen 0.0.0.0:8080")
            .unwrap_err()
            .contains("loopback"));
        assert_eq!(
            args("--profile hyperliquid").unwrap().config.profile,
            ergon_venue_sim::Profile::Hyperliquid
        );
        let f = args("--fault delay:0.1 --profile binance-futures").unwrap();
        assert_eq!(f.config.rate_limits.len(), 3, "futures defaults");
        assert_eq!(
            f.config.faults.chances.len(),
            1,
            "flags before --profile are kept"
        );
        assert!(args("--fault nope:0.1").unwrap_err().contains("nope"));
        assert!(args("--api-key k").unwrap_err().contains("together"));
        assert!(args("--frobnicate").unwrap_err().contains("unknown"));
        assert!(args("--fault delay:0.7 --fault execute-then-close:0.7")
            .unwrap_err()
            .contains("add up"));
    }
}
