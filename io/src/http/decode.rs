//! Response parsing in place: status line and headers through httparse into a
//! fixed array of offsets, then the body framed by Content-Length, chunked coding
//! (extensions and trailers accepted and dropped) or the end of the connection.
//!
//! Chunked bodies are de-chunked inside the same buffer by moving each chunk's data
//! down over the framing, so the delivered body is one contiguous slice and nothing
//! is copied elsewhere. Every index is checked: malformed bytes are a
//! [`ParseError`], never a panic. This module never allocates.

use core::mem::MaybeUninit;

use super::{Limits, ParseError};

/// Most headers one response may carry (the size of the offsets array).
pub const MAX_HEADERS: usize = 64;

/// Where one header sits in the receive buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct HeadRef {
    pub name: (u32, u32),
    pub value: (u32, u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunk {
    /// Expecting a chunk-size line at `pos`.
    Size,
    /// Inside chunk data, this many bytes left.
    Data(u64),
    /// Expecting the CRLF after chunk data.
    DataEnd,
    /// Reading trailer lines; how many trailer bytes so far.
    Trailers(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Head,
    Length(u64),
    Chunked(Chunk),
    UntilClose,
    Done,
}

/// Outcome of feeding bytes to the decoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// More bytes needed.
    Partial,
    /// The response is complete.
    Complete,
}

/// The parse state of one response. Offsets refer to the connection's buffer.
#[derive(Debug)]
pub(crate) struct Decoder {
    phase: Phase,
    /// Start of the current head (moves past skipped 1xx responses).
    head_start: usize,
    /// Next raw byte to look at.
    pos: usize,
    pub body_start: usize,
    /// End of the de-chunked body.
    pub body_end: usize,
    pub status: u16,
    pub nheaders: usize,
    pub heads: [HeadRef; MAX_HEADERS],
    pub keep_alive: bool,
}

impl Decoder {
    pub fn new() -> Self {
        Decoder {
            phase: Phase::Head,
            head_start: 0,
            pos: 0,
            body_start: 0,
            body_end: 0,
            status: 0,
            nheaders: 0,
            heads: [HeadRef::default(); MAX_HEADERS],
            keep_alive: true,
        }
    }

    pub fn reset(&mut self) {
        self.phase = Phase::Head;
        self.head_start = 0;
        self.pos = 0;
        self.body_start = 0;
        self.body_end = 0;
        self.status = 0;
        self.nheaders = 0;
        self.keep_alive = true;
    }

    /// Raw bytes consumed so far: what a complete response used of the buffer.
    pub fn consumed(&self) -> usize {
        self.pos
    }

    /// The peer closed the connection: completes a body that runs until close.
    pub fn eof(&mut self) -> bool {
        if self.phase == Phase::UntilClose {
            self.phase = Phase::Done;
            self.keep_alive = false;
            true
        } else {
            false
        }
    }

    /// Moves unparsed raw bytes down to the end of the decoded body to make room;
    /// returns the new fill level. Only chunked and until-close bodies leave a gap.
    pub fn compact(&mut self, buf: &mut [u8], filled: usize) -> usize {
        if matches!(self.phase, Phase::Chunked(_)) && self.pos > self.body_end && self.pos <= filled
        {
            buf.copy_within(self.pos..filled, self.body_end);
            let moved = self.pos - self.body_end;
            self.pos = self.body_end;
            return filled - moved;
        }
        filled
    }

    /// Parses `buf[..filled]` as far as it goes: the answer to a HEAD request
    /// when `head_request` (no body whatever the headers say).
    pub fn advance(
        &mut self,
        buf: &mut [u8],
        filled: usize,
        limits: &Limits,
        head_request: bool,
    ) -> Result<Step, ParseError> {
        let filled = filled.min(buf.len());
        loop {
            match self.phase {
                Phase::Done => return Ok(Step::Complete),
                Phase::Head => {
                    if !self.head(buf, filled, limits, head_request)? {
                        return Ok(Step::Partial);
                    }
                }
                Phase::Length(left) => {
                    let avail = (filled - self.pos) as u64;
                    let take = avail.min(left);
                    self.pos += take as usize;
                    self.body_end = self.pos;
                    if take == left {
                        self.phase = Phase::Done;
                    } else {
                        self.phase = Phase::Length(left - take);
                        return Ok(Step::Partial);
                    }
                }
                Phase::UntilClose => {
                    self.pos = filled;
                    self.body_end = filled;
                    return Ok(Step::Partial);
                }
                Phase::Chunked(c) => {
                    if !self.chunked(c, buf, filled, limits)? {
                        return Ok(Step::Partial);
                    }
                }
            }
        }
    }

    /// Returns Ok(true) when the phase moved on, Ok(false) when more bytes are needed.
    fn head(
        &mut self,
        buf: &[u8],
        filled: usize,
        limits: &Limits,
        head_request: bool,
    ) -> Result<bool, ParseError> {
        let data = &buf[self.head_start..filled];
        let max_headers = limits.max_headers.min(MAX_HEADERS);
        // Uninitialised room: httparse writes the headers it finds, nothing
        // fills the rest (2 KiB a response otherwise).
        let mut hs = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut []);
        let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut resp,
            data,
            &mut hs[..max_headers],
        );
        let n = match parsed {
            Ok(httparse::Status::Partial) => {
                if data.len() > limits.max_head {
                    return Err(ParseError::HeadTooLarge);
                }
                return Ok(false);
            }
            Ok(httparse::Status::Complete(n)) => n,
            Err(httparse::Error::TooManyHeaders) => return Err(ParseError::TooManyHeaders),
            Err(httparse::Error::Version) => return Err(ParseError::BadVersion),
            Err(httparse::Error::Status) => return Err(ParseError::BadStatus),
            Err(_) => return Err(ParseError::BadHead),
        };
        if n > limits.max_head {
            return Err(ParseError::HeadTooLarge);
        }
        let status = resp.code.ok_or(ParseError::BadStatus)?;
        if !(100..=999).contains(&status) {
            return Err(ParseError::BadStatus);
        }
        let version = resp.version.ok_or(ParseError::BadVersion)?;
        if status == 101 {
            return Err(ParseError::Upgrade);
        }
        if (100..200).contains(&status) {
            // An interim response: skip it, the final one follows.
            self.head_start += n;
            self.pos = self.head_start;
            return Ok(true);
        }
        let base = buf.as_ptr() as usize;
        let mut keep_alive = version == 1;
        let mut length: Option<u64> = None;
        let mut chunked = false;
        let mut has_te = false;
        for (i, h) in resp.headers.iter().enumerate() {
            if h.name.len() + h.value.len() + 2 > limits.max_line {
                return Err(ParseError::LineTooLong);
            }
            let name_at = h.name.as_ptr() as usize - base;
            let value_at = h.value.as_ptr() as usize - base;
            self.heads[i] = HeadRef {
                name: (name_at as u32, h.name.len() as u32),
                value: (value_at as u32, h.value.len() as u32),
            };
            let name = h.name.as_bytes();
            if name.eq_ignore_ascii_case(b"content-length") {
                let v = parse_length(h.value)?;
                if length.is_some_and(|l| l != v) {
                    return Err(ParseError::BadContentLength);
                }
                length = Some(v);
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                has_te = true;
                // Only the last coding decides the framing.
                chunked = h
                    .value
                    .split(|&b| b == b',')
                    .next_back()
                    .map(trim)
                    .is_some_and(|t| t.eq_ignore_ascii_case(b"chunked"));
            } else if name.eq_ignore_ascii_case(b"connection") {
                for t in h.value.split(|&b| b == b',').map(trim) {
                    if t.eq_ignore_ascii_case(b"close") {
                        keep_alive = false;
                    } else if t.eq_ignore_ascii_case(b"keep-alive") && version == 0 {
                        keep_alive = true;
                    }
                }
            }
        }
        let nheaders = resp.headers.len();
        if has_te && length.is_some() {
            return Err(ParseError::BadFraming);
        }
        self.status = status;
        self.nheaders = nheaders;
        self.keep_alive = keep_alive;
        self.pos = self.head_start + n;
        self.body_start = self.pos;
        self.body_end = self.pos;
        self.phase = if head_request || status == 204 || status == 304 {
            Phase::Done
        } else if has_te {
            if chunked {
                Phase::Chunked(Chunk::Size)
            } else {
                self.keep_alive = false;
                Phase::UntilClose
            }
        } else {
            match length {
                Some(0) => Phase::Done,
                Some(l) => {
                    if l > limits.max_response as u64 {
                        return Err(ParseError::ResponseTooLarge);
                    }
                    Phase::Length(l)
                }
                None => {
                    self.keep_alive = false;
                    Phase::UntilClose
                }
            }
        };
        Ok(true)
    }

    fn chunked(
        &mut self,
        c: Chunk,
        buf: &mut [u8],
        filled: usize,
        limits: &Limits,
    ) -> Result<bool, ParseError> {
        match c {
            Chunk::Size => {
                let Some(line) = line_at(buf, self.pos, filled, limits.max_line)? else {
                    return Ok(false);
                };
                let size = parse_chunk_size(&buf[self.pos..self.pos + line])?;
                if size > limits.max_chunk {
                    return Err(ParseError::ChunkTooLarge);
                }
                self.pos += line + 2;
                self.phase = Phase::Chunked(if size == 0 {
                    Chunk::Trailers(0)
                } else {
                    Chunk::Data(size)
                });
                Ok(true)
            }
            Chunk::Data(left) => {
                let avail = (filled - self.pos) as u64;
                let take = avail.min(left) as usize;
                if take == 0 {
                    return Ok(false);
                }
                buf.copy_within(self.pos..self.pos + take, self.body_end);
                self.body_end += take;
                self.pos += take;
                let left = left - take as u64;
                self.phase = Phase::Chunked(if left == 0 {
                    Chunk::DataEnd
                } else {
                    Chunk::Data(left)
                });
                Ok(left == 0)
            }
            Chunk::DataEnd => {
                if filled - self.pos < 2 {
                    if filled > self.pos && buf[self.pos] != b'\r' {
                        return Err(ParseError::BadChunkEnd);
                    }
                    return Ok(false);
                }
                if &buf[self.pos..self.pos + 2] != b"\r\n" {
                    return Err(ParseError::BadChunkEnd);
                }
                self.pos += 2;
                self.phase = Phase::Chunked(Chunk::Size);
                Ok(true)
            }
            Chunk::Trailers(seen) => {
                let Some(line) = line_at(buf, self.pos, filled, limits.max_line)? else {
                    if seen + (filled - self.pos) > limits.max_head {
                        return Err(ParseError::HeadTooLarge);
                    }
                    return Ok(false);
                };
                let text = &buf[self.pos..self.pos + line];
                self.pos += line + 2;
                if line == 0 {
                    self.phase = Phase::Done;
                    return Ok(true);
                }
                let colon = text.iter().position(|&b| b == b':');
                let valid = colon.is_some_and(|c| c > 0 && text[..c].iter().all(|&b| is_tchar(b)))
                    && text.iter().all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f));
                if !valid {
                    return Err(ParseError::BadTrailer);
                }
                let seen = seen + line + 2;
                if seen > limits.max_head {
                    return Err(ParseError::HeadTooLarge);
                }
                self.phase = Phase::Chunked(Chunk::Trailers(seen));
                Ok(true)
            }
        }
    }
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn trim(s: &[u8]) -> &[u8] {
    let start = s
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|&b| b != b' ' && b != b'\t')
        .map_or(start, |e| e + 1);
    &s[start..end.max(start)]
}

