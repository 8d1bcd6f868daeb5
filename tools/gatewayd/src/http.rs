//! The metrics thread's HTTP side: `/metrics` and `/health` served to many
//! connections at once from one thread. The listener and every connection are
//! non-blocking; each connection is a small state (its request head, its
//! answer, its deadline) advanced when `poll` says it is ready, so a peer that
//! trickles its header or never reads its answer holds only its own connection,
//! never the thread, and `/health` answers behind any number of them (issue 41,
//! item 7: 30 slow-header connections once delayed it by 29.4 s).
//!
//! Bounds: a request head of [`MAX_REQUEST`] bytes, a whole exchange of
//! [`IO_TIMEOUT`], at most [`MAX_CONNS`] connections (a new one closes the
//! oldest), what a bad request's sender still sends read up to 8 heads' worth.
//!
//! What this must never do: block on a peer, or keep a connection past its
//! deadline.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Longest request head read, bytes.
pub const MAX_REQUEST: usize = 8 * 1024;
/// How long one connection's whole exchange may take.
pub const IO_TIMEOUT: Duration = Duration::from_secs(1);
/// Connections served at once; one more closes the oldest.
pub const MAX_CONNS: usize = 64;

/// What a complete request asks for; the caller renders the answer.
pub(crate) enum Ask<'a> {
    /// `GET /metrics`, with the request head (for its `Accept`).
    Metrics(&'a [u8]),
    /// `GET /health`.
    Health,
    /// Anything else.
    NotFound,
}

/// An answer: status line, content type, body.
pub(crate) type Answer = (&'static str, &'static str, String);

const TEXT: &str = "text/plain; charset=utf-8";

#[derive(Clone, Copy, PartialEq, Debug)]
enum Phase {
    /// Reading the request head.
    Head,
    /// Writing the answer; then close (or drain, after a bad request).
    Answer { drain: bool },
    /// After a bad request's answer: reading what the peer still sends, so
    /// that closing does not reset the connection before it reads the answer.
    Drain,
}

struct Conn {
    s: TcpStream,
    head: Vec<u8>,
    out: Vec<u8>,
    sent: usize,
    drained: usize,
    deadline: Instant,
    phase: Phase,
}

/// The connections of one listener.
pub(crate) struct Server {
    listener: TcpListener,
    conns: Vec<Conn>,
}

/// One read's outcome on a non-blocking socket.
enum Got {
    Bytes(usize),
    Wait,
    Closed,
}

fn read_some(s: &mut TcpStream, buf: &mut [u8]) -> Got {
    match s.read(buf) {
        Ok(0) => Got::Closed,
        Ok(n) => Got::Bytes(n),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Got::Wait,
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Got::Wait,
        Err(_) => Got::Closed,
    }
}

fn response(status: &str, ctype: &str, body: &str) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// The request line's method and path, once the head is complete; `Err` on a
/// head that is not HTTP/1.x or too long.
pub(crate) fn request_line(head: &[u8]) -> Result<Option<(&str, &str)>, ()> {
    let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") else {
        return if head.len() >= MAX_REQUEST {
            Err(())
        } else {
            Ok(None)
        };
    };
    let line = head[..end].split(|&b| b == b'\r').next().unwrap_or(&[]);
    let line = core::str::from_utf8(line).map_err(drop)?;
    let mut parts = line.split(' ');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(p), Some(v), None) if v.starts_with("HTTP/1.") => Ok(Some((m, p))),
        _ => Err(()),
    }
}

