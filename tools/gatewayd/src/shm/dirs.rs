//! The directories the gateway keeps its files in (the journal's, the runtime
//! directory), checked as OpenSSH's `StrictModes` checks a user's files: the
//! directory and every parent up to `/` owned by root or the gateway's uid,
//! and writable by no other uid (a root-owned sticky directory, `/tmp`, passes:
//! nobody else can rename or remove an entry that is not theirs in it). A
//! directory another uid can write lets it delete, swap or plant what the
//! gateway keeps there (issue 41, item 6). And a [`PrivateDir`] held open, whose
//! files are opened relative to its descriptor without following a symlink
//! (`openat`, `O_NOFOLLOW`): a directory renamed or swapped after the check
//! redirects nothing.
#![allow(unsafe_code)] // openat, fstat through libc.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use ergon_gateway::shm::os;

fn refused(dir: &Path, why: impl core::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "directory {}: {why} (the gateway keeps its journal and runtime files only where no other uid can write)",
            dir.display()
        ),
    )
}

/// Checks `dir` and each of its parents up to `/` (see the module), as written
/// (a symlink judged as itself: who may repoint it) and as resolved (where it
/// leads): an error naming the first that another uid owns or can write.
/// Components that do not exist yet (to be created by the gateway) are skipped.
pub fn check_dir(dir: &Path) -> io::Result<()> {
    let dir = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir()?.join(dir)
    };
    walk(&dir)?;
    // The longest part that exists, resolved.
    let mut base = Some(dir.as_path());
    while let Some(b) = base {
        match std::fs::canonicalize(b) {
            Ok(real) => return walk(&real),
            Err(e) if e.kind() == io::ErrorKind::NotFound => base = b.parent(),
            Err(e) => return Err(refused(b, e)),
        }
    }
    Ok(())
}

fn walk(dir: &Path) -> io::Result<()> {
    let me = os::euid();
    let mut at = Some(dir);
    while let Some(d) = at {
        at = d.parent();
        let m = match std::fs::symlink_metadata(d) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(refused(d, e)),
        };
        let (uid, mode) = (m.uid(), m.mode());
        if uid != 0 && uid != me {
            return Err(refused(
                d,
                format_args!("owned by uid {uid}, neither root nor the gateway's uid {me}"),
            ));
        }
        let sticky_root = uid == 0 && mode & 0o1000 != 0;
        if !m.file_type().is_symlink() && mode & 0o022 != 0 && !sticky_root {
            return Err(refused(
                d,
                format_args!("mode {:04o}: other uids may write it", mode & 0o7777),
            ));
        }
    }
    Ok(())
}

/// A private directory held open: checked with [`check_dir`], itself a
/// directory (not a symlink) of the gateway's uid, and written relative to its
/// descriptor.
#[derive(Debug)]
pub struct PrivateDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl PrivateDir {
    /// Checks `path` and opens it (`O_DIRECTORY | O_NOFOLLOW`).
    pub fn open(path: &Path) -> io::Result<PrivateDir> {
        check_dir(path)?;
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| refused(path, "a NUL byte in its name"))?;
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: a valid C string; the descriptor is owned at once.
        let fd = unsafe { libc::open(c.as_ptr(), flags) };
        if fd < 0 {
            return Err(refused(path, io::Error::last_os_error()));
        }
        // SAFETY: a descriptor just returned to us.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let m = std::fs::File::from(fd.try_clone()?).metadata()?;
        if m.uid() != os::euid() {
            return Err(refused(path, format_args!("owned by uid {}", m.uid())));
        }
        Ok(PrivateDir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// Its path, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its descriptor, to name its files relative to.
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }

    /// Makes room for the gateway's socket file `name`: nothing is there, or a
    /// stale socket of the gateway's uid that nobody listens on (an earlier
    /// life's, removed). Anything else is refused, naming it: a socket someone
    /// answers on (another gateway of that name), a symlink, another uid's
    /// file, a file that is not a socket. Nothing is followed.
    pub fn clear_socket(&self, name: &str) -> io::Result<()> {
        let shown = self.path.join(name);
        let Some((mode, uid)) = os::stat_at(self.fd(), name)? else {
            return Ok(());
        };
        if mode & libc::S_IFMT == libc::S_IFLNK {
            return Err(refused(&shown, "a symlink where the gateway's socket goes"));
        }
        if mode & libc::S_IFMT != libc::S_IFSOCK {
            return Err(refused(
                &shown,
                "not a socket, where the gateway's socket goes",
            ));
        }
        if uid != os::euid() {
            return Err(refused(&shown, format_args!("a socket of uid {uid}")));
        }
        match os::connect_at(self.fd(), name) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::ECONNREFUSED | libc::ENOENT)) => {
                self.remove(name)
            }
            _ => Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!(
                    "{}: a process of this uid listens there (another gateway of that name?)",
                    shown.display()
                ),
            )),
        }
    }

    /// Removes its entry `name` (`unlinkat`: the entry itself, a symlink
    /// included, never what it points at).
    pub fn remove(&self, name: &str) -> io::Result<()> {
        let c = CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: a valid C string relative to our directory descriptor.
        if unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Replaces the contents of its file `name` (created 0600) with `text`,
    /// opened relative to the directory's descriptor without following a
    /// symlink; refused unless a regular file of the gateway's uid with one link.
    pub fn write(&self, name: &str, text: &str) -> io::Result<()> {
        use std::io::Write;
        let c = CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
        let flags = libc::O_WRONLY
            | libc::O_CREAT
            | libc::O_NOFOLLOW
            | libc::O_CLOEXEC
            | libc::O_NOCTTY
            | libc::O_NONBLOCK;
        // SAFETY: a valid C string relative to our directory descriptor.
        let fd = unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), flags, 0o600) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            let shown = self.path.join(name);
            return Err(match e.raw_os_error() {
                Some(libc::ELOOP) => refused(&shown, "a symlink, refused"),
                _ => refused(&shown, e),
            });
        }
        // SAFETY: a descriptor just returned to us.
        let mut f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let m = f.metadata()?;
        let shown = self.path.join(name);
        if !m.file_type().is_file() || m.uid() != os::euid() || m.nlink() != 1 {
            return Err(refused(
                &shown,
                "not a regular file of the gateway's uid with one link",
            ));
        }
        f.set_len(0)?;
        f.write_all(text.as_bytes())
    }

    /// The contents of its file `name` (at most `max` bytes, UTF-8), opened
    /// like [`PrivateDir::write`]'s; `None` if there is none.
    pub fn read(&self, name: &str, max: usize) -> io::Result<Option<String>> {
        use std::io::Read;
        let c = CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK;
        // SAFETY: a valid C string relative to our directory descriptor.
        let fd = unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), flags) };
        let shown = self.path.join(name);
        if fd < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOENT) => Ok(None),
                Some(libc::ELOOP) => Err(refused(&shown, "a symlink, refused")),
                _ => Err(refused(&shown, e)),
            };
        }
        // SAFETY: a descriptor just returned to us.
        let f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let m = f.metadata()?;
        if !m.file_type().is_file() || m.uid() != os::euid() || m.nlink() != 1 {
            return Err(refused(
                &shown,
                "not a regular file of the gateway's uid with one link",
            ));
        }
        let mut bytes = Vec::new();
        f.take(max as u64 + 1).read_to_end(&mut bytes)?;
        if bytes.len() > max {
            return Err(refused(&shown, format_args!("longer than {max} bytes")));
        }
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| refused(&shown, "not UTF-8"))
    }
}

