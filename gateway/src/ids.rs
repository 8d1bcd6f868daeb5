//! Client order ids that never repeat, across restarts included.
//!
//! An id names 128 bits laid out as a UUID (version 4, variant `10`, so a venue
//! that wants a UUID takes it): the **boot epoch** in the first 48 bits and a
//! **sequence** the [`IdIssuer`] counts up in 74 of the other 80 (64 used), written in
//! the venue's form ([`IdFormat`]: 32 hex digits, `0x` and 32 hex digits, or the
//! UUID's 8-4-4-4-12 text). Two ids differ if their epochs or their sequences do.
//!
//! The boot epoch is the start's wall-clock time in milliseconds, raised above
//! every epoch the same state has seen ([`boot_epoch`]): the `ergon-gateway`
//! process keeps its last one in its journal (written and synced before the first
//! id), so a restart never takes an earlier boot's epoch, even when the clock has
//! stepped back; an in-process gateway without a journal relies on the clock
//! alone (a restart within the same millisecond, or onto an instant the clock
//! already passed, could repeat an epoch). Milliseconds rather than a bare counter:
//! a journal lost with its host (a tmpfs) still leaves the next boot above every
//! earlier one while the clock is right.
//!
//! Issuing reads no clock and allocates nothing: an id is a fixed-size
//! [`ClientOrderId`] written on the stack.

use ergon_venues::endpoint::{ClientOrderId, IdFormat};

/// The largest boot epoch an id can carry (48 bits: milliseconds until the year
/// 10889).
pub const MAX_EPOCH: u64 = (1 << 48) - 1;

/// Why no id was issued.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IdError {
    /// No boot epoch was set ([`crate::Gateway::set_boot_epoch`]; the bootstrap
    /// sets one).
    NoEpoch,
    /// The epoch is above [`MAX_EPOCH`].
    EpochTooLarge,
    /// Every sequence of this issuer (or of this block) has been issued.
    Exhausted,
}

impl core::fmt::Display for IdError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            IdError::NoEpoch => "no boot epoch set: client order ids cannot be issued",
            IdError::EpochTooLarge => "boot epoch above 2^48 - 1",
            IdError::Exhausted => "every client order id of this range has been issued",
        })
    }
}

impl std::error::Error for IdError {}

/// The boot epoch of a start at `wall_ms` (milliseconds since the Unix epoch)
/// whose state last recorded `last` (None: no state): `wall_ms`, or `last + 1` if
/// the clock is not past it; `Err` above [`MAX_EPOCH`].
///
/// ```
/// use ergon_gateway::ids::boot_epoch;
/// assert_eq!(boot_epoch(1_000, None), Ok(1_000));
/// assert_eq!(boot_epoch(1_000, Some(400)), Ok(1_000));
/// assert_eq!(boot_epoch(1_000, Some(5_000)), Ok(5_001)); // the clock stepped back
/// ```
pub fn boot_epoch(wall_ms: u64, last: Option<u64>) -> Result<u64, IdError> {
    let epoch = match last {
        Some(l) => wall_ms.max(l.checked_add(1).ok_or(IdError::EpochTooLarge)?),
        None => wall_ms,
    };
    match epoch <= MAX_EPOCH {
        true => Ok(epoch),
        false => Err(IdError::EpochTooLarge),
    }
}

/// Issues the ids of one boot epoch, each sequence once, in a venue's form.
///
/// A gateway owns one; [`IdIssuer::block`] hands a strategy process a range of
/// its own (the shared-memory attach), which it issues from without asking again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdIssuer {
    format: IdFormat,
    epoch: u64,
    next: u64,
    end: u64,
}

impl IdIssuer {
    /// Every sequence of `epoch`, written in `format`.
    pub fn new(format: IdFormat, epoch: u64) -> Result<Self, IdError> {
        Self::range(format, epoch, 0, u64::MAX)
    }

    /// The sequences `from..end` of `epoch` (a block handed over by another
    /// issuer).
    pub fn range(format: IdFormat, epoch: u64, from: u64, end: u64) -> Result<Self, IdError> {
        if epoch > MAX_EPOCH {
            return Err(IdError::EpochTooLarge);
        }
        Ok(IdIssuer {
            format,
            epoch,
            next: from,
            end: end.max(from),
        })
    }

    /// The next id.
    pub fn next_id(&mut self) -> Result<ClientOrderId, IdError> {
        if self.next >= self.end {
            return Err(IdError::Exhausted);
        }
        let seq = self.next;
        self.next += 1;
        Ok(self.format.write(layout(self.epoch, seq)))
    }

