//! Bybit's DCP connection inside the gateway: the private WebSocket
//! (`/v5/private`) whose loss fires Disconnect Cancel All, on the gateway's
//! event loop.
//!
//! Bybit's switch is armed by a connection, not a call
//! ([`ergon_venues::bybit_private`]): the window call only sets how long after
//! the account's last private connection subscribed to the product's `dcp`
//! topic has gone every active order of the product is cancelled. So the
//! gateway holds one: connected once the window is set, authenticated,
//! subscribed, pinged every [`ping_every_ns`] (Bybit recommends 20 s; sooner
//! for a short window). While it is subscribed, the switch is armed until the
//! last frame heard plus the window ([`DcpLink::live_heard`], which
//! [`Protected`](crate::protection::Protected) feeds to the switch's machine):
//! the venue cannot have seen it dead before that frame left. A process that
//! dies (SIGKILL included) closes the socket, and the venue cancels once the
//! window has passed; a clean stop cancels the orders first, then closes it.
//!
//! A drop connects again (charged to the adapter's `private_ws_connects`
//! bucket, 500 per 5 minutes, and the IP gate) after a backoff; a connection
//! silent for three pings is given up ([`WsClient::abort`]). A venue that does
//! not serve the stream (an upgrade answered with a non-101 that is not a
//! throttle), or that refuses the key or the topic, makes the switch
//! unavailable to this gateway ([`DcpLink::why`]).
//!
//! Nothing here reads a clock; frames are written into one buffer sized at
//! construction.

use std::net::SocketAddr;

use ergon_core::{Budget, Class};
use ergon_io::event_loop::{Readiness, Registry};
use ergon_io::ws::{self, Cause, HandshakeError, WsClient, WsId};
use ergon_venues::bybit_private::{self, Op};

use crate::endpoints::{Account, DcpSpec};
use crate::url::{resolve, UrlError};

/// The descriptor and timer token of the DCP connection on the loop; a
/// strategy's tokens must differ.
pub const DCP_LINK: u64 = (1 << 62) - 4;

const SEC: i64 = 1_000_000_000;
const MS: i64 = 1_000_000;
const FIRST_BACKOFF_NS: i64 = 50 * MS;
const MAX_BACKOFF_NS: i64 = 5 * SEC;

/// How often the link pings for a window of `window_ms`: Bybit's 20 s, or a
/// quarter of the window if that is sooner, so the switch's deadline (the last
/// frame heard plus the window) never comes near while the link lives.
pub fn ping_every_ns(window_ms: u32) -> i64 {
    (bybit_private::PING_EVERY_MS * MS).min(i64::from(window_ms) * MS / 4)
}

/// Where the private stream is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DcpStart {
    /// The venue's address.
    pub addr: SocketAddr,
    /// The Host header.
    pub host: String,
    /// The path ([`bybit_private::PATH`] unless the URL says otherwise).
    pub path: String,
}

impl DcpStart {
    /// `ws://HOST:PORT/PATH` (resolved here, once); `wss://` is refused until the
    /// gateway's pools take TLS.
    pub fn from_url(url: &str) -> Result<Self, UrlError> {
        let rest = match url.split_once("://") {
            Some(("ws", rest)) => rest,
            Some(("wss", _)) => return Err(UrlError::Tls("wss")),
            _ => return Err(UrlError::form(url, "ws://HOST:PORT/PATH")),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, bybit_private::PATH),
        };
        Ok(DcpStart {
            addr: resolve(authority)?,
            host: authority.to_string(),
            path: path.to_string(),
        })
    }

    /// The stream at `url`, or by default on the gateway's own venue (its host
    /// and address, [`bybit_private::PATH`]).
    pub fn of(start: &crate::Start, url: Option<&str>) -> Result<Self, UrlError> {
        match url {
            Some(u) => DcpStart::from_url(u),
            None => Ok(DcpStart {
                addr: start.addr,
                host: start.host.clone(),
                path: bybit_private::PATH.into(),
            }),
        }
    }
}

