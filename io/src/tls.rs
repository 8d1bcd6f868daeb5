//! TLS for the native client: rustls (ring provider) driven as one more sans-IO
//! state machine between the HTTP [`Conn`](crate::http::Conn) and the socket.
//!
//! Bytes still move between socket and connection only in the client's `flush`
//! and `read`: plaintext from [`Conn::transmit`](crate::http::Conn::transmit) goes
//! into the rustls writer and records go to the socket; records from the socket go
//! into rustls and plaintext into [`Conn::recv_buf`](crate::http::Conn::recv_buf).
//! The handshake runs between connecting and idle, so a connection whose
//! certificate or name does not verify never carries a request: no request byte
//! is ever written on it and the caller keeps the ticket.
//!
//! Verification is always on. [`TlsConfig::webpki_roots`] trusts the Mozilla roots
//! compiled in (webpki-roots: nothing to install on the machine),
//! [`TlsConfig::with_roots`] a caller's store (a private CA, a test CA). Only
//! [`TlsConfig::from_client_config`] can turn verification off, and only with a
//! verifier the caller built on purpose through rustls's `dangerous()` API.
//!
//! The WebSocket shell ([`WsClient`](crate::ws::WsClient)) drives the same session
//! the same way: TLS handshake first, then the upgrade request.
//!
//! What this module must never do: write a plaintext byte twice (rustls takes each
//! byte once; the HTTP connection's send position only moves forward), or let a
//! connection whose handshake failed become idle. Known cost: rustls's buffered
//! API allocates a buffer per TLS record it writes or reads (measured: two
//! allocations per request and response), so over TLS the send path is not
//! allocation-free (plain HTTP is). rustls 0.23's unbuffered API would only remove
//! the write side's: it still decrypts each received record into a new buffer
//! (`ReadTraffic::next_record`; in-place decryption is an upstream to-do).

use std::io;
use std::os::raw::c_int;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore};

use crate::sys::{self, Read};

/// What a TLS pool connects with: the rustls configuration and the name the
/// server's certificate must carry.
#[derive(Clone, Debug)]
pub struct TlsConfig {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
}

/// Why a [`TlsConfig`] could not be built (the caller's input, never the peer's).
#[non_exhaustive]
#[derive(Debug)]
pub enum TlsConfigError {
    /// The server name is neither a DNS name nor an IP address.
    BadServerName(String),
    /// A CA file could not be read or holds no usable certificate.
    CaFile(String),
    /// rustls refused the configuration.
    Rustls(rustls::Error),
}

impl core::fmt::Display for TlsConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TlsConfigError::BadServerName(n) => write!(f, "{n:?} is not a valid TLS server name"),
            TlsConfigError::CaFile(why) => write!(f, "CA file: {why}"),
            TlsConfigError::Rustls(e) => write!(f, "TLS configuration: {e}"),
        }
    }
}

impl std::error::Error for TlsConfigError {}

impl TlsConfigError {
    /// Always [`Culprit::Caller`](crate::Culprit::Caller): a name, a CA file or a
    /// rustls configuration the caller gave (a CA file that cannot be read
    /// included: the path is the caller's).
    pub fn culprit(&self) -> crate::Culprit {
        match self {
            TlsConfigError::BadServerName(_)
            | TlsConfigError::CaFile(_)
            | TlsConfigError::Rustls(_) => crate::Culprit::Caller,
        }
    }
}

impl TlsConfig {
    /// Verifies servers against the Mozilla root store compiled into the binary.
    pub fn webpki_roots(server_name: &str) -> Result<Self, TlsConfigError> {
        let roots = RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        TlsConfig::with_roots(roots, server_name)
    }

