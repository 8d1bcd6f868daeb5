//! What the gateway needs from a venue beyond the venues crate's typed endpoints
//! ([`Endpoints`]: prepared requests, the query by client order id and its reader):
//! the venue's time and published limits for the bootstrap, re-anchoring its
//! clock, and reading which orders an open-orders answer lists.

use ergon_core::{BucketId, Builder, Part};
use ergon_io::Culprit;
use ergon_venues::adapt::{self, Clock};
use ergon_venues::endpoint::{ClientIds, Endpoints, Prepared};

/// What is added to a request's venue-side validity before a NotFound counts:
/// the clock anchor's error (half the time read's round trip) and the venue's own
/// clock drift, with room to spare.
pub const NOT_FOUND_MARGIN_NS: i64 = 1_000_000_000;

/// What the bootstrap ([`run`](super::run)) read: the anchored venue clock and
/// the published limits.
#[derive(Clone, Debug)]
pub struct Boot {
    /// The venue clock, anchored at the time read's round-trip midpoint.
    pub clock: Clock,
    /// The body of the venue's limits document, if it publishes one.
    pub limits: Option<Vec<u8>>,
}

/// An account's keys, as [`Account::declare`] takes them.
#[derive(Clone, Copy, Debug)]
pub struct Keys<'a> {
    /// The API key.
    pub api_key: &'a str,
    /// The secret: an HMAC secret, or (Binance) an Ed25519 private key's
    /// PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), told apart by its PEM block.
    pub secret: &'a [u8],
    /// The passphrase (OKX).
    pub passphrase: Option<&'a str>,
}

/// A venue's address budget as the gateway last read it (Hyperliquid's
/// `userRateLimit`, plus the requests sent since), for `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AddressBudget {
    /// Requests counted against the address.
    pub used: u64,
    /// The cap its volume earned (`nRequestsCap`).
    pub cap: u64,
    /// Requests bought (`nRequestsSurplus`).
    pub surplus: u64,
    /// Hours until it runs out at the pace between the last two readings
    /// (None: fewer than two, or not shrinking).
    pub forecast_hours: Option<f64>,
}

/// Why [`Account::declare`] refused: nothing was declared that the gateway
/// will use.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeclareError {
    /// The venue's signer refused the keys (an empty key, a secret it cannot
    /// use). [`Culprit::Caller`].
    Keys(adapt::Error),
    /// The venue's published limits (Binance `exchangeInfo`) could not be read
    /// or declared. [`Culprit::Peer`]: the venue's document.
    Limits(adapt::Error),
    /// The adapter's documented limits could not be declared in the builder.
    /// [`Culprit::Caller`].
    Buckets(adapt::Error),
    /// The venue signs with a passphrase (OKX) and none was given.
    /// [`Culprit::Caller`].
    NoPassphrase,
    /// The venue signs with the secret as text (Deribit) and it is not UTF-8.
    /// [`Culprit::Caller`].
    SecretNotUtf8,
}

impl DeclareError {
    /// Who is at fault: [`Culprit::Peer`] for the venue's published limits, else
    /// [`Culprit::Caller`] (the keys and configuration the caller gave).
    pub fn culprit(&self) -> Culprit {
        match self {
            DeclareError::Limits(_) => Culprit::Peer,
            DeclareError::Keys(_)
            | DeclareError::Buckets(_)
            | DeclareError::NoPassphrase
            | DeclareError::SecretNotUtf8 => Culprit::Caller,
        }
    }
}

impl core::fmt::Display for DeclareError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DeclareError::Keys(e) | DeclareError::Buckets(e) => write!(f, "{e}"),
            DeclareError::Limits(e) => write!(f, "exchangeInfo: {e}"),
            DeclareError::NoPassphrase => f.write_str("OKX needs the API passphrase"),
            DeclareError::SecretNotUtf8 => f.write_str("the secret is not UTF-8"),
        }
    }
}

impl std::error::Error for DeclareError {}

/// A venue account as the gateway drives it.
pub trait Account: Endpoints + ClientIds + Sized {
    /// Declares the venue's buckets in `builder` from what the bootstrap read (its
    /// published limits where it has them, else the adapter's documented defaults),
    /// with `keys` and `guard_ns` around fixed windows' boundaries.
    fn declare(
        boot: &Boot,
        builder: &mut Builder,
        keys: &Keys<'_>,
        guard_ns: i64,
    ) -> Result<Self, DeclareError>;

    /// Each counted limit's bucket and window, for a caller that sizes its load.
    fn windows(&self) -> Vec<(BucketId, i64)>;

    /// Whether `bucket` counts the account's requests from every host and key
    /// (the limits `--etcd` leases), not this IP's. Default: none.
    fn account_wide(&self, _bucket: BucketId) -> bool {
        false
    }

