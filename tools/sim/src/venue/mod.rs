//! The venue profiles beyond Binance Spot ([`mod@crate::run`]): Bybit v5 linear
//! ([`bybit`]), with its batches (`/v5/order/create-batch`). Which one a seed
//! plays: [`crate::profile`].

pub mod bybit;
