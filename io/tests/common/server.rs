//! Loopback test servers: a listener thread that hands every accepted connection,
//! numbered from 0 in accept order, to the test's behaviour on its own thread, and
//! records every byte each connection received (the plaintext, over TLS) and the
//! address each connection came from.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Every byte each connection received, by connection number.
#[derive(Default, Debug)]
pub struct Log {
    pub conns: Vec<Vec<u8>>,
    /// The client's address of each connection, by number.
    pub peers: Vec<SocketAddr>,
    /// TLS handshakes that failed (those connections never reach the behaviour).
    pub tls_failures: usize,
}

impl Log {
    /// How many times `needle` occurs in all bytes received, over all connections.
    pub fn count(&self, needle: &[u8]) -> usize {
        self.conns
            .iter()
            .map(|c| c.windows(needle.len()).filter(|w| *w == needle).count())
            .sum()
    }

    /// The connections whose bytes contain `needle`.
    pub fn conns_with(&self, needle: &[u8]) -> Vec<usize> {
        (0..self.conns.len())
            .filter(|&i| self.conns[i].windows(needle.len()).any(|w| w == needle))
            .collect()
    }

    /// Bytes received in all.
    pub fn total(&self) -> usize {
        self.conns.iter().map(Vec::len).sum()
    }
}

/// A server-side connection: plain TCP or a rustls server session over it.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ServerConnection, TcpStream>>),
}

