//! Health that says why: from successive published snapshots ([`ergon_gateway::observe`]),
//! the reasons the gateway is not serving as it should. `/health` answers `200 ok`
//! without one, else `503` with one line per reason; `ergon-gateway --stats` prints the
//! same lines after its own, each prefixed `health `.
//!
//! The reasons (local throttling is not an execution error, but orders not sent for
//! hours while health is green is one):
//!
//! - `halted: bucket NAME since TIME`: a ban halted the bucket; only a person's
//!   `clear-halt` resumes it. TIME is when this monitor first saw the halt (within a
//!   publication, [`ergon_gateway::observe::PUBLISH_EVERY_NS`]), UTC.
//! - `degraded: budget: bucket NAME refused P% of N submits over the last Y s`: the
//!   budget refused more than [`HealthConfig::degraded_pct`] percent of the charges
//!   that named the bucket over the last [`HealthConfig::degraded_secs`] seconds
//!   (defaults 50 % over 60 s; `--degraded-pct`, `--degraded-secs`). No submits in the
//!   window is not degraded.
//! - `venue unreachable: N requests sent or attempted in the last Y s, none answered`:
//!   for [`HealthConfig::unreachable_secs`] (default 10 s; `--unreachable-secs`) the
//!   loop handed requests to the transport or refunded them unwritten (no connection)
//!   and no answer of any kind came back. The binary polls
//!   open orders every 500 ms while a client asks for them (or an unresolved
//!   order's id is watched), so such a gateway always has traffic to judge; one
//!   with no traffic at all is not judged here (a venue that refuses its
//!   connections shows as `reconnecting`, below).
//! - `reconnecting: N connects to the venue failed in a row, backing off: next
//!   attempt in X s`: from the second connect failure in a row (the transport's
//!   reconnect delay doubles per failure, with jitter, up to its cap: see
//!   `ergon_io::client::PoolConfig::reconnect_max_ns`), until a connect completes.
//! - `protection lapsed: ...`: the dead man's switch could not be refreshed in time
//!   (published by the switch through [`ergon_gateway::observe::Observed::set_protection`];
//!   absent while no switch publishes).
//! - `etcd lease lost`: the account-wide limits' lease is gone and the gateway runs on
//!   its safe share (published through [`ergon_gateway::observe::Observed::set_lease`]).
//!
//! What this must never do: read the live budget or run on the loop thread.

use std::collections::VecDeque;

use ergon_core::Stats as BucketStats;

use ergon_gateway::observe::{Lease, OpsSnapshot, Protection};

/// Thresholds of the health reasons.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HealthConfig {
    /// A bucket refusing more than this percentage of its submits ...
    pub degraded_pct: f64,
    /// ... over this many seconds is "degraded: budget".
    pub degraded_secs: f64,
    /// Requests sent for this many seconds without an answer: "venue unreachable".
    pub unreachable_secs: f64,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            degraded_pct: 50.0,
            degraded_secs: 60.0,
            unreachable_secs: 10.0,
        }
    }
}

/// One reason the gateway is unhealthy.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Reason {
    /// A ban halted the bucket.
    Halted {
        /// The bucket.
        bucket: String,
        /// When this monitor first saw it halted, Unix ms.
        since_unix_ms: i64,
    },
    /// The budget refuses too much of what names the bucket.
    DegradedBudget {
        /// The bucket.
        bucket: String,
        /// Percentage of its submits refused in the window.
        refused_pct: f64,
        /// Submits (admitted and refused) in the window.
        submits: u64,
        /// The window, seconds.
        secs: f64,
    },
    /// Requests go out, no answer comes back.
    VenueUnreachable {
        /// Requests sent or refunded unwritten in the window.
        sent: u64,
        /// The window, seconds.
        secs: f64,
    },
    /// Connects to the venue keep failing; the transport backs off between them.
    Reconnecting {
        /// Connect failures in a row.
        failures: u32,
        /// Seconds until the next attempt.
        next_secs: f64,
    },
    /// The dead man's switch could not be refreshed in time.
    ProtectionLapsed {
        /// Seconds past the switch's end (negative: before it).
        past_secs: f64,
    },
    /// The etcd lease of account-wide limits is lost.
    LeaseLost,
}

