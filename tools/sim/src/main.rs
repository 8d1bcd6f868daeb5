//! `ergon-sim`: runs seeds of the deterministic simulator.
//!
//! ```text
//! ergon-sim --seeds N [--from S] [--jobs J] [--seconds T] [--no-faults] [--no-bans] [--kills PER_MILLE] [--venue spot|bybit] [--hub] [--digest]   # N seeds from S, J threads
//! ergon-sim --seed S [--actions N] [--seconds T] [--venue spot|bybit] [--hub] [--digest]   # one seed (a replay)
//! ```
//! Prints the throughput (seeds/s, steps/s) at the end; on a failure, the seed,
//! its broken promises and the shortest failing prefix, and exits 1. With
//! `--digest`, each seed's digest and steps too (`seed S: digest H, N steps`,
//! in seed order): two builds that print the same lines ran every seed the same
//! way.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use ergon_sim::profile::Profile;
use ergon_sim::{run, shrink, Params};

/// The binary's allocator (see Cargo.toml).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const USAGE: &str =
    "usage: ergon-sim --seeds N [--from S] [--jobs J] [--seconds T] [--no-faults] [--no-bans] [--kills PER_MILLE] [--venue V] [--hub] [--digest]
       ergon-sim --seed S [--actions N] [--seconds T] [--no-faults] [--no-bans] [--kills PER_MILLE] [--venue V] [--hub] [--digest]
  --kills: runs, per mille, whose gateway is killed and restarted (default 250; 0: none)
  --venue spot|bybit: every run plays this venue (default: the seed picks, Bybit in one run of five)
  --hub: every run serves its strategy through the shared-memory hub (on Binance Spot; default: one run in eight)
  --digest: print each seed's digest (a hash of its steps, writes, answers and events)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut p = Params::default();
    let (mut seeds, mut from, mut one, mut digest) = (None, 0u64, None, false);
    let mut jobs = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut num = || -> Result<u64, String> {
            let v = it.next().ok_or(format!("{a} needs a value"))?;
            v.parse().map_err(|_| format!("{a} {v:?}: a whole number"))
        };
        let r = match a.as_str() {
            "--seeds" => num().map(|n| seeds = Some(n)),
            "--from" => num().map(|n| from = n),
            "--jobs" => num().map(|n| jobs = n.max(1)),
            "--seed" => num().map(|n| one = Some(n)),
            "--actions" => num().map(|n| p.max_actions = n),
            "--seconds" => num().map(|n| p.seconds = n as i64),
            "--kills" => num().map(|n| p.kills_per_mille = n.min(1_000)),
            "--digest" => {
                digest = true;
                Ok(())
            }
            "--venue" => match it.next().map(|v| (v, Profile::parse(v))) {
                Some((_, Some(v))) => {
                    p.venue = Some(v);
                    Ok(())
                }
                Some((v, None)) => Err(format!("--venue {v:?}: spot or bybit")),
                None => Err("--venue needs a value".into()),
            },
            "--hub" => {
                p.hub = Some(true);
                p.venue = Some(Profile::Spot);
                Ok(())
            }
            "--no-bans" => {
                p.bans = false;
                Ok(())
            }
            "--no-faults" => {
                p.faults = false;
                Ok(())
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            f => Err(format!("unknown flag {f:?}")),
        };
        if let Err(e) = r {
            eprintln!("ergon-sim: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    }
    if let Some(s) = one {
        let o = run(s, &p);
        let venue = p.venue.unwrap_or_else(|| Profile::draw(s));
        println!(
            "seed {s} ({venue:?}): {} steps, {} actions, {} writes, {} violations",
            o.steps,
            o.actions,
            o.writes,
            o.violations.len()
        );
        if digest {
            println!("  digest {:016x}", o.digest);
        }
        if o.kills > 0 {
            println!(
                "  the gateway was killed {} times and restarted on its files",
                o.kills
            );
        }
        if o.other_reads > 0 {
            println!(
                "  another sender on the IP read the book {} times; the gateway was answered 429 {} times",
                o.other_reads, o.throttled
            );
        }
        if let Some(h) = o.clients {
            println!(
                "  shared-memory hub: {} client processes killed, {} attached again, {} second processes of a live name refused, {} final events read while another client's process was dead, {} killed halfway through a submit ({} of their slots seen taken by the next), {} killed between a push and its flight-table entry before the hub took it and {} after ({} of their final events read by the next), {} names dropped after --keep ({} unread final events gone with them), {} names read slowly (at most {} final events waiting at one read)",
                h.kills, h.again, h.twins, h.served_while_other_dead, h.torn.0, h.torn.1, h.untabled.0, h.untabled.1, h.untabled_read, h.expired.0, h.expired.1, h.slow.0, h.slow.1
            );
        }
        if let Some(w) = o.ws {
            println!(
                "  WebSocket API: {} opens, {} drops, {} requests, {} answers, {} executions, {} deadlines",
                w.opens, w.drops, w.requests, w.answers, w.executions, w.deadlines
            );
        }
        for (k, n) in &o.tally {
            println!("  {n:6}  {k}");
        }
        for v in &o.violations {
            println!("  {v}");
        }
        return if o.violations.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    let Some(n) = seeds else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let started = Instant::now();
    // Seeds are independent: `jobs` threads take them in turn; the first failure
    // (the lowest seed among those that failed) is shrunk and printed.
    let next = AtomicU64::new(from);
    let end = from.saturating_add(n);
    let (steps, failed) = (AtomicU64::new(0), AtomicU64::new(u64::MAX));
    // With --digest each thread keeps its seeds' digests, printed in seed order.
    let mut digests: Vec<(u64, u64, u64)> = std::thread::scope(|sc| {
        let threads: Vec<_> = (0..jobs)
            .map(|_| {
                sc.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let seed = next.fetch_add(1, Ordering::Relaxed);
                        if seed >= end || seed > failed.load(Ordering::Relaxed) {
                            return mine;
                        }
                        let o = run(seed, &p);
                        steps.fetch_add(o.steps, Ordering::Relaxed);
                        if digest {
                            mine.push((seed, o.digest, o.steps));
                        }
                        if !o.violations.is_empty() {
                            failed.fetch_min(seed, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|t| t.join().expect("a simulation thread"))
            .collect()
    });
    digests.sort_unstable();
    for (seed, d, steps) in digests {
        println!("seed {seed}: digest {d:016x}, {steps} steps");
    }
    let failed = failed.into_inner();
    if failed != u64::MAX {
        let (k, short) = shrink(failed, &p).expect("it failed once");
        println!("seed {failed} fails ({k} actions suffice):");
        for v in &short.violations {
            println!("  {v}");
        }
        let venue = match p.venue {
            Some(Profile::Bybit) => " --venue bybit",
            Some(Profile::Spot) => " --venue spot",
            None => "",
        };
        println!(
            "replay: ergon-sim --seed {failed} --actions {k} --seconds {}{venue}",
            p.seconds
        );
        return ExitCode::FAILURE;
    }
    let steps = steps.into_inner();
    let s = started.elapsed().as_secs_f64().max(1e-9);
    println!(
        "{n} seeds from {from} passed: {:.1} seeds/s, {:.0} steps/s",
        n as f64 / s,
        steps as f64 / s
    );
    ExitCode::SUCCESS
}