    /// Verifies servers against `roots` only (a private or test CA).
    pub fn with_roots(roots: RootCertStore, server_name: &str) -> Result<Self, TlsConfigError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsConfigError::Rustls)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        TlsConfig::from_client_config(Arc::new(config), server_name)
    }

    /// The caller's own rustls configuration, as is: client certificates, other
    /// protocol versions or, explicitly, a custom certificate verifier.
    pub fn from_client_config(
        config: Arc<ClientConfig>,
        server_name: &str,
    ) -> Result<Self, TlsConfigError> {
        let name = ServerName::try_from(server_name.to_owned())
            .map_err(|_| TlsConfigError::BadServerName(server_name.to_owned()))?;
        Ok(TlsConfig { config, name })
    }

    /// The name the certificate is checked against.
    pub fn server_name(&self) -> &ServerName<'static> {
        &self.name
    }
}

/// Every certificate in a PEM file, as a root store (for `--cafile`).
pub fn roots_from_pem_file(path: &std::path::Path) -> Result<RootCertStore, TlsConfigError> {
    let bad =
        |e: &dyn core::fmt::Display| TlsConfigError::CaFile(format!("{}: {e}", path.display()));
    let mut roots = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(path).map_err(|e| bad(&e))?;
    for cert in certs {
        let cert = cert.map_err(|e| bad(&e))?;
        roots.add(cert).map_err(|e| bad(&e))?;
    }
    if roots.is_empty() {
        return Err(bad(&"no certificate in the file"));
    }
    Ok(roots)
}

/// What went wrong in TLS, small and `Copy` so it fits the client's
/// [`Error`](crate::client::Error).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TlsError {
    /// The certificate chain does not lead to a trusted root. Like every
    /// certificate failure, [`Culprit::Peer`](crate::Culprit::Peer): the server
    /// presented it (roots the caller configured wrong look the same from here,
    /// and the remedy, alerting, is the same).
    UnknownIssuer,
    /// The certificate is not valid for the server name asked.
    NotValidForName,
    /// The certificate is expired or not yet valid.
    Expired,
    /// Any other certificate problem (bad signature, encoding, purpose, revoked).
    BadCertificate,
    /// The peer sent a fatal alert.
    Alert,
    /// The peer broke the TLS protocol (bad records, messages, decryption).
    Protocol,
    /// No protocol version or cipher suite in common, or another local refusal.
    /// [`Culprit::Peer`](crate::Culprit::Peer): with ergon's defaults no overlap
    /// means the server changed what it accepts (with the caller's own rustls
    /// configuration it may be the caller's choice; the two look the same here).
    Incompatible,
}

impl TlsError {
    fn from_rustls(e: &rustls::Error) -> Self {
        use rustls::CertificateError as C;
        match e {
            rustls::Error::InvalidCertificate(c) => match c {
                C::UnknownIssuer => TlsError::UnknownIssuer,
                C::NotValidForName | C::NotValidForNameContext { .. } => TlsError::NotValidForName,
                C::Expired
                | C::ExpiredContext { .. }
                | C::NotValidYet
                | C::NotValidYetContext { .. } => TlsError::Expired,
                _ => TlsError::BadCertificate,
            },
            rustls::Error::AlertReceived(_) => TlsError::Alert,
            rustls::Error::PeerIncompatible(_)
            | rustls::Error::General(_)
            | rustls::Error::FailedToGetCurrentTime
            | rustls::Error::FailedToGetRandomBytes
            | rustls::Error::UnsupportedNameType
            | rustls::Error::NoApplicationProtocol => TlsError::Incompatible,
            _ => TlsError::Protocol,
        }
    }
}

impl core::fmt::Display for TlsError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            TlsError::UnknownIssuer => "certificate not issued by a trusted root",
            TlsError::NotValidForName => "certificate not valid for the server name",
            TlsError::Expired => "certificate expired or not yet valid",
            TlsError::BadCertificate => "invalid certificate",
            TlsError::Alert => "fatal alert from the peer",
            TlsError::Protocol => "TLS protocol violation by the peer",
            TlsError::Incompatible => "no TLS parameters in common",
        })
    }
}

impl std::error::Error for TlsError {}

