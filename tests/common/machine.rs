//! The machine, as the tests of one binary share it.
//!
//! Cargo runs the tests of a binary in parallel. A test that asserts a rate (the
//! binding limit used at 90 %, a fair share, a class ceiling) measures the product
//! under the latency it was configured for: with its gateway, emulator and client
//! processes competing against a dozen others on two cores, answers arrive later
//! than the budget's boundary guard and the budget rightly turns conservative,
//! which the test would read as the product's fault. Such a test takes the
//! machine [`alone`]; every other test of its binary takes it [`shared`], so the
//! functional tests still run beside each other, never beside a measurement.
//! Included by path (`#[path = ...] mod machine;`) in each binary that measures.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

static MACHINE: RwLock<()> = RwLock::new(());

/// For a test that measures a rate: no other test of this binary runs meanwhile.
pub fn alone() -> RwLockWriteGuard<'static, ()> {
    // A test that failed while holding it poisoned it; the machine is free anyway.
    MACHINE.write().unwrap_or_else(|e| e.into_inner())
}

/// For every other test of a binary that measures: runs beside the others, never
/// beside a measurement.
pub fn shared() -> RwLockReadGuard<'static, ()> {
    MACHINE.read().unwrap_or_else(|e| e.into_inner())
}
