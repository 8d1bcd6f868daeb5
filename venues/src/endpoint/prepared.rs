//! The request an adapter prepares (parts, signed method, target, headers, body,
//! deadline, client order id) and the writer adapters fill it with.

use core::ops::Range;

use arrayvec::{ArrayString, ArrayVec};

use crate::adapt::{Error, Parts, Request, Venue};

use super::template::{digits, eight_digits, Sink};
use super::{ClientOrderId, Label, Method, Symbol, MAX_BATCH, MAX_HEADERS};

/// A request prepared by an adapter, ready to charge and to send: see the module
/// doc. Only adapters fill it; the caller reads it.
///
/// Drive order: an [`super::Endpoints`] method fills it → `Budget::try_charge(parts())`
/// → write `method() target()`, `headers()`, `body()` → `Venue::on_response(kind(),
/// answer)` → `Budget::resend(verdict, parts(), class, deadline_ns(), now)` if it
/// did not run. After a failed preparation it is empty ([`Prepared::is_empty`]):
/// nothing to charge, nothing to send.
#[derive(Clone, Debug, Default)]
pub struct Prepared {
    kind: Option<Request<'static>>,
    parts: Parts,
    method: Option<Method>,
    /// Text by construction: only whole strings, bytes checked as UTF-8 and the
    /// ASCII the writer makes from its own tables (digits, hex, base64,
    /// percent-encoding) are appended, so what it makes needs no UTF-8 check per
    /// append (the timestamp's digits and a MAC's hex were ~170 instructions an
    /// order). A template's order is read as bytes ([`Prepared::http`]); the target
    /// and headers are read as `&str` with one check of their span.
    bytes: Vec<u8>,
    target: Range<usize>,
    headers: ArrayVec<(&'static str, Range<usize>), MAX_HEADERS>,
    body: Range<usize>,
    /// Where the request line ends when `bytes` are the request as HTTP/1.1 sends
    /// it but for its `Host` line ([`Prepared::http`]); 0 when they are not.
    http_line: usize,
    deadline_ns: i64,
    ids: ArrayVec<ClientOrderId, MAX_BATCH>,
    symbol: ArrayString<32>,
    label: Label,
    /// The signed payload whose `&signature=` is still to be written at its end
    /// ([`Prepared::signature_pending`]); `None` when signed or unsigned by
    /// nature.
    unsigned: Option<Range<usize>>,
    /// The layout of a template's order its bytes hold, whole, since they were
    /// written (the template and the length of each field: see
    /// [`Writer::resume`]); 0 for none. Anything that writes the bytes otherwise
    /// resets it.
    layout: u128,
    /// [`Prepared::parts_key`].
    parts_key: u64,
}

/// Room a deferred signature needs: `&signature=` and the longest signature text
/// (Ed25519's base64, URL-encoded: at most 120 bytes).
const SIGNATURE_ROOM: usize = 11 + 120;

impl Prepared {
    /// An empty request whose buffer holds `capacity` bytes before it grows (1 KiB
    /// holds any single order; a 20-order batch body needs about 4 KiB).
    pub fn with_capacity(capacity: usize) -> Self {
        Prepared {
            bytes: Vec::with_capacity(capacity),
            ..Prepared::default()
        }
    }

    /// Whether nothing is prepared (new, emptied by [`Prepared::clear`], or the
    /// last preparation failed).
    pub fn is_empty(&self) -> bool {
        self.kind.is_none()
    }

    /// Empties it: nothing to charge or send ([`Prepared::is_empty`]) until an
    /// adapter prepares a request in it again. Its buffer, and the template order
    /// its bytes hold, stay for the next preparation to write over in place. One
    /// store: a buffer lent for a preparation is emptied first, so a preparation
    /// that writes nothing leaves nothing to send (never the request it held).
    pub fn clear(&mut self) {
        self.kind = None;
    }

    /// The request kind, for [`Venue::on_response`]; `None` if empty.
    pub fn kind(&self) -> Option<Request<'static>> {
        self.kind
    }

    /// What the request charges, all or none.
    pub fn parts(&self) -> &[ergon_core::Part] {
        &self.parts
    }

    /// The method; `None` if empty.
    pub fn method(&self) -> Option<Method> {
        self.method
    }

    /// Path and query (`/api/v3/order?symbol=...&signature=...`).
    pub fn target(&self) -> &str {
        self.text(self.target.clone())
    }

