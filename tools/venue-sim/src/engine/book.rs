//! Orders as every profile books them: side, type, status, the order record, and
//! the exact decimals (units of 1e-8) prices and quantities are kept in.
//!
//! Plain data and pure functions: nothing here touches a socket, reads a clock or
//! knows which venue is played.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Buy,
    Sell,
}

impl Side {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Side::Buy => "BUY",
            Side::Sell => "SELL",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OrdType {
    Limit,
    LimitMaker,
    Market,
}

impl OrdType {
    pub(crate) fn name(self) -> &'static str {
        match self {
            OrdType::Limit => "LIMIT",
            OrdType::LimitMaker => "LIMIT_MAKER",
            OrdType::Market => "MARKET",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    New,
    Filled,
    Canceled,
    /// An immediate-or-cancel or fill-or-kill limit order that met nothing.
    Expired,
}

impl Status {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Status::New => "NEW",
            Status::Filled => "FILLED",
            Status::Canceled => "CANCELED",
            Status::Expired => "EXPIRED",
        }
    }
}

/// What a placement books, whatever the venue.
pub(crate) struct Placement {
    pub(crate) side: Side,
    pub(crate) kind: OrdType,
    pub(crate) tif: &'static str,
    pub(crate) qty_e8: u64,
    pub(crate) price_e8: u64,
}

#[derive(Clone, Debug)]
pub(crate) struct Order {
    pub(crate) order_id: u64,
    pub(crate) account: usize,
    pub(crate) client_id: String,
    pub(crate) side: Side,
    pub(crate) kind: OrdType,
    pub(crate) tif: &'static str,
    pub(crate) price_e8: u64,
    pub(crate) qty_e8: u64,
    pub(crate) executed_e8: u64,
    pub(crate) status: Status,
    pub(crate) time: i64,
    pub(crate) update_time: i64,
    /// The WebSocket connection that created it, where the venue cancels a
    /// connection's orders when it ends (Deribit's cancel-on-disconnect);
    /// `None` for every other order.
    pub(crate) conn: Option<u64>,
}

/// One tick of the synthetic book (0.01), in units of 1e-8: its best bid and
/// ask are this far from the mid.
pub(crate) const BOOK_TICK_E8: u64 = 1_000_000;

/// What becomes of a new order at once against the synthetic book: a market
/// order fills; an immediate-or-cancel or fill-or-kill limit order fills if it
/// reaches the best price of the other side (whole: the book's depth is not
/// modelled) and expires otherwise; any other order rests.
pub(crate) fn fate(new: &Placement, mid_e8: u64) -> Status {
    let immediate = matches!(
        new.tif,
        "IOC" | "FOK" | "immediate_or_cancel" | "fill_or_kill"
    );
    let crosses = match new.side {
        Side::Buy => new.price_e8 >= mid_e8.saturating_add(BOOK_TICK_E8),
        Side::Sell => new.price_e8 <= mid_e8.saturating_sub(BOOK_TICK_E8),
    };
    match (new.kind, immediate, crosses) {
        (OrdType::Market, ..) | (_, true, true) => Status::Filled,
        (_, true, false) => Status::Expired,
        _ => Status::New,
    }
}

/// Parses a non-negative decimal into units of 1e-8; `None` if malformed or too precise.
pub(crate) fn parse_e8(s: &str) -> Option<u64> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if int.len() > 11 {
        return None;
    }
    let frac_trim = frac.trim_end_matches('0');
    if frac_trim.len() > 8 {
        return None;
    }
    let i: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut f: u64 = if frac_trim.is_empty() {
        0
    } else {
        frac_trim.parse().ok()?
    };
    for _ in frac_trim.len()..8 {
        f *= 10;
    }
    i.checked_mul(100_000_000)?.checked_add(f)
}

pub(crate) fn fmt_e8(v: u64) -> String {
    format!("{}.{:08}", v / 100_000_000, v % 100_000_000)
}

pub(crate) fn valid_client_id(s: &str) -> bool {
    (1..=36).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b':' | b'/' | b'_' | b'-'))
}

pub(crate) fn quote(price_e8: u64, qty_e8: u64) -> u64 {
    let q = u128::from(price_e8) * u128::from(qty_e8) / 100_000_000;
    u64::try_from(q).unwrap_or(u64::MAX)
}

pub(crate) fn quote_asset(sym: &str) -> &str {
    for q in ["USDT", "USDC", "FDUSD", "BTC", "ETH", "BNB"] {
        if sym.len() > q.len() && sym.ends_with(q) {
            return q;
        }
    }
    "USDT"
}

pub(crate) fn base_asset(sym: &str) -> &str {
    let q = quote_asset(sym);
    sym.strip_suffix(q).unwrap_or(sym)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_parse_exactly() {
        assert_eq!(parse_e8("0.1"), Some(10_000_000));
        assert_eq!(parse_e8("1"), Some(100_000_000));
        assert_eq!(parse_e8("1.000000000"), Some(100_000_000));
        assert_eq!(parse_e8(".5"), Some(50_000_000));
        assert_eq!(parse_e8("0.000000001"), None);
        assert_eq!(parse_e8("-1"), None);
        assert_eq!(parse_e8("1e3"), None);
        assert_eq!(parse_e8(""), None);
        assert_eq!(fmt_e8(123_456_789), "1.23456789");
    }

    #[test]
    fn assets_split_from_the_symbol() {
        assert_eq!(base_asset("BTCUSDT"), "BTC");
        assert_eq!(quote_asset("ETHBTC"), "BTC");
    }
}
