//! Signing Hyperliquid's L1 actions, built in: the action's msgpack exactly as the
//! venue hashes it, then the nonce (8 bytes, big-endian), the vault flag (and the
//! vault's address), the `expiresAfter` suffix; keccak-256 of all that is the
//! `connectionId` of a "phantom agent" (`source` "a" on mainnet, "b" on testnet),
//! signed as EIP-712 typed data (domain `Exchange` / `1` / chain 1337 / the zero
//! verifying contract) with secp256k1 and a recovery id (`r`, `s`, `v` = 27 or 28).
//!
//! The msgpack is transcoded from the action's JSON as the endpoint writes it, so
//! what is signed is, byte for byte, what is sent: members in the order written
//! (the official SDKs' field order), integers in their smallest form (as msgpack
//! and rmp-serde write them), strings as strings. A number with a fraction is
//! refused: the venue writes prices and sizes as strings and hashes no floats.
//!
//! Sources (checked 2026-12-06): the Python SDK's `hyperliquid/utils/signing.py`
//! (`action_hash`, `construct_phantom_agent`, `l1_payload`) and the Rust SDK's
//! `src/exchange/exchange_client.rs` (`Actions::hash`, rmp-serde `to_vec_named`)
//! and `src/signature/agent.rs`; <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/signing>.
//!
//! The field's crates do the arithmetic: RustCrypto `k256` (secp256k1, RFC 6979
//! deterministic nonces, low-s) and `sha3` (keccak-256), `rmp` for msgpack. Signing
//! allocates nothing once the wallet's scratch buffer holds the largest action
//! (sized at construction), takes no lock and reads no clock.

use super::{Action, Signature, Signer};
use crate::adapt::Error;
use crate::json::{self, Kind, Value};
use arrayvec::ArrayString;
use k256::ecdsa::{RecoveryId, SigningKey, VerifyingKey};
use sha3::{Digest, Keccak256};
use zeroize::Zeroizing;

/// Which chain's phantom agent a signature is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Network {
    /// `source` "a".
    Mainnet,
    /// `source` "b".
    Testnet,
}

impl Network {
    /// The phantom agent's `source`.
    pub fn source(self) -> &'static str {
        match self {
            Network::Mainnet => "a",
            Network::Testnet => "b",
        }
    }
}

/// Why a key, an address or an action could not be used. Never holds key material.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignError {
    /// The private key is not 64 hex digits (an optional `0x` and surrounding
    /// whitespace allowed).
    KeyNotHex,
    /// The private key is zero or not below the curve's order.
    KeyOutOfRange,
    /// An address (the account's or the vault's; named) is not `0x` and 40 hex digits.
    BadAddress(&'static str),
    /// The action is not a JSON object.
    ActionNotObject,
    /// The action holds a number with a fraction or an exponent, or out of the
    /// 64-bit range: the venue hashes no floats (prices and sizes are strings).
    ActionNumber,
    /// The action's JSON is malformed.
    ActionJson,
    /// The signature's `r`/`s` is not a valid secp256k1 signature, or `v` is not
    /// 27 or 28.
    BadSignature,
}

impl core::fmt::Display for SignError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SignError::KeyNotHex => {
                f.write_str("the private key is not 64 hex digits (optionally 0x-prefixed)")
            }
            SignError::KeyOutOfRange => {
                f.write_str("the private key is zero or not below the secp256k1 order")
            }
            SignError::BadAddress(which) => {
                write!(f, "the {which} address is not 0x and 40 hex digits")
            }
            SignError::ActionNotObject => f.write_str("the action is not a JSON object"),
            SignError::ActionNumber => f.write_str(
                "the action holds a non-integer number: write prices and sizes as strings",
            ),
            SignError::ActionJson => f.write_str("the action is not valid JSON"),
            SignError::BadSignature => f.write_str("not a valid (r, s, v) secp256k1 signature"),
        }
    }
}

impl From<SignError> for Error {
    fn from(e: SignError) -> Self {
        Error::BadArgument(match e {
            SignError::ActionNumber => "action (a non-integer number: use strings)",
            SignError::ActionNotObject | SignError::ActionJson => "action (not a JSON object)",
            _ => "signing key or address",
        })
    }
}

