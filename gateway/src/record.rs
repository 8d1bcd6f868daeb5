//! Recording what a budget saw as an `ergon-replay` trace, off the send path.
//!
//! The loop thread turns each budget call into a fixed-size [`Record`] (`Copy`, no
//! heap) and pushes it into a preallocated lock-free ring ([`ergon_io::boundary::ring`])
//! with [`Recorder::push`]: one CAS and a store, no allocation, no lock, no syscall.
//! A full ring drops the record and counts the drop ([`Recorder::dropped`]); it never
//! waits. A writer thread ([`start`]) drains the ring, formats each record as one
//! JSON line of the replay format (bucket declarations first, then events) and writes
//! it to the file; [`Writer::finish`] drains what is left, flushes and says how many
//! lines were written and how many records were dropped.
//!
//! A trace with drops is still a valid trace, but it is not the traffic: a dropped
//! charge makes its refund, sent and complete lines refer to an unknown id, which the
//! replay ignores and counts. Size the ring for the longest burst the writer can lag.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufWriter};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use ergon_core::{Budget, Class, Kind as SpecKind, Spec, MAX_PARTS};

use ergon_io::boundary::ring::{bounded, CapacityError, Consumer, Producer};

/// What a [`Record`] says happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A charge asked (admitted or not: the replay decides again).
    Charge,
    /// The charge's request never left.
    Refund,
    /// Its first byte left.
    Sent,
    /// Its answer arrived (or it failed after a byte left).
    Complete,
    /// The venue throttled a bucket (`value`: its wait in ns, or -1).
    Throttled,
    /// The venue banned a bucket (`value`: its wait in ns, or -1).
    Banned,
    /// A person cleared a bucket's halt.
    ClearHalt,
    /// A usage header (`value`: the venue's count; `counted`: its stamp, if any).
    Observe,
    /// A fixed window re-anchored to the venue clock (`value`: its phase in ns).
    Phase,
}

/// One budget call, fixed size: what the loop thread pushes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// When, in the loop's nanoseconds.
    pub t: i64,
    /// What.
    pub kind: Kind,
    /// The charge's id (charge, refund, sent, complete).
    pub id: u64,
    /// The charge's class.
    pub class: Class,
    /// The bucket (by index in the budget) of a throttle, ban, clear or observe.
    pub bucket: u8,
    /// The charge's label, by index in the writer's label table (none if out of it).
    pub label: u8,
    /// How many of `parts` are used.
    pub n_parts: u8,
    /// The charge's `(bucket index, cost)` parts.
    pub parts: [(u8, u32); MAX_PARTS],
    /// A throttle's or ban's wait (ns, negative: none), an observed count, a phase,
    /// or a charge's live decision (0: not said; [`Record::live`]).
    pub value: i64,
    /// An observed figure's venue stamp on the loop's clock ([`NO_STAMP`]: none).
    pub counted: i64,
}

/// A `counted` that says the figure had no stamp.
pub const NO_STAMP: i64 = i64::MIN;

/// The ring [`crate::Gateway::record_to`] uses: 65,536 records (about
/// 7 MB), seconds of a busy loop's calls if the writer stalls.
pub const RING: usize = 1 << 16;

/// A charge's `value` when the live budget admitted it (see [`Record::live`]).
const LIVE_ADMITTED: i64 = 1;
/// A charge's `value` when the live budget refused it.
const LIVE_REFUSED: i64 = 2;

/// A label index that names no label: the charge line has no `"label"`.
pub const NO_LABEL: u8 = u8::MAX;

impl Record {
    const EMPTY: Record = Record {
        t: 0,
        kind: Kind::Sent,
        id: 0,
        class: Class::Normal,
        bucket: 0,
        label: NO_LABEL,
        n_parts: 0,
        parts: [(0, 0); MAX_PARTS],
        value: -1,
        counted: NO_STAMP,
    };

    /// A charge of `parts` (bucket index, cost; at most [`MAX_PARTS`], the rest is
    /// cut) at `class`, under `id`, with label `label` ([`NO_LABEL`]: none).
    pub fn charge(t: i64, id: u64, class: Class, label: u8, parts: &[(u8, u32)]) -> Record {
        let mut r = Record {
            t,
            kind: Kind::Charge,
            id,
            class,
            label,
            ..Record::EMPTY
        };
        let n = parts.len().min(MAX_PARTS);
        r.parts[..n].copy_from_slice(&parts[..n]);
        r.n_parts = n as u8;
        r
    }

