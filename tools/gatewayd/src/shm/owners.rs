//! Whose client order ids were whose, across gateway lives: the blocks of ids
//! each client name was issued, kept in a file beside the journal
//! (`JOURNAL.owners`), so that a restarted gateway still tells a client's orders
//! from another's (issue 27, item 6). Without it an id of an earlier life had no
//! owner: any client could cancel or query it, and its updates went to all.
//!
//! It also binds each name to the uid that first held it (issue 41, item 4): a
//! name is a capability (its region, its events, its orders), so another uid
//! attaching under it is refused, in this life and the next.
//!
//! A name not attached for [`OwnerLog::expire`]'s age (`--forget-names DAYS`,
//! default [`FORGET_NAMES_DAYS`]) leaves the file, its blocks with it (its
//! earlier lives' ids are then nobody's, and another uid may take the name):
//! the file is bounded in time as well as per uid (issue 41, item 8). The clock
//! is a parameter (the wall clock's ms, given by the caller).
//!
//! One line a block, `block NAME EPOCH FROM END`, and one a name, `uid NAME
//! UID LAST_MS` (its last attach, Unix ms), under a header, written whole to a
//! new file, synced and renamed over the old one at each attach (a rare
//! event). A file of version 2 (`uid NAME UID`, no time) is read, its names
//! taken as attached at the open; one of version 1 (no uid lines) is read, its
//! names bound to the first uid that attaches under them. The file is refused like the journal (a symlink, another owner, a
//! second link); a line that does not parse is an error naming the file and the
//! line.

use std::io::{self, Read};
use std::path::Path;

use ergon_gateway::shm::files::Dir;

const HEADER: &str = "ergon-gateway owners 3";
/// The header of the files written before names had a last attach time.
const HEADER_V2: &str = "ergon-gateway owners 2";
/// The header of the files written before names had uids.
const HEADER_V1: &str = "ergon-gateway owners 1";
/// How long a name not attached stays in the file by default, days.
pub const FORGET_NAMES_DAYS: u32 = 30;
/// The most blocks kept for one name (across lives): one per attach.
pub const KEPT_PER_NAME: usize = 64;
/// The most names kept for one uid: a new one past this forgets the uid's
/// oldest (its binding and its blocks: its earlier lives' ids are then
/// nobody's), so the file stays bounded however many names a uid attaches
/// under (issue 41, item 8: 15.5k names grew it to 4.4 MB, over [`MAX_BYTES`],
/// and the gateway then refused to start).
pub const NAMES_PER_UID: usize = 64;
/// The most bytes read: a file bigger than this is not ours.
const MAX_BYTES: u64 = 4 << 20;

/// One block of ids issued to a client name.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Block {
    name: String,
    epoch: u64,
    from: u64,
    end: u64,
}

/// A name's binding: the uid it belongs to, and its last attach (Unix ms).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Binding {
    name: String,
    uid: u32,
    last_ms: i64,
}

/// Names and the uids they are bound to, in the order first bound.
type Bindings = Vec<Binding>;

/// The owners file and the blocks it holds.
#[derive(Debug)]
pub struct OwnerLog {
    /// Its directory, held open: written there whatever its path becomes.
    dir: Dir,
    name: String,
    blocks: Vec<Block>,
    /// Each name's uid.
    uids: Bindings,
}

impl OwnerLog {
    /// Reads the owners file at `path` (none there: no block known) at `now_ms`
    /// (the wall clock's Unix ms: the last attach of a name a file of version 2
    /// does not time). An error for a file that is refused or not an owners
    /// file; it is left as it is.
    pub fn open(path: &Path, now_ms: i64) -> io::Result<OwnerLog> {
        let (dir, name) = Dir::of(path)?;
        let (blocks, uids) = match dir.open_file(&name, false) {
            Ok(f) => read(path, f, now_ms)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => (Vec::new(), Vec::new()),
            Err(e) => return Err(e),
        };
        Ok(OwnerLog {
            dir,
            name,
            blocks,
            uids,
        })
    }