/// Where the link stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Not connected; connects at its retry time once wanted.
    Down,
    /// The upgrade is out.
    Connecting,
    /// Open; the `auth` frame is out.
    Authenticating,
    /// Authenticated; the `subscribe` frame is out.
    Subscribing,
    /// Subscribed: the switch is armed while it lives.
    Live,
    /// The venue does not serve it, or refused the key or the topic: never again.
    Unavailable,
}

/// What one drive saw, in order.
#[derive(Debug)]
enum Item {
    Open,
    Text(usize, usize),
    Closed(Cause),
}

/// Bybit's DCP connection. See the module doc.
#[derive(Debug)]
pub struct DcpLink {
    client: WsClient,
    id: WsId,
    host: String,
    path: String,
    topic: &'static str,
    state: LinkState,
    watched: bool,
    ever_open: bool,
    retry_at: i64,
    backoff_ns: i64,
    heard_at: i64,
    ping_at: i64,
    ping_every_ns: i64,
    frame: Vec<u8>,
    bytes: Vec<u8>,
    items: Vec<Item>,
    next_req: u64,
    why: Option<String>,
}

impl DcpLink {
    /// A link to `at` for the venue `spec` describes, pinging every
    /// `ping_every_ns`, leaving by `local_addr` (the gateway's egress lane).
    pub fn new(
        spec: DcpSpec,
        at: &DcpStart,
        budget: &Budget,
        ping_every_ns: i64,
        local_addr: Option<SocketAddr>,
        seed: u64,
    ) -> Result<Self, String> {
        let session = ws::Session::new(
            ws::WsConfig {
                max_message: 64 << 10,
                tx_capacity: 8 << 10,
                ..ws::WsConfig::default()
            },
            budget,
            &spec.connect_parts,
            &spec.message_parts,
            seed,
        )
        .map_err(|e| format!("the DCP connection's session: {e:?}"))?;
        let mut client = WsClient::new(1);
        let id = client.add(session, at.addr);
        client
            .set_local_addr(id, local_addr)
            .map_err(|e| format!("the DCP connection's egress lane: {e:?}"))?;
        Ok(DcpLink {
            client,
            id,
            host: at.host.clone(),
            path: at.path.clone(),
            topic: spec.topic,
            state: LinkState::Down,
            watched: false,
            ever_open: false,
            retry_at: i64::MIN,
            backoff_ns: FIRST_BACKOFF_NS,
            heard_at: 0,
            ping_at: i64::MAX,
            ping_every_ns: ping_every_ns.max(MS),
            frame: Vec::with_capacity(512),
            bytes: Vec::with_capacity(64 << 10),
            items: Vec::with_capacity(64),
            next_req: 1,
            why: None,
        })
    }

    /// The link of `venue`'s switch, if it is armed by a connection, at `url`
    /// (default: [`DcpStart::of`] the gateway's own venue), for a window of
    /// `window_ms`, leaving by `start`'s egress lane.
    pub fn for_account<E: Account>(
        venue: &E,
        start: &crate::Start,
        url: Option<&str>,
        budget: &Budget,
        window_ms: u32,
    ) -> Result<Option<Self>, String> {
        let Some(spec) = venue.dcp_link() else {
            return Ok(None);
        };
        let at = DcpStart::of(start, url).map_err(|e| format!("--private-ws: {e}"))?;
        let seed = ergon_io::clock::now_ns() as u64 ^ u64::from(std::process::id()) << 32;
        let ping = ping_every_ns(window_ms);
        DcpLink::new(spec, &at, budget, ping, start.local_addr, seed).map(Some)
    }

    /// Where it stands.
    pub fn state(&self) -> LinkState {
        self.state
    }

    /// Why it is [`LinkState::Unavailable`].
    pub fn why(&self) -> Option<&str> {
        self.why.as_deref()
    }

