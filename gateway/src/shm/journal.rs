//! The gateway's journal of orders in flight: a file (under /dev/shm by default,
//! so it survives the process but not the host) mapped shared, where each new
//! order's symbol and client order id is written before it is handed to the
//! budget and the transport, and cleared at its final event. A gateway killed
//! mid-flight leaves its live entries behind; the next one started on the same
//! file queries each of them by client order id before it takes any new submit.
#![allow(unsafe_code)] // A typed view of the mapping.

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::os::Mapping;

const MAGIC: u64 = u64::from_le_bytes(*b"ergonjnl");
const HEAD: usize = 64;
const ENTRY: usize = 80;

#[repr(C)]
struct Entry {
    live: AtomicU64,
    /// symbol length, id length, then symbol (32) and id (36) bytes.
    text: [AtomicU64; 9],
}

const _: () = assert!(core::mem::size_of::<Entry>() == ENTRY);

/// One order found in flight in a journal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) symbol: String,
    pub(crate) id: String,
}

/// The mapped journal.
pub(crate) struct Journal {
    map: Mapping,
    cap: usize,
    free: Vec<u32>,
}

fn open_file(path: &Path) -> io::Result<OwnedFd> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    Ok(OwnedFd::from(f))
}

fn entries(map: &Mapping, cap: usize) -> &[Entry] {
    // SAFETY: the mapping holds HEAD + cap * ENTRY bytes, 8-aligned; zero bytes
    // are valid atomics.
    unsafe { core::slice::from_raw_parts(map.ptr().add(HEAD) as *const Entry, cap) }
}

fn head(map: &Mapping) -> &[AtomicU64; 2] {
    // SAFETY: the first 16 bytes of the page-aligned mapping.
    unsafe { &*(map.ptr() as *const [AtomicU64; 2]) }
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

impl Journal {
    /// Opens (or creates) the journal at `path` for `cap` entries, returning the
    /// orders the previous gateway left in flight (they are kept as live entries
    /// until [`Journal::clear`]).
    pub(crate) fn open(path: &Path, cap: usize) -> io::Result<(Journal, Vec<(u32, Found)>)> {
        let fd = open_file(path)?;
        let old = Self::read_old(&fd)?;
        let len = HEAD + cap * ENTRY;
        let f = std::fs::File::from(fd);
        f.set_len(0)?;
        f.set_len(len as u64)?;
        let fd = OwnedFd::from(f);
        let map = Mapping::map(&fd, len)?;
        if old.len() > cap {
            return Err(io::Error::other(format!(
                "{}: {} orders in flight, more than the {cap} entries configured",
                path.display(),
                old.len()
            )));
        }
        let mut j = Journal {
            map,
            cap,
            free: (0..cap as u32).rev().collect(),
        };
        let h = head(&j.map);
        h[1].store(cap as u64, Ordering::Relaxed);
        h[0].store(MAGIC, Ordering::Release);
        let mut live = Vec::new();
        for f in old {
            if let Some(i) = j.record(&f.symbol, &f.id) {
                live.push((i, f));
            }
        }
        Ok((j, live))
    }

    fn read_old(fd: &OwnedFd) -> io::Result<Vec<Found>> {
        let size = std::fs::File::from(fd.try_clone()?).metadata()?.len() as usize;
        if size < HEAD {
            return Ok(Vec::new());
        }
        let map = Mapping::map(fd, size)?;
        let h = head(&map);
        let cap = h[1].load(Ordering::Relaxed) as usize;
        if h[0].load(Ordering::Acquire) != MAGIC || HEAD + cap * ENTRY > size {
            return Ok(Vec::new());
        }
        Ok(entries(&map, cap)
            .iter()
            .filter(|e| e.live.load(Ordering::Acquire) != 0)
            .filter_map(read_entry)
            .collect())
    }

    /// Writes an order about to be sent; its entry, None if the journal is full.
    pub(crate) fn record(&mut self, symbol: &str, id: &str) -> Option<u32> {
        if symbol.len() > 32 || id.len() > 36 {
            return None;
        }
        let i = self.free.pop()?;
        let e = &entries(&self.map, self.cap)[i as usize];
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
        Some(i)
    }

    /// The order of entry `i` has its final event.
    pub(crate) fn clear(&mut self, i: u32) {
        if let Some(e) = entries(&self.map, self.cap).get(i as usize) {
            if e.live.swap(0, Ordering::Release) != 0 {
                self.free.push(i);
            }
        }
    }

    /// Entries live now.
    pub(crate) fn live(&self) -> usize {
        self.cap - self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_dead_gateway_left_in_flight_is_found_by_the_next() {
        let path = std::env::temp_dir().join(format!("ergon-journal-{}", std::process::id()));
        let (mut j, old) = Journal::open(&path, 4).unwrap();
        assert!(old.is_empty());
        let a = j.record("BTCUSDT", "id-a").unwrap();
        let _b = j.record("BTCUSDT", "id-b").unwrap();
        j.clear(a);
        assert_eq!(j.live(), 1);
        drop(j); // the process dies: the file stays
        let (j2, old) = Journal::open(&path, 8).unwrap();
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
        // Garbage in the file is not an entry (and never a panic).
        std::fs::write(&path, [0xffu8; 300]).unwrap();
        let (_, old) = Journal::open(&path, 2).unwrap();
        assert!(old.is_empty());
        let _ = std::fs::remove_file(&path);
    }
}
