//! Who signed an exchange request, as Hyperliquid finds out: the action's msgpack
//! (rmp-serde over the JSON as received, member order kept), the nonce as 8
//! big-endian bytes, the vault flag and address, the `expiresAfter` suffix,
//! keccak-256 of that as the phantom agent's `connectionId`, its EIP-712 digest,
//! and the address recovered from (r, s, v). Then the nonce rules of that signer.
//!
//! Written apart from ergon's signer (`ergon_venues::hyperliquid::sign`), with
//! rmp-serde where that one uses rmp by hand, so a shared mistake cannot pass
//! both sides; the official SDKs' vectors check that one.
//!
//! Sources (checked 2026-12-06): the Python SDK's `hyperliquid/utils/signing.py`
//! (`action_hash`, `l1_payload`); <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/nonces-and-api-wallets>.

use k256::ecdsa::{RecoveryId, Signature, VerifyingKey};
use serde_json::Value;
use sha3::{Digest, Keccak256};

use crate::config::Hyperliquid;
use crate::engine::address::AddressBook;

fn keccak(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Keccak256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// `0x` and 40 hex digits, either case.
pub(crate) fn parse_address(s: &str) -> Option<[u8; 20]> {
    let hex = s.strip_prefix("0x")?;
    if hex.len() != 40 {
        return None;
    }
    let mut out = [0u8; 20];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// `0x` and 32 bytes of hex (leading zeros may be missing, as some clients
/// print integers).
fn parse_word(s: &str) -> Option<[u8; 32]> {
    let hex = s.strip_prefix("0x")?;
    if hex.is_empty() || hex.len() > 64 || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let padded = format!("{hex:0>64}");
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&padded[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// Lower-case `0x` hex of an address.
pub(crate) fn hex_address(a: &[u8; 20]) -> String {
    let mut s = String::from("0x");
    for b in a {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// The signer of `action` (as received), or why none can be found.
pub(crate) fn recover(
    action: &Value,
    nonce: u64,
    vault: Option<&[u8; 20]>,
    expires_after: Option<u64>,
    signature: &Value,
    mainnet: bool,
) -> Result<[u8; 20], &'static str> {
    let r = signature
        .get("r")
        .and_then(Value::as_str)
        .and_then(parse_word);
    let s = signature
        .get("s")
        .and_then(Value::as_str)
        .and_then(parse_word);
    let v = signature.get("v").and_then(Value::as_u64);
    let (Some(r), Some(s), Some(v @ (27 | 28))) = (r, s, v) else {
        return Err("signature is not {r, s, v} with v 27 or 28");
    };
    let packed = rmp_serde::to_vec_named(action).map_err(|_| "action cannot be hashed")?;
    let mut tail = Vec::with_capacity(38);
    tail.extend_from_slice(&nonce.to_be_bytes());
    match vault {
        None => tail.push(0),
        Some(a) => {
            tail.push(1);
            tail.extend_from_slice(a);
        }
    }
    if let Some(e) = expires_after {
        tail.push(0);
        tail.extend_from_slice(&e.to_be_bytes());
    }
    let connection_id = keccak(&[&packed, &tail]);
    let mut chain = [0u8; 32];
    chain[24..].copy_from_slice(&1337u64.to_be_bytes());
    let domain = keccak(&[
        &keccak(&[
            b"EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)",
        ]),
        &keccak(&[b"Exchange"]),
        &keccak(&[b"1"]),
        &chain,
        &[0u8; 32],
    ]);
    let source: &[u8] = if mainnet { b"a" } else { b"b" };
    let agent = keccak(&[
        &keccak(&[b"Agent(string source,bytes32 connectionId)"]),
        &keccak(&[source]),
        &connection_id,
    ]);
    let digest = keccak(&[b"\x19\x01", &domain, &agent]);
    let sig = Signature::from_scalars(r, s).map_err(|_| "signature (r, s) out of range")?;
    let id = RecoveryId::from_byte(u8::try_from(v - 27).unwrap_or(0)).ok_or("v")?;
    let key = VerifyingKey::recover_from_prehash(&digest, &sig, id)
        .map_err(|_| "no key recovers from this signature")?;
    let point = key.to_encoded_point(false);
    let hash = keccak(&[&point.as_bytes()[1..]]);
    let mut address = [0u8; 20];
    address.copy_from_slice(&hash[12..]);
    Ok(address)
}

/// The nonce rules of one signer: within (T − 2 days, T + 1 day) of the venue's
/// time, not one of the kept ones, and above the least kept once the venue keeps
/// its full count. A nonce that passes is kept (the least dropped when full).
/// Err holds the venue's answer text.
pub(crate) fn take_nonce(
    book: &mut AddressBook,
    cfg: &Hyperliquid,
    signer: [u8; 20],
    nonce: u64,
    now: i64,
) -> Result<(), String> {
    let n = i64::try_from(nonce).unwrap_or(i64::MAX);
    if n <= now - cfg.nonce_behind_ms || n >= now + cfg.nonce_ahead_ms {
        return Err(format!(
            "Invalid nonce: nonce {nonce} is outside the window of the current time {now}"
        ));
    }
    let kept = book.nonces.entry(signer).or_default();
    if kept.contains(&nonce) {
        return Err(format!("Invalid nonce: duplicate nonce {nonce}"));
    }
    if kept.len() >= cfg.nonces_kept {
        let least = kept.first().copied().unwrap_or(0);
        if nonce < least {
            return Err(format!(
                "Invalid nonce: nonce {nonce} is lower than the lowest of the {} kept ({least})",
                cfg.nonces_kept
            ));
        }
        kept.pop_first();
    }
    kept.insert(nonce);
    Ok(())
}
