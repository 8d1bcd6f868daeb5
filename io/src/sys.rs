//! The few system calls the client and the loop make, wrapped once.
//!
//! Every system call of the crate lives here, each with its SAFETY reason. Errors are
//! returned as raw `errno` values so the hot path builds no `io::Error`.
#![allow(unsafe_code)] // System calls through libc: the crate's unsafe lives here.

use std::net::SocketAddr;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::raw::c_int;

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Encodes `addr` as a sockaddr.
fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in, sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in6, sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

/// How a non-blocking connect started.
pub(crate) enum Connecting {
    /// The handshake is under way (or already done): wait for writability.
    Started(OwnedFd),
    /// Failed before any packet could leave (no socket, no route, bad address).
    NotSent(i32),
    /// Failed after the attempt went out (refused at once on loopback).
    Failed(i32),
}

/// A non-blocking, close-on-exec TCP socket with TCP_NODELAY, connecting to `addr`,
/// bound first to `local` when given (an egress lane).
pub(crate) fn connect_from(addr: &SocketAddr, local: Option<&SocketAddr>) -> Connecting {
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain syscall with constant arguments.
    let fd = unsafe {
        libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Connecting::NotSent(errno());
    }
    // SAFETY: a fresh descriptor nobody else owns; closed when `sock` drops.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let one: c_int = 1;
    // SAFETY: fd is ours; the option value points to a live c_int of the given size.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            &one as *const c_int as *const libc::c_void,
            std::mem::size_of::<c_int>() as libc::socklen_t,
        )
    };
    if let Some(local) = local {
        let (ls, llen) = sockaddr(local);
        // SAFETY: ls holds a valid sockaddr of length llen; fd is ours.
        let r = unsafe { libc::bind(fd, &ls as *const _ as *const libc::sockaddr, llen) };
        if r != 0 {
            // Nothing left: a bind that fails sends no packet.
            return Connecting::NotSent(errno());
        }
    }
    let (ss, len) = sockaddr(addr);
    // SAFETY: ss holds a valid sockaddr of length len.
    let r = unsafe { libc::connect(fd, &ss as *const _ as *const libc::sockaddr, len) };
    if r == 0 {
        return Connecting::Started(sock);
    }
    let e = errno();
    if e == libc::EINPROGRESS {
        return Connecting::Started(sock);
    }
    drop(sock);
    match e {
        libc::ENETUNREACH
        | libc::EADDRNOTAVAIL
        | libc::EAFNOSUPPORT
        | libc::EACCES
        | libc::EPERM => Connecting::NotSent(e),
        _ => Connecting::Failed(e),
    }
}

/// The local address of a socket (`getsockname`).
/// Whether the socket's local address `got` is the lane `asked` for: the same IP,
/// and the same port if one was asked.
pub(crate) fn same_lane(asked: SocketAddr, got: SocketAddr) -> bool {
    asked.ip() == got.ip() && (asked.port() == 0 || asked.port() == got.port())
}

