//! The gateway's recent charges, kept across a restart: a file (`JOURNAL.charges`,
//! beside the journal, so that the two go together) mapped shared, where every
//! charge the gateway's budget admits is added to its bucket's slot of wall-clock
//! time before the request leaves. A gateway killed after using most of a window
//! leaves them behind; the next one books them into its new budget in their
//! windows ([`crate::Start::recent`]), so a crash loop never sends a fresh
//! window's worth at each start.
//!
//! Each counted bucket (sliding, fixed, token) keeps [`SLOTS`] slots of a 20th of
//! its window (a token bucket's: the time its burst takes to drain), keyed by the
//! slot's number on the wall clock, so that a slot of another time is never read
//! as this one's. A charge is a division and two stores into the mapping per
//! part: no syscall, no allocation. A charge refunded later (the request never
//! left) stays counted: conservative.
//!
//! The wall clock maps slots to the loop's clock at each start; a charge is
//! replayed at its slot's end (never earlier than it was made), so it counts at
//! most one slot longer than the venue counts it.
//!
//! After the buckets' records, each bucket's limit and the units the bootstrap's
//! own reads count on it (their documented weights, [`crate::Account::boot_reads`],
//! written by [`ChargeLog::boot_reads`]), flagged in the header: a restarted
//! gateway holds its bootstrap until the dead one's charges leave room for its
//! reads in those limits ([`crate::boot_room`]), before it has read the venue's
//! limits again. A file without them (an older gateway's) holds nothing.
//!
//! The file is opened like the journal (no symlink, this uid, 0600, one link), read
//! whole and checked (a file cut short or not in its form is an error naming it,
//! never a start without it), and replaced: written beside it, synced, renamed over
//! it, carrying the slots of the buckets this budget still has.
#![allow(unsafe_code)] // A typed view of the mapping.

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use ergon_core::{Budget, Kind, Part};

use super::files::{bad_data, Dir};
use super::os::Mapping;

const MAGIC: u64 = u64::from_le_bytes(*b"ergonchg");
/// In the header's fourth word: the limits section follows the records.
const LIMITS: u64 = u64::from_le_bytes(*b"ergonlim");
const HEAD: usize = 64;
/// Slots per bucket: a window's 20 and the one being filled.
pub const SLOTS: usize = 21;
/// A bucket's record: name (length and 31 bytes), window, slot width, slots.
const REC: usize = 32 + 16 + SLOTS * 16;
/// A bucket's limits record, after every bucket's record: limit, boot units,
/// the end of the venue's last hold of it (wall-clock ns; 0: none).
const LIM: usize = 24;
/// More buckets than a budget has.
const MAX_BUCKETS: usize = 256;

#[repr(C)]
struct Slot {
    /// The slot's number on the wall clock (`wall_ns / slot_ns`).
    key: AtomicI64,
    units: AtomicU64,
}

/// One charge a previous gateway made, on this process's clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Charged {
    /// The bucket's name in the budget.
    pub bucket: String,
    /// When it counts from ([`ergon_io::clock::now_ns`]'s clock; before this
    /// process started, so usually negative).
    pub at_ns: i64,
    /// Units charged.
    pub units: u64,
}

/// A counted bucket's limit as a previous gateway's budget declared it, and what
/// that gateway's bootstrap reads count on it by the venue's documentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptLimit {
    /// The bucket's name in the budget.
    pub bucket: String,
    /// Its window (a token bucket's: the time its burst takes to drain).
    pub window_ns: i64,
    /// Units per window (a token bucket's burst).
    pub limit: u64,
    /// Units the bootstrap's reads count on it (0: none).
    pub boot: u64,
    /// The end of the venue's last hold of it (a 429's wait), on this
    /// process's clock, if it has not ended: nothing it counts is sent before.
    pub held_until_ns: Option<i64>,
}

/// One bucket of an old file.
#[derive(Clone, Debug)]
struct OldBucket {
    name: String,
    window_ns: i64,
    slot_ns: i64,
    /// (wall slot number, units), units above zero.
    slots: Vec<(i64, u64)>,
}