    /// When the venue was last heard on the subscribed connection, while it is
    /// subscribed.
    pub fn live_heard(&self) -> Option<i64> {
        (self.state == LinkState::Live).then_some(self.heard_at)
    }

    /// The earliest time it wants a drive, if any.
    pub fn next_deadline(&self) -> Option<i64> {
        let mine = match self.state {
            LinkState::Down => Some(self.retry_at.max(0)),
            LinkState::Authenticating | LinkState::Subscribing | LinkState::Live => {
                Some(self.ping_at.min(self.silent_at()))
            }
            LinkState::Connecting | LinkState::Unavailable => None,
        };
        [self.client.next_deadline(), mine]
            .into_iter()
            .flatten()
            .min()
    }

    fn silent_at(&self) -> i64 {
        self.heard_at.saturating_add(3 * self.ping_every_ns)
    }

    /// Lets the loop watch the socket under [`DCP_LINK`], once.
    pub fn watch(&mut self, registry: impl FnOnce() -> Option<Registry>) {
        if !self.watched {
            if let Some(r) = registry() {
                self.client.attach(r, DCP_LINK);
                self.watched = true;
            }
        }
    }

    /// Handles the socket's readiness (`ready`, reported under [`DCP_LINK`]),
    /// the session's timeouts, the venue's answers, pings and silence; connects
    /// when `want` and it is down and due. `venue` writes the `auth` frame.
    pub fn drive<E: Account>(
        &mut self,
        venue: &E,
        budget: &mut Budget,
        now: i64,
        ready: Option<Readiness>,
        want: bool,
    ) {
        if !self.watched {
            return;
        }
        self.bytes.clear();
        self.items.clear();
        let (bytes, items) = (&mut self.bytes, &mut self.items);
        let on = &mut |_: WsId, ev: ws::WsEvent<'_>, _: &mut Budget| match ev {
            ws::WsEvent::Text(t) => {
                let start = bytes.len();
                bytes.extend_from_slice(t.as_bytes());
                items.push(Item::Text(start, bytes.len()));
            }
            ws::WsEvent::Open => items.push(Item::Open),
            ws::WsEvent::Closed(c) => items.push(Item::Closed(c.cause)),
            ws::WsEvent::Outcome(_) | ws::WsEvent::Binary(_) | ws::WsEvent::Pong(_) => {}
        };
        if let Some(ready) = ready {
            self.client.handle_ready(DCP_LINK, ready, budget, now, on);
        }
        self.client.handle_timeout(budget, now, on);
        let items = core::mem::take(&mut self.items);
        for item in &items {
            match *item {
                Item::Open => self.on_open(venue, budget, now),
                Item::Text(a, b) => self.on_text(a, b, budget, now),
                Item::Closed(cause) => self.on_closed(cause, now),
            }
        }
        self.items = items;
        let open = matches!(
            self.state,
            LinkState::Authenticating | LinkState::Subscribing | LinkState::Live
        );
        if open && now >= self.silent_at() {
            // Its own events are this one drop, handled here.
            self.client.abort(self.id, budget, now, &mut |_, _, _| {});
            self.on_closed(Cause::Timeout, now);
        } else if open && now >= self.ping_at {
            self.ping_at = now.saturating_add(self.ping_every_ns);
            let id = self.req_id();
            bybit_private::ping(id, &mut self.frame);
            self.send(budget, now);
        }
        if want && self.state == LinkState::Down && now >= self.retry_at {
            self.connect(budget, now);
        }
    }

    /// Closes the connection (a clean stop, after the orders were cancelled):
    /// the venue's window starts, with nothing left to cancel.
    pub fn close(&mut self, budget: &mut Budget, now: i64) {
        if let Some(s) = self.client.session_mut(self.id) {
            let _ = s.close(1000, "", Class::Urgent, budget, now);
            self.client.flush(self.id, budget, now);
        }
        // Never connected again.
        self.state = LinkState::Unavailable;
    }

    fn req_id(&mut self) -> u64 {
        self.next_req += 1;
        self.next_req
    }

    fn connect(&mut self, budget: &mut Budget, now: i64) {
        let req = ws::Upgrade {
            host: &self.host,
            path: &self.path,
            headers: &[],
        };
        match self
            .client
            .connect(self.id, &req, Class::Urgent, budget, now)
        {
            Ok(()) => {
                self.state = LinkState::Connecting;
            }
            Err(ws::ConnectError::Limited(l)) => {
                self.retry_at = l.ready_at_ns.clamp(now + 1, now + self.backoff_ns.max(SEC));
            }
            Err(e @ ws::ConnectError::LocalAddr { .. }) => {
                self.unavailable(format!("the DCP connection's egress lane: {e:?}"));
            }
            Err(_) => self.retry_at = now + self.backoff_ns,
        }
    }

    fn on_open<E: Account>(&mut self, venue: &E, budget: &mut Budget, now: i64) {
        self.ever_open = true;
        self.heard_at = now;
        self.ping_at = now.saturating_add(self.ping_every_ns);
        let id = self.req_id();
        match venue.dcp_auth(id, now, &mut self.frame) {
            Ok(()) => {
                self.state = LinkState::Authenticating;
                self.send(budget, now);
            }
            Err(e) => self.unavailable(format!("the DCP connection's auth frame: {e}")),
        }
    }

    fn on_text(&mut self, a: usize, b: usize, budget: &mut Budget, now: i64) {
        self.heard_at = now;
        let Some(answer) = bybit_private::read(&self.bytes[a..b]) else {
            return;
        };
        match (answer.op, answer.ok, self.state) {
            (Op::Auth, true, LinkState::Authenticating) => {
                let id = self.req_id();
                bybit_private::subscribe(id, self.topic, &mut self.frame);
                self.state = LinkState::Subscribing;
                self.send(budget, now);
            }
            (Op::Subscribe, true, LinkState::Subscribing) => {
                self.backoff_ns = FIRST_BACKOFF_NS;
                self.state = LinkState::Live;
            }
            (Op::Auth | Op::Subscribe, false, _) => {
                let text = String::from_utf8_lossy(&self.bytes[a..b.min(a + 200)]);
                let what = if answer.op == Op::Auth {
                    "auth"
                } else {
                    self.topic
                };
                self.unavailable(format!(
                    "the venue refused the DCP connection's {what}: {text}"
                ));
                self.close(budget, now);
            }
            _ => {}
        }
    }

    /// Queues the frame written and writes it. A frame the budget refuses (a
    /// halt) is not sent: the venue hears nothing, and the connection is given
    /// up as silent.
    fn send(&mut self, budget: &mut Budget, now: i64) {
        let text = core::str::from_utf8(&self.frame).unwrap_or("");
        if let Some(s) = self.client.session_mut(self.id) {
            let _ = s.send_text(text, Class::Urgent, budget, now);
            self.client.flush(self.id, budget, now);
        }
    }

    fn on_closed(&mut self, cause: Cause, now: i64) {
        if self.state == LinkState::Unavailable {
            return;
        }
        self.ping_at = i64::MAX;
        if let Cause::Handshake(HandshakeError::Status(status)) = cause {
            if !self.ever_open && !matches!(status, 403 | 418 | 429) {
                self.unavailable(format!(
                    "the private WebSocket's upgrade was answered {status}"
                ));
                return;
            }
        }
        self.state = LinkState::Down;
        self.retry_at = now.saturating_add(self.backoff_ns);
        self.backoff_ns = (self.backoff_ns * 2).min(MAX_BACKOFF_NS);
    }

    fn unavailable(&mut self, why: String) {
        self.state = LinkState::Unavailable;
        self.why.get_or_insert(why);
    }
}
