//! The reader's lookups against an independent one: any document serde_json
//! writes (compact or pretty; strings with quotes, backslashes, brackets, control
//! characters and non-ASCII letters; numbers of every form; nesting), read by
//! `ergon_venues::json`, gives every member by name, every item by index and every
//! string decoded as serde_json has them. Lookups walk a checked body by its
//! structure alone: this holds them to the whole grammar.

use ergon_venues::json::{self, Kind, Value};
use proptest::prelude::*;
use serde_json::Value as Serde;

fn leaf() -> impl Strategy<Value = Serde> {
    prop_oneof![
        Just(Serde::Null),
        any::<bool>().prop_map(Serde::Bool),
        any::<i64>().prop_map(Serde::from),
        any::<u64>().prop_map(Serde::from),
        // Binary fractions: printed and read back exactly (serde_json's default
        // float reading is not always the nearest double).
        (-1_000_000_000i64..1_000_000_000).prop_map(|n| Serde::from(n as f64 / 64.0)),
        "[a-z\"\\\\{}\\[\\],:/ \\t\\n\\u{1}é€😀]{0,12}".prop_map(Serde::String),
    ]
}

fn document() -> impl Strategy<Value = Serde> {
    leaf().prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Serde::Array),
            prop::collection::vec(("[a-zA-Z\"\\\\{}\\[\\]:,é]{0,8}", inner), 0..6)
                .prop_map(|kv| Serde::Object(kv.into_iter().collect())),
        ]
    })
}

/// `ours` read as serde_json reads it.
fn check(ours: Value<'_>, theirs: &Serde) {
    let again: Serde = serde_json::from_slice(ours.raw()).expect("a value's bytes are JSON");
    assert_eq!(&again, theirs);
    match theirs {
        Serde::Object(map) => {
            assert_eq!(ours.kind(), Kind::Object);
            assert_eq!(ours.members().unwrap().count(), map.len());
            for ((k, v), (name, want)) in ours.members().unwrap().zip(map) {
                let mut buf = [0u8; 64];
                assert_eq!(k.decode_str(&mut buf).unwrap(), name);
                assert!(k.str_eq(name).unwrap());
                check(v, want);
                let got = ours.get(name).unwrap().expect("present");
                assert_eq!(got.raw(), v.raw());
            }
            assert!(ours.get("\u{1}absent").unwrap().is_none());
        }
        Serde::Array(items) => {
            assert_eq!(ours.kind(), Kind::Array);
            assert_eq!(ours.len().unwrap(), items.len());
            for (i, want) in items.iter().enumerate() {
                check(ours.at(i).unwrap().expect("present"), want);
            }
            assert!(ours.at(items.len()).unwrap().is_none());
        }
        Serde::String(s) => {
            let mut buf = [0u8; 256];
            assert_eq!(ours.decode_str(&mut buf).unwrap(), s);
            assert!(ours.str_eq(s).unwrap());
            assert!(!ours.str_eq(&format!("{s}x")).unwrap());
        }
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_lookup_reads_what_serde_json_wrote(doc in document(), pretty in any::<bool>()) {
        let text = match pretty {
            true => serde_json::to_vec_pretty(&doc).unwrap(),
            false => serde_json::to_vec(&doc).unwrap(),
        };
        let v = json::parse(&text).unwrap();
        check(v, &doc);
    }
}

/// Numbers with exponents and signs, and whitespace everywhere, as a venue may
/// write them (serde_json writes neither above).
#[test]
fn exponents_and_whitespace_are_walked_past() {
    let text = b" { \"a\" : [ 1e5 , -2.5E-3,0 ,-0.0e+1 ] ,\r\n\t\"b\":\"x\\\"}\" , \"c\" : true }";
    let v = json::parse(text).unwrap();
    let a = v.get("a").unwrap().unwrap();
    let raws: Vec<&[u8]> = a.items().unwrap().map(|x| x.raw()).collect();
    assert_eq!(raws, [&b"1e5"[..], b"-2.5E-3", b"0", b"-0.0e+1"]);
    let mut buf = [0u8; 8];
    let b = v.get("b").unwrap().unwrap();
    assert_eq!(b.decode_str(&mut buf).unwrap(), "x\"}");
    assert_eq!(v.get("c").unwrap().unwrap().as_bool(), Ok(true));
    assert_eq!(v.path("a[3]").unwrap().unwrap().raw(), b"-0.0e+1");
}
