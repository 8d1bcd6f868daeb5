//! The `Sec-WebSocket-Accept` computation: base64(SHA-1(key + GUID)), RFC 6455 §4.2.2.
//!
//! A small SHA-1 and base64 encoder, written here rather than pulled in as crates:
//! they run once per connect attempt on at most 60 bytes, the handshake check is
//! their only use, and the SHA-1 here proves nothing cryptographic (the accept key
//! only shows that the server read our key). Both are checked against the FIPS 180
//! and RFC 4648 test vectors and the example of RFC 6455 §1.3.
//!
//! Never allocates, never panics.

/// The GUID RFC 6455 appends to the key.
pub(crate) const GUID: &[u8; 36] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Length of a base64-encoded 16-byte key.
pub(crate) const KEY_LEN: usize = 24;
/// Length of a base64-encoded SHA-1 digest.
pub(crate) const ACCEPT_LEN: usize = 28;

/// SHA-1 of `parts`, concatenated (FIPS 180-4).
pub(crate) fn sha1(parts: &[&[u8]]) -> [u8; 20] {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    let mut block = [0u8; 64];
    let mut fill = 0usize;
    let mut total: u64 = 0;
    for part in parts {
        for &b in *part {
            block[fill] = b;
            fill += 1;
            if fill == 64 {
                compress(&mut h, &block);
                fill = 0;
            }
        }
        total = total.wrapping_add(part.len() as u64);
    }
    block[fill] = 0x80;
    fill += 1;
    if fill > 56 {
        block[fill..].fill(0);
        compress(&mut h, &block);
        fill = 0;
    }
    block[fill..56].fill(0);
    block[56..].copy_from_slice(&total.wrapping_mul(8).to_be_bytes());
    compress(&mut h, &block);
    let mut out = [0u8; 20];
    for (chunk, word) in out.chunks_exact_mut(4).zip(h) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    out
}

fn compress(h: &mut [u32; 5], block: &[u8; 64]) {
    let mut w = [0u32; 80];
    for (i, chunk) in block.chunks_exact(4).enumerate() {
        w[i] = u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
    }
    for i in 16..80 {
        w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
    }
    let [mut a, mut b, mut c, mut d, mut e] = *h;
    for (i, &wi) in w.iter().enumerate() {
        let (f, k) = match i {
            0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
            20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
            40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
            _ => (b ^ c ^ d, 0xCA62_C1D6),
        };
        let t = a
            .rotate_left(5)
            .wrapping_add(f)
            .wrapping_add(e)
            .wrapping_add(k)
            .wrapping_add(wi);
        e = d;
        d = c;
        c = b.rotate_left(30);
        b = a;
        a = t;
    }
    for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
        *x = x.wrapping_add(y);
    }
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding (RFC 4648 §4) of `input` into `out`; returns the
/// length written. `out` must hold `4 * ceil(input.len() / 3)` bytes.
pub(crate) fn base64(input: &[u8], out: &mut [u8]) -> usize {
    let mut n = 0;
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let v = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out[n] = ALPHABET[(v >> 18) as usize & 63];
        out[n + 1] = ALPHABET[(v >> 12) as usize & 63];
        out[n + 2] = if chunk.len() > 1 {
            ALPHABET[(v >> 6) as usize & 63]
        } else {
            b'='
        };
        out[n + 3] = if chunk.len() > 2 {
            ALPHABET[v as usize & 63]
        } else {
            b'='
        };
        n += 4;
    }
    n
}

/// The base64 key sent as `Sec-WebSocket-Key` for 16 random bytes.
pub(crate) fn encode_key(raw: &[u8; 16]) -> [u8; KEY_LEN] {
    let mut out = [0u8; KEY_LEN];
    base64(raw, &mut out);
    out
}

/// The `Sec-WebSocket-Accept` a server must answer to `key` (the base64 text).
pub(crate) fn accept_for(key: &[u8]) -> [u8; ACCEPT_LEN] {
    let digest = sha1(&[key, GUID]);
    let mut out = [0u8; ACCEPT_LEN];
    base64(&digest, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(d: [u8; 20]) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn sha1_fips_vectors() {
        assert_eq!(hex(sha1(&[])), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(
            hex(sha1(&[b"abc"])),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(
            hex(sha1(&[
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
            ])),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
        );
        assert_eq!(
            hex(sha1(&[
                b"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn",
                b"hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"
            ])),
            "a49b2446a02c645bf419f995b67091253a04a259"
        );
        let million = vec![b'a'; 1_000_000];
        assert_eq!(
            hex(sha1(&[&million])),
            "34aa973cd4c4daa4f61eeb2bdbad27316534016f"
        );
    }

    #[test]
    fn base64_rfc4648_vectors() {
        let cases: [(&[u8], &str); 7] = [
            (b"", ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg=="),
            (b"fooba", "Zm9vYmE="),
            (b"foobar", "Zm9vYmFy"),
        ];
        for (input, want) in cases {
            let mut out = [0u8; 8];
            let n = base64(input, &mut out);
            assert_eq!(&out[..n], want.as_bytes());
        }
    }

    #[test]
    fn rfc6455_example_accept() {
        // RFC 6455 §1.3: the nonce is the base64 of the 16 bytes 0x01..=0x10.
        let raw: [u8; 16] = core::array::from_fn(|i| i as u8 + 1);
        let key = encode_key(&raw);
        assert_eq!(&key, b"AQIDBAUGBwgJCgsMDQ4PEA==");
        assert_eq!(
            &accept_for(b"dGhlIHNhbXBsZSBub25jZQ=="),
            b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }
}
