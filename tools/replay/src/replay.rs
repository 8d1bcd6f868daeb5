//! Drives a [`Budget`] through a parsed trace and writes what it decided.

use std::collections::HashMap;
use std::fmt;
use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use ergon_core::{BucketId, Budget, Builder, Flight, ForeignId, Part, Ticket, Why};
use serde_json::{json, Map, Value};

use crate::timeline::{Seen, Timeline};
use crate::trace::{parse, Declaration, Event, Line};

/// Why a replay stopped.
#[derive(Debug)]
pub enum ReplayError {
    /// A line of the trace is wrong; nothing after it was processed.
    Line {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// Reading the trace or writing the output failed.
    Io(std::io::Error),
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayError::Line { line, message } => write!(f, "line {line}: {message}"),
            ReplayError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ReplayError {}

impl From<std::io::Error> for ReplayError {
    fn from(e: std::io::Error) -> Self {
        ReplayError::Io(e)
    }
}

/// Where one charge of the trace stands.
enum Charge {
    Admitted(Ticket),
    InFlight(Flight),
    Refused,
    Ended,
}

/// Counts of lifecycle events that named a refused charge.
#[derive(Default)]
struct Ignored {
    refund: u64,
    sent: u64,
    complete: u64,
}

enum Phase {
    Declaring(Box<Builder>),
    Running(Box<Budget>),
}

/// How to replay, besides the trace.
#[derive(Debug, Default)]
pub struct Options {
    /// Declarations that replace the trace's own (`--config FILE`); the trace's
    /// declaration lines are then parsed but not used.
    pub config: Option<Vec<Declaration>>,
    /// A second set of declarations replayed on the same events, for the picture only
    /// (`--compare FILE`); its decisions are not written.
    pub compare: Option<Vec<Declaration>>,
    /// Keep a [`Timeline`] of what each budget did, for `--plot`.
    pub timeline: bool,
    /// Once the replay has run this long (wall clock), print a progress line on
    /// stderr with the lines per second, then one a second, and a last one at the end.
    pub progress_after: Option<Duration>,
}

/// What a replay keeps besides its output lines.
#[derive(Debug, Default)]
pub struct Replayed {
    /// The budget's history, if [`Options::timeline`] asked for it.
    pub timeline: Option<Timeline>,
    /// The same for the `--compare` declarations.
    pub compare: Option<Timeline>,
}

struct Replay {
    phase: Phase,
    /// Declarations given up front (`--config`, `--compare`): the trace's are skipped.
    fixed: bool,
    declared: Vec<Declaration>,
    last_t: Option<i64>,
    charges: HashMap<String, Charge>,
    ok: u64,
    refused: u64,
    ignored: Ignored,
    timeline: Option<Timeline>,
}

/// Replays `input` and writes the decisions to `out`, flushing after each line.
pub fn run(input: impl BufRead, out: impl Write) -> Result<(), ReplayError> {
    run_with(input, out, Options::default()).map(|_| ())
}

/// [`run`] with [`Options`]: other declarations, a comparison, a timeline, progress.
/// The output lines are the same as [`run`]'s for the same declarations.
pub fn run_with(
    input: impl BufRead,
    mut out: impl Write,
    options: Options,
) -> Result<Replayed, ReplayError> {
    let keep = options.timeline;
    let mut replay = Replay::new(options.config, keep)?;
    let mut compare = options
        .compare
        .map(|decls| Replay::new(Some(decls), keep))
        .transpose()?;
    let mut progress = options.progress_after.map(Progress::new);
    for (index, text) in input.lines().enumerate() {
        let text = text?;
        let line = index + 1;
        if let Some(p) = &mut progress {
            p.line(line);
        }
        if text.trim().is_empty() {
            continue;
        }
        let fail = |message: String| ReplayError::Line { line, message };
        let parsed = parse(&text).map_err(fail)?;
        let other = compare.as_ref().map(|_| parsed.clone());
        let output = replay.apply(parsed).map_err(fail)?;
        // The comparison's error wins over this line's output: nothing of a bad line
        // is written.
        if let (Some(compare), Some(parsed)) = (&mut compare, other) {
            compare
                .apply(parsed)
                .map_err(|m| fail(format!("with the --compare declarations: {m}")))?;
        }
        if let Some(output) = output {
            writeln!(out, "{output}")?;
        }
    }
    let summary = replay
        .summary()
        .map_err(|message| ReplayError::Line { line: 0, message })?;
    writeln!(out, "{summary}")?;
    out.flush()?;
    if let Some(p) = progress {
        p.end();
    }
    Ok(Replayed {
        timeline: replay.timeline,
        compare: compare.and_then(|c| c.timeline),
    })
}

/// Progress on stderr for long replays: wall-clock time, read only every 1024 lines.
struct Progress {
    start: Instant,
    next: Duration,
    lines: usize,
    printed: bool,
}

impl Progress {
    fn new(after: Duration) -> Self {
        Progress {
            start: Instant::now(),
            next: after,
            lines: 0,
            printed: false,
        }
    }

    fn line(&mut self, line: usize) {
        self.lines = line;
        if line % 1024 != 0 {
            return;
        }
        let elapsed = self.start.elapsed();
        if elapsed >= self.next {
            eprintln!("ergon-replay: line {line}, {} lines/s", rate(line, elapsed));
            self.printed = true;
            self.next = elapsed + Duration::from_secs(1);
        }
    }

    fn end(self) {
        if self.printed {
            let elapsed = self.start.elapsed();
            eprintln!(
                "ergon-replay: {} lines in {:.1} s, {} lines/s",
                self.lines,
                elapsed.as_secs_f64(),
                rate(self.lines, elapsed)
            );
        }
    }
}

fn rate(lines: usize, elapsed: Duration) -> u64 {
    (lines as f64 / elapsed.as_secs_f64().max(1e-9)) as u64
}

/// The budget, built from the declarations at the first event's time.
fn running(phase: &mut Phase, t: i64) -> Result<&mut Budget, String> {
    if let Phase::Declaring(builder) = phase {
        let budget = std::mem::take(builder)
            .build(t)
            .map_err(|e| format!("the declarations make no budget: {e}"))?;
        *phase = Phase::Running(Box::new(budget));
    }
    match phase {
        Phase::Running(budget) => Ok(budget),
        Phase::Declaring(_) => unreachable!("built above"),
    }
}

impl Replay {
    /// A replay of the trace's own declarations, or of `declarations` if given
    /// (already checked by [`crate::config::read`]).
    fn new(declarations: Option<Vec<Declaration>>, timeline: bool) -> Result<Self, ReplayError> {
        let mut builder = Budget::builder();
        let fixed = declarations.is_some();
        let declared = declarations.unwrap_or_default();
        for d in &declared {
            builder
                .add(&d.name, d.spec)
                .map_err(|e| ReplayError::Line {
                    line: 0,
                    message: format!("bucket {:?}: {e}", d.name),
                })?;
        }
        Ok(Replay {
            phase: Phase::Declaring(Box::new(builder)),
            fixed,
            declared,
            last_t: None,
            charges: HashMap::new(),
            ok: 0,
            refused: 0,
            ignored: Ignored::default(),
            timeline: timeline.then(Timeline::default),
        })
    }

    fn apply(&mut self, line: Line) -> Result<Option<Value>, String> {
        match line {
            Line::Declare(d) => {
                let Phase::Declaring(builder) = &mut self.phase else {
                    return Err("declarations must come before the first event".into());
                };
                if self.fixed {
                    return Ok(None);
                }
                builder
                    .add(&d.name, d.spec)
                    .map_err(|e| format!("bucket {:?}: {e}", d.name))?;
                self.declared.push(d);
                Ok(None)
            }
            Line::Event { t, event } => {
                if let Some(last) = self.last_t {
                    if t < last {
                        return Err(format!("out of order: t {t} is before {last}"));
                    }
                }
                self.last_t = Some(t);
                self.event(t, event)
            }
        }
    }

    fn event(&mut self, t: i64, event: Event) -> Result<Option<Value>, String> {
        let (output, seen) = self.decide(t, event)?;
        if let (Some(timeline), Phase::Running(budget)) = (&mut self.timeline, &self.phase) {
            timeline.record(t, budget, &self.declared, seen);
        }
        Ok(output)
    }

    fn decide(&mut self, t: i64, event: Event) -> Result<(Option<Value>, Seen), String> {
        let budget = running(&mut self.phase, t)?;
        let id_of = |budget: &Budget, name: &str| {
            budget
                .bucket(name)
                .ok_or_else(|| format!("no bucket named {name:?} was declared"))
        };
        match event {
            Event::Charge {
                id,
                class,
                parts,
                label,
            } => {
                if self.charges.contains_key(&id) {
                    return Err(format!("charge id {id:?} is used twice"));
                }
                let parts = parts
                    .iter()
                    .map(|(name, cost)| Ok(Part::new(id_of(budget, name)?, *cost)))
                    .collect::<Result<Vec<Part>, String>>()?;
                budget
                    .validate_parts(&parts)
                    .map_err(|e| format!("charge {id:?}: {e}"))?;
                let (line, seen) = match budget.try_charge(&parts, class, t) {
                    Ok(ticket) => {
                        self.ok += 1;
                        self.charges.insert(id.clone(), Charge::Admitted(ticket));
                        let line = json!({"id": id, "t": t, "ok": true});
                        (line, Seen::Admitted { id, parts, label })
                    }
                    Err(limited) => {
                        self.refused += 1;
                        self.charges.insert(id.clone(), Charge::Refused);
                        let why = match limited.why {
                            Why::Full => "full",
                            Why::Held => "held",
                            Why::Halted => "halted",
                            Why::TooBig => "too_big",
                            Why::Foreign => "foreign",
                            Why::Receipts => "receipts",
                            Why::Closed => "closed",
                        };
                        let ready_at = match limited.ready_at_ns {
                            i64::MAX => Value::Null,
                            ready => ready.into(),
                        };
                        let line = json!({
                            "id": id, "t": t, "ok": false,
                            "bucket": budget.name(limited.bucket).unwrap_or(""), "why": why, "ready_at": ready_at,
                        });
                        (line, Seen::Refused(limited))
                    }
                };
                return Ok((Some(line), seen));
            }
            Event::Refund(id) => {
                self.lifecycle(&id, t, Lifecycle::Refund)?;
                return Ok((None, Seen::Ended(id)));
            }
            Event::Sent(id) => self.lifecycle(&id, t, Lifecycle::Sent)?,
            Event::Complete(id) => {
                self.lifecycle(&id, t, Lifecycle::Complete)?;
                return Ok((None, Seen::Completed(id)));
            }
            Event::Throttled { bucket, wait_ns } => {
                let b = id_of(budget, &bucket)?;
                budget.throttled(b, wait_ns, t).map_err(own)?;
                return Ok((None, Seen::Throttled(b)));
            }
            Event::Banned { bucket, wait_ns } => {
                let b = id_of(budget, &bucket)?;
                budget
                    .banned(b, wait_ns.map_or(t, |w| t.saturating_add(w)), t)
                    .map_err(own)?;
                return Ok((None, Seen::Banned(b)));
            }
            Event::ClearHalt(bucket) => {
                let b = id_of(budget, &bucket)?;
                budget.clear_halt(b).map_err(own)?;
            }
            Event::Observe {
                bucket,
                used,
                counted,
            } => {
                let b = id_of(budget, &bucket)?;
                match counted {
                    Some(at) => budget.observe_used_at(b, used, at, t),
                    None => budget.observe_used(b, used, t),
                }
                .map_err(own)?;
            }
            Event::Phase { bucket, phase_ns } => {
                let b = id_of(budget, &bucket)?;
                budget.set_phase(b, phase_ns, t).map_err(own)?;
            }
            Event::Extra { bucket, cost } => {
                let b = id_of(budget, &bucket)?;
                budget.charge_after(b, cost, t).map_err(own)?;
            }
            Event::Tick => budget.tick(t),
        }
        Ok((None, Seen::Other))
    }

    fn lifecycle(&mut self, id: &str, t: i64, step: Lifecycle) -> Result<(), String> {
        let Some(state) = self.charges.get_mut(id) else {
            return Err(format!(
                "{} names {id:?}, which was never charged",
                step.verb()
            ));
        };
        let Phase::Running(budget) = &mut self.phase else {
            unreachable!("a charge exists, so the budget was built");
        };
        match (std::mem::replace(state, Charge::Ended), step) {
            (Charge::Refused, step) => {
                *state = Charge::Refused;
                match step {
                    Lifecycle::Refund => self.ignored.refund += 1,
                    Lifecycle::Sent => self.ignored.sent += 1,
                    Lifecycle::Complete => self.ignored.complete += 1,
                }
            }
            (Charge::Admitted(ticket), Lifecycle::Refund) => {
                budget.refund(ticket, t).map_err(own)?
            }
            (Charge::Admitted(ticket), Lifecycle::Sent) => *state = Charge::InFlight(ticket.sent()),
            (Charge::InFlight(flight), Lifecycle::Complete) => {
                budget.complete(flight, t).map_err(own)?
            }
            (previous, step) => {
                let why = match (&previous, step) {
                    (Charge::Admitted(_), Lifecycle::Complete) => "it was never sent",
                    (Charge::InFlight(_), Lifecycle::Refund) => {
                        "it was sent, and a sent request is never refunded"
                    }
                    (Charge::InFlight(_), Lifecycle::Sent) => "it was already sent",
                    _ => "it already ended (refunded or completed)",
                };
                *state = previous;
                return Err(format!("{} of {id:?}: {why}", step.verb()));
            }
        }
        Ok(())
    }

    fn summary(&mut self) -> Result<Value, String> {
        let t = self.last_t.unwrap_or(0);
        let budget = running(&mut self.phase, t)?;
        let mut buckets = Map::new();
        for id in budget.ids() {
            let name = budget.name(id).map_err(own)?;
            buckets.insert(name.to_owned(), bucket_summary(budget, id)?);
        }
        Ok(json!({"summary": {
            "charges": self.ok + self.refused,
            "ok": self.ok,
            "refused": self.refused,
            "ignored": {
                "refund": self.ignored.refund,
                "sent": self.ignored.sent,
                "complete": self.ignored.complete,
            },
            "buckets": buckets,
        }}))
    }
}

/// The replay names buckets only by the ids its own budget handed out: an id of
/// another budget would be a bug in the replay itself.
fn own(e: ForeignId) -> String {
    format!("internal error: {e}")
}

fn bucket_summary(budget: &Budget, id: BucketId) -> Result<Value, String> {
    let s = budget.stats(id).map_err(own)?;
    Ok(json!({
        "admitted": s.admitted,
        "refusals": {
            "full": s.refusals.full,
            "held": s.refusals.held,
            "halted": s.refusals.halted,
            "too_big": s.refusals.too_big,
        },
        "refunds": s.refunds,
        "extra": s.charged_after,
        "throttles": s.throttles,
        "bans": s.bans,
    }))
}

#[derive(Clone, Copy)]
enum Lifecycle {
    Refund,
    Sent,
    Complete,
}

impl Lifecycle {
    fn verb(self) -> &'static str {
        match self {
            Lifecycle::Refund => "refund",
            Lifecycle::Sent => "sent",
            Lifecycle::Complete => "complete",
        }
    }
}
