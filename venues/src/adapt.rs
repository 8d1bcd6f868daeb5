//! What every venue adapter needs: the venue's UTC clock read from `now`, the
//! `Retry-After` header (seconds or HTTP-date), usage headers fed to
//! [`Budget::observe_used`], holds and bans with the [`Verdict`] they make, the
//! generic status rule, the verdict of a batch, alerts for halted buckets, and the
//! [`Venue`] trait an adapter implements.
//!
//! Adapters read a [`Response`] and decide: the venue's body code first, the status
//! second. This module never reads a clock, allocates or performs I/O, and never
//! lets a malformed header undo a hold or a halt already applied: the header is
//! reported ([`Error::BadHeader`]) with the verdict it could not change.

use arrayvec::ArrayVec;

use crate::json::JsonError;
use crate::response::Response;
use ergon_core::{BucketId, Budget, ConfigError, Part, Verdict, MAX_PARTS};

const NS_PER_MS: i64 = 1_000_000;
const NS_PER_S: i64 = 1_000_000_000;

/// The parts one request charges.
pub type Parts = ArrayVec<Part, MAX_PARTS>;

/// What kind of request an answer is for: the adapter reads the answer (and charges
/// the request) differently for each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Request<'a> {
    /// Opening a connection: charges the IP gate (and the venue's connect bucket).
    Connect,
    /// One new order.
    Order,
    /// One cancel.
    Cancel,
    /// Cancel one order and place another in one request.
    CancelReplace,
    /// A batch of this many new orders in one request.
    Batch(u16),
    /// A read of this weight.
    Read(u32),
    /// A read named by its type; the venue derives its weight from the name
    /// (Hyperliquid `info` requests: `l2Book`, `userFills` ...).
    Info(&'a str),
}

impl Request<'_> {
    /// Whether the request may change state at the venue (an order, cancel or batch):
    /// for these, an answer that cannot be read is [`Verdict::Unknown`].
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            Request::Order | Request::Cancel | Request::CancelReplace | Request::Batch(_)
        )
    }
}

/// What went wrong in an adapter. Every variant says what to look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A header the venue documents (usage, reset time, `Retry-After`) could not be
    /// read. The `verdict` stands and every hold or halt was applied: only the
    /// header's own effect (a usage count, an exact wait) was skipped.
    BadHeader {
        /// The verdict of the answer, which the bad header did not change.
        verdict: Verdict,
        /// The header, as the venue documents its name.
        header: &'static str,
    },
    /// A configuration body (Binance `exchangeInfo`, Hyperliquid `userRateLimit`)
    /// is not valid JSON.
    Json(JsonError),
    /// A configuration body lacks a field the adapter needs, or holds a value it
    /// cannot use; names the field.
    BadField(&'static str),
    /// The buckets could not be declared.
    Config(ConfigError),
    /// This venue has no such request kind.
    Unsupported,
    /// An argument of a typed endpoint was refused before anything was written;
    /// names the argument.
    BadArgument(&'static str),
    /// A signed endpoint was prepared on an adapter given no API key.
    NoKey,
}

impl From<JsonError> for Error {
    fn from(e: JsonError) -> Self {
        Error::Json(e)
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Error::Config(e)
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::BadHeader { verdict, header } => write!(
                f,
                "header {header} could not be read (the verdict {verdict:?} stands)"
            ),
            Error::Json(e) => write!(f, "configuration body: {e}"),
            Error::BadField(name) => write!(f, "configuration body: field {name} missing or bad"),
            Error::Config(e) => write!(f, "bucket configuration: {e}"),
            Error::Unsupported => f.write_str("this venue has no such request kind"),
            Error::BadArgument(what) => write!(f, "bad argument: {what}"),
            Error::NoKey => f.write_str("a signed endpoint needs the adapter's API key"),
        }
    }
}

/// The venue's UTC clock, read from the caller's monotonic `now`: one offset, set
/// from a moment where both were known (at start, or from a server time).
///
/// ```
/// use ergon_venues::adapt::Clock;
/// let clock = Clock::anchor(5_000_000_000, 1_700_000_000_000); // now = 5 s, UTC ms
/// assert_eq!(clock.utc_ms(6_000_000_000), 1_700_000_001_000);
/// assert_eq!(clock.now_ns_at(1_700_000_002_000), 7_000_000_000);
/// // 1_700_000_000_000 ms is 20 s into a UTC minute: the next minute starts in 40 s.
/// assert_eq!(clock.to_boundary_ns(60_000_000_000, 5_000_000_000), 40_000_000_000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clock {
    /// UTC nanoseconds minus the caller's nanoseconds.
    offset_ns: i64,
}