    /// Headers to send besides `Host`, `Content-Length` and the connection's own.
    pub fn headers(&self) -> impl Iterator<Item = (&'static str, &str)> + '_ {
        self.headers
            .iter()
            .map(move |(name, at)| (*name, self.text(at.clone())))
    }

    /// The value of the header `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// The body (empty for most GET and DELETE requests).
    pub fn body(&self) -> &[u8] {
        self.bytes.get(self.body.clone()).unwrap_or(&[])
    }

    /// The request as HTTP/1.1 sends it, but for the `Host` line the connection
    /// adds: `Some` only when the adapter wrote it so (a template's order), and then
    /// valid on the wire by construction (see [`Http`]). `None`: encode it from
    /// [`Prepared::method`], [`Prepared::target`], [`Prepared::headers`] and
    /// [`Prepared::body`].
    pub fn http(&self) -> Option<Http<'_>> {
        if self.http_line == 0 || self.kind.is_none() {
            return None;
        }
        let (line, rest) = self.bytes.split_at_checked(self.http_line)?;
        Some(Http { line, rest })
    }

    /// The end of the venue's acceptance window (timestamp + recvWindow, OKX
    /// `expTime`, Hyperliquid's nonce window) on the caller's clock: never re-send
    /// after it. For unsigned reads: `now_ns` + the adapter's receive window.
    pub fn deadline_ns(&self) -> i64 {
        self.deadline_ns
    }

    /// The client order id the request places, cancels, amends or queries (the
    /// first, for a batch); `None` for reads that name no order.
    pub fn client_order_id(&self) -> Option<&ClientOrderId> {
        self.ids.first()
    }

    /// Every client order id, in the order of the batch's items.
    pub fn client_order_ids(&self) -> &[ClientOrderId] {
        &self.ids
    }

    /// What the request is for ([`Label::NONE`] until [`Prepared::set_label`]).
    pub fn label(&self) -> Label {
        self.label
    }

    /// Labels the request, after it is prepared (each preparation starts
    /// unlabeled). The label changes nothing sent or charged; it says whose
    /// budget the request spent.
    pub fn set_label(&mut self, label: Label) {
        self.label = label;
    }