/// What a previous gateway's file holds.
#[derive(Clone, Debug, Default)]
pub struct Recent {
    /// None: there was no file.
    buckets: Option<Vec<OldBucket>>,
    /// The charges still inside their windows, on this process's clock.
    charged: Vec<Charged>,
    /// Each counted bucket's limit and bootstrap units (none in an older file).
    limits: Vec<KeptLimit>,
}

impl Recent {
    /// Whether a file was there (a previous gateway kept its charges).
    pub fn found(&self) -> bool {
        self.buckets.is_some()
    }

    /// The charges still inside their windows, oldest first.
    pub fn charged(&self) -> &[Charged] {
        &self.charged
    }

    /// The limits of the previous gateway's counted buckets and what its
    /// bootstrap's reads count on them ([`crate::Start::kept_limits`]); empty if
    /// the file did not record them.
    pub fn limits(&self) -> &[KeptLimit] {
        &self.limits
    }
}

fn head(map: &Mapping) -> &[AtomicU64; 4] {
    // SAFETY: the first 32 bytes of the page-aligned mapping (HEAD is 64).
    unsafe { &*(map.ptr() as *const [AtomicU64; 4]) }
}

fn slots(map: &Mapping, i: usize) -> &[Slot] {
    // SAFETY: the mapping holds HEAD + n * REC bytes and i < n (callers); each
    // record's slots start 48 bytes in, 8-aligned; zero bytes are valid atomics.
    unsafe { core::slice::from_raw_parts(map.ptr().add(HEAD + i * REC + 48) as *const Slot, SLOTS) }
}

fn words(map: &Mapping, i: usize) -> &[AtomicU64; 6] {
    // SAFETY: as for `slots`: the record's first 48 bytes.
    unsafe { &*(map.ptr().add(HEAD + i * REC) as *const [AtomicU64; 6]) }
}

/// Bucket `i`'s limit, boot units and hold's end, of a file of `n` buckets.
fn limit_words(map: &Mapping, n: usize, i: usize) -> &[AtomicU64; 3] {
    // SAFETY: callers checked the mapping holds HEAD + n * (REC + LIM) bytes and
    // i < n; the section starts 8-aligned (REC and HEAD are multiples of 8).
    unsafe { &*(map.ptr().add(HEAD + n * REC + i * LIM) as *const [AtomicU64; 3]) }
}

/// A bucket's limit as the file keeps it: units per window, a token bucket's burst.
fn limit_of(kind: Kind) -> u64 {
    match kind {
        Kind::Sliding { limit, .. } | Kind::Fixed { limit, .. } => limit,
        Kind::Token { burst, .. } => burst,
        _ => 0,
    }
}

/// A bucket's window as the file keeps it (None: nothing counted over time).
fn window_of(kind: Kind) -> Option<i64> {
    match kind {
        Kind::Sliding { window_ns, .. } | Kind::Fixed { window_ns, .. } => Some(window_ns),
        Kind::Token { interval_ns, burst } => {
            Some(interval_ns.saturating_mul(i64::try_from(burst).unwrap_or(i64::MAX)))
        }
        _ => None,
    }
    .filter(|&w| w >= 20)
}

/// The mapped file of this gateway's charges.
pub struct ChargeLog {
    map: Mapping,
    /// Each budget bucket's slot width, by bucket index (0: not kept).
    slot_ns: Vec<i64>,
    /// The wall clock's ns minus the loop's clock at open.
    wall_minus_now: i64,
}

impl core::fmt::Debug for ChargeLog {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ChargeLog")
            .field("buckets", &self.slot_ns.len())
            .finish()
    }
}

