//! [`Text`]: a byte buffer that holds UTF-8 text by construction, so that a
//! transport takes its bytes as text (a WebSocket text frame) with no UTF-8 scan per
//! send, and a writer appends integers as digits with no UTF-8 check per integer.
//!
//! Only whole strings and ASCII digits are ever appended, and it is only ever cut
//! back to a length it had, so its bytes are always UTF-8 (a property test checks
//! every frame the templates write).

use super::template::{digits, Sink};

/// Text in a reusable byte buffer: see the module docs. Keeps its allocation
/// between uses: once it has held the longest frame of a session, writing one
/// allocates nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Text {
    bytes: Vec<u8>,
}

impl Text {
    /// An empty text with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        Text {
            bytes: Vec::with_capacity(capacity),
        }
    }

    /// Empties it, keeping its room.
    pub fn clear(&mut self) {
        self.bytes.clear();
    }

    /// Appends `s`.
    #[inline]
    pub fn push_str(&mut self, s: &str) {
        self.bytes.extend_from_slice(s.as_bytes());
    }

    /// Appends `n` in decimal (`-` and ASCII digits, as `Display` writes it).
    #[inline]
    pub fn push_int(&mut self, n: i64) {
        let mut buf = [0u8; 20];
        self.bytes.extend_from_slice(digits(n, &mut buf));
    }

    /// Its bytes: UTF-8, always.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The text as a `&str`, checked (a scan of every byte: for logs and tests,
    /// not for the send path). It is always text, so this is never empty for a
    /// non-empty `Text`.
    pub fn to_str(&self) -> &str {
        core::str::from_utf8(&self.bytes).unwrap_or_default()
    }

    /// Cuts it back to `len` bytes, a length it had (the end of an earlier
    /// append): anything else would cut a character.
    pub(crate) fn truncate_to_mark(&mut self, len: usize) {
        self.bytes.truncate(len);
    }
}

impl Sink for Text {
    #[inline]
    fn text(&mut self, s: &str) {
        self.push_str(s);
    }

    /// The digits go in as bytes: a `Text` is text by construction, so no UTF-8
    /// check per integer.
    #[inline]
    fn int(&mut self, n: i64) {
        self.push_int(n);
    }
}

impl From<String> for Text {
    /// Takes the string's buffer as it is (no copy).
    fn from(s: String) -> Self {
        Text {
            bytes: s.into_bytes(),
        }
    }
}

impl From<Text> for String {
    /// Gives the buffer back as a `String` (no copy; one UTF-8 scan, which never
    /// fails).
    fn from(t: Text) -> Self {
        String::from_utf8(t.bytes).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_appends_strings_and_integers_as_display_does() {
        let mut t = Text::with_capacity(8);
        t.push_str("é=");
        let mark = t.len();
        for n in [0, 7, -1, 1_499_827_319_559, i64::MIN, i64::MAX] {
            t.push_int(n);
        }
        let want = format!("é=07-11499827319559{}{}", i64::MIN, i64::MAX);
        assert_eq!(t.to_str(), want);
        assert_eq!(t.as_bytes(), want.as_bytes());
        t.truncate_to_mark(mark);
        assert_eq!(String::from(t.clone()), "é=");
        assert_eq!(Text::from(String::from("é=")), t);
        t.clear();
        assert!(t.is_empty());
    }

    #[test]
    fn a_template_writes_the_same_text_into_a_string_and_a_text() {
        use crate::endpoint::template::{Field, Runs, Values};
        let mut r = Runs::default();
        r.lit("{\"id\":");
        assert!(r.field(Field::RequestId));
        r.lit(",\"p\":\"");
        assert!(r.field(Field::Price));
        r.lit("\",\"t\":");
        assert!(r.field(Field::Timestamp));
        r.lit("}");
        let v = Values {
            id: "i",
            price: "0.1",
            quantity: "q",
            timestamp: 1_499_827_319_559,
            request_id: -3,
        };
        let (mut s, mut t) = (String::new(), Text::default());
        r.emit(&v, &mut s);
        r.emit(&v, &mut t);
        assert_eq!(s, "{\"id\":-3,\"p\":\"0.1\",\"t\":1499827319559}");
        assert_eq!(t.as_bytes(), s.as_bytes());
    }
}
