//! What a dead gateway left in flight, settled by the next: each order its
//! journal still holds is queried by client order id under the gateway's rule
//! ([`ergon_gateway::Gateway::recover`]: found, or not found by a query sent
//! after the venue's bound, else `Unresolved`), and its entry is cleared only by
//! a definite answer (`Reconciled`); any other end leaves it for the next start.
//!
//! Sans-IO: it drives whatever [`Recoverer`] it is given (the daemon's loop,
//! [`Api`]; or a caller that drives a [`Gateway`] on its own [`Wire`], as the
//! simulator does), and reads no clock.

use ergon_gateway::{Account, Api, Event, Gateway, ItemFate, Prepared, Tag, Wire, OPEN_ORDERS};
use ergon_venues::endpoint::{ClientOrderId, OrderRef, Symbol};

use super::journal::{Found, Journal};

/// The tag bit of the queries of what a dead gateway left in flight (the low 32
/// bits are the journal entry).
pub const RECOVER: u64 = 1 << 47;

/// What [`Recovery`] needs of a gateway: its time, its venue (to prepare each
/// query) and [`Gateway::recover`].
pub trait Recoverer<E: Account> {
    /// This turn's time.
    fn now(&self) -> i64;
    /// The gateway's venue adapter.
    fn venue_mut(&mut self) -> &mut E;
    /// [`Gateway::recover`]: `query` enters the ledger under `tag`.
    fn recover(&mut self, query: &mut Prepared, tag: Tag) -> Result<(), Event<'static>>;
}

impl<E: Account> Recoverer<E> for Api<'_, '_, E> {
    fn now(&self) -> i64 {
        Api::now(self)
    }

    fn venue_mut(&mut self) -> &mut E {
        Api::venue_mut(self)
    }

    fn recover(&mut self, query: &mut Prepared, tag: Tag) -> Result<(), Event<'static>> {
        Api::recover(self, query, tag)
    }
}

/// A gateway and the wire its caller drives it on (no event loop of ours).
pub struct Driven<'a, E, W> {
    /// The gateway.
    pub gw: &'a mut Gateway<E>,
    /// Its transport and budget.
    pub wire: &'a mut W,
}

impl<E: Account, W: Wire> Recoverer<E> for Driven<'_, E, W> {
    fn now(&self) -> i64 {
        self.wire.now()
    }

    fn venue_mut(&mut self) -> &mut E {
        self.gw.venue_mut()
    }

    fn recover(&mut self, query: &mut Prepared, tag: Tag) -> Result<(), Event<'static>> {
        self.gw.recover(self.wire, query, tag)
    }
}

/// The hub's journal rule, stated once (the hub and the simulator's restarts
/// call it): a request's final event `ev` leaves its new order's outcome
/// unknown when it is `Unresolved`, or a `BatchSettled` whose part 0 (a
/// replace's new order) ended `Unresolved` (`part0`: the fate the request heard
/// for its part 0, if any). Only such an order keeps its journal entry, for the
/// next start to query; and only such an order, found by a later start's
/// recovery, is owed a `Late` (a part 0 heard before a kill is known).
pub fn outcome_unknown(ev: &Event<'_>, part0: Option<ItemFate>) -> bool {
    match ev {
        Event::Unresolved { .. } => true,
        Event::BatchSettled { .. } => part0 == Some(ItemFate::Unresolved),
        _ => false,
    }
}

/// The orders a journal held at open, on their way to a definite answer.
#[derive(Debug, Default)]
pub struct Recovery {
    /// Still to query (entry, order).
    left: Vec<(u32, Found)>,
    in_flight: usize,
    /// Orders queried (and of them, found at the venue).
    pub recovered: (u64, u64),
}

impl Recovery {
    /// The orders [`Journal::open`] returned (entry, order).
    pub fn new(left: Vec<(u32, Found)>) -> Recovery {
        Recovery {
            left,
            in_flight: 0,
            recovered: (0, 0),
        }
    }

    /// Orders still to query or queried without a final event yet.
    pub fn pending(&self) -> usize {
        self.left.len() + self.in_flight
    }

    /// Orders not queried yet (the gateway had no room: [`Recovery::step`] again
    /// on a later turn).
    pub fn to_query(&self) -> usize {
        self.left.len()
    }

    /// Whether `tag` is one of a recovery's queries (its events go to
    /// [`Recovery::on_event`]).
    pub fn owns(tag: Tag) -> bool {
        tag & RECOVER != 0 && tag != OPEN_ORDERS
    }

    /// Queries each order left (by client order id), as long as the gateway has
    /// room; call it each turn until [`Recovery::pending`] is 0. One whose query
    /// cannot be prepared stays in the journal for the next start.
    pub fn step<E: Account>(
        &mut self,
        api: &mut impl Recoverer<E>,
        req: &mut Prepared,
        mut journal: Option<&mut Journal>,
    ) {
        while let Some((i, f)) = self.left.pop() {
            let now = api.now();
            let (Ok(symbol), Ok(id)) = (Symbol::new(&f.symbol), ClientOrderId::new(&f.id)) else {
                continue;
            };
            let it = OrderRef {
                symbol,
                client_order_id: id,
            };
            if api.venue_mut().query_order(req, &it, now).is_err() {
                continue;
            }
            // Reconciled under the gateway's rule: NotFound only after the venue's
            // bound, else Unresolved (never "it never ran" from one early query).
            match api.recover(req, RECOVER | u64::from(i)) {
                Ok(()) => self.in_flight += 1,
                Err(Event::Limited { .. }) => {
                    // No room now: again next turn.
                    self.left.push((i, f));
                    return;
                }
                Err(ev) => {
                    self.in_flight += 1;
                    self.on_event(journal.as_deref_mut(), &ev);
                }
            }
        }
    }

    /// One event of a recovery's query ([`Recovery::owns`] its tag).
    pub fn on_event(&mut self, journal: Option<&mut Journal>, ev: &Event<'_>) {
        if !ev.is_final() {
            return;
        }
        // Only a definite answer clears the entry (found, or NotFound under
        // the venue's bound); any other end leaves it for the next start.
        if let (Some(j), Event::Reconciled { .. }) = (journal, ev) {
            j.clear(ev.tag() as u32);
        }
        self.in_flight = self.in_flight.saturating_sub(1);
        self.recovered.0 += 1;
        let found = match ev {
            Event::Applied { .. } => true,
            Event::Reconciled { found, .. } => found.is_some(),
            _ => false,
        };
        self.recovered.1 += u64::from(found);
    }
}
