//! One module per venue played: each adds to [`crate::engine::state::Venue`] what
//! that venue decides at receipt (admit) and how it runs and answers a request
//! (execute). Profiles never call each other; `crate::dispatch` picks one.

pub(crate) mod binance;
pub(crate) mod bybit;
pub(crate) mod deribit;
pub(crate) mod hyperliquid;
pub(crate) mod instruments;
pub(crate) mod okx;
