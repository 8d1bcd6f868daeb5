//! The JSON reader: any bytes, every lookup. Errors are fine; panics are not.
#![no_main]

use ergon_venues::json::{self, Kind, Value};
use libfuzzer_sys::fuzz_target;

fn walk(v: Value<'_>, budget: &mut u32) {
    if *budget == 0 {
        return;
    }
    *budget -= 1;
    let mut buf = [0u8; 32];
    let _ = (
        v.as_i64(),
        v.as_u64(),
        v.parse_i64(),
        v.parse_u64(),
        v.as_bool(),
    );
    let _ = (
        v.str_eq("code"),
        v.str_contains("banned until"),
        v.decode_str(&mut buf),
    );
    let _ = (
        v.path("data[0].sCode"),
        v.path("response.data.statuses[1].error"),
    );
    let _ = (v.len(), v.is_empty(), v.is_null());
    match v.kind() {
        Kind::Array => {
            if let Ok(items) = v.items() {
                items.for_each(|i| walk(i, budget));
            }
        }
        Kind::Object => {
            if let Ok(members) = v.members() {
                members.for_each(|(_, i)| walk(i, budget));
            }
        }
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = json::parse(data) {
        walk(v, &mut 10_000);
    }
});
