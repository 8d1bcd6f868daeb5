//! One client's shared region: a header, the submit ring, the event ring and the
//! client's flight table, in one memfd the gateway creates and hands over.
//!
//! ```text
//! 0     Header (1 KiB): magic, geometry, the two sleep flags, the client's
//!       counters, the submit ring's indices, the event ring's indices
//! 4096  submit slots: in_flight x 256 bytes       (client -> gateway)
//! ...   event slots:  4 x in_flight x 4096 bytes  (gateway -> client)
//! ...   flight table: in_flight x 16 bytes (tag, used), written by the client only
//! ```
//!
//! The region outlives the client process (the gateway holds it), so a client
//! killed mid-flight finds, when it attaches again under the same name, the
//! events of everything it had in flight and its own flight table.
#![allow(unsafe_code)] // Typed views of the mapping.

use std::cell::UnsafeCell;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::Arc;

use super::os::{memfd, seal, Mapping};
use ergon_io::boundary::shm_ring::{Indices, Keep, ShmConsumer, ShmProducer};

/// "ergonshm".
pub const MAGIC: u64 = u64::from_le_bytes(*b"ergonshm");
/// The version of the slots' bytes the gateway writes in the region's header: 1
/// (written as 0 by gateways before it was recorded) has no `BatchSettled` event;
/// 2 adds it (kind 16, its parts' fates in its body); 3 makes the events the
/// in-process vocabulary (an `Expired` says why, `Item`, `Protection`,
/// `ProtectionFired`; the order updates' tag moves to `u64::MAX - 2`) and the
/// open-orders polls opt-in. A client of 3 reads 3 only, and refuses any other
/// by name (an event of 2 would read as an expiry without its reason); a
/// client of 2 refuses a region of 3 by name; and the gateway of 3 refuses at
/// attach a client that does not say it speaks 3
/// ([`read_attach_words`](super::read_attach_words)).
pub const PROTOCOL: u32 = 3;
/// Where the submit slots start.
pub const SLOTS_AT: usize = 4096;
/// Bytes of a submit slot.
pub const SUBMIT_SLOT: usize = 256;
/// Bytes of an event slot (an answer body longer than this less the event's
/// header is cut, and flagged).
pub const EVENT_SLOT: usize = 4096;
/// Events per request at most (Retrying, Reconciling, a final one, and room for
/// an open-orders broadcast): the event ring has this many slots per submit slot.
pub const EVENTS_PER_REQUEST: usize = 4;

/// The region's header. The client may write any byte of it at any time, so
/// every field is interior-mutable (atomics; the padding in `UnsafeCell`s, never
/// read): a `&Header` asserts nothing the client can break.
#[repr(C, align(128))]
pub struct Header {
    /// [`MAGIC`]: the region is one of ours.
    pub magic: AtomicU64,
    /// submit slots, submit slot bytes, event slots, event slot bytes.
    pub geometry: [AtomicU32; 4],
    /// [`PROTOCOL`] of the gateway that made the region (0: before it was kept).
    pub protocol: AtomicU32,
    _p0: UnsafeCell<[u8; 100]>,
    /// The gateway's loop announced a park: a client that pushed rings the
    /// doorbell (a wake-up message on its connection).
    pub gw_sleeping: AtomicU32,
    _p1: UnsafeCell<[u8; 124]>,
    /// The client announced a wait: the gateway sends a wake-up on its connection.
    pub client_sleeping: AtomicU32,
    _p2: UnsafeCell<[u8; 124]>,
    /// The gateway's epoch (bumped by every gateway that serves this region).
    pub epoch: AtomicU64,
    _p3: UnsafeCell<[u8; 120]>,
    /// The submit ring's indices (client -> gateway).
    pub submit: Indices,
    /// The event ring's indices (gateway -> client).
    pub events: Indices,
}

const _: () = assert!(core::mem::size_of::<Header>() <= SLOTS_AT);

/// One (tag, used) entry of the flight table.
#[repr(C)]
pub struct FlightEntry {
    /// The client's tag of a request in flight.
    pub tag: AtomicU64,
    /// Whether the entry holds a request in flight (non-zero).
    pub used: AtomicU64,
}

/// A mapped region and its geometry.
#[derive(Clone)]
pub struct Region {
    map: Arc<Mapping>,
    /// Requests the client may have in flight (its submit ring's slots).
    pub in_flight: usize,
}

fn bytes_for(in_flight: usize) -> usize {
    SLOTS_AT
        + in_flight * SUBMIT_SLOT
        + in_flight * EVENTS_PER_REQUEST * EVENT_SLOT
        + in_flight * core::mem::size_of::<FlightEntry>()
}

