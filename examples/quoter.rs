//! The first-hour quoter (the book's tutorial): one bid and one ask on Binance
//! Spot, re-quoted every second, stopped cleanly with every quote cancelled. The
//! same strategy core ([`quoting::Quoter`]) runs in one of two modes:
//!
//! - in-process (default): this process owns the connections and the budget. With
//!   no `--base`, it starts the venue emulator on loopback and uses its keys;
//!   with `--base URL`, the keys come from `ERGON_API_KEY` and `ERGON_API_SECRET`
//!   (or `--api-secret-file PATH`, mode 0600).
//! - `--gateway NAME`: attached over shared memory to a running `ergon-gateway
//!   --name NAME`, which holds the keys, the connections and the budget.
//!
//! ```text
//! cargo run --release --example quoter -- [--base URL | --gateway NAME] [--seconds N]
//! ```
//!
//! It prints one line at the end: `quoter: placed P rested R cancels C cancelled X
//! refused F unknown U`.

use std::sync::Arc;
use std::time::{Duration, Instant};

// ANCHOR: imports
use ergon_core::Class;
use ergon_gateway::shm::{Call, ShmClient, ShmEvent};
use ergon_gateway::{
    self as gateway, Account, Api, Control, Event, Gateway, Keys, Prepared, Start, Strategy,
};
use ergon_venues::binance_spot::BinanceSpot;
use ergon_venues::endpoint::{ClientOrderId, Endpoints, NewOrder, OrderRef, Symbol};
// ANCHOR_END: imports

#[path = "quoter_core/mod.rs"]
pub mod quoting;
use quoting::{Counts, Desk, Fate, Quoter};

const SEC: i64 = 1_000_000_000;
/// The loop timer that re-quotes (any token but the gateway's own).
const REQUOTE: u64 = 1;
/// Quotes either side of 37,000.00 USDT, 0.05 apart, 0.010 a quote (370 USDT:
/// above Binance Spot's 5 USDT minimum notional, which the emulator enforces).
const MID_CENTS: u64 = 3_700_000;
const SPREAD_CENTS: u64 = 5;
const QTY: &str = "0.010";

/// The command line.
pub const USAGE: &str = "usage: quoter [--base URL [--api-secret-file PATH] | --gateway NAME [--client NAME]] [--seconds N]
  in-process without --base: the venue emulator, started here; with --base: ERGON_API_KEY and
  ERGON_API_SECRET (or --api-secret-file, mode 0600); --gateway: a running ergon-gateway --name NAME";

/// The options.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `--base URL`: the venue (default: the emulator, started here).
    pub base: Option<String>,
    /// `--gateway NAME`: through a running `ergon-gateway --name NAME`.
    pub gateway: Option<String>,
    /// `--seconds N`: how long to quote (default 10).
    pub seconds: u64,
    /// `--api-secret-file PATH`: the secret (else `ERGON_API_SECRET`).
    pub secret_file: Option<String>,
    /// `--client NAME`: the name it attaches under (default `quoter`); two
    /// quoters on one gateway take two names.
    pub client: Option<String>,
}

/// Reads the command line.
pub fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Options, String> {
    let mut o = Options {
        seconds: 10,
        ..Options::default()
    };
    let mut it = args.into_iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--base" => o.base = Some(value()?),
            "--gateway" => o.gateway = Some(value()?),
            "--api-secret-file" => o.secret_file = Some(value()?),
            "--client" => o.client = Some(value()?),
            "--seconds" => {
                let v = value()?;
                o.seconds = v
                    .parse()
                    .map_err(|_| format!("--seconds {v:?}: a whole number"))?;
            }
            f => return Err(format!("unknown flag {f:?}: {USAGE}")),
        }
    }
    Ok(o)
}

// ANCHOR: fate
/// An event as the core's [`Fate`], in either mode (over shared memory,
/// [`ShmEvent::event`] gives the same [`Event`]); None for a step (Retrying,
/// Reconciling) or an event that is not a request's end.
fn fate(ev: &Event<'_>) -> Option<(u64, Fate)> {
    Some(match *ev {
        Event::Applied { tag, .. } => (tag, Fate::Ran),
        Event::Rejected { tag }
        | Event::Limited { tag, .. }
        | Event::Expired { tag, .. }
        | Event::DuplicateId { tag }
        | Event::Halted { tag, .. } => (tag, Fate::DidNotRun),
        Event::Reconciled { tag, found } => (tag, found.map_or(Fate::DidNotRun, |_| Fate::Ran)),
        Event::Unresolved { tag } => (tag, Fate::Unknown),
        _ => return None,
    })
}
// ANCHOR_END: fate

