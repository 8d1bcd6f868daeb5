//! A run's digest: a 64-bit hash of what the run did, in order: each step's
//! time and kind, each request's bytes as the gateway wrote them, each HTTP
//! answer's status and body as the gateway read it, and each event the checks
//! heard. Two builds that give a seed the same digest ran it the same way, so a
//! change meant to be only faster (`ergon-sim --seeds N --digest`, before and
//! after) is checked seed by seed. It hashes words with a fixed mix of its own
//! (not `std`'s hasher, whose algorithm may change between releases).

use std::hash::{Hash, Hasher};

use super::{hub, Step};
use crate::check::Final;

/// The running hash of one run.
#[derive(Clone, Copy, Debug)]
pub(super) struct Digest(u64);

impl Default for Digest {
    fn default() -> Self {
        Digest(0x243f_6a88_85a3_08d3)
    }
}

/// MurmurHash3's 64-bit finalizer: every input bit moves every output bit.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    z = (z ^ (z >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    z ^ (z >> 33)
}

impl Digest {
    /// The hash so far.
    pub(super) fn value(self) -> u64 {
        self.0
    }

    /// Adds one word.
    pub(super) fn word(&mut self, w: u64) {
        self.0 = mix(self.0 ^ w).wrapping_add(0x9e37_79b9_7f4a_7c15);
    }

    /// Adds `bytes`, length first (so `ab`,`c` and `a`,`bc` differ).
    pub(super) fn bytes(&mut self, bytes: &[u8]) {
        self.word(bytes.len() as u64);
        self.write(bytes);
    }

    /// Adds a step taken at `now` (None: a turn of the gateway's own timers).
    pub(super) fn step(&mut self, now: i64, s: Option<&Step>) {
        self.word(now as u64);
        let (kind, arg) = match s {
            None => (0, 0),
            Some(Step::Tick) => (1, 0),
            Some(Step::Ban(ms)) => (2, *ms as u64),
            Some(Step::ClearHalts) => (3, 0),
            Some(Step::Arrive(i)) => (4, *i as u64),
            Some(Step::Execute(i, _)) => (5, *i as u64),
            Some(Step::Reply(i, _)) => (6, *i as u64),
            Some(Step::Fail(i)) => (7, *i as u64),
            Some(Step::Other) => (8, 0),
            Some(Step::Kill) => (9, 0),
            Some(Step::Restart) => (10, 0),
            Some(Step::Turn) => (11, 0),
            Some(Step::Ws(_)) => (12, 0),
            Some(Step::WsDrop) => (13, 0),
            Some(Step::Hub(hub::HubStep::Kill(c, d))) => (14, (*c as u64) << 8 | *d as u64),
            Some(Step::Hub(hub::HubStep::Attach(c))) => (15, *c as u64),
            Some(Step::Hub(hub::HubStep::Twin(c))) => (16, *c as u64),
        };
        self.word(kind);
        self.word(arg);
    }

    /// Adds an event the checks heard.
    pub(super) fn event(&mut self, f: &Final) {
        f.hash(self);
    }
}

/// Words and bytes in, as the derived `Hash` of an event writes them.
impl Hasher for Digest {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.word(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.word(u64::from_le_bytes(last));
        }
    }

    fn write_u64(&mut self, w: u64) {
        self.word(w);
    }
}
