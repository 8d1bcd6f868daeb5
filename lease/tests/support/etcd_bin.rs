//! The etcd binary for the real-etcd tests (ergon-lease's and the gateway's): found
//! on the PATH, or installed from Debian's `etcd-server` package when it is missing
//! and this process may (root, apt-get), so that a fresh machine passes with the
//! README's test command alone. Cargo runs test binaries one after another, and a
//! process-wide lock keeps the tests of one binary from installing twice.

use std::os::unix::fs::MetadataExt;
use std::process::{Command, Stdio};
use std::sync::Mutex;

fn found() -> bool {
    Command::new("etcd")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn apt_get(args: &[&str]) -> bool {
    Command::new("apt-get")
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Makes sure `etcd` runs, installing Debian's `etcd-server` if it must; panics
/// with what to do when it cannot.
pub fn ensure_etcd() {
    static INSTALL: Mutex<()> = Mutex::new(());
    let _one = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    if found() {
        return;
    }
    // /proc/self belongs to the process's effective uid.
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    if root {
        eprintln!("etcd not found: installing Debian's etcd-server");
        let _ = apt_get(&["install", "-y", "etcd-server"])
            || (apt_get(&["update"]) && apt_get(&["install", "-y", "etcd-server"]));
    }
    assert!(
        found(),
        "etcd not found and could not be installed: apt-get install -y etcd-server"
    );
}
