//! The trace format: one JSON object per line, bucket declarations first, then
//! events in time order. Parsing only: a line becomes a [`Line`] or an error that says
//! what is wrong with it. Unknown fields are errors, so a typo never passes silently.

use ergon_core::{Class, Spec};
use serde_json::{Map, Value};

const NS_PER_MS: i64 = 1_000_000;

/// One line of a trace.
#[derive(Clone, Debug, PartialEq)]
pub enum Line {
    /// `{"bucket":NAME,"kind":...}`.
    Declare(Declaration),
    /// An event at `t` nanoseconds.
    Event {
        /// When, in nanoseconds.
        t: i64,
        /// What.
        event: Event,
    },
}

/// One bucket's declaration.
#[derive(Clone, Debug, PartialEq)]
pub struct Declaration {
    /// The bucket's name.
    pub name: String,
    /// Its limit, headroom included.
    pub spec: Spec,
    /// The headroom as written, `[normal, bulk]`: units those classes may not use
    /// (the spec keeps it too; this copy is for pictures of it).
    pub headroom: [u64; 2],
}

/// What happened at one instant of the trace.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A request asked to go out.
    Charge {
        /// The request's id in the trace.
        id: String,
        /// Its class.
        class: Class,
        /// `(bucket name, cost)` in the order written.
        parts: Vec<(String, u32)>,
        /// Who asked (`"label"`, e.g. `trade:order`, `mon:book`), if the trace says.
        label: Option<String>,
    },
    /// The request never left.
    Refund(String),
    /// The request's first byte left.
    Sent(String),
    /// The request's answer arrived.
    Complete(String),
    /// The server throttled a bucket, with its wait if it gave one.
    Throttled {
        /// The bucket.
        bucket: String,
        /// The server's wait.
        wait_ns: Option<i64>,
    },
    /// The server banned a bucket, with its wait if it gave one.
    Banned {
        /// The bucket.
        bucket: String,
        /// The server's wait.
        wait_ns: Option<i64>,
    },
    /// A person cleared a halt.
    ClearHalt(String),
    /// A usage header.
    Observe {
        /// The bucket.
        bucket: String,
        /// The server's count.
        used: u64,
        /// The venue's stamp of the count on the trace's clock (integer ns), if
        /// it had one (`Budget::observe_used_at`).
        counted: Option<i64>,
    },
    /// The venue clock was re-anchored: a fixed window's boundaries move to `phase_ns`
    /// (`Budget::set_phase`).
    Phase {
        /// The bucket.
        bucket: String,
        /// The new phase, in nanoseconds.
        phase_ns: i64,
    },
    /// Cost known only from the response.
    Extra {
        /// The bucket.
        bucket: String,
        /// Units added.
        cost: u32,
    },
    /// Time passes with nothing to send.
    Tick,
}

/// Parses one non-blank line.
pub fn parse(text: &str) -> Result<Line, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(obj) = value else {
        return Err("a line must be a JSON object".into());
    };
    if obj.contains_key("bucket") {
        return declaration(&obj);
    }
    let t = int(&obj, "t")?.ok_or("an event needs \"t\" (integer nanoseconds)")?;
    let event = event(&obj)?;
    Ok(Line::Event { t, event })
}

