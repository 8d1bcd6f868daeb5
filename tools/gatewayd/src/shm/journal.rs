//! The gateway's journal of orders in flight: a file (in the gateway's private
//! runtime directory by default, a tmpfs: it survives the process but not the
//! host) mapped shared, where each new
//! order's symbol and client order id is written before it is handed to the
//! budget and the transport, and cleared at its final event. A gateway killed
//! mid-flight leaves its live entries behind; the next one started on the same
//! file queries each of them by client order id before it takes any new submit.
//!
//! Its header also keeps the boot epoch of the gateway's client order ids
//! ([`ergon_gateway::ids`]): each open raises it above the last one
//! ([`ergon_gateway::ids::boot_epoch`]) and syncs it to disk before the gateway issues an
//! id, so a restart on the same journal never repeats an epoch, whatever the clock
//! did in between. It is also asked, before each new order, whether its id is
//! live in it ([`Journal::holds`]).
//!
//! The header names the account the entries belong to: the venue, its base URL
//! and the SHA-256 of the API key (never the secret). A journal that holds live
//! entries of another account is refused at open, naming what differs: querying
//! its ids on this account would settle nothing and clear them. An entry is
//! cleared only by a definite answer ([`Journal::clear`] at a `Reconciled`);
//! a recovery that ends otherwise leaves it for the next start.
//!
//! On a disk-backed file system (not tmpfs or ramfs) each new entry's page is
//! written out (`msync`, `MS_SYNC`) before [`Journal::record`] returns, so before
//! the order can leave: a host that loses power still finds it.
//!
//! Opening never destroys what it cannot use: the file is opened without
//! following a symlink and refused unless a regular file of the gateway's uid,
//! mode 0600, with one link; the old journal is read and checked (a capacity
//! that does not fit the file, more live entries than the new capacity: an
//! error, the file untouched); the new one is written beside it, synced, and
//! renamed over it.
#![allow(unsafe_code)] // A typed view of the mapping.

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use ergon_gateway::ids::boot_epoch;
use ergon_gateway::shm::files::{bad_data, Dir};
use ergon_gateway::shm::os::Mapping;
use ergon_venues::endpoint::ClientOrderId;

/// The journal before it named its account: a 64-byte header, no owner.
const MAGIC_V1: u64 = u64::from_le_bytes(*b"ergonjnl");
const HEAD_V1: usize = 64;
/// This journal: a header of one page (magic, capacity, boot epoch, then the
/// owner at [`OWNER_AT`]), entries from the next page.
const MAGIC: u64 = u64::from_le_bytes(*b"ergonjn2");
const HEAD: usize = 4096;
const ENTRY: usize = 80;
/// The owner's bytes in the header: venue (length, 31 bytes), base URL (length
/// as two bytes, 254 bytes), SHA-256 of the API key (32 bytes).
const OWNER_AT: usize = 64;
const OWNER_LEN: usize = 32 + 256 + 32;
const _: () = assert!(OWNER_AT + OWNER_LEN <= HEAD);

/// The account a journal's entries belong to: their ids are queried there.
#[derive(Clone, PartialEq, Eq)]
pub struct JournalOwner {
    venue: String,
    base: String,
    key_sha256: [u8; 32],
}

impl core::fmt::Debug for JournalOwner {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{self}")
    }
}

impl core::fmt::Display for JournalOwner {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "venue {} at {} with the API key of SHA-256 {}",
            self.venue,
            self.base,
            self.key_prefix()
        )
    }
}

impl JournalOwner {
    /// The owner for `venue` (as `--venue` names it), `base` (the venue's base URL,
    /// a trailing `/` ignored) and `api_key` (hashed here; the secret never enters
    /// the journal). Venue names longer than 31 bytes and URLs longer than 254 are
    /// kept cut to those lengths.
    pub fn new(venue: &str, base: &str, api_key: &str) -> JournalOwner {
        use sha2::{Digest, Sha256};
        let cut = |s: &str, n: usize| {
            let mut s = s.to_string();
            while s.len() > n {
                s.pop();
            }
            s
        };
        JournalOwner {
            venue: cut(venue, 31),
            base: cut(base.trim_end_matches('/'), 254),
            key_sha256: Sha256::digest(api_key.as_bytes()).into(),
        }
    }