impl Reason {
    /// A short name for metrics labels and alerts (`halted`, `degraded_budget`,
    /// `venue_unreachable`, `reconnecting`, `protection_lapsed`, `lease_lost`).
    pub fn kind(&self) -> &'static str {
        match self {
            Reason::Halted { .. } => "halted",
            Reason::DegradedBudget { .. } => "degraded_budget",
            Reason::VenueUnreachable { .. } => "venue_unreachable",
            Reason::Reconnecting { .. } => "reconnecting",
            Reason::ProtectionLapsed { .. } => "protection_lapsed",
            Reason::LeaseLost => "lease_lost",
        }
    }

    /// The bucket the reason names, if any.
    pub fn bucket(&self) -> Option<&str> {
        match self {
            Reason::Halted { bucket, .. } | Reason::DegradedBudget { bucket, .. } => Some(bucket),
            _ => None,
        }
    }
}

impl core::fmt::Display for Reason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Reason::Halted {
                bucket,
                since_unix_ms,
            } => write!(f, "halted: bucket {bucket} since {}", ergon_gateway::wall::utc(*since_unix_ms)),
            Reason::DegradedBudget {
                bucket,
                refused_pct,
                submits,
                secs,
            } => write!(
                f,
                "degraded: budget: bucket {bucket} refused {refused_pct:.0}% of {submits} submits over the last {secs} s"
            ),
            Reason::VenueUnreachable { sent, secs } => write!(
                f,
                "venue unreachable: {sent} requests sent or attempted in the last {secs} s, none answered"
            ),
            Reason::Reconnecting {
                failures,
                next_secs,
            } => write!(
                f,
                "reconnecting: {failures} connects to the venue failed in a row, backing off: next attempt in {next_secs:.1} s"
            ),
            Reason::ProtectionLapsed { past_secs } => write!(
                f,
                "protection lapsed: the dead man's switch was not refreshed ({past_secs:.1} s past its end)"
            ),
            Reason::LeaseLost => write!(f, "etcd lease lost: running on the safe share"),
        }
    }
}

#[derive(Clone, Debug)]
struct Sample {
    at_ns: i64,
    /// Per bucket: admitted, refused.
    buckets: Vec<(u64, u64)>,
    sent: u64,
    /// The most refunds of any bucket (a request refunded, not one byte written).
    refunds: u64,
    answers: u64,
}

fn answers(g: &ergon_gateway::Stats) -> u64 {
    g.applied + g.rejected + g.throttled + g.banned + g.clock_skew + g.polls + g.reconciled
}

fn refused(s: &BucketStats) -> u64 {
    let r = s.refusals;
    r.full + r.held + r.halted + r.too_big
}

/// Turns successive snapshots into reasons; one per monitoring thread.
#[derive(Clone, Debug)]
pub struct HealthMonitor {
    cfg: HealthConfig,
    names: Vec<String>,
    history: VecDeque<Sample>,
    halted_since: Vec<Option<i64>>,
}

impl HealthMonitor {
    /// A monitor of the buckets `names` (indexed like the budget's ids).
    pub fn new(cfg: HealthConfig, names: Vec<String>) -> Self {
        HealthMonitor {
            cfg,
            halted_since: vec![None; names.len()],
            names,
            history: VecDeque::new(),
        }
    }

    /// The thresholds.
    pub fn config(&self) -> &HealthConfig {
        &self.cfg
    }