impl Clock {
    /// The clock on which `now_ns` is `utc_ms` (ms since the Unix epoch).
    pub const fn anchor(now_ns: i64, utc_ms: i64) -> Self {
        Clock {
            offset_ns: utc_ms.saturating_mul(NS_PER_MS).saturating_sub(now_ns),
        }
    }

    /// UTC milliseconds at `now_ns`.
    pub fn utc_ms(&self, now_ns: i64) -> i64 {
        now_ns.saturating_add(self.offset_ns).div_euclid(NS_PER_MS)
    }

    /// The caller's time of the UTC instant `utc_ms`.
    pub fn now_ns_at(&self, utc_ms: i64) -> i64 {
        utc_ms
            .saturating_mul(NS_PER_MS)
            .saturating_sub(self.offset_ns)
    }

    /// A boundary of UTC-aligned windows of `window_ns` on the caller's clock, for
    /// [`Spec::phase`](ergon_core::Spec::phase) (Binance minutes, 10 s, days).
    pub fn phase_ns(&self, window_ns: i64) -> i64 {
        if window_ns <= 0 {
            return 0;
        }
        self.offset_ns.saturating_neg().rem_euclid(window_ns)
    }

    /// This clock checked against a stamp of the venue's own time: `utc_ms`,
    /// written while the venue handled a request the caller wrote at `sent_ns`
    /// and whose answer it read at `read_ns` (its clock), so at some instant in
    /// between. The offsets that stamp allows are `[utc_ms − read_ns,
    /// utc_ms + 1 ms − sent_ns]` (the stamp is truncated to the ms). `None` when
    /// this clock's offset is inside that range widened by `slack_ns` each side
    /// (nothing proven beyond the error the caller tolerates); else the clock at
    /// the range's nearest end: the least move the stamp proves, never past the
    /// venue's true offset whatever the latency. A late answer (queued, slow)
    /// only widens the range; it cannot move the clock the wrong way, as a
    /// midpoint estimate from one answer would. `None` too for `sent_ns` after
    /// `read_ns` (no such answer).
    ///
    /// ```
    /// use ergon_venues::adapt::Clock;
    /// let ms = 1_000_000;
    /// // We think the venue's time is 1_700_000_000_000 at 10 s; it stepped 99 ms back.
    /// let clock = Clock::anchor(10_000 * ms, 1_700_000_000_000);
    /// // Written at 20 s, answered at 20.002 s, stamped 1_700_000_009_902.
    /// let fixed = clock.narrowed(1_700_000_009_902, 20_000 * ms, 20_002 * ms, 5 * ms);
    /// let fixed = fixed.expect("99 ms off is beyond 5 ms of slack");
    /// // Moved 97 ms back: as far as the stamp proves (it may have been written
    /// // as late as the read, 2 ms after the write), not the 99 ms of the step.
    /// assert_eq!(fixed.utc_ms(20_000 * ms), 1_700_000_009_903);
    /// assert_eq!(fixed.narrowed(1_700_000_009_902, 20_000 * ms, 20_002 * ms, 0), None);
    /// ```
    pub fn narrowed(&self, utc_ms: i64, sent_ns: i64, read_ns: i64, slack_ns: i64) -> Option<Self> {
        if sent_ns > read_ns {
            return None;
        }
        let stamp_ns = utc_ms.saturating_mul(NS_PER_MS);
        let lo = stamp_ns.saturating_sub(read_ns);
        let hi = stamp_ns.saturating_add(NS_PER_MS).saturating_sub(sent_ns);
        let slack = slack_ns.max(0);
        let offset_ns = match self.offset_ns {
            o if o < lo.saturating_sub(slack) => lo,
            o if o > hi.saturating_add(slack) => hi,
            _ => return None,
        };
        Some(Clock { offset_ns })
    }

    /// Time from `now_ns` to the end of the UTC-aligned window of `window_ns` it is
    /// in: how long a fixed window the venue says is full stays full.
    pub fn to_boundary_ns(&self, window_ns: i64, now_ns: i64) -> i64 {
        if window_ns <= 0 {
            return 0;
        }
        let utc = now_ns.saturating_add(self.offset_ns);
        window_ns - utc.rem_euclid(window_ns)
    }
}

/// Trims ASCII whitespace from both ends.
fn trim(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    v.get(start..end).unwrap_or(&[])
}