    /// A charge record that says what the live budget decided: written as
    /// `"live":true|false` (the replay decides again and ignores it).
    pub fn live(mut self, admitted: bool) -> Record {
        self.value = if admitted {
            LIVE_ADMITTED
        } else {
            LIVE_REFUSED
        };
        self
    }

    /// A refund, sent or complete of charge `id`.
    pub fn lifecycle(t: i64, kind: Kind, id: u64) -> Record {
        Record {
            t,
            kind,
            id,
            ..Record::EMPTY
        }
    }

    /// A usage figure `used` for `bucket` (by index), stamped by the venue at
    /// `counted` on the loop's clock, or unstamped: written as
    /// `"observe":B,"used":N[,"counted":T]`.
    pub fn observe(t: i64, bucket: u8, used: i64, counted: Option<i64>) -> Record {
        Record {
            counted: counted.unwrap_or(NO_STAMP),
            ..Record::bucket(t, Kind::Observe, bucket, used)
        }
    }

    /// A throttle, ban, clear_halt or observe of `bucket` (by index), with its wait
    /// in ns (negative: none) or its observed count in `value`.
    pub fn bucket(t: i64, kind: Kind, bucket: u8, value: i64) -> Record {
        Record {
            t,
            kind,
            bucket,
            value,
            ..Record::EMPTY
        }
    }
}

/// The loop thread's end: pushes records, never blocks, never allocates.
#[derive(Debug, Clone)]
pub struct Recorder {
    ring: Producer<Record>,
    dropped: Arc<AtomicU64>,
}