    /// Takes one snapshot, seen at `mono_ns` on the monitor's own monotonic clock and
    /// `wall_unix_ms`; the reasons now (empty: healthy).
    pub fn observe(
        &mut self,
        mono_ns: i64,
        wall_unix_ms: i64,
        buckets: &[BucketStats],
        ops: &OpsSnapshot,
    ) -> Vec<Reason> {
        let mut out = Vec::new();
        let name = |i: usize| {
            self.names
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("#{i}"))
        };
        if self.halted_since.len() < buckets.len() {
            self.halted_since.resize(buckets.len(), None);
        }
        for (i, b) in buckets.iter().enumerate() {
            if b.halted {
                let since = *self.halted_since[i].get_or_insert(wall_unix_ms);
                out.push(Reason::Halted {
                    bucket: name(i),
                    since_unix_ms: since,
                });
            } else {
                self.halted_since[i] = None;
            }
        }
        let now = Sample {
            at_ns: mono_ns,
            buckets: buckets.iter().map(|b| (b.admitted, refused(b))).collect(),
            sent: ops.gateway.sent,
            refunds: buckets.iter().map(|b| b.refunds).max().unwrap_or(0),
            answers: answers(&ops.gateway),
        };
        let secs_ns = |s: f64| (s * 1e9) as i64;
        // The newest sample at least `window` old, if the history reaches that far.
        let base = |window: i64| {
            self.history
                .iter()
                .rev()
                .find(|s| s.at_ns <= mono_ns - window)
        };
        if let Some(b) = base(secs_ns(self.cfg.degraded_secs)) {
            for (i, (&(a1, r1), &(a0, r0))) in now.buckets.iter().zip(&b.buckets).enumerate() {
                let (a, r) = (a1.saturating_sub(a0), r1.saturating_sub(r0));
                let n = a + r;
                let pct = r as f64 * 100.0 / n.max(1) as f64;
                if n > 0 && pct > self.cfg.degraded_pct {
                    out.push(Reason::DegradedBudget {
                        bucket: name(i),
                        refused_pct: pct,
                        submits: n,
                        secs: self.cfg.degraded_secs,
                    });
                }
            }
        }
        if let Some(b) = base(secs_ns(self.cfg.unreachable_secs)) {
            // Sends, and requests refunded because not one byte could be written
            // (no connection to the venue).
            let sent = now.sent.saturating_sub(b.sent) + now.refunds.saturating_sub(b.refunds);
            if sent > 0 && now.answers == b.answers {
                out.push(Reason::VenueUnreachable {
                    sent,
                    secs: self.cfg.unreachable_secs,
                });
            }
        }
        // One failed connect retries at once; from the second in a row the
        // transport is backing off, and says when it tries again.
        let (failures, retry_at) = ops.reconnect;
        if failures >= 2 {
            out.push(Reason::Reconnecting {
                failures,
                next_secs: (retry_at.saturating_sub(ops.now_ns)).max(0) as f64 / 1e9,
            });
        }
        if let Protection::Lapsed { armed_until_ns } = ops.protection {
            out.push(Reason::ProtectionLapsed {
                past_secs: (ops.now_ns - armed_until_ns) as f64 / 1e9,
            });
        }
        if ops.lease == Lease::Lost {
            out.push(Reason::LeaseLost);
        }
        // Keep one sample older than the longest window, drop the rest of the old.
        let longest = secs_ns(self.cfg.degraded_secs.max(self.cfg.unreachable_secs));
        while self
            .history
            .get(1)
            .is_some_and(|s| s.at_ns <= mono_ns - longest)
        {
            self.history.pop_front();
        }
        self.history.push_back(now);
        out
    }
}