fn parse_length(v: &[u8]) -> Result<u64, ParseError> {
    let v = trim(v);
    if v.is_empty() || v.len() > 18 || !v.iter().all(u8::is_ascii_digit) {
        return Err(ParseError::BadContentLength);
    }
    Ok(v.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0')))
}

/// The length of the CRLF-terminated line starting at `pos`, without the CRLF;
/// None if it has not fully arrived. A bare LF is an error.
fn line_at(
    buf: &[u8],
    pos: usize,
    filled: usize,
    max_line: usize,
) -> Result<Option<usize>, ParseError> {
    let data = &buf[pos..filled];
    let window = &data[..data.len().min(max_line + 2)];
    match window.iter().position(|&b| b == b'\n') {
        Some(0) => Err(ParseError::BadChunkSize),
        Some(lf) => {
            if window[lf - 1] != b'\r' {
                return Err(ParseError::BadChunkSize);
            }
            Ok(Some(lf - 1))
        }
        None if data.len() > max_line + 1 => Err(ParseError::LineTooLong),
        None => Ok(None),
    }
}

/// `1a;name=value` → 26. At most 15 hex digits, so the value fits and stays sane.
fn parse_chunk_size(line: &[u8]) -> Result<u64, ParseError> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return Err(ParseError::BadChunkSize);
    }
    if digits > 15 {
        return Err(ParseError::ChunkTooLarge);
    }
    let rest = trim(&line[digits..]);
    if !rest.is_empty()
        && (rest[0] != b';' || rest.iter().any(|&b| b < 0x20 && b != b'\t' || b == 0x7f))
    {
        return Err(ParseError::BadChunkSize);
    }
    let mut n = 0u64;
    for &b in &line[..digits] {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => b - b'A' + 10,
        };
        n = n * 16 + u64::from(d);
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_sizes() {
        assert_eq!(parse_chunk_size(b"1a"), Ok(26));
        assert_eq!(parse_chunk_size(b"1A;x=\"y\""), Ok(26));
        assert_eq!(parse_chunk_size(b"0 ; ext"), Ok(0));
        assert_eq!(parse_chunk_size(b""), Err(ParseError::BadChunkSize));
        assert_eq!(parse_chunk_size(b"-1"), Err(ParseError::BadChunkSize));
        assert_eq!(parse_chunk_size(b"1 2"), Err(ParseError::BadChunkSize));
        assert_eq!(
            parse_chunk_size(b"fffffffffffffffff"),
            Err(ParseError::ChunkTooLarge)
        );
    }

    #[test]
    fn lengths() {
        assert_eq!(parse_length(b" 12 "), Ok(12));
        assert_eq!(parse_length(b"+1"), Err(ParseError::BadContentLength));
        assert_eq!(parse_length(b""), Err(ParseError::BadContentLength));
        assert_eq!(
            parse_length(b"9999999999999999999"),
            Err(ParseError::BadContentLength)
        );
    }
}
