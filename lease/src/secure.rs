//! Talking to etcd across machines: TLS with a CA and a client certificate
//! (rustls), and etcd's users (a name and a password from a file, traded for a
//! token). Runs on the lease thread only.
//!
//! The key and the password are secrets: read from files that are ours, not
//! symbolic links, and readable by nobody else (mode `0600` or `0400`), as every
//! secret ergon reads; the error names the file and what is wrong with it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

/// The files of a TLS client to etcd: the CA that signed etcd's certificates, and
/// this host's certificate and key (etcd's `--client-cert-auth`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM: the CA certificate(s) etcd's server certificates chain to.
    pub ca: PathBuf,
    /// PEM: this client's certificate (chain).
    pub cert: PathBuf,
    /// PEM: this client's private key (a secret).
    pub key: PathBuf,
}

/// An etcd user: its name, and the file holding its password (a secret).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct User {
    /// The user's name.
    pub name: String,
    /// The file holding the password (one line; a final newline is dropped).
    pub password_file: PathBuf,
}

/// How to reach etcd: TLS for `https://` endpoints, and a user when etcd has auth
/// enabled. The default is neither (`http://` endpoints, no auth).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Security {
    /// TLS files, for `https://` endpoints.
    pub tls: Option<TlsFiles>,
    /// An etcd user, when etcd's auth is enabled.
    pub user: Option<User>,
}

/// What [`Security`] becomes once its files are read.
#[derive(Clone)]
pub(crate) struct Ready {
    pub(crate) tls: Option<Arc<ClientConfig>>,
    /// (name, password).
    pub(crate) user: Option<(String, String)>,
}

impl std::fmt::Debug for Ready {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password.
        f.debug_struct("Ready")
            .field("tls", &self.tls.is_some())
            .field("user", &self.user.as_ref().map(|u| &u.0))
            .finish()
    }
}

fn bad(path: &Path, what: &str) -> String {
    format!("{}: {what}", path.display())
}

/// Reads a file that must not be a symbolic link; a secret must also be ours and
/// readable by nobody else.
fn read_file(path: &Path, secret: bool) -> Result<Vec<u8>, String> {
    let link = std::fs::symlink_metadata(path).map_err(|e| bad(path, &e.to_string()))?;
    if link.file_type().is_symlink() || !link.is_file() {
        return Err(bad(path, "not a regular file (a symbolic link is refused)"));
    }
    let mut f = std::fs::File::open(path).map_err(|e| bad(path, &e.to_string()))?;
    let m = f.metadata().map_err(|e| bad(path, &e.to_string()))?;
    if (m.dev(), m.ino()) != (link.dev(), link.ino()) {
        return Err(bad(path, "replaced while being opened"));
    }
    if secret {
        // /proc/self belongs to the process's effective uid.
        let me = std::fs::metadata("/proc/self").map(|p| p.uid()).ok();
        if me != Some(m.uid()) {
            return Err(bad(path, "a secret must belong to this process's user"));
        }
        if m.mode() & 0o077 != 0 {
            return Err(bad(
                path,
                &format!(
                    "a secret readable by others (mode {:o}): chmod 600",
                    m.mode() & 0o777
                ),
            ));
        }
    }
    let mut out = Vec::new();
    f.read_to_end(&mut out)
        .map_err(|e| bad(path, &e.to_string()))?;
    Ok(out)
}

impl Security {
    /// Reads and checks the files; the error names the file and what is wrong.
    pub(crate) fn ready(&self) -> Result<Ready, String> {
        let tls = match &self.tls {
            None => None,
            Some(t) => {
                let ca = read_file(&t.ca, false)?;
                let mut roots = RootCertStore::empty();
                for c in CertificateDer::pem_slice_iter(&ca) {
                    let c = c.map_err(|e| bad(&t.ca, &format!("not a PEM certificate: {e}")))?;
                    roots
                        .add(c)
                        .map_err(|e| bad(&t.ca, &format!("not a CA certificate: {e}")))?;
                }
                if roots.is_empty() {
                    return Err(bad(&t.ca, "no certificate"));
                }
                let pem = read_file(&t.cert, false)?;
                let chain = CertificateDer::pem_slice_iter(&pem)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| bad(&t.cert, &format!("not a PEM certificate: {e}")))?;
                if chain.is_empty() {
                    return Err(bad(&t.cert, "no certificate"));
                }
                let key = read_file(&t.key, true)?;
                let key = PrivateKeyDer::from_pem_slice(&key)
                    .map_err(|e| bad(&t.key, &format!("not a PEM private key: {e}")))?;
                let provider = Arc::new(rustls::crypto::ring::default_provider());
                let config = ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| format!("TLS: {e}"))?
                    .with_root_certificates(roots)
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| bad(&t.key, &format!("does not match the certificate: {e}")))?;
                Some(Arc::new(config))
            }
        };
        let user = match &self.user {
            None => None,
            Some(u) => {
                let text = read_file(&u.password_file, true)?;
                let text =
                    String::from_utf8(text).map_err(|_| bad(&u.password_file, "not UTF-8"))?;
                let password = text.strip_suffix('\n').unwrap_or(&text).to_owned();
                if u.name.is_empty() || password.is_empty() {
                    return Err(bad(&u.password_file, "an empty user name or password"));
                }
                Some((u.name.clone(), password))
            }
        };
        Ok(Ready { tls, user })
    }
}

/// One connection to an endpoint: plain TCP, or TLS over it.
pub(crate) enum Conn {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Conn {
    /// `tcp`, wrapped in TLS for `host` when `tls` is given (the handshake runs
    /// with the first write).
    pub(crate) fn new(
        tcp: TcpStream,
        host: &str,
        tls: Option<&Arc<ClientConfig>>,
    ) -> Result<Conn, String> {
        let Some(config) = tls else {
            return Ok(Conn::Plain(tcp));
        };
        let name = host.rsplit_once(':').map_or(host, |(h, _)| h);
        let name = name.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(name.to_owned()).map_err(|e| format!("TLS name: {e}"))?;
        let conn = ClientConnection::new(config.clone(), name).map_err(|e| format!("TLS: {e}"))?;
        Ok(Conn::Tls(Box::new(StreamOwned::new(conn, tcp))))
    }

    /// The TCP socket under it (for its timeouts).
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(s) => &s.sock,
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(s) => s.flush(),
        }
    }
}
