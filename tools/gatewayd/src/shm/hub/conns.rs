//! The hub's connections: accepted and checked by their peer's uid, capped
//! per uid and in all, timed out when silent, and the commands they send.

use std::os::fd::AsRawFd;
use std::os::fd::OwnedFd;

use ergon_gateway::shm::os::{self, Recv};
use ergon_gateway::shm::read_attach_words;
use ergon_gateway::{Account, Api};

use super::{
    Conn, Hub, ACCEPTS_PER_CALL, ACCEPT_BACKOFF_NS, CONN0, LISTENER, MSGS_PER_CALL,
    PENDING_PER_UID, SILENT_CONN_NS,
};

impl Hub {
    pub(super) fn reply(fd: &OwnedFd, text: &str, fds: &[i32]) {
        let _ = os::send_fds(fd.as_raw_fd(), text.as_bytes(), fds);
    }

    /// Most connections at once: an attached one per client, and as many again
    /// still to say who they are.
    pub(super) fn max_conns(&self) -> usize {
        2 * self.cfg.max_clients + 16
    }

    /// Stops watching the listener until `until` (no descriptor left): a
    /// listener the loop cannot drain would wake it for ever.
    pub(super) fn pause_listener(&mut self, until: i64) {
        if self.listen_paused_until.is_none() {
            for l in &self.listeners {
                self.ep.remove(l.as_raw_fd());
            }
            self.accept_pauses += 1;
        }
        self.listen_paused_until = Some(until);
    }

    /// Watches the listener again once its pause is over.
    pub(super) fn resume_listener(&mut self, now: i64) {
        if self.listen_paused_until.is_some_and(|t| now >= t) {
            for (i, l) in self.listeners.iter().enumerate() {
                let _ = self.ep.add(l.as_raw_fd(), LISTENER + i as u64);
            }
            self.listen_paused_until = None;
        }
    }

    /// Closes the connections not attached within [`SILENT_CONN_NS`] of their
    /// accept.
    pub(super) fn close_silent(&mut self, now: i64) {
        for i in 0..self.conns.len() {
            let over = self.conns[i]
                .as_ref()
                .filter(|c| c.client.is_none() && now - c.opened_at >= SILENT_CONN_NS)
                .map(|c| c.heard);
            match over {
                Some(false) => self.silent_closed += 1,
                Some(true) => self.expired += 1,
                None => continue,
            }
            self.close(i, now);
        }
    }

    /// Connections not attached that `uid` holds.
    pub(super) fn pending_of(&self, uid: u32) -> usize {
        self.conns
            .iter()
            .flatten()
            .filter(|c| c.client.is_none() && c.uid == uid)
            .count()
    }

