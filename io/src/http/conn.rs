//! One client connection's HTTP/1.1 state: one request at a time, no pipelining.
//!
//! It never touches a socket or a clock and never allocates after [`Conn::new`];
//! it never offers a written byte again, and never accepts a request while one is
//! in flight or after an error.

use ergon_venues::endpoint::Http;
use ergon_venues::response::{Header, Response};

use super::decode::{Decoder, Step};
use super::encode::{encode_http, encode_into, HostLine, InvalidRequest, Request};
use super::{Headers, Limits, ParseError, MAX_HEADERS};

/// A request a connection puts in its send buffer: one described by its parts
/// ([`Request`]: encoded and checked, [`Conn::send`]) or one its adapter wrote as
/// HTTP/1.1 already ([`Http`]: copied, [`Conn::send_http`]). What
/// [`Pool::request`](crate::pool::Pool::request) takes.
pub trait Outgoing {
    /// Puts it in `conn`'s send buffer with `host`'s line, as [`Conn::send`] does.
    fn put_on(&self, conn: &mut Conn, host: &HostLine) -> Result<(), InvalidRequest>;
}

impl Outgoing for Request<'_> {
    #[inline]
    fn put_on(&self, conn: &mut Conn, host: &HostLine) -> Result<(), InvalidRequest> {
        conn.send(self, host.host())
    }
}

impl Outgoing for Http<'_> {
    #[inline]
    fn put_on(&self, conn: &mut Conn, host: &HostLine) -> Result<(), InvalidRequest> {
        conn.send_http(self, host)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// No request: ready for [`Conn::send`].
    Idle,
    /// A request is encoded; bytes may remain to be written, the answer is awaited.
    Active,
    /// The response is complete and waits to be read by [`Conn::response`].
    Complete,
    /// An error or an unusable connection: only [`Conn::new`]'s successor helps.
    Broken,
}

/// What a [`Conn::handle_recv`] or [`Conn::handle_eof`] made of the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// More bytes are needed.
    Partial,
    /// The response is complete: read it with [`Conn::response`], then call
    /// [`Conn::finish`].
    Complete,
}

/// The sans-IO HTTP/1.1 client connection.
///
/// Drive order, for one request:
/// 1. [`send`](Self::send) encodes the request once into the send buffer;
/// 2. write [`transmit`](Self::transmit) out and report each write with
///    [`handle_written`](Self::handle_written), until `transmit` is empty;
/// 3. read into [`recv_buf`](Self::recv_buf) and report with
///    [`handle_recv`](Self::handle_recv) (or [`handle_eof`](Self::handle_eof));
///    after any input, check the result until it says [`Progress::Complete`];
/// 4. read the answer with [`response`](Self::response), then
///    [`finish`](Self::finish): it says whether the connection may carry another
///    request.
///
/// Any error leaves the connection broken for good: nothing in this type can write
/// the same request again, and a broken connection accepts no new one. Buffers are
/// allocated once, here, and reused.
#[derive(Debug)]
pub struct Conn {
    limits: Limits,
    state: State,
    /// The send buffer, `max_request` bytes: the current request is its first
    /// `tx_len`.
    tx: Box<[u8]>,
    tx_len: usize,
    tx_pos: usize,
    rx: Vec<u8>,
    rx_len: usize,
    dec: Decoder,
}

impl Conn {
    /// A fresh connection with buffers sized by `limits`.
    pub fn new(limits: Limits) -> Self {
        Conn {
            limits,
            state: State::Idle,
            tx: vec![0; limits.max_request].into_boxed_slice(),
            tx_len: 0,
            tx_pos: 0,
            rx: vec![0; limits.max_response],
            rx_len: 0,
            dec: Decoder::new(),
        }
    }

    /// Resets for a new transport connection, keeping the buffers.
    pub fn reset(&mut self) {
        self.state = State::Idle;
        self.empty();
    }