impl Recorder {
    /// Queues `r` for the writer; a full ring drops it and counts the drop.
    #[inline]
    pub fn push(&self, r: Record) {
        if self.ring.push(r).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Records dropped so far because the ring was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// What a trace declares: its buckets (names and declaration lines) and its labels.
#[derive(Clone, Debug, Default)]
pub struct Declarations {
    /// Bucket names by index in the budget, as the events name them.
    pub names: Vec<String>,
    /// One JSON declaration line per bucket (`{"bucket":..,"kind":..}`), written first.
    pub lines: Vec<String>,
    /// Labels by index (at most 255), as [`Record::label`] names them.
    pub labels: Vec<String>,
}

impl Declarations {
    /// Every bucket of `budget`, declared as it was built, and no labels.
    ///
    /// Times are written in milliseconds, exactly (a decimal down to the
    /// nanosecond where needed), so the replay's windows are the live ones. A
    /// bucket's cap on server waits ([`Spec::max_wait`]) has no field and is left at
    /// its default.
    pub fn of(budget: &Budget) -> Declarations {
        let mut d = Declarations::default();
        for id in budget.ids() {
            let (Ok(name), Ok(spec)) = (budget.name(id), budget.spec(id)) else {
                continue;
            };
            d.lines.push(declaration(&quote(name), &spec));
            d.names.push(name.to_string());
        }
        d
    }
}

fn declaration(name: &str, spec: &Spec) -> String {
    let mut s = format!("{{\"bucket\":{name},");
    let _ = match spec.kind() {
        SpecKind::Sliding {
            limit,
            window_ns,
            slots,
        } => write!(
            s,
            "\"kind\":\"sliding\",\"limit\":{limit},\"window_ms\":{},\"slots\":{slots}",
            Ms(window_ns)
        ),
        SpecKind::Fixed {
            limit,
            window_ns,
            phase_ns,
            guard_ns,
        } => write!(
            s,
            "\"kind\":\"fixed\",\"limit\":{limit},\"window_ms\":{},\"phase_ms\":{},\"guard_ms\":{}",
            Ms(window_ns),
            Ms(phase_ns.rem_euclid(window_ns.max(1))),
            Ms(guard_ns)
        ),
        SpecKind::Token { interval_ns, burst } => write!(
            s,
            "\"kind\":\"token\",\"interval_ms\":{},\"burst\":{burst}",
            interval_ms(interval_ns)
        ),
        SpecKind::InFlight { limit } => write!(s, "\"kind\":\"inflight\",\"limit\":{limit}"),
        SpecKind::Gate => write!(s, "\"kind\":\"gate\""),
    };
    let [normal, bulk] = spec.class_headroom();
    if normal != 0 || bulk != 0 {
        let _ = write!(s, ",\"headroom\":{{\"normal\":{normal},\"bulk\":{bulk}}}");
    }
    s.push('}');
    s
}

/// An interval in milliseconds that the replay reads back (times 10^6, rounded up)
/// as exactly `ns`.
fn interval_ms(ns: i64) -> f64 {
    let ms = ns as f64 / 1e6;
    if (ms * 1e6).ceil() as i64 == ns {
        ms
    } else {
        (ns as f64 - 0.5) / 1e6
    }
}

/// What [`Writer::finish`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    /// Event lines written (declarations not counted).
    pub events: u64,
    /// Records dropped on a full ring.
    pub dropped: u64,
}

/// The writer thread's handle.
#[derive(Debug)]
pub struct Writer {
    stop: Arc<AtomicBool>,
    dropped: Arc<AtomicU64>,
    thread: Option<JoinHandle<io::Result<u64>>>,
}

impl Written {
    /// A line for the operator when records were dropped (None: the trace is whole).
    pub fn warning(&self) -> Option<String> {
        (self.dropped > 0).then(|| {
            format!(
                "warning: {} records dropped on a full ring: the trace is incomplete",
                self.dropped
            )
        })
    }
}

impl Writer {
    /// Stops the writer after it drained the ring, flushes the file and reports.
    pub fn finish(mut self) -> io::Result<Written> {
        self.stop.store(true, Ordering::Release);
        let events = match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r?,
            Some(Err(_)) => return Err(io::Error::other("the trace writer panicked")),
            None => 0,
        };
        Ok(Written {
            events,
            dropped: self.dropped.load(Ordering::Relaxed),
        })
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Opens `path` and starts the writer thread on a ring of `capacity` records (a power
/// of two). The declarations are written before any event.
pub fn start(path: &Path, decl: Declarations, capacity: usize) -> io::Result<(Recorder, Writer)> {
    let file = File::create(path)?;
    start_to(BufWriter::new(file), decl, capacity)
}

/// As [`start`], into any writer (a test's buffer, a pipe).
pub fn start_to<W: io::Write + Send + 'static>(
    mut out: W,
    decl: Declarations,
    capacity: usize,
) -> io::Result<(Recorder, Writer)> {
    let (tx, mut rx) = bounded::<Record>(capacity)
        .map_err(|e: CapacityError| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    for l in &decl.lines {
        out.write_all(l.as_bytes())?;
        out.write_all(b"\n")?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let dropped = Arc::new(AtomicU64::new(0));
    let names: Vec<String> = decl.names.iter().map(|n| quote(n)).collect();
    let labels: Vec<String> = decl.labels.iter().take(255).map(|n| quote(n)).collect();
    let thread = {
        let stop = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("ergon-record".into())
            .spawn(move || drain(&mut rx, &mut out, &stop, &names, &labels))?
    };
    Ok((
        Recorder {
            ring: tx,
            dropped: Arc::clone(&dropped),
        },
        Writer {
            stop,
            dropped,
            thread: Some(thread),
        },
    ))
}

fn drain<W: io::Write>(
    rx: &mut Consumer<Record>,
    out: &mut W,
    stop: &AtomicBool,
    names: &[String],
    labels: &[String],
) -> io::Result<u64> {
    let mut line = String::with_capacity(256);
    let mut n = 0u64;
    loop {
        // Read the flag first: everything pushed before it was set is popped below.
        let stopping = stop.load(Ordering::Acquire);
        let mut any = false;
        while let Some(r) = rx.pop() {
            any = true;
            line.clear();
            format(&r, names, labels, &mut line);
            out.write_all(line.as_bytes())?;
            n += 1;
        }
        if stopping {
            out.flush()?;
            return Ok(n);
        }
        if !any {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// One record as one replay line (with its newline).
fn format(r: &Record, names: &[String], labels: &[String], s: &mut String) {
    let name = |i: u8| names.get(usize::from(i)).map_or("\"?\"", String::as_str);
    let _ = write!(s, "{{\"t\":{}", r.t);
    let _ = match r.kind {
        Kind::Charge => {
            let class = match r.class {
                Class::Urgent => "urgent",
                Class::Normal => "normal",
                Class::Bulk => "bulk",
            };
            let _ = write!(
                s,
                ",\"charge\":\"{}\",\"class\":\"{class}\",\"parts\":{{",
                r.id
            );
            for (i, (b, c)) in r.parts[..usize::from(r.n_parts)].iter().enumerate() {
                let comma = if i == 0 { "" } else { "," };
                let _ = write!(s, "{comma}{}:{c}", name(*b));
            }
            s.push('}');
            if let Some(l) = labels.get(usize::from(r.label)) {
                let _ = write!(s, ",\"label\":{l}");
            }
            match r.value {
                LIVE_ADMITTED => write!(s, ",\"live\":true"),
                LIVE_REFUSED => write!(s, ",\"live\":false"),
                _ => Ok(()),
            }
        }
        Kind::Refund => write!(s, ",\"refund\":\"{}\"", r.id),
        Kind::Sent => write!(s, ",\"sent\":\"{}\"", r.id),
        Kind::Complete => write!(s, ",\"complete\":\"{}\"", r.id),
        Kind::Throttled | Kind::Banned => {
            let verb = if r.kind == Kind::Banned {
                "banned"
            } else {
                "throttled"
            };
            let _ = write!(s, ",\"{verb}\":{}", name(r.bucket));
            match r.value {
                w if w >= 0 => write!(s, ",\"wait_ms\":{}", Ms(w)),
                _ => Ok(()),
            }
        }
        Kind::ClearHalt => write!(s, ",\"clear_halt\":{}", name(r.bucket)),
        Kind::Phase => write!(
            s,
            ",\"phase\":{},\"phase_ms\":{}",
            name(r.bucket),
            Ms(r.value)
        ),
        Kind::Observe => {
            let _ = write!(
                s,
                ",\"observe\":{},\"used\":{}",
                name(r.bucket),
                r.value.max(0)
            );
            match r.counted {
                NO_STAMP => Ok(()),
                at => write!(s, ",\"counted\":{at}"),
            }
        }
    };
    s.push_str("}\n");
}

/// Nanoseconds written as milliseconds, exactly: `1500000` is `1.5`, `2000000` is
/// `2`, `1` is `0.000001` (the replay reads it back to the nanosecond).
struct Ms(i64);

impl std::fmt::Display for Ms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let ns = self.0.unsigned_abs();
        let (whole, mut frac, mut width) = (ns / 1_000_000, ns % 1_000_000, 6);
        if frac == 0 {
            return write!(f, "{sign}{whole}");
        }
        while frac % 10 == 0 {
            (frac, width) = (frac / 10, width - 1);
        }
        write!(f, "{sign}{whole}.{frac:0width$}")
    }
}

/// `s` as a JSON string literal.
fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(q, "\\u{:04x}", u32::from(c));
            }
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A writer the test reads back after the writer thread finished.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Shared {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| io::Error::other("poisoned"))?
                .extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_full_ring_drops_and_counts_without_waiting() {
        let (ring, mut rx) = bounded::<Record>(8).unwrap();
        let rec = Recorder {
            ring,
            dropped: Arc::new(AtomicU64::new(0)),
        };
        // Nobody drains: the ninth push onwards finds the ring full and returns.
        for i in 0..20 {
            rec.push(Record::lifecycle(i, Kind::Sent, i as u64 + 1));
        }
        assert_eq!(rec.dropped(), 12);
        let kept: Vec<u64> = std::iter::from_fn(|| rx.pop()).map(|r| r.id).collect();
        assert_eq!(
            kept,
            (1..=8).collect::<Vec<_>>(),
            "the first eight, in order"
        );
        // Room again: pushes go through and the count stays.
        rec.push(Record::lifecycle(30, Kind::Sent, 31));
        assert_eq!(rx.pop().map(|r| r.id), Some(31));
        assert_eq!(rec.dropped(), 12);
    }

    #[test]
    fn records_become_replay_lines_declarations_first() {
        let mut b = Budget::builder();
        let w = b
            .add(
                "weight",
                Spec::sliding(1200, 60_000_000_000, 60).headroom(100, 400),
            )
            .unwrap();
        let o = b
            .add(
                "orders \"10s\"",
                Spec::fixed(50, 10_000_000_000)
                    .phase(1_400_000)
                    .guard(20_000_000),
            )
            .unwrap();
        b.add("rate", Spec::token(3, 5)).unwrap();
        b.add("ip", Spec::gate()).unwrap();
        let budget = b.build(0).unwrap();
        let mut decl = Declarations::of(&budget);
        decl.labels = vec!["trade:order".into()];
        let out = Shared::default();
        let (rec, writer) = start_to(out.clone(), decl, 16).unwrap();
        let (w, o) = (w.index() as u8, o.index() as u8);
        rec.push(Record::charge(5, 1, Class::Urgent, 0, &[(w, 1), (o, 1)]));
        rec.push(Record::lifecycle(6, Kind::Sent, 1));
        rec.push(Record::bucket(7, Kind::Throttled, w, 1_500_000));
        rec.push(Record::bucket(7, Kind::Banned, o, -1));
        rec.push(Record::lifecycle(8, Kind::Complete, 1));
        rec.push(Record::charge(9, 2, Class::Bulk, NO_LABEL, &[(w, 2)]).live(false));
        rec.push(Record::lifecycle(9, Kind::Refund, 2));
        rec.push(Record::bucket(10, Kind::ClearHalt, o, 0));
        rec.push(Record::bucket(11, Kind::Observe, w, 17));
        rec.push(Record::observe(11, w, 18, Some(9)));
        rec.push(Record::bucket(12, Kind::Phase, o, 250_000_001));
        let written = writer.finish().unwrap();
        assert_eq!(
            written,
            Written {
                events: 11,
                dropped: 0
            }
        );
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                r#"{"bucket":"weight","kind":"sliding","limit":1200,"window_ms":60000,"slots":60,"headroom":{"normal":100,"bulk":400}}"#,
                r#"{"bucket":"orders \"10s\"","kind":"fixed","limit":50,"window_ms":10000,"phase_ms":1.4,"guard_ms":20}"#,
                r#"{"bucket":"rate","kind":"token","interval_ms":333.333334,"burst":5}"#,
                r#"{"bucket":"ip","kind":"gate"}"#,
                r#"{"t":5,"charge":"1","class":"urgent","parts":{"weight":1,"orders \"10s\"":1},"label":"trade:order"}"#,
                r#"{"t":6,"sent":"1"}"#,
                r#"{"t":7,"throttled":"weight","wait_ms":1.5}"#,
                r#"{"t":7,"banned":"orders \"10s\""}"#,
                r#"{"t":8,"complete":"1"}"#,
                r#"{"t":9,"charge":"2","class":"bulk","parts":{"weight":2},"live":false}"#,
                r#"{"t":9,"refund":"2"}"#,
                r#"{"t":10,"clear_halt":"orders \"10s\""}"#,
                r#"{"t":11,"observe":"weight","used":17}"#,
                r#"{"t":11,"observe":"weight","used":18,"counted":9}"#,
                r#"{"t":12,"phase":"orders \"10s\"","phase_ms":250.000001}"#,
            ]
        );
    }

