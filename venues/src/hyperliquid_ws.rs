//! Hyperliquid's WebSocket limits, per IP: open connections, new connections per
//! minute, subscriptions, unique users across user-specific subscriptions, messages
//! sent per minute (every frame, pings and pongs included), and post requests in
//! flight; and what the `error` and `post` channels say.
//!
//! Tracked users are counted per IP, not per connection, and a user unsubscribed
//! (or dropped with its connection) keeps its slot for about 60 s for every other
//! connection: [`TrackedUsers`] holds each slot's in-flight unit until then, and
//! lets only the connection that freed a slot take it back at once. A refused user
//! subscription comes on the error channel as `Cannot track more than N total
//! users` and pushes past the limit are silently missing, so that message is a
//! verdict ([`WsAnswer::Refused`]), never ignored.
//!
//! A `noop` action (a post) settles a nonce without doing anything: it costs one
//! message and one post in flight like any post ([`HyperliquidWs::post_parts`]).
//!
//! Sources (checked 2026-11-30):
//! <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/rate-limits>
//! ("Rate limits and user limits": 1000 subscriptions, 10 unique users, 2000
//! messages a minute, 100 posts in flight),
//! <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/websocket/post-requests>
//! (the `post` channel). Copies disagree on connections: the gitbook page reads
//! "Maximum of 100 websocket connections" and names no per-minute figure; the SDKs'
//! copies of the limits (guilder-client-hyperliquid's README on docs.rs,
//! df-hyperliquid-core's `limits.rs`) read 10 connections and 30 new connections a
//! minute. The defaults take the stricter 10 and 30: a refused connect costs less
//! than a cut one, and [`Config`] raises them. The users figure is the documented 10,
//! though a session measured about 20 and was refused with "more than 15": the
//! venue's figure, when it says one, is kept in
//! [`HyperliquidWs::venue_user_limit`].

use arrayvec::ArrayVec;

use crate::adapt::{self, Batch, Error, Parts};
use crate::json::{self, Kind, Value};
use ergon_core::{BucketId, Budget, Builder, Class, Flight, Limited, Part, Spec, Verdict};

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;
const MINUTE: i64 = 60 * SEC;

/// Most tracked-user slots a [`TrackedUsers`] keeps.
pub const MAX_USERS: usize = 64;

/// The WebSocket limits of one IP.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Open connections.
    pub connections: u64,
    /// New connections per minute.
    pub new_connections_per_min: u64,
    /// Subscriptions across connections.
    pub subscriptions: u64,
    /// Unique users across user-specific subscriptions (at most [`MAX_USERS`]).
    pub users: u64,
    /// Messages sent per minute across connections.
    pub messages_per_min: u64,
    /// Post requests awaiting their answer.
    pub posts_in_flight: u64,
    /// How long a freed user slot stays taken for other connections.
    pub user_release_ns: i64,
}

impl Default for Config {
    /// The documented figures (the gitbook rate-limits page, checked 2026-11-30),
    /// the stricter connection figures of the SDKs' copies (10, 30 a minute), and the
    /// 60 s release measured on the venue.
    fn default() -> Self {
        Config {
            connections: 10,
            new_connections_per_min: 30,
            subscriptions: 1000,
            users: 10,
            messages_per_min: 2000,
            posts_in_flight: 100,
            user_release_ns: MINUTE,
        }
    }
}

/// A user's address, 20 bytes.
pub type Address = [u8; 20];

/// A `0x`-prefixed 40-digit hex address, either case.
pub fn address(hex: &str) -> Option<Address> {
    let digits = hex
        .strip_prefix("0x")
        .or_else(|| hex.strip_prefix("0X"))?
        .as_bytes();
    if digits.len() != 40 {
        return None;
    }
    let mut out = [0u8; 20];
    for (i, pair) in digits.chunks_exact(2).enumerate() {
        let nib = |c: u8| (c as char).to_digit(16);
        let (hi, lo) = (nib(pair[0])?, nib(pair[1])?);
        out[i] = u8::try_from(hi * 16 + lo).ok()?;
    }
    Some(out)
}

/// Which slot a user subscription took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Track {
    /// The user was tracked already: no new slot.
    Shared,
    /// A slot this connection freed, taken back at once.
    Reused,
    /// A new slot.
    New,
}

#[derive(Debug)]
struct Slot {
    user: Address,
    conn: u64,
    subs: u32,
    freed_at: Option<i64>,
    flight: Flight,
}

