//! A JSON reader that never allocates, for venue answers.
//!
//! [`parse`] checks a whole body once (grammar, string escapes, UTF-8, nesting no
//! deeper than [`MAX_DEPTH`]) and hands back a [`Value`]: a view of the bytes of one
//! valid value. Lookups then walk those bytes in place: a field by name or by path
//! (`data[0].sCode`, `response.data.statuses[2]`), an array's items, integers,
//! booleans, strings compared in place or decoded into a caller's buffer.
//!
//! It must never allocate, copy a body, recurse deeper than [`MAX_DEPTH`] or panic:
//! malformed input is a [`JsonError`] naming the byte where reading stopped.
//! Duplicate keys: the first one wins.

use core::str;

/// Deepest nesting of arrays and objects accepted; deeper bodies are an error.
pub const MAX_DEPTH: usize = 32;

/// Why a body could not be read, or a value is not what was asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JsonError {
    /// No value at all (empty or blank body).
    Empty,
    /// The bytes break the JSON grammar at this offset.
    Syntax {
        /// Byte offset in the body.
        at: usize,
    },
    /// A string holds a bad escape, a raw control character, a lone surrogate or
    /// invalid UTF-8; the offset is where the string starts.
    BadString {
        /// Byte offset in the body.
        at: usize,
    },
    /// Arrays and objects nested deeper than [`MAX_DEPTH`].
    TooDeep {
        /// Byte offset in the body.
        at: usize,
    },
    /// Bytes after the value.
    Trailing {
        /// Byte offset in the body.
        at: usize,
    },
    /// The value is not of the type asked (an object was asked a field, a string was
    /// read as an integer ...).
    WrongType,
    /// A number with a fraction or exponent where an integer was asked, or an integer
    /// outside the asked range.
    NotInteger,
    /// The caller's buffer is shorter than the decoded string.
    BufferTooSmall,
    /// A path that does not follow `name(.name|[index])*`.
    BadPath,
}

impl core::fmt::Display for JsonError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            JsonError::Empty => f.write_str("empty body: no JSON value"),
            JsonError::Syntax { at } => write!(f, "malformed JSON at byte {at}"),
            JsonError::BadString { at } => write!(f, "malformed JSON string at byte {at}"),
            JsonError::TooDeep { at } => {
                write!(f, "JSON nested deeper than {MAX_DEPTH} at byte {at}")
            }
            JsonError::Trailing { at } => write!(f, "bytes after the JSON value at byte {at}"),
            JsonError::WrongType => f.write_str("the JSON value is not of the type asked"),
            JsonError::NotInteger => f.write_str("the JSON number is not an integer in range"),
            JsonError::BufferTooSmall => f.write_str("the buffer is shorter than the string"),
            JsonError::BadPath => f.write_str("a path must read name(.name|[index])*"),
        }
    }
}

/// What a [`Value`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `{...}`
    Object,
    /// `[...]`
    Array,
    /// `"..."`
    String,
    /// A number.
    Number,
    /// `true` or `false`.
    Bool,
    /// `null`.
    Null,
}

/// One valid JSON value, as the bytes it was written with. Only [`parse`] makes one,
/// so every `Value` is well formed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Value<'a> {
    src: &'a [u8],
}

/// Checks `body` and returns its one top-level value.
///
/// ```
/// use ergon_venues::json;
/// let v = json::parse(br#"{"code":"0","data":[{"sCode":"51008","sMsg":"Insufficient \"USDT\""}]}"#).unwrap();
/// assert_eq!(v.path("data[0].sCode").unwrap().unwrap().parse_i64(), Ok(51008));
/// let mut buf = [0u8; 64];
/// let msg = v.path("data[0].sMsg").unwrap().unwrap();
/// assert_eq!(msg.decode_str(&mut buf), Ok("Insufficient \"USDT\""));
/// assert!(json::parse(b"{\"a\":}").is_err());
/// ```
pub fn parse(body: &[u8]) -> Result<Value<'_>, JsonError> {
    let start = skip_ws(body, 0);
    if start >= body.len() {
        return Err(JsonError::Empty);
    }
    let end = scan_value(body, start, 0)?;
    let after = skip_ws(body, end);
    if after != body.len() {
        return Err(JsonError::Trailing { at: after });
    }
    Ok(Value {
        src: body
            .get(start..end)
            .ok_or(JsonError::Syntax { at: start })?,
    })
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while let Some(c) = b.get(i) {
        if !matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
            break;
        }
        i += 1;
    }
    i
}