    #[test]
    fn a_ring_that_is_no_power_of_two_is_an_error() {
        let e = start_to(Shared::default(), Declarations::default(), 12).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}

/// The loop thread's cost of one record: `cargo test --release -p ergon-io --lib
/// record::cost -- --nocapture --ignored` prints it (a timing, so not run by default).
#[cfg(test)]
mod cost {
    use super::*;

    const N: u64 = 1 << 18;

    fn pushes(rec: &Recorder) -> f64 {
        let parts = [(0u8, 1u32), (1, 1), (2, 0)];
        let t0 = std::time::Instant::now();
        for i in 0..N {
            rec.push(Record::charge(i as i64, i, Class::Normal, NO_LABEL, &parts));
        }
        t0.elapsed().as_nanos() as f64 / N as f64
    }

    #[test]
    #[ignore = "a timing: run it on purpose, with --nocapture"]
    fn ns_per_push() {
        // A ring with room for all: the push alone, no drops.
        let (ring, _rx) = bounded::<Record>(N as usize).unwrap();
        let rec = Recorder {
            ring,
            dropped: Arc::new(AtomicU64::new(0)),
        };
        let ns = pushes(&rec);
        println!("{ns:.1} ns per recorded charge, ring with room ({N} pushes)");
        assert_eq!(rec.dropped(), 0);
        // Back to back against the writer thread: the worst case, the ring fills.
        let (rec, writer) = start_to(io::sink(), Declarations::default(), 1 << 16).unwrap();
        let ns = pushes(&rec);
        let w = writer.finish().unwrap();
        println!(
            "{ns:.1} ns per recorded charge, back to back while the writer drains \
             ({N} pushes, {} dropped)",
            w.dropped
        );
        assert_eq!(w.events + w.dropped, N, "every record written or counted");
    }
}