    /// The symbol the request names (the first order's, for a batch), so a
    /// reconcile queries the order where it was placed; `None` for requests that
    /// name none (the account, open orders of every symbol).
    pub fn symbol(&self) -> Option<Symbol<'_>> {
        Symbol::new(self.symbol.as_str()).ok()
    }

    /// Whether its bytes are a whole order of `layout` (not 0), written by a
    /// template and not changed since ([`Writer::resume`]).
    pub(crate) fn holds(&self, layout: u128) -> bool {
        layout != 0 && self.layout == layout
    }

    /// Names the part list of [`Prepared::parts`] when they were kept with a
    /// template: two requests with the same non-zero key charge the same parts
    /// (the key is new, process-wide, for each list a template keeps), so a
    /// caller that maps parts to something of its own (the gateway's budget
    /// shapes) may look the key up instead of comparing the lists. 0: no key
    /// (compare the parts).
    pub fn parts_key(&self) -> u64 {
        self.parts_key
    }

    /// Replaces what a prepared request charges (a batch cancel: the cancel
    /// limit once per order).
    pub(crate) fn set_parts(&mut self, parts: Parts) {
        self.parts = parts;
        self.parts_key = 0;
    }

    /// Exchanges the two requests, as `core::mem::swap` does, moving only the
    /// client order ids and headers in use: a `Prepared` is about 1.3 KB, most of it
    /// room for [`MAX_BATCH`] ids, and a ledger swaps one in on every submit (a whole
    /// swap was ~320 instructions of the send path, this ~60 for one order).
    pub fn swap_with(&mut self, other: &mut Prepared) {
        core::mem::swap(&mut self.kind, &mut other.kind);
        core::mem::swap(&mut self.parts, &mut other.parts);
        core::mem::swap(&mut self.method, &mut other.method);
        core::mem::swap(&mut self.bytes, &mut other.bytes);
        core::mem::swap(&mut self.target, &mut other.target);
        swap_used(&mut self.headers, &mut other.headers);
        core::mem::swap(&mut self.body, &mut other.body);
        core::mem::swap(&mut self.http_line, &mut other.http_line);
        core::mem::swap(&mut self.deadline_ns, &mut other.deadline_ns);
        swap_used(&mut self.ids, &mut other.ids);
        core::mem::swap(&mut self.symbol, &mut other.symbol);
        core::mem::swap(&mut self.label, &mut other.label);
        core::mem::swap(&mut self.unsigned, &mut other.unsigned);
        core::mem::swap(&mut self.layout, &mut other.layout);
        core::mem::swap(&mut self.parts_key, &mut other.parts_key);
    }

    /// Whether the request's signature is still to be written: its adapter
    /// prepared it with signatures deferred
    /// ([`Endpoints::defer_signatures`](super::Endpoints::defer_signatures)), for
    /// a gateway whose WebSocket API lane sends it without the REST signature.
    /// Such a request must not go over HTTP as it is (the transports refuse it):
    /// [`Endpoints::sign_pending`](super::Endpoints::sign_pending) signs it,
    /// giving byte for byte the request a signing preparation writes.
    pub fn signature_pending(&self) -> bool {
        self.unsigned.is_some() && self.kind.is_some()
    }

    /// The payload a pending signature signs; `None` if none is pending.
    pub(crate) fn unsigned_payload(&self) -> Option<&[u8]> {
        let at = self.unsigned.clone()?;
        self.bytes.get(at)
    }

    /// Writes the pending signature, `&signature=` and `sig`, at the end of its
    /// payload, and moves every span after it: the request is then the one a
    /// signing preparation writes. Allocates nothing (the room was reserved when
    /// the signature was deferred); nothing is pending after it. `Err` (and `self`
    /// left as it was) if none is pending or `sig` is longer than a signature.
    pub(crate) fn insert_signature(&mut self, sig: &str) -> Result<(), Error> {
        let at = self.unsigned.as_ref().ok_or(Error::Unsupported)?.end;
        let mut piece = ArrayString::<SIGNATURE_ROOM>::new();
        piece
            .try_push_str("&signature=")
            .and_then(|()| piece.try_push_str(sig))
            .map_err(|_| Error::BadArgument("signature"))?;
        // The bytes stay text: ASCII goes in only where a character starts.
        if self
            .bytes
            .get(at)
            .map_or(at != self.bytes.len(), |b| b & 0xC0 == 0x80)
        {
            return Err(Error::BadArgument("signature"));
        }
        let n = piece.len();
        let old = self.bytes.len();
        self.bytes.resize(old + n, 0);
        self.bytes.copy_within(at..old, at + n);
        self.bytes[at..at + n].copy_from_slice(piece.as_bytes());
        let shift = |r: &mut Range<usize>| {
            if r.start >= at && r.start != r.end {
                r.start += n;
            }
            if r.end >= at && r.start != r.end {
                r.end += n;
            }
        };
        shift(&mut self.target);
        shift(&mut self.body);
        for (_, r) in &mut self.headers {
            shift(r);
        }
        if self.http_line >= at && self.http_line != 0 {
            self.http_line += n;
        }
        self.unsigned = None;
        self.layout = 0;
        Ok(())
    }

    fn text(&self, at: Range<usize>) -> &str {
        // The bytes are text and spans end on ASCII bytes, so this never fails; it
        // is a scan of the span (the price of a buffer the writer appends to
        // without a check: see the field's doc).
        self.bytes
            .get(at)
            .and_then(|b| core::str::from_utf8(b).ok())
            .unwrap_or("")
    }
}

/// A request encoded as HTTP/1.1 sends it, but for the `Host` line, which the
/// connection writes after the request line: `line()`, then `Host: {host}\r\n`,
/// then `rest()` are the request's bytes on the wire, exactly as an encoder of its
/// method, target, headers and body writes them.
///
/// Only [`Prepared::http`] makes one, and only for a request its adapter wrote
/// with bytes valid on the wire by construction: the method a token, the target
/// in origin form with no space, control byte or `#`, header names tokens and
/// values free of CR, LF and other controls, the framing (`Content-Length`) the
/// encoder's. So a transport sends it without checking it again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Http<'a> {
    line: &'a [u8],
    rest: &'a [u8],
}

