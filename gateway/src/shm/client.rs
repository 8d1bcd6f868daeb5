//! The strategy process's side: attach to a running `ergon-gateway` by name,
//! submit typed calls, read typed events.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{fence, Ordering};

use ergon_core::Class;

use super::codec::{decode_event, encode_call, item_fates, Call, FATE_BYTES};
use super::event::ShmEvent;
use super::opts::AttachOptions;
use super::os;
use super::region::{Region, EVENT_SLOT, SUBMIT_SLOT};
use super::rundir;
use crate::ids::{IdError, IdIssuer};
use crate::Tag;
use ergon_io::boundary::shm_ring::{PushError, ShmConsumer, ShmProducer, LEN_BYTES};
use ergon_venues::endpoint::{ClientOrderId, IdFormat};

/// Why a submit did not go over. Nothing was sent in any case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShmSubmitError {
    /// As many requests as the client may have in flight are: poll events first.
    Busy,
    /// The submit ring is full (the gateway has not taken the earlier ones yet).
    Full,
    /// The call does not fit a slot (or an argument is too long).
    TooBig,
    /// The gateway is gone (or its region is corrupt): attach again.
    /// [`Culprit::Peer`](ergon_io::Culprit::Peer): the other process.
    Gone,
}

impl core::fmt::Display for ShmSubmitError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            ShmSubmitError::Busy => "as many requests in flight as allowed",
            ShmSubmitError::Full => "submit ring full",
            ShmSubmitError::TooBig => "call too large for a slot",
            ShmSubmitError::Gone => "gateway gone",
        })
    }
}

impl std::error::Error for ShmSubmitError {}

impl ShmSubmitError {
    /// Who is at fault: Busy and Full are bounds waited out
    /// ([`Culprit::Policy`](ergon_io::Culprit::Policy)), TooBig a call that never
    /// fits ([`Culprit::Caller`](ergon_io::Culprit::Caller)), Gone the gateway
    /// process ([`Culprit::Peer`](ergon_io::Culprit::Peer)).
    pub fn culprit(&self) -> ergon_io::Culprit {
        match self {
            ShmSubmitError::Busy | ShmSubmitError::Full => ergon_io::Culprit::Policy,
            ShmSubmitError::TooBig => ergon_io::Culprit::Caller,
            ShmSubmitError::Gone => ergon_io::Culprit::Peer,
        }
    }
}

/// A strategy process's connection to a gateway.
///
/// Drive order: [`ShmClient::submit`] calls; [`ShmClient::poll`] events until
/// None; [`ShmClient::wait`] to sleep until the next event (or, busy-polling,
/// spin). When the gateway goes away (its socket hangs up), every request without
/// a final event comes back once as [`ShmEvent::Lost`], after whatever events the
/// ring still held; then submits fail with [`ShmSubmitError::Gone`].
pub struct ShmClient {
    sock: OwnedFd,
    region: Region,
    submit: ShmProducer,
    events: ShmConsumer,
    busy: bool,
    gone: bool,
    lost: Vec<Tag>,
    body: Vec<u8>,
    truncated: bool,
    reattached: bool,
    /// The block of client order ids the gateway handed out at this attach.
    ids: Option<IdIssuer>,
    /// A `BatchSettled` polled whose parts' fates are being handed out as
    /// `Item` events first, and how many are handed out; its body in `fates`.
    settling: Option<(ShmEvent, usize)>,
    fates: Vec<u8>,
}

impl core::fmt::Debug for ShmClient {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ShmClient")
            .field("in_flight", &self.in_flight())
            .field("gone", &self.gone)
            .finish()
    }
}

fn bad(what: impl Into<String>) -> io::Error {
    io::Error::other(what.into())
}