/// The IP's tracked users, one in-flight unit of the `users` bucket per slot.
///
/// Drive: [`TrackedUsers::track`] before sending a user-specific subscribe,
/// [`TrackedUsers::untrack`] after an unsubscribe, [`TrackedUsers::connection_closed`]
/// when a connection drops, and [`TrackedUsers::poll`] at
/// [`TrackedUsers::poll_timeout`] (or any later time) to release slots whose delay
/// has passed.
#[derive(Debug)]
pub struct TrackedUsers {
    bucket: BucketId,
    release_ns: i64,
    slots: ArrayVec<Slot, MAX_USERS>,
}

impl TrackedUsers {
    /// Slots over `bucket` (an in-flight bucket), freed slots held `release_ns`.
    pub fn new(bucket: BucketId, release_ns: i64) -> Self {
        TrackedUsers {
            bucket,
            release_ns: release_ns.max(0),
            slots: ArrayVec::new(),
        }
    }

    /// A user-specific subscription for `user` on connection `conn`: shares the
    /// user's live slot, takes back a slot `conn` itself freed, or charges a new one.
    /// Refused (nothing changes) when the IP has no slot left.
    pub fn track(
        &mut self,
        budget: &mut Budget,
        user: Address,
        conn: u64,
        now: i64,
    ) -> Result<Track, Limited> {
        self.poll(budget, now);
        if let Some(s) = self
            .slots
            .iter_mut()
            .find(|s| s.user == user && s.freed_at.is_none())
        {
            s.subs = s.subs.saturating_add(1);
            return Ok(Track::Shared);
        }
        // A slot freed on this same connection: the same user first, then any.
        let mine = |s: &Slot| s.freed_at.is_some() && s.conn == conn;
        let reuse = self
            .slots
            .iter()
            .position(|s| mine(s) && s.user == user)
            .or_else(|| self.slots.iter().position(mine));
        if let Some(i) = reuse {
            let s = &mut self.slots[i];
            (s.user, s.subs, s.freed_at) = (user, 1, None);
            return Ok(Track::Reused);
        }
        if self.slots.is_full() {
            return Err(Limited {
                bucket: self.bucket,
                ready_at_ns: self.poll_timeout().unwrap_or(i64::MAX),
                why: ergon_core::Why::Full,
            });
        }
        let ticket = budget.try_charge(&[Part::new(self.bucket, 1)], Class::Urgent, now)?;
        self.slots.push(Slot {
            user,
            conn,
            subs: 1,
            freed_at: None,
            flight: ticket.sent(),
        });
        Ok(Track::New)
    }

    /// One user-specific subscription of `user` on `conn` ended. When its last one
    /// ends, the slot stays taken `release_ns` for other connections.
    pub fn untrack(&mut self, user: Address, conn: u64, now: i64) {
        if let Some(s) = self
            .slots
            .iter_mut()
            .find(|s| s.user == user && s.conn == conn && s.freed_at.is_none())
        {
            s.subs = s.subs.saturating_sub(1);
            if s.subs == 0 {
                s.freed_at = Some(now);
            }
        }
    }

    /// `conn` dropped: its users' slots are freed now, and, the connection being
    /// gone, only released after the delay.
    pub fn connection_closed(&mut self, conn: u64, now: i64) {
        for s in self.slots.iter_mut().filter(|s| s.conn == conn) {
            if s.freed_at.is_none() {
                s.freed_at = Some(now);
            }
            // No connection can take it back at once any more.
            s.conn = u64::MAX;
        }
    }

    /// Releases every slot whose delay has passed.
    pub fn poll(&mut self, budget: &mut Budget, now: i64) {
        let release = self.release_ns;
        let mut i = 0;
        while i < self.slots.len() {
            let due = self.slots[i]
                .freed_at
                .is_some_and(|at| at.saturating_add(release) <= now);
            if due {
                let s = self.slots.swap_remove(i);
                // A flight of another budget cannot be completed here: dropped.
                budget.complete(s.flight, now).ok();
            } else {
                i += 1;
            }
        }
    }

    /// When the next freed slot is released, if any is waiting.
    pub fn poll_timeout(&self) -> Option<i64> {
        self.slots
            .iter()
            .filter_map(|s| s.freed_at)
            .min()
            .map(|at| at.saturating_add(self.release_ns))
    }

