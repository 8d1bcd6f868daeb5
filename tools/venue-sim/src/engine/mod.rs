//! The machinery every profile runs on, with no venue's rules in it: the order
//! book records, the venue state (limits, bans, registry, faults, report) and the
//! stream hub.

pub(crate) mod address;
pub(crate) mod book;
pub(crate) mod credits;
pub(crate) mod hub;
pub(crate) mod rules;
pub(crate) mod state;
pub(crate) mod switch;
