//! Files the gateway writes beside its journal (the journal, its owners, halts
//! and charges files): opened without following a symlink and checked to be this
//! uid's alone, replaced whole so a crash never leaves a torn one.

use std::io;
use std::path::Path;

fn refused(path: &Path, why: impl core::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("{}: {why}", path.display()),
    )
}

/// Opens (`create`: creates, 0600, never over an existing name) a journal file
/// without following a symlink, and checks what was opened: a regular file of
/// this uid, no group or other bits, one link.
pub fn open_file(path: &Path, create: bool) -> io::Result<std::fs::File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .create_new(create)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => refused(path, "a symlink, refused"),
            _ => e,
        })?;
    let m = f.metadata()?;
    let me = super::os::euid();
    if !m.file_type().is_file() {
        return Err(refused(path, "not a regular file"));
    }
    if m.uid() != me {
        return Err(refused(
            path,
            format_args!("owned by uid {}, not by the gateway's uid {me}", m.uid()),
        ));
    }
    if m.nlink() != 1 {
        return Err(refused(
            path,
            format_args!("{} links (a hard link elsewhere?)", m.nlink()),
        ));
    }
    if m.mode() & 0o077 != 0 {
        return Err(refused(
            path,
            format_args!("mode {:04o}: other users may read it", m.mode() & 0o7777),
        ));
    }
    Ok(f)
}

/// Replaces the small file at `path` with `text`, so that a crash leaves the old
/// one or the new one, never a torn one: written to `PATH.new` (created 0600 like
/// [`open_file`]; a stale one removed, a symlink not followed), synced, renamed
/// over `path`, then the directory synced.
pub fn replace_file(path: &Path, text: &str) -> io::Result<()> {
    use std::io::Write;
    let mut new = path.as_os_str().to_owned();
    new.push(".new");
    let new = std::path::PathBuf::from(new);
    match std::fs::remove_file(&new) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut f = open_file(&new, true)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&new, path)?;
    sync_dir(path);
    Ok(())
}

/// Syncs the directory holding `path` (a rename or a removal in it lasts).
pub fn sync_dir(path: &Path) {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
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
