//! Files the gateway writes beside its journal (the journal, its owners, halts
//! and charges files): opened relative to a descriptor of their directory
//! ([`Dir`], reached from `/` one component at a time, no symlink followed, each
//! checked), never by a path again, and without following a symlink themselves;
//! checked to be this uid's alone, replaced whole so a crash never leaves a torn
//! one. A parent swapped for a symlink after the start redirects nothing: the
//! directory held open is the one written (issue 41, item 6).
#![allow(unsafe_code)] // openat, renameat, unlinkat through libc.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

fn refused(path: &Path, why: impl core::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("{}: {why}", path.display()),
    )
}

/// `e` with the path it concerns, its kind kept (a directory not there is
/// still `NotFound`).
fn named(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

fn c_name(path: &Path, name: &[u8]) -> io::Result<CString> {
    CString::new(name).map_err(|_| refused(path, "a NUL byte in its name"))
}

/// `openat(at, name, flags)` as an owned descriptor.
fn open_at(at: libc::c_int, name: &CString, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: a valid C string; the descriptor is owned at once.
    let fd = unsafe { libc::openat(at, name.as_ptr(), flags | libc::O_CLOEXEC, 0o600) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor just returned to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An error unless the directory `m` (of `shown`) is root's or this uid's and
/// no other uid can write it (a root-owned sticky directory, `/tmp`, passes),
/// as OpenSSH's `StrictModes`.
fn strict(shown: &Path, m: &std::fs::Metadata) -> io::Result<()> {
    let (me, uid, mode) = (super::os::euid(), m.uid(), m.mode());
    if !m.file_type().is_dir() {
        return Err(refused(shown, "not a directory"));
    }
    if uid != 0 && uid != me {
        return Err(refused(
            shown,
            format_args!("owned by uid {uid}, neither root nor the gateway's uid {me}"),
        ));
    }
    if mode & 0o022 != 0 && !(uid == 0 && mode & 0o1000 != 0) {
        return Err(refused(
            shown,
            format_args!("mode {:04o}: other uids may write it", mode & 0o7777),
        ));
    }
    Ok(())
}

/// A directory held open, whose files are opened, replaced, renamed and removed
/// relative to its descriptor: what happens to its path afterwards (renamed, a
/// symlink put in its place) changes nothing the gateway writes.
#[derive(Clone, Debug)]
pub struct Dir {
    fd: Arc<OwnedFd>,
    path: PathBuf,
}

impl Dir {
    /// Opens the directory `path` (resolved once, then walked from `/` with
    /// `openat(O_DIRECTORY | O_NOFOLLOW)`, so nothing swapped in between is
    /// followed), each component checked on its descriptor: owned by root or
    /// this uid, writable by no other uid (a root-owned sticky one passes).
    pub fn open(path: &Path) -> io::Result<Dir> {
        let real = std::fs::canonicalize(path).map_err(|e| named(path, e))?;
        let root = c_name(path, b"/")?;
        let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW;
        let mut fd = open_at(libc::AT_FDCWD, &root, flags).map_err(|e| named(path, e))?;
        let mut at = PathBuf::from("/");
        let check = |fd: &OwnedFd, at: &Path| -> io::Result<()> {
            strict(at, &std::fs::File::from(fd.try_clone()?).metadata()?)
        };
        check(&fd, &at)?;
        for c in real.components() {
            let Component::Normal(name) = c else { continue };
            at.push(name);
            let name = c_name(path, name.as_bytes())?;
            fd = open_at(fd.as_raw_fd(), &name, flags).map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) | Some(libc::ENOTDIR) => {
                    refused(&at, "swapped for a symlink or a file since it was resolved")
                }
                _ => named(&at, e),
            })?;
            check(&fd, &at)?;
        }
        // The directory itself, readable: fsync needs more than O_PATH.
        let dot = c_name(path, b".")?;
        let fd = open_at(fd.as_raw_fd(), &dot, libc::O_RDONLY | libc::O_DIRECTORY)
            .map_err(|e| named(path, e))?;
        Ok(Dir {
            fd: Arc::new(fd),
            path: path.to_path_buf(),
        })
    }

    /// The directory of the file `path` ([`Dir::open`]) and the file's name in it.
    pub fn of(path: &Path) -> io::Result<(Dir, String)> {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| refused(path, "not a file name"))?;
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        Ok((Dir::open(dir)?, name.to_string()))
    }

    /// Its path, as given (for messages only: nothing is opened by it again).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of its file `name`, for messages.
    pub fn shown(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Opens (`create`: creates, 0600, never over an existing name) its file
    /// `name` without following a symlink, and checks what was opened: a regular
    /// file of this uid, no group or other bits, one link.
    pub fn open_file(&self, name: &str, create: bool) -> io::Result<std::fs::File> {
        let shown = self.shown(name);
        let c = c_name(&shown, name.as_bytes())?;
        let mut flags = libc::O_RDWR | libc::O_NOFOLLOW | libc::O_NOCTTY;
        if create {
            flags |= libc::O_CREAT | libc::O_EXCL;
        }
        let fd = open_at(self.fd.as_raw_fd(), &c, flags).map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => refused(&shown, "a symlink, refused"),
            _ => e,
        })?;
        let f = std::fs::File::from(fd);
        let m = f.metadata()?;
        let me = super::os::euid();
        if !m.file_type().is_file() {
            return Err(refused(&shown, "not a regular file"));
        }
        if m.uid() != me {
            return Err(refused(
                &shown,
                format_args!("owned by uid {}, not by the gateway's uid {me}", m.uid()),
            ));
        }
        if m.nlink() != 1 {
            return Err(refused(
                &shown,
                format_args!("{} links (a hard link elsewhere?)", m.nlink()),
            ));
        }
        if m.mode() & 0o077 != 0 {
            return Err(refused(
                &shown,
                format_args!("mode {:04o}: other users may read it", m.mode() & 0o7777),
            ));
        }
        Ok(f)
    }

    /// Removes its entry `name` (the entry itself, a symlink included, never what
    /// it points at); none there is not an error.
    pub fn remove(&self, name: &str) -> io::Result<()> {
        let c = c_name(&self.shown(name), name.as_bytes())?;
        // SAFETY: a valid C string relative to our directory descriptor.
        if unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) } != 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::NotFound {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Renames its entry `from` over its entry `to`.
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (f, t) = (
            c_name(&self.shown(from), from.as_bytes())?,
            c_name(&self.shown(to), to.as_bytes())?,
        );
        let d = self.fd.as_raw_fd();
        // SAFETY: valid C strings relative to our directory descriptor.
        if unsafe { libc::renameat(d, f.as_ptr(), d, t.as_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Syncs the directory (a rename or a removal in it lasts).
    pub fn sync(&self) {
        // SAFETY: fsync on a descriptor we own.
        let _ = unsafe { libc::fsync(self.fd.as_raw_fd()) };
    }

    /// Creates its file `name.new` afresh ([`Dir::open_file`]; a stale one of a
    /// start that died removed, a symlink not followed), for
    /// [`Dir::commit_new`] to rename over `name`.
    pub fn create_new(&self, name: &str) -> io::Result<std::fs::File> {
        let new = format!("{name}.new");
        self.remove(&new)?;
        self.open_file(&new, true)
    }

    /// Renames `name.new` (synced by the caller) over `name` and syncs the
    /// directory.
    pub fn commit_new(&self, name: &str) -> io::Result<()> {
        self.rename(&format!("{name}.new"), name)?;
        self.sync();
        Ok(())
    }

    /// Replaces its small file `name` with `text`, so that a crash leaves the old
    /// one or the new one, never a torn one: written to `name.new`
    /// ([`Dir::create_new`]), synced, renamed over `name`, the directory synced.
    pub fn replace(&self, name: &str, text: &str) -> io::Result<()> {
        use std::io::Write;
        let mut f = self.create_new(name)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        self.commit_new(name)
    }
}

/// An error for a file whose contents do not parse: names the file, and says
/// it is left as it is.
pub fn bad_data(path: &Path, why: impl core::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "{}: {why}; left as it is (move it away to start without it)",
            path.display()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(test: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ergon-files-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_directory_swapped_for_a_symlink_after_the_open_redirects_no_write() {
        let d = tmp("swap");
        let (held, elsewhere) = (d.join("held"), d.join("elsewhere"));
        std::fs::create_dir(&held).unwrap();
        std::fs::create_dir(&elsewhere).unwrap();
        let (dir, name) = Dir::of(&held.join("owners")).unwrap();
        dir.replace(&name, "one\n").unwrap();
        // The attacker's move: the directory renamed away, a symlink in its place.
        std::fs::rename(&held, d.join("moved")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &held).unwrap();
        dir.replace(&name, "two\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(d.join("moved/owners")).unwrap(),
            "two\n"
        );
        assert!(!elsewhere.join("owners").exists());
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_world_writable_directory_or_a_symlinked_file_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let d = tmp("strict");
        let open = d.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = Dir::of(&open.join("journal")).unwrap_err().to_string();
        assert!(e.contains("mode 0777"), "{e}");
        let (dir, _) = Dir::of(&d.join("x")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", d.join("l")).unwrap();
        let e = dir.open_file("l", false).unwrap_err().to_string();
        assert!(e.contains("a symlink, refused"), "{e}");
        let e = dir.replace("l", "x").map(|_| ());
        assert!(e.is_ok(), "the entry is replaced, never followed: {e:?}");
        assert!(!std::fs::symlink_metadata(d.join("l"))
            .unwrap()
            .file_type()
            .is_symlink());
        let _ = std::fs::remove_dir_all(&d);
    }
}