    /// `bucket`'s limit is a grant shared by several hosts (`ergon-lease`): the
    /// venue's account-wide usage figures for it must no longer raise it. Whether
    /// the adapter knows the bucket (default: it feeds no such figure).
    fn lease_bucket(&mut self, _bucket: BucketId) -> bool {
        false
    }

    /// The unsigned path that answers the venue's time.
    fn time_path() -> &'static str;

    /// The venue's time (UTC ms) in that answer.
    fn read_time(body: &[u8]) -> Option<i64>;

    /// The venue's own time stamped on the answer to a write (UTC ms: Binance
    /// Spot's `transactTime`, when its engine handled the order or cancel), with
    /// the clock the adapter reads the venue's time on: the evidence the gateway
    /// checks that clock against on every answer ([`Clock::narrowed`]), so that a
    /// step of the venue's clock moves the fixed windows at once. Only a time the
    /// venue wrote while handling this very request will do (never an order's
    /// creation time on a query). None by default: the venue stamps none, or the
    /// adapter does not read it.
    fn answer_time(&self, _body: &[u8]) -> Option<(Clock, i64)> {
        None
    }

    /// The unsigned path of the venue's published limits (Binance `exchangeInfo`),
    /// if it publishes them.
    fn limits_path() -> Option<&'static str>;

    /// The request that answers the venue's time: a GET of
    /// [`Account::time_path`] by default; a POST where the venue has no GET
    /// (Hyperliquid's `/info`).
    fn time_request() -> ergon_io::http::Request<'static> {
        ergon_io::http::Request::get(Self::time_path())
    }

    /// The venue's address budget as last read (None by default: no such
    /// budget, or not read yet).
    fn address_budget(&self) -> Option<AddressBudget> {
        None
    }

    /// How often the gateway reads the venue's account figures on its own
    /// ([`Account::sync_request`]); None (the default): never.
    fn sync_every_ns(&self) -> Option<i64> {
        None
    }

    /// The read of the venue's account figures (Hyperliquid's `userRateLimit`:
    /// the address budget), sent at `Class::Bulk` every
    /// [`Account::sync_every_ns`]; its answer goes to the adapter alone.
    /// [`adapt::Error::Unsupported`] by default.
    fn sync_request<'p>(
        &mut self,
        out: &'p mut Prepared,
        now: i64,
    ) -> Result<&'p Prepared, adapt::Error> {
        let _ = (out, now);
        Err(adapt::Error::Unsupported)
    }

    /// After a sync answer: whether the next sync request is due at once (an
    /// account action it decided on, such as Hyperliquid's purchase of address
    /// requests, or the reading after one). False by default.
    fn sync_again(&self) -> bool {
        false
    }

    /// The last [`Account::sync_request`] was never written (no room in the
    /// budget, no connection): whatever it counted is given back. Nothing by
    /// default.
    fn sync_unsent(&mut self) {}

    /// What a time read ([`Account::time_request`]) charges: a read of weight 1
    /// by default.
    fn time_kind() -> adapt::Request<'static> {
        adapt::Request::Read(1)
    }

    /// What the bootstrap's own requests ([`Account::time_request`],
    /// [`Account::limits_request`]) count on the venue, booked as spent in the
    /// first budget: a venue whose answers carry no usage figure (Hyperliquid)
    /// still counts them in its window. Default: none (the usage headers of the
    /// bootstrap's last answer book them).
    fn bootstrap_parts(&self) -> Vec<Part> {
        Vec::new()
    }

    /// What a read of the limits document ([`Account::limits_request`]) charges,
    /// by the venue's documentation: a read of weight 1 by default.
    fn limits_kind() -> adapt::Request<'static> {
        adapt::Request::Read(1)
    }

    /// The parts the bootstrap's own reads ([`Account::time_request`], then
    /// [`Account::limits_request`] if any) count on the venue, by its
    /// documentation: kept in the charges file
    /// ([`ChargeLog::boot_reads`](crate::shm::ChargeLog::boot_reads)) so that a
    /// restart holds its bootstrap until the dead process's charges leave room
    /// for them ([`crate::boot_room`]).
    fn boot_reads(&self) -> Vec<Part> {
        let limits = Self::limits_request().map(|_| Self::limits_kind());
        core::iter::once(Self::time_kind())
            .chain(limits)
            .filter_map(|k| self.parts(k).ok())
            .flat_map(|p| p.to_vec())
            .collect()
    }

    /// The request of the document [`Boot::limits`] holds: a GET of
    /// [`Account::limits_path`] by default; Hyperliquid's `meta` (its asset
    /// table) is a POST.
    fn limits_request() -> Option<ergon_io::http::Request<'static>> {
        Self::limits_path().map(ergon_io::http::Request::get)
    }

    /// Re-anchors the venue clock (after repeated clock skew) for every request
    /// stamped from now on.
    fn set_clock(&mut self, clock: Clock);

    /// Calls `f` with the client order id of each order an answer to
    /// [`Endpoints::open_orders`] lists.
    fn open_ids(&self, body: &[u8], f: &mut dyn FnMut(&[u8]));

    /// The cursor of the page after this answer to [`Endpoints::open_orders`]
    /// (or [`Endpoints::open_orders_after`]) where the venue answers that list
    /// by pages and another follows; None (the default) on the last page, or
    /// where one answer lists every open order.
    fn next_page<'b>(&self, _body: &'b [u8]) -> Option<&'b [u8]> {
        None
    }

    /// The time (the gateway's clock) after which the venue can no longer run
    /// `req`: a query sent after it that finds nothing proves the request never
    /// ran. None where the venue states no such bound: an unknown outcome then
    /// ends [`Event::Unresolved`](super::Event::Unresolved), never "not found".
    /// Each adapter's module doc cites its bound. Default: None (no bound claimed).
    fn not_found_after(&self, _req: &Prepared) -> Option<i64> {
        None
    }

    /// For an order a previous gateway wrote before it died (its journal), whose
    /// own deadline is not known: the time after which the venue can no longer run
    /// it, from `query`, its query by client order id prepared now. An order
    /// written before now with this account's signing window had its deadline
    /// before `query`'s. None where the venue states no bound (the default).
    fn lost_not_found_after(&self, _query: &Prepared) -> Option<i64> {
        None
    }

    /// The venue's WebSocket session for order entry (and the order stream,
    /// Binance Spot), signing as the REST endpoints do, with room for `capacity`
    /// requests in flight; None where the gateway has none.
    fn ws_api(&self, _capacity: usize) -> Option<Box<dyn crate::lane_api::LaneApi>> {
        None
    }

    /// The venue's dead man's switch ([`crate::protection`]); None where the
    /// venue has none (Binance Spot, Coinbase Exchange) or the gateway drives none.
    fn switch_mut(&mut self) -> Option<&mut dyn ergon_venues::switch::Switch> {
        None
    }

    /// The venue's switch as its documentation describes it, if it has one.
    fn switch_spec(&self) -> Option<ergon_venues::switch::SwitchSpec> {
        None
    }

    /// The connection of the venue's own that arms its switch, where the switch
    /// is armed by one (Bybit DCP: the gateway's `dcp` module); None by default.
    fn dcp_link(&self) -> Option<DcpSpec> {
        None
    }

    /// Writes that connection's `auth` frame, request `req_id`, into `out`.
    /// [`adapt::Error::Unsupported`] by default.
    fn dcp_auth(&self, _req_id: u64, _now: i64, _out: &mut Vec<u8>) -> Result<(), adapt::Error> {
        Err(adapt::Error::Unsupported)
    }

    /// Why the venue's switch cannot cover this gateway's orders, where it has
    /// one that the gateway cannot use (Deribit's fires only for orders of the
    /// WebSocket that enabled it; this gateway sends orders over HTTP).
    fn switch_unavailable(&self) -> Option<Unavailable> {
        None
    }
}