impl<'a> Http<'a> {
    /// The request line, `METHOD target HTTP/1.1\r\n`.
    pub fn line(&self) -> &'a [u8] {
        self.line
    }

    /// The header lines after `Host`, the blank line and the body.
    pub fn rest(&self) -> &'a [u8] {
        self.rest
    }

    /// Its length on the wire with a `Host` line of `host_len` bytes.
    pub fn len_with_host(&self, host_len: usize) -> usize {
        self.line.len() + 6 + host_len + 2 + self.rest.len()
    }
}

/// The lower-case hex of a 32-byte MAC (or of a 32-byte chunk of anything).
///
/// Every byte's two digits by arithmetic on its nibbles, not from a table: all the
/// high digits, then all the low ones, then the two interleaved, each a loop of
/// fixed length over bytes that the compiler makes into a few 16-byte vector
/// operations (x86_64's baseline SSE2: shift, mask, compare, add, unpack), ~60
/// instructions for the 64 digits where a pair table took ~5 a byte (~170).
#[inline(always)]
fn hex32(bytes: &[u8; 32]) -> [u8; 64] {
    let mut high = [0u8; 32];
    let mut low = [0u8; 32];
    for ((h, l), &b) in high.iter_mut().zip(&mut low).zip(bytes) {
        *h = hex_digit(b >> 4);
        *l = hex_digit(b & 15);
    }
    let mut out = [0u8; 64];
    for ((o, &h), &l) in out.chunks_exact_mut(2).zip(&high).zip(&low) {
        o[0] = h;
        o[1] = l;
    }
    out
}

/// The lower-case hex digit of `n` (< 16): `'0'` added, and the gap from `'9'`
/// to `'a'` where it is over 9 (a compare, a mask and two adds a vector; a choice
/// between two offsets took seven).
#[inline(always)]
fn hex_digit(n: u8) -> u8 {
    n + b'0' + if n > 9 { b'a' - b'9' - 1 } else { 0 }
}

/// Copies `src` over `dst` (of the same length: else nothing is copied), a text
/// field of at most 64 bytes (a price, a quantity, a client order id), by two
/// fixed-size copies of its first and last bytes that overlap in the middle: a
/// few moves and no `memcpy` call (~15 instructions a field with the call).
#[inline(always)]
fn put_short(dst: &mut [u8], src: &[u8]) {
    /// The first and last `N` bytes of `src` over those of `dst` (`N` ≤ both
    /// lengths, which are the same).
    #[inline(always)]
    fn ends<const N: usize>(dst: &mut [u8], src: &[u8]) {
        if let (Some(d), Some(s)) = (dst.first_chunk_mut::<N>(), src.first_chunk::<N>()) {
            *d = *s;
        }
        if let (Some(d), Some(s)) = (dst.last_chunk_mut::<N>(), src.last_chunk::<N>()) {
            *d = *s;
        }
    }
    let n = src.len();
    if dst.len() != n {
        return;
    }
    match n {
        0 => {}
        1..=3 => {
            // The first, the middle and the last byte (some the same).
            for i in [0, n / 2, n - 1] {
                if let (Some(d), Some(&s)) = (dst.get_mut(i), src.get(i)) {
                    *d = s;
                }
            }
        }
        4..=7 => ends::<4>(dst, src),
        8..=15 => ends::<8>(dst, src),
        16..=32 => ends::<16>(dst, src),
        33..=64 => ends::<32>(dst, src),
        _ => dst.copy_from_slice(src),
    }
}

/// Exchanges the elements of `a` and `b`, touching only those in use: one by one
/// (most requests have one id and one header; `swap_with_slice`'s general copy
/// was ~35 instructions for one), the longer one's tail moved only if there is one.
fn swap_used<T, const N: usize>(a: &mut ArrayVec<T, N>, b: &mut ArrayVec<T, N>) {
    let common = a.len().min(b.len());
    for (x, y) in a.iter_mut().zip(b.iter_mut()) {
        core::mem::swap(x, y);
    }
    // The longer one's tail moves over; both have room for it (same capacity).
    if a.len() > common {
        b.extend(a.drain(common..));
    } else if b.len() > common {
        a.extend(b.drain(common..));
    }
}

/// What adapters use to fill a [`Prepared`]: one writer per preparation, which
/// empties the request first and marks it ready last, so a failure in between
/// leaves it empty.
pub(crate) struct Writer<'p> {
    p: &'p mut Prepared,
    mark: usize,
    /// Bytes that were not UTF-8 were offered (and left out): the request is
    /// refused at [`Writer::finish`], never sent with a hole in it.
    not_text: bool,
}

