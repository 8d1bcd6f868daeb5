//! The RFC 6455 frame codec: a header parser that reads bytes and says complete,
//! partial or protocol error, and an encoder that writes a (masked) frame into a
//! caller's buffer.
//!
//! Pure functions over slices: no state, no allocation, no I/O, and no panic on any
//! input (the fuzz target and `io/tests/ws_codec_props.rs` feed it arbitrary bytes).

use super::ProtocolError;

/// Longest frame header: 2 bytes, an 8-byte extended length, a 4-byte mask.
pub const MAX_HEADER: usize = 14;
/// Longest payload of a control frame (RFC 6455 §5.5).
pub const MAX_CONTROL: usize = 125;

/// A frame's opcode (RFC 6455 §5.2). The reserved opcodes are a protocol error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Opcode {
    /// A later fragment of a message.
    Continuation,
    /// The first (or only) frame of a UTF-8 text message.
    Text,
    /// The first (or only) frame of a binary message.
    Binary,
    /// Close, with an optional code and reason.
    Close,
    /// Ping: the peer answers with a pong carrying the same payload.
    Ping,
    /// Pong: the answer to a ping, or an unsolicited heartbeat.
    Pong,
}

impl Opcode {
    /// The opcode of the low nibble `b`, or `None` for a reserved one.
    pub const fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            0x0 => Opcode::Continuation,
            0x1 => Opcode::Text,
            0x2 => Opcode::Binary,
            0x8 => Opcode::Close,
            0x9 => Opcode::Ping,
            0xA => Opcode::Pong,
            _ => return None,
        })
    }

    /// The 4-bit wire value.
    pub const fn as_u8(self) -> u8 {
        match self {
            Opcode::Continuation => 0x0,
            Opcode::Text => 0x1,
            Opcode::Binary => 0x2,
            Opcode::Close => 0x8,
            Opcode::Ping => 0x9,
            Opcode::Pong => 0xA,
        }
    }

    /// Close, ping and pong: at most 125 bytes, never fragmented, may come between
    /// the fragments of a message.
    pub const fn is_control(self) -> bool {
        matches!(self, Opcode::Close | Opcode::Ping | Opcode::Pong)
    }
}

/// Which end reads the frames: a client must see unmasked frames, a server masked
/// ones (RFC 6455 §5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// We are the client: frames come from a server and must not be masked.
    Client,
    /// We are the server: frames come from a client and must be masked.
    Server,
}

/// A parsed frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    /// Last frame of its message.
    pub fin: bool,
    /// The opcode.
    pub opcode: Opcode,
    /// The masking key, if the frame is masked.
    pub mask: Option<[u8; 4]>,
    /// Payload length.
    pub len: u64,
}

/// Parses the frame header at the start of `buf`.
///
/// `Ok(Some((header, n)))`: the header is the first `n` bytes. `Ok(None)`: more
/// bytes are needed. `Err`: the bytes already seen break RFC 6455 (reserved bits,
/// reserved opcode, masking for `role`, a long or fragmented control frame, a
/// non-minimal or 64-bit-high length, a payload above `max_payload`). Errors are
/// reported as early as the bytes allow.
pub fn parse_header(
    buf: &[u8],
    role: Role,
    max_payload: u64,
) -> Result<Option<(Header, usize)>, ProtocolError> {
    let Some(&b0) = buf.first() else {
        return Ok(None);
    };
    if b0 & 0x70 != 0 {
        return Err(ProtocolError::ReservedBits);
    }
    let Some(opcode) = Opcode::from_u8(b0 & 0x0F) else {
        return Err(ProtocolError::BadOpcode(b0 & 0x0F));
    };
    let fin = b0 & 0x80 != 0;
    if opcode.is_control() && !fin {
        return Err(ProtocolError::ControlFragmented);
    }
    let Some(&b1) = buf.get(1) else {
        return Ok(None);
    };
    let masked = b1 & 0x80 != 0;
    match (role, masked) {
        (Role::Client, true) => return Err(ProtocolError::MaskedFrame),
        (Role::Server, false) => return Err(ProtocolError::UnmaskedFrame),
        _ => {}
    }
    let len7 = b1 & 0x7F;
    if opcode.is_control() && usize::from(len7) > MAX_CONTROL {
        return Err(ProtocolError::ControlTooLong);
    }
    let (len, mut at) = match len7 {
        126 => {
            let Some(b) = buf.get(2..4) else {
                return Ok(None);
            };
            let len = u64::from(u16::from_be_bytes([b[0], b[1]]));
            if len < 126 {
                return Err(ProtocolError::NonMinimalLength);
            }
            (len, 4)
        }
        127 => {
            let Some(b) = buf.get(2..10) else {
                return Ok(None);
            };
            let mut raw = [0u8; 8];
            raw.copy_from_slice(b);
            let len = u64::from_be_bytes(raw);
            if len >> 63 != 0 {
                return Err(ProtocolError::BadLength);
            }
            if len <= 0xFFFF {
                return Err(ProtocolError::NonMinimalLength);
            }
            (len, 10)
        }
        n => (u64::from(n), 2),
    };
    if len > max_payload {
        return Err(ProtocolError::FrameTooBig);
    }
    let mask = if masked {
        let Some(b) = buf.get(at..at + 4) else {
            return Ok(None);
        };
        at += 4;
        Some([b[0], b[1], b[2], b[3]])
    } else {
        None
    };
    Ok(Some((
        Header {
            fin,
            opcode,
            mask,
            len,
        },
        at,
    )))
}