/// The gateway's private runtime directory, created 0750 if absent and refused
/// unless a directory (not a symlink) of this uid that no other user can write,
/// where [`ergon_gateway::shm::rundir::runtime_dir`] says; its parents checked
/// with [`check_dir`].
pub fn runtime_dir(flag: Option<&Path>, name: &str) -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    let me = os::euid();
    let dir = ergon_gateway::shm::rundir::runtime_dir(flag, name)?;
    let shown = dir.display();
    if dir.as_os_str().is_empty() || dir.is_relative() {
        return Err(format!(
            "runtime directory {shown:?}: an absolute path, please"
        ));
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o750)
        .create(&dir)
        .map_err(|e| format!("runtime directory {shown}: {e}"))?;
    let m =
        std::fs::symlink_metadata(&dir).map_err(|e| format!("runtime directory {shown}: {e}"))?;
    if !m.file_type().is_dir() {
        return Err(format!(
            "runtime directory {shown}: not a directory (a symlink?)"
        ));
    }
    if m.uid() != me {
        return Err(format!(
            "runtime directory {shown}: owned by uid {}, not by the gateway's uid {me}",
            m.uid()
        ));
    }
    if m.mode() & 0o022 != 0 {
        return Err(format!(
            "runtime directory {shown}: mode {:04o}: other users may write it (chmod 0750)",
            m.mode() & 0o7777
        ));
    }
    // Its parents too: one another uid can write lets it swap this directory.
    check_dir(&dir).map_err(|e| format!("runtime directory {shown}: {e}"))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_tmp_pass_and_a_world_writable_directory_does_not() {
        check_dir(Path::new("/")).unwrap();
        check_dir(&std::env::temp_dir()).unwrap();
        let d = std::env::temp_dir().join(format!("ergon-dirs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir(&d).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_dir(&d.join("below")).unwrap_err().to_string();
        assert!(e.contains("mode 0777"), "{e}");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        let p = PrivateDir::open(&d).unwrap();
        p.write("f", "one\n").unwrap();
        p.write("f", "x\n").unwrap();
        assert_eq!(std::fs::read_to_string(d.join("f")).unwrap(), "x\n");
        std::os::unix::fs::symlink("/etc/hostname", d.join("l")).unwrap();
        let e = p.write("l", "x").unwrap_err().to_string();
        assert!(e.contains("symlink"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_stale_socket_of_ours_goes_and_anything_else_at_its_path_stays() {
        use std::os::unix::fs::PermissionsExt;
        let d = std::env::temp_dir().join(format!("ergon-sock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        let p = PrivateDir::open(&d).unwrap();
        p.clear_socket("s").unwrap(); // nothing there
        let live = os::listen_at(p.fd(), "s", 0o600).unwrap();
        let e = p.clear_socket("s").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
        drop(live); // stale now: nobody listens
        p.clear_socket("s").unwrap();
        assert!(std::fs::symlink_metadata(d.join("s")).is_err(), "removed");
        std::os::unix::fs::symlink("/etc/hostname", d.join("l")).unwrap();
        let e = p.clear_socket("l").unwrap_err().to_string();
        assert!(e.contains("a symlink"), "{e}");
        std::fs::write(d.join("f"), "x").unwrap();
        let e = p.clear_socket("f").unwrap_err().to_string();
        assert!(e.contains("not a socket"), "{e}");
        if os::euid() == 0 {
            drop(os::listen_at(p.fd(), "o", 0o600).unwrap());
            std::os::unix::fs::lchown(d.join("o"), Some(65534), None).unwrap();
            let e = p.clear_socket("o").unwrap_err().to_string();
            assert!(e.contains("a socket of uid 65534"), "{e}");
            assert!(std::fs::symlink_metadata(d.join("o")).is_ok(), "left alone");
        }
        assert!(std::fs::symlink_metadata(d.join("l")).is_ok(), "left alone");
        let _ = std::fs::remove_dir_all(&d);
    }
}