impl Sink for Writer<'_> {
    fn text(&mut self, s: &str) {
        self.s(s);
    }

    fn int(&mut self, n: i64) {
        Writer::int(self, n);
    }
}

impl<'p> Writer<'p> {
    /// Empties `p` and starts a request.
    pub(crate) fn start(p: &'p mut Prepared) -> Self {
        p.bytes.clear();
        Writer::keeping_bytes(p)
    }

    /// Empties `p` but for its bytes, and starts a request.
    fn keeping_bytes(p: &'p mut Prepared) -> Self {
        let mut w = Writer {
            p,
            mark: 0,
            not_text: false,
        };
        w.clear_records();
        w
    }

    /// Empties the request but for its bytes (what a resumed order recorded,
    /// before it is recorded again).
    pub(crate) fn clear_records(&mut self) {
        let p = &mut *self.p;
        p.kind = None;
        p.method = None;
        p.parts.clear();
        p.target = 0..0;
        p.headers.clear();
        p.body = 0..0;
        p.http_line = 0;
        p.deadline_ns = 0;
        p.ids.clear();
        p.symbol.clear();
        p.label = Label::NONE;
        p.unsigned = None;
        p.layout = 0;
        p.parts_key = 0;
    }

    /// Starts a request over the order `p` holds if its bytes are a whole order of
    /// `layout` (a template's, with fields of the same lengths: set by
    /// [`Writer::layout`] when it was written); else `None`, and `p` is untouched.
    /// The bytes stay, for the fields to be written over in place
    /// ([`Writer::over`]): the template's literals are where they were, with no
    /// copy. So does everything else the order recorded (parts, spans, symbol,
    /// id), for [`Writer::again`] to change only what differs; until then `p` is
    /// empty ([`Prepared::is_empty`]) and holds no layout, so a resume that fails
    /// half-way leaves nothing to send or to resume.
    pub(crate) fn resume(p: &'p mut Prepared, layout: u128) -> Option<Self> {
        if !p.holds(layout) {
            return None;
        }
        p.kind = None;
        p.layout = 0;
        Some(Writer {
            p,
            mark: 0,
            not_text: false,
        })
    }

    /// Marks a resumed order ([`Writer::resume`]) ready as `kind` again, of
    /// `layout`, with the client order id `id` (of the length of the one it
    /// replaces) and `deadline_ns`, unlabeled. Everything else is what the order it
    /// was resumed from recorded: the caller resumes only an order it wrote whole,
    /// of the same template, key and parts, with fields of the same lengths, so
    /// its method, parts, target, headers and symbol are this order's too. `Err`
    /// (and the request left empty) if it names no order.
    pub(crate) fn again(
        self,
        (kind, layout): (Request<'static>, u128),
        id: ClientOrderId,
        deadline_ns: i64,
    ) -> Result<&'p Prepared, Error> {
        let first = self
            .p
            .ids
            .first_mut()
            .ok_or(Error::BadArgument("a template order's layout"))?;
        *first = id;
        self.p.label = Label::NONE;
        self.p.deadline_ns = deadline_ns;
        self.p.layout = layout;
        self.p.kind = Some(kind);
        Ok(self.p)
    }

    /// Marks the bytes written as a whole order of `layout` (see
    /// [`Writer::resume`]).
    pub(crate) fn layout(&mut self, layout: u128) {
        self.p.layout = layout;
    }

