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