/// The end of the value starting at `i` (which must not be whitespace).
fn scan_value(b: &[u8], i: usize, depth: usize) -> Result<usize, JsonError> {
    match b.get(i) {
        Some(b'{') => scan_object(b, i, depth + 1),
        Some(b'[') => scan_array(b, i, depth + 1),
        Some(b'"') => scan_string(b, i),
        Some(b't') => literal(b, i, b"true"),
        Some(b'f') => literal(b, i, b"false"),
        Some(b'n') => literal(b, i, b"null"),
        Some(b'-' | b'0'..=b'9') => scan_number(b, i),
        _ => Err(JsonError::Syntax { at: i }),
    }
}

fn literal(b: &[u8], i: usize, word: &[u8]) -> Result<usize, JsonError> {
    match b.get(i..i + word.len()) {
        Some(w) if w == word => Ok(i + word.len()),
        _ => Err(JsonError::Syntax { at: i }),
    }
}

fn digits(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b'0'..=b'9')) {
        i += 1;
    }
    i
}

fn scan_number(b: &[u8], mut i: usize) -> Result<usize, JsonError> {
    let start = i;
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = digits(b, i),
        _ => return Err(JsonError::Syntax { at: start }),
    }
    if b.get(i) == Some(&b'.') {
        let frac = digits(b, i + 1);
        if frac == i + 1 {
            return Err(JsonError::Syntax { at: i });
        }
        i = frac;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let exp = digits(b, j);
        if exp == j {
            return Err(JsonError::Syntax { at: i });
        }
        i = exp;
    }
    Ok(i)
}

fn hex4(b: &[u8], i: usize) -> Option<u32> {
    let mut v = 0u32;
    for k in 0..4 {
        let d = char::from(*b.get(i + k)?).to_digit(16)?;
        v = v * 16 + d;
    }
    Some(v)
}

/// Eight copies of the byte `c`, one a lane of a `u64`.
const fn lanes(c: u8) -> u64 {
    0x0101_0101_0101_0101 * c as u64
}

/// The high bit of each lane of `w` (eight bytes, little-endian) whose byte is
/// below `n` (at most 0x80) and has its own high bit clear. The lowest lane
/// flagged is exactly the first such byte; lanes above it may be flagged
/// wrongly (the subtraction's borrow), so only the lowest is ever used.
const fn below(w: u64, n: u8) -> u64 {
    w.wrapping_sub(lanes(n)) & !w & lanes(0x80)
}

/// The lane of the first byte of `w` that is `a` or `b`, or 8 if none is. The
/// first flagged lane of each test is exact (see [`below`]), so that of their
/// union is too.
fn first_of(w: u64, a: u8, b: u8) -> usize {
    let m = below(w ^ lanes(a), 1) | below(w ^ lanes(b), 1);
    (m.trailing_zeros() / 8) as usize
}

/// From `j`, the first byte of `b` a string's scan must look at: a quote, a
/// backslash, a control character or a byte of 0x80 or above (all else is a
/// plain ASCII character of the string), else the start of its last seven
/// bytes. Eight bytes a step: the same stops as reading byte by byte.
fn to_string_stop(b: &[u8], mut j: usize) -> usize {
    while let Some(chunk) = b.get(j..j + 8) {
        let Ok(eight) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let w = u64::from_le_bytes(eight);
        let m = below(w ^ lanes(b'"'), 1)
            | below(w ^ lanes(b'\\'), 1)
            | below(w, 0x20)
            | (w & lanes(0x80));
        if m != 0 {
            return j + (m.trailing_zeros() / 8) as usize;
        }
        j += 8;
    }
    j
}