/// A header's value as a non-negative decimal integer: digits only, surrounding
/// whitespace allowed, nothing else (no sign, no fraction, no overflow).
pub fn header_u64(value: &[u8]) -> Option<u64> {
    let v = trim(value);
    if v.is_empty() || v.len() > 20 {
        return None;
    }
    let mut n: u64 = 0;
    for &c in v {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(n)
}

/// The wait a `Retry-After` value asks for, in nanoseconds from `now_ns`: either
/// delay-seconds or an HTTP-date (read on the venue's UTC `clock`; a date already
/// past is a wait of 0). `None` if it is neither.
///
/// ```
/// use ergon_venues::adapt::{retry_after_ns, Clock};
/// let clock = Clock::anchor(0, 784_111_777_000); // Sun, 06 Nov 1994 08:49:37 GMT
/// assert_eq!(retry_after_ns(b"120", &clock, 0), Some(120_000_000_000));
/// assert_eq!(retry_after_ns(b"Sun, 06 Nov 1994 08:50:37 GMT", &clock, 0), Some(60_000_000_000));
/// assert_eq!(retry_after_ns(b"soon", &clock, 0), None);
/// ```
pub fn retry_after_ns(value: &[u8], clock: &Clock, now_ns: i64) -> Option<i64> {
    if let Some(s) = header_u64(value) {
        return Some(i64::try_from(s).ok()?.saturating_mul(NS_PER_S));
    }
    let at_ms = http_date_ms(value)?;
    let wait_ms = at_ms.saturating_sub(clock.utc_ms(now_ns)).max(0);
    Some(wait_ms.saturating_mul(NS_PER_MS))
}

/// An HTTP-date as UTC milliseconds since the epoch: IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`) and the two obsolete forms every recipient
/// must accept (RFC 850 `Sunday, 06-Nov-94 08:49:37 GMT`, asctime
/// `Sun Nov  6 08:49:37 1994`). The weekday is not checked against the date.
pub fn http_date_ms(value: &[u8]) -> Option<i64> {
    let v = trim(value);
    let (day, month, year, time) = if let Some(comma) = v.iter().position(|&c| c == b',') {
        let rest = v.get(comma + 1..)?;
        let rest = rest.strip_prefix(b" ")?;
        if rest.get(2) == Some(&b' ') {
            // IMF-fixdate: "06 Nov 1994 08:49:37 GMT"
            if rest.len() != 24 || rest.get(20..) != Some(b" GMT") {
                return None;
            }
            (
                num(rest.get(0..2)?)?,
                month(rest.get(3..6)?)?,
                num(rest.get(7..11)?)?,
                rest.get(12..20)?,
            )
        } else {
            // RFC 850: "06-Nov-94 08:49:37 GMT"; two-digit years are read as the
            // nearest century (RFC 9110: more than 50 years ahead is the past).
            if rest.len() != 22 || rest.get(18..) != Some(b" GMT") {
                return None;
            }
            if rest.get(2) != Some(&b'-') || rest.get(6) != Some(&b'-') {
                return None;
            }
            let yy = num(rest.get(7..9)?)?;
            let year = if yy < 70 { 2000 + yy } else { 1900 + yy };
            (
                num(rest.get(0..2)?)?,
                month(rest.get(3..6)?)?,
                year,
                rest.get(10..18)?,
            )
        }
    } else {
        // asctime: "Sun Nov  6 08:49:37 1994"
        if v.len() != 24 || v.get(3) != Some(&b' ') || v.get(7) != Some(&b' ') {
            return None;
        }
        let day_field = v.get(8..10)?;
        let day = match day_field {
            [b' ', d] => num(&[*d])?,
            _ => num(day_field)?,
        };
        if v.get(19) != Some(&b' ') {
            return None;
        }
        (
            day,
            month(v.get(4..7)?)?,
            num(v.get(20..24)?)?,
            v.get(11..19)?,
        )
    };
    if time.get(2) != Some(&b':') || time.get(5) != Some(&b':') {
        return None;
    }
    let (h, m, s) = (
        num(time.get(0..2)?)?,
        num(time.get(3..5)?)?,
        num(time.get(6..8)?)?,
    );
    if h > 23 || m > 59 || s > 60 || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some((days * 86_400 + h * 3600 + m * 60 + s) * 1000)
}

/// An RFC 3339 date-time as UTC milliseconds since the epoch
/// (`2023-03-24T17:42:56Z`, `2018-06-19T16:51:23.839Z`, `...+02:00`). A fraction
/// finer than a millisecond is cut, never rounded up: a trigger time read this
/// way is never later than the venue's. A leap second (`:60`) reads as the
/// second after `:59`.
pub fn rfc3339_ms(value: &[u8]) -> Option<i64> {
    let v = trim(value);
    let field = |at: usize, len: usize| num(v.get(at..at + len)?);
    let sep = |at: usize, c: u8| v.get(at).is_some_and(|x| x.eq_ignore_ascii_case(&c));
    if !(sep(4, b'-') && sep(7, b'-') && sep(10, b'T') && sep(13, b':') && sep(16, b':')) {
        return None;
    }
    let (year, month, day) = (field(0, 4)?, field(5, 2)?, field(8, 2)?);
    let (h, m, s) = (field(11, 2)?, field(14, 2)?, field(17, 2)?);
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    if h > 23 || m > 59 || s > 60 {
        return None;
    }
    let mut rest = v.get(19..)?;
    let mut ms = 0;
    if let Some(frac) = rest.strip_prefix(b".") {
        let digits = frac.iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        for (i, c) in frac[..digits.min(3)].iter().enumerate() {
            ms += i64::from(c - b'0') * [100, 10, 1][i];
        }
        rest = &frac[digits..];
    }
    let offset_min = match rest {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let (oh, om) = (num(&[*h1, *h2])?, num(&[*m1, *m2])?);
            if oh > 23 || om > 59 {
                return None;
            }
            let off = oh * 60 + om;
            if *sign == b'-' {
                -off
            } else {
                off
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + h * 3600 + m * 60 + s - offset_min * 60;
    Some(secs * 1000 + ms)
}

fn num(b: &[u8]) -> Option<i64> {
    if b.is_empty() {
        return None;
    }
    let mut n = 0i64;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n * 10 + i64::from(c - b'0');
    }
    Some(n)
}

fn month(b: &[u8]) -> Option<i64> {
    const NAMES: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    NAMES.iter().position(|n| &n[..] == b).map(|i| i as i64 + 1)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Feeds a usage header (the venue's count for `bucket`, counted at
/// `counted_ns`: `now_ns` where the answer says nothing more) to
/// [`Budget::observe_used_at`]. A value that is not a count is refused, and
/// changes nothing: the caller reports it with the verdict it already has.
#[allow(clippy::result_unit_err)] // the caller reports the header by name; nothing more to say
pub fn observe_header(
    budget: &mut Budget,
    bucket: BucketId,
    value: &[u8],
    counted_ns: i64,
    now_ns: i64,
) -> Result<(), ()> {
    let used = header_u64(value).ok_or(())?;
    budget
        .observe_used_at(bucket, used, counted_ns, now_ns)
        .map_err(|_| ())
}

/// Holds `bucket` after a throttle (`wait_ns` from the venue, or `None` for one
/// window) and returns the verdict, carrying the end of the hold in force, or a
/// ban if the wait is above the bucket's cap. A bucket of another budget (an adapter
/// built against another budget) is Unknown: reconciled, never re-sent.
pub fn hold(budget: &mut Budget, bucket: BucketId, wait_ns: Option<i64>, now_ns: i64) -> Verdict {
    budget
        .throttled(bucket, wait_ns, now_ns)
        .unwrap_or(Verdict::Unknown)
}

/// Halts `bucket` after a ban that the venue says ends at `until_ns` (the halt does
/// not end there: only [`Budget::clear_halt`] resumes it) and returns the verdict.
/// Halting the IP gate stops every request and every connect.
pub fn ban(budget: &mut Budget, bucket: BucketId, until_ns: i64, now_ns: i64) -> Verdict {
    match budget.banned(bucket, until_ns, now_ns) {
        Ok(()) => Verdict::Banned { bucket, until_ns },
        Err(_) => Verdict::Unknown,
    }
}

/// The generic status rule, for answers whose body names no venue code: 2xx Done,
/// 429 Throttled (holding `throttle` for `wait_ns`, or one window without it), other
/// 4xx Rejected, 5xx and anything else Unknown.
pub fn status_rule(
    status: u16,
    budget: &mut Budget,
    throttle: BucketId,
    wait_ns: Option<i64>,
    now_ns: i64,
) -> Verdict {
    match status {
        200..=299 => Verdict::Done,
        429 => hold(budget, throttle, wait_ns, now_ns),
        400..=499 => Verdict::Rejected,
        _ => Verdict::Unknown,
    }
}

/// What the `Retry-After` headers of a response say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetryAfter {
    /// The longest wait asked by a well-formed `Retry-After`, if any.
    pub wait_ns: Option<i64>,
    /// Some `Retry-After` was neither seconds nor an HTTP-date (report it).
    pub malformed: bool,
}

/// Reads every `Retry-After` of `response`. A malformed one is flagged and otherwise
/// ignored, so it can neither shorten nor lengthen the wait a well-formed one asks
/// for; of several well-formed ones the longest wins.
pub fn response_retry_after(response: &Response<'_>, clock: &Clock, now_ns: i64) -> RetryAfter {
    let mut retry = RetryAfter::default();
    for header in response
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case(b"retry-after"))
    {
        match retry_after_ns(header.value, clock, now_ns) {
            Some(wait) => retry.wait_ns = Some(retry.wait_ns.map_or(wait, |w| w.max(wait))),
            None => retry.malformed = true,
        }
    }
    retry
}

/// Most item verdicts a [`Batch`] keeps (items beyond count in its verdict but are
/// not kept one by one).
pub const MAX_ITEMS: usize = 64;

/// The verdicts of a request that carried several orders, each with its own
/// outcome (OKX `data[i].sCode`, Hyperliquid `statuses[i]`, Bybit batch lists): one
/// per item, in the request's order, and the one verdict of the request.
///
/// An adapter fills a `Batch` only when the venue answered the batch item by item,
/// so the batch itself was processed: if any order ran or may have run (an item
/// Done or Unknown), the request is Done and each item carries its own verdict
/// (reconcile the Unknown ones by client order id; re-send only items that surely
/// did not run, never the batch, which could duplicate the ones that ran). If no
/// order ran, the batch's verdict is its items' worst: Banned before Throttled
/// (latest end) before ClockSkew before NotRun before Rejected, so a batch is re-sent
/// whole only when every order may be. A batch whose own fate is unknown (a 5xx, an
/// unreadable body) never gets here: the adapter answers Unknown for it.
///
/// ```
/// use ergon_core::Verdict;
/// use ergon_venues::adapt::Batch;
/// let mut b = Batch::new();
/// b.add(Verdict::Done);
/// b.add(Verdict::Rejected);
/// assert_eq!(b.verdict(), Some(Verdict::Done));
/// assert_eq!(b.items(), &[Verdict::Done, Verdict::Rejected]);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Batch {
    items: u32,
    done: u32,
    unknown: bool,
    worst: Option<Verdict>,
    kept: ArrayVec<Verdict, MAX_ITEMS>,
}

impl Batch {
    /// No item yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Each item's verdict, in the order added (the first [`MAX_ITEMS`]).
    pub fn items(&self) -> &[Verdict] {
        &self.kept
    }

    /// The kept item verdicts.
    pub fn into_items(self) -> ArrayVec<Verdict, MAX_ITEMS> {
        self.kept
    }

    /// One order's outcome.
    pub fn add(&mut self, v: Verdict) {
        self.items += 1;
        // Past MAX_ITEMS the item still counts in the verdict.
        let _ = self.kept.try_push(v);
        let rank = |v: &Verdict| match v {
            Verdict::Banned { .. } => 5,
            Verdict::Throttled { .. } => 4,
            Verdict::ClockSkew => 3,
            Verdict::NotRun => 2,
            Verdict::Rejected => 1,
            Verdict::Done | Verdict::Unknown => 0,
        };
        match v {
            Verdict::Done => self.done += 1,
            Verdict::Unknown => self.unknown = true,
            _ => {
                let better = match &self.worst {
                    None => true,
                    Some(w) => match (w, &v) {
                        (
                            Verdict::Throttled { until_ns: a, .. },
                            Verdict::Throttled { until_ns: b, .. },
                        ) => b > a,
                        _ => rank(&v) > rank(w),
                    },
                };
                if better {
                    self.worst = Some(v);
                }
            }
        }
    }

    /// Items added.
    pub fn len(&self) -> u32 {
        self.items
    }

    /// Whether no item was added.
    pub fn is_empty(&self) -> bool {
        self.items == 0
    }

    /// The request's verdict; `None` if no item was added.
    pub fn verdict(&self) -> Option<Verdict> {
        if self.items == 0 {
            return None;
        }
        if self.unknown || self.done > 0 {
            return Some(Verdict::Done);
        }
        self.worst
    }
}

/// A halted bucket, for a person to look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Alert<'b> {
    /// The bucket.
    pub bucket: BucketId,
    /// Its name.
    pub name: &'b str,
    /// Bans it received over the budget's life.
    pub bans: u32,
    /// The venue's end of the last ban, on the caller's clock.
    pub ban_until_ns: Option<i64>,
}

