//! Where a gateway keeps its private runtime directory: one rule, used by the
//! daemon to make it and by the clients to find the gateway's socket in it.

use std::path::{Path, PathBuf};

use super::os;

/// The runtime directory of the gateway `name`, by the daemon's rule (not made,
/// not checked): `flag` (`--runtime-dir`), else systemd's `$RUNTIME_DIRECTORY`
/// (its first entry), else `/run/ergon-gateway/NAME` as root,
/// `$XDG_RUNTIME_DIR/ergon-gateway/NAME` otherwise.
pub fn runtime_dir(flag: Option<&Path>, name: &str) -> Result<PathBuf, String> {
    let me = os::euid();
    Ok(match flag {
        Some(d) => d.to_path_buf(),
        None => match std::env::var_os("RUNTIME_DIRECTORY") {
            Some(v) => {
                let first = v.to_string_lossy().split(':').next().unwrap_or("").to_string();
                PathBuf::from(first)
            }
            None if me == 0 => Path::new("/run/ergon-gateway").join(name),
            None => match std::env::var_os("XDG_RUNTIME_DIR") {
                Some(x) => Path::new(&x).join("ergon-gateway").join(name),
                None => {
                    return Err(
                        "no runtime directory: give --runtime-dir DIR (or --journal PATH), or set RUNTIME_DIRECTORY or XDG_RUNTIME_DIR".into(),
                    )
                }
            },
        },
    })
}

/// The environment variable that tells a client where the gateway's runtime
/// directory is (as `--runtime-dir` told the gateway), when the rule cannot
/// guess it: a gateway under systemd, another uid's gateway.
pub const RUNTIME_DIR_ENV: &str = "ERGON_GATEWAY_RUNTIME_DIR";

/// A gateway name as one file name: `/` written `%2F` and `%` written `%25`
/// (a name is 1 to 64 visible characters, `/` allowed).
fn file_part(name: &str) -> String {
    name.replace('%', "%25").replace('/', "%2F")
}

/// The file name of the gateway `name`'s socket in its runtime directory,
/// `gateway-NAME.sock` (its name in it: two gateways sharing a directory, as
/// under systemd's `RuntimeDirectory=ergon-gateway`, never answer for each other).
pub fn socket_file(name: &str) -> String {
    format!("gateway-{}.sock", file_part(name))
}

/// The file name of the gateway `name`'s health socket (`--stats`'s health
/// lines), `health-NAME.sock`.
pub fn health_file(name: &str) -> String {
    format!("health-{}.sock", file_part(name))
}

/// The directories a client looks in for the socket of the gateway `name` run
/// by `gateway_uid`, first to last: `dir` or [`RUNTIME_DIR_ENV`] if given (that
/// one only); else `/run/ergon-gateway/NAME` (the rule for a gateway run as root),
/// `/run/ergon-gateway` (the shipped systemd unit's `$RUNTIME_DIRECTORY`), and for
/// a gateway of the client's own uid, the rest of [`runtime_dir`]'s rule as this
/// process sees it. Whatever is found there is believed only if it is a socket
/// owned by `gateway_uid` whose listener runs as `gateway_uid`.
pub fn client_dirs(name: &str, gateway_uid: u32, dir: Option<&Path>) -> Vec<PathBuf> {
    if let Some(d) = dir {
        return vec![d.to_path_buf()];
    }
    if let Some(d) = std::env::var_os(RUNTIME_DIR_ENV).filter(|d| !d.is_empty()) {
        return vec![PathBuf::from(d)];
    }
    let mut out = vec![
        Path::new("/run/ergon-gateway").join(name),
        PathBuf::from("/run/ergon-gateway"),
    ];
    if gateway_uid == os::euid() {
        if let Ok(d) = runtime_dir(None, name) {
            if !out.contains(&d) {
                out.push(d);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_one_file_name() {
        assert_eq!(socket_file("main"), "gateway-main.sock");
        assert_eq!(socket_file("a/../b"), "gateway-a%2F..%2Fb.sock");
        assert_eq!(socket_file("a%2Fb"), "gateway-a%252Fb.sock");
        assert_eq!(health_file("x"), "health-x.sock");
        let d = Path::new("/some/where");
        assert_eq!(client_dirs("x", 12345, Some(d)), vec![d.to_path_buf()]);
    }
}
