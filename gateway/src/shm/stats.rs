//! The stats region: a snapshot of the gateway's buckets and clients, as text,
//! behind a seqlock in a memfd that `ergon-gateway --stats` maps read-only and
//! reads whole, never torn, without a call into the gateway's loop.
#![allow(unsafe_code)] // A typed view of the mapping.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

use super::os::{memfd, seal, Mapping};

/// Bytes of text a snapshot may hold (longer is cut).
pub const STATS_BYTES: usize = 60 * 1024;
const WORDS: usize = STATS_BYTES / 8;
const LEN: usize = 8 + 8 + STATS_BYTES;

/// seq (odd while writing), length, then the text as words.
#[repr(C)]
struct Block {
    seq: AtomicU64,
    len: AtomicU64,
    words: [AtomicU64; WORDS],
}

fn block(m: &Mapping) -> &Block {
    // SAFETY: the mapping holds LEN >= size_of::<Block>() bytes, page aligned
    // (its size sealed: it cannot shrink under us); any bytes are valid
    // AtomicU64s. A reader's mapping is PROT_READ and the reader only loads
    // (plain 8-byte loads, which never write); the gateway's writes race with
    // nothing but the seqlock's readers, which check the sequence.
    unsafe { &*(m.ptr() as *const Block) }
}

/// The gateway's side.
pub struct StatsWriter {
    fd: OwnedFd,
    map: Mapping,
}

impl StatsWriter {
    /// A sealed memfd for the stats of the gateway `name`, mapped.
    pub fn create(name: &str) -> io::Result<StatsWriter> {
        let fd = memfd(&format!("ergon-gateway-stats-{name}"), LEN)?;
        let map = Mapping::map(&fd, LEN)?;
        // Handed to any allowed reader: after our own mapping, nobody can write
        // it (no write(2), no new writable mapping, even by a reopen through
        // /proc) nor change its size.
        seal(&fd, libc::F_SEAL_FUTURE_WRITE | libc::F_SEAL_SEAL)?;
        Ok(StatsWriter { fd, map })
    }

    /// Its descriptor, handed to each allowed reader (`--stats`).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Publishes `text` (cut at [`STATS_BYTES`]).
    pub fn write(&self, text: &[u8]) {
        let b = block(&self.map);
        let text = &text[..text.len().min(STATS_BYTES)];
        let s = b.seq.load(Ordering::Relaxed);
        b.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Release);
        b.len.store(text.len() as u64, Ordering::Relaxed);
        for (w, chunk) in b.words.iter().zip(text.chunks(8)) {
            let mut a = [0u8; 8];
            a[..chunk.len()].copy_from_slice(chunk);
            w.store(u64::from_le_bytes(a), Ordering::Relaxed);
        }
        b.seq.store(s.wrapping_add(2), Ordering::Release);
    }
}

/// How long a reader retries a snapshot being written: a write takes
/// microseconds, so a sequence odd for longer was left by a gateway that died
/// (or froze) mid-write.
const READ_FOR: std::time::Duration = std::time::Duration::from_secs(1);

/// Reads one whole snapshot from a stats region (retrying while the gateway
/// writes, for a second at most); None if no snapshot was ever written.
pub fn read(fd: &OwnedFd) -> io::Result<Option<String>> {
    let map = Mapping::map_read_only(fd, LEN)?;
    let b = block(&map);
    let mut out = vec![0u8; STATS_BYTES];
    let until = std::time::Instant::now() + READ_FOR;
    loop {
        let s1 = b.seq.load(Ordering::Acquire);
        if s1 == 0 {
            return Ok(None);
        }
        if std::time::Instant::now() > until {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "stats: no whole snapshot within 1 s (a gateway stopped mid-write?)",
            ));
        }
        if s1 % 2 == 1 {
            std::thread::yield_now();
            continue;
        }
        let len = (b.len.load(Ordering::Relaxed) as usize).min(STATS_BYTES);
        for (i, w) in b.words.iter().take(len.div_ceil(8)).enumerate() {
            let v = w.load(Ordering::Relaxed).to_le_bytes();
            let end = (i * 8 + 8).min(len);
            out[i * 8..end].copy_from_slice(&v[..end - i * 8]);
        }
        std::sync::atomic::fence(Ordering::Acquire);
        if b.seq.load(Ordering::Relaxed) == s1 {
            return Ok(Some(String::from_utf8_lossy(&out[..len]).into_owned()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_reads_back_whole() {
        let w = StatsWriter::create("t").unwrap();
        let dup = w.fd.try_clone().unwrap();
        assert_eq!(read(&dup).unwrap(), None);
        w.write(b"bucket weight used=3\n");
        assert_eq!(
            read(&dup).unwrap().as_deref(),
            Some("bucket weight used=3\n")
        );
        w.write(b"x");
        assert_eq!(read(&dup).unwrap().as_deref(), Some("x"));
    }

    #[test]
    fn a_sequence_left_odd_by_a_crash_is_an_error_not_a_spin() {
        let w = StatsWriter::create("odd").unwrap();
        w.write(b"before");
        // A gateway that died mid-write: the sequence stays odd.
        block(&w.map).seq.fetch_add(1, Ordering::Relaxed);
        let dup = w.fd.try_clone().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(read(&dup).map_err(|e| e.kind()));
        });
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the reader still spins after 10 s");
        assert_eq!(got, Err(io::ErrorKind::TimedOut));
    }

    #[test]
    fn the_region_a_reader_gets_cannot_be_written_or_resized() {
        let w = StatsWriter::create("sealed").unwrap();
        let mut f = std::fs::File::from(w.fd.try_clone().unwrap());
        use std::io::Write;
        assert!(f.write_all(b"x").is_err(), "write(2) into the stats");
        assert!(f.set_len(0).is_err(), "shrunk");
        assert!(f.set_len(2 * LEN as u64).is_err(), "grown");
        assert!(Mapping::map(&w.fd, LEN).is_err(), "mapped writable");
        w.write(b"still mine");
        assert_eq!(read(&w.fd).unwrap().as_deref(), Some("still mine"));
    }
}
