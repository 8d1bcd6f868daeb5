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
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"ergonshm");
/// Where the submit slots start.
pub(crate) const SLOTS_AT: usize = 4096;
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
pub(crate) struct Header {
    pub(crate) magic: AtomicU64,
    /// submit slots, submit slot bytes, event slots, event slot bytes.
    pub(crate) geometry: [AtomicU32; 4],
    _p0: UnsafeCell<[u8; 104]>,
    /// The gateway's loop announced a park: a client that pushed rings the
    /// doorbell (a wake-up message on its connection).
    pub(crate) gw_sleeping: AtomicU32,
    _p1: UnsafeCell<[u8; 124]>,
    /// The client announced a wait: the gateway sends a wake-up on its connection.
    pub(crate) client_sleeping: AtomicU32,
    _p2: UnsafeCell<[u8; 124]>,
    /// The gateway's epoch (bumped by every gateway that serves this region).
    pub(crate) epoch: AtomicU64,
    _p3: UnsafeCell<[u8; 120]>,
    pub(crate) submit: Indices,
    pub(crate) events: Indices,
}

const _: () = assert!(core::mem::size_of::<Header>() <= SLOTS_AT);

/// One (tag, used) entry of the flight table.
#[repr(C)]
pub(crate) struct FlightEntry {
    pub(crate) tag: AtomicU64,
    pub(crate) used: AtomicU64,
}

/// A mapped region and its geometry.
#[derive(Clone)]
pub(crate) struct Region {
    map: Arc<Mapping>,
    pub(crate) in_flight: usize,
}

fn bytes_for(in_flight: usize) -> usize {
    SLOTS_AT
        + in_flight * SUBMIT_SLOT
        + in_flight * EVENTS_PER_REQUEST * EVENT_SLOT
        + in_flight * core::mem::size_of::<FlightEntry>()
}

impl Region {
    /// A new region for `in_flight` requests at once: its memfd and the mapping.
    pub(crate) fn create(name: &str, in_flight: usize) -> io::Result<(OwnedFd, Region)> {
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
        h.magic.store(MAGIC, Release);
        Ok((fd, r))
    }

    /// Maps a region the gateway handed over, checking its header against its size.
    pub(crate) fn open(fd: &OwnedFd) -> io::Result<Region> {
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
        drop(head);
        let map = Arc::new(Mapping::map(fd, bytes_for(in_flight))?);
        Ok(Region { map, in_flight })
    }

    pub(crate) fn header(&self) -> &Header {
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
    pub(crate) fn flight(&self) -> &[FlightEntry] {
        let off = SLOTS_AT + self.in_flight * (SUBMIT_SLOT + EVENTS_PER_REQUEST * EVENT_SLOT);
        // SAFETY: the table's in_flight entries lie at the end of the mapping,
        // 8-aligned (every slot size is a multiple of 8), all-zero valid atomics.
        unsafe { core::slice::from_raw_parts(self.at(off) as *const FlightEntry, self.in_flight) }
    }

    fn keep(&self) -> Keep {
        self.map.clone()
    }

    pub(crate) fn submit_producer(&self) -> io::Result<ShmProducer> {
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

    pub(crate) fn submit_consumer(&self) -> io::Result<ShmConsumer> {
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

    pub(crate) fn event_producer(&self) -> io::Result<ShmProducer> {
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

    pub(crate) fn event_consumer(&self) -> io::Result<ShmConsumer> {
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