impl ChargeLog {
    /// Reads the charges a previous gateway left at `path` that are still inside
    /// their windows at `now_ns` (the loop's clock), `wall_ns` (the wall clock's
    /// ns since the Unix epoch, read at the same instant). No file: nothing, and
    /// [`Recent::found`] false. An error (the file left as it is) for a file that
    /// is refused or not in its form.
    pub fn read(path: &Path, now_ns: i64, wall_ns: i64) -> io::Result<Recent> {
        let (dir, name) = Dir::of(path)?;
        let f = match dir.open_file(&name, false) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Recent::default()),
            Err(e) => return Err(e),
        };
        let fd = OwnedFd::from(f);
        let size = std::fs::File::from(fd.try_clone()?).metadata()?.len();
        let size = usize::try_from(size).map_err(|_| bad_data(path, "too large"))?;
        if size < HEAD {
            return Err(bad_data(path, format_args!("{size} bytes: cut short")));
        }
        let map = Mapping::map(&fd, size)?;
        let h = head(&map);
        if h[0].load(Ordering::Acquire) != MAGIC {
            return Err(bad_data(path, "not a charges file (magic)"));
        }
        let (s, n) = (h[1].load(Ordering::Relaxed), h[2].load(Ordering::Relaxed));
        if s != SLOTS as u64 {
            return Err(bad_data(path, format_args!("{s} slots, not {SLOTS}")));
        }
        let n = usize::try_from(n)
            .ok()
            .filter(|&n| n <= MAX_BUCKETS && HEAD + n * REC <= size)
            .ok_or_else(|| {
                bad_data(
                    path,
                    format_args!("{n} buckets do not fit its {size} bytes"),
                )
            })?;
        let mut buckets = Vec::with_capacity(n);
        let mut charged = Vec::new();
        let mut limits = Vec::new();
        let with_limits = h[3].load(Ordering::Relaxed) == LIMITS && HEAD + n * (REC + LIM) <= size;
        for i in 0..n {
            let w = words(&map, i);
            let mut name = [0u8; 32];
            for (k, word) in w[..4].iter().enumerate() {
                name[k * 8..k * 8 + 8].copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
            }
            let len = usize::from(name[0]);
            let name = (len <= 31)
                .then(|| core::str::from_utf8(&name[1..1 + len]).ok())
                .flatten()
                .ok_or_else(|| bad_data(path, format_args!("bucket {i}: not a name")))?
                .to_string();
            let window_ns = w[4].load(Ordering::Relaxed) as i64;
            let slot_ns = w[5].load(Ordering::Relaxed) as i64;
            if (len, window_ns, slot_ns) == (0, 0, 0) {
                continue; // a bucket that counts nothing over time (a gate)
            }
            if window_ns < 20 || slot_ns != window_ns / 20 {
                return Err(bad_data(
                    path,
                    format_args!("bucket {name}: a window of {window_ns} ns in slots of {slot_ns}"),
                ));
            }
            if with_limits {
                let l = limit_words(&map, n, i);
                let (limit, boot) = (l[0].load(Ordering::Relaxed), l[1].load(Ordering::Relaxed));
                let held = l[2].load(Ordering::Relaxed) as i64;
                let held_until_ns =
                    (held > wall_ns).then(|| now_ns.saturating_add(held.saturating_sub(wall_ns)));
                if limit > 0 {
                    limits.push(KeptLimit {
                        bucket: name.clone(),
                        window_ns,
                        limit,
                        boot,
                        held_until_ns,
                    });
                }
            }
            let mut kept = Vec::new();
            for slot in slots(&map, i) {
                let (k, units) = (
                    slot.key.load(Ordering::Relaxed),
                    slot.units.load(Ordering::Relaxed),
                );
                if units == 0 {
                    continue;
                }
                // The slot's end, on the wall clock and on ours (never after now).
                let end = k.saturating_add(1).saturating_mul(slot_ns);
                if end.saturating_add(window_ns) <= wall_ns {
                    continue; // out of its window everywhere
                }
                kept.push((k, units));
                let at_ns = now_ns.saturating_sub(wall_ns.saturating_sub(end).max(0));
                charged.push(Charged {
                    bucket: name.clone(),
                    at_ns,
                    units,
                });
            }
            buckets.push(OldBucket {
                name,
                window_ns,
                slot_ns,
                slots: kept,
            });
        }
        charged.sort_by_key(|c| c.at_ns);
        Ok(Recent {
            buckets: Some(buckets),
            charged,
            limits,
        })
    }

    /// Writes a new file at `path` for `budget`'s counted buckets, carrying the
    /// slots `old` kept of each bucket of the same name and window, and maps it:
    /// from here [`ChargeLog::add`] keeps each charge. `now_ns` and `wall_ns` as
    /// for [`ChargeLog::read`].
    pub fn create(
        path: &Path,
        budget: &Budget,
        old: &Recent,
        now_ns: i64,
        wall_ns: i64,
    ) -> io::Result<ChargeLog> {
        let ids: Vec<_> = budget.ids().collect();
        let n = ids.len();
        let len = HEAD + n * (REC + LIM);
        let (dir, name) = Dir::of(path)?;
        let f = dir.create_new(&name)?;
        f.set_len(len as u64)?;
        let fd = OwnedFd::from(f);
        let map = Mapping::map(&fd, len)?;
        let mut slot_ns = vec![0; ids.len()];
        // A budget's ids are its bucket indices, 0..n: record i is bucket i's.
        for &id in &ids {
            let i = id.index();
            if i >= ids.len() {
                continue;
            }
            let name = budget.name(id).unwrap_or("");
            let Some(window_ns) = budget.spec(id).ok().and_then(|s| window_of(s.kind())) else {
                continue;
            };
            let w = window_ns / 20;
            slot_ns[i] = w;
            let limit = budget.spec(id).map_or(0, |s| limit_of(s.kind()));
            limit_words(&map, n, i)[0].store(limit, Ordering::Relaxed);
            let mut b = [0u8; 32];
            let n = name.len().min(31);
            b[0] = n as u8;
            b[1..1 + n].copy_from_slice(&name.as_bytes()[..n]);
            let words = words(&map, i);
            for (k, word) in words[..4].iter().enumerate() {
                let mut a = [0u8; 8];
                a.copy_from_slice(&b[k * 8..k * 8 + 8]);
                word.store(u64::from_le_bytes(a), Ordering::Relaxed);
            }
            words[4].store(window_ns as u64, Ordering::Relaxed);
            words[5].store(w as u64, Ordering::Relaxed);
            let carried = old.buckets.iter().flatten().find(|o| {
                o.name.as_bytes() == &b[1..1 + n] && o.window_ns == window_ns && o.slot_ns == w
            });
            for &(k, units) in carried.map_or(&[][..], |o| &o.slots[..]) {
                let s = &slots(&map, i)[k.rem_euclid(SLOTS as i64) as usize];
                s.key.store(k, Ordering::Relaxed);
                s.units.store(units, Ordering::Relaxed);
            }
        }
        let h = head(&map);
        h[1].store(SLOTS as u64, Ordering::Relaxed);
        h[2].store(n as u64, Ordering::Relaxed);
        h[3].store(LIMITS, Ordering::Relaxed);
        h[0].store(MAGIC, Ordering::Release);
        std::fs::File::from(fd.try_clone()?).sync_all()?;
        dir.commit_new(&name)?;
        Ok(ChargeLog {
            map,
            slot_ns,
            wall_minus_now: wall_ns.saturating_sub(now_ns),
        })
    }

    /// Records what the bootstrap's reads count (`parts`: their documented
    /// weights, [`crate::Account::boot_reads`]) on each kept bucket, for the next
    /// start to wait room for ([`crate::boot_room`]). Replaces what was recorded.
    pub fn boot_reads(&self, parts: &[Part]) {
        let n = self.slot_ns.len();
        for i in 0..n {
            let units: u64 = parts
                .iter()
                .filter(|p| p.bucket.index() == i)
                .map(|p| u64::from(p.cost))
                .sum();
            limit_words(&self.map, n, i)[1].store(units, Ordering::Relaxed);
        }
    }

    /// Keeps the end of the venue's hold of `bucket` (`until_ns`, the loop's
    /// clock: a 429's wait as the budget took it), the latest of those kept:
    /// a restart sends nothing it counts before ([`crate::boot_room`]). Two
    /// stores into the mapping; buckets not kept are skipped.
    pub fn hold(&self, bucket: ergon_core::BucketId, until_ns: i64) {
        let (n, i) = (self.slot_ns.len(), bucket.index());
        if !matches!(self.slot_ns.get(i), Some(&w) if w > 0) {
            return;
        }
        let wall = until_ns.saturating_add(self.wall_minus_now).max(0) as u64;
        let w = &limit_words(&self.map, n, i)[2];
        if w.load(Ordering::Relaxed) < wall {
            w.store(wall, Ordering::Relaxed);
        }
    }

    /// Adds an admitted charge of `parts` at `now_ns` (the loop's clock): per part,
    /// a division and stores into the mapping. Parts of buckets not kept (gates,
    /// in-flight limits, another budget's) are skipped.
    #[inline]
    pub fn add(&self, parts: &[Part], now_ns: i64) {
        let wall = now_ns.saturating_add(self.wall_minus_now);
        for p in parts {
            let i = p.bucket.index();
            let Some(&w) = self.slot_ns.get(i) else {
                continue;
            };
            if w <= 0 || p.cost == 0 {
                continue;
            }
            let k = wall.div_euclid(w);
            let s = &slots(&self.map, i)[k.rem_euclid(SLOTS as i64) as usize];
            // The key first: killed between the two stores, the slot keeps the
            // old count under the new key (more, never less).
            if s.key.load(Ordering::Relaxed) != k {
                s.key.store(k, Ordering::Relaxed);
                s.units.store(u64::from(p.cost), Ordering::Relaxed);
            } else {
                let u = s.units.load(Ordering::Relaxed);
                s.units
                    .store(u.saturating_add(u64::from(p.cost)), Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ergon_core::{Class, Spec};

    const SEC: i64 = 1_000_000_000;
    const MS: i64 = 1_000_000;

    fn scratch(test: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("ergon-chg-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn budget(now: i64) -> (Budget, ergon_core::BucketId) {
        let mut b = Budget::builder();
        let _gate = b.add("ip", Spec::gate()).unwrap();
        let orders = b
            .add("ORDERS_10S", Spec::sliding(10, 10 * SEC, 10))
            .unwrap();
        (b.build(now).unwrap(), orders)
    }

    /// Charges kept by a gateway that dies are read back by the next start at
    /// their times, still inside their windows, and carried into its file; a
    /// charge whose window has passed everywhere is dropped.
    #[test]
    fn charges_of_a_dead_gateway_come_back_in_their_windows() {
        let d = scratch("back");
        let path = d.join("charges");
        let wall0 = 1_000_000 * SEC; // the first life's wall clock at its now 0
        let (mut b, orders) = budget(0);
        let none = ChargeLog::read(&path, 0, wall0).unwrap();
        assert!(!none.found());
        let log = ChargeLog::create(&path, &b, &none, 0, wall0).unwrap();
        for t in [SEC, 2 * SEC, 2 * SEC + 1] {
            let parts = [Part::new(orders, 3)];
            let _ticket = b.try_charge(&parts, Class::Normal, t).unwrap();
            log.add(&parts, t);
        }
        drop(log); // SIGKILL: the mapping's stores are in the file
                   // The next process: its clock starts at 0 again, 4 s later on the wall.
        let recent = ChargeLog::read(&path, 50, wall0 + 4 * SEC).unwrap();
        assert!(recent.found());
        let c = recent.charged();
        assert_eq!(c.iter().map(|c| c.units).sum::<u64>(), 9, "{c:?}");
        // Slots of half a second: booked at their ends, 2.5 s and 1.5 s before now.
        assert_eq!((c[0].at_ns, c[0].units), (50 - 2 * SEC - SEC / 2, 3));
        assert_eq!((c[1].at_ns, c[1].units), (50 - SEC - SEC / 2, 6));
        // Replayed into a budget built at the oldest, they fill it until they leave.
        let mut b2 = Budget::builder();
        let o2 = b2
            .add("ORDERS_10S", Spec::sliding(10, 10 * SEC, 10))
            .unwrap();
        let mut b2 = b2.build(c[0].at_ns).unwrap();
        for x in c {
            b2.charge_after(o2, x.units as u32, x.at_ns).unwrap();
        }
        assert!(b2
            .try_charge(&[Part::new(o2, 2)], Class::Urgent, 60)
            .is_err());
        assert!(b2
            .try_charge(&[Part::new(o2, 1)], Class::Urgent, 60)
            .is_ok());
        // Carried into the next file, gone once out of their window.
        let (b3, _) = budget(50);
        drop(ChargeLog::create(&path, &b3, &recent, 50, wall0 + 4 * SEC).unwrap());
        let again = ChargeLog::read(&path, 0, wall0 + 9 * SEC).unwrap();
        assert_eq!(again.charged().iter().map(|c| c.units).sum::<u64>(), 9);
        let later = ChargeLog::read(&path, 0, wall0 + 13 * SEC).unwrap();
        assert!(later.charged().is_empty(), "{:?}", later.charged());
        let _ = std::fs::remove_dir_all(&d);
    }

    /// The file keeps each counted bucket's limit, what the bootstrap's reads
    /// count on it and the venue's last hold; from them a restart's bootstrap
    /// waits until the dead gateway's charges leave room for its reads, and
    /// until the hold ends (on main it read at once, into a full window).
    #[test]
    fn a_restart_waits_room_for_its_bootstrap_reads_in_the_kept_limits() {
        let d = scratch("room");
        let path = d.join("charges");
        let wall0 = 1_000_000 * SEC;
        let mut b = Budget::builder();
        let _gate = b.add("ip", Spec::gate()).unwrap();
        let weight = b
            .add("REQUEST_WEIGHT_1S", Spec::sliding(60, SEC, 20))
            .unwrap();
        let mut b = b.build(0).unwrap();
        let log = ChargeLog::create(&path, &b, &Recent::default(), 0, wall0).unwrap();
        log.boot_reads(&[Part::new(weight, 1), Part::new(weight, 20)]);
        // 50 of 60 used at 0.5 s (slot end: 0.55 s).
        let parts = [Part::new(weight, 50)];
        let _t = b.try_charge(&parts, Class::Normal, SEC / 2).unwrap();
        log.add(&parts, SEC / 2);
        drop(log);
        // The next process, 100 ms later on the wall; its clock starts at 7.
        let now = 7;
        let recent = ChargeLog::read(&path, now, wall0 + 600 * MS).unwrap();
        let l = recent.limits();
        assert_eq!(l.len(), 1, "{l:?}");
        assert_eq!((l[0].limit, l[0].boot, l[0].held_until_ns), (60, 21, None));
        let room = crate::boot_room(l, recent.charged(), now);
        // 21 fit once the 50 leave: their slot's end plus the window, 950 ms on.
        assert!(room > now, "{room}");
        assert!(room <= now + 950 * MS + 50 * MS, "{room}");
        // Nothing kept, nothing held.
        assert_eq!(crate::boot_room(&[], recent.charged(), now), now);
        // A hold the venue gave (a 429's wait to 3 s) is kept and waited out.
        let log = ChargeLog::create(&path, &b, &recent, 0, wall0).unwrap();
        log.boot_reads(&[Part::new(weight, 21)]);
        log.hold(weight, 3 * SEC);
        drop(log);
        let recent = ChargeLog::read(&path, now, wall0 + 2 * SEC).unwrap();
        let held = recent.limits()[0].held_until_ns;
        assert_eq!(held, Some(now + SEC), "{:?}", recent.limits());
        assert_eq!(
            crate::boot_room(recent.limits(), recent.charged(), now),
            now + SEC
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A file cut short or of garbage is an error naming it, left as it is.
    #[test]
    fn a_bad_charges_file_is_an_error() {
        let d = scratch("bad");
        let path = d.join("charges");
        let (b, _) = budget(0);
        drop(ChargeLog::create(&path, &b, &Recent::default(), 0, SEC).unwrap());
        let whole = std::fs::read(&path).unwrap();
        for bytes in [&whole[..10], &whole[..HEAD + 10], &[0xffu8; 200][..]] {
            std::fs::write(&path, bytes).unwrap();
            let e = ChargeLog::read(&path, 0, SEC).expect_err("read");
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
            assert!(e.to_string().contains("charges"), "{e}");
            assert_eq!(std::fs::read(&path).unwrap(), bytes);
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}