/// The end of the string starting at the quote `i`: escapes, control characters,
/// surrogate pairs and UTF-8 are all checked here, so decoding never fails later.
fn scan_string(b: &[u8], i: usize) -> Result<usize, JsonError> {
    let bad = JsonError::BadString { at: i };
    let mut j = i + 1;
    // Any byte of 0x80 or above: only then can the UTF-8 be wrong (ASCII is UTF-8).
    let mut wide = false;
    loop {
        j = to_string_stop(b, j);
        match b.get(j) {
            None => return Err(JsonError::Syntax { at: j }),
            Some(b'"') => break,
            Some(b'\\') => match b.get(j + 1) {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => j += 2,
                Some(b'u') => {
                    let hi = hex4(b, j + 2).ok_or(bad)?;
                    j += 6;
                    if (0xDC00..0xE000).contains(&hi) {
                        return Err(bad);
                    }
                    if (0xD800..0xDC00).contains(&hi) {
                        if b.get(j..j + 2) != Some(b"\\u") {
                            return Err(bad);
                        }
                        let lo = hex4(b, j + 2).ok_or(bad)?;
                        if !(0xDC00..0xE000).contains(&lo) {
                            return Err(bad);
                        }
                        j += 6;
                    }
                }
                _ => return Err(bad),
            },
            Some(c) if *c < 0x20 => return Err(bad),
            Some(c) => {
                wide |= *c >= 0x80;
                j += 1;
            }
        }
    }
    if wide {
        let inner = b.get(i + 1..j).ok_or(bad)?;
        str::from_utf8(inner).map_err(|_| bad)?;
    }
    Ok(j + 1)
}

fn scan_array(b: &[u8], i: usize, depth: usize) -> Result<usize, JsonError> {
    if depth > MAX_DEPTH {
        return Err(JsonError::TooDeep { at: i });
    }
    let mut j = skip_ws(b, i + 1);
    if b.get(j) == Some(&b']') {
        return Ok(j + 1);
    }
    loop {
        j = scan_value(b, j, depth)?;
        j = skip_ws(b, j);
        match b.get(j) {
            Some(b',') => j = skip_ws(b, j + 1),
            Some(b']') => return Ok(j + 1),
            _ => return Err(JsonError::Syntax { at: j }),
        }
    }
}

fn scan_object(b: &[u8], i: usize, depth: usize) -> Result<usize, JsonError> {
    if depth > MAX_DEPTH {
        return Err(JsonError::TooDeep { at: i });
    }
    let mut j = skip_ws(b, i + 1);
    if b.get(j) == Some(&b'}') {
        return Ok(j + 1);
    }
    loop {
        if b.get(j) != Some(&b'"') {
            return Err(JsonError::Syntax { at: j });
        }
        j = skip_ws(b, scan_string(b, j)?);
        if b.get(j) != Some(&b':') {
            return Err(JsonError::Syntax { at: j });
        }
        j = skip_ws(b, j + 1);
        j = scan_value(b, j, depth)?;
        j = skip_ws(b, j);
        match b.get(j) {
            Some(b',') => j = skip_ws(b, j + 1),
            Some(b'}') => return Ok(j + 1),
            _ => return Err(JsonError::Syntax { at: j }),
        }
    }
}

/// The end of the string starting at the quote `i` of text [`parse`] checked:
/// its closing quote found, nothing checked again (an escape is two bytes, a
/// `\u` escape's hex digits are never a quote). Past the end: `b.len()`.
fn skip_string(b: &[u8], i: usize) -> usize {
    let mut j = i + 1;
    loop {
        // To the next quote or backslash, eight bytes a step.
        while let Some(chunk) = b.get(j..j + 8) {
            let Ok(eight) = <[u8; 8]>::try_from(chunk) else {
                break;
            };
            let at = first_of(u64::from_le_bytes(eight), b'"', b'\\');
            j += at;
            if at < 8 {
                break;
            }
        }
        match b.get(j) {
            None => return b.len(),
            Some(b'"') => return j + 1,
            Some(b'\\') => j += 2,
            Some(_) => j += 1,
        }
    }
}

