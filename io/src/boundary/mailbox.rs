//! A submitter's bounded completion queue, with credits that make overflow
//! impossible.
//!
//! The submitter takes a [`Credit`] before it hands a request to the loop; the
//! credit travels with the request and the loop spends it in [`Outbox::deliver`].
//! The inbox holds at most `capacity` credits out at once, and the ring has that
//! many slots, so a delivery always finds room: the loop never blocks on a slow
//! submitter and never drops an answer. A `Credit` is not `Clone` and `deliver`
//! consumes it, so a request holds the right to exactly one answer.
//!
//! What this must never do: block the loop, drop a completion, allocate after
//! [`mailbox`].

use super::ring::{self, CapacityError, Consumer, Full, Producer};

/// The right to one delivery into one mailbox. Spend it with [`Outbox::deliver`]
/// or give it back with [`Inbox::cancel`]; dropping it leaks one slot of the
/// mailbox for good (the count of outstanding answers never comes down).
#[must_use = "a credit must be delivered or cancelled"]
#[derive(Debug)]
pub struct Credit {
    _private: (),
}

/// Builds a mailbox of `capacity` slots (a power of two, at least 2).
pub fn mailbox<T: Send>(capacity: usize) -> Result<(Outbox<T>, Inbox<T>), CapacityError> {
    let (tx, rx) = ring::bounded(capacity)?;
    Ok((
        Outbox { tx },
        Inbox {
            rx,
            outstanding: 0,
            capacity,
        },
    ))
}

/// The loop's side: delivers answers. Not `Clone`: the loop is the one writer.
#[derive(Debug)]
pub struct Outbox<T> {
    tx: Producer<T>,
}

impl<T: Send> Outbox<T> {
    /// Delivers `value`, spending `credit`. Cannot find the mailbox full while every
    /// delivery spends a credit of this mailbox's inbox; `Err` means a credit of
    /// another mailbox was spent here, a bug of the caller, and hands the value back.
    #[inline]
    pub fn deliver(&self, credit: Credit, value: T) -> Result<(), Full<T>> {
        let Credit { _private: () } = credit;
        self.tx.push(value)
    }
}

/// The submitter's side: takes credits and answers. Not `Clone`, `&mut self`.
#[derive(Debug)]
pub struct Inbox<T> {
    rx: Consumer<T>,
    outstanding: usize,
    capacity: usize,
}

impl<T: Send> Inbox<T> {
    /// A credit for one future answer, or `None` if `capacity` answers are already
    /// owed (take some with [`Inbox::pop`] first).
    #[inline]
    pub fn reserve(&mut self) -> Option<Credit> {
        if self.outstanding == self.capacity {
            return None;
        }
        self.outstanding += 1;
        Some(Credit { _private: () })
    }

    /// Gives back a credit that never reached the loop (the submit queue was full).
    #[inline]
    pub fn cancel(&mut self, credit: Credit) {
        let Credit { _private: () } = credit;
        self.outstanding -= 1;
    }

    /// Takes the oldest answer, if any.
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        let v = self.rx.pop()?;
        self.outstanding -= 1;
        Some(v)
    }

    /// Answers owed: credits taken and neither cancelled nor answered and popped.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// The most answers that can be owed at once.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}
