//! A Binance answer's `code` and `msg`, read in one walk of its members
//! ([`Msg::read`]), are those two lookups by name read (the first of each name;
//! a `msg` only if a string; a `code` only if an integer), over random bodies:
//! objects with the two names, others, repeats, every kind of value, in any
//! order; arrays, scalars and bad JSON.

use ergon_venues::binance_spot::Msg;
use ergon_venues::json::{self, Kind};
use proptest::prelude::*;

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        (-3000i64..3000).prop_map(|n| n.to_string()),
        Just("-1003.5".to_string()),
        Just("1e3".to_string()),
        Just("null".to_string()),
        Just("true".to_string()),
        "[a-z \"\\\\.]{0,12}".prop_map(|s| serde_json::to_string(&s).unwrap()),
        Just("\"Way too many requests; IP banned until 1700000300000.\"".to_string()),
        Just(
            "\"Too many requests; current limit is 6000 request weight per 1 MINUTE.\"".to_string()
        ),
        Just("{\"code\":-1,\"msg\":\"inner\"}".to_string()),
        Just("[\"msg\",1]".to_string()),
    ]
}

fn key() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "\"code\"",
        "\"msg\"",
        "\"orderId\"",
        "\"status\"",
        "\"co\\u0064e\"",
        "\"m\\u0073g\"",
        "\"Code\"",
        "\"msg \"",
    ])
}

fn body() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => prop::collection::vec((key(), value()), 0..7).prop_map(|kv| {
            let members: Vec<String> = kv.iter().map(|(k, v)| format!("{k}:{v}")).collect();
            format!("{{{}}}", members.join(","))
        }),
        1 => value(),
        1 => Just("{\"code\":-1003,".to_string()),
        1 => Just("<html>502</html>".to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn one_walk_reads_what_two_lookups_read(b in body()) {
        let m = Msg::read(b.as_bytes());
        let parsed = json::parse(b.as_bytes()).ok();
        prop_assert_eq!(m.json.map(|v| v.raw()), parsed.map(|v| v.raw()));
        let field = |name| parsed.and_then(|j| j.get(name).ok().flatten());
        let code = field("code").and_then(|c| c.as_i64().ok());
        prop_assert_eq!(m.code, code, "{}", b);
        let msg = field("msg").filter(|v| v.kind() == Kind::String);
        // Present exactly when the old lookup found a string.
        prop_assert_eq!(m.says(""), msg.is_some(), "{}", b);
        if let Some(v) = msg {
            let mut buf = [0u8; 256];
            let text = v.decode_str(&mut buf).unwrap();
            prop_assert!(m.is(text), "{}", b);
        }
    }
}

#[test]
fn the_first_of_each_name_wins_as_a_lookup_finds_it() {
    let b = br#"{"msg":"first","code":-1003,"code":-1015,"msg":"second"}"#;
    let m = Msg::read(b);
    assert_eq!(m.code, Some(-1003));
    assert!(m.is("first"));
    // A `code` that is no integer is no code, and the later one is not read.
    let m = Msg::read(br#"{"code":"x","code":-2013}"#);
    assert_eq!(m.code, None);
    // A `msg` that is no string is no message.
    let m = Msg::read(br#"{"msg":1,"msg":"later"}"#);
    assert!(!m.says(""));
}
