//! Process faults: the gateway killed at a step and started again as the daemon
//! starts, on the daemon's own files. In a share of the runs the gateway keeps,
//! from its first life, the daemon's journal of new orders in flight
//! ([`Journal`]), its charges file ([`ChargeLog`]) and its halts file
//! ([`HaltLog`]), in a directory of its own on a tmpfs. A kill drops everything
//! the process held (the gateway, its ledger and budget; nothing it held is
//! asked again), while what it wrote stays on the network and meets its fate.
//! The next life waits until the dead one's charges leave room for its
//! bootstrap's reads in the limits the file kept ([`boot_room`], as
//! `Gateway::start` does), builds a fresh budget with the charges file replayed
//! into it ([`start_budget`]), restores the halts, opens the journal (a new boot
//! epoch for its ids) and queries each order the journal still holds under the
//! gateway's rule ([`Recovery`], the daemon's code).
//!
//! What the checks hear: a new order in flight at a kill ends with the event of
//! its recovery (found, never ran, or Unresolved; a replace's new order as its
//! part 0); a request the journal does not keep (a cancel) is lost with the
//! process, owed nothing (the daemon promises nothing for it); an order that
//! ended Unresolved keeps its entry, and a later recovery that finds it is its
//! Late. The venue's limits and the ban checks stand across lives.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use ergon_core::Budget;
use ergon_gateway::shm::{ChargeLog, Recent};
use ergon_gateway::{
    boot_room, start_budget, Event, Gateway, ItemFate, Prepared, BAN_END_MARGIN_NS, IP_GATE,
};
use ergon_gatewayd::shm::{
    outcome_unknown, Driven, Halt, HaltLog, Journal, JournalOwner, Recovery,
};
use ergon_venue_sim::sansio::Received;
use ergon_venues::response::Header;

use super::adapter::Adapter;
use super::{Sim, Step, IP, MS, SEC, T0, VENUE_MS0};
use crate::check::{Final, Kind, What};
use crate::rng::Rng;

/// Mixed into the seed for the kills (a stream of its own: the runs without
/// kills stay what they were).
const KILLS_STREAM: u64 = 0x4b11_1ed0_5ee0_0000;
/// Journal entries (the daemon's: clients times requests in flight each).
const JOURNAL_CAP: usize = 1024;
/// A turn of the daemon's loop while a recovery waits for room.
const TURN_NS: i64 = 100 * MS;
/// Runs of this process so far: keeps two runs of one seed (a test and its
/// shrink, threads of one test binary) in directories of their own.
static RUNS: AtomicU64 = AtomicU64::new(0);

/// How the run started its gateway: each restart starts it so again.
pub(crate) struct Start {
    /// The account's API key and secret.
    pub(crate) keys: (String, String),
    /// Cancel-replaces with ALLOW_FAILURE.
    pub(crate) allow_failure: bool,
    /// The open-orders polls on.
    pub(crate) polls: bool,
}

/// The files of one life and what it is recovering.
struct Life {
    journal: Journal,
    halts: HaltLog,
    recovery: Recovery,
    /// A recovery query's journal entry -> the strategy's request.
    recovering: BTreeMap<u32, u64>,
}

/// The process faults of one run.
pub(super) struct Proc {
    dir: PathBuf,
    owner: JournalOwner,
    /// The account's keys (the venue's limits are read again at each start).
    keys: (String, String),
    seed: u64,
    allow_failure: bool,
    polls: bool,
    life: Option<Life>,
    /// Each request's journal entry (new orders, while live), by tag.
    entries: BTreeMap<u64, u32>,
    /// Requests whose part 0 (a replace's new order) ended Unresolved.
    part0_unresolved: BTreeSet<u64>,
    query: Prepared,
    rng: Rng,
    kills_left: u32,
    turn_at: i64,
    /// Kills so far.
    pub(super) kills: u64,
    /// 429s earlier lives were answered.
    pub(super) throttled: u64,
    /// Orders earlier lives recovered (and of them, found).
    recovered: (u64, u64),
    /// Bootstrap reads of a restart the venue refused (a failure but for a ban
    /// the run injected): the daemon's bootstrap holds and tries again, but the
    /// venue counted the refusal.
    pub(super) boot_refused: u64,
}

