//! The gateway across processes: one `ergon-gateway` process owns the venue
//! connections and the budget of an IP and an account; strategy processes
//! submit typed calls and read typed events over shared memory.
//!
//! # How a client attaches
//!
//! The gateway listens on a socket file in its private runtime directory,
//! [`rundir::socket_file`] (`gateway-NAME.sock`, mode 0660, in the directory
//! [`rundir::runtime_dir`] names; no other uid can write there, so none can
//! take or replace it), and on the **abstract** Unix socket
//! `@ergon-gateway/NAME` for older clients (no file; but any uid can take the
//! name first, which costs the gateway only a warning). Both are
//! `SOCK_SEQPACKET`. A client sends `attach CLIENT
//! protocol=3`, and the word `open-orders` if it wants the gateway's polls of
//! open orders ([`AttachOptions`]; a gateway polls for that purpose only while
//! such a client is attached); an attach of another protocol, or naming none
//! (every client of 2 or older), is answered `err` naming both versions and
//! given no region. Otherwise the gateway answers `ok new N` or `ok reattached N` (followed, when the gateway has
//! a boot epoch, by `ids FORM EPOCH FROM END`: a fresh block of client order ids
//! for this attach, [`ShmClient::next_client_order_id`]) with one descriptor
//! (SCM_RIGHTS): the client's region (a memfd, laid out as below). The
//! connection then stays open for the client's life: it carries the wake-ups
//! (a one-byte message: the client's doorbell when the gateway's loop is parked,
//! the gateway's wake when the client waits), and its hang-up is how each side
//! learns the other is gone. The gateway sends with `MSG_DONTWAIT` on its own
//! end of the connection, whose flags no client can change, and reads at most
//! a few messages per turn: nothing a client does to what it holds (clearing
//! `O_NONBLOCK`, never reading, flooding) can block the loop, and no descriptor
//! is shared between clients, so none can steal another's wake-up.
//!
//! ```text
//! 0     header: magic, geometry, gateway-sleeping and client-sleeping flags,
//!       the submit ring's and the event ring's indices (each on its own line)
//! 4096  submit slots: in_flight x 256 B                (client -> gateway)
//!       event slots:  4 x in_flight x 4096 B            (gateway -> client)
//!       flight table: in_flight x (tag, used), the client's own
//! ```
//!
//! Both rings are [`shm_ring`](ergon_io::boundary::shm_ring): SPSC, fixed slots,
//! preallocated; a full submit ring is [`ShmSubmitError::Full`] at once, and a
//! client can never have more in flight than its ring has slots
//! ([`ShmSubmitError::Busy`]), so its event ring (four slots per request: Retrying,
//! Reconciling, a final one, an open-orders broadcast) is never full.
//!
//! Wake-ups: a side that is about to sleep sets its flag, fences, and looks at
//! its ring once more; a side that pushed fences and sends the other a wake-up
//! only if the flag is set. With `busy` ([`ShmClient::attach`]) the client spins
//! instead; the gateway's loop busy-polls with its own `busy_poll` setting.
//!
//! # Who may connect
//!
//! The gateway signs with the account's key for whoever attaches, so every
//! connection is checked at accept by the uid and gid the kernel recorded for the
//! peer (`SO_PEERCRED`; nothing the peer says): the gateway's own effective uid,
//! `HubConfig::allow_uids` and `HubConfig::allow_gids` (ergon-gatewayd) (the peer's primary gid)
//! may use it; any other peer's first command is answered `err not allowed: ...`
//! and its connection closed, before it can attach, read the stats or clear a
//! halt. `clear-halt` is the owner's alone (same uid as the gateway), listed uids
//! and gids included. A client name belongs to the uid that first attached
//! under it (kept in the owners file beside the journal, so across restarts
//! too): another uid's `attach NAME` is answered `err the client name NAME
//! belongs to uid U, not uid V`, so no allowed uid can take another's region,
//! events or orders by its name.
//!
//! Clients authenticate the server too: [`ShmClient::attach`], [`read_stats`]
//! and [`clear_halt`] look for the socket file first ([`rundir::client_dirs`]:
//! the directory [`rundir::RUNTIME_DIR_ENV`] or the `*_in` variants name, else
//! the rule's places), believed only if a socket (not a symlink) owned by the
//! uid they expect; then the abstract name, whose name is anyone's to take
//! first. At either they check the uid the kernel recorded for the listening
//! process (`SO_PEERCRED`) against the one they expect (their own; the `*_uid`
//! variants and `--gateway-uid` name another) and send nothing to any other. A
//! client of another uid reaches the socket file only if the directory's group
//! lets it in (`RuntimeDirectoryMode=0750` and the gateway's group); otherwise
//! it uses the abstract name, checked the same way.
//!
//! # Crash cases
//!
//! - **A client dies** (SIGKILL, mid-flight): its socket hangs up; the gateway
//!   keeps its region and goes on settling what it had in flight exactly as usual
//!   (answers, re-sends of what surely did not run, reconcile of unknowns), writing
//!   the events into the region. Calls it pushed before dying are still taken and
//!   sent (it sent them). Attaching again under the same name hands back the same
//!   region: the events wait in the ring and the flight table lists the tags that
//!   were in flight. A region nobody re-attaches is dropped `HubConfig::keep_ns`
//!   after its last request settled.
//! - **The gateway dies**: every client's socket hangs up at once
//!   ([`ShmClient::wait`] sleeps on it too; [`ShmClient::check_gateway`] looks
//!   without waiting). [`ShmClient::poll`] hands out the events still in the ring,
//!   then one [`ShmEvent::Lost`] per request in flight: its outcome is unknown,
//!   to be queried by client order id ([`Call::Query`]) through a new gateway,
//!   never re-sent. The gateway itself writes each new order's symbol and client
//!   order id into its journal (`HubConfig::journal`, a file mapped shared)
//!   before sending it and clears it at the final event; a gateway started on the
//!   same journal queries every order left in it before it takes any new submit.
//!
//! # Stopping
//!
//! After SIGTERM (the `stop` flag of `Hub::bind` (ergon-gatewayd)) the hub accepts no
//! connection and sends nothing new: each submit taken from then on is answered
//! at once with [`ShmEvent::Limited`] `{ why: Why::Halted, ready_in_ns: i64::MAX }`
//! (final, nothing charged or sent); what was in flight settles, then the loop
//! stops. One `attach` per connection: a second is answered `err`.
//!
//! # Fair shares
//!
//! `HubConfig::share` (ergon-gatewayd): each client may use at most this fraction of what every
//! bucket can give the clients (its limit less the units it counts beyond the
//! clients' own: another sender on the IP, a venue figure above the local count)
//! in any window of the bucket's length (a sliding window of the client's own
//! charges);
//! over it, its call is [`ShmEvent::Limited`] locally and nothing is charged, so a
//! runaway client cannot take the others' part. Without a share set, each client's
//! is the fair share, one over the clients attached at the call, rounded up
//! (none for a lone client). The stats name each client's use.
//!
//! # Whose orders
//!
//! A client's calls may name only client order ids of the blocks it was issued
//! ([`ShmClient::next_client_order_id`]); any other is [`ShmEvent::NotYours`],
//! final, nothing charged or sent. Order updates, the open-orders polls and the
//! answers to its own open-orders calls carry its own orders only. The blocks
//! are kept by client name beside the journal (`JOURNAL.owners`), so an earlier
//! gateway life's ids stay their owner's; only ids that file does not name but
//! this journal holds (left in flight by an earlier life) stay open to every
//! client. An id of another gateway on the account (an older epoch this
//! journal does not hold) is nobody's: [`ShmEvent::NotYours`], its updates to
//! no client.
//! `HubConfig::class_ceiling` (ergon-gatewayd): a call of a more privileged class than the
//! ceiling is charged as the ceiling (a strategy cannot reach the headroom kept
//! for protective closes).