    /// Writes a resumed template order's fields over its bytes in place, and
    /// says where the literal after them ends: three texts, then a timestamp of
    /// 13 digits (a millisecond timestamp from 2001 to 2286), each after a literal
    /// of the length `literals` gives (the fifth: the literal after the
    /// timestamp). Only the timestamp's last eight digits are written: the five
    /// before them are the resumed order's, the same by its layout (see
    /// `OrderTemplate::layout`). The places follow from the lengths (fixed by
    /// the order's layout): no walk over the template's runs; the bytes are cut
    /// in turn at each literal's and field's end (a compare a cut, no sum to
    /// check). An empty text writes nothing. `Err` if the timestamp has another
    /// length or the bytes are shorter.
    #[inline(always)]
    pub(crate) fn over_fields(
        &mut self,
        literals: [usize; 5],
        texts: [&str; 3],
        ts: i64,
    ) -> Result<usize, Error> {
        let bad = Error::BadArgument("a template order's layout");
        let low = u64::try_from(ts)
            .ok()
            .filter(|ts| (1_000_000_000_000..10_000_000_000_000).contains(ts))
            .ok_or(Error::BadArgument("a timestamp of 13 digits"))?
            % 100_000_000;
        let [first, second, third, before_ts, after_ts] = literals;
        let len = self.p.bytes.len();
        let mut rest = self.p.bytes.as_mut_slice();
        for (lit, text) in [first, second, third].into_iter().zip(texts) {
            let (field, after) = rest
                .get_mut(lit..)
                .and_then(|r| r.split_at_mut_checked(text.len()))
                .ok_or(bad)?;
            put_short(field, text.as_bytes());
            rest = after;
        }
        let (slot, after) = rest
            .get_mut(before_ts + 5..)
            .and_then(|r| r.split_first_chunk_mut::<8>())
            .ok_or(bad)?;
        *slot = eight_digits(low as u32);
        (len - after.len()).checked_add(after_ts).ok_or(bad)
    }

    /// Writes the lower-case hex of `mac` over the 64 bytes at `at`.
    #[inline]
    pub(crate) fn over_mac_hex(&mut self, at: usize, mac: &[u8; 32]) -> Result<(), Error> {
        self.over_ascii(at, &hex32(mac))
    }

    /// Writes `b` (text: a `&str`'s bytes, digits, hex) over the bytes at `at`.
    /// Every byte it replaces is ASCII (a resumed order's field), so the bytes
    /// stay text.
    #[inline(always)]
    fn over_ascii(&mut self, at: usize, b: &[u8]) -> Result<(), Error> {
        let slot = self
            .p
            .bytes
            .get_mut(at..at + b.len())
            .ok_or(Error::BadArgument("a template order's layout"))?;
        slot.copy_from_slice(b);
        Ok(())
    }

    /// Appends bytes an adapter hands over, checked as UTF-8; any other makes the
    /// request fail at [`Writer::finish`].
    pub(crate) fn put(&mut self, b: &[u8]) {
        match core::str::from_utf8(b) {
            Ok(s) => self.s(s),
            Err(_) => self.not_text = true,
        }
    }

    /// Appends a string.
    #[inline]
    pub(crate) fn s(&mut self, s: &str) {
        self.p.bytes.extend_from_slice(s.as_bytes());
    }

    /// Appends ASCII this writer made from its own tables (digits, hex, base64,
    /// percent-encoding): text by construction, so not checked. Private to this
    /// file, which is what keeps [`Prepared`]'s bytes text.
    #[inline]
    fn ascii(&mut self, b: &[u8]) {
        debug_assert!(b.is_ascii());
        self.p.bytes.extend_from_slice(b);
    }

    /// Appends a decimal integer, two digits a step from a table and the sign in
    /// the same buffer: one append (a 13-digit timestamp took ~140 instructions a
    /// digit at a time and two appends for a negative number), and no UTF-8 check
    /// of the digits (~110 instructions for a timestamp's).
    #[inline]
    pub(crate) fn int(&mut self, n: i64) {
        let mut buf = [0u8; 20];
        self.ascii(digits(n, &mut buf));
    }

    /// Appends lower-case hex of `bytes`, 32 bytes (a MAC) in one append: a
    /// signature is on every signed request's path, and an append per byte cost
    /// ~15 instructions a byte in capacity checks and calls.
    ///
    /// Each chunk's digits are made at once by [`hex32`] (a shorter last chunk
    /// padded with zeros, its padding's digits left out).
    pub(crate) fn hex(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(32) {
            let mut padded = [0u8; 32];
            padded[..chunk.len()].copy_from_slice(chunk);
            self.ascii(&hex32(&padded)[..2 * chunk.len()]);
        }
    }

    /// Appends `lead` (a short literal: `&signature=`) and the lower-case hex of a
    /// MAC in one append: the signature of every HMAC-signed template order.
    #[inline]
    pub(crate) fn mac_hex(&mut self, lead: &'static str, mac: &[u8; 32]) {
        const LEAD: usize = 16;
        let Some(head) = lead
            .as_bytes()
            .get(..LEAD.min(lead.len()))
            .filter(|h| h.len() == lead.len())
        else {
            self.s(lead);
            self.hex(mac);
            return;
        };
        let mut out = [0u8; LEAD + 64];
        out[..head.len()].copy_from_slice(head);
        out[head.len()..head.len() + 64].copy_from_slice(&hex32(mac));
        // `lead` whole (text) and hex digits (ASCII).
        self.p.bytes.extend_from_slice(&out[..head.len() + 64]);
    }