/// Connects to the gateway `name` and checks that the process listening there
/// runs as `gateway_uid` (the uid the kernel recorded for it, `SO_PEERCRED`).
/// Its socket in its runtime directory first ([`rundir::client_dirs`]: `dir`,
/// else [`rundir::RUNTIME_DIR_ENV`], else the rule's places), which no other
/// uid can take; else, from an older gateway or a client the directory keeps
/// out, the abstract socket `@ergon-gateway/NAME`, whose name is anyone's to
/// take first. A process of another uid at either is an impostor and is told
/// nothing.
pub(crate) fn connect_checked(
    name: &str,
    gateway_uid: u32,
    dir: Option<&Path>,
) -> io::Result<OwnedFd> {
    // What was refused on the way, said if nothing better is found: another
    // place may still hold the real gateway (each is checked on its own).
    let mut refused = None;
    for d in rundir::client_dirs(name, gateway_uid, dir) {
        match connect_in(&d, name, gateway_uid) {
            Ok(Some(sock)) => return Ok(sock),
            Ok(None) => {}
            Err(e) => refused = refused.or(Some(e)),
        }
    }
    let found = os::connect(name)
        .map_err(|e| {
            bad(format!(
                "no gateway named {name:?} (abstract socket @ergon-gateway/{name}): {e}"
            ))
        })
        .and_then(|sock| {
            check_peer(&sock, name, gateway_uid, &format!("@ergon-gateway/{name}"))?;
            Ok(sock)
        });
    match (found, refused) {
        (Ok(sock), _) => Ok(sock),
        (Err(e), Some(r)) => Err(io::Error::new(r.kind(), format!("{r}; and {e}"))),
        (Err(e), None) => Err(e),
    }
}

fn check_peer(sock: &OwnedFd, name: &str, gateway_uid: u32, at: &str) -> io::Result<()> {
    let peer = os::peer_cred(sock)
        .map_err(|e| bad(format!("gateway {name:?}: no peer credentials: {e}")))?;
    if peer.uid != gateway_uid {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "refusing gateway {name:?}: its socket is held by uid {} (pid {}), not uid {gateway_uid} (an impostor, or give --gateway-uid) ({at})",
                peer.uid, peer.pid
            ),
        ));
    }
    Ok(())
}

/// The gateway's socket in the directory `dir`, checked: None if there is
/// none this process can reach (no such directory or socket, a directory that
/// keeps this uid out, a socket nobody listens on); an error if what is there
/// is not a socket of `gateway_uid` (a symlink, another uid's socket: never
/// followed, never spoken to) or its listener runs as another uid.
fn connect_in(dir: &Path, name: &str, gateway_uid: u32) -> io::Result<Option<OwnedFd>> {
    let file = rundir::socket_file(name);
    let Ok(d) = os::open_dir(dir) else {
        return Ok(None);
    };
    let shown = dir.join(&file);
    let refuse = |why: String| {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("refusing gateway {name:?}: {}: {why}", shown.display()),
        )
    };
    let (mode, uid) = match os::stat_at(d.as_raw_fd(), &file) {
        Ok(Some(m)) => m,
        Ok(None) | Err(_) => return Ok(None),
    };
    match mode & libc::S_IFMT {
        libc::S_IFSOCK => {}
        libc::S_IFLNK => return Err(refuse("a symlink, not the gateway's socket".into())),
        _ => return Err(refuse("not a socket".into())),
    }
    if uid != gateway_uid {
        return Err(refuse(format!(
            "owned by uid {uid}, not uid {gateway_uid} (an impostor, or give --gateway-uid)"
        )));
    }
    let sock = match os::connect_at(d.as_raw_fd(), &file) {
        Ok(s) => s,
        // Stale (no gateway), or the socket's mode keeps this uid out.
        Err(_) => return Ok(None),
    };
    check_peer(&sock, name, gateway_uid, &shown.display().to_string())?;
    Ok(Some(sock))
}

/// Sends one text command to the gateway `name`, served by `gateway_uid`
/// ([`connect_checked`]), and returns its one-line answer and the descriptors
/// it carried.
pub(crate) fn command(
    name: &str,
    gateway_uid: u32,
    dir: Option<&Path>,
    cmd: &str,
) -> io::Result<(OwnedFd, String, Vec<OwnedFd>)> {
    let sock = connect_checked(name, gateway_uid, dir)?;
    // A gateway that refused this peer at accept may have answered and closed
    // before the command went out: its answer is still there to read.
    let sent = os::send_fds(sock.as_raw_fd(), cmd.as_bytes(), &[]);
    // A gateway answers from its loop at once; one that does not is wedged.
    if os::poll_fds([sock.as_raw_fd()], 10_000)[0] == 0 {
        return Err(bad(format!("gateway {name:?} did not answer in 10 s")));
    }
    let mut buf = [0u8; 512];
    match os::recv_fds(sock.as_raw_fd(), &mut buf)? {
        os::Recv::Msg(n, fds) => {
            let text = String::from_utf8_lossy(&buf[..n]).into_owned();
            Ok((sock, text, fds))
        }
        _ => Err(match sent {
            Err(e) => e,
            Ok(()) => bad("the gateway closed the connection"),
        }),
    }
}

