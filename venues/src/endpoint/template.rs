//! Prepared order templates: the bytes of an order that do not change from one
//! order to the next (symbol, side, type, time in force, receive window, key)
//! written once, as literal runs between the few fields that do (price, quantity,
//! client order id, timestamp, the frame's request id). Filling one is a copy per
//! run and per field, where building the order param by param is a call and a
//! capacity check per name, separator and value.
//!
//! The adapters build their templates from the same rules their builders follow and
//! test them byte for byte against those builders (`binance_spot::OrderTemplate`,
//! `binance_spot_ws::FrameTemplate`).
//!
//! Filling never allocates once the caller's buffer has held one order.

use arrayvec::ArrayVec;

use super::{ClientOrderId, Decimal};

/// What changes from one order of a template to the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fill<'a> {
    /// The limit price; `None` only for a market order's template.
    pub price: Option<Decimal<'a>>,
    /// The quantity, in the venue's unit.
    pub quantity: Decimal<'a>,
    /// The caller's id for this order.
    pub client_order_id: ClientOrderId,
}

/// A field a template leaves open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Field {
    /// The client order id.
    Id,
    /// The price.
    Price,
    /// The quantity.
    Quantity,
    /// The request's UTC timestamp, ms (a decimal integer).
    Timestamp,
    /// A WebSocket frame's request id (a decimal integer).
    RequestId,
}

/// Most runs of one template (a WebSocket frame: seven).
const MAX_RUNS: usize = 12;

/// A template's text: literal runs, each followed by an open field or by nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Runs {
    text: String,
    /// Each run: the end of its literal in `text` (it starts where the run before
    /// it ended), then the field after it.
    runs: ArrayVec<(u16, Option<Field>), MAX_RUNS>,
    /// The literal after the last field.
    open_from: u16,
}

/// The values of one order's fields: text, and the two integers.
pub(crate) struct Values<'a> {
    pub(crate) id: &'a str,
    pub(crate) price: &'a str,
    pub(crate) quantity: &'a str,
    pub(crate) timestamp: i64,
    pub(crate) request_id: i64,
}

/// Where a template is written: text appended as it is, integers in decimal.
pub(crate) trait Sink {
    /// Appends `s`.
    fn text(&mut self, s: &str);
    /// Appends `n` in decimal.
    fn int(&mut self, n: i64);
}

impl Sink for String {
    fn text(&mut self, s: &str) {
        self.push_str(s);
    }

    fn int(&mut self, n: i64) {
        let mut buf = [0u8; 20];
        self.push_str(decimal(n, &mut buf));
    }
}

impl Runs {
    /// Appends literal text.
    pub(crate) fn lit(&mut self, s: &str) {
        self.text.push_str(s);
    }

    /// Closes the literal so far and leaves `field` open after it. `false` if the
    /// template has no room for another field (a template of [`MAX_RUNS`] fields
    /// is far more than an order has).
    pub(crate) fn field(&mut self, field: Field) -> bool {
        let Ok(end) = u16::try_from(self.text.len()) else {
            return false;
        };
        if self.runs.try_push((end, Some(field))).is_err() {
            return false;
        }
        self.open_from = end;
        true
    }

    /// Writes the template with `v` into `out`, a copy per run and per field.
    #[inline]
    pub(crate) fn emit(&self, v: &Values<'_>, out: &mut impl Sink) {
        let text = self.text.as_str();
        let mut from = 0;
        for &(end, field) in &self.runs {
            let end = usize::from(end);
            out.text(text.get(from..end).unwrap_or_default());
            from = end;
            match field {
                Some(Field::Id) => out.text(v.id),
                Some(Field::Price) => out.text(v.price),
                Some(Field::Quantity) => out.text(v.quantity),
                Some(Field::Timestamp) => out.int(v.timestamp),
                Some(Field::RequestId) => out.int(v.request_id),
                None => {}
            }
        }
        out.text(text.get(from..).unwrap_or_default());
    }
}

/// `n` in decimal into `buf`, checked as text: the digits written. See [`digits`].
pub(crate) fn decimal(n: i64, buf: &mut [u8; 20]) -> &str {
    // ASCII digits: the check is a short scan, and never fails.
    core::str::from_utf8(digits(n, buf)).unwrap_or("0")
}

/// `n` in decimal into `buf`, two digits a step from a table: the bytes written
/// (`-` and ASCII digits).
#[inline]
pub(crate) fn digits(n: i64, buf: &mut [u8; 20]) -> &[u8] {
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let mut i = buf.len();
    let mut v = n.unsigned_abs();
    while v >= 100 {
        let pair = usize::from((v % 100) as u8) * 2;
        v /= 100;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if v >= 10 {
        let pair = usize::from(v as u8) * 2;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        i -= 1;
        buf[i] = b'0' + v as u8;
    }
    if n < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_writes_every_integer_as_display_does() {
        let mut buf = [0u8; 20];
        for n in [
            0,
            7,
            10,
            99,
            100,
            1_499_827_319_559,
            -1,
            -10,
            i64::MAX,
            i64::MIN,
        ] {
            assert_eq!(decimal(n, &mut buf), n.to_string());
        }
    }

    #[test]
    fn runs_interleave_literals_and_fields() {
        let mut r = Runs::default();
        r.lit("a=");
        assert!(r.field(Field::Quantity));
        r.lit("&b=");
        assert!(r.field(Field::Timestamp));
        r.lit("!");
        let v = Values {
            id: "i",
            price: "p",
            quantity: "q",
            timestamp: 12,
            request_id: 0,
        };
        let mut out = String::new();
        r.emit(&v, &mut out);
        assert_eq!(out, "a=q&b=12!");
    }
}
