//! Whose client order ids were whose, across gateway lives: the blocks of ids
//! each client name was issued, kept in a file beside the journal
//! (`JOURNAL.owners`), so that a restarted gateway still tells a client's orders
//! from another's (issue 27, item 6). Without it an id of an earlier life had no
//! owner: any client could cancel or query it, and its updates went to all.
//!
//! One line a block, `block NAME EPOCH FROM END`, under a header, written whole
//! to a new file, synced and renamed over the old one at each attach (a rare
//! event). The file is refused like the journal (a symlink, another owner, a
//! second link); a line that does not parse is an error naming the file and the
//! line.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use ergon_gateway::shm::files::{open_file, replace_file};

const HEADER: &str = "ergon-gateway owners 1";
/// The most blocks kept for one name (across lives): one per attach.
pub const KEPT_PER_NAME: usize = 64;
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

/// The owners file and the blocks it holds.
#[derive(Debug)]
pub struct OwnerLog {
    path: PathBuf,
    blocks: Vec<Block>,
}

impl OwnerLog {
    /// Reads the owners file at `path` (none there: no block known). An error for
    /// a file that is refused or not an owners file; it is left as it is.
    pub fn open(path: &Path) -> io::Result<OwnerLog> {
        let blocks = match open_file(path, false) {
            Ok(f) => read(path, f)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        Ok(OwnerLog {
            path: path.to_path_buf(),
            blocks,
        })
    }

    /// Records that `name` was issued the ids `from..end` of boot epoch `epoch`
    /// (keeping its latest [`KEPT_PER_NAME`]), and writes the file.
    pub fn record(&mut self, name: &str, epoch: u64, from: u64, end: u64) -> io::Result<()> {
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
        for b in &self.blocks {
            text += &format!("block {} {} {} {}\n", b.name, b.epoch, b.from, b.end);
        }
        text += &format!("end {}\n", self.blocks.len());
        replace_file(&self.path, &text)
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

/// The blocks of an opened file; an error naming the line for anything else.
fn read(path: &Path, f: std::fs::File) -> io::Result<Vec<Block>> {
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
    match lines.next() {
        Some((_, HEADER)) => {}
        _ => return Err(bad(1, "not an ergon-gateway owners file")),
    }
    let mut blocks = Vec::new();
    for (n, line) in lines {
        let words: Vec<&str> = line.split(' ').collect();
        match words.as_slice() {
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
            ["end", count] if count.parse() == Ok(blocks.len()) => return Ok(blocks),
            _ => return Err(bad(n, "not a block line")),
        }
    }
    Err(bad(0, "cut short (no end line)"))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut log = OwnerLog::open(&p).unwrap();
        assert_eq!(log.owner(7, 5), None);
        log.record("a", 7, 0, 100).unwrap();
        log.record("b", 7, 100, 200).unwrap();
        let mut log = OwnerLog::open(&p).unwrap();
        assert_eq!(log.owner(7, 5), Some("a"));
        assert_eq!(log.owner(7, 150), Some("b"));
        assert_eq!(log.owner(8, 5), None, "another life's");
        assert_eq!(log.owner(7, 200), None);
        for i in 0..KEPT_PER_NAME as u64 {
            log.record("a", 9, 1_000 + i * 10, 1_010 + i * 10).unwrap();
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
        ] {
            let _ = std::fs::remove_file(&p);
            std::fs::write(&p, text).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
            let e = OwnerLog::open(&p).unwrap_err().to_string();
            assert!(e.contains(line), "{text:?}: {e}");
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}