/// The id block of an attach answer's tail (`new N ids FORM EPOCH FROM END`);
/// None if it names none, an error if it names one badly.
fn id_block(rest: &str) -> io::Result<Option<IdIssuer>> {
    let mut w = rest.split_whitespace().skip_while(|&w| w != "ids");
    if w.next().is_none() {
        return Ok(None);
    }
    let refuse = || bad(format!("gateway sent a bad id block: {rest:?}"));
    let format = match w.next() {
        Some("hex") => IdFormat::Hex,
        Some("cloid") => IdFormat::Cloid,
        Some("uuid") => IdFormat::Uuid,
        _ => return Err(refuse()),
    };
    let mut num = || {
        w.next()
            .and_then(|n| n.parse::<u64>().ok())
            .ok_or_else(refuse)
    };
    let (epoch, from, end) = (num()?, num()?, num()?);
    IdIssuer::range(format, epoch, from, end)
        .map(Some)
        .map_err(|e| bad(format!("gateway sent a bad id block: {e}")))
}

impl ShmClient {
    /// Attaches to the gateway `gateway` as `client` (a name that identifies this
    /// strategy across restarts: attaching again under it finds the outcomes of
    /// what it had in flight). `busy`: [`ShmClient::wait`] spins instead of sleeping.
    /// The gateway must run as this process's own effective uid
    /// ([`ShmClient::attach_uid`] names another).
    pub fn attach(gateway: &str, client: &str, busy: bool) -> io::Result<ShmClient> {
        Self::attach_with(gateway, client, AttachOptions::new().busy(busy))
    }

    /// [`ShmClient::attach`] with options: whether it busy-polls, whether it
    /// hears the gateway's open-orders polls (off unless asked), the uid the
    /// gateway must run as.
    pub fn attach_with(gateway: &str, client: &str, o: AttachOptions) -> io::Result<ShmClient> {
        Self::attach_in(None, gateway, client, o)
    }

    /// [`ShmClient::attach_with`] to the gateway whose runtime directory
    /// (`--runtime-dir`) is `runtime_dir`: its socket there is the one looked
    /// for, then the abstract name (an older gateway). None: the directory
    /// [`ERGON_GATEWAY_RUNTIME_DIR`](crate::shm::rundir::RUNTIME_DIR_ENV) names,
    /// else the places of [`client_dirs`](crate::shm::rundir::client_dirs).
    pub fn attach_in(
        runtime_dir: Option<&Path>,
        gateway: &str,
        client: &str,
        o: AttachOptions,
    ) -> io::Result<ShmClient> {
        let uid = o.gateway_uid.unwrap_or_else(os::euid);
        if client.is_empty() || client.len() > 64 || client.contains(char::is_whitespace) {
            return Err(bad("client name: 1 to 64 characters, no spaces"));
        }
        let cmd = format!("attach {client} {}", o.words());
        let (sock, answer, mut fds) = command(gateway, uid, runtime_dir, &cmd)?;
        let Some(rest) = answer.strip_prefix("ok ") else {
            return Err(bad(format!("gateway refused: {answer}")));
        };
        if fds.len() != 1 {
            return Err(bad("gateway sent no region"));
        }
        let memfd = fds.pop().expect("1");
        let ids = id_block(rest)?;
        let region = Region::open(&memfd)?;
        let submit = region.submit_producer()?;
        let events = region.event_consumer()?;
        Ok(ShmClient {
            sock,
            submit,
            events,
            busy: o.busy,
            gone: false,
            lost: Vec::new(),
            body: Vec::with_capacity(EVENT_SLOT),
            truncated: false,
            reattached: rest.starts_with("reattached"),
            region,
            ids,
            settling: None,
            fates: Vec::with_capacity(EVENT_SLOT),
        })
    }

