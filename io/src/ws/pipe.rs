//! A session's transport in memory instead of a socket: the bytes the session
//! writes wait in the pipe for the peer, and the peer's bytes and the end of the
//! transport are handed in by the caller. A deterministic simulation drives a
//! [`WsClient`](super::WsClient) over one ([`WsClient::use_pipe`](super::WsClient::use_pipe))
//! exactly as the event loop drives it over a socket: the same session, the
//! same write and read order, the same settlement when the transport ends.
//! Nothing here reads a clock or touches a socket.

/// The in-memory transport of one session. See the module doc.
#[derive(Debug)]
pub struct Pipe {
    /// A transport is up (from a connect to its end).
    connected: bool,
    /// What the session wrote, not yet taken by the peer.
    out: Vec<u8>,
    /// What the peer sent, not yet read by the session.
    inbox: Vec<u8>,
    /// The peer or the network ended the transport; the session settles at
    /// its next drive.
    cut: bool,
    /// Bytes the transport takes before it blocks (a full send buffer); the
    /// rest waits in the session.
    room: usize,
}

impl Default for Pipe {
    fn default() -> Self {
        Pipe {
            connected: false,
            out: Vec::new(),
            inbox: Vec::new(),
            cut: false,
            room: usize::MAX,
        }
    }
}

impl Pipe {
    /// Whether a transport is up.
    pub fn is_connected(&self) -> bool {
        self.connected
    }

    /// Takes what the session wrote since the last call: the peer's to read.
    pub fn take_written(&mut self) -> Vec<u8> {
        core::mem::take(&mut self.out)
    }

    /// The peer's `bytes` arrive: the session reads them at its next drive
    /// ([`WsClient::handle_timeout`](super::WsClient::handle_timeout)). Nothing
    /// arrives on a transport that is not up.
    pub fn deliver(&mut self, bytes: &[u8]) {
        if self.connected && !self.cut {
            self.inbox.extend_from_slice(bytes);
        }
    }

    /// The transport ends (EOF, a reset, a dead network): the session settles
    /// at its next drive, after reading what had arrived.
    pub fn cut(&mut self) {
        if self.connected {
            self.cut = true;
        }
    }

    /// From now on the transport takes `bytes` more before it blocks, as a full
    /// send buffer does (`usize::MAX`: never blocks); what it does not take
    /// waits in the session, unwritten, until a drive after more room. A frame
    /// partly taken counts as written.
    pub fn set_room(&mut self, bytes: usize) {
        self.room = bytes;
    }

    /// A connect starts a transport: nothing of the last one remains.
    pub(crate) fn start(&mut self) {
        self.connected = true;
        self.cut = false;
        self.out.clear();
        self.inbox.clear();
    }

    /// The transport ended here (closed by the session's side).
    pub(crate) fn end(&mut self) {
        self.connected = false;
        self.cut = false;
        self.inbox.clear();
    }

    /// Whether the peer ended the transport.
    pub(crate) fn is_cut(&self) -> bool {
        self.cut
    }

    /// What the peer sent and the session has not read.
    pub(crate) fn inbox(&self) -> &[u8] {
        &self.inbox
    }

    /// The session read `n` bytes of the inbox.
    pub(crate) fn consumed(&mut self, n: usize) {
        self.inbox.drain(..n);
    }

    /// The session writes `bytes`: how many the transport took (0: it
    /// blocks).
    pub(crate) fn write(&mut self, bytes: &[u8]) -> usize {
        let n = bytes.len().min(self.room);
        self.out.extend_from_slice(&bytes[..n]);
        self.room = self.room.saturating_sub(n);
        n
    }
}
