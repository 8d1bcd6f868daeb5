//! The system calls of the shared-memory gateway: a memfd and its shared mapping,
//! an abstract-namespace `SOCK_SEQPACKET` Unix socket that carries descriptors
//! (SCM_RIGHTS) and wake-ups over it that never block.
#![allow(unsafe_code)] // System calls through libc.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

fn last() -> io::Error {
    io::Error::last_os_error()
}

/// A shared read-write mapping of a whole memfd; unmapped on drop.
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; what lives in it is synchronized by
// the rings' atomics.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` shared, read-write.
    pub fn map(fd: &OwnedFd, len: usize) -> io::Result<Mapping> {
        Self::map_prot(fd, len, libc::PROT_READ | libc::PROT_WRITE)
    }

    /// Maps `len` bytes of `fd` shared, read-only (a region its owner sealed
    /// against writes by anyone else, the stats).
    pub fn map_read_only(fd: &OwnedFd, len: usize) -> io::Result<Mapping> {
        Self::map_prot(fd, len, libc::PROT_READ)
    }

    fn map_prot(fd: &OwnedFd, len: usize, prot: libc::c_int) -> io::Result<Mapping> {
        let size = file_size(fd)?;
        if len == 0 || size < len as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "shared region smaller than its header says",
            ));
        }
        // SAFETY: a fresh mapping of a descriptor we own; checked below.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(last());
        }
        Ok(Mapping { ptr: p.cast(), len })
    }

    /// The mapping's first byte.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Its length (never 0: [`Mapping::map`] refuses an empty one).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

fn file_size(fd: &OwnedFd) -> io::Result<u64> {
    // SAFETY: fstat into a zeroed struct.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(last());
    }
    Ok(st.st_size as u64)
}

/// A new memfd of `len` zero bytes, its size sealed (`F_SEAL_SHRINK |
/// F_SEAL_GROW`): a client that holds it can never `ftruncate` it under the
/// gateway's mapping (a SIGBUS in the gateway at its next write). Add
/// `F_SEAL_SEAL` with [`seal`] once every other seal is on.
pub fn memfd(name: &str, len: usize) -> io::Result<OwnedFd> {
    let c = std::ffi::CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: a valid C string.
    let fd = unsafe { libc::memfd_create(c.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(last());
    }
    // SAFETY: a descriptor just returned to us.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ftruncate on our descriptor.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
        return Err(last());
    }
    seal(&fd, libc::F_SEAL_SHRINK | libc::F_SEAL_GROW)?;
    Ok(fd)
}

/// Adds `seals` to a memfd of ours (`F_ADD_SEALS`; once `F_SEAL_SEAL` is on,
/// nobody can add or remove any).
pub fn seal(fd: &OwnedFd, seals: libc::c_int) -> io::Result<()> {
    // SAFETY: fcntl with an integer argument on our descriptor.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(last());
    }
    Ok(())
}

/// The one-byte message of a wake-up on a client's connection: the client's
/// doorbell to the gateway's loop, and the gateway's wake to a waiting client.
pub const WAKE: &[u8] = &[0];

