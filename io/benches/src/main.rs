//! `limit_bench`: what `try_charge` costs on the send path, on a pinned CPU, side by
//! side with governor doing the same work in the same run.
//!
//! ```text
//! limit_bench --samples 200000 --batch 64 [--cpu N] [--json] [--strict] [--case NAME]
//! limit_bench --icount CALLS --case NAME [--batch 64] [--cpu N]
//! limit_bench --callgrind [--batch 64] [--cpu N]
//! ```
//!
//! `--callgrind` runs this binary under `valgrind --tool=callgrind` once per case of
//! [`CALLGRIND_CASES`] and prints instructions per call, the shape cases' ratios to
//! one governor check and the decision-to-wire stage table (`wire.rs`).
//!
//! The cases run interleaved, one batch of each in turn (the first case rotating), so
//! noise lands on all of them alike. A batch is timed as a whole (two TSC reads); its
//! mean is the ns per call. Outside the timed region the harness reads the allocation
//! counters and the thread's involuntary context switches; nothing but the calls runs
//! between the two clock reads.
//!
//! Exits non-zero on a bad argument, if the thread does not run on the CPU it pinned
//! to, if a case does not do what it measures (a steady charge refused), if ergon and
//! governor disagree where their semantics coincide, and with `--strict` if anything
//! was allocated inside a timed loop. Never on timings.

mod cases;
mod stats;
mod wire;
mod wire_ws;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;
use std::process::ExitCode;
use std::time::Duration;

use cases::{Case, Expect, TscClock, MAX_BATCH};
use ergon_cpucheck::{Isolation, Paths};
use stats::Summary;

/// Counts the allocations of each thread; the harness reads its own thread's counts
/// around each timed loop, so nothing another thread does can show up there.
struct Counting;

thread_local! {
    /// Allocations and bytes asked for by this thread. Const-initialised cells with
    /// no destructor: reading them never allocates, so the allocator may use them.
    static COUNTS: (Cell<u64>, Cell<u64>) = const { (Cell::new(0), Cell::new(0)) };
}

fn count(bytes: usize) {
    // try_with: during thread teardown the slot may be gone; then nothing is timed.
    let _ = COUNTS.try_with(|(n, b)| {
        n.set(n.get() + 1);
        b.set(b.get() + bytes as u64);
    });
}

/// (allocations, bytes) of this thread so far.
fn allocated() -> (u64, u64) {
    COUNTS.with(|(n, b)| (n.get(), b.get()))
}

// SAFETY: every method forwards to the system allocator unchanged; counting touches
// only a const thread-local that never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        System.alloc_zeroed(layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        System.realloc(ptr, layout, new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const USAGE: &str =
    "usage: limit_bench --samples 200000 --batch 64 [--cpu N] [--json] [--strict] [--case NAME]
       limit_bench --icount CALLS --case NAME [--batch 64] [--cpu N]
       limit_bench --callgrind [--batch 64] [--cpu N]
  --samples N    batches per case (default 200000)
  --batch N      calls per batch, 1..=99 (default 64)
  --cpu N        pin to CPU N (default: the CPU it starts on)
  --json         one JSON line per case on stdout instead of the table
  --strict       exit non-zero if anything was allocated inside a timed loop
  --case NAME    run only this case (see --list); NAME,NAME,... for several
  --icount N     run N calls of --case in its non-inlined loop, for
                 valgrind --tool=callgrind --toggle-collect='*timed_calls*'
  --callgrind    run the shape, governor and wire cases under callgrind (valgrind
                 on the PATH) and print instructions per call, ratios, stages
  --list         print the case names";

