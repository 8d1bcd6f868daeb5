//! The quoter's strategy core: what to quote and what each final event means for
//! it. It never sees a connection, a budget or a venue's answer; the two modes
//! (in-process, through the daemon) hand it a [`Desk`] to send on and tell it each
//! request's [`Fate`]. The book's first chapter includes this file.

use ergon_venues::endpoint::{
    ClientOrderId, Decimal, NewOrder, OrderRef, OrderType, Side, Symbol, TimeInForce,
};

// ANCHOR: desk
/// What the core needs from a mode: fresh client order ids and a way to send.
/// `place` and `cancel` return false when the request was refused at once
/// (nothing sent: the budget, a full ring, a bad id).
pub trait Desk {
    /// A client order id no earlier request carried.
    fn next_id(&mut self) -> Option<ClientOrderId>;
    /// Sends a new order under `tag`.
    fn place(&mut self, order: &NewOrder<'_>, tag: u64) -> bool;
    /// Sends a cancel of one order under `tag`.
    fn cancel(&mut self, order: &OrderRef<'_>, tag: u64) -> bool;
}

/// What a request's one final event says about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// It ran at the venue (Applied, or reconciled and found).
    Ran,
    /// It surely did not run (Rejected, Limited, Expired, Halted, DuplicateId,
    /// or reconciled and not found).
    DidNotRun,
    /// Nobody knows (Unresolved, or the daemon went away with it in flight):
    /// never assume it did not run.
    Unknown,
}
// ANCHOR_END: desk

/// The run's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Quotes sent.
    pub placed: u64,
    /// Quotes the venue took.
    pub rested: u64,
    /// Cancels sent.
    pub cancels: u64,
    /// Cancels that ran.
    pub cancelled: u64,
    /// Requests refused at once or that did not run.
    pub refused: u64,
    /// Requests whose outcome stayed unknown.
    pub unknown: u64,
}

#[derive(Clone, Copy)]
enum Sent {
    Quote(usize, ClientOrderId),
    Cancel(ClientOrderId),
}

/// One bid and one ask around a mid, re-quoted every second.
pub struct Quoter {
    symbol: Symbol<'static>,
    mid_cents: u64,
    spread_cents: u64,
    qty: &'static str,
    /// The quote each side may have on the book (rests, or its outcome unknown).
    resting: [Option<ClientOrderId>; 2],
    /// Orders to cancel: old quotes, and quotes whose outcome is unknown.
    to_cancel: Vec<ClientOrderId>,
    in_flight: Vec<(u64, Sent)>,
    seq: u64,
    stopping: bool,
    /// What happened.
    pub counts: Counts,
}

impl Quoter {
    /// A quoter on `symbol`, `spread_cents` either side of `mid_cents`, `qty` a quote.
    pub fn new(
        symbol: Symbol<'static>,
        mid_cents: u64,
        spread_cents: u64,
        qty: &'static str,
    ) -> Self {
        Quoter {
            symbol,
            mid_cents,
            spread_cents,
            qty,
            resting: [None, None],
            to_cancel: Vec::new(),
            in_flight: Vec::new(),
            seq: 0,
            stopping: false,
            counts: Counts::default(),
        }
    }

    // ANCHOR: requote
    /// Once a second: cancel the quotes on the book, then quote both sides afresh
    /// (the mid moves a cent a second, so every quote is new).
    pub fn requote(&mut self, desk: &mut impl Desk, second: u64) {
        self.cancel_all(desk);
        if self.stopping {
            return;
        }
        let mid = self.mid_cents + second % 10;
        for (i, side) in [Side::Buy, Side::Sell].into_iter().enumerate() {
            if self.resting[i].is_some() || self.pending_quote(i) {
                continue; // its last quote has not ended yet
            }
            let cents = match side {
                Side::Buy => mid - self.spread_cents,
                Side::Sell => mid + self.spread_cents,
            };
            let price = format!("{}.{:02}", cents / 100, cents % 100);
            let Some(id) = desk.next_id() else { return };
            let order = NewOrder {
                symbol: self.symbol,
                side,
                order_type: OrderType::Limit(TimeInForce::Gtc),
                price: Decimal::new(&price).ok(),
                quantity: Decimal::new(self.qty).expect("a decimal quantity"),
                client_order_id: id,
                reduce_only: false,
            };
            let tag = self.tag();
            self.counts.placed += 1;
            match desk.place(&order, tag) {
                true => self.in_flight.push((tag, Sent::Quote(i, id))),
                false => self.counts.refused += 1,
            }
        }
    }
    // ANCHOR_END: requote

    // ANCHOR: fate
    /// A request's one final event, as its [`Fate`].
    pub fn on_final(&mut self, tag: u64, fate: Fate) {
        let Some(at) = self.in_flight.iter().position(|(t, _)| *t == tag) else {
            return; // not ours (the gateway's own polls)
        };
        let (_, sent) = self.in_flight.swap_remove(at);
        match (sent, fate) {
            (Sent::Quote(side, id), Fate::Ran) => {
                self.counts.rested += 1;
                self.resting[side] = Some(id);
            }
            // Unknown: it may rest. Cancel it like a quote that rests.
            (Sent::Quote(_, id), Fate::Unknown) => {
                self.counts.unknown += 1;
                self.to_cancel.push(id);
            }
            (Sent::Cancel(_), Fate::Ran) => self.counts.cancelled += 1,
            // Refused: the order had ended already (filled, or never placed).
            (Sent::Cancel(_), Fate::DidNotRun) | (Sent::Quote(..), Fate::DidNotRun) => {
                self.counts.refused += 1
            }
            // A cancel whose outcome is unknown is sent again: cancelling twice is harmless.
            (Sent::Cancel(id), Fate::Unknown) => {
                self.counts.unknown += 1;
                self.to_cancel.push(id);
            }
        }
    }
    // ANCHOR_END: fate

    /// Stops quoting: every quote that may rest is cancelled.
    pub fn stop(&mut self, desk: &mut impl Desk) {
        self.stopping = true;
        self.cancel_all(desk);
    }

    /// Whether the quoter has stopped and nothing it sent is still in flight or
    /// left to cancel.
    pub fn done(&self) -> bool {
        self.stopping
            && self.in_flight.is_empty()
            && self.to_cancel.is_empty()
            && self.resting == [None, None]
    }

    /// Whether it is stopping (cancels sent, waiting for their answers).
    pub fn stopping(&self) -> bool {
        self.stopping
    }

    fn cancel_all(&mut self, desk: &mut impl Desk) {
        for side in 0..2 {
            if let Some(id) = self.resting[side].take() {
                self.to_cancel.push(id);
            }
        }
        let ids: Vec<ClientOrderId> = self.to_cancel.drain(..).collect();
        for id in ids {
            let tag = self.tag();
            let order = OrderRef {
                symbol: self.symbol,
                client_order_id: id,
            };
            self.counts.cancels += 1;
            match desk.cancel(&order, tag) {
                true => self.in_flight.push((tag, Sent::Cancel(id))),
                false => self.to_cancel.push(id), // nothing sent: next second
            }
        }
    }

    fn pending_quote(&self, side: usize) -> bool {
        self.in_flight
            .iter()
            .any(|(_, s)| matches!(s, Sent::Quote(i, _) if *i == side))
    }

    fn tag(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }
}