/// The end of the value starting at `i` (not whitespace) of text [`parse`]
/// checked: walks its structure only (brackets, strings' quotes), since the
/// grammar, escapes, UTF-8 and depth were checked once. A lookup walks past every
/// member before the one it asks for, so checking them again on each lookup cost
/// a full validation of the body per key read. Never reads past `b`, never
/// panics, whatever `b` holds.
fn skip_value(b: &[u8], i: usize) -> usize {
    match b.get(i) {
        Some(b'"') => skip_string(b, i),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut j = i;
            while let Some(&c) = b.get(j) {
                match c {
                    b'"' => {
                        j = skip_string(b, j);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            return j + 1;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            b.len()
        }
        // A number or a literal: up to the delimiter after it.
        _ => {
            let mut j = i;
            while let Some(c) = b.get(j) {
                if matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                    break;
                }
                j += 1;
            }
            j
        }
    }
}

/// The items of an array, in order.
#[derive(Clone, Debug)]
pub struct Items<'a> {
    src: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for Items<'a> {
    type Item = Value<'a>;

    fn next(&mut self) -> Option<Value<'a>> {
        let start = skip_ws(self.src, self.pos);
        if matches!(self.src.get(start), None | Some(b']')) {
            return None;
        }
        // The text was checked by `parse`: its structure is all there is to walk.
        let end = skip_value(self.src, start);
        let value = self.src.get(start..end)?;
        let after = skip_ws(self.src, end);
        self.pos = match self.src.get(after) {
            Some(b',') => after + 1,
            _ => self.src.len(),
        };
        Some(Value { src: value })
    }
}

/// The members of an object, in order: (key, value), the key a string [`Value`].
#[derive(Clone, Debug)]
pub struct Members<'a> {
    src: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for Members<'a> {
    type Item = (Value<'a>, Value<'a>);

    fn next(&mut self) -> Option<(Value<'a>, Value<'a>)> {
        let start = skip_ws(self.src, self.pos);
        if self.src.get(start) != Some(&b'"') {
            return None;
        }
        // Checked by `parse`, as for `Items`.
        let key_end = skip_string(self.src, start);
        let key = self.src.get(start..key_end)?;
        let colon = skip_ws(self.src, key_end);
        let v_start = skip_ws(self.src, colon + 1);
        let v_end = skip_value(self.src, v_start);
        let value = self.src.get(v_start..v_end)?;
        let after = skip_ws(self.src, v_end);
        self.pos = match self.src.get(after) {
            Some(b',') => after + 1,
            _ => self.src.len(),
        };
        Some((Value { src: key }, Value { src: value }))
    }
}

/// The bytes of a string with its escapes decoded (UTF-8).
#[derive(Clone, Debug)]
pub struct StrBytes<'a> {
    raw: &'a [u8],
    pos: usize,
    pending: [u8; 4],
    pending_at: u8,
    pending_len: u8,
}

impl Iterator for StrBytes<'_> {
    type Item = u8;

    fn next(&mut self) -> Option<u8> {
        if self.pending_at < self.pending_len {
            let b = self.pending[usize::from(self.pending_at)];
            self.pending_at += 1;
            return Some(b);
        }
        let c = *self.raw.get(self.pos)?;
        if c != b'\\' {
            self.pos += 1;
            return Some(c);
        }
        let e = *self.raw.get(self.pos + 1)?;
        self.pos += 2;
        let simple = match e {
            b'b' => 0x08,
            b'f' => 0x0C,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => return self.unicode(),
            other => other,
        };
        Some(simple)
    }
}

impl StrBytes<'_> {
    fn unicode(&mut self) -> Option<u8> {
        let hi = hex4(self.raw, self.pos)?;
        self.pos += 4;
        let code = if (0xD800..0xDC00).contains(&hi) {
            let lo = hex4(self.raw, self.pos + 2)?;
            self.pos += 6;
            0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
        } else {
            hi
        };
        // `parse` rejected lone surrogates, so this is a scalar value.
        let ch = char::from_u32(code)?;
        let len = ch.encode_utf8(&mut self.pending).len();
        self.pending_len = len as u8;
        self.pending_at = 1;
        Some(self.pending[0])
    }
}

