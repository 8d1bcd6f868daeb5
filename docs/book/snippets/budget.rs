//! The book's budget snippet (docs/book/src/budget.md includes it): three
//! buckets, one order charged all or none. `cargo run --example book_budget`.

// ANCHOR: budget
use ergon_core::{Budget, Class, Part, Spec};
const SEC: i64 = 1_000_000_000;

fn main() {
    let now = 0; // our monotonic clock, in ns: always a parameter
    let mut b = Budget::builder();
    let weight = b.add(
        "REQUEST_WEIGHT_1M",
        Spec::fixed(6000, 60 * SEC)
            .guard(50_000_000)
            .headroom(120, 1200),
    );
    let orders = b.add("ORDERS_10S", Spec::fixed(100, 10 * SEC).guard(50_000_000));
    let ip = b.add("ip", Spec::gate());
    // A bad declaration (a zero window, a repeated name) is refused here, by name.
    let (weight, orders, ip) = (weight.unwrap(), orders.unwrap(), ip.unwrap());
    let mut budget = b.build(now).expect("three buckets");

    let order = [Part::new(weight, 1), Part::new(orders, 1), Part::new(ip, 0)];
    match budget.try_charge(&order, Class::Normal, now) {
        Ok(ticket) => {
            // Write the request. At its first byte: `ticket.sent()` (a Flight:
            // no refund from here), then `budget.complete(flight, now)` at the
            // answer. Never written at all: the units come back.
            budget.refund(ticket, now).expect("a ticket of this budget");
        }
        Err(limited) => {
            // limited.why: Full | Held | Halted | TooBig ...; limited.ready_at_ns
            println!(
                "refused: {:?}, ready at {} ns",
                limited.why, limited.ready_at_ns
            );
        }
    }
}
// ANCHOR_END: budget
