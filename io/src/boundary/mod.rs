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
//! - [`shm_ring`]: the single-producer single-consumer ring of fixed-size byte
//!   slots that lives in memory shared between processes (ergon-gateway's clients).
//! - [`handle`] and [`service`]: what the pieces above are for. A strategy thread
//!   submits through its [`handle::Handle`]; the loop runs [`service::Service`] as
//!   its handler, charges the budget on its own thread, sends, and answers each
//!   submission exactly once into the submitter's mailbox. [`build`] makes them all.
//!
//! Every atomic and cell here goes through `crate::sync`; the loom models in
//! `io/tests/loom_*.rs` check these structures under `--cfg ergon_loom`.
//!
//! What this must never do: lock, block a submitter, block the loop, allocate
//! after construction, or lose or duplicate a value.

pub mod handle;
pub mod mailbox;
pub mod ring;
pub mod seqlock;
pub mod service;
pub mod shm_ring;
pub mod stats;
pub mod wake;

pub use build::{build, BoundaryConfig, BuildError};

mod build {
    use super::handle::{Exchange, Handle};
    use super::mailbox::mailbox;
    use super::ring::{bounded, CapacityError};
    use super::service::{Service, Stopper};
    use super::stats::{stats_channel, StatsReader};
    use super::wake::pair;
    use crate::sync::{Arc, AtomicU8};

    /// Sizes of a boundary, all allocated by [`build`].
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct BoundaryConfig {
        /// Handles to make (one per submitting thread).
        pub handles: usize,
        /// Slots of the submit queue shared by all handles (a power of two).
        pub queue: usize,
        /// Answers one handle may be owed at once (a power of two): its mailbox
        /// size, and the number of exchanges it owns.
        pub per_handle: usize,
        /// Bytes of method, target, headers and body one request may take.
        pub max_request: usize,
        /// Bytes of response headers and body reserved per exchange (a larger
        /// response grows the buffer once, on the loop's receive path).
        pub max_response: usize,
        /// Most submissions the loop takes per turn (so responses keep flowing).
        pub per_turn: usize,
        /// How often the loop publishes the stats snapshot.
        pub stats_every_ns: i64,
        /// Record when each request went to the client and when its write returned
        /// ([`Answer::sending_at_ns`](super::handle::Answer::sending_at_ns),
        /// [`Answer::written_at_ns`](super::handle::Answer::written_at_ns)): two extra
        /// clock reads per request, for measurement.
        pub stamp: bool,
    }

    impl Default for BoundaryConfig {
        fn default() -> Self {
            BoundaryConfig {
                handles: 1,
                queue: 1024,
                per_handle: 64,
                max_request: 4096,
                max_response: 16 * 1024,
                per_turn: 64,
                stats_every_ns: 10_000_000,
                stamp: false,
            }
        }
    }

    /// A configuration [`build`] cannot make.
    #[non_exhaustive]
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum BuildError {
        /// A queue size is not a power of two in range.
        Capacity(CapacityError),
        /// `handles` must be between 1 and 65536.
        Handles(usize),
        /// `per_turn` must be at least 1.
        PerTurn,
        /// `max_request` and `max_response` must each be at most 1 GiB.
        Size(usize),
        /// The eventfd could not be made, as the operating system reported it.
        EventFd(std::io::ErrorKind),
    }

    impl core::fmt::Display for BuildError {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            match self {
                BuildError::Capacity(e) => write!(f, "{e}"),
                BuildError::Handles(n) => write!(f, "{n} handles: must be 1 to 65536"),
                BuildError::PerTurn => f.write_str("per_turn must be at least 1"),
                BuildError::Size(n) => {
                    write!(f, "{n} bytes per request or response: at most 1 GiB")
                }
                BuildError::EventFd(kind) => write!(f, "eventfd: {kind}"),
            }
        }
    }

    impl std::error::Error for BuildError {}

    impl BuildError {
        /// Who is at fault: the eventfd is [`Culprit::Os`](crate::Culprit::Os),
        /// every other variant a configuration the caller wrote
        /// ([`Culprit::Caller`](crate::Culprit::Caller)).
        pub fn culprit(&self) -> crate::Culprit {
            match self {
                BuildError::Capacity(e) => e.culprit(),
                BuildError::Handles(_) | BuildError::PerTurn | BuildError::Size(_) => {
                    crate::Culprit::Caller
                }
                BuildError::EventFd(_) => crate::Culprit::Os,
            }
        }
    }

    /// Builds the loop's [`Service`], `cfg.handles` [`Handle`]s, a [`StatsReader`]
    /// and a [`Stopper`]. Everything the boundary will ever use is allocated here.
    pub fn build(
        cfg: BoundaryConfig,
    ) -> Result<(Service, Vec<Handle>, StatsReader, Stopper), BuildError> {
        if cfg.handles == 0 || cfg.handles > usize::from(u16::MAX) + 1 {
            return Err(BuildError::Handles(cfg.handles));
        }
        if cfg.per_turn == 0 {
            return Err(BuildError::PerTurn);
        }
        // Offsets inside an exchange are u32.
        for size in [cfg.max_request, cfg.max_response] {
            if size > 1 << 30 {
                return Err(BuildError::Size(size));
            }
        }
        let (tx, rx) = bounded(cfg.queue).map_err(BuildError::Capacity)?;
        let (parker, waker) = pair().map_err(|e| BuildError::EventFd(e.kind()))?;
        let (publisher, reader) = stats_channel();
        let stop = Arc::new(AtomicU8::new(0));
        let mut outboxes = Vec::with_capacity(cfg.handles);
        let mut handles = Vec::with_capacity(cfg.handles);
        for i in 0..cfg.handles {
            let (outbox, inbox) = mailbox(cfg.per_handle).map_err(BuildError::Capacity)?;
            outboxes.push(outbox);
            let free = (0..cfg.per_handle)
                .map(|_| Box::new(Exchange::new(cfg.max_request, cfg.max_response)))
                .collect();
            handles.push(Handle {
                index: i as u16,
                submit: tx.clone(),
                waker: waker.clone(),
                inbox,
                free,
                next_id: 0,
                max_request: cfg.max_request,
                stop: stop.clone(),
            });
        }
        let service = Service {
            submit: rx,
            parker,
            outboxes,
            pending: Vec::with_capacity(cfg.handles * cfg.per_handle),
            stats: publisher,
            stats_every_ns: cfg.stats_every_ns,
            last_stats_ns: i64::MIN / 2,
            per_turn: cfg.per_turn,
            stamp: cfg.stamp,
            parked: false,
            stop: stop.clone(),
            taken: 0,
            settle: None,
        };
        Ok((service, handles, reader, Stopper { stop, waker }))
    }
}