impl<'a> Value<'a> {
    /// What this value is.
    pub fn kind(&self) -> Kind {
        match self.src.first() {
            Some(b'{') => Kind::Object,
            Some(b'[') => Kind::Array,
            Some(b'"') => Kind::String,
            Some(b't' | b'f') => Kind::Bool,
            Some(b'n') => Kind::Null,
            _ => Kind::Number,
        }
    }

    /// The bytes this value was written with.
    pub fn raw(&self) -> &'a [u8] {
        self.src
    }

    /// The items of an array.
    pub fn items(&self) -> Result<Items<'a>, JsonError> {
        match self.kind() {
            Kind::Array => Ok(Items {
                src: self.src,
                pos: 1,
            }),
            _ => Err(JsonError::WrongType),
        }
    }

    /// The members of an object.
    pub fn members(&self) -> Result<Members<'a>, JsonError> {
        match self.kind() {
            Kind::Object => Ok(Members {
                src: self.src,
                pos: 1,
            }),
            _ => Err(JsonError::WrongType),
        }
    }

    /// The field `key` of an object (the first, if written twice), `None` if absent.
    pub fn get(&self, key: &str) -> Result<Option<Value<'a>>, JsonError> {
        for (k, v) in self.members()? {
            if k.str_eq(key)? {
                return Ok(Some(v));
            }
        }
        Ok(None)
    }

    /// Item `index` of an array, `None` past its end.
    pub fn at(&self, index: usize) -> Result<Option<Value<'a>>, JsonError> {
        Ok(self.items()?.nth(index))
    }

    /// Items in an array; anything else is [`JsonError::WrongType`].
    pub fn len(&self) -> Result<usize, JsonError> {
        Ok(self.items()?.count())
    }

    /// Whether this is an empty array or object (false for anything else).
    pub fn is_empty(&self) -> bool {
        match self.kind() {
            Kind::Array => self.items().is_ok_and(|mut i| i.next().is_none()),
            Kind::Object => self.members().is_ok_and(|mut m| m.next().is_none()),
            _ => false,
        }
    }

    /// The value at `path`: names separated by dots, array indices in brackets
    /// (`data[0].sCode`, `response.data.statuses[1].error`). `None` if any step is
    /// absent; [`JsonError::WrongType`] if a step meets the wrong kind of value.
    pub fn path(&self, path: &str) -> Result<Option<Value<'a>>, JsonError> {
        let p = path.as_bytes();
        let mut cur = *self;
        let mut i = 0;
        if p.is_empty() {
            return Err(JsonError::BadPath);
        }
        while i < p.len() {
            if p[i] == b'[' {
                let close = p[i..]
                    .iter()
                    .position(|&c| c == b']')
                    .ok_or(JsonError::BadPath)?
                    + i;
                let digits = path.get(i + 1..close).ok_or(JsonError::BadPath)?;
                if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
                    return Err(JsonError::BadPath);
                }
                let index: usize = digits.parse().map_err(|_| JsonError::BadPath)?;
                cur = match cur.at(index)? {
                    Some(v) => v,
                    None => return Ok(None),
                };
                i = close + 1;
                if i < p.len() {
                    match p[i] {
                        b'.' => i += 1,
                        b'[' => {}
                        _ => return Err(JsonError::BadPath),
                    }
                    if i >= p.len() {
                        return Err(JsonError::BadPath);
                    }
                }
            } else {
                let end = p[i..]
                    .iter()
                    .position(|&c| c == b'.' || c == b'[')
                    .map_or(p.len(), |n| n + i);
                let name = path.get(i..end).ok_or(JsonError::BadPath)?;
                if name.is_empty() {
                    return Err(JsonError::BadPath);
                }
                cur = match cur.get(name)? {
                    Some(v) => v,
                    None => return Ok(None),
                };
                i = end;
                if i < p.len() && p[i] == b'.' {
                    i += 1;
                    if i >= p.len() {
                        return Err(JsonError::BadPath);
                    }
                }
            }
        }
        Ok(Some(cur))
    }

    /// A boolean.
    pub fn as_bool(&self) -> Result<bool, JsonError> {
        match self.src {
            b"true" => Ok(true),
            b"false" => Ok(false),
            _ => Err(JsonError::WrongType),
        }
    }

    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        self.src == b"null"
    }

    /// An integer written as a JSON number; a fraction or exponent is
    /// [`JsonError::NotInteger`].
    pub fn as_i64(&self) -> Result<i64, JsonError> {
        if self.kind() != Kind::Number {
            return Err(JsonError::WrongType);
        }
        int(self.src)
    }

    /// A non-negative integer written as a JSON number.
    pub fn as_u64(&self) -> Result<u64, JsonError> {
        if self.kind() != Kind::Number {
            return Err(JsonError::WrongType);
        }
        uint(self.src)
    }

    /// An integer written either as a number or as a string holding one (OKX writes
    /// its codes as strings: `"code":"50011"`).
    pub fn parse_i64(&self) -> Result<i64, JsonError> {
        match self.kind() {
            Kind::Number => int(self.src),
            Kind::String => {
                let inner = self.string_inner()?;
                if inner.contains(&b'\\') {
                    return Err(JsonError::NotInteger);
                }
                int(inner)
            }
            _ => Err(JsonError::WrongType),
        }
    }

    /// A non-negative integer written as a number or as a string holding one.
    pub fn parse_u64(&self) -> Result<u64, JsonError> {
        match self.kind() {
            Kind::Number => uint(self.src),
            Kind::String => {
                let inner = self.string_inner()?;
                if inner.contains(&b'\\') {
                    return Err(JsonError::NotInteger);
                }
                uint(inner)
            }
            _ => Err(JsonError::WrongType),
        }
    }

    fn string_inner(&self) -> Result<&'a [u8], JsonError> {
        match self.kind() {
            Kind::String => self
                .src
                .get(1..self.src.len().saturating_sub(1))
                .ok_or(JsonError::WrongType),
            _ => Err(JsonError::WrongType),
        }
    }

    /// The decoded bytes of a string (escapes resolved, UTF-8).
    pub fn str_bytes(&self) -> Result<StrBytes<'a>, JsonError> {
        Ok(StrBytes {
            raw: self.string_inner()?,
            pos: 0,
            pending: [0; 4],
            pending_at: 0,
            pending_len: 0,
        })
    }

    /// Whether this string, decoded, equals `s`; compared in place.
    pub fn str_eq(&self, s: &str) -> Result<bool, JsonError> {
        let inner = self.string_inner()?;
        // Without an escape the text is its decoding: one slice comparison (a
        // lookup compares every key before the one it asks for).
        if !inner.contains(&b'\\') {
            return Ok(inner == s.as_bytes());
        }
        Ok(self.str_bytes()?.eq(s.bytes()))
    }

    /// Whether this string, decoded, starts with `prefix`.
    pub fn str_starts_with(&self, prefix: &str) -> Result<bool, JsonError> {
        let mut it = self.str_bytes()?;
        Ok(prefix.bytes().all(|c| it.next() == Some(c)))
    }

    /// Whether this string, decoded, contains `needle`; searched in place.
    pub fn str_contains(&self, needle: &str) -> Result<bool, JsonError> {
        let mut it = self.str_bytes()?;
        loop {
            let mut probe = it.clone();
            if needle.bytes().all(|c| probe.next() == Some(c)) {
                return Ok(true);
            }
            if it.next().is_none() {
                return Ok(false);
            }
        }
    }

    /// Decodes this string into `buf` and returns it.
    pub fn decode_str<'b>(&self, buf: &'b mut [u8]) -> Result<&'b str, JsonError> {
        let mut n = 0;
        for c in self.str_bytes()? {
            let slot = buf.get_mut(n).ok_or(JsonError::BufferTooSmall)?;
            *slot = c;
            n += 1;
        }
        let out = buf.get(..n).ok_or(JsonError::BufferTooSmall)?;
        // `parse` checked UTF-8 and escapes; this cannot fail.
        str::from_utf8(out).map_err(|_| JsonError::WrongType)
    }
}