/// Every halted bucket, in declaration order, with its ban count.
///
/// ```
/// use ergon_core::{Budget, Spec};
/// use ergon_venues::adapt;
/// let mut b = Budget::builder();
/// let ip = b.add("ip", Spec::gate()).unwrap();
/// let mut budget = b.build(0).unwrap();
/// budget.banned(ip, 300, 0).unwrap();
/// let a: Vec<_> = adapt::alerts(&budget).collect();
/// assert_eq!((a[0].name, a[0].bans), ("ip", 1));
/// ```
pub fn alerts(budget: &Budget) -> impl Iterator<Item = Alert<'_>> {
    budget.halted().filter_map(move |bucket| {
        let stats = budget.stats(bucket).ok()?;
        Some(Alert {
            bucket,
            name: budget.name(bucket).ok()?,
            bans: stats.bans,
            ban_until_ns: stats.ban_until_ns,
        })
    })
}

/// A venue adapter: the parts each request charges, and what an answer means.
///
/// Drive order: [`Venue::parts`] → [`Budget::try_charge`] → send →
/// [`Venue::on_response`] with the answer (its budget effects are applied there) →
/// [`Budget::complete`] → [`Budget::resend`] with the verdict if it did not run.
pub trait Venue {
    /// The parts `request` charges, all or none.
    fn parts(&self, request: Request<'_>) -> Result<Parts, Error>;

    /// Reads the answer to `request`: applies what the venue said to `budget`
    /// (usage, holds, bans, extra cost) and returns the verdict. The body code
    /// decides before the status. A body that cannot be read is a verdict, not an
    /// error (Unknown for writes); `Err` only reports a header that could not be
    /// read, with the verdict it left standing.
    fn on_response(
        &mut self,
        request: Request<'_>,
        response: &Response<'_>,
        budget: &mut Budget,
        now_ns: i64,
    ) -> Result<Verdict, Error>;

    /// The verdict of each item of the last batch answer [`Venue::on_response`]
    /// read, in the request's order: Done, Rejected or NotRun by the item's own code,
    /// Unknown where the item's fate is unknown. Empty when the last answer was not
    /// a batch, or its items could not be read (then the request's verdict is all
    /// there is). A cancel-replace of two steps (Binance Spot) has its parts here,
    /// in the order of its client order ids (the new order, then the cancel), when
    /// its answer says each part's fate.
    fn batch_items(&self) -> &[Verdict] {
        &[]
    }
}

/// Returns `verdict`, or [`Error::BadHeader`] carrying it if a header was bad.
pub fn finish(verdict: Verdict, bad_header: Option<&'static str>) -> Result<Verdict, Error> {
    match bad_header {
        None => Ok(verdict),
        Some(header) => Err(Error::BadHeader { verdict, header }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ergon_core::{Class, Spec, Why};

    #[test]
    fn http_dates_in_all_three_forms() {
        let t = 784_111_777_000;
        assert_eq!(http_date_ms(b"Sun, 06 Nov 1994 08:49:37 GMT"), Some(t));
        assert_eq!(http_date_ms(b"Sunday, 06-Nov-94 08:49:37 GMT"), Some(t));
        assert_eq!(http_date_ms(b"Sun Nov  6 08:49:37 1994"), Some(t));
        assert_eq!(
            http_date_ms(b"Tue, 14 Nov 2023 22:13:20 GMT"),
            Some(1_700_000_000_000)
        );
        assert_eq!(
            http_date_ms(b"Thu, 29 Feb 2024 00:00:00 GMT"),
            Some(1_709_164_800_000)
        );
        for bad in [
            &b""[..],
            b"Sun, 06 Nov 1994 08:49:37 UTC",
            b"Sun, 31 Nov 1994 08:49:37 GMT",
            b"Sun, 06 Nox 1994 08:49:37 GMT",
            b"Sun, 06 Nov 1994 24:49:37 GMT",
            b"Sun, 06 Nov 1994 08-49-37 GMT",
            b"Thu, 29 Feb 2023 00:00:00 GMT",
            b"Sun Nov 6 08:49:37 1994",
            b", ",
            b"\xff\xfe",
        ] {
            assert_eq!(http_date_ms(bad), None, "{:?}", bad);
        }
    }

    #[test]
    fn rfc3339_date_times() {
        let t = 1_700_000_000_000;
        assert_eq!(rfc3339_ms(b"2023-11-14T22:13:20Z"), Some(t));
        assert_eq!(rfc3339_ms(b"2023-11-14t22:13:20z"), Some(t));
        assert_eq!(rfc3339_ms(b"2023-11-14T22:13:20.839Z"), Some(t + 839));
        // Finer than a millisecond is cut, not rounded up.
        assert_eq!(rfc3339_ms(b"2023-11-14T22:13:20.123999Z"), Some(t + 123));
        assert_eq!(rfc3339_ms(b"2023-11-14T22:13:20.5Z"), Some(t + 500));
        assert_eq!(rfc3339_ms(b"2023-11-15T00:13:20+02:00"), Some(t));
        assert_eq!(rfc3339_ms(b"2023-11-14T21:13:20-01:00"), Some(t));
        // The futures dead man's switch example.
        assert_eq!(
            rfc3339_ms(b"2018-06-19T16:52:23.839Z"),
            Some(1_529_427_143_839)
        );
        assert_eq!(rfc3339_ms(b"2024-02-29T00:00:00Z"), Some(1_709_164_800_000));
        for bad in [
            &b""[..],
            b"0",
            b"2023-11-14T22:13:20",
            b"2023-11-14 22:13:20Z",
            b"2023-11-14T22:13:20.Z",
            b"2023-02-29T22:13:20Z",
            b"2023-13-14T22:13:20Z",
            b"2023-11-14T24:13:20Z",
            b"2023-11-14T22:13:20+2:00",
            b"2023-11-14T22:13:20+24:00",
            b"2023-11-14T22:13:20Zjunk",
            b"+023-11-14T22:13:20Z",
            b"\xff\xfe",
        ] {
            assert_eq!(rfc3339_ms(bad), None, "{:?}", bad);
        }
    }

    #[test]
    fn retry_after_seconds_date_and_garbage() {
        let clock = Clock::anchor(10 * NS_PER_S, 1_700_000_000_000);
        let now = 10 * NS_PER_S;
        assert_eq!(retry_after_ns(b" 37 ", &clock, now), Some(37 * NS_PER_S));
        assert_eq!(
            retry_after_ns(b"Tue, 14 Nov 2023 22:13:50 GMT", &clock, now),
            Some(30 * NS_PER_S)
        );
        // A date in the past is no wait, never a negative one.
        assert_eq!(
            retry_after_ns(b"Tue, 14 Nov 2023 22:00:00 GMT", &clock, now),
            Some(0)
        );
        assert_eq!(retry_after_ns(b"-5", &clock, now), None);
        assert_eq!(retry_after_ns(b"1.5", &clock, now), None);
        assert_eq!(
            retry_after_ns(b"99999999999999999999999", &clock, now),
            None
        );
    }

    #[test]
    fn clock_phase_aligns_fixed_windows_to_utc() {
        // UTC 1_700_000_000_000 ms is 20 s into its minute, at now = 3 s.
        let clock = Clock::anchor(3 * NS_PER_S, 1_700_000_000_000);
        let minute = 60 * NS_PER_S;
        let phase = clock.phase_ns(minute);
        assert_eq!(phase, 43 * NS_PER_S);
        assert_eq!(clock.utc_ms(phase) % 60_000, 0);
        assert_eq!(clock.to_boundary_ns(minute, 3 * NS_PER_S), 40 * NS_PER_S);
        assert_eq!(clock.to_boundary_ns(minute, phase), minute);
    }

    #[test]
    fn a_stamp_narrows_the_clock_only_as_far_as_it_proves() {
        const MS: i64 = 1_000_000;
        let venue0 = 1_700_000_000_000;
        // Our estimate: venue0 at 10 s. Each case: the venue's true time at 10 s
        // (its step), the write, the read, and the stamp it wrote in between.
        let clock = Clock::anchor(10_000 * MS, venue0);
        let stamp = |step: i64, at_ms: i64| venue0 + step + (at_ms - 10_000);
        // The venue stepped 99 ms back: written at 20 s, stamped at 20.001 s of
        // ours, read at 20.003 s. The clock moves back to the range's end, its
        // error then at most the round trip (3 ms), never past the truth.
        let c = clock
            .narrowed(stamp(-99, 20_001), 20_000 * MS, 20_003 * MS, 5 * MS)
            .expect("99 ms behind is proven");
        let err = |c: Clock| c.utc_ms(20_001 * MS) - stamp(-99, 20_001);
        assert!((0..=3).contains(&err(c)), "{}", err(c));
        // It stepped 250 ms ahead: the clock moves forward, as little as proven.
        let c = clock
            .narrowed(stamp(250, 20_001), 20_000 * MS, 20_003 * MS, 5 * MS)
            .expect("250 ms ahead is proven");
        let err = c.utc_ms(20_001 * MS) - stamp(250, 20_001);
        assert!((-3..=0).contains(&err), "{err}");
        // Within the slack, or consistent: nothing proven, nothing moves.
        let s = 5 * MS;
        assert_eq!(
            clock.narrowed(stamp(-4, 20_001), 20_000 * MS, 20_001 * MS, s),
            None
        );
        assert_eq!(
            clock.narrowed(stamp(0, 20_001), 20_000 * MS, 20_003 * MS, 0),
            None
        );
        // A late answer: stamped 40 ms after its write on a venue clock 30 ms
        // ahead, read 6 s later (queued). The range allows any offset from 5.93 s
        // behind ours to 71 ms ahead: it proves nothing, and a midpoint of the
        // round trip (3 s off) would have moved the clock the wrong way.
        assert_eq!(
            clock.narrowed(stamp(30, 20_040), 20_000 * MS, 26_000 * MS, s),
            None
        );
        // The same stamp read at once proves the venue ahead: the clock moves
        // forward, to 30 ms ahead at most, never beyond the truth.
        let c = clock.narrowed(stamp(30, 20_040), 20_000 * MS, 20_041 * MS, s);
        let c = c.expect("30 ms ahead is proven");
        assert!((-1..=0).contains(&(c.utc_ms(20_040 * MS) - stamp(30, 20_040))));
        // No such answer (read before written): nothing.
        assert_eq!(
            clock.narrowed(stamp(-99, 20_001), 20_003 * MS, 20_000 * MS, s),
            None
        );
    }

    #[test]
    fn status_rule_and_hold() {
        let mut b = Budget::builder();
        b.hold_guard(0).unwrap();
        let w = b.add("w", Spec::sliding(10, NS_PER_S, 10)).unwrap();
        let mut budget = b.build(0).unwrap();
        assert_eq!(status_rule(204, &mut budget, w, None, 0), Verdict::Done);
        assert_eq!(status_rule(404, &mut budget, w, None, 0), Verdict::Rejected);
        assert_eq!(status_rule(503, &mut budget, w, None, 0), Verdict::Unknown);
        assert_eq!(status_rule(302, &mut budget, w, None, 0), Verdict::Unknown);
        assert_eq!(
            status_rule(429, &mut budget, w, Some(5 * NS_PER_S), 0),
            Verdict::Throttled {
                bucket: w,
                until_ns: 5 * NS_PER_S
            }
        );
        let refused = budget
            .try_charge(&[Part::new(w, 1)], Class::Urgent, NS_PER_S)
            .unwrap_err();
        assert_eq!(
            (refused.why, refused.ready_at_ns),
            (Why::Held, 5 * NS_PER_S)
        );
    }

    #[test]
    fn observe_header_refuses_garbage_and_keeps_counts() {
        let mut b = Budget::builder();
        let w = b.add("w", Spec::sliding(100, NS_PER_S, 10)).unwrap();
        let mut budget = b.build(0).unwrap();
        assert_eq!(observe_header(&mut budget, w, b"17", 0, 0), Ok(()));
        assert_eq!(budget.stats(w).unwrap().used, 17);
        assert_eq!(observe_header(&mut budget, w, b"1e3", 0, 0), Err(()));
        assert_eq!(observe_header(&mut budget, w, b"", 0, 0), Err(()));
        assert_eq!(budget.stats(w).unwrap().used, 17);
    }

    #[test]
    fn batch_keeps_items_up_to_its_capacity() {
        let mut b = Batch::new();
        for _ in 0..MAX_ITEMS {
            b.add(Verdict::NotRun);
        }
        b.add(Verdict::Done);
        // The item past the capacity is not kept, and still counts: one order ran.
        assert_eq!(b.items().len(), MAX_ITEMS);
        assert!(b.items().iter().all(|v| *v == Verdict::NotRun));
        assert_eq!(
            (b.len() as usize, b.verdict()),
            (MAX_ITEMS + 1, Some(Verdict::Done))
        );
    }

    #[test]
    fn batch_verdicts() {
        let mut b = Budget::builder();
        let bucket = b.add("w", Spec::gate()).unwrap();
        let t = |u| Verdict::Throttled {
            bucket,
            until_ns: u,
        };
        let of = |vs: &[Verdict]| {
            let mut b = Batch::new();
            vs.iter().for_each(|v| b.add(*v));
            b.verdict()
        };
        assert_eq!(of(&[]), None);
        assert_eq!(of(&[Verdict::Done, Verdict::Done]), Some(Verdict::Done));
        // Processed item by item, some ran or may have: Done, each item its own.
        assert_eq!(of(&[Verdict::Done, t(5)]), Some(Verdict::Done));
        assert_eq!(
            of(&[Verdict::Rejected, Verdict::Unknown]),
            Some(Verdict::Done)
        );
        assert_eq!(of(&[Verdict::Rejected, t(5), t(9), t(7)]), Some(t(9)));
        assert_eq!(
            of(&[Verdict::Rejected, Verdict::NotRun]),
            Some(Verdict::NotRun)
        );
        assert_eq!(
            of(&[Verdict::Rejected, Verdict::Rejected]),
            Some(Verdict::Rejected)
        );
    }
}