    /// Slots taken (live or waiting for release).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether no slot is taken.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}

/// What one incoming frame says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WsAnswer {
    /// The answer to the post with this id.
    Post {
        /// The post's id.
        id: u64,
        /// Its verdict.
        verdict: Verdict,
    },
    /// The error channel refused a request (subscription, post): its verdict.
    Refused(Verdict),
    /// A subscription was acknowledged.
    Subscribed,
    /// Data, a pong or anything else that settles no request.
    Other,
}

/// Hyperliquid's WebSocket buckets.
#[derive(Debug)]
pub struct HyperliquidWs {
    release_ns: i64,
    /// The IP gate (shared with the REST adapter when both are in one budget).
    pub ip: BucketId,
    /// Open connections.
    pub connections: BucketId,
    /// New connections per minute.
    pub new_connections: BucketId,
    /// Subscriptions held.
    pub subscriptions: BucketId,
    /// Tracked users (see [`TrackedUsers`]).
    pub users: BucketId,
    /// Messages sent per minute.
    pub messages: BucketId,
    /// Posts in flight.
    pub posts: BucketId,
    /// The tracked users.
    pub tracked: TrackedUsers,
    /// The user limit the venue last named on the error channel.
    pub venue_user_limit: Option<u32>,
}

impl HyperliquidWs {
    /// Declares `ws_connections`, `ws_new_connections_1m`, `ws_subscriptions`,
    /// `ws_users`, `ws_messages_1m` and `ws_posts`, and uses `ip`, the IP gate.
    pub fn new(builder: &mut Builder, ip: BucketId, c: Config) -> Result<Self, Error> {
        if c.users > MAX_USERS as u64 {
            return Err(Error::BadField("users"));
        }
        let users = builder.add("ws_users", Spec::in_flight(c.users))?;
        Ok(HyperliquidWs {
            release_ns: c.user_release_ns,
            ip,
            connections: builder.add("ws_connections", Spec::in_flight(c.connections))?,
            new_connections: builder.add(
                "ws_new_connections_1m",
                Spec::sliding(c.new_connections_per_min, MINUTE, 60),
            )?,
            subscriptions: builder.add("ws_subscriptions", Spec::in_flight(c.subscriptions))?,
            users,
            messages: builder.add(
                "ws_messages_1m",
                Spec::sliding(c.messages_per_min, MINUTE, 60),
            )?,
            posts: builder.add("ws_posts", Spec::in_flight(c.posts_in_flight))?,
            tracked: TrackedUsers::new(users, c.user_release_ns),
            venue_user_limit: None,
        })
    }

    fn with_message(&self, extra: Option<BucketId>) -> Parts {
        let mut p = Parts::new();
        p.push(Part::new(self.ip, 0));
        p.push(Part::new(self.messages, 1));
        if let Some(b) = extra {
            p.push(Part::new(b, 1));
        }
        p
    }

    /// Opening a connection: the gate, one open connection (complete its flight
    /// when the connection closes) and one of the minute's new connections.
    pub fn connect_parts(&self) -> Parts {
        let mut p = Parts::new();
        p.push(Part::new(self.ip, 0));
        p.push(Part::new(self.connections, 1));
        p.push(Part::new(self.new_connections, 1));
        p
    }

    /// Any frame sent (ping, pong, unsubscribe ...): one message.
    pub fn frame_parts(&self) -> Parts {
        self.with_message(None)
    }

    /// A post (an action, `noop` included, or an info request): one message and
    /// one post in flight, released when its answer comes ([`WsAnswer::Post`]).
    pub fn post_parts(&self) -> Parts {
        self.with_message(Some(self.posts))
    }

    /// A subscribe: one message and one subscription held (complete its flight
    /// after the unsubscribe). A user-specific one also takes a user slot
    /// ([`TrackedUsers::track`]).
    pub fn subscribe_parts(&self) -> Parts {
        self.with_message(Some(self.subscriptions))
    }

    /// Reads one incoming text frame. The error channel's refusals are verdicts:
    /// `Cannot track more than N total users` holds the users bucket until a slot
    /// can free (the release delay) and keeps N; a message-rate refusal holds the
    /// minute's messages for one window; any other is Rejected.
    pub fn on_frame(&mut self, frame: &[u8], budget: &mut Budget, now: i64) -> WsAnswer {
        let Ok(v) = json::parse(frame) else {
            return WsAnswer::Other;
        };
        let Ok(Some(channel)) = v.get("channel") else {
            return WsAnswer::Other;
        };
        let data = v.get("data").ok().flatten();
        let is = |c| channel.str_eq(c).unwrap_or(false);
        if is("error") {
            WsAnswer::Refused(self.error(data, budget, now))
        } else if is("post") {
            let id = data
                .and_then(|d| d.get("id").ok().flatten())
                .and_then(|i| i.as_u64().ok());
            match id {
                Some(id) => WsAnswer::Post {
                    id,
                    verdict: Self::post(data.and_then(|d| d.get("response").ok().flatten())),
                },
                None => WsAnswer::Other,
            }
        } else if is("subscriptionResponse") {
            WsAnswer::Subscribed
        } else {
            WsAnswer::Other
        }
    }

