//! Issue 40: hosts reach etcd across machines over TLS, with a client certificate
//! (etcd's `--client-cert-auth`) and an etcd user (auth enabled). A three-member
//! cluster whose certificates the test makes (rcgen, as ergon-io's TLS tests do);
//! the hosts share the account as over plain HTTP; a client without a certificate,
//! with a stranger CA, or with a wrong password gets nothing.
#![cfg(not(ergon_loom))]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{etcd_or_skip, wait_for, Cluster, Fleet, SAFE};
use ergon_lease::etcd::{Client, EtcdError};
use ergon_lease::secure::{Security, TlsFiles, User};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use serde_json::json;

fn make_ca(name: &str) -> (rcgen::Certificate, KeyPair) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    (params.self_signed(&key).unwrap(), key)
}

fn write(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    p
}

/// The test's PKI in `dir`: a CA, a server certificate for 127.0.0.1 (etcd's, also
/// its own client certificate for its gateway), a client certificate, and a CA
/// nobody trusts. Returns (server flags, the client's TLS files, a stranger's).
fn pki(dir: &Path) -> (Vec<String>, TlsFiles, TlsFiles) {
    let (ca, ca_key) = make_ca("ergon etcd test CA");
    // No common name on either: etcd 3.4's JSON gateway refuses a request whose
    // client certificate has one when --client-cert-auth is on ("CommonName of
    // client sending a request against gateway will be ignored"); its own
    // connection to the gRPC server uses the server certificate.
    let leaf = |names: Vec<String>| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::OrganizationName, "ergon test");
        (params.signed_by(&key, &ca, &ca_key).unwrap(), key)
    };
    let (server, server_key) = leaf(vec!["127.0.0.1".into(), "localhost".into()]);
    let (client, client_key) = leaf(vec![]);
    let ca_file = write(dir, "ca.pem", &ca.pem(), 0o644);
    let server_file = write(dir, "server.pem", &server.pem(), 0o644);
    let server_key_file = write(dir, "server.key", &server_key.serialize_pem(), 0o600);
    let flags = vec![
        format!("--cert-file={}", server_file.display()),
        format!("--key-file={}", server_key_file.display()),
        format!("--trusted-ca-file={}", ca_file.display()),
        "--client-cert-auth".to_string(),
    ];
    let files = TlsFiles {
        ca: ca_file,
        cert: write(dir, "client.pem", &client.pem(), 0o644),
        key: write(dir, "client.key", &client_key.serialize_pem(), 0o600),
    };
    let (stranger, _) = make_ca("a stranger CA");
    let stranger = TlsFiles {
        ca: write(dir, "stranger.pem", &stranger.pem(), 0o644),
        ..files.clone()
    };
    (flags, files, stranger)
}

/// Users and roles, then auth on: `root` (etcd requires it) and `ergon`, which
/// may read and write every key under `/`.
fn enable_auth(c: &mut Client, password: &str) {
    let b64 = |s: &str| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(s)
    };
    for (path, body) in [
        ("/v3/auth/role/add", json!({ "name": "root" })),
        (
            "/v3/auth/user/add",
            json!({ "name": "root", "password": "root-pw" }),
        ),
        (
            "/v3/auth/user/grant",
            json!({ "user": "root", "role": "root" }),
        ),
        ("/v3/auth/role/add", json!({ "name": "ergon" })),
        (
            "/v3/auth/role/grant",
            json!({ "name": "ergon", "perm": { "permType": "READWRITE",
                    "key": b64("/"), "range_end": b64("0") } }),
        ),
        (
            "/v3/auth/user/add",
            json!({ "name": "ergon", "password": password }),
        ),
        (
            "/v3/auth/user/grant",
            json!({ "user": "ergon", "role": "ergon" }),
        ),
        ("/v3/auth/enable", json!({})),
    ] {
        c.call(path, &body)
            .unwrap_or_else(|e| panic!("{path}: {e}"));
    }
}

