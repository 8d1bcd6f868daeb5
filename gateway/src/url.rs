//! The venue URLs the gateway reads at start (`http://HOST:PORT`,
//! `ws://HOST:PORT/PATH`): resolved once, refused with a [`UrlError`].

use std::net::SocketAddr;

use ergon_io::Culprit;

/// `HOST[:PORT]` (port 80 by default) resolved to its first address.
pub(crate) fn resolve(authority: &str) -> Result<SocketAddr, UrlError> {
    let with_port = match authority.rsplit_once(':') {
        Some((_, p)) if p.parse::<u16>().is_ok() => authority.to_string(),
        _ => format!("{authority}:80"),
    };
    std::net::ToSocketAddrs::to_socket_addrs(&with_port)
        .map_err(|e| UrlError::Resolve {
            authority: authority.to_string(),
            error: e.to_string(),
        })?
        .next()
        .ok_or_else(|| UrlError::NoAddress {
            authority: authority.to_string(),
        })
}

/// Why a venue URL ([`Start::from_base`](crate::Start::from_base),
/// [`WsApiStart::from_url`](crate::WsApiStart::from_url)) was refused.
/// Nothing was opened.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UrlError {
    /// The scheme (`https`, `wss`) needs TLS, which the gateway's pools do not
    /// take yet. [`Culprit::Caller`].
    Tls(&'static str),
    /// Not the form the gateway reads. [`Culprit::Caller`].
    Form {
        /// The URL as given.
        url: String,
        /// The form expected (`http://HOST:PORT`, `ws://HOST:PORT/PATH` ...).
        expected: &'static str,
    },
    /// The host did not resolve: a misspelt name, or a resolver this machine
    /// cannot reach. [`Culprit::Caller`]: a configuration read once at start.
    Resolve {
        /// `HOST[:PORT]` as given.
        authority: String,
        /// The resolver's own words.
        error: String,
    },
    /// The host resolved to no address. [`Culprit::Caller`].
    NoAddress {
        /// `HOST[:PORT]` as given.
        authority: String,
    },
}

impl UrlError {
    pub(crate) fn form(url: &str, expected: &'static str) -> Self {
        UrlError::Form {
            url: url.to_string(),
            expected,
        }
    }

    /// Who is at fault: always [`Culprit::Caller`], the URL the caller gave
    /// (each variant says so).
    pub fn culprit(&self) -> Culprit {
        match self {
            UrlError::Tls(_)
            | UrlError::Form { .. }
            | UrlError::Resolve { .. }
            | UrlError::NoAddress { .. } => Culprit::Caller,
        }
    }
}

impl core::fmt::Display for UrlError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            UrlError::Tls("https") => {
                f.write_str("https:// is not supported by the gateway yet: http:// only")
            }
            UrlError::Tls(scheme) => write!(f, "{scheme}:// is not supported by the gateway yet"),
            UrlError::Form { url, expected } => write!(f, "{url:?}: expected {expected}"),
            UrlError::Resolve { authority, error } => write!(f, "{authority}: {error}"),
            UrlError::NoAddress { authority } => write!(f, "{authority}: no address"),
        }
    }
}

impl std::error::Error for UrlError {}