/// Sends [`WAKE`] on `sock` without ever blocking (`MSG_DONTWAIT`: whatever the
/// flags of the descriptor, which only its own side can change). A full
/// socket drops it: the other side has unread wake-ups already.
pub fn wake(sock: RawFd) {
    // SAFETY: sends one byte from a static.
    unsafe {
        libc::send(
            sock,
            WAKE.as_ptr().cast(),
            WAKE.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
}

/// Reads the wake-ups waiting on `sock` (at most 64 messages, never
/// blocking; descriptors sent along are closed by the kernel). False if the
/// peer hung up.
pub fn drain_wakes(sock: RawFd) -> bool {
    let mut b = [0u8; 64];
    for _ in 0..64 {
        // SAFETY: reads into a local buffer of its length.
        let n = unsafe { libc::recv(sock, b.as_mut_ptr().cast(), b.len(), libc::MSG_DONTWAIT) };
        if n == 0 {
            return false;
        }
        if n < 0 {
            let e = last();
            return !matches!(
                e.raw_os_error(),
                Some(libc::ECONNRESET | libc::ENOTCONN | libc::EPIPE)
            );
        }
    }
    true
}

/// Waits until one of `fds` is readable or hung up, or `timeout_ms` passes (-1:
/// no timeout). Returns each one's revents.
pub fn poll_fds<const N: usize>(fds: [RawFd; N], timeout_ms: i32) -> [i16; N] {
    let mut p = fds.map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    // SAFETY: N valid pollfd structs.
    let r = unsafe { libc::poll(p.as_mut_ptr(), N as libc::nfds_t, timeout_ms) };
    if r <= 0 {
        return [0; N];
    }
    p.map(|p| p.revents)
}

fn abstract_addr(name: &str) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: a zeroed sockaddr_un is valid.
    let mut a: libc::sockaddr_un = unsafe { core::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let path = format!("ergon-gateway/{name}");
    if path.len() + 1 > a.sun_path.len() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "name too long"));
    }
    // sun_path[0] stays 0: the abstract namespace (no file; gone with the process).
    for (i, b) in path.bytes().enumerate() {
        a.sun_path[i + 1] = b as libc::c_char;
    }
    let len = core::mem::size_of::<libc::sa_family_t>() + 1 + path.len();
    Ok((a, len as libc::socklen_t))
}

fn socket(nonblock: bool) -> io::Result<OwnedFd> {
    let flags =
        libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC | if nonblock { libc::SOCK_NONBLOCK } else { 0 };
    // SAFETY: plain syscall.
    let fd = unsafe { libc::socket(libc::AF_UNIX, flags, 0) };
    if fd < 0 {
        return Err(last());
    }
    // SAFETY: a descriptor just returned to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Listens on the abstract socket `@ergon-gateway/NAME` (non-blocking).
pub fn listen(name: &str) -> io::Result<OwnedFd> {
    let fd = socket(true)?;
    let (a, len) = abstract_addr(name)?;
    // SAFETY: a valid address of `len` bytes.
    if unsafe { libc::bind(fd.as_raw_fd(), (&a as *const libc::sockaddr_un).cast(), len) } != 0 {
        return Err(last());
    }
    // SAFETY: plain syscall.
    if unsafe { libc::listen(fd.as_raw_fd(), 64) } != 0 {
        return Err(last());
    }
    Ok(fd)
}

/// Connects to `@ergon-gateway/NAME` (blocking socket).
pub fn connect(name: &str) -> io::Result<OwnedFd> {
    let fd = socket(false)?;
    let (a, len) = abstract_addr(name)?;
    // SAFETY: a valid address of `len` bytes.
    if unsafe { libc::connect(fd.as_raw_fd(), (&a as *const libc::sockaddr_un).cast(), len) } != 0 {
        return Err(last());
    }
    Ok(fd)
}

/// The credentials the kernel recorded for the peer of a connected Unix socket
/// (at its `connect`): what it claims in its messages is never looked at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCred {
    /// The peer's process id at its `connect`.
    pub pid: i32,
    /// The peer's effective uid at its `connect`.
    pub uid: u32,
    /// The peer's effective (primary) gid at its `connect`.
    pub gid: u32,
}

/// `SO_PEERCRED` of a connected Unix socket.
pub fn peer_cred(sock: &OwnedFd) -> io::Result<PeerCred> {
    let mut c = libc::ucred {
        pid: 0,
        uid: u32::MAX,
        gid: u32::MAX,
    };
    let mut len = core::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the local `c`; the
    // values come from the kernel, not from the peer.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut c as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(last());
    }
    if len as usize != core::mem::size_of::<libc::ucred>() {
        return Err(io::Error::other("SO_PEERCRED: short answer"));
    }
    Ok(PeerCred {
        pid: c.pid,
        uid: c.uid,
        gid: c.gid,
    })
}

/// The effective uid of this process.
pub fn euid() -> u32 {
    // SAFETY: plain syscall, cannot fail.
    unsafe { libc::geteuid() }
}

/// Accepts one connection (non-blocking socket), None if none is waiting.
pub fn accept(listener: &OwnedFd) -> io::Result<Option<OwnedFd>> {
    // SAFETY: plain syscall without an address.
    let fd = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            core::ptr::null_mut(),
            core::ptr::null_mut(),
            libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
        )
    };
    if fd < 0 {
        let e = last();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            _ => Err(e),
        };
    }
    // SAFETY: a descriptor just returned to us.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }))
}

