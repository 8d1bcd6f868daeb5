//! The user data stream's bookkeeping, in the venue state: the WebSocket API
//! subscriptions to an account's events, and the per-IP record of WebSocket
//! connect attempts (see `crate::profiles::binance::ws_api` for the rules and
//! their sources).
//!
//! Plain state: it never touches a socket or reads a clock. A subscriber is the
//! sending half of a channel; its connection's thread holds the other half.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::mpsc::Sender;

/// One subscriber: a WebSocket API subscription.
struct Sub {
    id: u64,
    account: usize,
    /// Its `subscriptionId`: its events are sent wrapped as
    /// `{"subscriptionId":..,"event":{..}}`.
    subscription: u64,
    tx: Sender<String>,
}

/// Subscribers and per-IP connect records; lives in the venue state.
#[derive(Default)]
pub(crate) struct WsHub {
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
            subscription,
            tx,
        });
        self.next
    }

    pub(crate) fn unsubscribe(&mut self, id: u64) {
        self.subs.retain(|s| s.id != id);
    }

    /// Whether any connection is subscribed to `account`'s events (else an
    /// event need not be built: nobody would take it).
    pub(crate) fn has_subscriber(&self, account: usize) -> bool {
        self.subs.iter().any(|s| s.account == account)
    }

    /// Sends `event` to every connection of `account`; returns how many took it.
    pub(crate) fn publish(&mut self, account: usize, event: &str) -> u64 {
        let mut n = 0;
        self.subs.retain(|s| {
            if s.account != account {
                return true;
            }
            let text = format!(
                "{{\"subscriptionId\":{},\"event\":{event}}}",
                s.subscription
            );
            let ok = s.tx.send(text).is_ok();
            n += u64::from(ok);
            ok
        });
        n
    }
}