    /// Takes the next `n` sequences out of this issuer, for another to issue.
    pub fn block(&mut self, n: u64) -> Result<IdIssuer, IdError> {
        let end = self
            .next
            .checked_add(n)
            .filter(|&e| e <= self.end)
            .ok_or(IdError::Exhausted)?;
        let block = IdIssuer {
            format: self.format,
            epoch: self.epoch,
            next: self.next,
            end,
        };
        self.next = end;
        Ok(block)
    }

    /// Its boot epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The form it writes ids in.
    pub fn format(&self) -> IdFormat {
        self.format
    }

    /// The sequences it has left: the next one and the end (exclusive).
    pub fn remaining(&self) -> (u64, u64) {
        (self.next, self.end)
    }
}

/// The boot epoch and sequence an id written by an [`IdIssuer`] in `format`
/// names; None if it is not one (another form, not hex, or bits the layout
/// keeps fixed set otherwise). The inverse of [`IdIssuer::next_id`]: the gateway
/// tells by it which client's block an id comes from.
///
/// ```
/// use ergon_gateway::ids::{read_id, IdIssuer};
/// use ergon_venues::endpoint::{ClientOrderId, IdFormat};
/// let id = IdIssuer::range(IdFormat::Uuid, 77, 1 << 40, u64::MAX).unwrap().next_id().unwrap();
/// assert_eq!(read_id(IdFormat::Uuid, &id), Some((77, 1 << 40)));
/// assert_eq!(read_id(IdFormat::Hex, &id), None);
/// assert_eq!(read_id(IdFormat::Hex, &ClientOrderId::new("mine-1").unwrap()), None);
/// ```
pub fn read_id(format: IdFormat, id: &ClientOrderId) -> Option<(u64, u64)> {
    let t = id.as_str().as_bytes();
    let hex = match format {
        IdFormat::Hex => t,
        IdFormat::Cloid => t.strip_prefix(b"0x")?,
        IdFormat::Uuid => {
            if t.len() != 36 || [8, 13, 18, 23].iter().any(|&i| t[i] != b'-') {
                return None;
            }
            t
        }
    };
    let mut v: u128 = 0;
    let mut digits = 0;
    for (i, &c) in hex.iter().enumerate() {
        if format == IdFormat::Uuid && matches!(i, 8 | 13 | 18 | 23) {
            continue;
        }
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => return None,
        };
        v = (v << 4) | u128::from(d);
        digits += 1;
    }
    if digits != 32 {
        return None;
    }
    let fixed = (v >> 76) & 0xf == 4 && (v >> 62) & 0x3 == 2 && (v >> 52) & 0x3ff == 0;
    let epoch = (v >> 80) as u64;
    let seq = (((v >> 64) & 0xfff) as u64) << 52 | (v as u64 & ((1 << 52) - 1));
    fixed.then_some((epoch, seq))
}

/// The 16 bytes of `(epoch, seq)`: epoch (48 bits), version 4, the sequence's top
/// 12 bits, variant `10`, ten zero bits, the sequence's low 52 bits.
fn layout(epoch: u64, seq: u64) -> [u8; 16] {
    let v = (u128::from(epoch) << 80)
        | (4 << 76)
        | (u128::from(seq >> 52) << 64)
        | (2 << 62)
        | u128::from(seq & ((1 << 52) - 1));
    v.to_be_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_keeps_epoch_and_sequence_apart() {
        let id = IdIssuer::range(IdFormat::Uuid, 0x0123_4567_89ab, u64::MAX - 1, u64::MAX)
            .unwrap()
            .next_id()
            .unwrap();
        assert_eq!(id.as_str(), "01234567-89ab-4fff-800f-fffffffffffe");
        let mut i = IdIssuer::range(IdFormat::Hex, 1, 5, 6).unwrap();
        assert_eq!(
            i.next_id().unwrap().as_str(),
            "00000000000140008000000000000005"
        );
        assert_eq!(i.next_id(), Err(IdError::Exhausted));
        for f in [IdFormat::Hex, IdFormat::Cloid, IdFormat::Uuid] {
            for seq in [0, 5, (1 << 52) - 1, 1 << 52, u64::MAX - 1] {
                let id = IdIssuer::range(f, MAX_EPOCH, seq, u64::MAX)
                    .unwrap()
                    .next_id()
                    .unwrap();
                assert_eq!(read_id(f, &id), Some((MAX_EPOCH, seq)), "{f:?} {seq}");
            }
        }
        assert_eq!(
            IdIssuer::new(IdFormat::Hex, MAX_EPOCH + 1),
            Err(IdError::EpochTooLarge)
        );
    }
}