// ANCHOR: in_process
/// The in-process mode's desk: the venue's endpoints prepare and sign, the
/// gateway charges and sends.
struct Local<'x, 'a, 'c> {
    api: &'x mut Api<'a, 'c, BinanceSpot>,
    req: &'x mut Prepared,
}

impl Desk for Local<'_, '_, '_> {
    fn next_id(&mut self) -> Option<ClientOrderId> {
        self.api.next_client_order_id().ok()
    }

    fn place(&mut self, order: &NewOrder<'_>, tag: u64) -> bool {
        let now = self.api.now();
        // Err is the request's one final event, at once (nothing was sent).
        self.api.venue_mut().new_order(self.req, order, now).is_ok()
            && self.api.submit(self.req, Class::Normal, tag).is_ok()
    }

    fn cancel(&mut self, order: &OrderRef<'_>, tag: u64) -> bool {
        let now = self.api.now();
        self.api.venue_mut().cancel(self.req, order, now).is_ok()
            && self.api.submit(self.req, Class::Urgent, tag).is_ok()
    }
}

/// The strategy the gateway's loop drives: a timer re-quotes every second; at
/// the end every quote is cancelled, and the loop stops once all have settled.
struct InProcess {
    quoter: Quoter,
    req: Prepared,
    second: u64,
    seconds: u64,
}

impl Strategy<BinanceSpot> for InProcess {
    fn on_turn(&mut self, api: &mut Api<'_, '_, BinanceSpot>) {
        if self.second == 0 {
            self.second = 1;
            let at = api.now() + SEC;
            api.set_timer(REQUOTE, at).expect("a timer");
        }
        if self.quoter.done() {
            api.stop();
        }
    }

    fn on_timer(&mut self, api: &mut Api<'_, '_, BinanceSpot>, _token: u64) {
        let mut desk = Local {
            api,
            req: &mut self.req,
        };
        if self.second > self.seconds + 5 {
            desk.api.stop(); // 5 s to settle the cancels is plenty: give up
            return;
        }
        if self.second > self.seconds || desk.api.stop_asked() {
            self.quoter.stop(&mut desk);
        } else {
            self.quoter.requote(&mut desk, self.second);
        }
        self.second += 1;
        let at = desk.api.now() + SEC;
        desk.api.set_timer(REQUOTE, at).expect("a timer");
    }

    fn on_event(&mut self, _api: &mut Api<'_, '_, BinanceSpot>, ev: Event<'_>) {
        if let Some((tag, fate)) = fate(&ev) {
            self.quoter.on_final(tag, fate);
        }
    }
}

/// Quotes through this process's own gateway on `start` for `seconds`.
pub fn in_process(start: &Start, keys: &Keys<'_>, seconds: u64) -> Result<Counts, String> {
    let declare = |boot: &gateway::Boot, b: &mut _| BinanceSpot::declare(boot, b, keys, 50_000_000);
    let (mut lp, gw, pool) =
        Gateway::start(start, "BTCUSDT", declare).map_err(|e| e.to_string())?;
    let strategy = InProcess {
        quoter: Quoter::new(
            Symbol::new("BTCUSDT").expect("symbol"),
            MID_CENTS,
            SPREAD_CENTS,
            QTY,
        ),
        req: Prepared::with_capacity(1024),
        second: 0,
        seconds,
    };
    let done = gateway::run(&mut lp, gw, pool, strategy, Arc::new(Control::default()))
        .map_err(|e| e.to_string())?;
    match done.strategy.quoter.done() {
        true => Ok(done.strategy.quoter.counts),
        false => Err("quotes still in flight 5 s after the end".into()),
    }
}
// ANCHOR_END: in_process

// ANCHOR: daemon
/// The daemon mode's desk: calls over shared memory; the gateway prepares,
/// signs, charges and sends.
struct Remote {
    client: ShmClient,
}

impl Desk for Remote {
    fn next_id(&mut self) -> Option<ClientOrderId> {
        // Only ids from the gateway's blocks are ours: any other is NotYours.
        self.client.next_client_order_id().ok()
    }

    fn place(&mut self, order: &NewOrder<'_>, tag: u64) -> bool {
        self.client
            .submit(&Call::NewOrder(*order), Class::Normal, tag)
            .is_ok()
    }

