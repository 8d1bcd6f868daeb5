//! A child's exit waited for with a bound, on the kernel's hand-off: a pidfd
//! becomes readable when the process ends (Linux 5.3 and later), so the wait
//! sleeps in `poll` until then, not in steps. Included by path
//! (`#[path = "common/exit.rs"] mod exit;`) in each binary that waits for one.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// Waits up to `limit` for `child` to exit; its status (reaped), None if it
/// still runs then.
#[allow(unsafe_code)]
pub fn exited(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let end = Instant::now() + limit;
    // SAFETY: pidfd_open of our own child (not reaped: it has not been
    // waited for), no flags.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, child.id() as libc::pid_t, 0) };
    if fd < 0 {
        panic!("pidfd_open: {}", io::Error::last_os_error());
    }
    // SAFETY: a descriptor the kernel just gave us, owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            return Some(st);
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: one pollfd of ours; an EINTR only looks again.
        unsafe { libc::poll(&mut p, 1, ms) };
    }
}