fn declaration(obj: &Map<String, Value>) -> Result<Line, String> {
    let name = string(obj, "bucket")?;
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .ok_or("a declaration needs \"kind\": sliding, fixed, token, inflight or gate")?;
    let (spec, fields): (Spec, &[&str]) = match kind {
        "sliding" => (
            Spec::sliding(
                need_u64(obj, "limit")?,
                ms(obj, "window_ms")?.ok_or("missing \"window_ms\"")?,
                u32::try_from(need_u64(obj, "slots")?).map_err(|_| "\"slots\" is too large")?,
            ),
            &["limit", "window_ms", "slots"],
        ),
        "fixed" => (
            Spec::fixed(
                need_u64(obj, "limit")?,
                ms(obj, "window_ms")?.ok_or("missing \"window_ms\"")?,
            )
            .phase(ms(obj, "phase_ms")?.unwrap_or(0))
            .guard(ms(obj, "guard_ms")?.unwrap_or(0)),
            &["limit", "window_ms", "phase_ms", "guard_ms"],
        ),
        "token" => (
            Spec::token_every(interval_ns(obj)?, need_u64(obj, "burst")?),
            &["rate_per_s", "interval_ms", "burst"],
        ),
        "inflight" => (Spec::in_flight(need_u64(obj, "limit")?), &["limit"]),
        "gate" => (Spec::gate(), &[]),
        other => {
            return Err(format!(
                "unknown kind {other:?}: sliding, fixed, token, inflight or gate"
            ))
        }
    };
    let mut allowed = vec!["bucket", "kind", "headroom"];
    allowed.extend_from_slice(fields);
    only(obj, &allowed)?;
    let headroom = match obj.get("headroom") {
        None => [0, 0],
        Some(Value::Object(h)) => {
            only(h, &["normal", "bulk"])?;
            [
                u64_field(h, "normal")?.unwrap_or(0),
                u64_field(h, "bulk")?.unwrap_or(0),
            ]
        }
        Some(_) => return Err("\"headroom\" must be an object {\"normal\":N,\"bulk\":M}".into()),
    };
    let spec = match headroom {
        [0, 0] => spec,
        [normal, bulk] => spec.headroom(normal, bulk),
    };
    Ok(Line::Declare(Declaration {
        name,
        spec,
        headroom,
    }))
}

fn event(obj: &Map<String, Value>) -> Result<Event, String> {
    let verbs = [
        "charge",
        "refund",
        "sent",
        "complete",
        "throttled",
        "banned",
        "clear_halt",
        "observe",
        "phase",
        "extra",
        "tick",
    ];
    let mut present = verbs.iter().filter(|v| obj.contains_key(**v));
    let verb = match (present.next(), present.next()) {
        (Some(v), None) => *v,
        (None, _) => return Err(format!("an event needs one of {}", verbs.join(", "))),
        (Some(a), Some(b)) => return Err(format!("one event per line: both {a:?} and {b:?}")),
    };
    let (event, fields): (Event, &[&str]) = match verb {
        "charge" => (charge(obj)?, &["class", "parts", "label", "live"]),
        "refund" => (Event::Refund(string(obj, verb)?), &[]),
        "sent" => (Event::Sent(string(obj, verb)?), &[]),
        "complete" => (Event::Complete(string(obj, verb)?), &[]),
        "throttled" => (
            Event::Throttled {
                bucket: string(obj, verb)?,
                wait_ns: ms(obj, "wait_ms")?,
            },
            &["wait_ms"],
        ),
        "banned" => (
            Event::Banned {
                bucket: string(obj, verb)?,
                wait_ns: ms(obj, "wait_ms")?,
            },
            &["wait_ms"],
        ),
        "clear_halt" => (Event::ClearHalt(string(obj, verb)?), &[]),
        "observe" => (
            Event::Observe {
                bucket: string(obj, verb)?,
                used: need_u64(obj, "used")?,
                counted: int(obj, "counted")?,
            },
            &["used", "counted"],
        ),
        "phase" => (
            Event::Phase {
                bucket: string(obj, verb)?,
                phase_ns: ms(obj, "phase_ms")?.ok_or("a phase needs \"phase_ms\"")?,
            },
            &["phase_ms"],
        ),
        "extra" => (
            Event::Extra {
                bucket: string(obj, verb)?,
                cost: cost(obj.get("cost"), "cost")?,
            },
            &["cost"],
        ),
        _ => {
            if obj.get("tick") != Some(&Value::Bool(true)) {
                return Err("\"tick\" must be true".into());
            }
            (Event::Tick, &[])
        }
    };
    let mut allowed = vec!["t", verb];
    allowed.extend_from_slice(fields);
    only(obj, &allowed)?;
    Ok(event)
}