    /// Empties both buffers and makes the decoder ready for the next answer: what
    /// [`State::Idle`] holds, so a send sets only what its request changes.
    fn empty(&mut self) {
        self.tx_len = 0;
        self.tx_pos = 0;
        self.rx_len = 0;
        self.dec.reset();
    }

    /// The limits this connection enforces.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Whether a new request may be sent.
    pub fn is_idle(&self) -> bool {
        self.state == State::Idle
    }

    /// Encodes `req` (with `Host: host`) into the send buffer. Only on an idle
    /// connection; nothing is written yet.
    pub fn send(&mut self, req: &Request<'_>, host: &str) -> Result<(), InvalidRequest> {
        if self.state != State::Idle {
            return Err(InvalidRequest::NotIdle);
        }
        // Idle: nothing written or read yet, the decoder ready (`Conn::empty`).
        self.tx_len = encode_into(req, host, &mut self.tx)?;
        self.state = State::Active;
        Ok(())
    }

    /// Copies `req`, a request encoded already but for its `Host` line, into the
    /// send buffer with `host`'s line: the bytes [`Conn::send`] writes for the same
    /// request and host, with no encoding or check per byte (see [`Http`]). Only on
    /// an idle connection; nothing is written yet.
    #[inline]
    pub fn send_http(&mut self, req: &Http<'_>, host: &HostLine) -> Result<(), InvalidRequest> {
        if self.state != State::Idle {
            return Err(InvalidRequest::NotIdle);
        }
        // Idle: nothing written or read yet, the decoder ready (`Conn::empty`).
        self.tx_len = encode_http(req, host, &mut self.tx)?;
        self.state = State::Active;
        Ok(())
    }

    /// Bytes still to be written for the current request (empty when all left).
    #[inline]
    pub fn transmit(&self) -> &[u8] {
        match self.state {
            // `tx_pos <= tx_len <= tx.len()`: a send sets `tx_len` to what it
            // wrote into `tx`, `handle_written` keeps `tx_pos` at most `tx_len`.
            State::Active | State::Complete => &self.tx[self.tx_pos..self.tx_len],
            State::Idle | State::Broken => &[],
        }
    }

    /// `n` bytes of [`transmit`](Self::transmit) were written. The position only
    /// moves forward: written bytes are never offered again.
    #[inline]
    pub fn handle_written(&mut self, n: usize) {
        self.tx_pos = (self.tx_pos + n).min(self.tx_len);
    }

    /// Whether any byte of the current request was written.
    pub fn wrote_any(&self) -> bool {
        self.tx_pos > 0
    }

    /// Where to read the next bytes into. Empty when no response is awaited.
    pub fn recv_buf(&mut self) -> &mut [u8] {
        if self.state != State::Active {
            return &mut [];
        }
        if self.rx_len == self.rx.len() {
            self.rx_len = self.dec.compact(&mut self.rx, self.rx_len);
        }
        let at = self.rx_len.min(self.rx.len());
        &mut self.rx[at..]
    }

    /// `n` bytes were read into [`recv_buf`](Self::recv_buf).
    pub fn handle_recv(&mut self, n: usize) -> Result<Progress, ParseError> {
        if self.state != State::Active {
            self.state = State::Broken;
            return Err(ParseError::Unsolicited);
        }
        self.rx_len = (self.rx_len + n).min(self.rx.len());
        // The request, still in the send buffer, was a HEAD: its answer has no
        // body whatever its headers say (read here, off the send path).
        let head = self.tx.get(..self.tx_len).is_some_and(is_head);
        match self
            .dec
            .advance(&mut self.rx, self.rx_len, &self.limits, head)
        {
            Ok(Step::Complete) => {
                if self.dec.consumed() < self.rx_len || self.tx_pos < self.tx_len {
                    // Bytes beyond the answer, or an answer before the whole request
                    // left: deliver it, but never reuse this connection.
                    self.dec.keep_alive = false;
                }
                self.state = State::Complete;
                Ok(Progress::Complete)
            }
            Ok(Step::Partial) => {
                if self.rx_len == self.rx.len() {
                    self.rx_len = self.dec.compact(&mut self.rx, self.rx_len);
                    if self.rx_len == self.rx.len() {
                        self.state = State::Broken;
                        return Err(ParseError::ResponseTooLarge);
                    }
                }
                Ok(Progress::Partial)
            }
            Err(e) => {
                self.state = State::Broken;
                Err(e)
            }
        }
    }