    /// The first 8 bytes of the key's hash, in hex: enough to tell two keys apart
    /// in an error, without the hash of a key in full in a log.
    fn key_prefix(&self) -> String {
        let hex: String = self.key_sha256[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("{hex}...")
    }

    fn to_bytes(&self) -> [u8; OWNER_LEN] {
        let mut b = [0u8; OWNER_LEN];
        b[0] = self.venue.len() as u8;
        b[1..1 + self.venue.len()].copy_from_slice(self.venue.as_bytes());
        b[32..34].copy_from_slice(&(self.base.len() as u16).to_le_bytes());
        b[34..34 + self.base.len()].copy_from_slice(self.base.as_bytes());
        b[288..320].copy_from_slice(&self.key_sha256);
        b
    }

    /// None for bytes that are no owner (an error for the caller: not a journal).
    fn from_bytes(b: &[u8; OWNER_LEN]) -> Option<JournalOwner> {
        let vl = usize::from(b[0]);
        let bl = usize::from(u16::from_le_bytes([b[32], b[33]]));
        if vl > 31 || bl > 254 {
            return None;
        }
        let venue = core::str::from_utf8(&b[1..1 + vl]).ok()?.to_string();
        let base = core::str::from_utf8(&b[34..34 + bl]).ok()?.to_string();
        let mut key_sha256 = [0u8; 32];
        key_sha256.copy_from_slice(&b[288..320]);
        Some(JournalOwner {
            venue,
            base,
            key_sha256,
        })
    }

    /// What differs from `other`, in words (None: nothing).
    fn differs(&self, other: &JournalOwner) -> Option<String> {
        let mut d = Vec::new();
        if self.venue != other.venue {
            d.push(format!("venue {} there, {} here", self.venue, other.venue));
        }
        if self.base != other.base {
            d.push(format!("base URL {} there, {} here", self.base, other.base));
        }
        if self.key_sha256 != other.key_sha256 {
            d.push(format!(
                "API key of SHA-256 {} there, {} here",
                self.key_prefix(),
                other.key_prefix()
            ));
        }
        (!d.is_empty()).then(|| d.join("; "))
    }
}

/// What an old journal holds.
struct Old {
    live: Vec<Found>,
    epoch: Option<u64>,
    /// Its account; None for a journal of before owners (format 1).
    owner: Option<JournalOwner>,
}

#[repr(C)]
struct Entry {
    live: AtomicU64,
    /// symbol length, id length, then symbol (32) and id (36) bytes.
    text: [AtomicU64; 9],
}

const _: () = assert!(core::mem::size_of::<Entry>() == ENTRY);

/// One order found in flight in a journal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The order's symbol.
    pub symbol: String,
    /// Its client order id.
    pub id: String,
}

/// The mapped journal. The daemon's [`crate::shm::Hub`] writes it; public so
/// that a caller driving a gateway itself (the simulator's restarts) keeps the
/// same file with the same code.
pub struct Journal {
    map: Mapping,
    cap: usize,
    free: Vec<u32>,
    /// The live entries' ids, counted (sized for every entry: never grows).
    ids: HashMap<ClientOrderId, u32>,
    /// Each entry's id while it is live.
    entry_ids: Vec<Option<ClientOrderId>>,
    epoch: u64,
    /// On a disk-backed file system: each new entry's page is synced before
    /// [`Journal::record`] returns.
    disk: bool,
}

/// Checks the directory `path` is in ([`super::dirs::check_dir`]): no other uid
/// may write it or a parent (it could delete the owners file, or swap the
/// directory).
pub(super) fn check_parent(path: &Path) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    super::dirs::check_dir(dir)
}

/// The bytes of a journal of `cap` entries after a header of `head`; None if
/// that overflows.
fn bytes_for(cap: usize, head: usize) -> Option<usize> {
    cap.checked_mul(ENTRY)?.checked_add(head)
}