impl Proc {
    /// Orders recovered in every life (and of them, found at the venue).
    pub(super) fn recovered(&self) -> (u64, u64) {
        let now = self.life.as_ref().map_or((0, 0), |l| l.recovery.recovered);
        (self.recovered.0 + now.0, self.recovered.1 + now.1)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The wall clock the files keep time in (ms since the Unix epoch), from ours.
fn wall_ms(now: i64) -> i64 {
    VENUE_MS0 + (now - T0) / MS
}

fn files(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    (
        dir.join("journal"),
        dir.join("journal.charges"),
        dir.join("halts"),
    )
}

impl<A: Adapter> Sim<A> {
    /// Whether the gateway is dead (between a kill and its restart).
    pub(super) fn dead(&self) -> bool {
        self.proc.as_ref().is_some_and(|p| p.life.is_none())
    }

    /// Decides whether run `seed` kills its gateway; if so, opens the daemon's
    /// files for the first life and schedules the first kill.
    pub(crate) fn arm_kills(&mut self, seed: u64, start: Start) {
        let mut rng = Rng::new(seed ^ KILLS_STREAM);
        if !self.p.faults || !rng.chance(self.p.kills_per_mille) {
            return;
        }
        let base = Path::new("/dev/shm");
        let base = match base.is_dir() {
            true => base.to_path_buf(),
            false => std::env::temp_dir(),
        };
        let n = RUNS.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("ergon-sim-{}-{n}-seed-{seed}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            self.out.violations.push(format!("{}: {e}", dir.display()));
            return;
        }
        let owner = JournalOwner::new(A::NAME, "http://sim", &start.keys.0);
        let kills_left = rng.range(1, 4) as u32;
        let first = T0 + rng.range(0, self.p.seconds * SEC);
        self.proc = Some(Box::new(Proc {
            dir,
            owner,
            keys: start.keys,
            seed,
            allow_failure: start.allow_failure,
            polls: start.polls,
            life: None,
            entries: BTreeMap::new(),
            part0_unresolved: BTreeSet::new(),
            query: Prepared::with_capacity(1024),
            rng,
            kills_left,
            turn_at: 0,
            kills: 0,
            throttled: 0,
            recovered: (0, 0),
            boot_refused: 0,
        }));
        let now = self.net.now;
        if let Err(e) = self.open_files(now, Recent::default()) {
            self.out.violations.push(e);
            self.proc = None;
            return;
        }
        self.at(first, Step::Kill);
    }

    /// Opens the journal, the halts file and a new charges file for the gateway
    /// and budget in place, as the daemon does at start; returns the orders the
    /// journal held.
    fn open_files(&mut self, now: i64, recent: Recent) -> Result<(), String> {
        let Some(p) = self.proc.as_mut() else {
            return Ok(());
        };
        let (journal, charges, halts) = files(&p.dir);
        let wall = wall_ms(now);
        let (j, live) = Journal::open(&journal, JOURNAL_CAP, wall as u64, &p.owner)
            .map_err(|e| format!("journal: {e}"))?;
        let mut halts = HaltLog::open(&halts).map_err(|e| format!("halts: {e}"))?;
        halts.restore(&mut self.net.budget, now, wall)?;
        let log = ChargeLog::create(&charges, &self.net.budget, &recent, now, wall * MS)
            .map_err(|e| format!("charges: {e}"))?;
        self.gw
            .set_boot_epoch(j.epoch())
            .map_err(|e| format!("epoch: {e:?}"))?;
        self.gw.keep_charges(log, now);
        let mut recovering = BTreeMap::new();
        for (i, f) in &live {
            if let Some(tag) = self.ledger.tag_of(&f.id) {
                recovering.insert(*i, tag);
            }
        }
        p.life = Some(Life {
            journal: j,
            halts,
            recovery: Recovery::new(live),
            recovering,
        });
        Ok(())
    }

    /// The process dies: nothing it held is asked again. What it wrote stays on
    /// the network (the venue still takes it as its fate says); no answer
    /// reaches it.
    pub(super) fn kill(&mut self) {
        let now = self.net.now;
        let Some(p) = self.proc.as_mut() else {
            return;
        };
        let Some(life) = p.life.take() else {
            return;
        };
        // The journal keeps the new orders this life recorded and those it was
        // recovering still.
        let kept: BTreeSet<u64> = p
            .entries
            .keys()
            .chain(life.recovering.values())
            .copied()
            .collect();
        p.recovered.0 += life.recovery.recovered.0;
        p.recovered.1 += life.recovery.recovered.1;
        drop(life);
        p.kills += 1;
        p.throttled += self.gw.stats().throttled;
        for o in &mut self.net.outs {
            o.reported = true;
            o.ticket = None;
            o.flight = None;
        }
        // Requests in flight the journal does not keep died with it.
        for tag in self.ledger.open_tags() {
            if !kept.contains(&tag) {
                self.ledger.lost_with_process(tag);
            }
        }
        p.entries.clear();
        p.part0_unresolved.clear();
        let t = now + p.rng.range(50 * MS, 3 * SEC);
        self.at(t, Step::Restart);
    }

    /// A new process starts on the dead one's files, as the daemon does.
    pub(super) fn restart(&mut self) {
        if let Err(e) = self.try_restart() {
            let t = self.net.now;
            self.out
                .violations
                .push(format!("t={t}: the gateway could not restart: {e}"));
        }
    }

    fn try_restart(&mut self) -> Result<(), String> {
        let (now, venue_ms) = (self.net.now, self.venue_ms());
        let Some(p) = self.proc.as_mut() else {
            return Ok(());
        };
        let (_, charges, halts) = files(&p.dir);
        // As the daemon starts: nothing sent into a ban its halts file records.
        let mut halts = HaltLog::open(&halts).map_err(|e| format!("halts: {e}"))?;
        let wall = wall_ms(now);
        // And past the ban's end by the daemon's margin.
        let ban_end = halts
            .halts()
            .iter()
            .filter(|h| h.bucket == IP_GATE)
            .map(|h| {
                h.until_ms
                    .saturating_mul(MS)
                    .saturating_add(BAN_END_MARGIN_NS)
            })
            .filter(|&end_ns| end_ns > wall * MS)
            .max();
        if let Some(end_ns) = ban_end {
            self.at(now + (end_ns - wall * MS), Step::Restart);
            return Ok(());
        }
        let recent =
            ChargeLog::read(&charges, now, wall * MS).map_err(|e| format!("charges: {e}"))?;
        // As `Gateway::start`: nothing read before the dead process's charges
        // leave room for the bootstrap's reads in its limits.
        let room = boot_room(recent.limits(), recent.charged(), now);
        if room > now {
            self.at(room, Step::Restart);
            return Ok(());
        }
        // The bootstrap's read of the venue's limits, which the venue counts.
        let info = match self.venue.admit(A::BOOT_READ, IP, venue_ms) {
            Received::Run(a) => self.venue.execute(a, venue_ms),
            Received::Answer(r) => {
                // Refused: the daemon's bootstrap holds for the venue's wait and
                // tries again; a ban ends the start, recorded in the halts file
                // (the next start waits for its end and comes up halted).
                p.boot_refused += 1;
                // The hold before it left room for it in the dead process's
                // windows and past its holds: a 429 or a ban is a failure, but
                // for another sender on the IP (its use and its own 429's
                // Retry-After, inside which the venue bans, are no gateway's
                // to know before an answer) and for a ban the run injected
                // (one the dead process never heard is met first by whatever
                // the next process sends).
                let excused =
                    self.other_every > 0 || (r.status == A::BAN_STATUS && self.out.bans > 0);
                if !excused {
                    self.out.violations.push(format!(
                        "t={now}: a restart's bootstrap read (exchangeInfo) was answered {}",
                        r.status
                    ));
                }
                let wait_s = r
                    .headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("retry-after"))
                    .and_then(|(_, v)| v.parse::<i64>().ok())
                    .unwrap_or(1)
                    .max(1);
                if r.status == A::BAN_STATUS {
                    let until_ms = wall + wait_s * 1_000;
                    halts
                        .record(Halt::new(IP_GATE, until_ms, "bootstrap: IP banned"))
                        .map_err(|e| format!("halts: {e}"))?;
                }
                self.at(now + wait_s * SEC, Step::Restart);
                return Ok(());
            }
        };
        let mut b = Budget::builder();
        let mut acct = A::open_account(&info.body, &p.keys, p.allow_failure, &mut b, now, venue_ms);
        // The WebSocket API lane, as the daemon's start builds it.
        let ws_connects = self.ws.is_some().then(|| crate::ws::declare(&mut b));
        let headers: Vec<Header<'_>> = info
            .headers
            .iter()
            .map(|(k, v)| Header {
                name: k.as_bytes(),
                value: v.as_bytes(),
            })
            .collect();
        let budget = start_budget(b, &mut acct, recent.charged(), &headers, now)
            .map_err(|e| format!("{e:?}"))?;
        let lane_seed = p.seed.wrapping_add(p.kills);
        let lane = ws_connects.and_then(|c| A::lane(&acct, c, &budget, lane_seed));
        let mut gw =
            Gateway::new(acct, "BTCUSDT", 64, A::REQUEST_BYTES).map_err(|e| format!("{e:?}"))?;
        if let Some(lane) = lane {
            gw.set_ws_api(lane);
        }
        gw.set_seed(p.seed.wrapping_add(p.kills));
        if p.polls {
            gw.poll_open_orders(super::POLL_EVERY_NS);
        }
        // The dead process's gateway and budget are dropped here.
        self.gw = gw;
        self.net.budget = budget;
        self.open_files(now, recent)?;
        let Some(p) = self.proc.as_mut() else {
            return Ok(());
        };
        p.kills_left = p.kills_left.saturating_sub(1);
        // Half the time the next kill comes soon, often while the recovery's
        // queries are still out.
        if p.kills_left > 0 && p.rng.chance(500) {
            let t = now + p.rng.range(MS, 2 * SEC);
            if t < self.end_at {
                self.at(t, Step::Kill);
            }
        }
        Ok(())
    }

    /// A new order about to be submitted is written in the journal first, as
    /// the daemon's hub does; false (and its final event given) if the journal
    /// holds its id already.
    pub(crate) fn journal_new(&mut self, tag: u64) -> bool {
        let Some(p) = self.proc.as_mut() else {
            return true;
        };
        let (Some(life), Some(cid)) = (p.life.as_mut(), self.ledger.placed_cid(tag)) else {
            return true;
        };
        let held =
            ergon_venues::endpoint::ClientOrderId::new(cid).is_ok_and(|id| life.journal.holds(&id));
        if held {
            let f = Final {
                tag,
                what: What::DuplicateId,
            };
            self.take(Some(Some(f)));
            return false;
        }
        if let Some(e) = life.journal.record("BTCUSDT", cid) {
            p.entries.insert(tag, e);
        }
        true
    }

    /// Each turn: the recovery's queries as the gateway has room, the halts
    /// file brought up to date.
    pub(super) fn proc_turn(&mut self) {
        let now = self.net.now;
        let Some(p) = self.proc.as_mut() else {
            return;
        };
        let Some(life) = p.life.as_mut() else {
            return;
        };
        let mut api = Driven {
            gw: &mut self.gw,
            wire: &mut self.net,
        };
        life.recovery
            .step(&mut api, &mut p.query, Some(&mut life.journal));
        if life.halts.changed(&self.net.budget) {
            if let Err(e) = life.halts.sync(&self.net.budget, now, wall_ms(now)) {
                self.out.violations.push(format!("halts: {e}"));
            }
        }
        if life.recovery.to_query() > 0 && p.turn_at <= now {
            p.turn_at = now + TURN_NS;
            self.at(now + TURN_NS, Step::Turn);
        }
    }

    /// One event of the gateway, before the checks hear it: a recovery's
    /// (settled by [`Recovery`], its outcome told to the request it recovers),
    /// or a request's (its journal entry cleared at a definite final event).
    pub(super) fn see(&mut self, e: &Event<'_>) {
        let Some(p) = self.proc.as_mut() else {
            return;
        };
        let Some(life) = p.life.as_mut() else {
            return;
        };
        let tag = e.tag();
        if Recovery::owns(tag) {
            life.recovery.on_event(Some(&mut life.journal), e);
            if !e.is_final() {
                return;
            }
            let Some(req) = life.recovering.remove(&(tag as u32)) else {
                return;
            };
            let found = match *e {
                Event::Reconciled { found, .. } => Some(found),
                _ => None,
            };
            self.recovered(req, found);
            return;
        }
        if let Event::Item {
            item: 0,
            fate: ItemFate::Unresolved,
            ..
        } = e
        {
            p.part0_unresolved.insert(tag);
        }
        if !e.is_final() {
            return;
        }
        // The hub's rule: an order whose outcome stays unknown keeps its entry.
        let part0 = p
            .part0_unresolved
            .remove(&tag)
            .then_some(ItemFate::Unresolved);
        let unknown = outcome_unknown(e, part0);
        if let Some(entry) = p.entries.remove(&tag) {
            if !unknown {
                life.journal.clear(entry);
            }
        }
    }

    /// Request `tag`'s order was recovered: `found` (None: unknown still).
    fn recovered(&mut self, tag: u64, found: Option<Option<ergon_gateway::OrderState>>) {
        let kind = self.ledger.kind_of(tag);
        let ev = |what| Some(Some(Final { tag, what }));
        match self.ledger.first_final(tag) {
            None if kind == Some(Kind::Replace) => {
                if !self.ledger.has_item(tag, 0) {
                    let fate = match found {
                        Some(Some(s)) => ItemFate::Found(s),
                        Some(None) => ItemFate::NeverRan,
                        None => ItemFate::Unresolved,
                    };
                    self.take(ev(What::Item(0, fate)));
                }
                self.take(ev(What::BatchSettled));
            }
            None => match found {
                Some(f) => self.take(ev(What::Reconciled(f))),
                None => self.take(ev(What::Unresolved)),
            },
            // It ended with its outcome unknown before (the hub's rule, which
            // kept its entry): found now, that is its Late.
            Some(first @ (What::Unresolved | What::BatchSettled))
                if matches!(found, Some(Some(_)))
                    && !self.ledger.has_late(tag)
                    && outcome_unknown(
                        &match first {
                            What::Unresolved => Event::Unresolved { tag },
                            _ => Event::BatchSettled { tag },
                        },
                        self.ledger.item_fate(tag, 0),
                    ) =>
            {
                self.take(ev(What::Late));
            }
            Some(_) => {}
        }
    }
}