#[test]
fn hosts_share_the_account_over_tls_with_a_client_certificate_and_a_user() {
    if !etcd_or_skip() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("ergon-lease-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (flags, files, stranger) = pki(&dir);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let tls_only = Security {
        tls: Some(files.clone()),
        user: None,
    };
    let cluster = Cluster::start_secure(3, std::env::temp_dir(), &flags, tls_only.clone());
    wait_for("a leader", Duration::from_secs(20), || {
        cluster.leader().is_some()
    });
    let mut root = cluster.client(&[&cluster.urls()[0]]).unwrap();
    enable_auth(&mut root, "ergon-pw");
    let password = write(&dir, "password", "ergon-pw\n", 0o600);
    let security = Security {
        tls: Some(files.clone()),
        user: Some(User {
            name: "ergon".into(),
            password_file: password.clone(),
        }),
    };

    // Without a user: refused by etcd's auth.
    let mut anon =
        Client::with_security(&cluster.urls(), Duration::from_secs(2), &tls_only).unwrap();
    wait_for(
        "auth is on: a request without a token is refused",
        Duration::from_secs(10),
        || matches!(anon.range_prefix(b"/"), Err(EtcdError::Server { .. })),
    );
    // A wrong password: refused.
    let wrong = write(&dir, "wrong", "nope\n", 0o600);
    let bad_user = Security {
        user: Some(User {
            name: "ergon".into(),
            password_file: wrong,
        }),
        ..security.clone()
    };
    let mut c = Client::with_security(&cluster.urls(), Duration::from_secs(2), &bad_user).unwrap();
    assert!(c.range_prefix(b"/").is_err(), "a wrong password is refused");
    // A CA that did not sign etcd's certificate: no connection.
    let strange = Security {
        tls: Some(stranger),
        ..security.clone()
    };
    let mut c = Client::with_security(&cluster.urls(), Duration::from_secs(2), &strange).unwrap();
    assert!(
        matches!(c.range_prefix(b"/"), Err(EtcdError::Unreachable(_))),
        "a server certificate from a CA not trusted"
    );
    // A key readable by others: refused before any connection.
    let loose = write(
        &dir,
        "loose.key",
        &std::fs::read_to_string(&files.key).unwrap(),
        0o644,
    );
    let loose = Security {
        tls: Some(TlsFiles {
            key: loose,
            ..files.clone()
        }),
        ..security.clone()
    };
    let e = Client::with_security(&cluster.urls(), Duration::from_secs(2), &loose).unwrap_err();
    assert!(
        matches!(&e, EtcdError::Security(m) if m.contains("loose.key") && m.contains("chmod 600")),
        "{e}"
    );

    // The user may do every call the lease thread makes, compaction included.
    let mut c = Client::with_security(&cluster.urls(), Duration::from_secs(2), &security).unwrap();
    let (id, _) = c.lease_grant(10).unwrap();
    assert!(c.keepalive(id).unwrap() > 0);
    let w = ergon_lease::store::publish_demand(&mut c, "/x/", "h", "1 2 3 4 5", id).unwrap();
    assert_eq!(w, ergon_lease::store::Published::Written);
    let (_, revision) = c.range_prefix(b"/x/").unwrap();
    c.compact(revision).unwrap();
    c.lease_revoke(id).unwrap();

    // The hosts, over TLS with the user: grants, and never over the account.
    let account = 300;
    let fleet = Fleet::start_secure(&cluster.urls(), "tls", account, 3, &security);
    let share = (account - 3 * SAFE) / 3 + SAFE;
    let took = wait_for(
        "each host near an equal share, over TLS",
        Duration::from_secs(30),
        || fleet.limits().iter().all(|&l| l + 2 >= share),
    );
    eprintln!("grants over TLS after {took:?}: {:?}", fleet.limits());
    for n in &fleet.nodes {
        let s = n.lease.as_ref().unwrap().status();
        assert!(
            s.etcd_connects <= 3,
            "connections kept alive over TLS: {s:?}"
        );
    }
    fleet.assert_never_over();
    drop(fleet);
    let _ = std::fs::remove_dir_all(&dir);
}