fn uint(b: &[u8]) -> Result<u64, JsonError> {
    if b.is_empty() {
        return Err(JsonError::NotInteger);
    }
    let mut v: u64 = 0;
    for &c in b {
        if !c.is_ascii_digit() {
            return Err(JsonError::NotInteger);
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(c - b'0')))
            .ok_or(JsonError::NotInteger)?;
    }
    Ok(v)
}

fn int(b: &[u8]) -> Result<i64, JsonError> {
    match b.split_first() {
        Some((b'-', rest)) => {
            let v = uint(rest)?;
            if v == 1u64 << 63 {
                Ok(i64::MIN)
            } else {
                i64::try_from(v)
                    .map(|v| -v)
                    .map_err(|_| JsonError::NotInteger)
            }
        }
        _ => i64::try_from(uint(b)?).map_err(|_| JsonError::NotInteger),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_okx_order_answers_by_path() {
        let body = br#" {"code":"1","msg":"","data":[
            {"clOrdId":"a","sCode":"0","sMsg":""},
            {"clOrdId":"b","sCode":"51008","sMsg":"Order failed. Insufficient USDT balance"}
        ]} "#;
        let v = parse(body).unwrap();
        assert_eq!(v.get("code").unwrap().unwrap().parse_i64(), Ok(1));
        assert_eq!(v.path("data").unwrap().unwrap().len(), Ok(2));
        assert_eq!(
            v.path("data[1].sCode").unwrap().unwrap().parse_i64(),
            Ok(51008)
        );
        assert!(v
            .path("data[1].sMsg")
            .unwrap()
            .unwrap()
            .str_contains("Insufficient")
            .unwrap());
        assert_eq!(v.path("data[2].sCode"), Ok(None));
        assert_eq!(v.path("nope.deeper"), Ok(None));
        assert_eq!(v.path("code.deeper"), Err(JsonError::WrongType));
        assert_eq!(v.path("data[x]"), Err(JsonError::BadPath));
        assert_eq!(v.path("data."), Err(JsonError::BadPath));
        assert_eq!(v.path(""), Err(JsonError::BadPath));
    }

    #[test]
    fn reads_hyperliquid_statuses() {
        let body = br#"{"status":"ok","response":{"type":"order","data":{"statuses":[{"resting":{"oid":77738308}},{"error":"Order must have minimum value of $10."}]}}}"#;
        let v = parse(body).unwrap();
        let statuses = v.path("response.data.statuses").unwrap().unwrap();
        let mut it = statuses.items().unwrap();
        let first = it.next().unwrap();
        assert_eq!(
            first.path("resting.oid").unwrap().unwrap().as_u64(),
            Ok(77738308)
        );
        let second = it.next().unwrap();
        assert!(second
            .get("error")
            .unwrap()
            .unwrap()
            .str_starts_with("Order must")
            .unwrap());
        assert!(it.next().is_none());
        assert!(v.path("response.data.statuses[1].error").unwrap().is_some());
    }

    #[test]
    fn decodes_escapes_in_place_and_into_buffers() {
        let v = parse(br#"{"m\u0073g":"a\"b\\c\/d\n\u00e9\ud83d\ude00","k":"x"}"#).unwrap();
        let msg = v.get("msg").unwrap().unwrap();
        let mut buf = [0u8; 32];
        assert_eq!(msg.decode_str(&mut buf), Ok("a\"b\\c/d\né😀"));
        assert!(msg.str_eq("a\"b\\c/d\né😀").unwrap());
        assert!(!msg.str_eq("a\"b\\c/d\né").unwrap());
        assert!(msg.str_contains("é😀").unwrap());
        let mut small = [0u8; 4];
        assert_eq!(msg.decode_str(&mut small), Err(JsonError::BufferTooSmall));
        assert_eq!(
            v.get("k").unwrap().unwrap().as_i64(),
            Err(JsonError::WrongType)
        );
    }

    #[test]
    fn integers_and_booleans() {
        let v = parse(br#"[0,-12,1.5,1e3,9223372036854775807,-9223372036854775808,9223372036854775808,true,false,null,"77"]"#).unwrap();
        let items: [Value; 11] = {
            let mut it = v.items().unwrap();
            core::array::from_fn(|_| it.next().unwrap())
        };
        assert_eq!(items[0].as_i64(), Ok(0));
        assert_eq!(items[1].as_i64(), Ok(-12));
        assert_eq!(items[1].as_u64(), Err(JsonError::NotInteger));
        assert_eq!(items[2].as_i64(), Err(JsonError::NotInteger));
        assert_eq!(items[3].as_i64(), Err(JsonError::NotInteger));
        assert_eq!(items[4].as_i64(), Ok(i64::MAX));
        assert_eq!(items[5].as_i64(), Ok(i64::MIN));
        assert_eq!(items[6].as_i64(), Err(JsonError::NotInteger));
        assert_eq!(items[6].as_u64(), Ok(1 << 63));
        assert_eq!(items[7].as_bool(), Ok(true));
        assert_eq!(items[8].as_bool(), Ok(false));
        assert!(items[9].is_null());
        assert_eq!(items[10].as_i64(), Err(JsonError::WrongType));
        assert_eq!(items[10].parse_i64(), Ok(77));
    }

    #[test]
    fn malformed_bodies_are_errors() {
        for (body, err) in [
            (&b""[..], JsonError::Empty),
            (b"  ", JsonError::Empty),
            (b"{", JsonError::Syntax { at: 1 }),
            (b"{\"a\":1,}", JsonError::Syntax { at: 7 }),
            (b"[1,]", JsonError::Syntax { at: 3 }),
            (b"[01]", JsonError::Syntax { at: 2 }),
            (b"[1.]", JsonError::Syntax { at: 2 }),
            (b"[-]", JsonError::Syntax { at: 1 }),
            (b"tru", JsonError::Syntax { at: 0 }),
            (b"{} x", JsonError::Trailing { at: 3 }),
            (b"\"a\\x\"", JsonError::BadString { at: 0 }),
            (b"\"\\ud800\"", JsonError::BadString { at: 0 }),
            (b"\"\\udc00\"", JsonError::BadString { at: 0 }),
            (b"\"\x01\"", JsonError::BadString { at: 0 }),
            (b"\"\xff\"", JsonError::BadString { at: 0 }),
            (b"\"ab\xc3(\"", JsonError::BadString { at: 0 }),
            (b"\"\xe2\x82\"", JsonError::BadString { at: 0 }),
            (b"[\"a\",\"\xed\xa0\x80\"]", JsonError::BadString { at: 5 }),
            (b"\"abc", JsonError::Syntax { at: 4 }),
            (b"<html>", JsonError::Syntax { at: 0 }),
        ] {
            assert_eq!(parse(body), Err(err), "{:?}", core::str::from_utf8(body));
        }
    }

    #[test]
    fn non_ascii_strings_are_utf8_checked() {
        let v = parse("[\"caf\u{e9}\",\"\u{20ac}\u{1f600}\"]".as_bytes()).unwrap();
        let mut items = v.items().unwrap();
        assert_eq!(items.next().unwrap().str_eq("caf\u{e9}"), Ok(true));
        assert_eq!(items.next().unwrap().str_eq("\u{20ac}\u{1f600}"), Ok(true));
    }

    #[test]
    fn depth_is_bounded() {
        let mut deep = [b'['; 64];
        let ok = MAX_DEPTH;
        let mut body = [0u8; 128];
        body[..ok].copy_from_slice(&deep[..ok]);
        body[ok..2 * ok].fill(b']');
        assert!(parse(&body[..2 * ok]).is_ok());
        deep[..].fill(b'[');
        let mut body = [b']'; 128];
        body[..ok + 1].fill(b'[');
        assert_eq!(
            parse(&body[..2 * ok + 2]),
            Err(JsonError::TooDeep { at: ok })
        );
    }

    #[test]
    fn first_duplicate_key_wins_and_empty_containers() {
        let v = parse(br#"{"a":1,"a":2,"e":[],"o":{}}"#).unwrap();
        assert_eq!(v.get("a").unwrap().unwrap().as_i64(), Ok(1));
        assert!(v.get("e").unwrap().unwrap().is_empty());
        assert!(v.get("o").unwrap().unwrap().is_empty());
        assert_eq!(v.get("e").unwrap().unwrap().len(), Ok(0));
        assert_eq!(
            v.get("e").unwrap().unwrap().get("x"),
            Err(JsonError::WrongType)
        );
    }
}