/// An address: 20 bytes.
pub type Address = [u8; 20];

/// Reads `0x` and 40 hex digits (either case); `which` names it in the error.
pub fn parse_address(text: &str, which: &'static str) -> Result<Address, SignError> {
    let hex = text
        .strip_prefix("0x")
        .ok_or(SignError::BadAddress(which))?;
    let mut out = [0u8; 20];
    if hex.len() != 40 || !hex_into(hex.as_bytes(), &mut out) {
        return Err(SignError::BadAddress(which));
    }
    Ok(out)
}

/// `0x` and the address in lower-case hex, as the venue writes it.
pub fn address_hex(a: &Address) -> ArrayString<42> {
    let mut s = ArrayString::new();
    s.push_str("0x");
    for b in a {
        for nib in [b >> 4, b & 15] {
            s.push(char::from(b"0123456789abcdef"[usize::from(nib)]));
        }
    }
    s
}

fn hex_into(hex: &[u8], out: &mut [u8]) -> bool {
    if hex.len() != out.len() * 2 {
        return false;
    }
    let nib = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    for (o, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        match (nib(pair[0]), nib(pair[1])) {
            (Some(h), Some(l)) => *o = (h << 4) | l,
            _ => return false,
        }
    }
    true
}

/// Appends the msgpack of `action_json` (a JSON object) to `out`: members in the
/// order written, integers in their smallest msgpack form, strings decoded, `null`
/// as nil. What the Python SDK's `msgpack.packb(action)` and the Rust SDK's
/// `rmp_serde::to_vec_named(&action)` write for the same action.
pub fn action_msgpack(action_json: &[u8], out: &mut Vec<u8>) -> Result<(), SignError> {
    let v = json::parse(action_json).map_err(|_| SignError::ActionJson)?;
    if v.kind() != Kind::Object {
        return Err(SignError::ActionNotObject);
    }
    msgpack(v, out)
}

fn msgpack(v: Value<'_>, out: &mut Vec<u8>) -> Result<(), SignError> {
    use rmp::encode;
    // Writes into a Vec cannot fail; the error type is only the trait's.
    let bad = |_| SignError::ActionJson;
    match v.kind() {
        Kind::Object => {
            let members = v.members().map_err(|_| SignError::ActionJson)?;
            let n = u32::try_from(members.clone().count()).map_err(|_| SignError::ActionJson)?;
            encode::write_map_len(out, n).map_err(bad)?;
            for (k, val) in members {
                msgpack(k, out)?;
                msgpack(val, out)?;
            }
        }
        Kind::Array => {
            let items = v.items().map_err(|_| SignError::ActionJson)?;
            let n = u32::try_from(items.clone().count()).map_err(|_| SignError::ActionJson)?;
            encode::write_array_len(out, n).map_err(bad)?;
            for item in items {
                msgpack(item, out)?;
            }
        }
        Kind::String => {
            let bytes = v.str_bytes().map_err(|_| SignError::ActionJson)?;
            let n = u32::try_from(bytes.clone().count()).map_err(|_| SignError::ActionJson)?;
            encode::write_str_len(out, n).map_err(bad)?;
            out.extend(bytes);
        }
        Kind::Number => {
            if let Ok(u) = v.as_u64() {
                encode::write_uint(out, u).map_err(bad)?;
            } else {
                let i = v.as_i64().map_err(|_| SignError::ActionNumber)?;
                encode::write_sint(out, i).map_err(bad)?;
            }
        }
        Kind::Bool => encode::write_bool(out, v.as_bool().map_err(|_| SignError::ActionJson)?)
            .map_err(|_| SignError::ActionJson)?,
        Kind::Null => encode::write_nil(out).map_err(|_| SignError::ActionJson)?,
    }
    Ok(())
}