    fn error(&mut self, data: Option<Value<'_>>, budget: &mut Budget, now: i64) -> Verdict {
        let Some(d) = data.filter(|d| d.kind() == Kind::String) else {
            return Verdict::Rejected;
        };
        let says = |t| d.str_contains(t).unwrap_or(false);
        if says("Cannot track more than") {
            let mut buf = [0u8; 128];
            self.venue_user_limit = d.decode_str(&mut buf).ok().and_then(tracked_limit);
            adapt::hold(budget, self.users, Some(self.release_ns), now)
        } else if says("rate limit") || says("Too many") || says("too many") {
            adapt::hold(budget, self.messages, None, now)
        } else {
            Verdict::Rejected
        }
    }

    /// A post's `response`: `{"type":"action","payload":{...}}`,
    /// `{"type":"info",...}` or `{"type":"error","payload":"..."}`.
    fn post(response: Option<Value<'_>>) -> Verdict {
        let Some(r) = response else {
            return Verdict::Unknown;
        };
        let Ok(Some(kind)) = r.get("type") else {
            return Verdict::Unknown;
        };
        let payload = r.get("payload").ok().flatten();
        let nonce = |p: Value<'_>| {
            p.str_contains("nonce").unwrap_or(false) || p.str_contains("Nonce").unwrap_or(false)
        };
        if kind.str_eq("info").unwrap_or(false) {
            return Verdict::Done;
        }
        if kind.str_eq("error").unwrap_or(false) {
            return match payload {
                Some(p) if p.kind() == Kind::String && nonce(p) => Verdict::ClockSkew,
                // The post was refused before it became an action.
                Some(p) if p.kind() == Kind::String => Verdict::Rejected,
                _ => Verdict::Unknown,
            };
        }
        if !kind.str_eq("action").unwrap_or(false) {
            return Verdict::Unknown;
        }
        let Some(p) = payload else {
            return Verdict::Unknown;
        };
        match p.get("status") {
            Ok(Some(s)) if s.str_eq("ok").unwrap_or(false) => {
                match p
                    .path("response.data.statuses")
                    .map(|s| s.map(|s| s.items()))
                {
                    Ok(Some(Ok(items))) => {
                        let mut batch = Batch::new();
                        for st in items {
                            batch.add(match st.get("error") {
                                Ok(Some(e)) if nonce(e) => Verdict::ClockSkew,
                                Ok(Some(_)) => Verdict::Rejected,
                                Ok(None) => Verdict::Done,
                                Err(_) if st.kind() == Kind::String => Verdict::Done,
                                Err(_) => Verdict::Unknown,
                            });
                        }
                        batch.verdict().unwrap_or(Verdict::Done)
                    }
                    Ok(None) => Verdict::Done,
                    _ => Verdict::Unknown,
                }
            }
            Ok(Some(s)) if s.str_eq("err").unwrap_or(false) => match p.get("response") {
                Ok(Some(e)) if nonce(e) => Verdict::ClockSkew,
                Ok(Some(_)) => Verdict::Rejected,
                _ => Verdict::Unknown,
            },
            _ => Verdict::Unknown,
        }
    }
}