impl Region {
    /// A new region for `in_flight` requests at once: its memfd and the mapping.
    pub fn create(name: &str, in_flight: usize) -> io::Result<(OwnedFd, Region)> {
        if !(1..=4096).contains(&in_flight) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "in-flight bound must be 1..=4096",
            ));
        }
        let len = bytes_for(in_flight);
        let fd = memfd(&format!("ergon-gateway-{name}"), len)?;
        // Its size can never change (the client holds the descriptor): no SIGBUS.
        seal(&fd, libc::F_SEAL_SEAL)?;
        let map = Arc::new(Mapping::map(&fd, len)?);
        let r = Region { map, in_flight };
        let h = r.header();
        use std::sync::atomic::Ordering::Release;
        for (g, v) in h.geometry.iter().zip([
            in_flight,
            SUBMIT_SLOT,
            in_flight * EVENTS_PER_REQUEST,
            EVENT_SLOT,
        ]) {
            g.store(v as u32, Release);
        }
        h.protocol.store(PROTOCOL, Release);
        h.magic.store(MAGIC, Release);
        Ok((fd, r))
    }

    /// Maps a region the gateway handed over, checking its header against its size.
    pub fn open(fd: &OwnedFd) -> io::Result<Region> {
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
        let head = Mapping::map(fd, SLOTS_AT)?;
        // SAFETY: the mapping holds SLOTS_AT >= size_of::<Header>() bytes, page aligned.
        let h = unsafe { &*(head.ptr() as *const Header) };
        use std::sync::atomic::Ordering::Acquire;
        if h.magic.load(Acquire) != MAGIC {
            return Err(bad("not a gateway region (magic)"));
        }
        let g = h.geometry.each_ref().map(|g| g.load(Acquire) as usize);
        let in_flight = g[0];
        if !(1..=4096).contains(&in_flight)
            || g != [
                in_flight,
                SUBMIT_SLOT,
                in_flight * EVENTS_PER_REQUEST,
                EVENT_SLOT,
            ]
        {
            return Err(bad("region geometry of another version"));
        }
        let protocol = h.protocol.load(Acquire);
        if protocol != PROTOCOL {
            return Err(bad(&format!(
                "region of protocol {protocol}: this client reads protocol {PROTOCOL} only (use a client of the gateway's version)"
            )));
        }
        drop(head);
        let map = Arc::new(Mapping::map(fd, bytes_for(in_flight))?);
        Ok(Region { map, in_flight })
    }

    /// The header at the start of the mapping.
    pub fn header(&self) -> &Header {
        // SAFETY: the mapping starts with a Header (checked size above), page aligned.
        unsafe { &*(self.map.ptr() as *const Header) }
    }

    fn at(&self, off: usize) -> *mut u8 {
        debug_assert!(off <= self.map.len());
        // SAFETY: off is within the mapping (bytes_for).
        unsafe { self.map.ptr().add(off) }
    }

    fn submit_at(&self) -> *mut u8 {
        self.at(SLOTS_AT)
    }

    fn events_at(&self) -> *mut u8 {
        self.at(SLOTS_AT + self.in_flight * SUBMIT_SLOT)
    }

    /// The flight table (the client's).
    pub fn flight(&self) -> &[FlightEntry] {
        let off = SLOTS_AT + self.in_flight * (SUBMIT_SLOT + EVENTS_PER_REQUEST * EVENT_SLOT);
        // SAFETY: the table's in_flight entries lie at the end of the mapping,
        // 8-aligned (every slot size is a multiple of 8), all-zero valid atomics.
        unsafe { core::slice::from_raw_parts(self.at(off) as *const FlightEntry, self.in_flight) }
    }

    fn keep(&self) -> Keep {
        self.map.clone()
    }

    /// The client's end of the submit ring.
    pub fn submit_producer(&self) -> io::Result<ShmProducer> {
        // SAFETY: the indices and slots lie in the mapping, which `keep` holds;
        // one producer per region (the attached client).
        unsafe {
            ShmProducer::from_raw(
                &self.header().submit,
                self.submit_at(),
                self.in_flight,
                SUBMIT_SLOT,
                self.keep(),
            )
        }
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// The gateway's end of the submit ring.
    pub fn submit_consumer(&self) -> io::Result<ShmConsumer> {
        // SAFETY: as submit_producer; the one consumer is the gateway.
        unsafe {
            ShmConsumer::from_raw(
                &self.header().submit,
                self.submit_at(),
                self.in_flight,
                SUBMIT_SLOT,
                self.keep(),
            )
        }
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// The gateway's end of the event ring.
    pub fn event_producer(&self) -> io::Result<ShmProducer> {
        // SAFETY: as submit_producer; the one producer is the gateway.
        unsafe {
            ShmProducer::from_raw(
                &self.header().events,
                self.events_at(),
                self.in_flight * EVENTS_PER_REQUEST,
                EVENT_SLOT,
                self.keep(),
            )
        }
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// The client's end of the event ring.
    pub fn event_consumer(&self) -> io::Result<ShmConsumer> {
        // SAFETY: as submit_producer; the one consumer is the attached client.
        unsafe {
            ShmConsumer::from_raw(
                &self.header().events,
                self.events_at(),
                self.in_flight * EVENTS_PER_REQUEST,
                EVENT_SLOT,
                self.keep(),
            )
        }
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::Release;

    /// A region of another protocol is refused by name, both versions in the
    /// message, before anything in it is read as events.
    #[test]
    fn a_region_of_another_protocol_is_refused_naming_both() {
        let (fd, r) = Region::create("protocol-test", 2).unwrap();
        assert!(Region::open(&fd).is_ok());
        for other in [0, 2, PROTOCOL + 1] {
            r.header().protocol.store(other, Release);
            let Err(e) = Region::open(&fd) else {
                panic!("a region of protocol {other} opened");
            };
            let e = e.to_string();
            assert!(
                e.contains(&format!("protocol {other}"))
                    && e.contains(&format!("protocol {PROTOCOL}")),
                "{e}"
            );
        }
    }
}