mod charges;
mod client;
mod codec;
mod event;
pub mod files;
mod opts;
pub mod os;
pub mod region;
pub mod rundir;
pub mod stats;

pub use crate::events::ORDER_UPDATE;
pub use charges::{ChargeLog, Charged, KeptLimit, Recent, SLOTS};
pub use client::{ShmClient, ShmSubmitError};
pub use codec::{
    decode_call, decode_event, encode_call, encode_event, fate_bytes, item_fates, BadMessage, Call,
    FATE_BYTES,
};
pub use event::ShmEvent;
pub use opts::{read_attach_words, Asked, AttachOptions};
pub use region::{EVENTS_PER_REQUEST, EVENT_SLOT, PROTOCOL, SUBMIT_SLOT};
pub use stats::STATS_BYTES;

/// Reads the stats snapshot of the gateway `name` (`ergon-gateway --stats`),
/// served by this process's own effective uid ([`read_stats_uid`]).
pub fn read_stats(name: &str) -> std::io::Result<String> {
    read_stats_uid(name, os::euid())
}

/// [`read_stats`] of a gateway that runs as `gateway_uid`: a process of any
/// other uid under the name is refused, naming its uid.
pub fn read_stats_uid(name: &str, gateway_uid: u32) -> std::io::Result<String> {
    read_stats_in(None, name, gateway_uid)
}

