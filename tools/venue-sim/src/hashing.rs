//! The hasher of the venue's maps: std's keyed SipHash behind the emulator's
//! sockets, foldhash's fixed-seed hash when the simulator drives the venue
//! without any ([`crate::sansio::SansIo`]).
//!
//! The maps are keyed by client order ids, API tokens and addresses a client
//! chooses: a socket peer could pick colliding keys (HashDoS) against an
//! unkeyed hash, so the server keeps SipHash with a random key. The simulator's
//! keys are the gateway's own ids drawn from a seed, nobody else's input, and
//! there the hash is a few percent of a run's instructions. Nothing here reaches
//! an answer: no map is iterated into output (the emulator's answers and the
//! simulator's digests are the same under either hasher).

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher, RandomState};

/// A map of the venue's state.
pub(crate) type Map<K, V> = HashMap<K, V, Hashing>;

/// Which hash the venue's maps use, chosen once per venue.
#[derive(Clone, Debug)]
pub(crate) enum Hashing {
    /// SipHash-1-3 keyed at random (std's): behind sockets.
    Keyed(RandomState),
    /// foldhash with its fixed seed: the simulator's venue, no outside input.
    Fixed(foldhash::fast::FixedState),
}

impl Hashing {
    /// SipHash with a fresh random key (the server's).
    pub(crate) fn keyed() -> Hashing {
        Hashing::Keyed(RandomState::new())
    }

    /// foldhash with its fixed seed (the sans-IO venue's).
    pub(crate) fn fixed() -> Hashing {
        Hashing::Fixed(foldhash::fast::FixedState::default())
    }

    /// An empty map hashed as `self`.
    pub(crate) fn map<K, V>(&self) -> Map<K, V> {
        HashMap::with_hasher(self.clone())
    }
}

/// One hashing in progress, of the kind its [`Hashing`] chose.
pub(crate) enum MapHasher {
    /// SipHash.
    Keyed(DefaultHasher),
    /// foldhash.
    Fixed(foldhash::fast::FoldHasher<'static>),
}

impl BuildHasher for Hashing {
    type Hasher = MapHasher;

    #[inline]
    fn build_hasher(&self) -> MapHasher {
        match self {
            Hashing::Keyed(s) => MapHasher::Keyed(s.build_hasher()),
            Hashing::Fixed(s) => MapHasher::Fixed(s.build_hasher()),
        }
    }
}

/// Each call goes to the chosen hasher unchanged (the integer writes too, which
/// foldhash specializes).
impl Hasher for MapHasher {
    #[inline]
    fn finish(&self) -> u64 {
        match self {
            MapHasher::Keyed(h) => h.finish(),
            MapHasher::Fixed(h) => h.finish(),
        }
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        match self {
            MapHasher::Keyed(h) => h.write(bytes),
            MapHasher::Fixed(h) => h.write(bytes),
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        match self {
            MapHasher::Keyed(h) => h.write_u8(i),
            MapHasher::Fixed(h) => h.write_u8(i),
        }
    }

    #[inline]
    fn write_u16(&mut self, i: u16) {
        match self {
            MapHasher::Keyed(h) => h.write_u16(i),
            MapHasher::Fixed(h) => h.write_u16(i),
        }
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        match self {
            MapHasher::Keyed(h) => h.write_u32(i),
            MapHasher::Fixed(h) => h.write_u32(i),
        }
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        match self {
            MapHasher::Keyed(h) => h.write_u64(i),
            MapHasher::Fixed(h) => h.write_u64(i),
        }
    }

    #[inline]
    fn write_u128(&mut self, i: u128) {
        match self {
            MapHasher::Keyed(h) => h.write_u128(i),
            MapHasher::Fixed(h) => h.write_u128(i),
        }
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        match self {
            MapHasher::Keyed(h) => h.write_usize(i),
            MapHasher::Fixed(h) => h.write_usize(i),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind hashes as its own hasher alone would, so a map behaves the same
    /// (the keyed one differs per venue, the fixed one never).
    #[test]
    fn each_kind_is_its_hasher() {
        let key = (7usize, "cid-1".to_string());
        let fixed = foldhash::fast::FixedState::default();
        assert_eq!(Hashing::fixed().hash_one(&key), fixed.hash_one(&key));
        assert_eq!(
            Hashing::fixed().hash_one(&key),
            Hashing::fixed().hash_one(&key)
        );
        let s = RandomState::new();
        assert_eq!(Hashing::Keyed(s.clone()).hash_one(&key), s.hash_one(&key));
        let mut m: Map<(usize, String), u32> = Hashing::fixed().map();
        m.insert(key.clone(), 1);
        let mut k: Map<(usize, String), u32> = Hashing::keyed().map();
        k.insert(key.clone(), 1);
        assert_eq!(m.get(&key), k.get(&key));
    }
}