struct Args {
    samples: usize,
    batch: usize,
    cpu: Option<usize>,
    json: bool,
    strict: bool,
    case: Option<String>,
    icount: Option<u64>,
    callgrind: bool,
    list: bool,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut a = Args {
        samples: 200_000,
        batch: 64,
        cpu: None,
        json: false,
        strict: false,
        case: None,
        icount: None,
        callgrind: false,
        list: false,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |v: &String| {
            v.parse::<u64>()
                .map_err(|_| format!("{flag}: not a number: {v:?}"))
        };
        match flag.as_str() {
            "--samples" => a.samples = number(value()?)? as usize,
            "--batch" => a.batch = number(value()?)? as usize,
            "--cpu" => a.cpu = Some(number(value()?)? as usize),
            "--icount" => a.icount = Some(number(value()?)?),
            "--case" => a.case = Some(value()?.clone()),
            "--json" => a.json = true,
            "--strict" => a.strict = true,
            "--list" => a.list = true,
            "--callgrind" => a.callgrind = true,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if a.samples == 0 {
        return Err("--samples must be at least 1".into());
    }
    if !(1..=MAX_BATCH).contains(&a.batch) {
        return Err(format!(
            "--batch must be 1..={MAX_BATCH} (a steady batch must fit the orders/10 s limit)"
        ));
    }
    if a.icount.is_some() && a.case.is_none() {
        return Err("--icount needs --case NAME".into());
    }
    Ok(a)
}

/// Involuntary context switches of this thread so far.
fn involuntary_switches() -> u64 {
    // SAFETY: getrusage writes into the zeroed struct we own.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_THREAD, &mut ru) != 0 {
            return 0;
        }
        ru.ru_nivcsw as u64
    }
}

/// What one case recorded.
struct Record {
    batch_ns: Vec<u64>,
    refused: u64,
    allocs: u64,
    bytes: u64,
    switches: u64,
}

fn tri(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "unknown",
    }
}

fn tri_json(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "true",
        Some(false) => "false",
        None => "null",
    }
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

