//! The one switch between std and loom primitives for the hand-off
//! ([`crate::handoff`]): a build with `--cfg ergon_loom` runs the same code under
//! loom's model checker:
//!
//! ```text
//! RUSTFLAGS="--cfg ergon_loom" cargo test --release -p ergon-lease --test loom_handoff
//! ```

#[cfg(not(ergon_loom))]
pub(crate) use std::sync::atomic::{fence, AtomicI64, AtomicU64, Ordering};
#[cfg(not(ergon_loom))]
pub(crate) use std::sync::Arc;

#[cfg(ergon_loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicI64, AtomicU64, Ordering};
#[cfg(ergon_loom)]
pub(crate) use loom::sync::Arc;