impl TlsError {
    /// Always [`Culprit::Peer`](crate::Culprit::Peer) (see
    /// [`TlsError::UnknownIssuer`] and [`TlsError::Incompatible`] for why).
    pub fn culprit(&self) -> crate::Culprit {
        match self {
            TlsError::UnknownIssuer
            | TlsError::NotValidForName
            | TlsError::Expired
            | TlsError::BadCertificate
            | TlsError::Alert
            | TlsError::Protocol
            | TlsError::Incompatible => crate::Culprit::Peer,
        }
    }
}

/// A non-blocking socket as `io::Read + io::Write` for rustls. Would-block is
/// `ErrorKind::WouldBlock`; no error here allocates.
struct Fd(c_int);

impl io::Read for Fd {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match sys::recv(self.0, buf) {
            Ok(Read::Data(n)) => Ok(n),
            Ok(Read::Eof) => Ok(0),
            Ok(Read::WouldBlock) => Err(io::ErrorKind::WouldBlock.into()),
            Err(e) => Err(io::Error::from_raw_os_error(e)),
        }
    }
}

impl io::Write for Fd {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match sys::send(self.0, buf) {
            Ok(0) if !buf.is_empty() => Err(io::ErrorKind::WouldBlock.into()),
            Ok(n) => Ok(n),
            Err(e) => Err(io::Error::from_raw_os_error(e)),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// What one read from the socket into the session gave.
pub(crate) enum Input {
    /// Records were read and processed.
    Data {
        /// Decrypted application data waits to be read.
        plaintext: bool,
        /// The peer sent close_notify.
        closed: bool,
    },
    /// Nothing to read now.
    WouldBlock,
    /// The peer closed the socket.
    Eof,
}

/// A socket write failed after `written` bytes of this call had left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WriteFailed {
    /// Bytes written by the same call before the error: if any, the peer may
    /// have them.
    pub(crate) written: usize,
    /// The socket error.
    pub(crate) errno: i32,
}

/// Why a session step failed.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fault {
    Io(i32),
    Tls(TlsError),
}

/// One connection's TLS session.
#[derive(Debug)]
pub(crate) struct Session(ClientConnection);

impl Session {
    pub(crate) fn new(cfg: &TlsConfig) -> Result<Session, TlsError> {
        ClientConnection::new(cfg.config.clone(), cfg.name.clone())
            .map(Session)
            .map_err(|e| TlsError::from_rustls(&e))
    }

    pub(crate) fn is_handshaking(&self) -> bool {
        self.0.is_handshaking()
    }

    pub(crate) fn wants_write(&self) -> bool {
        self.0.wants_write()
    }

    /// Takes up to `plain.len()` plaintext bytes for encryption; returns how many.
    pub(crate) fn take_plaintext(&mut self, plain: &[u8]) -> usize {
        io::Write::write(&mut self.0.writer(), plain).unwrap_or(0)
    }

    /// Writes pending records to `fd`. Returns the bytes written and whether the
    /// socket would block with records left; on a socket error, how many bytes
    /// this call wrote before it (a request whose bytes partly left is Maybe).
    pub(crate) fn write_records(&mut self, fd: c_int) -> Result<(usize, bool), WriteFailed> {
        self.write_records_to(&mut Fd(fd))
    }

    /// [`write_records`](Self::write_records) into any writer (tests inject a
    /// socket that fails after some bytes).
    fn write_records_to(&mut self, w: &mut dyn io::Write) -> Result<(usize, bool), WriteFailed> {
        let mut total = 0;
        while self.0.wants_write() {
            match self.0.write_tls(w) {
                Ok(0) => return Ok((total, true)),
                Ok(n) => total += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok((total, true)),
                Err(e) => {
                    return Err(WriteFailed {
                        written: total,
                        errno: errno(&e),
                    })
                }
            }
        }
        Ok((total, false))
    }