/// Bytes a frame with a `len`-byte payload takes on the wire.
pub const fn frame_len(len: usize, masked: bool) -> usize {
    let ext = if len < 126 {
        0
    } else if len <= 0xFFFF {
        2
    } else {
        8
    };
    2 + ext + if masked { 4 } else { 0 } + len
}

/// Writes one frame into `out`: header, then `payload` masked with `mask` if given.
/// Returns the bytes written, or `None` (and writes nothing) if `out` is too small.
/// The caller keeps control frames within [`MAX_CONTROL`] bytes and unfragmented.
pub fn encode(
    out: &mut [u8],
    fin: bool,
    opcode: Opcode,
    payload: &[u8],
    mask: Option<[u8; 4]>,
) -> Option<usize> {
    let len = payload.len();
    let total = frame_len(len, mask.is_some());
    let out = out.get_mut(..total)?;
    out[0] = if fin { 0x80 } else { 0 } | opcode.as_u8();
    let mask_bit = if mask.is_some() { 0x80 } else { 0 };
    let mut at = 2;
    if len < 126 {
        out[1] = mask_bit | len as u8;
    } else if len <= 0xFFFF {
        out[1] = mask_bit | 126;
        out[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        at = 4;
    } else {
        out[1] = mask_bit | 127;
        out[2..10].copy_from_slice(&(len as u64).to_be_bytes());
        at = 10;
    }
    if let Some(key) = mask {
        out[at..at + 4].copy_from_slice(&key);
        at += 4;
    }
    match mask {
        Some(key) => copy_masked(&mut out[at..], payload, key),
        None => out[at..].copy_from_slice(payload),
    }
    Some(total)
}

/// The masking key repeated over 8 bytes (both halves the key: the same in
/// either byte order).
fn wide_key(key: [u8; 4]) -> u64 {
    u64::from(u32::from_ne_bytes(key)) * 0x1_0000_0001
}

/// `out` = `payload` XOR the repeated masking key (RFC 6455 §5.3), in one pass: 32
/// bytes a step as four words (the compiler makes vector XORs of them), then 8,
/// then a byte at a time. Every step starts at a multiple of 8 bytes, so the key's
/// phase is that of the byte-at-a-time rule everywhere. `out` is as long as
/// `payload` (the caller cut it so); a longer one keeps its tail.
fn copy_masked(out: &mut [u8], payload: &[u8], key: [u8; 4]) {
    let wide = wide_key(key);
    let mut out32 = out.chunks_exact_mut(32);
    let mut in32 = payload.chunks_exact(32);
    for (o, p) in (&mut out32).zip(&mut in32) {
        for (o, p) in o.chunks_exact_mut(8).zip(p.chunks_exact(8)) {
            let mut raw = [0u8; 8];
            raw.copy_from_slice(p);
            o.copy_from_slice(&(u64::from_ne_bytes(raw) ^ wide).to_ne_bytes());
        }
    }
    let mut out8 = out32.into_remainder().chunks_exact_mut(8);
    let mut in8 = in32.remainder().chunks_exact(8);
    for (o, p) in (&mut out8).zip(&mut in8) {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(p);
        o.copy_from_slice(&(u64::from_ne_bytes(raw) ^ wide).to_ne_bytes());
    }
    let tail = out8.into_remainder().iter_mut().zip(in8.remainder());
    for (i, (o, p)) in tail.enumerate() {
        *o = p ^ key[i & 3];
    }
}

/// XORs `buf` with the repeated masking key (RFC 6455 §5.3); its own inverse.
pub fn apply_mask(buf: &mut [u8], key: [u8; 4]) {
    let wide = wide_key(key);
    let mut chunks = buf.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(chunk);
        chunk.copy_from_slice(&(u64::from_ne_bytes(raw) ^ wide).to_ne_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= key[i & 3];
    }
}

/// Whether a peer may send close `code` (RFC 6455 §7.4; 1012-1014 are registered
/// with IANA). 1005, 1006 and 1015 are never sent on the wire.
pub const fn close_code_valid(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_parse_round_trip_all_length_forms() {
        for len in [0usize, 1, 125, 126, 127, 0xFFFF, 0x1_0000] {
            let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut out = vec![0u8; frame_len(len, true)];
            let n = encode(&mut out, true, Opcode::Binary, &payload, Some([1, 2, 3, 4])).unwrap();
            assert_eq!(n, out.len());
            let (h, hl) = parse_header(&out, Role::Server, u64::MAX).unwrap().unwrap();
            assert_eq!(h.len, len as u64);
            assert_eq!(h.mask, Some([1, 2, 3, 4]));
            let mut body = out[hl..].to_vec();
            apply_mask(&mut body, [1, 2, 3, 4]);
            assert_eq!(body, payload);
            // Every strict prefix of the header is partial, never an error.
            for cut in 0..hl {
                assert_eq!(parse_header(&out[..cut], Role::Server, u64::MAX), Ok(None));
            }
        }
    }

    /// RFC 6455 §5.3 as written: byte `i` XOR key byte `i mod 4`.
    fn masked_by_the_rule(payload: &[u8], key: [u8; 4]) -> Vec<u8> {
        payload
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ key[i % 4])
            .collect()
    }

    proptest::proptest! {
        /// Word-at-a-time masking, fused with the copy and alone, is the byte-at-a-time
        /// rule for every length (all the 32-, 8- and 1-byte steps and their seams)
        /// and every alignment of the source and the destination.
        #[test]
        fn masking_is_the_byte_at_a_time_rule_at_every_length_and_offset(
            payload in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
            key in proptest::array::uniform4(proptest::num::u8::ANY),
            src_at in 0usize..16,
            dst_at in 0usize..16,
        ) {
            let want = masked_by_the_rule(&payload, key);
            let mut src = vec![0u8; src_at];
            src.extend_from_slice(&payload);
            let src = &src[src_at..];
            let mut dst = vec![0xA5u8; dst_at + payload.len() + 3];
            copy_masked(&mut dst[dst_at..dst_at + payload.len()], src, key);
            proptest::prop_assert_eq!(&dst[dst_at..dst_at + payload.len()], &want[..]);
            proptest::prop_assert!(dst[..dst_at].iter().all(|&b| b == 0xA5));
            proptest::prop_assert_eq!(&dst[dst_at + payload.len()..], &[0xA5u8; 3][..]);
            let mut inplace = vec![0u8; dst_at];
            inplace.extend_from_slice(&payload);
            apply_mask(&mut inplace[dst_at..], key);
            proptest::prop_assert_eq!(&inplace[dst_at..], &want[..]);
            let mut frame = vec![0u8; frame_len(payload.len(), true) + dst_at];
            let n = encode(&mut frame[dst_at..], true, Opcode::Text, src, Some(key));
            proptest::prop_assert_eq!(n, Some(frame_len(payload.len(), true)));
            let body = &frame[frame.len() - payload.len()..];
            proptest::prop_assert_eq!(body, &want[..]);
        }
    }

    #[test]
    fn encode_refuses_a_short_buffer() {
        let mut out = [0u8; 6];
        assert_eq!(encode(&mut out, true, Opcode::Text, b"hello", None), None);
        assert_eq!(encode(&mut out, true, Opcode::Text, b"hell", None), Some(6));
    }

    #[test]
    fn header_errors() {
        let p = |b: &[u8]| parse_header(b, Role::Client, 1 << 20);
        assert_eq!(p(&[0xC1]), Err(ProtocolError::ReservedBits));
        assert_eq!(p(&[0x83]), Err(ProtocolError::BadOpcode(3)));
        assert_eq!(p(&[0x09]), Err(ProtocolError::ControlFragmented));
        assert_eq!(p(&[0x89, 0x80]), Err(ProtocolError::MaskedFrame));
        assert_eq!(
            parse_header(&[0x89, 0x00], Role::Server, 10),
            Err(ProtocolError::UnmaskedFrame)
        );
        assert_eq!(p(&[0x89, 126]), Err(ProtocolError::ControlTooLong));
        assert_eq!(
            p(&[0x82, 126, 0, 125]),
            Err(ProtocolError::NonMinimalLength)
        );
        assert_eq!(
            p(&[0x82, 127, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]),
            Err(ProtocolError::NonMinimalLength)
        );
        assert_eq!(
            p(&[0x82, 127, 0x80, 0, 0, 0, 0, 1, 0, 0]),
            Err(ProtocolError::BadLength)
        );
        assert_eq!(
            p(&[0x82, 127, 0, 0, 0, 0, 0, 0x20, 0, 0]),
            Err(ProtocolError::FrameTooBig)
        );
    }
}
