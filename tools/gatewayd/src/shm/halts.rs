//! The gateway's halts file: every bucket a ban halted, with the venue's end of
//! the ban and why, so that a gateway killed while halted comes back halted. The
//! end of the venue's wait does not resume a halt; only a person's `clear-halt`
//! does, and it removes the record too.
//!
//! The file lives in the gateway's private runtime directory (`halts`, beside the
//! journal). It is text, one halt a line between a header and a count:
//!
//! ```text
//! ergon-halts 1
//! halt ip until_ms=1764606896123 reason=bootstrap: /api/v3/time answered 418
//! end 1
//! ```
//!
//! It is replaced whole, never edited: written beside it (`halts.new`, 0600,
//! never over an existing name), synced, renamed over it; with no halt left it is
//! removed. It is read without following a symlink and refused unless a regular
//! file of the gateway's uid with no group or other bits; a file that is not
//! exactly this form (truncated, garbage, a count that does not match) is an
//! error that names the file and the line, never a start without it.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use ergon_core::{BucketId, Budget};

use ergon_gateway::shm::files::{bad_data, Dir};

const HEADER: &str = "ergon-halts 1";
/// Larger than any file of [`MAX_HALTS`] halts.
const MAX_BYTES: u64 = 64 * 1024;
/// More halts than a budget has buckets.
const MAX_HALTS: usize = 256;
/// The longest reason kept (longer ones are cut).
const MAX_REASON: usize = 240;
const MS: i64 = 1_000_000;

/// One halt as the file keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Halt {
    /// The halted bucket's name in the gateway's budget.
    pub bucket: String,
    /// The venue's end of the ban, Unix ms (what the venue said; the halt does
    /// not end there).
    pub until_ms: i64,
    /// Why, in words: one line of at most 240 bytes.
    pub reason: String,
}

impl Halt {
    /// A halt of `bucket` until `until_ms`, its reason made one printable line.
    pub fn new(bucket: &str, until_ms: i64, reason: &str) -> Halt {
        let mut r: String = reason
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        while r.len() > MAX_REASON {
            r.pop();
        }
        Halt {
            bucket: bucket.to_string(),
            until_ms,
            reason: r,
        }
    }
}

/// The halts file of one gateway, and the halts it holds.
#[derive(Clone, Debug)]
pub struct HaltLog {
    path: PathBuf,
    /// Its directory, held open: written there whatever its path becomes.
    dir: Dir,
    name: String,
    halts: Vec<Halt>,
    /// The budget's halted buckets when the file was last brought up to date.
    seen: Vec<BucketId>,
}