    /// Closes the oldest connection not attached whose uid `pick` takes, to
    /// make room for a new one. False if there is none.
    pub(super) fn evict(&mut self, pick: impl Fn(u32) -> bool, now: i64) -> bool {
        let oldest = self
            .conns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.as_ref().map(|c| (i, c)))
            .filter(|(_, c)| c.client.is_none() && pick(c.uid))
            .min_by_key(|(_, c)| (c.opened_at, c.gen))
            .map(|(i, _)| i);
        match oldest {
            Some(i) => {
                self.capped += 1;
                self.close(i, now);
                true
            }
            None => false,
        }
    }

    /// Answers `why` on a connection about to be dropped at accept, after
    /// reading what it already sent (closing with it unread would reset the
    /// connection before the answer could be read).
    pub(super) fn turn_away(&mut self, fd: OwnedFd, why: &str) {
        self.capped += 1;
        let _ = os::drain_wakes(fd.as_raw_fd());
        Self::reply(&fd, why, &[]);
    }

    pub(super) fn accept(&mut self, now: i64) {
        // Bounded: a peer connecting without end costs a few accepts a turn.
        for _ in 0..ACCEPTS_PER_CALL {
            // Each listener in turn, until none has a connection waiting.
            let mut r = Ok(None);
            for l in &self.listeners {
                r = os::accept(l);
                if !matches!(r, Ok(None)) {
                    break;
                }
            }
            let fd = match r {
                Ok(Some(fd)) => fd,
                Ok(None) => return,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    return self.pause_listener(now + ACCEPT_BACKOFF_NS);
                }
                // A peer gone before it was accepted (ECONNABORTED) and the like.
                Err(_) => return,
            };
            // The kernel's record of who connected; what the peer says is not
            // asked. A refused peer's first command is answered with the refusal
            // and its connection closed then (closing it now, its command unread,
            // would reset the connection before the answer could be read).
            let peer = os::peer_cred(&fd);
            let refusal = match &peer {
                Ok(p) if self.allowed(*p) => None,
                Ok(p) => Some(format!(
                    "err not allowed: uid {} gid {} is neither the gateway's owner (uid {}) nor in --allow-uid/--allow-gid",
                    p.uid, p.gid, self.owner
                )),
                Err(e) => Some(format!("err not allowed: no peer credentials: {e}")),
            };
            self.refused += u64::from(refusal.is_some());
            let uid = peer.as_ref().map_or(u32::MAX, |p| p.uid);
            if self.pending_of(uid) >= PENDING_PER_UID {
                self.evict(|u| u == uid, now);
            }
            // At the cap, another uid's oldest goes (never the owner's): whoever
            // holds connections open, the owner and every other uid get theirs.
            let owner = self.owner;
            if self.conns.iter().flatten().count() >= self.max_conns()
                && !self.evict(|u| u != uid && u != owner, now)
            {
                self.turn_away(fd, "err too many connections");
                continue;
            }
            let i = match self.conns.iter().position(Option::is_none) {
                Some(i) => i,
                None => {
                    self.conns.push(None);
                    self.conns.len() - 1
                }
            };
            if self.ep.add(fd.as_raw_fd(), CONN0 + i as u64).is_ok() {
                self.next_conn_gen += 1;
                self.conns[i] = Some(Conn {
                    fd,
                    client: None,
                    uid,
                    refusal,
                    gen: self.next_conn_gen,
                    opened_at: now,
                    heard: false,
                });
            }
        }
    }

    /// Whether a peer may use the gateway at all: its owner, a listed uid, or a
    /// listed (primary) gid.
    pub(super) fn allowed(&self, p: os::PeerCred) -> bool {
        p.uid == self.owner
            || self.cfg.allow_uids.contains(&p.uid)
            || self.cfg.allow_gids.contains(&p.gid)
    }

    pub(super) fn close(&mut self, i: usize, now: i64) {
        if let Some(c) = self.conns.get_mut(i).and_then(Option::take) {
            self.ep.remove(c.fd.as_raw_fd());
            if let Some(k) = c.client {
                // Only a client attached on this very connection is detached.
                if let Some(cl) = self.clients[k]
                    .as_mut()
                    .filter(|cl| cl.conn == Some((i, c.gen)))
                {
                    cl.conn = None;
                    cl.sock = -1;
                    cl.detached_at = Some(now);
                }
            }
        }
    }

    /// Reads what connection `i` sent: at most [`MSGS_PER_CALL`] messages
    /// (wake-ups or commands), so that a client flooding its doorbell costs a
    /// few reads a turn.
    pub(super) fn on_conn<E: Account>(&mut self, api: &mut Api<'_, '_, E>, i: usize) {
        for _ in 0..MSGS_PER_CALL {
            let mut buf = [0u8; 256];
            let r = match self.conns.get(i).and_then(Option::as_ref) {
                Some(c) => os::recv_fds(c.fd.as_raw_fd(), &mut buf),
                None => return,
            };
            let n = match r {
                Ok(Recv::Msg(n, _)) => n,
                Ok(Recv::Empty) => return,
                Ok(Recv::Closed) | Err(_) => return self.close(i, api.now()),
            };
            self.on_message(api, i, &buf[..n]);
        }
    }

    pub(super) fn on_message<E: Account>(
        &mut self,
        api: &mut Api<'_, '_, E>,
        i: usize,
        msg: &[u8],
    ) {
        let now = api.now();
        if let Some(c) = self.conns[i].as_mut() {
            c.heard = true;
        }
        if let Some(why) = self.conns[i].as_ref().and_then(|c| c.refusal.clone()) {
            self.answer(i, &why);
            return self.close(i, now);
        }
        if msg == os::WAKE {
            // A doorbell: this turn takes the client's submits.
            return;
        }
        let text = String::from_utf8_lossy(msg).into_owned();
        let mut words = text.split_whitespace();
        match (words.next(), words.next()) {
            // The words after the name: the client's protocol and wishes.
            (Some("attach"), Some(name)) if !self.stopping => match read_attach_words(words) {
                Ok(asked) => self.attach_client(api, i, name, asked),
                Err(e) => self.answer(i, &format!("err {e}")),
            },
            (Some("attach"), _) => self.answer(i, "err stopping or no name"),
            (Some("stats"), _) => {
                if let Some(c) = self.conns[i].as_ref() {
                    Self::reply(&c.fd, "ok stats", &[self.stats.fd()]);
                }
            }
            (Some("clear-halt"), Some(_))
                if self.conns[i].as_ref().is_some_and(|c| c.uid != self.owner) =>
            {
                let msg = format!(
                    "err clear-halt is for the gateway's owner (uid {}) only",
                    self.owner
                );
                self.answer(i, &msg);
            }
            (Some("clear-halt"), Some(bucket)) => {
                let b = api.budget();
                let msg = match b.bucket(bucket) {
                    None => format!("err no bucket named {bucket:?}"),
                    Some(id) if !b.halted().any(|h| h == id) => {
                        format!("err {bucket} is not halted")
                    }
                    Some(id) => match b.clear_halt(id) {
                        Ok(()) => format!("ok cleared {bucket}"),
                        Err(e) => format!("err {e}"),
                    },
                };
                // The record goes before the answer: a restart after `ok` never
                // comes up halted again.
                self.sync_halts(api);
                self.answer(i, &msg);
            }
            _ => self.answer(i, "err unknown command"),
        }
    }

    pub(super) fn answer(&self, i: usize, text: &str) {
        if let Some(c) = self.conns.get(i).and_then(Option::as_ref) {
            Self::reply(&c.fd, text, &[]);
        }
    }
}
