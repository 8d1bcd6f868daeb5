//! The cross-thread boundary: how strategy threads talk to the loop thread
//! without a lock anywhere on the way.
//!
//! - [`ring`]: the bounded, preallocated lock-free submit queue (many submitters,
//!   one loop). A full queue is an immediate error to the submitter.
//! - [`mailbox`]: each submitter's bounded completion queue; credits taken at
//!   submit make a full mailbox impossible, so an answer is never dropped and the
//!   loop never waits.
//! - [`wake`]: the flag-plus-eventfd handshake that wakes a parked loop, never
//!   loses a wakeup, and writes nothing while the loop is awake.
//! - [`seqlock`] and [`stats`]: the loop publishes a stats snapshot that a
//!   monitoring thread reads whole, never torn, without stopping the loop.
//!
//! Every atomic and cell here goes through [`crate::sync`]; the loom models in
//! `io/tests/loom_*.rs` check these structures under `--cfg ergon_loom`.
//!
//! What this must never do: lock, block a submitter, block the loop, allocate
//! after construction, or lose or duplicate a value.

pub mod mailbox;
pub mod ring;
pub mod seqlock;
pub mod stats;
pub mod wake;