    /// The uid `name` is bound to, if the file binds it.
    pub fn uid_of(&self, name: &str) -> Option<u32> {
        self.uids.iter().find(|b| b.name == name).map(|b| b.uid)
    }

    /// Forgets every name not attached since `now_ms - after_ms` (Unix ms): its
    /// binding and its blocks. The file is written at the next
    /// [`OwnerLog::record`]. How many names went.
    pub fn expire(&mut self, now_ms: i64, after_ms: i64) -> usize {
        let before = self.uids.len();
        let cut = now_ms.saturating_sub(after_ms);
        let (gone, kept): (Bindings, Bindings) = self.uids.drain(..).partition(|b| b.last_ms < cut);
        self.uids = kept;
        self.blocks
            .retain(|b| !gone.iter().any(|g| g.name == b.name));
        before - self.uids.len()
    }

    /// Records that `name`, held by `uid`, was issued the ids `from..end` of
    /// boot epoch `epoch` at `now_ms` (Unix ms; keeping its latest
    /// [`KEPT_PER_NAME`]), binds the name to `uid` if it is not bound yet, and
    /// writes the file.
    pub fn record(
        &mut self,
        name: &str,
        uid: u32,
        epoch: u64,
        (from, end): (u64, u64),
        now_ms: i64,
    ) -> io::Result<()> {
        match self.uids.iter_mut().find(|b| b.name == name) {
            Some(b) => b.last_ms = b.last_ms.max(now_ms),
            None => {
                self.uids.push(Binding {
                    name: name.to_string(),
                    uid,
                    last_ms: now_ms,
                });
                if self.uids.iter().filter(|b| b.uid == uid).count() > NAMES_PER_UID {
                    if let Some(i) = self.uids.iter().position(|b| b.uid == uid) {
                        let old = self.uids.remove(i);
                        self.blocks.retain(|b| b.name != old.name);
                    }
                }
            }
        }
        let mine = self.blocks.iter().filter(|b| b.name == name).count();
        if mine >= KEPT_PER_NAME {
            if let Some(i) = self.blocks.iter().position(|b| b.name == name) {
                self.blocks.remove(i);
            }
        }
        self.blocks.push(Block {
            name: name.to_string(),
            epoch,
            from,
            end,
        });
        let mut text = format!("{HEADER}\n");
        for b in &self.uids {
            text += &format!("uid {} {} {}\n", b.name, b.uid, b.last_ms);
        }
        for b in &self.blocks {
            text += &format!("block {} {} {} {}\n", b.name, b.epoch, b.from, b.end);
        }
        text += &format!("end {}\n", self.blocks.len());
        self.dir.replace(&self.name, &text)
    }

    /// The client name the id of sequence `seq` in boot epoch `epoch` was issued
    /// to, if a block recorded it.
    pub fn owner(&self, epoch: u64, seq: u64) -> Option<&str> {
        self.blocks
            .iter()
            .find(|b| b.epoch == epoch && (b.from..b.end).contains(&seq))
            .map(|b| b.name.as_str())
    }
}

