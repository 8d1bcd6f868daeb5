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

/// A template's text: literal runs, each followed by an open field, then the
/// literal after the last field. Each run is its own string, so filling one copies
/// it as it is (no slicing of a shared text, with its bounds and character
/// boundary checks, per run per order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Runs {
    /// Each run: its literal, then the field after it.
    runs: ArrayVec<(String, Field), MAX_RUNS>,
    /// The literal after the last field (so far: the one being written).
    tail: String,
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

/// A `String` sink, for the tests that hold a `Text` to what a `String` gets.
#[cfg(test)]
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
        self.tail.push_str(s);
    }

    /// Closes the literal so far and leaves `field` open after it. `false` if the
    /// template has no room for another field (a template of [`MAX_RUNS`] fields
    /// is far more than an order has).
    pub(crate) fn field(&mut self, field: Field) -> bool {
        if self.runs.is_full() {
            return false;
        }
        self.runs.push((core::mem::take(&mut self.tail), field));
        true
    }

    /// The length of the literal after the last field (so far: of the one being
    /// written).
    pub(crate) fn tail_len(&self) -> usize {
        self.tail.len()
    }

    /// Writes the template with `v` into `out`, a copy per run and per field.
    #[inline]
    pub(crate) fn emit(&self, v: &Values<'_>, out: &mut impl Sink) {
        for (run, field) in &self.runs {
            out.text(run);
            match field {
                Field::Id => out.text(v.id),
                Field::Price => out.text(v.price),
                Field::Quantity => out.text(v.quantity),
                Field::Timestamp => out.int(v.timestamp),
                Field::RequestId => out.int(v.request_id),
            }
        }
        out.text(&self.tail);
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
    let mut i = buf.len();
    let mut v = n.unsigned_abs();
    // Eight digits at a time in 32-bit arithmetic, four pairs each (a millisecond
    // timestamp is 13 digits: one such step, then five), while more than eight
    // are left.
    while v >= 100_000_000 {
        let low = (v % 100_000_000) as u32;
        v /= 100_000_000;
        let (high4, low4) = (low / 10_000, low % 10_000);
        i -= 8;
        put_pair(buf, i, high4 / 100);
        put_pair(buf, i + 2, high4 % 100);
        put_pair(buf, i + 4, low4 / 100);
        put_pair(buf, i + 6, low4 % 100);
    }
    let mut v = v as u32;
    while v >= 100 {
        i -= 2;
        put_pair(buf, i, v % 100);
        v /= 100;
    }
    if v >= 10 {
        i -= 2;
        put_pair(buf, i, v);
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

/// The eight decimal digits of `v` (< 10^8, with leading zeros), as ASCII: a
/// timestamp's last eight, which change from one order to the next.
///
/// The two halves of four digits are split into pairs and then digits by
/// multiplying with fixed-point reciprocals, every lane of a word at once
/// ([`eight`]): no table and no loop (a 13-digit timestamp took ~65 two digits
/// a step).
#[inline(always)]
pub(crate) fn eight_digits(v: u32) -> [u8; 8] {
    (eight(v) + ASCII_ZEROS).to_le_bytes()
}

/// `b'0'` in each of 8 bytes.
const ASCII_ZEROS: u64 = 0x3030_3030_3030_3030;

/// The eight decimal digits of `v` (< 10^8, with leading zeros) as values 0-9, one
/// a byte, the first in the lowest byte.
///
/// The two halves of four digits sit in the two 32-bit lanes; each lane's hundreds
/// are `(x * 10486) >> 20` (exact below 10^4; a lane's product stays under 2^27,
/// so no lane carries into the next), its remainder goes to the lane's upper 16
/// bits; each 16-bit lane's tens are `(y * 103) >> 10` (exact below 100), its units
/// go to the upper byte.
#[inline(always)]
fn eight(v: u32) -> u64 {
    let x = u64::from(v / 10_000) | (u64::from(v % 10_000) << 32);
    let hundreds = ((x * 10_486) >> 20) & 0x0000_007F_0000_007F;
    let y = hundreds | ((x - hundreds * 100) << 16);
    let tens = ((y * 103) >> 10) & 0x000F_000F_000F_000F;
    tens | ((y - tens * 10) << 8)
}

/// The two digits of `pair` (< 100) at `buf[at..at + 2]`, from a table.
#[inline(always)]
fn put_pair(buf: &mut [u8; 20], at: usize, pair: u32) {
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let p = pair as usize * 2;
    buf[at..at + 2].copy_from_slice(&PAIRS[p..p + 2]);
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
            99_999_999,
            100_000_000,
            100_000_001,
            9_999_999_999_999_999,
            10_000_000_000_000_000,
            -100_000_000,
            -1,
            -10,
            i64::MAX,
            i64::MIN,
        ] {
            assert_eq!(decimal(n, &mut buf), n.to_string());
        }
        // Every length and a spread of digits at every position.
        let mut state: u64 = 1;
        for _ in 0..200_000 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            // A random value of a random length (0 to 63 bits), either sign.
            let n = ((state >> 1) >> (state % 64)) as i64;
            assert_eq!(digits(n, &mut buf), n.to_string().as_bytes());
            assert_eq!(digits(-n, &mut buf), (-n).to_string().as_bytes());
        }
        for k in 0..19 {
            let p = 10i64.pow(k);
            for n in [p - 1, p, p + 1] {
                assert_eq!(digits(n, &mut buf), n.to_string().as_bytes());
            }
        }
    }

    /// Every value of each four-digit lane, against the other lane's extremes and
    /// a spread (the lanes cannot carry into each other: see [`eight`]), and
    /// `eight_digits` across its range as `format!` writes it.
    #[test]
    fn eight_and_eight_digits_write_every_lane_value() {
        for a in 0..10_000u32 {
            for b in [0, a, 9_999 - a, 9_999, (a * 7_919) % 10_000] {
                for v in [a * 10_000 + b, b * 10_000 + a] {
                    let want: Vec<u8> = format!("{v:08}").bytes().map(|c| c - b'0').collect();
                    assert_eq!(eight(v).to_le_bytes().as_slice(), want, "{v}");
                }
            }
        }
        for v in (0..100_000_000)
            .step_by(7_919)
            .chain([99_999_999, 10_000_000, 9_999_999])
        {
            assert_eq!(eight_digits(v), *format!("{v:08}").as_bytes(), "{v}");
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