/// [`read_stats_uid`] of the gateway whose runtime directory is `runtime_dir`
/// (None: as [`ShmClient::attach_in`] looks for it).
pub fn read_stats_in(
    runtime_dir: Option<&std::path::Path>,
    name: &str,
    gateway_uid: u32,
) -> std::io::Result<String> {
    let (_sock, answer, fds) = client::command(name, gateway_uid, runtime_dir, "stats")?;
    match (answer.starts_with("ok"), fds.first()) {
        (true, Some(fd)) => Ok(stats::read(fd)?.unwrap_or_default()),
        _ => Err(std::io::Error::other(format!(
            "gateway answered {answer:?}"
        ))),
    }
}

/// Sends one raw command line (`attach NAME`, `stats`, `clear-halt BUCKET`) to
/// the gateway `name`: the socket, the answer line and the descriptors it
/// carried, unmapped. For tools and tests that look at what a gateway hands out
/// (as a hostile client would); strategies use [`ShmClient`]. The gateway must
/// run as this process's own effective uid ([`raw_command_uid`]).
pub fn raw_command(
    name: &str,
    cmd: &str,
) -> std::io::Result<(std::os::fd::OwnedFd, String, Vec<std::os::fd::OwnedFd>)> {
    raw_command_uid(name, os::euid(), cmd)
}

/// [`raw_command`] to a gateway that runs as `gateway_uid`.
pub fn raw_command_uid(
    name: &str,
    gateway_uid: u32,
    cmd: &str,
) -> std::io::Result<(std::os::fd::OwnedFd, String, Vec<std::os::fd::OwnedFd>)> {
    client::command(name, gateway_uid, None, cmd)
}

/// Asks the gateway `name` to clear the halt of `bucket` (a person's command,
/// after looking at the ban); the gateway's answer line. The gateway must run
/// as this process's own effective uid ([`clear_halt_uid`]).
pub fn clear_halt(name: &str, bucket: &str) -> std::io::Result<String> {
    clear_halt_uid(name, os::euid(), bucket)
}

/// [`clear_halt`] at a gateway that runs as `gateway_uid`: a process of any
/// other uid under the name is refused, naming its uid, and told nothing.
pub fn clear_halt_uid(name: &str, gateway_uid: u32, bucket: &str) -> std::io::Result<String> {
    clear_halt_in(None, name, gateway_uid, bucket)
}

/// [`clear_halt_uid`] at the gateway whose runtime directory is `runtime_dir`
/// (None: as [`ShmClient::attach_in`] looks for it).
pub fn clear_halt_in(
    runtime_dir: Option<&std::path::Path>,
    name: &str,
    gateway_uid: u32,
    bucket: &str,
) -> std::io::Result<String> {
    let cmd = format!("clear-halt {bucket}");
    let (_sock, answer, _) = client::command(name, gateway_uid, runtime_dir, &cmd)?;
    Ok(answer)
}

/// The effective uid of this process: the gateway uid a client expects by default.
pub fn own_uid() -> u32 {
    os::euid()
}
