//! A test PKI made in the test: a CA, a server certificate for `localhost` signed
//! by it, a rustls server configuration, and client configurations that trust it
//! (or a stranger CA).

use std::sync::Arc;

use ergon_io::tls::TlsConfig;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::RootCertStore;

pub struct Pki {
    pub ca_der: CertificateDer<'static>,
    pub ca_pem: String,
    pub server: Arc<rustls::ServerConfig>,
}

fn ca(name: &str) -> (rcgen::Certificate, KeyPair) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    (params.self_signed(&key).unwrap(), key)
}

impl Pki {
    /// A CA and a server certificate for `localhost` and 127.0.0.1.
    pub fn new() -> Pki {
        let (ca, ca_key) = ca("ergon test CA");
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        let leaf = params.signed_by(&key, &ca, &ca_key).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone(), ca.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .unwrap();
        Pki {
            ca_der: ca.der().clone(),
            ca_pem: ca.pem(),
            server: Arc::new(server),
        }
    }

    /// A client that trusts this CA and expects `name`.
    pub fn client(&self, name: &str) -> TlsConfig {
        let mut roots = RootCertStore::empty();
        roots.add(self.ca_der.clone()).unwrap();
        TlsConfig::with_roots(roots, name).unwrap()
    }

    /// A client that trusts only another CA.
    pub fn stranger(name: &str) -> TlsConfig {
        let (other, _) = ca("a stranger CA");
        let mut roots = RootCertStore::empty();
        roots.add(other.der().clone()).unwrap();
        TlsConfig::with_roots(roots, name).unwrap()
    }
}
