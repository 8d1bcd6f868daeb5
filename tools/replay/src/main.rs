//! `ergon-replay [OPTIONS] [TRACE.jsonl]`: replays a trace (from the file, or stdin)
//! against the budget it declares, or the one `--config` names, and prints one JSON
//! line per charge, then a summary; `--plot` also draws what the budget did.

use std::fs::File;
use std::io::{self, BufReader, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use ergon_replay::plot::{self, Labels};
use ergon_replay::{Declaration, Options, ReplayError};

const USAGE: &str = "\
usage: ergon-replay [OPTIONS] [TRACE.jsonl]   (reads stdin without a file)

Options:
  --config FILE      replay against FILE's declarations (same format as a trace's,
                     declarations only) instead of the trace's own; an event naming
                     a bucket FILE does not declare stops the replay at its line
  --plot OUT         also draw what the budget did: OUT.svg, or OUT.html (the SVG
                     inlined, nothing fetched); one panel per bucket, time across:
                     use against the limit and the Normal and Bulk headroom lines,
                     refusals by reason, holds and halts as bands, the venue's
                     throttles and bans as vertical lines
  --compare FILE     with --plot: replay the same events against FILE's declarations
                     too and draw that use over the first (purple, dashed); its
                     decisions are not printed
  --by-label         with --plot: stack each bucket's use by the charges' \"label\"
  --progress-ms N    print progress (line, lines per second) on stderr once the
                     replay has run N ms of wall-clock time, then every second
                     (default 1000)
  -h, --help         this text

