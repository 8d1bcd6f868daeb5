//! The profile switch: one request's admission, execution and 5xx answer, handed to
//! the profile the emulator plays. The server calls only these; the profiles never
//! call back here.

use std::net::IpAddr;

use crate::config::Profile;
use crate::engine::state::{Admission, Venue};
use crate::http::{Request, Response};
use crate::profiles::binance::request::BinanceOp;
use crate::profiles::bybit::{self, BybitOp};
use crate::profiles::deribit::{self, DeribitOp};
use crate::profiles::hyperliquid::{self, HlOp};
use crate::profiles::okx::{self, OkxOp};

/// An admitted request of any profile, ready to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// Binance Spot or USD-M futures.
    Binance(BinanceOp),
    /// Bybit v5.
    Bybit(BybitOp),
    /// OKX v5.
    Okx(OkxOp),
    /// Deribit v2.
    Deribit(DeribitOp),
    /// Hyperliquid.
    Hyperliquid(HlOp),
}

/// Wraps a profile's admission into the dispatcher's.
fn wrap<O>(a: Admission<O>, f: impl FnOnce(O) -> Op) -> Admission<Op> {
    match a {
        Admission::Final(r) => Admission::Final(r),
        Admission::Run {
            op,
            account,
            headers,
            fault,
        } => Admission::Run {
            op: f(op),
            account,
            headers,
            fault,
        },
    }
}

impl Venue {
    /// Step 1: everything the venue decides at receipt (see each profile).
    pub(crate) fn admit(&mut self, req: &Request, ip: IpAddr, now: i64) -> Admission<Op> {
        self.report.requests += 1;
        self.report.count_endpoint(&req.method, &req.path);
        self.now_hint = now;
        self.expire_switches(now);
        match self.cfg.profile {
            Profile::BinanceSpot | Profile::BinanceFutures => {
                wrap(self.admit_binance(req, ip, now), Op::Binance)
            }
            Profile::Bybit => wrap(self.admit_bybit(req, ip, now), Op::Bybit),
            Profile::Okx => wrap(self.admit_okx(req, ip, now), Op::Okx),
            Profile::Deribit => wrap(self.admit_deribit(req, ip, now), Op::Deribit),
            Profile::Hyperliquid => wrap(self.admit_hyperliquid(req, ip, now), Op::Hyperliquid),
        }
    }

    /// Step 2: runs an admitted request at `now`, admitted at `admitted` (the same
    /// instant unless a fault delayed it).
    pub(crate) fn execute(&mut self, op: Op, account: usize, now: i64, admitted: i64) -> Response {
        match op {
            Op::Binance(b) => self.execute_binance(b, account, now, admitted),
            Op::Bybit(b) => self.execute_bybit(b, account, now),
            Op::Okx(o) => self.execute_okx(o, account, now),
            Op::Deribit(d) => self.execute_deribit(d, account, now),
            Op::Hyperliquid(h) => self.execute_hyperliquid(h, now),
        }
    }

    /// An admitted request that never reached the engine (a fault closed or failed
    /// it first).
    pub(crate) fn not_executed(&mut self, op: &Op, account: usize, admitted: i64) {
        if let Op::Binance(b) = op {
            self.binance_not_executed(b, account, admitted);
        }
    }

    /// The answer of a 5xx fault, `executed` or not, as the profile writes it.
    pub(crate) fn server_error(&self, executed: bool) -> Response {
        match self.cfg.profile {
            Profile::BinanceSpot | Profile::BinanceFutures => self.binance_server_error(executed),
            Profile::Bybit => bybit::server_error(executed, self.now_hint),
            Profile::Okx => okx::server_error(executed),
            Profile::Deribit => deribit::server_error(executed, self.now_hint),
            Profile::Hyperliquid => hyperliquid::server_error(executed),
        }
    }
}
