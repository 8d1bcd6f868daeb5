//! `ergon-cpucheck --cpu N [--seconds S]`: what makes CPU N noisy for a pinned send
//! thread. One line per item, then exactly one verdict line: `quiet` or
//! `not quiet: <reasons>`.
//!
//! Reads `/sys` and `/proc` only; an item it cannot read is reported as unknown, never
//! guessed. The hiccup measurement pins this process to the CPU and spins on it.

use std::process::ExitCode;
use std::time::Duration;

use ergon_cpucheck::{check, verdict, Paths};

const USAGE: &str = "usage: ergon-cpucheck --cpu N [--seconds S]
  --cpu N      the CPU to check (the one the send thread is pinned to)
  --seconds S  how long to spin measuring hiccups on it (default 1, at most 600)";

struct Args {
    cpu: usize,
    seconds: f64,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut cpu = None;
    let mut seconds = 1.0;
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("{flag} needs a value"))
                .cloned()
        };
        match flag.as_str() {
            "--cpu" => {
                let v = value()?;
                cpu = Some(
                    v.parse()
                        .map_err(|_| format!("--cpu: not a CPU number: {v:?}"))?,
                );
            }
            "--seconds" => {
                let v = value()?;
                seconds = v
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s > 0.0 && *s <= 600.0)
                    .ok_or_else(|| format!("--seconds: want a number in (0, 600], got {v:?}"))?;
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Args {
        cpu: cpu.ok_or("--cpu N is required")?,
        seconds,
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse(&args) {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("ergon-cpucheck: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    // SAFETY: sysconf only reads a configuration value.
    let configured = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    if configured > 0 && args.cpu >= configured as usize {
        eprintln!(
            "ergon-cpucheck: no cpu {} here: {configured} CPUs are configured (0..={})",
            args.cpu,
            configured - 1
        );
        return ExitCode::from(2);
    }
    println!("cpu {}", args.cpu);
    let findings = check(
        &Paths::default(),
        args.cpu,
        Duration::from_secs_f64(args.seconds),
    );
    for f in &findings {
        println!("{f}");
    }
    println!("{}", verdict(&findings));
    ExitCode::SUCCESS
}