Declarations first (any bucket may add \"headroom\":{\"normal\":N,\"bulk\":M}):
  {\"bucket\":\"weight\",\"kind\":\"sliding\",\"limit\":1200,\"window_ms\":60000,\"slots\":60}
  {\"bucket\":\"orders10s\",\"kind\":\"fixed\",\"limit\":50,\"window_ms\":10000,\"phase_ms\":0,\"guard_ms\":20}
  {\"bucket\":\"smooth\",\"kind\":\"token\",\"rate_per_s\":2.5,\"burst\":40}
      (rate_per_s any positive number, or \"interval_ms\":400 instead: one unit per 400 ms)
  {\"bucket\":\"conc\",\"kind\":\"inflight\",\"limit\":10}
  {\"bucket\":\"ip\",\"kind\":\"gate\"}
Then events in time order, t in integer nanoseconds (class defaults to normal;
label is optional, e.g. \"trade:order\", \"mon:book\", and only used by --by-label;
a recorded charge says what the live budget decided, \"live\":true|false, which the
replay ignores):
  {\"t\":1000,\"charge\":\"r1\",\"class\":\"normal\",\"label\":\"trade:order\",\"parts\":{\"weight\":1,\"orders10s\":1,\"ip\":0}}
  {\"t\":2000,\"refund\":\"r1\"}  {\"t\":2000,\"sent\":\"r1\"}  {\"t\":9000,\"complete\":\"r1\"}
  {\"t\":3000,\"throttled\":\"weight\",\"wait_ms\":5000}   (wait_ms optional)
  {\"t\":3000,\"banned\":\"ip\"}  {\"t\":4000,\"clear_halt\":\"ip\"}
  {\"t\":5000,\"observe\":\"weight\",\"used\":900}  {\"t\":5000,\"extra\":\"weight\",\"cost\":40}  {\"t\":6000,\"tick\":true}
  {\"t\":7000,\"phase\":\"orders10s\",\"phase_ms\":250}   (a fixed window re-anchored)
  {\"t\":8000,\"observe\":\"orders10s\",\"used\":7,\"counted\":7990}   (a figure the venue
  stamped, counted in integer ns on t's clock: Budget::observe_used_at)
  (every *_ms field may be a decimal, read to the nearest nanosecond: 1.000250)
Output: {\"id\":\"r1\",\"t\":1000,\"ok\":true} or
  {\"id\":\"r1\",\"t\":1000,\"ok\":false,\"bucket\":\"weight\",\"why\":\"full\",\"ready_at\":1234}
  (why: full | held | halted | too_big; ready_at null when it never comes by itself),
then {\"summary\":{...}}. A bad line stops the replay: exit status 1, its number on stderr.
Exit status 2: bad arguments, or a file that cannot be opened or written.
";

/// The command line, parsed.
#[derive(Default)]
struct Args {
    trace: Option<String>,
    config: Option<String>,
    plot: Option<String>,
    compare: Option<String>,
    by_label: bool,
    progress_ms: u64,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut parsed = Args {
        progress_ms: 1000,
        ..Args::default()
    };
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| args.next().ok_or(format!("{flag} needs a value"));
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--config" => parsed.config = Some(value("--config")?),
            "--plot" => parsed.plot = Some(value("--plot")?),
            "--compare" => parsed.compare = Some(value("--compare")?),
            "--by-label" => parsed.by_label = true,
            "--progress-ms" => {
                let v = value("--progress-ms")?;
                parsed.progress_ms = v
                    .parse()
                    .map_err(|_| format!("--progress-ms takes milliseconds, not {v:?}"))?;
            }
            flag if flag.starts_with('-') && flag != "-" => {
                return Err(format!("unknown option {flag}"))
            }
            _ if parsed.trace.is_some() => return Err("one trace at most".into()),
            _ => parsed.trace = Some(arg),
        }
    }
    if parsed.plot.is_none() && (parsed.compare.is_some() || parsed.by_label) {
        return Err("--compare and --by-label draw on a --plot".into());
    }
    if let Some(plot) = &parsed.plot {
        if !(plot.ends_with(".svg") || plot.ends_with(".html")) {
            return Err(format!(
                "--plot {plot}: the picture is a .svg or a .html file"
            ));
        }
    }
    Ok(Some(parsed))
}

/// Why the command stopped: its message and exit status.
struct Stop(String, u8);

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(Some(args)) => args,
        Ok(None) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let _ = writeln!(io::stderr(), "ergon-replay: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Stop(message, code)) => {
            eprintln!("ergon-replay: {message}");
            ExitCode::from(code)
        }
    }
}

fn run(args: Args) -> Result<(), Stop> {
    let options = Options {
        config: args.config.as_deref().map(declarations).transpose()?,
        compare: args.compare.as_deref().map(declarations).transpose()?,
        timeline: args.plot.is_some(),
        progress_after: Some(Duration::from_millis(args.progress_ms)),
    };
    // Fail on an unwritable picture before the replay, not after it.
    let picture = match &args.plot {
        Some(path) => Some((
            path,
            File::create(path).map_err(|e| Stop(format!("cannot write {path}: {e}"), 2))?,
        )),
        None => None,
    };
    let stdout = io::stdout().lock();
    let replayed = match &args.trace {
        None => ergon_replay::run_with(io::stdin().lock(), stdout, options),
        Some(path) => {
            let file = open(path)?;
            ergon_replay::run_with(BufReader::new(file), stdout, options)
        }
    };
    let replayed = match replayed {
        Ok(replayed) => replayed,
        Err(e) => {
            if let Some((path, _)) = picture {
                let _ = std::fs::remove_file(path);
            }
            return Err(Stop(e.to_string(), 1));
        }
    };
    let (Some((path, mut file)), Some(timeline)) = (picture, replayed.timeline) else {
        return Ok(());
    };
    let name = |p: &str| {
        Path::new(p)
            .file_name()
            .map_or(p.to_owned(), |n| n.to_string_lossy().into_owned())
    };
    let labels = Labels {
        title: format!(
            "ergon-replay: {}",
            args.trace.as_deref().map_or("stdin".to_owned(), name)
        ),
        primary: args
            .config
            .as_deref()
            .map_or("the trace's declarations".to_owned(), name),
        compare: args.compare.as_deref().map(name),
        by_label: args.by_label,
    };
    let svg = plot::svg(&timeline, replayed.compare.as_ref(), &labels).map_err(|e| Stop(e, 1))?;
    let text = if path.ends_with(".html") {
        plot::html(&svg, &labels.title)
    } else {
        svg
    };
    file.write_all(text.as_bytes())
        .map_err(|e| Stop(format!("cannot write {path}: {e}"), 2))
}

fn open(path: &str) -> Result<File, Stop> {
    File::open(path).map_err(|e| Stop(format!("cannot open {path}: {e}"), 2))
}

/// A `--config` or `--compare` file; its errors name the file and its line.
fn declarations(path: &str) -> Result<Vec<Declaration>, Stop> {
    let file = open(path)?;
    ergon_replay::config::read(BufReader::new(file)).map_err(|e| match e {
        ReplayError::Line { line: 0, message } => Stop(format!("{path}: {message}"), 1),
        ReplayError::Line { .. } => Stop(format!("{path}: {e}"), 1),
        ReplayError::Io(e) => Stop(format!("cannot read {path}: {e}"), 2),
    })
}