    /// Records a header named `name` whose value was written at `at` (with the
    /// text around it, in one run).
    pub(crate) fn header_at(&mut self, name: &'static str, at: Range<usize>) -> Result<(), Error> {
        self.p
            .headers
            .try_push((name, at))
            .map_err(|_| Error::BadArgument("too many headers"))
    }

    /// Appends `s` percent-encoded: every byte but `A-Z a-z 0-9 - . _ ~` as `%XX`
    /// (a JSON value inside a query string).
    pub(crate) fn enc(&mut self, s: &str) {
        const HEX: &[u8; 16] = b"0123456789ABCDEF";
        for &c in s.as_bytes() {
            if c.is_ascii_alphanumeric() || b"-._~".contains(&c) {
                self.ascii(&[c]);
            } else {
                self.ascii(&[b'%', HEX[usize::from(c >> 4)], HEX[usize::from(c & 15)]]);
            }
        }
    }

    /// Appends `"name":"value"` after a `,` unless `first` (values are checked
    /// arguments: no quote or backslash to escape).
    pub(crate) fn json(&mut self, first: &mut bool, name: &str, value: &str) {
        if !core::mem::take(first) {
            self.s(",");
        }
        self.s("\"");
        self.s(name);
        self.s("\":\"");
        self.s(value);
        self.s("\"");
    }

    /// Appends standard base64 (with padding) of `bytes`.
    pub(crate) fn base64(&mut self, bytes: &[u8]) {
        const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for chunk in bytes.chunks(3) {
            let b = [
                chunk[0],
                chunk.get(1).copied().unwrap_or(0),
                chunk.get(2).copied().unwrap_or(0),
            ];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            let out = [
                B64[(n >> 18) as usize & 63],
                B64[(n >> 12) as usize & 63],
                if chunk.len() > 1 {
                    B64[(n >> 6) as usize & 63]
                } else {
                    b'='
                },
                if chunk.len() > 2 {
                    B64[n as usize & 63]
                } else {
                    b'='
                },
            ];
            self.ascii(&out);
        }
    }

    /// Where the next byte goes.
    pub(crate) fn pos(&self) -> usize {
        self.p.bytes.len()
    }

    /// The bytes written in `at`.
    pub(crate) fn bytes(&self, at: Range<usize>) -> &[u8] {
        self.p.bytes.get(at).unwrap_or(&[])
    }

    /// Starts a span (target, header value or body) at the current position.
    pub(crate) fn open(&mut self) {
        self.mark = self.pos();
    }

    /// Leaves the signature of the bytes in `payload` to be written later, at
    /// `payload.end` ([`Prepared::insert_signature`]); finishing reserves its
    /// room, so that writing it allocates nothing.
    pub(crate) fn defer_signature(&mut self, payload: Range<usize>) {
        self.p.unsigned = Some(payload);
    }

    /// Ends the target span.
    pub(crate) fn close_target(&mut self) {
        self.p.target = self.mark..self.pos();
    }

    /// The target span is `at` (written in one run with what precedes it).
    pub(crate) fn target_at(&mut self, at: Range<usize>) {
        self.p.target = at;
    }

    /// Marks the bytes written as the whole request as HTTP/1.1 sends it but for
    /// its `Host` line, whose request line ends at `line_end` ([`Prepared::http`]).
    /// Only a writer whose every byte is valid on the wire by construction calls
    /// this (a template whose literals were checked when it was built, and fields of
    /// types that admit only such bytes).
    pub(crate) fn http(&mut self, line_end: usize) {
        self.p.http_line = line_end;
    }

    /// Ends a header value span, named `name`.
    pub(crate) fn close_header(&mut self, name: &'static str) -> Result<(), Error> {
        let at = self.mark..self.pos();
        self.p
            .headers
            .try_push((name, at))
            .map_err(|_| Error::BadArgument("too many headers"))
    }

    /// Writes a whole header.
    pub(crate) fn header(&mut self, name: &'static str, value: &[u8]) -> Result<(), Error> {
        self.open();
        self.put(value);
        self.close_header(name)
    }