fn charge(obj: &Map<String, Value>) -> Result<Event, String> {
    let id = string(obj, "charge")?;
    // What a recording budget decided: for the reader, not the replay.
    if obj.get("live").is_some_and(|v| !v.is_boolean()) {
        return Err("\"live\" must be true or false".into());
    }
    let class = match obj.get("class") {
        None => Class::Normal,
        Some(Value::String(c)) => match c.as_str() {
            "urgent" => Class::Urgent,
            "normal" => Class::Normal,
            "bulk" => Class::Bulk,
            other => return Err(format!("unknown class {other:?}: urgent, normal or bulk")),
        },
        Some(_) => return Err("\"class\" must be a string: urgent, normal or bulk".into()),
    };
    let Some(Value::Object(parts)) = obj.get("parts") else {
        return Err("a charge needs \"parts\": {\"bucket\": cost, ...}".into());
    };
    let parts = parts
        .iter()
        .map(|(name, c)| Ok((name.clone(), cost(Some(c), name)?)))
        .collect::<Result<Vec<_>, String>>()?;
    let label = match obj.get("label") {
        None => None,
        Some(_) => Some(string(obj, "label")?),
    };
    Ok(Event::Charge {
        id,
        class,
        parts,
        label,
    })
}

fn only(obj: &Map<String, Value>, allowed: &[&str]) -> Result<(), String> {
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!("unknown field {k:?}")),
        None => Ok(()),
    }
}

fn string(obj: &Map<String, Value>, key: &str) -> Result<String, String> {
    match obj.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(format!("\"{key}\" must be a non-empty string")),
    }
}

fn int(obj: &Map<String, Value>, key: &str) -> Result<Option<i64>, String> {
    match obj.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| format!("\"{key}\" must be an integer")),
    }
}

fn u64_field(obj: &Map<String, Value>, key: &str) -> Result<Option<u64>, String> {
    match obj.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("\"{key}\" must be a non-negative integer")),
    }
}

fn need_u64(obj: &Map<String, Value>, key: &str) -> Result<u64, String> {
    u64_field(obj, key)?.ok_or_else(|| format!("missing \"{key}\""))
}

/// A time in milliseconds: an integer, or a decimal read to the nearest nanosecond
/// (a recorded trace writes phases and waits exactly, e.g. `1234.000567`).
fn ms(obj: &Map<String, Value>, key: &str) -> Result<Option<i64>, String> {
    let Some(v) = obj.get(key) else {
        return Ok(None);
    };
    if let Some(whole) = v.as_i64() {
        return whole
            .checked_mul(NS_PER_MS)
            .map(Some)
            .ok_or_else(|| format!("\"{key}\" is too large"));
    }
    let ns = match v.as_f64() {
        Some(x) if x.is_finite() => (x * NS_PER_MS as f64).round(),
        _ => return Err(format!("\"{key}\" must be a number of milliseconds")),
    };
    // i64::MAX as f64 is 2^63: anything at or beyond it does not fit the clock.
    if ns.abs() >= i64::MAX as f64 {
        return Err(format!("\"{key}\" is too large"));
    }
    Ok(Some(ns as i64))
}

/// A token bucket's drain interval, from `"rate_per_s"` (units per second) or
/// `"interval_ms"` (time per unit): exactly one of them, any positive finite number.
/// The interval is rounded up to the nanosecond, so the bucket never admits more than
/// the rate written.
fn interval_ns(obj: &Map<String, Value>) -> Result<i64, String> {
    let ns = match (obj.get("rate_per_s"), obj.get("interval_ms")) {
        (Some(rate), None) => 1e9 / positive(rate, "rate_per_s")?,
        (None, Some(interval)) => positive(interval, "interval_ms")? * 1e6,
        (Some(_), Some(_)) => {
            return Err("a token bucket takes \"rate_per_s\" or \"interval_ms\", not both".into())
        }
        (None, None) => {
            return Err("a token bucket needs \"rate_per_s\" (units per second) or \"interval_ms\" (time per unit)".into())
        }
    };
    // i64::MAX as f64 is 2^63: anything at or above it does not fit the clock.
    if ns.ceil() >= i64::MAX as f64 {
        return Err("the token interval is too long (the rate is too small)".into());
    }
    // A positive quotient rounds up to at least 1 ns: a rate above 10^9 per second
    // is served at one unit per nanosecond, less than written, never more.
    Ok(ns.ceil() as i64)
}

fn positive(v: &Value, key: &str) -> Result<f64, String> {
    match v.as_f64() {
        Some(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("\"{key}\" must be a positive number")),
    }
}

fn cost(v: Option<&Value>, what: &str) -> Result<u32, String> {
    v.and_then(Value::as_u64)
        .and_then(|c| u32::try_from(c).ok())
        .ok_or_else(|| {
            format!(
                "the cost of {what:?} must be an integer from 0 to {}",
                u32::MAX
            )
        })
}
