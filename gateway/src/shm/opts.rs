//! What a client asks for when it attaches: the words after `attach NAME`,
//! written by [`AttachOptions::words`] and read by the gateway with
//! [`read_attach_words`].

use super::region::PROTOCOL;

/// How [`ShmClient::attach_with`](crate::shm::ShmClient::attach_with) attaches.
///
/// ```
/// use ergon_gateway::shm::AttachOptions;
/// let o = AttachOptions::new().open_orders(true);
/// assert_eq!(o.words(), "protocol=3 open-orders");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AttachOptions {
    pub(super) busy: bool,
    pub(super) open_orders: bool,
    pub(super) gateway_uid: Option<u32>,
}

impl AttachOptions {
    /// Sleeps between events, hears no open-orders polls, expects the gateway
    /// to run as this process's own effective uid.
    pub fn new() -> AttachOptions {
        AttachOptions::default()
    }

    /// [`ShmClient::wait`](crate::shm::ShmClient::wait) spins instead of sleeping.
    pub fn busy(mut self, busy: bool) -> AttachOptions {
        self.busy = busy;
        self
    }

    /// Whether this client hears the gateway's open-orders polls
    /// ([`ShmEvent::OpenOrders`](crate::shm::ShmEvent::OpenOrders), its own
    /// orders only). Off by default: the polls spend request weight (Binance
    /// Spot: weight 6 each, twice a second, 720 of the IP's 6000 a minute), and
    /// the gateway polls for that purpose only while a client that asked is
    /// attached.
    pub fn open_orders(mut self, open_orders: bool) -> AttachOptions {
        self.open_orders = open_orders;
        self
    }

    /// The uid the gateway must run as (default: this process's effective
    /// uid); a process of any other uid under the name is refused.
    pub fn gateway_uid(mut self, uid: u32) -> AttachOptions {
        self.gateway_uid = Some(uid);
        self
    }

    /// The words after `attach NAME` that say what this client asks for: the
    /// protocol it speaks, then its wishes.
    pub fn words(&self) -> String {
        let mut w = format!("protocol={PROTOCOL}");
        if self.open_orders {
            w += " open-orders";
        }
        w
    }
}

/// What a client asked for at attach, as the gateway reads it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Asked {
    /// It wants the open-orders polls.
    pub open_orders: bool,
}

/// Reads the words after `attach NAME`. An error (the text to answer after
/// `err `) for a client of another protocol, one that names none (protocol 2
/// or older), or a word it does not know: such a client is refused, never
/// misread.
pub fn read_attach_words<'a>(words: impl IntoIterator<Item = &'a str>) -> Result<Asked, String> {
    let mut asked = Asked::default();
    let mut protocol = None;
    for w in words {
        match w.split_once('=') {
            Some(("protocol", v)) => protocol = Some(v.to_string()),
            None if w == "open-orders" => asked.open_orders = true,
            _ => return Err(format!("unknown attach option {w:?}")),
        }
    }
    match protocol {
        Some(p) if p == PROTOCOL.to_string() => Ok(asked),
        Some(p) => Err(format!(
            "this gateway speaks protocol {PROTOCOL}, the client protocol {p}: use a client of the gateway's version"
        )),
        None => Err(format!(
            "this gateway speaks protocol {PROTOCOL}, the client protocol 2 or older (it names none): use a client of the gateway's version"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_read_back_and_an_old_client_is_refused_by_name() {
        for o in [AttachOptions::new(), AttachOptions::new().open_orders(true)] {
            let w = o.words();
            assert_eq!(
                read_attach_words(w.split_whitespace()),
                Ok(Asked {
                    open_orders: o.open_orders
                })
            );
        }
        let old = read_attach_words([]).unwrap_err();
        assert!(
            old.contains("protocol 3") && old.contains("protocol 2"),
            "{old}"
        );
        let other = read_attach_words(["protocol=4"]).unwrap_err();
        assert!(
            other.contains("protocol 3") && other.contains("protocol 4"),
            "{other}"
        );
        let odd = read_attach_words(["protocol=3", "poll-everything"]).unwrap_err();
        assert!(odd.contains("poll-everything"), "{odd}");
    }
}