/// The body of `/health` for `reasons`: `ok`, or one line per reason.
pub fn body(reasons: &[Reason]) -> String {
    if reasons.is_empty() {
        return "ok\n".into();
    }
    reasons.iter().map(|r| format!("{r}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    fn bucket(admitted: u64, refused_full: u64, halted: bool) -> BucketStats {
        let mut b = BucketStats {
            admitted,
            halted,
            ..BucketStats::default()
        };
        b.refusals.full = refused_full;
        b
    }

    fn monitor() -> HealthMonitor {
        let cfg = HealthConfig {
            degraded_pct: 50.0,
            degraded_secs: 2.0,
            unreachable_secs: 3.0,
        };
        HealthMonitor::new(cfg, vec!["W".into(), "O".into()])
    }

    #[test]
    fn a_halt_is_named_with_its_start_until_it_clears() {
        let mut m = monitor();
        let ops = OpsSnapshot::default();
        let r = m.observe(0, 1_000, &[bucket(0, 0, false), bucket(0, 0, true)], &ops);
        assert_eq!(
            r,
            [Reason::Halted {
                bucket: "O".into(),
                since_unix_ms: 1_000
            }]
        );
        let r = m.observe(S, 2_000, &[bucket(0, 0, false), bucket(0, 0, true)], &ops);
        assert_eq!(
            r[0].to_string(),
            "halted: bucket O since 1970-01-01T00:00:01.000Z"
        );
        assert!(m
            .observe(2 * S, 3_000, &[bucket(0, 0, false); 2], &ops)
            .is_empty());
    }

    #[test]
    fn a_bucket_refusing_over_the_threshold_for_the_window_is_degraded() {
        let mut m = monitor();
        let ops = OpsSnapshot::default();
        let b = |a, r| [bucket(a, r, false), bucket(a, 0, false)];
        assert!(m.observe(0, 0, &b(10, 0), &ops).is_empty());
        // 1 s in: the window (2 s) is not covered yet.
        assert!(m.observe(S, 0, &b(12, 8), &ops).is_empty());
        // 2 s in: 3 admitted, 9 refused since the start = 75 %.
        let r = m.observe(2 * S, 0, &b(13, 9), &ops);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(
            r[0].to_string(),
            "degraded: budget: bucket W refused 75% of 12 submits over the last 2 s"
        );
        // 4 s in: nothing refused since 2 s ago: healthy again.
        assert!(m.observe(4 * S, 0, &b(20, 9), &ops).is_empty());
        // Exactly at the threshold is not over it.
        assert!(m.observe(6 * S, 0, &b(25, 14), &ops).is_empty());
    }

    #[test]
    fn requests_without_answers_for_the_window_are_an_unreachable_venue() {
        let mut m = monitor();
        let mut ops = OpsSnapshot::default();
        ops.gateway.sent = 10;
        ops.gateway.polls = 10;
        assert!(m.observe(0, 0, &[], &ops).is_empty());
        ops.gateway.sent = 16;
        assert!(
            m.observe(2 * S, 0, &[], &ops).is_empty(),
            "window not covered"
        );
        let r = m.observe(3 * S, 0, &[], &ops);
        assert_eq!(r, [Reason::VenueUnreachable { sent: 6, secs: 3.0 }]);
        ops.gateway.polls = 11;
        assert!(m.observe(4 * S, 0, &[], &ops).is_empty(), "an answer came");
        // No traffic at all is not unreachable.
        assert!(m.observe(9 * S, 0, &[], &ops).is_empty());
        // Refunds (no connection: not one byte written) count as attempts.
        let mut b = bucket(0, 0, false);
        assert!(m.observe(10 * S, 0, &[b], &ops).is_empty());
        b.refunds = 4;
        let r = m.observe(13 * S, 0, &[b], &ops);
        assert_eq!(r, [Reason::VenueUnreachable { sent: 4, secs: 3.0 }]);
    }

    #[test]
    fn a_lapsed_switch_and_a_lost_lease_are_reasons_when_published() {
        let mut m = monitor();
        let ops = OpsSnapshot {
            now_ns: 5 * S,
            protection: Protection::Lapsed {
                armed_until_ns: 3 * S,
            },
            lease: Lease::Lost,
            ..OpsSnapshot::default()
        };
        let r = m.observe(0, 0, &[], &ops);
        assert_eq!(
            r,
            [
                Reason::ProtectionLapsed { past_secs: 2.0 },
                Reason::LeaseLost
            ]
        );
        assert_eq!(body(&r).lines().count(), 2);
        assert_eq!(body(&[]), "ok\n");
        let armed = OpsSnapshot {
            protection: Protection::Armed { armed_until_ns: 9 },
            lease: Lease::Held,
            ..OpsSnapshot::default()
        };
        assert!(m.observe(S, 0, &[], &armed).is_empty());
    }

    #[test]
    fn a_venue_that_refuses_connects_is_a_reason_once_the_backoff_starts() {
        let mut m = monitor();
        let one = OpsSnapshot {
            now_ns: 5 * S,
            reconnect: (1, 5 * S + 20_000_000),
            ..OpsSnapshot::default()
        };
        assert!(
            m.observe(0, 0, &[], &one).is_empty(),
            "one failure retries at once"
        );
        let backing_off = OpsSnapshot {
            now_ns: 5 * S,
            reconnect: (7, 6 * S + 500_000_000),
            ..OpsSnapshot::default()
        };
        let r = m.observe(0, 0, &[], &backing_off);
        assert_eq!(
            r,
            [Reason::Reconnecting {
                failures: 7,
                next_secs: 1.5
            }]
        );
        assert_eq!(r[0].kind(), "reconnecting");
        assert_eq!(
            body(&r),
            "reconnecting: 7 connects to the venue failed in a row, backing off: next attempt in 1.5 s\n"
        );
    }
}