    /// The peer closed its side. Completes a body that runs until close; anything
    /// else is [`None`]: the answer is incomplete, the connection is broken.
    pub fn handle_eof(&mut self) -> Option<Progress> {
        if self.state == State::Active && self.dec.eof() {
            self.state = State::Complete;
            return Some(Progress::Complete);
        }
        if self.state == State::Complete {
            return Some(Progress::Complete);
        }
        self.state = State::Broken;
        None
    }

    /// Marks the connection broken (a transport error, a timeout).
    pub fn break_off(&mut self) {
        self.state = State::Broken;
    }

    /// The complete response, its headers put into `headers` (start from
    /// `Headers::new()`). None before [`Progress::Complete`]. The response borrows
    /// the connection until `headers` is dropped.
    pub fn response<'h, 'a: 'h>(&'a self, headers: &'h mut Headers<'a>) -> Option<Response<'h>> {
        if self.state != State::Complete {
            return None;
        }
        Some(build(&self.rx, &self.dec, headers))
    }

    /// Ends the current exchange after its response was read. Returns whether the
    /// connection may carry another request (keep-alive, nothing left over, the
    /// whole request written); if not, the connection is broken for good.
    pub fn finish(&mut self) -> bool {
        if self.state != State::Complete {
            self.state = State::Broken;
            return false;
        }
        let reusable = self.dec.keep_alive;
        self.empty();
        self.state = if reusable { State::Idle } else { State::Broken };
        reusable
    }

    /// Takes the receive buffer out (no allocation) so the response can be read
    /// while the connection's owner is borrowed elsewhere. Put it back with
    /// [`restore_buffer`](Self::restore_buffer).
    pub(crate) fn take_buffer(&mut self) -> Vec<u8> {
        core::mem::take(&mut self.rx)
    }

    /// Returns the buffer taken by [`take_buffer`](Self::take_buffer).
    pub(crate) fn restore_buffer(&mut self, buf: Vec<u8>) {
        self.rx = buf;
    }

    /// The response over a buffer taken with [`take_buffer`](Self::take_buffer).
    pub(crate) fn response_in<'h, 'a: 'h>(
        &self,
        buf: &'a [u8],
        headers: &'h mut Headers<'a>,
    ) -> Response<'h> {
        build(buf, &self.dec, headers)
    }

    /// Whether the current response is complete.
    pub fn is_complete(&self) -> bool {
        self.state == State::Complete
    }
}

/// Whether a request (its bytes from the request line on) is a HEAD.
fn is_head(request: &[u8]) -> bool {
    request.starts_with(b"HEAD ")
}

fn build<'h, 'a: 'h>(buf: &'a [u8], dec: &Decoder, headers: &'h mut Headers<'a>) -> Response<'h> {
    let slice = |(at, len): (u32, u32)| -> &'a [u8] {
        buf.get(at as usize..at as usize + len as usize)
            .unwrap_or(&[])
    };
    let n = dec.nheaders.min(MAX_HEADERS);
    headers.clear();
    for h in &dec.heads[..n] {
        // Never full: at most MAX_HEADERS offsets, into MAX_HEADERS of room.
        let _ = headers.try_push(Header {
            name: slice(h.name),
            value: slice(h.value),
        });
    }
    Response {
        status: dec.status,
        headers,
        body: buf.get(dec.body_start..dec.body_end).unwrap_or(&[]),
    }
}
