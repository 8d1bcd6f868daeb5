//! The user data stream's bookkeeping, in the venue state: listenKeys, the
//! connections subscribed to an account's events, and the per-IP record of
//! WebSocket connect attempts (see `crate::server::ws_conn` for the rules and
//! their sources).
//!
//! Plain state: it never touches a socket or reads a clock. A subscriber is the
//! sending half of a channel; its connection's thread holds the other half.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::mpsc::{self, Receiver, Sender};

/// One subscriber: a connection on a listenKey, or a WebSocket API subscription.
struct Sub {
    id: u64,
    account: usize,
    /// The listenKey; empty for a WebSocket API subscription.
    key: String,
    /// A WebSocket API subscription's `subscriptionId`: its events are sent
    /// wrapped as `{"subscriptionId":..,"event":{..}}`.
    subscription: Option<u64>,
    tx: Sender<String>,
}

/// Listen keys, subscribers and per-IP connect records; lives in the venue state.
#[derive(Default)]
pub(crate) struct WsHub {
    keys: HashMap<String, usize>,
    next: u64,
    subs: Vec<Sub>,
    attempts: HashMap<IpAddr, VecDeque<i64>>,
    refused: HashMap<IpAddr, VecDeque<i64>>,
}

/// What [`WsHub::attempt`] decided about a connect.
pub(crate) enum Attempt {
    /// Within the limit.
    Ok,
    /// Over the limit: refuse; the oldest attempt leaves the window at this time.
    Refused { retry_at: i64 },
    /// Over the limit too often: ban the IP.
    Ban,
}

impl WsHub {
    /// A new listenKey for `account`; an account with one gets the same one back,
    /// as Binance does.
    pub(crate) fn listen_key(&mut self, account: usize, now: i64) -> (String, bool) {
        if let Some((k, _)) = self.keys.iter().find(|(_, &a)| a == account) {
            return (k.clone(), false);
        }
        self.next += 1;
        // 60 characters like Binance's; unique per emulator run.
        let k = format!(
            "{:0>20}{:0>20}{:0>20}",
            self.next,
            now.unsigned_abs(),
            account
        );
        self.keys.insert(k.clone(), account);
        (k, true)
    }

    /// The account of a live listenKey.
    pub(crate) fn account_of(&self, key: &str) -> Option<usize> {
        self.keys.get(key).copied()
    }

    /// Closes a listenKey: its connections are told to close.
    pub(crate) fn close_key(&mut self, key: &str) -> bool {
        let had = self.keys.remove(key).is_some();
        self.subs
            .retain(|s| s.subscription.is_some() || s.key != key);
        had
    }

    /// Records a connect attempt from `ip` at `now` and says whether it may go on.
    pub(crate) fn attempt(
        &mut self,
        ip: IpAddr,
        lim: &crate::config::WsLimits,
        now: i64,
    ) -> Attempt {
        let from = now - lim.connect_window_ms;
        let a = self.attempts.entry(ip).or_default();
        while a.front().is_some_and(|&t| t <= from) {
            a.pop_front();
        }
        a.push_back(now);
        if a.len() <= lim.connects as usize {
            return Attempt::Ok;
        }
        let retry_at = a.front().map_or(now, |&t| t + lim.connect_window_ms);
        let r = self.refused.entry(ip).or_default();
        while r.front().is_some_and(|&t| t <= from) {
            r.pop_front();
        }
        r.push_back(now);
        if r.len() >= lim.ban_after_refused as usize {
            r.clear();
            return Attempt::Ban;
        }
        Attempt::Refused { retry_at }
    }

    /// Subscribes a connection to `key`'s events.
    pub(crate) fn subscribe(&mut self, account: usize, key: &str) -> (u64, Receiver<String>) {
        let (tx, rx) = mpsc::channel();
        self.next += 1;
        self.subs.push(Sub {
            id: self.next,
            account,
            key: key.to_string(),
            subscription: None,
            tx,
        });
        (self.next, rx)
    }

    /// Subscribes a WebSocket API connection (its channel `tx`) to `account`'s
    /// events under its `subscription` id; returns the hub's id for it.
    pub(crate) fn subscribe_api(
        &mut self,
        account: usize,
        subscription: u64,
        tx: Sender<String>,
    ) -> u64 {
        self.next += 1;
        self.subs.push(Sub {
            id: self.next,
            account,
            key: String::new(),
            subscription: Some(subscription),
            tx,
        });
        self.next
    }

    /// Ends every listenKey connection (each gets a close 1000); the listenKeys
    /// stay valid. WebSocket API subscriptions are not touched.
    pub(crate) fn close_all(&mut self) -> usize {
        let n = self.subs.len();
        self.subs.retain(|s| s.subscription.is_some());
        n - self.subs.len()
    }

    pub(crate) fn unsubscribe(&mut self, id: u64) {
        self.subs.retain(|s| s.id != id);
    }

    /// Sends `event` to every connection of `account`; returns how many took it.
    pub(crate) fn publish(&mut self, account: usize, event: &str) -> u64 {
        let mut n = 0;
        self.subs.retain(|s| {
            if s.account != account {
                return true;
            }
            let text = match s.subscription {
                None => event.to_string(),
                Some(id) => format!("{{\"subscriptionId\":{id},\"event\":{event}}}"),
            };
            let ok = s.tx.send(text).is_ok();
            n += u64::from(ok);
            ok
        });
        n
    }
}