    /// [`ShmClient::attach`] to a gateway that runs as `gateway_uid`: a process
    /// of any other uid listening under the name is refused (the error names
    /// the uid it runs as) and is sent nothing but the connection.
    pub fn attach_uid(
        gateway: &str,
        gateway_uid: u32,
        client: &str,
        busy: bool,
    ) -> io::Result<ShmClient> {
        Self::attach_with(
            gateway,
            client,
            AttachOptions::new().busy(busy).gateway_uid(gateway_uid),
        )
    }

    /// A client order id no earlier one carried, from the block the gateway
    /// handed out at this attach (its boot epoch and a range of its sequence:
    /// see [`crate::ids`]). Reads no clock, allocates nothing, asks the gateway
    /// nothing. `Err(NoEpoch)`: the gateway handed out no block (it has no boot
    /// epoch); `Err(Exhausted)`: attach again for a new block.
    pub fn next_client_order_id(&mut self) -> Result<ClientOrderId, IdError> {
        self.ids.as_mut().ok_or(IdError::NoEpoch)?.next_id()
    }

    /// Whether this attach found a region of an earlier life under the same name.
    pub fn reattached(&self) -> bool {
        self.reattached
    }

    /// Requests submitted whose final event has not been polled.
    pub fn in_flight(&self) -> usize {
        let t = self.region.flight();
        t.iter()
            .filter(|e| e.used.load(Ordering::Relaxed) != 0)
            .count()
    }