    fn cancel(&mut self, order: &OrderRef<'_>, tag: u64) -> bool {
        self.client
            .submit(&Call::Cancel(*order), Class::Urgent, tag)
            .is_ok()
    }
}

/// A shared-memory event as the core's [`Fate`]: the in-process vocabulary's
/// [`fate`], and the two ends only a process apart meets.
fn shm_fate(ev: &ShmEvent, body: &[u8]) -> Option<(u64, Fate)> {
    match (ev.event(body), *ev) {
        (Some(e), _) => fate(&e),
        // An id not from this client's blocks: refused, nothing sent.
        (None, ShmEvent::NotYours { tag }) => Some((tag, Fate::DidNotRun)),
        // The gateway went away with it in flight.
        (None, ShmEvent::Lost { tag }) => Some((tag, Fate::Unknown)),
        (None, _) => None,
    }
}

/// Quotes through the running gateway `name`, attached as `client`, for `seconds`.
pub fn through_daemon(name: &str, client: &str, seconds: u64) -> Result<Counts, String> {
    let client = ShmClient::attach(name, client, false)
        .map_err(|e| format!("attach to gateway {name:?}: {e}"))?;
    let mut desk = Remote { client };
    let mut quoter = Quoter::new(
        Symbol::new("BTCUSDT").expect("symbol"),
        MID_CENTS,
        SPREAD_CENTS,
        QTY,
    );
    let started = Instant::now();
    let mut second = 1;
    let stop_by = Duration::from_secs(seconds + 5);
    while !quoter.done() {
        if started.elapsed() >= Duration::from_secs(second) {
            match second > seconds {
                true => quoter.stop(&mut desk),
                false => quoter.requote(&mut desk, second),
            }
            second += 1;
        }
        while let Some((ev, body)) = desk.client.poll() {
            if let Some((tag, fate)) = shm_fate(&ev, body) {
                quoter.on_final(tag, fate);
            }
        }
        if desk.client.is_gone() && !quoter.stopping() {
            return Err(format!("gateway {name:?} went away"));
        }
        if started.elapsed() > stop_by {
            return Err("quotes still in flight 5 s after the end".into());
        }
        desk.client.wait(10);
    }
    Ok(quoter.counts)
}
// ANCHOR_END: daemon

/// Runs the mode the options select.
pub fn run(o: &Options) -> Result<Counts, String> {
    if let Some(name) = &o.gateway {
        let client = o.client.as_deref().unwrap_or("quoter");
        return through_daemon(name, client, o.seconds);
    }
    match &o.base {
        Some(url) => {
            let key = std::env::var("ERGON_API_KEY").map_err(|_| "--base needs ERGON_API_KEY")?;
            let secret = match &o.secret_file {
                Some(path) => read_secret(path)?,
                None => std::env::var("ERGON_API_SECRET")
                    .map_err(|_| "--base needs ERGON_API_SECRET or --api-secret-file")?,
            };
            let keys = Keys {
                api_key: &key,
                secret: secret.as_bytes(),
                passphrase: None,
            };
            in_process(
                &Start::from_base(url).map_err(|e| e.to_string())?,
                &keys,
                o.seconds,
            )
        }
        None => {
            let sim = ergon_venue_sim::Server::start(ergon_venue_sim::Config::binance_spot())
                .map_err(|e| e.to_string())?;
            let c = sim.config();
            let a = &c.accounts[0];
            let keys = Keys {
                api_key: &a.api_key,
                secret: a.secret.as_bytes(),
                passphrase: None,
            };
            in_process(
                &Start::new(sim.addr(), sim.addr().to_string()),
                &keys,
                o.seconds,
            )
        }
    }
}

/// The secret from a file only this uid can read.
fn read_secret(path: &str) -> Result<String, String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).map_err(|e| format!("{path}: {e}"))?;
    if m.mode() & 0o077 != 0 {
        return Err(format!(
            "{path}: mode {:04o}: other users may read it (chmod 600)",
            m.mode() & 0o7777
        ));
    }
    let s = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    Ok(s.trim().to_string())
}

fn main() -> std::process::ExitCode {
    if std::env::args().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return std::process::ExitCode::SUCCESS;
    }
    let result = parse_args(std::env::args().skip(1)).and_then(|o| run(&o));
    match result {
        Ok(c) => {
            println!(
                "quoter: placed {} rested {} cancels {} cancelled {} refused {} unknown {}",
                c.placed, c.rested, c.cancels, c.cancelled, c.refused, c.unknown
            );
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("quoter: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