/// N of `Cannot track more than N total users`.
fn tracked_limit(text: &str) -> Option<u32> {
    let rest = text.split("more than ").nth(1)?;
    let digits: &str = rest.split(' ').next()?;
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ergon_core::Why;

    fn setup() -> (HyperliquidWs, Budget) {
        let mut b = Budget::builder();
        let ip = b.add("ip", Spec::gate()).unwrap();
        let ws = HyperliquidWs::new(&mut b, ip, Config::default()).unwrap();
        (ws, b.build(0).unwrap())
    }

    fn user(n: u8) -> Address {
        [n; 20]
    }

    #[test]
    fn addresses_parse_from_hex_only() {
        let a = address("0x00112233445566778899aabbccddeeff00112233").unwrap();
        assert_eq!((a[0], a[5], a[19]), (0x00, 0x55, 0x33));
        assert_eq!(address("0x0011"), None);
        assert_eq!(address("00112233445566778899aabbccddeeff00112233"), None);
        assert_eq!(address("0x00112233445566778899aabbccddeeff0011223g"), None);
        assert_eq!(address("0xé0112233445566778899aabbccddeeff001122"), None);
    }

    #[test]
    fn eleven_users_are_refused_and_the_same_user_shares_its_slot() {
        let (mut ws, mut budget) = setup();
        for n in 0..10 {
            assert_eq!(ws.tracked.track(&mut budget, user(n), 1, 0), Ok(Track::New));
        }
        assert_eq!(
            ws.tracked.track(&mut budget, user(3), 2, 0),
            Ok(Track::Shared)
        );
        let refused = ws.tracked.track(&mut budget, user(10), 1, 0).unwrap_err();
        assert_eq!((refused.bucket, refused.why), (ws.users, Why::Full));
        assert_eq!(budget.stats(ws.users).unwrap().used, 10);
    }

    /// A slot freed on connection 1 is taken back at once by connection 1, and by
    /// connection 2 only 60 s later.
    #[test]
    fn freed_slots_wait_60_s_for_other_connections() {
        let (mut ws, mut budget) = setup();
        for n in 0..10 {
            ws.tracked.track(&mut budget, user(n), 1, 0).unwrap();
        }
        ws.tracked.untrack(user(0), 1, SEC);
        assert_eq!(ws.tracked.poll_timeout(), Some(61 * SEC));
        // Another connection: still full until 61 s.
        assert!(ws.tracked.track(&mut budget, user(20), 2, 2 * SEC).is_err());
        assert!(ws
            .tracked
            .track(&mut budget, user(20), 2, 61 * SEC - 1)
            .is_err());
        assert_eq!(
            ws.tracked.track(&mut budget, user(20), 2, 61 * SEC),
            Ok(Track::New)
        );
        // Connection 1 frees one and takes it back at once, for another user.
        ws.tracked.untrack(user(1), 1, 62 * SEC);
        assert_eq!(
            ws.tracked.track(&mut budget, user(21), 1, 62 * SEC),
            Ok(Track::Reused)
        );
        assert_eq!(ws.tracked.len(), 10);
        assert_eq!(budget.stats(ws.users).unwrap().used, 10);
    }

    #[test]
    fn a_dropped_connection_releases_its_users_after_the_delay() {
        let (mut ws, mut budget) = setup();
        for n in 0..10 {
            ws.tracked.track(&mut budget, user(n), 7, 0).unwrap();
        }
        ws.tracked.connection_closed(7, 5 * SEC);
        // Not even a new connection 7 takes them back early.
        assert!(ws.tracked.track(&mut budget, user(0), 7, 6 * SEC).is_err());
        ws.tracked.poll(&mut budget, 65 * SEC);
        assert!(ws.tracked.is_empty());
        assert_eq!(budget.stats(ws.users).unwrap().used, 0);
    }

    #[test]
    fn the_error_channel_is_a_verdict() {
        let (mut ws, mut budget) = setup();
        let frame = br#"{"channel":"error","data":"Cannot track more than 15 total users"}"#;
        assert_eq!(
            ws.on_frame(frame, &mut budget, 0),
            WsAnswer::Refused(Verdict::Throttled {
                bucket: ws.users,
                until_ns: budget.stats(ws.users).unwrap().held_until_ns.unwrap()
            })
        );
        assert!(budget.stats(ws.users).unwrap().held_until_ns.unwrap() >= 60 * SEC);
        assert_eq!(ws.venue_user_limit, Some(15));
        let other = br#"{"channel":"error","data":"Already subscribed: {\"type\":\"l2Book\"}"}"#;
        assert_eq!(
            ws.on_frame(other, &mut budget, 0),
            WsAnswer::Refused(Verdict::Rejected)
        );
        assert_eq!(
            ws.on_frame(b"{\"channel\":\"error\"}", &mut budget, 0),
            WsAnswer::Refused(Verdict::Rejected)
        );
        assert_eq!(ws.on_frame(b"not json", &mut budget, 0), WsAnswer::Other);
    }

    #[test]
    fn post_answers() {
        let (mut ws, mut budget) = setup();
        let ok = br#"{"channel":"post","data":{"id":7,"response":{"type":"action","payload":{"status":"ok","response":{"type":"order","data":{"statuses":[{"resting":{"oid":1}}]}}}}}}"#;
        assert_eq!(
            ws.on_frame(ok, &mut budget, 0),
            WsAnswer::Post {
                id: 7,
                verdict: Verdict::Done
            }
        );
        let noop = br#"{"channel":"post","data":{"id":8,"response":{"type":"action","payload":{"status":"ok","response":{"type":"default"}}}}}"#;
        assert_eq!(
            ws.on_frame(noop, &mut budget, 0),
            WsAnswer::Post {
                id: 8,
                verdict: Verdict::Done
            }
        );
        let nonce = br#"{"channel":"post","data":{"id":9,"response":{"type":"action","payload":{"status":"err","response":"Invalid nonce: duplicate nonce"}}}}"#;
        assert_eq!(
            ws.on_frame(nonce, &mut budget, 0),
            WsAnswer::Post {
                id: 9,
                verdict: Verdict::ClockSkew
            }
        );
        let err = br#"{"channel":"post","data":{"id":10,"response":{"type":"error","payload":"bad request"}}}"#;
        assert_eq!(
            ws.on_frame(err, &mut budget, 0),
            WsAnswer::Post {
                id: 10,
                verdict: Verdict::Rejected
            }
        );
        let cut = br#"{"channel":"post","data":{"id":11,"response":{"type":"action"}}}"#;
        assert_eq!(
            ws.on_frame(cut, &mut budget, 0),
            WsAnswer::Post {
                id: 11,
                verdict: Verdict::Unknown
            }
        );
        let sub = br#"{"channel":"subscriptionResponse","data":{"method":"subscribe"}}"#;
        assert_eq!(ws.on_frame(sub, &mut budget, 0), WsAnswer::Subscribed);
    }

    /// Every frame charges the minute's messages: 2000, then refused; posts in
    /// flight stop at 100 until answered.
    #[test]
    fn messages_per_frame_and_posts_in_flight() {
        let (ws, mut budget) = setup();
        let mut flights = Vec::new();
        for _ in 0..100 {
            flights.push(
                budget
                    .try_charge(&ws.post_parts(), Class::Normal, 0)
                    .unwrap()
                    .sent(),
            );
        }
        let refused = budget
            .try_charge(&ws.post_parts(), Class::Normal, 0)
            .unwrap_err();
        assert_eq!(refused.bucket, ws.posts);
        for f in flights.drain(..) {
            budget.complete(f, 0).unwrap();
        }
        for _ in 0..1900 {
            let t = budget
                .try_charge(&ws.frame_parts(), Class::Normal, 0)
                .unwrap();
            budget.complete(t.sent(), 0).unwrap();
        }
        let refused = budget
            .try_charge(&ws.frame_parts(), Class::Normal, 0)
            .unwrap_err();
        assert_eq!(refused.bucket, ws.messages);
        // A minute later the window has moved on.
        assert!(budget
            .try_charge(&ws.frame_parts(), Class::Normal, 61 * SEC)
            .is_ok());
    }

    #[test]
    fn connections_open_and_per_minute() {
        let (ws, mut budget) = setup();
        let mut open = Vec::new();
        for _ in 0..10 {
            open.push(
                budget
                    .try_charge(&ws.connect_parts(), Class::Normal, 0)
                    .unwrap()
                    .sent(),
            );
        }
        assert_eq!(
            budget
                .try_charge(&ws.connect_parts(), Class::Normal, 0)
                .unwrap_err()
                .bucket,
            ws.connections
        );
        // Close and reopen: 30 new a minute.
        for round in 0..2 {
            for f in open.drain(..) {
                budget.complete(f, 0).unwrap();
            }
            for _ in 0..10 {
                open.push(
                    budget
                        .try_charge(&ws.connect_parts(), Class::Normal, round)
                        .unwrap()
                        .sent(),
                );
            }
        }
        for f in open.drain(..) {
            budget.complete(f, 0).unwrap();
        }
        assert_eq!(
            budget
                .try_charge(&ws.connect_parts(), Class::Normal, 1)
                .unwrap_err()
                .bucket,
            ws.new_connections
        );
    }

    #[test]
    fn too_many_users_in_config_is_refused() {
        let mut b = Budget::builder();
        let ip = b.add("ip", Spec::gate()).unwrap();
        let c = Config {
            users: 65,
            ..Config::default()
        };
        assert_eq!(
            HyperliquidWs::new(&mut b, ip, c).unwrap_err(),
            Error::BadField("users")
        );
    }
}