impl Stream {
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => &s.sock,
        }
    }

    pub fn shutdown(&self, how: std::net::Shutdown) -> std::io::Result<()> {
        self.tcp().shutdown(how)
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// One accepted connection, handed to the behaviour.
pub struct Peer {
    pub no: usize,
    pub stream: Stream,
    log: Arc<Mutex<Log>>,
}

/// A generous bound for anything a test server waits for.
pub const PATIENCE: Duration = Duration::from_secs(20);

impl Peer {
    fn record(&self, bytes: &[u8]) {
        self.log.lock().unwrap().conns[self.no].extend_from_slice(bytes);
    }

    /// Reads exactly `k` bytes (fewer if the client closes first).
    pub fn read_exact_k(&mut self, k: usize) -> usize {
        let mut buf = vec![0u8; k];
        let mut got = 0;
        while got < k {
            match self.stream.read(&mut buf[got..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        self.record(&buf[..got]);
        got
    }

    /// Waits until the client sent something (or closed), without reading it (over
    /// TLS: until records arrive after the handshake, without decrypting them).
    pub fn wait_readable(&mut self) {
        if let Stream::Tls(s) = &mut self.stream {
            // The request's records may have come with the handshake's last flight
            // and already be decrypted.
            if s.conn
                .process_new_packets()
                .is_ok_and(|st| st.plaintext_bytes_to_read() > 0)
            {
                return;
            }
        }
        let mut b = [0u8; 1];
        let _ = self.stream.tcp().peek(&mut b);
    }

    /// Reads one whole request (head and Content-Length body). None if the client
    /// closed first. The client sends one request at a time, so a read never takes
    /// bytes of the next one.
    pub fn read_request(&mut self) -> Option<Vec<u8>> {
        let mut req = Vec::new();
        let mut b = [0u8; 4096];
        loop {
            if let Some(end) = find(&req, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&req[..end]).to_ascii_lowercase();
                let len = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse::<usize>().unwrap());
                if req.len() >= end + 4 + len {
                    return Some(req);
                }
            }
            match self.stream.read(&mut b) {
                Ok(0) | Err(_) => return None,
                Ok(n) => {
                    self.record(&b[..n]);
                    req.extend_from_slice(&b[..n]);
                }
            }
        }
    }

    /// Writes `bytes`, ignoring a client that went away.
    pub fn write(&mut self, bytes: &[u8]) {
        let _ = self.stream.write_all(bytes);
        let _ = self.stream.flush();
    }

    /// A 200 with `body` and a Content-Length.
    pub fn respond(&mut self, body: &[u8]) {
        let mut out =
            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
        out.extend_from_slice(body);
        self.write(&out);
    }

    /// Over TLS, sends close_notify (the clean end of the stream); plain: nothing.
    pub fn close_notify(&mut self) {
        if let Stream::Tls(s) = &mut self.stream {
            s.conn.send_close_notify();
            let _ = s.flush();
        }
    }

    /// Makes the close that follows a reset (RST), not a FIN: the client's next
    /// write or read fails with ECONNRESET/EPIPE.
    pub fn reset_on_close(&mut self) {
        use std::os::fd::AsRawFd;
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: a live socket and a linger struct of the size passed.
        let r = unsafe {
            libc::setsockopt(
                self.stream.tcp().as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        assert_eq!(r, 0);
    }

    /// Answers every request with its own body, until the client closes.
    pub fn echo(&mut self) {
        while let Some(req) = self.read_request() {
            let at = find(&req, b"\r\n\r\n").unwrap() + 4;
            let body = req[at..].to_vec();
            self.respond(&body);
        }
    }
}

/// The first position of `needle` in `hay`.
pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A running server; stops and joins its threads when dropped.
pub struct Server {
    pub addr: SocketAddr,
    pub log: Arc<Mutex<Log>>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// Listens on 127.0.0.1 and runs `behaviour` for every accepted connection.
    pub fn start<F>(behaviour: F) -> Server
    where
        F: Fn(&mut Peer) + Send + Sync + 'static,
    {
        Server::start_with(None, behaviour)
    }

    /// [`start`](Self::start) over TLS: each connection's handshake completes
    /// before `behaviour` runs; a failed one is counted in `Log::tls_failures`.
    pub fn start_tls<F>(config: Arc<rustls::ServerConfig>, behaviour: F) -> Server
    where
        F: Fn(&mut Peer) + Send + Sync + 'static,
    {
        Server::start_with(Some(config), behaviour)
    }

    /// Plain or TLS, as `tls` says.
    pub fn start_with<F>(tls: Option<Arc<rustls::ServerConfig>>, behaviour: F) -> Server
    where
        F: Fn(&mut Peer) + Send + Sync + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let log = Arc::new(Mutex::new(Log::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let behaviour = Arc::new(behaviour);
        let (log2, stop2) = (log.clone(), stop.clone());
        let accept = std::thread::spawn(move || {
            let mut workers = Vec::new();
            while !stop2.load(Ordering::Acquire) {
                match listener.accept() {
                    Ok((stream, from)) => {
                        stream.set_nonblocking(false).unwrap();
                        stream.set_read_timeout(Some(PATIENCE)).unwrap();
                        stream.set_nodelay(true).unwrap();
                        let no = {
                            let mut l = log2.lock().unwrap();
                            l.conns.push(Vec::new());
                            l.peers.push(from);
                            l.conns.len() - 1
                        };
                        let (b, tls, log) = (behaviour.clone(), tls.clone(), log2.clone());
                        workers.push(std::thread::spawn(move || {
                            let stream = match tls {
                                None => Stream::Plain(stream),
                                Some(cfg) => match handshake(cfg, stream) {
                                    Some(s) => Stream::Tls(Box::new(s)),
                                    None => {
                                        log.lock().unwrap().tls_failures += 1;
                                        return;
                                    }
                                },
                            };
                            b(&mut Peer { no, stream, log })
                        }));
                    }
                    // Non-blocking accept, polled so the stop flag is seen.
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
            drop(listener);
            for w in workers {
                let _ = w.join();
            }
        });
        Server {
            addr,
            log,
            stop,
            accept: Some(accept),
        }
    }

    /// Waits (bounded) until `cond` holds on the log.
    pub fn wait_for(&self, cond: impl Fn(&Log) -> bool) -> bool {
        let end = Instant::now() + PATIENCE;
        while Instant::now() < end {
            if cond(&self.log.lock().unwrap()) {
                return true;
            }
            // Polls the log another thread writes (bounded by PATIENCE).
            std::thread::sleep(Duration::from_millis(2));
        }
        false
    }
}

fn handshake(
    cfg: Arc<rustls::ServerConfig>,
    mut tcp: TcpStream,
) -> Option<rustls::StreamOwned<rustls::ServerConnection, TcpStream>> {
    let mut conn = rustls::ServerConnection::new(cfg).ok()?;
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp).ok()?;
    }
    // Flush the last flight (and session tickets) before the behaviour reads.
    while conn.wants_write() {
        conn.write_tls(&mut tcp).ok()?;
    }
    Some(rustls::StreamOwned::new(conn, tcp))
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}