const MAX_FDS: usize = 4;

/// Sends one message with up to four descriptors.
pub fn send_fds(sock: RawFd, msg: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let fds = &fds[..fds.len().min(MAX_FDS)];
    let mut iov = libc::iovec {
        iov_base: msg.as_ptr() as *mut libc::c_void,
        iov_len: msg.len(),
    };
    let mut cbuf = [0u64; 8]; // CMSG_SPACE(4 * 4) fits in 64 bytes, 8-aligned.
                              // SAFETY: a zeroed msghdr is valid.
    let mut h: libc::msghdr = unsafe { core::mem::zeroed() };
    h.msg_iov = &mut iov;
    h.msg_iovlen = 1;
    if !fds.is_empty() {
        let bytes = core::mem::size_of_val(fds);
        h.msg_control = cbuf.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE is a pure computation.
        h.msg_controllen = unsafe { libc::CMSG_SPACE(bytes as u32) } as _;
        // SAFETY: the control buffer is large enough for one header of `bytes`.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&h);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(bytes as u32) as _;
            core::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(c).cast(), fds.len());
        }
    }
    // SAFETY: h points to live buffers.
    let n = unsafe { libc::sendmsg(sock, &h, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(last());
    }
    Ok(())
}

/// What [`recv_fds`] read.
pub enum Recv {
    /// A message of this many bytes and the descriptors it carried.
    Msg(usize, Vec<OwnedFd>),
    /// Nothing waiting (non-blocking socket).
    Empty,
    /// The peer hung up.
    Closed,
}

/// Receives one message and the descriptors it carries.
pub fn recv_fds(sock: RawFd, buf: &mut [u8]) -> io::Result<Recv> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut cbuf = [0u64; 8];
    // SAFETY: a zeroed msghdr is valid.
    let mut h: libc::msghdr = unsafe { core::mem::zeroed() };
    h.msg_iov = &mut iov;
    h.msg_iovlen = 1;
    h.msg_control = cbuf.as_mut_ptr().cast();
    h.msg_controllen = core::mem::size_of_val(&cbuf) as _;
    // SAFETY: h points to live buffers.
    let n = unsafe { libc::recvmsg(sock, &mut h, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        let e = last();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(Recv::Empty),
            io::ErrorKind::ConnectionReset => Ok(Recv::Closed),
            _ => Err(e),
        };
    }
    if n == 0 {
        return Ok(Recv::Closed);
    }
    let mut fds = Vec::new();
    // SAFETY: walking the control messages the kernel wrote into cbuf.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&h);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c) as *const RawFd;
                let bytes = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..bytes / core::mem::size_of::<RawFd>() {
                    fds.push(OwnedFd::from_raw_fd(core::ptr::read_unaligned(data.add(i))));
                }
            }
            c = libc::CMSG_NXTHDR(&h, c);
        }
    }
    Ok(Recv::Msg(n as usize, fds))
}

/// A minimal epoll set of the hub's own (its descriptor is watched by the loop).
pub struct Epoll(OwnedFd);

impl Epoll {
    /// A new epoll set (close-on-exec).
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: plain syscall.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(last());
        }
        // SAFETY: a descriptor just returned to us.
        Ok(Epoll(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Its descriptor, for the loop to watch.
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Watches `fd` for input and hang-up under `token`.
    pub fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLRDHUP) as u32,
            u64: token,
        };
        // SAFETY: a valid event struct.
        if unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
            return Err(last());
        }
        Ok(())
    }

    /// Stops watching `fd` (an error, a descriptor already gone, is ignored).
    pub fn remove(&self, fd: RawFd) {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: a valid event struct.
        unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, &mut ev) };
    }

    /// Ready tokens, without waiting.
    pub fn ready(&self, out: &mut [libc::epoll_event]) -> usize {
        // SAFETY: out is a valid buffer of out.len() events.
        let n =
            unsafe { libc::epoll_wait(self.0.as_raw_fd(), out.as_mut_ptr(), out.len() as i32, 0) };
        n.max(0) as usize
    }
}

