//! JSON answers written straight into their text, field by field: the bytes
//! serde_json writes for the same `json!` map (compact, with the crate's
//! `preserve_order`: the keys in the order written; strings escaped as
//! serde_json escapes them), without building a `Value` first. A `json!` map
//! copies every value it embeds (a list of 50 orders, an envelope around it)
//! and then prints it: on the simulator's Bybit runs that was most of the
//! emulator's cost a request.
//!
//! Each writer's bytes are held to its `json!` map's by tests (here, and the
//! profiles' own). It never fails: a `String` takes any write.

/// An object being written: `{`, then each field, then `}` at [`Obj::end`].
pub(crate) struct Obj<'a> {
    out: &'a mut String,
    first: bool,
}

impl<'a> Obj<'a> {
    /// Opens an object at the end of `out`.
    pub(crate) fn new(out: &'a mut String) -> Obj<'a> {
        out.push('{');
        Obj { out, first: true }
    }

    /// Writes `"key":`, after a comma but for the first field.
    fn key(&mut self, key: &str) -> &mut String {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        str_into(self.out, key);
        self.out.push(':');
        self.out
    }

    /// A string field.
    pub(crate) fn str(&mut self, key: &str, v: &str) -> &mut Self {
        let out = self.key(key);
        str_into(out, v);
        self
    }

    /// A signed integer field.
    pub(crate) fn int(&mut self, key: &str, v: i64) -> &mut Self {
        let out = self.key(key);
        int_into(out, v);
        self
    }

    /// An unsigned integer field.
    pub(crate) fn uint(&mut self, key: &str, v: u64) -> &mut Self {
        let out = self.key(key);
        uint_into(out, v);
        self
    }

    /// A string field holding an unsigned integer's digits (`"123"`).
    pub(crate) fn uint_str(&mut self, key: &str, v: u64) -> &mut Self {
        let out = self.key(key);
        out.push('"');
        uint_into(out, v);
        out.push('"');
        self
    }

    /// A string field holding a signed integer's digits (`"-5"`).
    pub(crate) fn int_str(&mut self, key: &str, v: i64) -> &mut Self {
        let out = self.key(key);
        out.push('"');
        int_into(out, v);
        out.push('"');
        self
    }

    /// A boolean field.
    pub(crate) fn bool(&mut self, key: &str, v: bool) -> &mut Self {
        let out = self.key(key);
        out.push_str(if v { "true" } else { "false" });
        self
    }

    /// A field whose value is `json`, JSON text already written (compact).
    pub(crate) fn raw(&mut self, key: &str, json: &str) -> &mut Self {
        let out = self.key(key);
        out.push_str(json);
        self
    }

    /// Closes the object.
    pub(crate) fn end(&mut self) {
        self.out.push('}');
    }
}

/// `items`, each JSON text already, as an array.
pub(crate) fn array_into(out: &mut String, items: &[String]) {
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(item);
    }
    out.push(']');
}

/// `s` as a JSON string, escaped as serde_json escapes it: `"` and `\`
/// backslashed, the control characters below 0x20 as `\b \t \n \f \r` or
/// `\u00xx` (lowercase hex), everything else (0x7f, `/`, any non-ASCII) as is.
pub(crate) fn str_into(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            0x09 => "\\t",
            0x0a => "\\n",
            0x0c => "\\f",
            0x0d => "\\r",
            0x00..=0x1f => "",
            _ => continue,
        };
        // Every byte escaped is ASCII, so `start..i` are whole characters.
        out.push_str(&s[start..i]);
        start = i + 1;
        if esc.is_empty() {
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        } else {
            out.push_str(esc);
        }
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// `v`'s decimal digits.
pub(crate) fn uint_into(out: &mut String, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for &d in &buf[i..] {
        out.push(char::from(d));
    }
}

/// `v` in decimal, `-` first if negative.
pub(crate) fn int_into(out: &mut String, v: i64) {
    if v < 0 {
        out.push('-');
    }
    uint_into(out, v.unsigned_abs());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// A small deterministic generator for the random strings.
    fn next(s: &mut u64) -> u64 {
        *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Strings of every control character, quotes, backslashes, DEL, slashes
    /// and multi-byte characters, as serde_json writes them.
    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let pool: Vec<char> = (0u8..0x20)
            .map(char::from)
            .chain("\"\\/\u{7f} azAZ09-_.é€😀\u{2028}".chars())
            .collect();
        let mut seed = 7;
        for n in 0..2_000 {
            let len = (next(&mut seed) % 24) as usize;
            let s: String = (0..len)
                .map(|_| pool[(next(&mut seed) % pool.len() as u64) as usize])
                .collect();
            let mut out = String::new();
            str_into(&mut out, &s);
            assert_eq!(out, Value::String(s.clone()).to_string(), "case {n}: {s:?}");
        }
    }

    #[test]
    fn integers_are_written_as_serde_json_writes_them() {
        let mut seed = 11;
        let mut cases = vec![0, 1, -1, 9, 10, i64::MAX, i64::MIN, 1_700_000_000_000];
        cases.extend((0..1_000).map(|_| next(&mut seed) as i64 >> (next(&mut seed) % 64)));
        for v in cases {
            let mut out = String::new();
            int_into(&mut out, v);
            assert_eq!(out, json!(v).to_string());
            let u = v.unsigned_abs();
            let mut out = String::new();
            uint_into(&mut out, u);
            assert_eq!(out, json!(u).to_string());
        }
    }

    #[test]
    fn an_object_is_the_json_map_text() {
        let mut out = String::new();
        let mut o = Obj::new(&mut out);
        o.str("a\"", "x\n")
            .int("b", -3)
            .uint("c", 18_446_744_073_709_551_615)
            .uint_str("d", 42)
            .int_str("d2", -42)
            .bool("e", true)
            .bool("f", false)
            .raw("g", "[1,{}]");
        o.end();
        let mut list = String::new();
        array_into(&mut list, &[out.clone(), "{}".to_string()]);
        let want = json!({
            "a\"": "x\n", "b": -3, "c": 18_446_744_073_709_551_615u64, "d": "42", "d2": "-42",
            "e": true, "f": false, "g": [1, {}],
        });
        assert_eq!(out, want.to_string());
        assert_eq!(list, json!([want, {}]).to_string());
        let mut empty = String::new();
        Obj::new(&mut empty).end();
        assert_eq!(empty, "{}");
    }
}