/// Whether `fd`'s file lives on a disk-backed file system (not tmpfs or ramfs,
/// whose pages are the file: nothing to write out).
#[allow(unsafe_code)]
fn disk_backed(fd: &OwnedFd) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: fstatfs into a zeroed struct of our own.
    let mut st: libc::statfs = unsafe { core::mem::zeroed() };
    // SAFETY: as above, on a descriptor we own.
    if unsafe { libc::fstatfs(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // ramfs's magic (linux/magic.h), which libc does not name.
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    #[allow(clippy::unnecessary_cast)] // f_type's type differs between libcs
    let (t, tmpfs) = (st.f_type as i64, libc::TMPFS_MAGIC as i64);
    Ok(t != tmpfs && t != RAMFS_MAGIC)
}

fn entries(map: &Mapping, head: usize, cap: usize) -> &[Entry] {
    // SAFETY: the mapping holds head + cap * ENTRY bytes, 8-aligned (head is 64
    // or a page); zero bytes are valid atomics.
    unsafe { core::slice::from_raw_parts(map.ptr().add(head) as *const Entry, cap) }
}

/// Magic, capacity, boot epoch (0: none recorded, a journal of before epochs).
fn head(map: &Mapping) -> &[AtomicU64; 3] {
    // SAFETY: the first 24 bytes of the page-aligned mapping (HEAD is 64).
    unsafe { &*(map.ptr() as *const [AtomicU64; 3]) }
}

fn read_entry(e: &Entry) -> Option<Found> {
    let mut b = [0u8; 72];
    for (i, w) in e.text.iter().enumerate() {
        b[i * 8..i * 8 + 8].copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
    }
    let (sl, il) = (b[0] as usize, b[1] as usize);
    if sl > 32 || il > 36 {
        return None;
    }
    let symbol = core::str::from_utf8(&b[2..2 + sl]).ok()?.to_string();
    let id = core::str::from_utf8(&b[34..34 + il]).ok()?.to_string();
    Some(Found { symbol, id })
}

impl Old {
    /// An error naming the journal and what differs if it holds live entries of
    /// an account other than `owner` (or of one it does not name).
    fn owned_by(&self, path: &Path, owner: &JournalOwner) -> io::Result<()> {
        if self.live.is_empty() {
            return Ok(());
        }
        let n = self.live.len();
        let wrong = match &self.owner {
            None => Some(format!(
                "{n} orders in flight in a journal that names no account (written by an older gateway)"
            )),
            Some(o) => o
                .differs(owner)
                .map(|d| format!("{n} orders in flight of another account ({d})")),
        };
        match wrong {
            None => Ok(()),
            Some(wrong) => Err(bad_data(
                path,
                format_args!(
                    "{wrong}: their ids would be queried on the wrong account; start with the journal's venue, base URL and API key to settle them"
                ),
            )),
        }
    }
}

/// Checks, reading only, that the journal at `path` (if there is one) can be
/// opened for `owner`: the error `Journal::open` would give for a journal that
/// is refused, not a journal, or holds live entries of another account. Called
/// at start, before anything is sent on `owner`'s behalf.
pub fn check(path: &Path, owner: &JournalOwner) -> io::Result<()> {
    check_parent(path)?;
    let (dir, name) = Dir::of(path)?;
    match dir.open_file(&name, false) {
        Ok(f) => Journal::read_old(path, &OwnedFd::from(f))?.owned_by(path, owner),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

impl Journal {
    /// Opens (or creates) the journal at `path` for `cap` entries of `owner`'s
    /// account, returning the orders the previous gateway left in flight (they
    /// are kept as live entries until [`Journal::clear`]). Nothing is changed on
    /// disk unless the old journal was read whole, fits, and its live entries are
    /// `owner`'s (a journal of another venue, base URL or API key with live
    /// entries is an error naming what differs; one with none is taken over): the
    /// new one is written beside it (`PATH.new`), synced and renamed over it,
    /// with `owner` and this boot's epoch (from `wall_ms`, the wall clock's
    /// milliseconds, and the old journal's epoch; [`Journal::epoch`]).
    pub fn open(
        path: &Path,
        cap: usize,
        wall_ms: u64,
        owner: &JournalOwner,
    ) -> io::Result<(Journal, Vec<(u32, Found)>)> {
        check_parent(path)?;
        let len = bytes_for(cap, HEAD)
            .filter(|_| u32::try_from(cap).is_ok())
            .ok_or_else(|| bad_data(path, format_args!("{cap} entries do not fit memory")))?;
        let (dir, name) = Dir::of(path)?;
        let old = match dir.open_file(&name, false) {
            Ok(f) => Self::read_old(path, &OwnedFd::from(f))?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Old {
                live: Vec::new(),
                epoch: None,
                owner: None,
            },
            Err(e) => return Err(e),
        };
        let epoch = boot_epoch(wall_ms, old.epoch).map_err(|e| bad_data(path, e))?;
        old.owned_by(path, owner)?;
        if old.live.len() > cap {
            return Err(bad_data(
                path,
                format_args!(
                    "{} orders in flight, more than the {cap} entries configured",
                    old.live.len()
                ),
            ));
        }
        let f = dir.create_new(&name)?;
        f.set_len(len as u64)?;
        let fd = OwnedFd::from(f);
        let map = Mapping::map(&fd, len)?;
        let disk = disk_backed(&fd)?;
        let mut j = Journal {
            map,
            cap,
            free: (0..cap as u32).rev().collect(),
            ids: HashMap::with_capacity(2 * cap),
            entry_ids: vec![None; cap],
            epoch,
            // Synced whole below.
            disk: false,
        };
        let h = head(&j.map);
        h[1].store(cap as u64, Ordering::Relaxed);
        h[2].store(epoch, Ordering::Relaxed);
        let o = owner.to_bytes();
        // SAFETY: OWNER_AT + OWNER_LEN bytes lie inside the header of this fresh
        // mapping, which nothing else maps yet.
        unsafe { core::ptr::copy_nonoverlapping(o.as_ptr(), j.map.ptr().add(OWNER_AT), OWNER_LEN) };
        h[0].store(MAGIC, Ordering::Release);
        let mut live = Vec::new();
        for f in old.live {
            if let Some(i) = j.record(&f.symbol, &f.id) {
                live.push((i, f));
            }
        }
        // On disk before it replaces the old one (fsync writes the mapping's pages).
        std::fs::File::from(fd.try_clone()?).sync_all()?;
        dir.commit_new(&name)?;
        j.disk = disk;
        Ok((j, live))
    }

    /// What an old journal holds; an error (the file left as it is) for a file
    /// that is not a journal or whose header does not fit its size.
    fn read_old(path: &Path, fd: &OwnedFd) -> io::Result<Old> {
        let size = std::fs::File::from(fd.try_clone()?).metadata()?.len();
        let none = Old {
            live: Vec::new(),
            epoch: None,
            owner: None,
        };
        if size == 0 {
            return Ok(none); // created and never written: nothing in flight
        }
        let size = usize::try_from(size).map_err(|_| bad_data(path, "too large"))?;
        if size < HEAD_V1 {
            return Err(bad_data(path, format_args!("{size} bytes: not a journal")));
        }
        let map = Mapping::map(fd, size)?;
        let h = head(&map);
        let at = match h[0].load(Ordering::Acquire) {
            MAGIC if size >= HEAD => HEAD,
            MAGIC => return Err(bad_data(path, format_args!("{size} bytes: cut short"))),
            MAGIC_V1 => HEAD_V1,
            _ => return Err(bad_data(path, "not a journal (magic)")),
        };
        let cap = usize::try_from(h[1].load(Ordering::Relaxed)).ok();
        let fits = cap.and_then(|c| bytes_for(c, at).map(|b| (c, b)));
        let Some((cap, _)) = fits.filter(|&(_, b)| b <= size) else {
            return Err(bad_data(
                path,
                format_args!(
                    "a capacity of {:?} entries does not fit its {size} bytes",
                    cap
                ),
            ));
        };
        let owner = match at {
            HEAD => {
                let mut b = [0u8; OWNER_LEN];
                // SAFETY: the mapping holds HEAD bytes or more (checked above).
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        map.ptr().add(OWNER_AT),
                        b.as_mut_ptr(),
                        OWNER_LEN,
                    )
                };
                Some(
                    JournalOwner::from_bytes(&b)
                        .ok_or_else(|| bad_data(path, "not a journal (its owner)"))?,
                )
            }
            _ => None,
        };
        let live = entries(&map, at, cap)
            .iter()
            .filter(|e| e.live.load(Ordering::Acquire) != 0)
            .filter_map(read_entry)
            .collect();
        let epoch = Some(h[2].load(Ordering::Relaxed)).filter(|&e| e != 0);
        Ok(Old { live, epoch, owner })
    }

    /// This boot's epoch, on disk since [`Journal::open`] returned.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Whether a live entry holds `id`.
    pub fn holds(&self, id: &ClientOrderId) -> bool {
        self.ids.contains_key(id)
    }

    /// Writes an order about to be sent; its entry, None if the journal is full
    /// (or, on a disk-backed file, its page could not be written out).
    pub fn record(&mut self, symbol: &str, id: &str) -> Option<u32> {
        if symbol.len() > 32 || id.len() > 36 {
            return None;
        }
        let i = self.free.pop()?;
        let e = &entries(&self.map, HEAD, self.cap)[i as usize];
        let mut b = [0u8; 72];
        b[0] = symbol.len() as u8;
        b[1] = id.len() as u8;
        b[2..2 + symbol.len()].copy_from_slice(symbol.as_bytes());
        b[34..34 + id.len()].copy_from_slice(id.as_bytes());
        for (k, w) in e.text.iter().enumerate() {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[k * 8..k * 8 + 8]);
            w.store(u64::from_le_bytes(a), Ordering::Relaxed);
        }
        e.live.store(1, Ordering::Release);
        if self.disk && !self.sync_entry(i) {
            e.live.store(0, Ordering::Release);
            self.free.push(i);
            return None;
        }
        // An id a dead gateway wrote that is no client order id is never asked for.
        if let Ok(id) = ClientOrderId::new(id) {
            *self.ids.entry(id).or_insert(0) += 1;
            self.entry_ids[i as usize] = Some(id);
        }
        Some(i)
    }

    /// Writes entry `i`'s pages out (`msync`, `MS_SYNC`); whether it could.
    #[allow(unsafe_code)]
    fn sync_entry(&self, i: u32) -> bool {
        // SAFETY: sysconf has no memory effects.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .unwrap_or(4096)
            .max(1);
        let at = HEAD + i as usize * ENTRY;
        let first = at / page * page;
        let len = at + ENTRY - first;
        // SAFETY: a page-aligned range inside our own mapping (the mapping starts
        // on a page; the entry ends inside it).
        unsafe { libc::msync(self.map.ptr().add(first).cast(), len, libc::MS_SYNC) == 0 }
    }

    /// The order of entry `i` has a definite answer: its entry is freed.
    pub fn clear(&mut self, i: u32) {
        if let Some(e) = entries(&self.map, HEAD, self.cap).get(i as usize) {
            if e.live.swap(0, Ordering::Release) != 0 {
                self.free.push(i);
                if let Some(id) = self.entry_ids[i as usize].take() {
                    if let Some(n) = self.ids.get_mut(&id) {
                        *n -= 1;
                        if *n == 0 {
                            self.ids.remove(&id);
                        }
                    }
                }
            }
        }
    }

    /// Entries live now.
    pub fn live(&self) -> usize {
        self.cap - self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> JournalOwner {
        JournalOwner::new("binance-spot", "http://127.0.0.1:9000/", "key-a")
    }

    #[test]
    fn what_a_dead_gateway_left_in_flight_is_found_by_the_next() {
        let path = std::env::temp_dir().join(format!("ergon-journal-{}", std::process::id()));
        let (mut j, old) = Journal::open(&path, 4, 1, &me()).unwrap();
        assert!(old.is_empty());
        let a = j.record("BTCUSDT", "id-a").unwrap();
        let _b = j.record("BTCUSDT", "id-b").unwrap();
        j.clear(a);
        assert_eq!(j.live(), 1);
        drop(j); // the process dies: the file stays
        let (j2, old) = Journal::open(&path, 8, 1, &me()).unwrap();
        assert_eq!(old.len(), 1);
        assert_eq!(
            old[0].1,
            Found {
                symbol: "BTCUSDT".into(),
                id: "id-b".into()
            }
        );
        assert_eq!(j2.live(), 1, "kept live until its query settles");
        drop(j2);
        // Garbage in the file is an error that leaves it as it is (never a panic,
        // never a silent fresh start over it).
        std::fs::write(&path, [0xffu8; 300]).unwrap();
        let e = Journal::open(&path, 2, 1, &me())
            .err()
            .expect("garbage accepted");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), [0xffu8; 300]);
        let _ = std::fs::remove_file(&path);
    }

    fn scratch(test: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("ergon-jnl-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// The boot epoch goes up at every open on the same file, the clock stepping
    /// back included, and is on disk when `open` returns; a live id is held until
    /// its entry is cleared.
    #[test]
    fn each_open_raises_the_boot_epoch_and_a_live_id_is_held() {
        let d = scratch("epoch");
        let path = d.join("journal");
        let (mut j, _) = Journal::open(&path, 4, 5_000, &me()).unwrap();
        assert_eq!(j.epoch(), 5_000);
        let id = ClientOrderId::new("id-a").unwrap();
        let e = j.record("BTCUSDT", id.as_str()).unwrap();
        let twin = j.record("BTCUSDT", id.as_str()).unwrap();
        assert!(j.holds(&id));
        j.clear(e);
        assert!(j.holds(&id), "one of two entries still holds it");
        j.clear(twin);
        assert!(!j.holds(&id));
        drop(j); // killed
                 // The clock stepped back 4 s: still above the last boot.
        let (j, _) = Journal::open(&path, 4, 1_000, &me()).unwrap();
        assert_eq!(j.epoch(), 5_001);
        drop(j);
        let (j, _) = Journal::open(&path, 4, 9_000, &me()).unwrap();
        assert_eq!(j.epoch(), 9_000);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_journal_too_big_for_the_new_capacity_is_kept_whole() {
        let d = scratch("smaller");
        let path = d.join("journal");
        let (mut j, _) = Journal::open(&path, 8, 1, &me()).unwrap();
        for id in ["a", "b", "c"] {
            j.record("BTCUSDT", id).unwrap();
        }
        drop(j); // killed with three in flight
        let before = std::fs::read(&path).unwrap();
        // Restarted with room for two: refused, and the file not touched.
        let e = Journal::open(&path, 2, 1, &me()).err().expect("opened");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), before);
        let (_, old) = Journal::open(&path, 8, 1, &me()).unwrap();
        assert_eq!(old.len(), 3, "the three orders are still there to query");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_capacity_that_overflows_is_an_error() {
        let d = scratch("overflow");
        let path = d.join("journal");
        // 2^60 entries of 80 bytes: 5 * 2^64, which wraps to 0 unchecked.
        let mut b = vec![0u8; 4096];
        b[..8].copy_from_slice(&MAGIC.to_le_bytes());
        b[8..16].copy_from_slice(&(1u64 << 60).to_le_bytes());
        std::fs::write(&path, &b).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let e = Journal::open(&path, 4, 1, &me()).err().expect("opened");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), b);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_new_journal_is_0600_and_a_symlink_or_a_second_link_is_refused() {
        use std::os::unix::fs::MetadataExt;
        let d = scratch("perm");
        let path = d.join("journal");
        drop(Journal::open(&path, 2, 1, &me()).unwrap());
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        std::fs::hard_link(&path, d.join("second")).unwrap();
        let e = Journal::open(&path, 2, 1, &me()).err().expect("opened");
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        std::fs::remove_file(d.join("second")).unwrap();
        let victim = d.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let link = d.join("planted");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let e = Journal::open(&link, 2, 1, &me())
            .err()
            .expect("followed a symlink");
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Issue 27 item 11: the live entries of a journal are queried only on the
    /// account that wrote them. Another API key, venue or base URL is refused,
    /// naming the journal and what differs, the file untouched; a journal with
    /// nothing live is taken over by the new account.
    #[test]
    fn a_journal_of_another_account_is_refused_while_it_holds_live_orders() {
        let d = scratch("owner");
        let path = d.join("journal");
        let (mut j, _) = Journal::open(&path, 4, 1, &me()).unwrap();
        let a = j.record("BTCUSDT", "id-a").unwrap();
        drop(j); // killed with one in flight
        let before = std::fs::read(&path).unwrap();
        let key_b = JournalOwner::new("binance-spot", "http://127.0.0.1:9000", "key-b");
        let early = check(&path, &key_b).expect_err("key B checked in");
        assert_eq!(early.kind(), io::ErrorKind::InvalidData, "{early}");
        assert!(check(&path, &me()).is_ok());
        let e = Journal::open(&path, 4, 2, &key_b)
            .err()
            .expect("key B opened key A's");
        assert_eq!(e.to_string(), early.to_string());
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        let text = e.to_string();
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains("API key of SHA-256"), "{text}");
        assert!(!text.contains("key-a") && !text.contains("key-b"), "{text}");
        let venue_b = JournalOwner::new("bybit", "http://127.0.0.1:9001", "key-a");
        let e = Journal::open(&path, 4, 2, &venue_b)
            .err()
            .expect("venue B opened");
        let text = e.to_string();
        assert!(
            text.contains("venue binance-spot there, bybit here"),
            "{text}"
        );
        assert!(
            text.contains("base URL http://127.0.0.1:9000 there"),
            "{text}"
        );
        assert!(!text.contains("SHA-256"), "the key is the same: {text}");
        assert_eq!(std::fs::read(&path).unwrap(), before, "left as it is");
        // The same account (a trailing slash aside) settles it; then key B may
        // take the journal over, its epoch kept.
        let (mut j, old) = Journal::open(&path, 4, 2, &me()).unwrap();
        assert_eq!(old.len(), 1);
        assert_eq!(old[0].0, a);
        j.clear(old[0].0);
        let epoch = j.epoch();
        drop(j);
        let (j, old) = Journal::open(&path, 4, 2, &key_b).unwrap();
        assert!(old.is_empty());
        assert!(j.epoch() > epoch);
        drop(j);
        let e = Journal::open(&path, 4, 3, &me());
        assert!(e.is_ok(), "nothing live: taken over again");
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A journal of the format before owners (64-byte header) still gives its
    /// boot epoch; with live entries it is refused (whose account they are is
    /// not known), with none it is taken over.
    #[test]
    fn a_journal_without_an_owner_is_refused_only_while_it_holds_live_orders() {
        let d = scratch("v1");
        let path = d.join("journal");
        let mut b = vec![0u8; HEAD_V1 + 2 * ENTRY];
        b[..8].copy_from_slice(&MAGIC_V1.to_le_bytes());
        b[8..16].copy_from_slice(&2u64.to_le_bytes());
        b[16..24].copy_from_slice(&7_000u64.to_le_bytes());
        let write = |b: &[u8]| {
            std::fs::write(&path, b).unwrap();
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                .unwrap();
        };
        let mut live = b.clone();
        let e = HEAD_V1;
        live[e..e + 8].copy_from_slice(&1u64.to_le_bytes());
        live[e + 8] = 7;
        live[e + 9] = 4;
        live[e + 10..e + 17].copy_from_slice(b"BTCUSDT");
        live[e + 42..e + 46].copy_from_slice(b"id-a");
        write(&live);
        let err = Journal::open(&path, 2, 1, &me()).err().expect("opened");
        assert!(err.to_string().contains("names no account"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), live);
        write(&b);
        let (j, old) = Journal::open(&path, 2, 1, &me()).unwrap();
        assert!(old.is_empty());
        assert_eq!(j.epoch(), 7_001, "the old epoch is kept");
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A journal cut inside its header is an error, never a panic.
    #[test]
    fn a_journal_cut_short_is_an_error() {
        let d = scratch("cut");
        let path = d.join("journal");
        let (mut j, _) = Journal::open(&path, 4, 1, &me()).unwrap();
        j.record("BTCUSDT", "id-a").unwrap();
        drop(j);
        let whole = std::fs::read(&path).unwrap();
        for len in [100, HEAD - 1, HEAD + 10] {
            std::fs::write(&path, &whole[..len]).unwrap();
            let e = Journal::open(&path, 4, 1, &me()).err().expect("opened");
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{len}: {e}");
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    /// On a disk-backed file system each new entry is written out (msync of the
    /// pages it spans, entries across a page edge included) before `record`
    /// returns; on tmpfs there is nothing to write out.
    #[test]
    fn entries_of_a_disk_backed_journal_are_synced_page_by_page() {
        let d = scratch("disk");
        let path = d.join("journal");
        let (mut j, _) = Journal::open(&path, 128, 1, &me()).unwrap();
        let disk = disk_backed(&OwnedFd::from(std::fs::File::open(&d).unwrap())).unwrap();
        assert_eq!(j.disk, disk, "disk-backed as its directory");
        // Entry 51 spans the edge of the second page (4096 + 51 * 80 = 8176..8256).
        for k in 0..60 {
            assert!(
                j.record("BTCUSDT", &format!("id-{k}")).is_some(),
                "entry {k}"
            );
        }
        drop(j);
        let (_, old) = Journal::open(&path, 128, 1, &me()).unwrap();
        assert_eq!(old.len(), 60);
        let _ = std::fs::remove_dir_all(&d);
        if std::path::Path::new("/dev/shm").is_dir() {
            let path = std::path::PathBuf::from(format!(
                "/dev/shm/ergon-jnl-tmpfs-{}",
                std::process::id()
            ));
            let _ = std::fs::remove_file(&path);
            let (j, _) = Journal::open(&path, 2, 1, &me()).unwrap();
            assert!(!j.disk, "tmpfs: nothing to write out");
            drop(j);
            let _ = std::fs::remove_file(&path);
        }
    }
}
