//! Stands in for [`crate::curl`] when the `curl` feature is off: a transport
//! that carries no pool and a finished transfer that cannot exist, so every
//! libcurl branch of the client compiles and is never taken. Each answer is a
//! constant the compiler folds away: the native path has no extra branch.

use std::os::raw::c_int;

use ergon_core::{Budget, Ticket};
use ergon_venues::response::Response;

use crate::http::{Headers, Request};
use crate::output::Output;
use crate::pool::{Pool, PoolId, Refused, RequestId};

/// A finished libcurl transfer: none exists without the feature.
#[derive(Debug)]
pub(crate) enum Finished {}

/// The libcurl transport without libcurl: it carries no pool.
#[derive(Debug)]
pub(crate) struct CurlTransport;

impl CurlTransport {
    #[inline]
    pub(crate) fn new(_epfd: c_int) -> Self {
        CurlTransport
    }

    #[inline]
    pub(crate) fn add_pool(&mut self, _pool: &Pool, _id: PoolId) {}

    #[inline]
    pub(crate) fn carries(&self, _pool: PoolId) -> bool {
        false
    }

    #[inline]
    pub(crate) fn owns(&self, _token: u64) -> bool {
        false
    }

    #[inline]
    pub(crate) fn idle(&self, _pool: PoolId) -> usize {
        0
    }

    #[inline]
    pub(crate) fn in_flight(&self) -> usize {
        0
    }

    #[inline]
    pub(crate) fn request(
        &mut self,
        _books: &mut Pool,
        _pool: PoolId,
        _req: &Request<'_>,
        ticket: Ticket,
        _deadline_ns: i64,
        _now: i64,
    ) -> Result<RequestId, Refused> {
        Err(Refused::UnknownPool(ticket))
    }

    #[inline]
    pub(crate) fn handle_event(&mut self, _token: u64, _events: u32, _now: i64) {}

    #[inline]
    pub(crate) fn handle_timeout(&mut self, _books: &mut Pool, _budget: &mut Budget, _now: i64) {}

    #[inline]
    pub(crate) fn poll_timeout(&self) -> Option<i64> {
        None
    }

    #[inline]
    pub(crate) fn has_output(&self) -> bool {
        false
    }

    #[inline]
    pub(crate) fn poll_output(
        &mut self,
        _books: &mut Pool,
        _budget: &mut Budget,
        _now: i64,
    ) -> Option<Output<Finished>> {
        None
    }

    #[inline]
    pub(crate) fn view<'h, 'a: 'h>(f: &'a Finished, _: &'h mut Headers<'a>) -> Response<'h> {
        match *f {}
    }

    #[inline]
    pub(crate) fn restore(&mut self, f: Finished) {
        match f {}
    }

    #[inline]
    pub(crate) fn close_all(&mut self) {}
}