/// The phantom agent's `connectionId`: keccak-256 of the action's msgpack, the
/// nonce (8 bytes, big-endian), `0x00` or `0x01` and the vault's address, and,
/// with `expiresAfter`, `0x00` and it (8 bytes, big-endian). `msgpack` is
/// [`action_msgpack`]'s output.
pub fn connection_id(
    msgpack: &[u8],
    nonce_ms: u64,
    vault: Option<&Address>,
    expires_after_ms: Option<u64>,
) -> [u8; 32] {
    let mut h = Keccak256::new();
    h.update(msgpack);
    h.update(nonce_ms.to_be_bytes());
    match vault {
        None => h.update([0u8]),
        Some(a) => {
            h.update([1u8]);
            h.update(a);
        }
    }
    if let Some(e) = expires_after_ms {
        h.update([0u8]);
        h.update(e.to_be_bytes());
    }
    h.finalize().into()
}

fn keccak(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Keccak256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// The EIP-712 digest a phantom agent is signed as: keccak-256 of `0x19 0x01`,
/// the domain separator (`Exchange`, `1`, chain id 1337, the zero verifying
/// contract) and the hash of `Agent(string source,bytes32 connectionId)`.
pub fn agent_digest(connection_id: &[u8; 32], network: Network) -> [u8; 32] {
    let domain_type = keccak(&[
        b"EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)",
    ]);
    let mut chain = [0u8; 32];
    chain[30..].copy_from_slice(&1337u16.to_be_bytes());
    let domain = keccak(&[
        &domain_type,
        &keccak(&[b"Exchange"]),
        &keccak(&[b"1"]),
        &chain,
        &[0u8; 32],
    ]);
    let agent_type = keccak(&[b"Agent(string source,bytes32 connectionId)"]);
    let agent = keccak(&[
        &agent_type,
        &keccak(&[network.source().as_bytes()]),
        connection_id,
    ]);
    keccak(&[&[0x19, 0x01], &domain, &agent])
}

/// The address of a public key: the last 20 bytes of keccak-256 of its
/// uncompressed point without the `0x04` tag.
pub fn address_of(key: &VerifyingKey) -> Address {
    let point = key.to_encoded_point(false);
    let hash = keccak(&[&point.as_bytes()[1..]]);
    let mut a = [0u8; 20];
    a.copy_from_slice(&hash[12..]);
    a
}

/// The address that signed `digest` with `sig`, as the venue finds the signer
/// (an agent, or the account itself).
pub fn recover(digest: &[u8; 32], sig: &Signature) -> Result<Address, SignError> {
    let sig_k =
        k256::ecdsa::Signature::from_scalars(sig.r, sig.s).map_err(|_| SignError::BadSignature)?;
    let id = match sig.v {
        27 => 0,
        28 => 1,
        _ => return Err(SignError::BadSignature),
    };
    let id = RecoveryId::from_byte(id).ok_or(SignError::BadSignature)?;
    let key = VerifyingKey::recover_from_prehash(digest, &sig_k, id)
        .map_err(|_| SignError::BadSignature)?;
    Ok(address_of(&key))
}

/// Recovers the signer of an exchange request from its parts: the action's
/// JSON, the nonce, the vault (if any), `expiresAfter` (if any) and the network.
/// `scratch` holds the msgpack (cleared first).
pub fn recover_action(
    action_json: &[u8],
    nonce_ms: u64,
    vault: Option<&Address>,
    expires_after_ms: Option<u64>,
    network: Network,
    sig: &Signature,
    scratch: &mut Vec<u8>,
) -> Result<Address, SignError> {
    scratch.clear();
    action_msgpack(action_json, scratch)?;
    let id = connection_id(scratch, nonce_ms, vault, expires_after_ms);
    recover(&agent_digest(&id, network), sig)
}

/// Bytes of msgpack the scratch buffer holds without growing: a batch of 40
/// orders is under 4 KiB.
const SCRATCH: usize = 16 * 1024;

/// A private key that signs L1 actions: the account's own key, or an API wallet
/// (agent) approved by it, optionally trading for a vault or sub-account. The key
/// is wiped from memory when the wallet is dropped (k256's keys zeroize) and is
/// never printed.
pub struct Wallet {
    key: SigningKey,
    signer: Address,
    network: Network,
    /// The address info requests ask about: the vault's, else the master
    /// account's, else the signer's own.
    user: ArrayString<42>,
    vault: Option<(Address, ArrayString<42>)>,
    scratch: Vec<u8>,
}

impl core::fmt::Debug for Wallet {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Wallet")
            .field("signer", &address_hex(&self.signer).as_str())
            .field("network", &self.network)
            .field("user", &self.user.as_str())
            .finish_non_exhaustive()
    }
}

