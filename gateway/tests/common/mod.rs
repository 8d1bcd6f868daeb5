//! Test support shared with the io tests: the counting allocator
//! (`io/tests/common/alloc.rs`, one copy for both crates).

#[path = "../../../io/tests/common/alloc.rs"]
pub mod alloc;