    /// Reads records from `fd` once and processes them.
    pub(crate) fn read_records(&mut self, fd: c_int) -> Result<Input, Fault> {
        match self.0.read_tls(&mut Fd(fd)) {
            Ok(0) => Ok(Input::Eof),
            Ok(_) => match self.0.process_new_packets() {
                Ok(st) => Ok(Input::Data {
                    plaintext: st.plaintext_bytes_to_read() > 0,
                    closed: st.peer_has_closed(),
                }),
                Err(e) => Err(Fault::Tls(TlsError::from_rustls(&e))),
            },
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Input::WouldBlock),
            Err(e) => Err(Fault::Io(errno(&e))),
        }
    }

    /// Queues a close_notify alert; [`Session::write_records`] sends it.
    pub(crate) fn send_close_notify(&mut self) {
        self.0.send_close_notify();
    }

    /// Moves decrypted plaintext into `buf`.
    pub(crate) fn read_plaintext(&mut self, buf: &mut [u8]) -> Plain {
        match io::Read::read(&mut self.0.reader(), buf) {
            Ok(0) => Plain::Closed,
            Ok(n) => Plain::Data(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Plain::None,
            // UnexpectedEof: the socket ended without close_notify.
            Err(_) => Plain::Truncated,
        }
    }
}

/// What [`Session::read_plaintext`] gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plain {
    /// This many bytes.
    Data(usize),
    /// None buffered now.
    None,
    /// The peer sent close_notify: the stream ended cleanly.
    Closed,
    /// The socket ended without close_notify: whatever was being read until the
    /// end may have been cut by anyone on the path.
    Truncated,
}

#[cfg(test)]
mod tests {
    //! The session against an in-memory rustls server, with a socket that fails on
    //! demand: what no loopback peer produces deterministically.

    use super::*;
    use rcgen::{CertificateParams, KeyPair};
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    use rustls::ServerConnection;

    /// A client session and a server connection with their handshake done.
    fn pair() -> (Session, ServerConnection) {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server_cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .unwrap();
        let mut roots = RootCertStore::empty();
        roots.add(cert.der().clone()).unwrap();
        let cfg = TlsConfig::with_roots(roots, "localhost").unwrap();
        let mut client = Session::new(&cfg).unwrap();
        let mut server = ServerConnection::new(Arc::new(server_cfg)).unwrap();
        for _ in 0..16 {
            let mut wire = Vec::new();
            while client.0.wants_write() {
                client.0.write_tls(&mut wire).unwrap();
            }
            server.read_tls(&mut &wire[..]).unwrap();
            server.process_new_packets().unwrap();
            wire.clear();
            while server.wants_write() {
                server.write_tls(&mut wire).unwrap();
            }
            client.0.read_tls(&mut &wire[..]).unwrap();
            client.0.process_new_packets().unwrap();
            if !client.is_handshaking() && !server.is_handshaking() && !client.wants_write() {
                return (client, server);
            }
        }
        panic!("the in-memory handshake did not end");
    }

    /// Takes `room` bytes, then fails every write as a reset connection.
    struct ResetAfter {
        room: usize,
        took: usize,
    }

    impl io::Write for ResetAfter {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.room == 0 {
                return Err(io::Error::from_raw_os_error(libc::ECONNRESET));
            }
            let n = buf.len().min(self.room);
            self.room -= n;
            self.took += n;
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_reset_after_the_first_record_still_says_how_many_bytes_left() {
        let (mut client, _server) = pair();
        // 40 KiB of plaintext: three records of at most 16 KiB each.
        let body = vec![b'x'; 40 << 10];
        assert_eq!(client.take_plaintext(&body), body.len());
        // The socket takes the first record (and a bit), then the peer resets.
        let mut sock = ResetAfter {
            room: (16 << 10) + 100,
            took: 0,
        };
        let got = client.write_records_to(&mut sock);
        assert_eq!(
            got,
            Err(WriteFailed {
                written: sock.took,
                errno: libc::ECONNRESET
            })
        );
        assert!(sock.took > 16 << 10);
    }
}
