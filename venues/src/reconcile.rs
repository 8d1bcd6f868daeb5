//! What a venue says of one order looked up by its client order id: the answer a
//! reconcile reader gives for a request whose outcome was `Verdict::Unknown`
//! (ergon_core::Verdict). Every Unknown is settled this way, never by a re-send.

/// The state of an order the venue knows, or that it knows none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// On the book (new, partly filled, or accepted and not yet booked).
    Open,
    /// Fully filled.
    Filled,
    /// Cancelled or expired, with or without fills.
    Cancelled,
    /// Refused by the venue after it received it.
    Rejected,
    /// The venue knows no order with this client id: the request did not run.
    Absent,
}

/// Why an answer to an order query could not be read: ask again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// The body is not the venue's JSON, or lacks the field named.
    Body(&'static str),
    /// The venue answered the query itself with an error or this status (throttled,
    /// unavailable ...): the order's state is still unknown.
    NoAnswer(u16),
}

impl core::fmt::Display for ReadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ReadError::Body(what) => write!(f, "order query answer: {what} missing or bad"),
            ReadError::NoAnswer(status) => {
                write!(f, "order query not answered (status {status}): ask again")
            }
        }
    }
}