/// The blocks and the names' uids of an opened file; an error naming the line
/// for anything else.
fn read(path: &Path, f: std::fs::File, now_ms: i64) -> io::Result<(Vec<Block>, Bindings)> {
    let bad = |line: usize, what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: line {line}: {what}; move the file away to start without it",
                path.display()
            ),
        )
    };
    let mut bytes = Vec::new();
    f.take(MAX_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(bad(0, "too big for an owners file"));
    }
    let text = String::from_utf8(bytes).map_err(|_| bad(0, "not text"))?;
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    let timed = match lines.next() {
        Some((_, HEADER)) => true,
        Some((_, HEADER_V2 | HEADER_V1)) => false,
        _ => return Err(bad(1, "not an ergon-gateway owners file")),
    };
    let (mut blocks, mut uids) = (Vec::new(), Bindings::new());
    for (n, line) in lines {
        let words: Vec<&str> = line.split(' ').collect();
        let (name, uid, last) = match words.as_slice() {
            ["uid", name, uid, last] if timed => (*name, *uid, Some(*last)),
            ["uid", name, uid] if !timed => (*name, *uid, None),
            _ => ("", "", None),
        };
        match words.as_slice() {
            ["uid", ..] if !uid.is_empty() => {
                let uid = uid.parse::<u32>().map_err(|_| bad(n, "a bad uid"))?;
                let last_ms = match last {
                    Some(t) => t.parse::<i64>().map_err(|_| bad(n, "a bad time"))?,
                    None => now_ms,
                };
                if name.is_empty() || uids.iter().any(|b| b.name == name) {
                    return Err(bad(n, "a name bound twice"));
                }
                uids.push(Binding {
                    name: name.to_string(),
                    uid,
                    last_ms,
                });
            }
            ["block", name, epoch, from, end] => {
                let num = |w: &str| w.parse::<u64>().map_err(|_| bad(n, "a bad number"));
                let (epoch, from, end) = (num(epoch)?, num(from)?, num(end)?);
                if from > end || name.is_empty() {
                    return Err(bad(n, "a bad block"));
                }
                blocks.push(Block {
                    name: (*name).to_string(),
                    epoch,
                    from,
                    end,
                });
            }
            ["end", count] if count.parse() == Ok(blocks.len()) => return Ok((blocks, uids)),
            _ => return Err(bad(n, "not a block line")),
        }
    }
    Err(bad(0, "cut short (no end line)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// The wall clock of the tests, Unix ms.
    const T0: i64 = 1_800_000_000_000;
    const DAY: i64 = 86_400_000;

    fn dir(test: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ergon-owners-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn blocks_survive_a_reopen_and_each_name_keeps_its_latest() {
        let d = dir("reopen");
        let p = d.join("j.owners");
        let mut log = OwnerLog::open(&p, T0).unwrap();
        assert_eq!(log.owner(7, 5), None);
        log.record("a", 1, 7, (0, 100), T0).unwrap();
        log.record("b", 2, 7, (100, 200), T0).unwrap();
        log.record("b", 3, 8, (200, 300), T0).unwrap();
        let mut log = OwnerLog::open(&p, T0).unwrap();
        assert_eq!(log.owner(7, 5), Some("a"));
        assert_eq!(
            (log.uid_of("a"), log.uid_of("b"), log.uid_of("c")),
            (Some(1), Some(2), None),
            "each name bound to its first uid"
        );
        assert_eq!(log.owner(7, 150), Some("b"));
        assert_eq!(log.owner(8, 5), None, "another life's");
        assert_eq!(log.owner(7, 200), None);
        for i in 0..KEPT_PER_NAME as u64 {
            log.record("a", 1, 9, (1_000 + i * 10, 1_010 + i * 10), T0)
                .unwrap();
        }
        assert_eq!(log.owner(7, 5), None, "a's oldest block dropped");
        assert_eq!(log.owner(7, 150), Some("b"), "b's kept");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_bad_file_is_an_error_naming_the_line() {
        let d = dir("bad");
        let p = d.join("j.owners");
        for (text, line) in [
            ("garbage\n", "line 1"),
            ("ergon-gateway owners 1\nblock a 1 5\nend 1\n", "line 2"),
            ("ergon-gateway owners 1\nblock a 1 9 5\nend 1\n", "line 2"),
            ("ergon-gateway owners 1\nblock a 1 0 5\n", "cut short"),
            ("ergon-gateway owners 2\nuid a x\nend 0\n", "line 2"),
            (
                "ergon-gateway owners 2\nuid a 1\nuid a 2\nend 0\n",
                "line 3",
            ),
        ] {
            let _ = std::fs::remove_file(&p);
            std::fs::write(&p, text).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
            let e = OwnerLog::open(&p, T0).unwrap_err().to_string();
            assert!(e.contains(line), "{text:?}: {e}");
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_uid_keeps_its_latest_names_and_the_file_stays_bounded() {
        let d = dir("names");
        let p = d.join("j.owners");
        let mut log = OwnerLog::open(&p, T0).unwrap();
        log.record("other", 2, 7, (0, 10), T0).unwrap();
        // On main every name stayed: 15.5k of them grew the file past MAX_BYTES.
        for i in 0..300u64 {
            log.record(&format!("n{i}"), 1, 7, (10 + i * 10, 20 + i * 10), T0)
                .unwrap();
        }
        let len = std::fs::metadata(&p).unwrap().len();
        assert!(len < 4 * 1024, "{len} bytes");
        let log = OwnerLog::open(&p, T0).unwrap();
        assert_eq!(log.uid_of("n299"), Some(1));
        assert_eq!(log.uid_of(&format!("n{}", 300 - NAMES_PER_UID)), Some(1));
        assert_eq!(log.uid_of(&format!("n{}", 299 - NAMES_PER_UID)), None);
        assert_eq!(log.owner(7, 15), None, "an expired name's ids are nobody's");
        assert_eq!(
            (log.uid_of("other"), log.owner(7, 5)),
            (Some(2), Some("other"))
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_file_of_version_1_is_read_and_its_names_bound_at_their_next_attach() {
        let d = dir("v1");
        let p = d.join("j.owners");
        std::fs::write(&p, "ergon-gateway owners 1\nblock a 7 0 100\nend 1\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut log = OwnerLog::open(&p, T0).unwrap();
        assert_eq!((log.owner(7, 5), log.uid_of("a")), (Some("a"), None));
        log.record("a", 5, 8, (0, 100), T0).unwrap();
        let log = OwnerLog::open(&p, T0).unwrap();
        assert_eq!((log.owner(7, 5), log.uid_of("a")), (Some("a"), Some(5)));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_name_not_attached_for_the_age_leaves_the_file_with_its_blocks() {
        let d = dir("expire");
        let p = d.join("j.owners");
        let mut log = OwnerLog::open(&p, T0).unwrap();
        log.record("old", 1, 7, (0, 10), T0).unwrap();
        log.record("busy", 1, 7, (10, 20), T0).unwrap();
        log.record("busy", 1, 7, (20, 30), T0 + 29 * DAY).unwrap();
        // Thirty days on: "old" was last attached 30 days ago, "busy" one.
        let mut log = OwnerLog::open(&p, T0 + 30 * DAY).unwrap();
        assert_eq!(
            log.expire(T0 + 30 * DAY, 30 * DAY),
            0,
            "exactly the age: kept"
        );
        assert_eq!(log.expire(T0 + 30 * DAY + 1, 30 * DAY), 1);
        assert_eq!((log.uid_of("old"), log.owner(7, 5)), (None, None));
        assert_eq!(
            (log.uid_of("busy"), log.owner(7, 15)),
            (Some(1), Some("busy"))
        );
        // Written at the next attach; another uid may take the name then.
        log.record("old", 2, 8, (0, 10), T0 + 31 * DAY).unwrap();
        let log = OwnerLog::open(&p, T0 + 31 * DAY).unwrap();
        assert_eq!((log.uid_of("busy"), log.uid_of("old")), (Some(1), Some(2)));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_file_of_version_2_is_read_its_names_timed_at_the_open() {
        let d = dir("v2");
        let p = d.join("j.owners");
        std::fs::write(
            &p,
            "ergon-gateway owners 2\nuid a 5\nblock a 7 0 100\nend 1\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut log = OwnerLog::open(&p, T0).unwrap();
        assert_eq!(log.expire(T0 + DAY, 30 * DAY), 0);
        assert_eq!((log.owner(7, 5), log.uid_of("a")), (Some("a"), Some(5)));
        assert_eq!(log.expire(T0 + 31 * DAY, 30 * DAY), 1);
        let _ = std::fs::remove_dir_all(&d);
    }
}