    /// The tags in flight (after a re-attach, those of the earlier life too).
    pub fn in_flight_tags(&self) -> impl Iterator<Item = Tag> + '_ {
        self.region
            .flight()
            .iter()
            .filter(|e| e.used.load(Ordering::Relaxed) != 0)
            .map(|e| e.tag.load(Ordering::Relaxed))
    }

    /// Whether the gateway is known to be gone.
    pub fn is_gone(&self) -> bool {
        self.gone
    }

    /// Submits `call` with `class` and `tag`; its events come back through
    /// [`ShmClient::poll`]. Busy, Full and TooBig leave nothing behind.
    pub fn submit(
        &mut self,
        call: &Call<'_>,
        class: Class,
        tag: Tag,
    ) -> Result<(), ShmSubmitError> {
        if self.gone {
            return Err(ShmSubmitError::Gone);
        }
        let table = self.region.flight();
        let Some(free) = table
            .iter()
            .position(|e| e.used.load(Ordering::Relaxed) == 0)
        else {
            return Err(ShmSubmitError::Busy);
        };
        let mut buf = [0u8; SUBMIT_SLOT - LEN_BYTES];
        let n = encode_call(call, class, tag, &mut buf).ok_or(ShmSubmitError::TooBig)?;
        let r = self.submit.push(|slot| {
            slot[..n].copy_from_slice(&buf[..n]);
            n
        });
        match r {
            Ok(()) => {}
            Err(PushError::Full) => return Err(ShmSubmitError::Full),
            Err(PushError::Corrupt) => {
                self.gone = true;
                return Err(ShmSubmitError::Gone);
            }
        }
        // After the push: a client killed in between leaves no phantom entry.
        let table = self.region.flight();
        table[free].tag.store(tag, Ordering::Relaxed);
        table[free].used.store(1, Ordering::Relaxed);
        let h = self.region.header();
        // Pairs with the gateway's fence after it announces a park.
        fence(Ordering::SeqCst);
        if h.gw_sleeping.load(Ordering::Relaxed) != 0 {
            os::wake(self.sock.as_raw_fd());
        }
        Ok(())
    }

    fn settle(&mut self, tag: Tag) {
        let table = self.region.flight();
        if let Some(e) = table
            .iter()
            .find(|e| e.used.load(Ordering::Relaxed) != 0 && e.tag.load(Ordering::Relaxed) == tag)
        {
            e.used.store(0, Ordering::Relaxed);
        }
    }

    /// The next event and its body (an answer's body, or for
    /// [`ShmEvent::OpenOrders`] the open client order ids, one a line), if one is
    /// waiting. Never blocks. A request of several parts gives one
    /// [`ShmEvent::Item`] per part, then its [`ShmEvent::BatchSettled`] (whose
    /// body still holds every fate), as in-process.
    pub fn poll(&mut self) -> Option<(ShmEvent, &[u8])> {
        if let Some((settled, next)) = self.settling {
            let at = next * FATE_BYTES;
            let part = self.fates.get(at..at + FATE_BYTES).unwrap_or(&[]);
            let next_fate = item_fates(part).next();
            match next_fate {
                Some(Ok((item, fate))) => {
                    self.settling = Some((settled, next + 1));
                    self.body.clear();
                    let tag = settled.tag();
                    return Some((ShmEvent::Item { tag, item, fate }, &self.body));
                }
                // The end, or bytes that are not a fate, end the hand-out (the
                // body, given with the BatchSettled, says what they were).
                _ => {
                    self.settling = None;
                    core::mem::swap(&mut self.body, &mut self.fates);
                    self.settle(settled.tag());
                    return Some((settled, &self.body));
                }
            }
        }
        loop {
            let (body, truncated) = (&mut self.body, &mut self.truncated);
            let got = self.events.pop(|b| {
                decode_event(b).map(|(ev, bytes, cut)| {
                    body.clear();
                    body.extend_from_slice(bytes);
                    *truncated = cut;
                    ev
                })
            });
            match got {
                Ok(Some(Ok(ev @ ShmEvent::BatchSettled { .. }))) if !self.body.is_empty() => {
                    // Its parts' fates first, each an Item; it last.
                    core::mem::swap(&mut self.body, &mut self.fates);
                    self.settling = Some((ev, 0));
                    return self.poll();
                }
                Ok(Some(Ok(ev))) => {
                    if ev.is_final() {
                        self.settle(ev.tag());
                    }
                    return Some((ev, &self.body));
                }
                Ok(Some(Err(_))) => continue, // a slot that does not decode: skipped
                Ok(None) => {}
                Err(_) => self.gone = true,
            }
            break;
        }
        if self.gone {
            if self.lost.is_empty() {
                let tags: Vec<Tag> = self.in_flight_tags().collect();
                self.lost = tags;
            }
            let tag = self.lost.pop()?;
            self.settle(tag);
            self.body.clear();
            return Some((ShmEvent::Lost { tag }, &self.body));
        }
        None
    }

    /// Whether the last polled body was cut at the slot's end.
    pub fn body_truncated(&self) -> bool {
        self.truncated
    }

    /// Sleeps until an event is waiting, the gateway hangs up, or `timeout_ms`
    /// passes (busy-polling: spins instead, looking at the socket now and then).
    /// Returns whether something may be ready to [`ShmClient::poll`].
    pub fn wait(&mut self, timeout_ms: i32) -> bool {
        if self.gone || self.events.ready() {
            return true;
        }
        if self.busy {
            let until = ergon_io::clock::now_ns() + i64::from(timeout_ms.max(0)) * 1_000_000;
            let mut n = 0u32;
            loop {
                if self.events.ready() {
                    return true;
                }
                n = n.wrapping_add(1);
                if n % 4096 == 0 {
                    if self.hung_up(0) {
                        return true;
                    }
                    if ergon_io::clock::now_ns() >= until {
                        return false;
                    }
                }
                core::hint::spin_loop();
            }
        }
        let h = self.region.header();
        h.client_sleeping.store(1, Ordering::Relaxed);
        // Pairs with the gateway's fence after its push.
        fence(Ordering::SeqCst);
        let ready = self.events.ready() || self.hung_up(timeout_ms);
        self.region
            .header()
            .client_sleeping
            .store(0, Ordering::Relaxed);
        if !os::drain_wakes(self.sock.as_raw_fd()) {
            self.gone = true;
        }
        ready || self.events.ready()
    }

    /// Waits on the socket for `timeout_ms` (a wake-up, or the gateway's
    /// hang-up) and reads the wake-ups; true if the gateway is gone.
    fn hung_up(&mut self, timeout_ms: i32) -> bool {
        let r = os::poll_fds([self.sock.as_raw_fd()], timeout_ms);
        if r[0] != 0 && !os::drain_wakes(self.sock.as_raw_fd()) {
            self.gone = true;
        }
        self.gone
    }

    /// Looks at the socket without waiting: true if the gateway is gone (then
    /// [`ShmClient::poll`] reports the lost requests).
    pub fn check_gateway(&mut self) -> bool {
        self.hung_up(0)
    }
}
