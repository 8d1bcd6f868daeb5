//! A clean stop hands its reservation over, sans-IO: the table a stopping process
//! writes so that the next process of its name need not wait the hold.
//!
//! A process that crashed, or is only cut off from etcd, may go on spending its
//! safe share until its hold ends, so its name's reservation passes on only hold +
//! window + margin after the allocator saw it go ([`crate::Config::hold_ns`]). A
//! process that stops cleanly can prove it spends nothing more: it closes its
//! leased buckets in its own budget (a limit of zero), and then knows how much of
//! each it counted in the last window (`Stats::used`). It then writes
//! [`Table::hand_over`] (guarded by its own lease: `store::hand_over`): its
//! reservation is marked handed over (the negated pid), less the units it counted
//! in the window, which stay held in a row of lease [`HANDED`] and return one
//! window plus the margin after the allocator saw them, as a gone host's grant
//! does. The allocator passes the rest to the next process of the name the margin
//! after it saw the mark (a request charged before the stop may be written up to
//! the margin later), never back to the process that handed it.

use crate::rule::{sort_rows, Entry, Table};

/// The lease of a row that holds the units a process spent in its last window
/// before it handed its reservation over (no live lease is negative).
pub const HANDED: i64 = -1;

impl Table {
    /// The table after process `pid` of `host` stopped cleanly, having counted
    /// `used` units of the bucket in its last window: the reservation is marked
    /// handed over (pid `-pid`), less `used` (at most all of it), which stays held
    /// under lease [`HANDED`]. `None` if the table reserves nothing for that
    /// process, or still holds an earlier hand-over's units for the name (their
    /// wait must not restart: the stop then counts as a crash).
    pub fn hand_over(&self, host: &str, pid: i64, used: u64) -> Option<Table> {
        if pid <= 0 {
            return None;
        }
        if self
            .entries
            .iter()
            .any(|e| e.host == host && e.lease == HANDED)
        {
            return None;
        }
        let mut t = self.clone();
        let r = t
            .reserves
            .iter_mut()
            .find(|r| r.host == host && r.pid == pid && r.units > 0)?;
        let debt = used.min(r.units);
        r.units -= debt;
        r.pid = -pid;
        if debt > 0 {
            t.entries.push(Entry {
                host: host.to_owned(),
                lease: HANDED,
                grant: 0,
                held: debt,
                since: 0,
            });
            sort_rows(&mut t.entries);
        }
        t.epoch += 1;
        Some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::Reserve;

    fn table() -> Table {
        Table {
            epoch: 4,
            limit: 100,
            entries: Vec::new(),
            reserves: vec![Reserve {
                host: "a".into(),
                units: 10,
                pid: 7,
            }],
        }
    }

    #[test]
    fn the_units_counted_stay_held_and_the_rest_is_marked() {
        let t = table().hand_over("a", 7, 4).unwrap();
        assert_eq!(t.epoch, 5);
        assert_eq!((t.reserves[0].units, t.reserves[0].pid), (6, -7));
        assert_eq!((t.entries[0].lease, t.entries[0].held), (HANDED, 4));
        assert_eq!(t.held() + t.reserved(), 10);
        let all = table().hand_over("a", 7, 40).unwrap();
        assert_eq!((all.reserves[0].units, all.held()), (0, 10));
        assert_eq!(Table::decode(&all.encode()).unwrap(), all);
    }

    #[test]
    fn only_the_reservations_own_process_hands_it_over_once() {
        assert!(table().hand_over("a", 8, 0).is_none());
        assert!(table().hand_over("b", 7, 0).is_none());
        let t = table().hand_over("a", 7, 3).unwrap();
        assert!(t.hand_over("a", 7, 0).is_none());
    }
}