impl HaltLog {
    /// Reads the halts file at `path` (none there: no halt). An error for a file
    /// that is refused or not a halts file; it is left as it is.
    pub fn open(path: &Path) -> io::Result<HaltLog> {
        let (dir, name) = Dir::of(path)?;
        let halts = match dir.open_file(&name, false) {
            Ok(f) => read(path, f)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        Ok(HaltLog {
            path: path.to_path_buf(),
            dir,
            name,
            halts,
            seen: Vec::new(),
        })
    }

    /// The halts recorded.
    pub fn halts(&self) -> &[Halt] {
        &self.halts
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records `halt` (replacing one of the same bucket) and writes the file.
    pub fn record(&mut self, halt: Halt) -> io::Result<()> {
        self.halts.retain(|h| h.bucket != halt.bucket);
        self.halts.push(halt);
        self.write()
    }

    /// Halts each recorded bucket in `budget` at `now_ns` (the loop's clock; its
    /// wall-clock time is `wall_ms`), the venue's end carried over. An error names
    /// a recorded bucket the budget does not have.
    pub fn restore(
        &mut self,
        budget: &mut Budget,
        now_ns: i64,
        wall_ms: i64,
    ) -> Result<(), String> {
        for h in &self.halts {
            let id = budget.bucket(&h.bucket).ok_or_else(|| {
                format!(
                    "{}: a halt of bucket {:?}, which this venue's budget does not have; move the file away to start without it",
                    self.path.display(),
                    h.bucket
                )
            })?;
            let until =
                now_ns.saturating_add(h.until_ms.saturating_sub(wall_ms).saturating_mul(MS));
            // Its own id: never foreign.
            let _ = budget.banned(id, until, now_ns);
        }
        self.seen = budget.halted().collect();
        Ok(())
    }

    /// Whether the budget's halted buckets changed since the file was last
    /// brought up to date (no allocation, no syscall).
    pub fn changed(&self, budget: &Budget) -> bool {
        !budget.halted().eq(self.seen.iter().copied())
    }

    /// Brings the file up to date with `budget` at `now_ns` (wall clock `wall_ms`):
    /// a new halt is recorded with the venue's end the budget holds, a cleared one
    /// is removed. Nothing is written if nothing changed.
    pub fn sync(&mut self, budget: &Budget, now_ns: i64, wall_ms: i64) -> io::Result<()> {
        if !self.changed(budget) {
            return Ok(());
        }
        let now: Vec<BucketId> = budget.halted().collect();
        let name = |id: BucketId| budget.name(id).unwrap_or("?").to_string();
        let halted: Vec<String> = now.iter().map(|&id| name(id)).collect();
        self.halts.retain(|h| halted.contains(&h.bucket));
        for &id in now.iter().filter(|id| !self.seen.contains(id)) {
            let s = budget.stats(id).unwrap_or_default();
            let until_ms = s.ban_until_ns.map_or(wall_ms, |u| {
                wall_ms.saturating_add(u.saturating_sub(now_ns) / MS)
            });
            let why = format!(
                "the venue banned it while the gateway served (bans={})",
                s.bans
            );
            self.halts.retain(|h| h.bucket != name(id));
            self.halts.push(Halt::new(&name(id), until_ms, &why));
        }
        self.seen = now;
        self.write()
    }

    /// Replaces the file with the halts held (removes it when there is none).
    fn write(&self) -> io::Result<()> {
        if self.halts.is_empty() {
            self.dir.remove(&self.name)?;
            self.dir.sync();
            return Ok(());
        }
        let mut text = format!("{HEADER}\n");
        for h in &self.halts {
            text += &format!(
                "halt {} until_ms={} reason={}\n",
                h.bucket, h.until_ms, h.reason
            );
        }
        text += &format!("end {}\n", self.halts.len());
        self.dir.replace(&self.name, &text)
    }
}

/// The halts of an opened file; an error naming the line for anything else.
fn read(path: &Path, f: std::fs::File) -> io::Result<Vec<Halt>> {
    let mut bytes = Vec::new();
    f.take(MAX_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(bad_data(
            path,
            format_args!("larger than {MAX_BYTES} bytes"),
        ));
    }
    let text = String::from_utf8(bytes).map_err(|_| bad_data(path, "not UTF-8 text"))?;
    if !text.ends_with('\n') {
        return Err(bad_data(path, "truncated (no line end at the end)"));
    }
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    if lines.next().map(|(_, l)| l) != Some(HEADER) {
        return Err(bad_data(path, format_args!("line 1: not {HEADER:?}")));
    }
    let mut halts = Vec::new();
    for (n, line) in lines {
        if let Some(count) = line.strip_prefix("end ") {
            if count.parse::<usize>().ok() != Some(halts.len()) {
                return Err(bad_data(
                    path,
                    format_args!("line {n}: {line:?}, but {} halts above", halts.len()),
                ));
            }
            if n != text.lines().count() {
                return Err(bad_data(
                    path,
                    format_args!("line {n}: lines after the end"),
                ));
            }
            return Ok(halts);
        }
        if halts.len() == MAX_HALTS {
            return Err(bad_data(path, format_args!("more than {MAX_HALTS} halts")));
        }
        halts.push(parse_halt(line).ok_or_else(|| {
            bad_data(
                path,
                format_args!("line {n}: expected `halt BUCKET until_ms=MS reason=TEXT`"),
            )
        })?);
    }
    Err(bad_data(path, "truncated (no `end` line)"))
}

/// One `halt BUCKET until_ms=MS reason=TEXT` line.
fn parse_halt(line: &str) -> Option<Halt> {
    let rest = line.strip_prefix("halt ")?;
    let (bucket, rest) = rest.split_once(' ')?;
    let (until, reason) = rest.split_once(' ')?;
    let until_ms = until.strip_prefix("until_ms=")?.parse::<i64>().ok()?;
    let reason = reason.strip_prefix("reason=")?;
    let named =
        !bucket.is_empty() && bucket.len() <= 64 && bucket.bytes().all(|b| b.is_ascii_graphic());
    let readable = reason.len() <= MAX_REASON && !reason.chars().any(char::is_control);
    (named && readable).then(|| Halt {
        bucket: bucket.to_string(),
        until_ms,
        reason: reason.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(test: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ergon-halts-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_written_file_reads_back_and_the_last_clear_removes_it() {
        let d = dir("roundtrip");
        let p = d.join("halts");
        let mut log = HaltLog::open(&p).unwrap();
        assert!(log.halts().is_empty());
        let h = Halt::new("ip", 1_764_606_896_123, "bootstrap: 418\nIP banned");
        log.record(h.clone()).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(
            text,
            "ergon-halts 1\nhalt ip until_ms=1764606896123 reason=bootstrap: 418 IP banned\nend 1\n"
        );
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
        assert_eq!(
            HaltLog::open(&p).unwrap().halts(),
            [Halt::new("ip", h.until_ms, &h.reason)]
        );
        log.halts.clear();
        log.write().unwrap();
        assert!(!p.exists());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_truncated_or_garbage_file_is_an_error_that_names_it() {
        let d = dir("bad");
        let p = d.join("halts");
        let good = "ergon-halts 1\nhalt ip until_ms=5 reason=x\nend 1\n";
        for (text, says) in [
            ("", "truncated"),
            (&good[..20], "truncated"),
            (&good[..good.len() - 6], "no `end` line"),
            ("ergon-halts 1\nend 1\n", "but 0 halts"),
            ("ergon-halts 2\nend 0\n", "line 1"),
            (
                "ergon-halts 1\nhalt ip until_ms=x reason=y\nend 1\n",
                "line 2",
            ),
            (
                "ergon-halts 1\nend 0\nhalt ip until_ms=5 reason=x\n",
                "lines after",
            ),
            ("\u{0}\u{ff}garbage\n", "line 1"),
        ] {
            std::fs::write(&p, text).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
            let e = HaltLog::open(&p).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains("halts"), "{text:?}: {e}");
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_symlink_or_a_readable_file_is_refused() {
        let d = dir("refused");
        let p = d.join("halts");
        std::fs::write(d.join("other"), "ergon-halts 1\nend 0\n").unwrap();
        std::os::unix::fs::symlink(d.join("other"), &p).unwrap();
        let e = HaltLog::open(&p).unwrap_err().to_string();
        assert!(e.contains("symlink"), "{e}");
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, "ergon-halts 1\nend 0\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = HaltLog::open(&p).unwrap_err().to_string();
        assert!(e.contains("mode 0644"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_budget_halt_is_synced_restored_and_its_clear_removes_the_record() {
        use ergon_core::Spec;
        let d = dir("sync");
        let p = d.join("halts");
        let budget = || {
            let mut b = Budget::builder();
            let ip = b.add("ip", Spec::gate()).unwrap();
            (b.build(0).unwrap(), ip)
        };
        let (mut b, ip) = budget();
        let mut log = HaltLog::open(&p).unwrap();
        b.banned(ip, 5_000 * MS, 1_000 * MS).unwrap();
        assert!(log.changed(&b));
        // The loop's 1 s is the wall clock's 10 s: the venue's end is 14 s.
        log.sync(&b, 1_000 * MS, 10_000).unwrap();
        assert!(!log.changed(&b));
        assert_eq!(log.halts()[0].until_ms, 14_000);
        // A new gateway: its loop's 0 is the wall clock's 12 s.
        let (mut b2, ip2) = budget();
        let mut again = HaltLog::open(&p).unwrap();
        again.restore(&mut b2, 0, 12_000).unwrap();
        assert!(b2.is_halted(ip2).unwrap());
        assert_eq!(b2.stats(ip2).unwrap().ban_until_ns, Some(2_000 * MS));
        b2.clear_halt(ip2).unwrap();
        again.sync(&b2, 0, 12_000).unwrap();
        assert!(!p.exists());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