struct Machine {
    cpu: usize,
    iso: Isolation,
    verdict: String,
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse(&argv) {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("limit_bench: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let clock = TscClock::new();
    let mut all = cases::all(&clock);
    all.extend(wire::all());
    all.extend(wire_ws::all());
    if args.list {
        for c in &all {
            println!("{:<16} {}", c.name(), c.what());
        }
        return ExitCode::SUCCESS;
    }
    if let Some(names) = &args.case {
        let names: Vec<&str> = names.split(',').collect();
        if let Some(bad) = names.iter().find(|n| !all.iter().any(|c| c.name() == **n)) {
            eprintln!("limit_bench: no case {bad:?} (see --list)");
            return ExitCode::from(2);
        }
        all.retain(|c| names.contains(&c.name()));
        if args.icount.is_some() && all.len() != 1 {
            eprintln!("limit_bench: --icount runs exactly one case");
            return ExitCode::from(2);
        }
    }

    let cpu = match args.cpu.map_or_else(ergon_cpucheck::current_cpu, Ok) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("limit_bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    if !core_affinity::set_for_current(core_affinity::CoreId { id: cpu }) {
        eprintln!("limit_bench: cannot pin to cpu {cpu} (not allowed or absent)");
        return ExitCode::FAILURE;
    }
    match ergon_cpucheck::current_cpu() {
        Ok(on) if on == cpu => {}
        Ok(on) => {
            eprintln!("limit_bench: pinned to cpu {cpu} but sched_getcpu says {on}");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("limit_bench: {e}");
            return ExitCode::FAILURE;
        }
    }

    if let Some(calls) = args.icount {
        return icount(all.pop().expect("one case"), calls, args.batch);
    }
    if args.callgrind {
        return callgrind(cpu, args.batch);
    }

    let paths = Paths::default();
    let iso = ergon_cpucheck::isolation(&paths, cpu);
    let findings = ergon_cpucheck::check(&paths, cpu, Duration::from_millis(250));
    let machine = Machine {
        cpu,
        iso,
        verdict: ergon_cpucheck::verdict(&findings),
    };
    // The human header goes to stderr with --json, so stdout is JSON lines only.
    let header = format!(
        "cpu {cpu} (pinned, sched_getcpu agrees); isolated (isolcpus): {}; nohz_full: {}\n\
         {}\n\
         {} batches of {} calls per case, {} cases interleaved; \
         sizes: Budget {} bytes, Ticket {} bytes",
        tri(iso.isolated),
        tri(iso.nohz_full),
        machine.verdict,
        args.samples,
        args.batch,
        all.len(),
        std::mem::size_of::<ergon_core::Budget>(),
        std::mem::size_of::<ergon_core::Ticket>(),
    );
    if args.json {
        eprintln!("{header}");
    } else {
        println!("{header}");
    }

    let mut failed = false;
    if args.case.is_none() || all.iter().any(|c| c.name().starts_with("gov")) {
        match cases::agreement(200_000, 0x5eed) {
            Ok(a) => {
                let line = format!(
                    "agreement: ergon and governor made the same {} decisions ({} admitted, {} refused)",
                    a.decisions, a.admitted, a.refused
                );
                if args.json {
                    eprintln!("{line}");
                } else {
                    println!("{line}");
                }
            }
            Err(e) => {
                eprintln!("limit_bench: ergon and governor disagree: {e}");
                failed = true;
            }
        }
    }

    let records = run(&mut all, &clock, args.samples, args.batch);

    match ergon_cpucheck::current_cpu() {
        Ok(on) if on == cpu => {}
        other => {
            eprintln!("limit_bench: the run ended off cpu {cpu}: {other:?}");
            failed = true;
        }
    }

    let mut summaries = Vec::new();
    for (case, rec) in all.iter().zip(&records) {
        let want = match case.expect() {
            Expect::Admit | Expect::Nothing => 0,
            Expect::Refuse => (args.samples * args.batch) as u64,
        };
        if rec.refused != want {
            eprintln!(
                "limit_bench: case {} refused {} of {} calls, expected {want}: it does not measure its path",
                case.name(),
                rec.refused,
                args.samples * args.batch
            );
            failed = true;
        }
        summaries.push(stats::summarize(&rec.batch_ns, args.batch).expect("samples >= 1"));
    }

    if args.json {
        for ((case, rec), s) in all.iter().zip(&records).zip(&summaries) {
            println!("{}", json_line(case.as_ref(), rec, s, &machine));
        }
    } else {
        print_table(&all, &records, &summaries);
        print_targets(&all, &summaries);
    }

    let allocated: u64 = records.iter().map(|r| r.allocs).sum();
    if allocated > 0 {
        eprintln!("limit_bench: {allocated} allocations inside timed loops");
        if args.strict {
            failed = true;
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// One batch of every case in turn, `samples` times.
fn run(all: &mut [Box<dyn Case>], clock: &TscClock, samples: usize, batch: usize) -> Vec<Record> {
    let mut records: Vec<Record> = all
        .iter()
        .map(|_| Record {
            batch_ns: Vec::with_capacity(samples),
            refused: 0,
            allocs: 0,
            bytes: 0,
            switches: 0,
        })
        .collect();
    // Warm-up: code and data in cache, quanta calibrated, lazy statics set.
    for case in all.iter_mut() {
        for _ in 0..100 {
            case.prepare();
            black_box(case.timed_calls(batch));
        }
    }
    let n = all.len();
    for s in 0..samples {
        for k in 0..n {
            let i = (s + k) % n;
            let case = &mut all[i];
            case.prepare();
            let sw0 = involuntary_switches();
            let (a0, b0) = allocated();
            let t0 = clock.raw();
            let refused = case.timed_calls(batch);
            let t1 = clock.raw();
            let (a1, b1) = allocated();
            let sw1 = involuntary_switches();
            let r = &mut records[i];
            r.batch_ns.push(clock.delta_ns(t0, t1));
            r.refused += refused;
            r.allocs += a1 - a0;
            r.bytes += b1 - b0;
            r.switches += sw1.saturating_sub(sw0);
        }
    }
    records
}

/// `calls` calls of one case, in batches, for callgrind: only `timed_calls` is
/// collected with `--toggle-collect='*timed_calls*'`, so its instruction count over
/// `calls` is the instructions per call (plus the loop's own two or three).
fn icount(mut case: Box<dyn Case>, calls: u64, batch: usize) -> ExitCode {
    let batches = calls.div_ceil(batch as u64);
    let mut refused = 0;
    for _ in 0..batches {
        case.prepare();
        refused += case.timed_calls(batch);
    }
    println!(
        "icount: case {} ran {} calls ({} batches of {}), {} refused; \
         instructions per call = Ir of *timed_calls* / {}",
        case.name(),
        batches * batch as u64,
        batches,
        batch,
        refused,
        batches * batch as u64
    );
    ExitCode::SUCCESS
}

/// The cases `--callgrind` counts, with the calls it runs of each: the four shape
/// cases, one and four governor checks, and the decision-to-wire stages (fewer
/// calls: each is thousands of instructions).
pub const CALLGRIND_CASES: [(&str, u64); 17] = [
    ("gov1", 640_000),
    ("gov4", 640_000),
    ("shape4", 640_000),
    ("shape1", 640_000),
    ("shape_refused", 640_000),
    ("shape_refund", 640_000),
    ("wire_sign", 12_800),
    ("wire_sign_naive", 12_800),
    ("wire_prepare", 12_800),
    ("wire_charge", 128_000),
    ("wire_ledger", 12_800),
    ("wire_encode", 12_800),
    ("wire_write", 12_800),
    ("wire_floor", 12_800),
    ("wire_prepare_builder", 12_800),
    ("wire_ws", 12_800),
    ("wire_ws_floor", 12_800),
];

/// The "Collected : N" figure of callgrind's summary on stderr.
fn collected(stderr: &str) -> Option<u64> {
    stderr.lines().find_map(|l| {
        let (_, n) = l.split_once("Collected :")?;
        n.trim().parse().ok()
    })
}

/// `--callgrind`: each case of [`CALLGRIND_CASES`] in its own run of this binary
/// under callgrind, collecting only `timed_calls`; prints instructions per call
/// (the bench loop included) and the ratios the issue asks for.
fn callgrind(cpu: usize, batch: usize) -> ExitCode {
    let Ok(exe) = std::env::current_exe() else {
        eprintln!("limit_bench: cannot find its own executable");
        return ExitCode::FAILURE;
    };
    let dir = std::env::temp_dir();
    let mut per_call = Vec::new();
    println!("instructions per call (callgrind, only *timed_calls* collected, bench loop included; --batch {batch}):");
    for (name, calls) in CALLGRIND_CASES {
        let out = std::process::Command::new("valgrind")
            .arg("--tool=callgrind")
            .arg(format!(
                "--callgrind-out-file={}",
                dir.join(format!("limit_bench.callgrind.{name}")).display()
            ))
            .arg("--toggle-collect=*timed_calls*")
            .arg(&exe)
            .args(["--icount", &calls.to_string(), "--case", name])
            .args(["--batch", &batch.to_string(), "--cpu", &cpu.to_string()])
            .output();
        let out = match out {
            Ok(o) if o.status.success() => o,
            Ok(o) => {
                eprintln!(
                    "limit_bench: callgrind of {name} failed: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
                return ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!("limit_bench: cannot run valgrind: {e}");
                return ExitCode::FAILURE;
            }
        };
        let Some(ir) = collected(&String::from_utf8_lossy(&out.stderr)) else {
            eprintln!("limit_bench: no \"Collected\" line from callgrind for {name}");
            return ExitCode::FAILURE;
        };
        let calls = calls.div_ceil(batch as u64) * batch as u64;
        let x = ir as f64 / calls as f64;
        println!("  {name:<16} {x:>9.1}   ({ir} / {calls})");
        per_call.push((name, x));
    }
    let get = |n: &str| per_call.iter().find(|(c, _)| *c == n).map(|(_, x)| *x);
    let (Some(gov1), Some(gov4)) = (get("gov1"), get("gov4")) else {
        return ExitCode::FAILURE;
    };
    println!();
    println!("shapes, instructions per call / one governor check ({gov1:.1}):");
    for (name, target) in [
        ("shape4", 2.0),
        ("shape1", 1.2),
        ("shape_refused", 4.0),
        ("shape_refund", 4.0),
    ] {
        let Some(x) = get(name) else { continue };
        let r = x / gov1;
        println!(
            "  {name:<16} {x:>7.1}  {r:.2}x  (target < {target}x: {})",
            if r < target { "met" } else { "missed" }
        );
    }
    if let Some(x) = get("shape4") {
        println!(
            "  shape4 / four governor checks ({gov4:.1}): {:.2}x",
            x / gov4
        );
    }
    println!();
    print_stages("instructions", &get, gov1)
}

/// The decision-to-wire stage table from per-call figures (`unit`: ns or
/// instructions), with the signature set beside one governor check (`gov1`), the
/// floor and the signature keyed on every call.
fn print_stages(unit: &str, get: &dyn Fn(&str) -> Option<f64>, gov1: f64) -> ExitCode {
    let Some(rows) = wire::stages(get) else {
        return ExitCode::SUCCESS;
    };
    wire_ws::print(unit, get);
    println!("decision to wire, {unit} per order (a Binance LIMIT order, Gateway::submit, the pool, write(2) to a pipe):");
    for r in &rows {
        println!("  {:<42} {:>9.1}   {}", r.stage, r.cost, r.how);
    }
    if let (Some(sign), Some(naive), Some(floor)) =
        (get("wire_sign"), get("wire_sign_naive"), get("wire_floor"))
    {
        println!(
            "  signature: {:.1}x one governor check, {:.2}x the floor; keyed per call {naive:.1}: precomputed / per call = {:.2}",
            sign / gov1,
            sign / floor,
            sign / naive
        );
    }
    if let (Some(encode), Some(sign)) = (get("wire_encode"), get("wire_sign")) {
        let rest = encode - sign;
        println!(
            "  all but the signature and write(2): {rest:.1} (target < 1000 instructions: {})",
            if unit != "instructions" {
                "judged in instructions"
            } else if rest < 1000.0 {
                "met"
            } else {
                "missed"
            }
        );
    }
    ExitCode::SUCCESS
}

fn print_table(all: &[Box<dyn Case>], records: &[Record], summaries: &[Summary]) {
    println!();
    println!(
        "{:<16} {:>7} {:>7} {:>7} {:>7} {:>8} {:>9} | {:>6} {:>6} {:>6} {:>9} {:>6} | {:>5} | {:>6} {:>6}",
        "ns/call", "min", "median", "mean", "p99", "p99.9", "slowest", "stalls", ">=10us", ">=100us", "worst ns", "share", "ivcsw", "allocs", "bytes"
    );
    for ((case, r), s) in all.iter().zip(records).zip(summaries) {
        println!(
            "{:<16} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>8.1} {:>9.1} | {:>6} {:>6} {:>6} {:>9} {:>5.2}% | {:>5} | {:>6} {:>6}",
            case.name(),
            s.min,
            s.median,
            s.mean,
            s.p99,
            s.p999,
            s.max,
            s.stalls,
            s.stalls_10us,
            s.stalls_100us,
            s.worst_stall_ns,
            s.stall_share * 100.0,
            r.switches,
            r.allocs,
            r.bytes
        );
    }
    println!();
    for case in all {
        println!("  {:<16} {}", case.name(), case.what());
    }
    println!(
        "  (ns per call are batch means; a stall is a batch >= {} ns slower than the median batch)",
        stats::STALL_NS
    );
}

fn find<'a>(all: &[Box<dyn Case>], summaries: &'a [Summary], name: &str) -> Option<&'a Summary> {
    all.iter()
        .position(|c| c.name() == name)
        .map(|i| &summaries[i])
}

/// The issue's timing targets, as measured in this run. Informational: a noisy
/// machine moves them, so they never fail the run (callgrind gives the stable figure).
fn print_targets(all: &[Box<dyn Case>], summaries: &[Summary]) {
    println!();
    if let Some(gov1) = find(all, summaries, "gov1") {
        let get = |n: &str| find(all, summaries, n).map(|s| s.median);
        print_stages("median ns", &get, gov1.median);
        println!();
    }
    if let (Some(e), Some(g)) = (
        find(all, summaries, "charge4"),
        find(all, summaries, "gov4"),
    ) {
        println!(
            "target: 4-part charge median {:.1} ns vs four governor checks {:.1} ns: ratio {:.2} ({})",
            e.median,
            g.median,
            e.median / g.median,
            if e.median < g.median { "met" } else { "missed" }
        );
    }
    if let (Some(e), Some(g)) = (find(all, summaries, "shape4"), find(all, summaries, "gov4")) {
        println!(
            "target: 4-part Shape median {:.1} ns vs four governor checks {:.1} ns: ratio {:.2} ({})",
            e.median,
            g.median,
            e.median / g.median,
            if e.median < g.median { "met" } else { "missed" }
        );
    }
    if let (Some(e), Some(g)) = (
        find(all, summaries, "charge4_clock"),
        find(all, summaries, "gov4_clock"),
    ) {
        println!(
            "        with a clock read per call: {:.1} ns vs {:.1} ns: ratio {:.2}",
            e.median,
            g.median,
            e.median / g.median
        );
    }
    if let (Some(t), Some(s)) = (
        find(all, summaries, "idle_tick"),
        find(all, summaries, "charge4"),
    ) {
        let ratio = t.slowest_batch_ns as f64 / s.median_batch_ns as f64;
        println!(
            "target: with tick, slowest batch after idle {} ns vs steady median batch {} ns: {:.2}x ({}); p99.9 batch {:.2}x",
            t.slowest_batch_ns,
            s.median_batch_ns,
            ratio,
            if ratio <= 2.0 { "met" } else { "missed" },
            t.p999 / s.median
        );
        println!(
            "        (the steady case's own slowest batch is {:.2}x its median: what a quiet CPU removes)",
            s.slowest_batch_ns as f64 / s.median_batch_ns as f64
        );
    }
    if let (Some(w), Some(s)) = (
        find(all, summaries, "idle_walk"),
        find(all, summaries, "charge4"),
    ) {
        println!(
            "        without tick: median batch after idle {} ns ({:.2}x steady), slowest {} ns",
            w.median_batch_ns,
            w.median_batch_ns as f64 / s.median_batch_ns as f64,
            w.slowest_batch_ns
        );
    }
}

fn json_line(case: &dyn Case, r: &Record, s: &Summary, m: &Machine) -> String {
    format!(
        concat!(
            "{{\"case\":{},\"what\":{},\"cpu\":{},\"isolated\":{},\"nohz_full\":{},\"verdict\":{},",
            "\"batches\":{},\"batch\":{},\"ns_min\":{:.3},\"ns_median\":{:.3},\"ns_mean\":{:.3},",
            "\"ns_p99\":{:.3},\"ns_p999\":{:.3},\"ns_slowest\":{:.3},\"median_batch_ns\":{},",
            "\"slowest_batch_ns\":{},\"stalls\":{},\"stalls_10us\":{},\"stalls_100us\":{},",
            "\"worst_stall_ns\":{},\"stall_share\":{:.6},\"involuntary_switches\":{},",
            "\"allocs\":{},\"alloc_bytes\":{},\"refused\":{}}}"
        ),
        json_str(case.name()),
        json_str(case.what()),
        m.cpu,
        tri_json(m.iso.isolated),
        tri_json(m.iso.nohz_full),
        json_str(&m.verdict),
        s.batches,
        s.batch,
        s.min,
        s.median,
        s.mean,
        s.p99,
        s.p999,
        s.max,
        s.median_batch_ns,
        s.slowest_batch_ns,
        s.stalls,
        s.stalls_10us,
        s.stalls_100us,
        s.worst_stall_ns,
        s.stall_share,
        r.switches,
        r.allocs,
        r.bytes,
        r.refused
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A case that allocates on its "send path": what --strict exists to catch.
    struct Allocating;

    impl Case for Allocating {
        fn name(&self) -> &'static str {
            "allocating"
        }
        fn what(&self) -> &'static str {
            "a Vec per call"
        }
        fn expect(&self) -> Expect {
            Expect::Nothing
        }
        fn prepare(&mut self) {
            // Allocations outside the timed loop are not counted against it.
            black_box(vec![0u8; 64]);
        }
        fn timed_calls(&mut self, n: usize) -> u64 {
            for _ in 0..n {
                black_box(Vec::<u8>::with_capacity(24));
            }
            0
        }
    }

    #[test]
    fn allocations_in_timed_loops_are_counted_and_only_there() {
        let clock = TscClock::new();
        let mut all: Vec<Box<dyn Case>> = cases::all(&clock);
        // The decision-to-wire path too: prepare, sign, submit, encode, write.
        all.extend(wire::all());
        all.extend(wire_ws::all());
        all.push(Box::new(Allocating));
        let records = run(&mut all, &clock, 50, 8);
        for (case, r) in all.iter().zip(&records) {
            if case.name() == "allocating" {
                assert_eq!((r.allocs, r.bytes), (50 * 8, 50 * 8 * 24));
            } else {
                assert_eq!((r.allocs, r.bytes), (0, 0), "{}", case.name());
            }
            assert_eq!(r.batch_ns.len(), 50);
        }
    }

    #[test]
    fn arguments_are_checked() {
        let args = |s: &str| -> Vec<String> { s.split_whitespace().map(String::from).collect() };
        let a = parse(&args(
            "--samples 10 --batch 8 --cpu 1 --json --strict --case charge4",
        ))
        .unwrap();
        assert_eq!(
            (a.samples, a.batch, a.cpu, a.json, a.strict),
            (10, 8, Some(1), true, true)
        );
        assert_eq!(a.case.as_deref(), Some("charge4"));
        assert!(parse(&args("--batch 100")).is_err());
        assert!(parse(&args("--batch 0")).is_err());
        assert!(parse(&args("--samples 0")).is_err());
        assert!(parse(&args("--samples x")).is_err());
        assert!(parse(&args("--icount 10")).is_err());
        assert!(parse(&args("--frobnicate")).is_err());
        assert!(parse(&args("--cpu")).is_err());
    }

    #[test]
    fn callgrinds_summary_is_read() {
        let stderr = "==12== Events    : Ir\n==12== Collected : 30720000\n==12==\n==12== I   refs:      31,000,000\n";
        assert_eq!(collected(stderr), Some(30_720_000));
        assert_eq!(collected("==12== I   refs: 5\n"), None);
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_str("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }
}