    /// Writes a whole header whose value is text already (no UTF-8 check).
    pub(crate) fn header_str(&mut self, name: &'static str, value: &str) -> Result<(), Error> {
        self.open();
        self.s(value);
        self.close_header(name)
    }

    /// Ends the body span.
    pub(crate) fn close_body(&mut self) {
        self.p.body = self.mark..self.pos();
    }

    /// The body span written so far.
    pub(crate) fn body_span(&self) -> Range<usize> {
        self.p.body.clone()
    }

    /// Records the symbol the request names (`None`: none).
    pub(crate) fn symbol<'s>(&mut self, symbol: impl Into<Option<Symbol<'s>>>) {
        self.p.symbol.clear();
        if let Some(s) = symbol.into() {
            // A Symbol is at most 32 bytes: it always fits.
            let _ = self.p.symbol.try_push_str(s.as_str());
        }
    }

    /// Records the symbol the request names, from text a [`Symbol`] was checked
    /// into before (a template's).
    pub(crate) fn symbol_text(&mut self, symbol: &ArrayString<32>) {
        self.p.symbol = *symbol;
    }

    /// Records a client order id.
    pub(crate) fn id(&mut self, id: ClientOrderId) -> Result<(), Error> {
        self.p
            .ids
            .try_push(id)
            .map_err(|_| Error::BadArgument("more orders than MAX_BATCH"))
    }

    /// Marks the request ready like [`Writer::finish`], with parts the adapter
    /// computed from state it keeps instead of `venue.parts(kind)` (Kraken's cancel
    /// and amend cost, by the age of the order it placed).
    pub(crate) fn finish_with(
        self,
        parts: Parts,
        kind: Request<'static>,
        method: Method,
        deadline_ns: i64,
    ) -> Result<&'p Prepared, Error> {
        let set = |p: &mut Parts| {
            *p = parts;
            Ok(())
        };
        self.ready(set, (kind, method, deadline_ns))
    }

    /// Names the parts [`Writer::finish_parts`] sets ([`Prepared::parts_key`]):
    /// `key` must be given to no other list.
    pub(crate) fn parts_key(&mut self, key: u64) {
        self.p.parts_key = key;
    }

    /// Marks the request ready like [`Writer::finish_with`], with parts kept from
    /// an earlier ask of the adapter (a template's: copied in one piece, no list
    /// built per request).
    pub(crate) fn finish_parts(
        self,
        parts: &[ergon_core::Part],
        kind: Request<'static>,
        method: Method,
        deadline_ns: i64,
    ) -> Result<&'p Prepared, Error> {
        let copy = |p: &mut Parts| {
            p.clear();
            p.try_extend_from_slice(parts)
                .map_err(|_| Error::Config(ergon_core::ConfigError::TooManyParts))
        };
        self.ready(copy, (kind, method, deadline_ns))
    }

    /// Marks the request ready: its kind, the parts `venue` charges for it, its
    /// method and deadline. The parts are asked of the venue here, from the kind
    /// the same call wrote the target for.
    pub(crate) fn finish<V: Venue + ?Sized>(
        self,
        venue: &V,
        kind: Request<'static>,
        method: Method,
        deadline_ns: i64,
    ) -> Result<&'p Prepared, Error> {
        let ask = |p: &mut Parts| {
            *p = venue.parts(kind)?;
            Ok(())
        };
        self.ready(ask, (kind, method, deadline_ns))
    }

    /// Refuses a request offered bytes that are not text; else sets its parts with
    /// `parts` (which may refuse it too) and marks it ready.
    #[inline]
    fn ready(
        self,
        parts: impl FnOnce(&mut Parts) -> Result<(), Error>,
        (kind, method, deadline_ns): (Request<'static>, Method, i64),
    ) -> Result<&'p Prepared, Error> {
        if self.not_text {
            return Err(Error::BadArgument("bytes that are not text"));
        }
        if self.p.unsigned.is_some() {
            self.p.bytes.reserve(SIGNATURE_ROOM);
        }
        parts(&mut self.p.parts)?;
        self.p.kind = Some(kind);
        self.p.method = Some(method);
        self.p.deadline_ns = deadline_ns;
        Ok(self.p)
    }
}

#[cfg(test)]
mod tests;