impl Wallet {
    /// A wallet from the key's text (64 hex digits, optionally `0x`-prefixed,
    /// surrounding whitespace such as a file's last newline ignored), as read from
    /// a secret file or the environment. The text is the caller's to wipe; the
    /// decoded copy here is wiped.
    pub fn from_key_text(text: &[u8], network: Network) -> Result<Wallet, SignError> {
        let t = text.trim_ascii();
        let t = t.strip_prefix(b"0x").unwrap_or(t);
        let mut raw = Zeroizing::new([0u8; 32]);
        if !hex_into(t, &mut raw[..]) {
            return Err(SignError::KeyNotHex);
        }
        let key = SigningKey::from_slice(&raw[..]).map_err(|_| SignError::KeyOutOfRange)?;
        let signer = address_of(key.verifying_key());
        Ok(Wallet {
            key,
            signer,
            network,
            user: address_hex(&signer),
            vault: None,
            scratch: Vec::with_capacity(SCRATCH),
        })
    }

    /// Signs as an API wallet (agent) for `account` (`0x` and 40 hex digits): info
    /// requests then ask about the account, not the agent.
    pub fn acting_for(mut self, account: &str) -> Result<Wallet, SignError> {
        let a = parse_address(account, "account")?;
        if self.vault.is_none() {
            self.user = address_hex(&a);
        }
        Ok(self)
    }

    /// Trades for a vault or sub-account (`0x` and 40 hex digits): every action
    /// carries `vaultAddress` and its hash the vault flag and address; info
    /// requests ask about the vault.
    pub fn for_vault(mut self, vault: &str) -> Result<Wallet, SignError> {
        let a = parse_address(vault, "vault")?;
        self.user = address_hex(&a);
        self.vault = Some((a, address_hex(&a)));
        Ok(self)
    }

    /// The signer's own address (the agent's for an API wallet).
    pub fn signer_address(&self) -> Address {
        self.signer
    }

    /// The network its signatures are for.
    pub fn network(&self) -> Network {
        self.network
    }

    /// Signs an action given as its JSON (`expiresAfter` included in the hash
    /// when given).
    pub fn sign_json(
        &mut self,
        action_json: &[u8],
        nonce_ms: u64,
        expires_after_ms: Option<u64>,
    ) -> Result<Signature, SignError> {
        self.scratch.clear();
        action_msgpack(action_json, &mut self.scratch)?;
        let vault = self.vault.as_ref().map(|(a, _)| a);
        let id = connection_id(&self.scratch, nonce_ms, vault, expires_after_ms);
        self.sign_digest(&agent_digest(&id, self.network))
    }

    fn sign_digest(&self, digest: &[u8; 32]) -> Result<Signature, SignError> {
        let (sig, id) = self
            .key
            .sign_prehash_recoverable(digest)
            .map_err(|_| SignError::BadSignature)?;
        let (r, s) = sig.split_bytes();
        Ok(Signature {
            r: r.into(),
            s: s.into(),
            v: 27 + u8::from(id.is_y_odd()),
        })
    }
}

impl Signer for Wallet {
    fn address(&self) -> &str {
        &self.user
    }

    fn vault_address(&self) -> Option<&str> {
        self.vault.as_ref().map(|(_, hex)| hex.as_str())
    }

    fn sign(
        &mut self,
        _action: Action<'_>,
        action_json: &[u8],
        nonce_ms: u64,
        expires_after_ms: u64,
    ) -> Result<Signature, Error> {
        Ok(self.sign_json(action_json, nonce_ms, Some(expires_after_ms))?)
    }
}