/// Opens the directory `dir` to name files relative to it (`O_PATH |
/// O_DIRECTORY`): whatever its path names later, these files stay its.
pub fn open_dir(dir: &std::path::Path) -> io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::ErrorKind::InvalidInput)?;
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
    // SAFETY: a valid C string; the descriptor is owned at once.
    let fd = unsafe { libc::open(c.as_ptr(), flags) };
    if fd < 0 {
        return Err(last());
    }
    // SAFETY: a descriptor just returned to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What is at `file` in the directory `dir`, not following a symlink: its
/// type and mode bits (`st_mode`) and its owner, or None if there is nothing.
pub fn stat_at(dir: RawFd, file: &str) -> io::Result<Option<(u32, u32)>> {
    let c = std::ffi::CString::new(file).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: a zeroed stat is valid.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: a valid C string relative to a directory descriptor; fills `st`.
    if unsafe { libc::fstatat(dir, c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
        let e = last();
        return match e.raw_os_error() {
            Some(libc::ENOENT) => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some((st.st_mode, st.st_uid)))
}

/// The path of `file` in the directory `dir` through this process's own
/// descriptor (`/proc/self/fd/DIR/FILE`): short whatever the directory's path
/// (a socket's path fits 107 bytes), and the directory checked, not its path.
pub fn at_path(dir: RawFd, file: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(format!("/proc/self/fd/{dir}/{file}"))
}

fn path_addr(dir: RawFd, file: &str) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: a zeroed sockaddr_un is valid.
    let mut a: libc::sockaddr_un = unsafe { core::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let path = at_path(dir, file);
    let path = path.to_string_lossy();
    if path.len() + 1 > a.sun_path.len() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "name too long"));
    }
    for (i, b) in path.bytes().enumerate() {
        a.sun_path[i] = b as libc::c_char;
    }
    let len = core::mem::size_of::<libc::sa_family_t>() + path.len() + 1;
    Ok((a, len as libc::socklen_t))
}

/// Changes the mode of `file` in the directory `dir` (a socket just made).
pub fn chmod_at(dir: RawFd, file: &str, mode: u32) -> io::Result<()> {
    let c = std::ffi::CString::new(file).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: a valid C string relative to a directory descriptor.
    if unsafe { libc::fchmodat(dir, c.as_ptr(), mode as libc::mode_t, 0) } != 0 {
        return Err(last());
    }
    Ok(())
}

/// Removes the entry `file` of the directory `dir` (`unlinkat`: a symlink
/// itself, never what it points at).
pub fn unlink_at(dir: RawFd, file: &str) -> io::Result<()> {
    let c = std::ffi::CString::new(file).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: a valid C string relative to a directory descriptor.
    if unsafe { libc::unlinkat(dir, c.as_ptr(), 0) } != 0 {
        return Err(last());
    }
    Ok(())
}

/// Listens (non-blocking) on a new socket file `file` in the directory `dir`,
/// of mode `mode` (`0660`: the owner and the directory's group): an error if
/// anything is there already.
pub fn listen_at(dir: RawFd, file: &str, mode: u32) -> io::Result<OwnedFd> {
    let fd = socket(true)?;
    let (a, len) = path_addr(dir, file)?;
    // SAFETY: a valid address of `len` bytes.
    if unsafe { libc::bind(fd.as_raw_fd(), (&a as *const libc::sockaddr_un).cast(), len) } != 0 {
        return Err(last());
    }
    chmod_at(dir, file, mode)?;
    // SAFETY: plain syscall.
    if unsafe { libc::listen(fd.as_raw_fd(), 64) } != 0 {
        return Err(last());
    }
    Ok(fd)
}

/// Connects (blocking socket) to the socket file `file` in the directory `dir`.
pub fn connect_at(dir: RawFd, file: &str) -> io::Result<OwnedFd> {
    let fd = socket(false)?;
    let (a, len) = path_addr(dir, file)?;
    // SAFETY: a valid address of `len` bytes.
    if unsafe { libc::connect(fd.as_raw_fd(), (&a as *const libc::sockaddr_un).cast(), len) } != 0 {
        return Err(last());
    }
    Ok(fd)
}