pub(crate) fn local_addr(fd: c_int) -> Result<SocketAddr, i32> {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: ss and len are live; len is ss's size.
    let r = unsafe { libc::getsockname(fd, &mut ss as *mut _ as *mut libc::sockaddr, &mut len) };
    if r < 0 {
        return Err(errno());
    }
    match c_int::from(ss.ss_family) {
        libc::AF_INET => {
            // SAFETY: the kernel wrote a sockaddr_in (family AF_INET) into ss.
            let sin = unsafe { &*(&ss as *const _ as *const libc::sockaddr_in) };
            let ip = std::net::Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Ok(SocketAddr::from((ip, u16::from_be(sin.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: the kernel wrote a sockaddr_in6 (family AF_INET6) into ss.
            let sin6 = unsafe { &*(&ss as *const _ as *const libc::sockaddr_in6) };
            let ip = std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Ok(SocketAddr::V6(std::net::SocketAddrV6::new(
                ip,
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => Err(libc::EAFNOSUPPORT),
    }
}

/// The pending error of a socket (0 when none), as after a non-blocking connect.
pub(crate) fn so_error(fd: c_int) -> i32 {
    let mut err: c_int = 0;
    let mut len = std::mem::size_of::<c_int>() as libc::socklen_t;
    // SAFETY: err and len are live and sized for SO_ERROR.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            &mut err as *mut c_int as *mut libc::c_void,
            &mut len,
        )
    };
    if r < 0 {
        errno()
    } else {
        err
    }
}

/// Writes without blocking and without SIGPIPE. `Ok(0)` means would block.
pub(crate) fn send(fd: c_int, buf: &[u8]) -> Result<usize, i32> {
    // SAFETY: buf is a live slice of buf.len() bytes.
    let n = unsafe {
        libc::send(
            fd,
            buf.as_ptr() as *const libc::c_void,
            buf.len(),
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        )
    };
    if n >= 0 {
        return Ok(n as usize);
    }
    match errno() {
        libc::EAGAIN | libc::EINTR => Ok(0),
        e => Err(e),
    }
}

/// What a read gave.
pub(crate) enum Read {
    /// This many bytes.
    Data(usize),
    /// Nothing to read now.
    WouldBlock,
    /// The peer closed its side.
    Eof,
}

/// Reads without blocking.
pub(crate) fn recv(fd: c_int, buf: &mut [u8]) -> Result<Read, i32> {
    // SAFETY: buf is a live, writable slice of buf.len() bytes.
    let n = unsafe {
        libc::recv(
            fd,
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
            libc::MSG_DONTWAIT,
        )
    };
    if n > 0 {
        return Ok(Read::Data(n as usize));
    }
    if n == 0 {
        return Ok(Read::Eof);
    }
    match errno() {
        libc::EAGAIN | libc::EINTR => Ok(Read::WouldBlock),
        e => Err(e),
    }
}

/// Looks at an idle connection without consuming: WouldBlock means still open and
/// quiet; Eof, data or an error mean it must not carry a request.
pub(crate) fn peek(fd: c_int) -> Result<Read, i32> {
    let mut b = [0u8; 1];
    // SAFETY: b is a live one-byte buffer.
    let n = unsafe {
        libc::recv(
            fd,
            b.as_mut_ptr() as *mut libc::c_void,
            1,
            libc::MSG_DONTWAIT | libc::MSG_PEEK,
        )
    };
    if n > 0 {
        return Ok(Read::Data(n as usize));
    }
    if n == 0 {
        return Ok(Read::Eof);
    }
    match errno() {
        libc::EAGAIN | libc::EINTR => Ok(Read::WouldBlock),
        e => Err(e),
    }
}

/// A new epoll instance, closed when dropped.
pub(crate) fn epoll_create() -> Result<OwnedFd, i32> {
    // SAFETY: plain syscall.
    let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A second descriptor of `fd`'s open file (close-on-exec), closed when dropped:
/// for an epoll instance, the same interest list.
pub(crate) fn dup(fd: c_int) -> Result<OwnedFd, i32> {
    // SAFETY: plain syscall; an invalid `fd` fails with EBADF.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if new < 0 {
        return Err(errno());
    }
    // SAFETY: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// `epoll_ctl` with `events` and `token` as the user data.
pub(crate) fn epoll_ctl(
    epfd: c_int,
    op: c_int,
    fd: c_int,
    events: u32,
    token: u64,
) -> Result<(), i32> {
    let mut ev = libc::epoll_event { events, u64: token };
    // SAFETY: ev is live for the call; epfd and fd are descriptors of the caller.
    let r = unsafe { libc::epoll_ctl(epfd, op, fd, &mut ev) };
    if r < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

/// Waits for events; `timeout_ms` 0 polls, -1 blocks.
pub(crate) fn epoll_wait(
    epfd: c_int,
    events: &mut [libc::epoll_event],
    timeout_ms: c_int,
) -> Result<usize, i32> {
    let max = events.len().min(c_int::MAX as usize) as c_int;
    // SAFETY: events is a live, writable array of `max` entries.
    let n = unsafe { libc::epoll_wait(epfd, events.as_mut_ptr(), max, timeout_ms) };
    if n >= 0 {
        return Ok(n as usize);
    }
    match errno() {
        libc::EINTR => Ok(0),
        e => Err(e),
    }
}

/// The CPU the calling thread runs on now, or None if the kernel cannot say.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: plain call, no arguments.
    let c = unsafe { libc::sched_getcpu() };
    usize::try_from(c).ok()
}

/// The CPUs the calling thread may run on.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain old data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is live and sized as passed.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Vec::new();
    }
    // SAFETY: set was filled by the kernel; CPU_ISSET reads within it.
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

#[cfg(test)]
mod lane_tests {
    use super::*;

    #[test]
    fn a_lane_is_the_same_ip_and_the_asked_port_if_any() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert!(same_lane(a("127.0.0.2:0"), a("127.0.0.2:40000")));
        assert!(same_lane(a("127.0.0.2:40000"), a("127.0.0.2:40000")));
        assert!(!same_lane(a("127.0.0.2:0"), a("127.0.0.1:40000")));
        assert!(!same_lane(a("127.0.0.2:40001"), a("127.0.0.2:40000")));
        assert!(!same_lane(a("[::1]:0"), a("127.0.0.1:40000")));
    }
}
