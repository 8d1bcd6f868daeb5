//! The WebSocket protocol as a server speaks it, with no venue in it.

pub(crate) mod frame;