/// What the connection that arms a venue's switch needs from its adapter
/// ([`Account::dcp_link`]: Bybit's private WebSocket subscribed to `dcp`).
#[derive(Clone, Copy, Debug)]
pub struct DcpSpec {
    /// The topic it subscribes (`dcp.future` ...).
    pub topic: &'static str,
    /// What a connect charges: the connects bucket and the IP gate.
    pub connect_parts: [Part; 2],
    /// What each frame charges: the IP gate at cost 0 (a halt stops it).
    pub message_parts: [Part; 1],
}

/// Why the venue's dead man's switch is unusable for this gateway
/// ([`crate::protection::State::Unavailable`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unavailable {
    /// The venue has none (Binance Spot, Coinbase Exchange).
    NoSwitch,
    /// The venue refused it for the account (Bybit DCP: Bybit enables it per
    /// account, on request).
    Refused,
    /// It fires only when a connection of the venue's own closes, one this
    /// gateway does not hold (Bybit DCP: a private WebSocket subscribed to `dcp`;
    /// Deribit: the WebSocket the orders were sent over).
    OtherConnection,
}

impl Unavailable {
    /// The reason as `--stats` writes it (`why=`).
    pub fn as_str(self) -> &'static str {
        match self {
            Unavailable::NoSwitch => "no-switch",
            Unavailable::Refused => "refused",
            Unavailable::OtherConnection => "other-connection",
        }
    }
}

impl core::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Unavailable::NoSwitch => "this venue has no cancel-on-disconnect switch",
            Unavailable::Refused => {
                "the venue refused its cancel-on-disconnect switch for this account (it is not enabled for it, or not permitted)"
            }
            Unavailable::OtherConnection => {
                "the venue's cancel-on-disconnect switch fires only when a connection of its own closes, which this gateway does not hold, so it covers none of its orders"
            }
        })
    }
}
