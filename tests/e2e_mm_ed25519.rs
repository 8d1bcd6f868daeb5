//! mm_loop with a Binance Ed25519 key (`--api-secret-file` holding its PKCS#8
//! PEM, `--key-type ed25519`) against the emulator over loopback: it logs on to
//! the WebSocket API, its orders go there without signature and the venue runs
//! them; `--key-type hmac` with the same file is refused before anything starts.

#[allow(dead_code)]
#[path = "../examples/mm_loop.rs"]
mod mm_loop;

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use ergon_gatewayd::secret::KeyType;
use ergon_venue_sim::{Account, Config, Server, ED25519_TEST_API_KEY, ED25519_TEST_PRIVATE_PEM};
use mm_loop::{run, Control, Options};

#[test]
fn mm_loop_trades_with_an_ed25519_key_file_over_a_logged_on_connection() {
    let mut c = Config::binance_spot();
    c.accounts = vec![Account::ed25519_test()];
    let server = Arc::new(Server::start(c).unwrap());
    let dir = std::env::temp_dir().join(format!("mm-ed25519-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("key.pem");
    std::fs::write(&file, ED25519_TEST_PRIVATE_PEM).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut o = Options {
        duration_s: 1.0,
        demand: 1.0,
        quiet: true,
        base: Some(server.base_url()),
        api_key: Some(ED25519_TEST_API_KEY.into()),
        api_secret_file: Some(file.clone()),
        key_type: Some(KeyType::Ed25519),
        ws: Some(true),
        ..Options::default()
    };
    let s = run(&o, Arc::new(Control::default()), Some(Arc::clone(&server))).unwrap();
    let r = server.report();
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    assert_eq!(r.ws.api_logons, 1, "{:?}", r.ws);
    assert!(
        r.ws.api_unsigned > 0,
        "orders without signature: {:?}",
        r.ws
    );
    assert!(r.executions > 0, "{s:?}");
    assert_eq!((r.signature_rejects, r.api_key_rejects), (0, 0));
    o.key_type = Some(KeyType::Hmac);
    let e = run(&o, Arc::new(Control::default()), Some(Arc::clone(&server))).unwrap_err();
    assert!(e.contains("--key-type hmac"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