impl Conn {
    /// Advances on readiness at `now`; false when the connection is done.
    fn step(&mut self, now: Instant, answer: &mut dyn FnMut(Ask<'_>) -> Answer) -> bool {
        if now >= self.deadline {
            return false;
        }
        let mut buf = [0u8; 1024];
        loop {
            match self.phase {
                Phase::Head => {
                    match request_line(&self.head) {
                        Ok(Some((m, p))) => {
                            let path = p.split('?').next().unwrap_or("");
                            let ask = match (m, path) {
                                ("GET", "/metrics") => Ask::Metrics(&self.head),
                                ("GET", "/health") => Ask::Health,
                                _ => Ask::NotFound,
                            };
                            let (status, ctype, body) = answer(ask);
                            self.out = response(status, ctype, &body);
                            self.phase = Phase::Answer { drain: false };
                            continue;
                        }
                        Ok(None) => {}
                        Err(()) => {
                            self.out = response("400 Bad Request", TEXT, "bad request\n");
                            self.phase = Phase::Answer { drain: true };
                            continue;
                        }
                    }
                    match read_some(&mut self.s, &mut buf) {
                        Got::Bytes(n) => {
                            let room = MAX_REQUEST - self.head.len().min(MAX_REQUEST);
                            self.head.extend_from_slice(&buf[..n.min(room)]);
                        }
                        Got::Wait => return true,
                        Got::Closed => return false,
                    }
                }
                Phase::Answer { drain } => {
                    if self.sent < self.out.len() {
                        match self.s.write(&self.out[self.sent..]) {
                            Ok(0) => return false,
                            Ok(n) => self.sent += n,
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            Err(_) => return false,
                        }
                        continue;
                    }
                    if !drain {
                        return false;
                    }
                    let _ = self.s.shutdown(Shutdown::Write);
                    self.phase = Phase::Drain;
                }
                Phase::Drain => match read_some(&mut self.s, &mut buf) {
                    Got::Bytes(n) => {
                        self.drained += n;
                        if self.drained >= MAX_REQUEST * 8 {
                            return false;
                        }
                    }
                    Got::Wait => return true,
                    Got::Closed => return false,
                },
            }
        }
    }

    fn events(&self) -> libc::c_short {
        match self.phase {
            Phase::Answer { .. } => libc::POLLOUT,
            Phase::Head | Phase::Drain => libc::POLLIN,
        }
    }
}

impl Server {
    /// Serves `listener` (made non-blocking).
    pub(crate) fn new(listener: TcpListener) -> io::Result<Server> {
        listener.set_nonblocking(true)?;
        Ok(Server {
            listener,
            conns: Vec::with_capacity(MAX_CONNS),
        })
    }

    /// The descriptors to poll (the listener first, then each connection) and
    /// their events, appended to `fds`.
    pub(crate) fn poll_fds(&self, fds: &mut Vec<libc::pollfd>) {
        fds.push(libc::pollfd {
            fd: self.listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        fds.extend(self.conns.iter().map(|c| libc::pollfd {
            fd: c.s.as_raw_fd(),
            events: c.events(),
            revents: 0,
        }));
    }

    /// The earliest connection deadline, if any.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.conns.iter().map(|c| c.deadline).min()
    }

    /// Handles what `poll` reported in `fds` (as [`Server::poll_fds`] laid them
    /// out) at `now`: accepts new connections, advances the ready ones, closes
    /// those done or past their deadline. `answer` renders a complete request.
    pub(crate) fn handle(
        &mut self,
        fds: &[libc::pollfd],
        now: Instant,
        answer: &mut dyn FnMut(Ask<'_>) -> Answer,
    ) {
        let mut keep = Vec::with_capacity(self.conns.len());
        for (i, mut c) in self.conns.drain(..).enumerate() {
            let ready = fds.get(i + 1).is_some_and(|p| p.revents != 0);
            let alive = if ready {
                c.step(now, answer)
            } else {
                now < c.deadline
            };
            if alive {
                keep.push(c);
            }
        }
        self.conns = keep;
        if fds.first().is_some_and(|p| p.revents != 0) {
            self.accept(now, answer);
        }
    }

    fn accept(&mut self, now: Instant, answer: &mut dyn FnMut(Ask<'_>) -> Answer) {
        while let Ok((s, _)) = self.listener.accept() {
            if s.set_nonblocking(true).is_err() {
                continue;
            }
            if self.conns.len() >= MAX_CONNS {
                self.conns.remove(0);
            }
            let mut c = Conn {
                s,
                head: Vec::new(),
                out: Vec::new(),
                sent: 0,
                drained: 0,
                deadline: now + IO_TIMEOUT,
                phase: Phase::Head,
            };
            // Its request may be there already.
            if c.step(now, answer) {
                self.conns.push(c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_line_is_complete_partial_or_bad() {
        assert_eq!(
            request_line(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Ok(Some(("GET", "/metrics")))
        );
        assert_eq!(request_line(b"GET /metrics HTTP/1.1\r\n"), Ok(None));
        assert_eq!(request_line(b"GARBAGE\r\n\r\n"), Err(()));
        assert_eq!(request_line(b"\xff\xfe /x HTTP/1.1\r\n\r\n"), Err(()));
        assert_eq!(request_line(&[b'a'; MAX_REQUEST]), Err(()));
    }
}
