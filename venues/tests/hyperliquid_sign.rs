//! Hyperliquid's L1 action signatures (`hyperliquid::sign`) against the official
//! SDKs' published vectors, against 200 actions the official Python SDK signed
//! (`vectors/hyperliquid_sdk_vectors.py`), by address recovery, and against the
//! Rust SDK's encoder (rmp-serde over serde structs) on random actions.
//!
//! The published vectors:
//! - hyperliquid-dex/hyperliquid-python-sdk `tests/signing_test.py` at commit
//!   7ee976d123b1e04295e4a1e37a424ca6a13bef88 (key 0x0123…0123);
//! - hyperliquid-dex/hyperliquid-rust-sdk `src/exchange/exchange_client.rs` and
//!   `src/signature/create_signature.rs` at commit
//!   aac75585daf12d0a3761126cc7da7a5e035b5853 (key e908f86d…688e).
//!
//! The Python SDK prints `r` and `s` without leading zeros (`to_hex` of an
//! integer): they are compared as 32-byte integers.

use ergon_core::Budget;
use ergon_venues::adapt::Clock;
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Endpoints, NewOrder, OrderType, Prepared, Side, Symbol, TimeInForce,
};
use ergon_venues::hyperliquid::sign::{self, Network, SignError, Wallet};
use ergon_venues::hyperliquid::{self, Exchange, Hyperliquid, Signature, Signer};
use proptest::prelude::*;
use serde::Serialize;

const PY_KEY: &str = "0x0123456789012345678901234567890123456789012345678901234567890123";
const RS_KEY: &str = "e908f86dbb4d55ac876378565aafeabc187f6690f046459397b17d9b9a19688e";

fn hex32(s: &str) -> [u8; 32] {
    let s = s.strip_prefix("0x").unwrap_or(s);
    let padded = format!("{s:0>64}");
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&padded[2 * i..2 * i + 2], 16).unwrap();
    }
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn wallet(key: &str, net: Network) -> Wallet {
    Wallet::from_key_text(key.as_bytes(), net).unwrap()
}

/// Signs `action` with `key` on both networks (no vault, no expiresAfter unless
/// given) and checks the SDK's (r, s, v) for each.
fn check(
    key: &str,
    action: &str,
    nonce: u64,
    vault: Option<&str>,
    mainnet: (&str, &str, u8),
    testnet: (&str, &str, u8),
) {
    for (net, (r, s, v)) in [(Network::Mainnet, mainnet), (Network::Testnet, testnet)] {
        let mut w = wallet(key, net);
        if let Some(vault) = vault {
            w = w.for_vault(vault).unwrap();
        }
        let sig = w.sign_json(action.as_bytes(), nonce, None).unwrap();
        assert_eq!(
            (hex(&sig.r), hex(&sig.s), sig.v),
            (hex(&hex32(r)), hex(&hex32(s)), v),
            "{action} on {net:?}"
        );
        // Independent of the signing path: the key's address comes back out.
        let mut msgpack = Vec::new();
        sign::action_msgpack(action.as_bytes(), &mut msgpack).unwrap();
        let vault = vault.map(|v| sign::parse_address(v, "vault").unwrap());
        let id = sign::connection_id(&msgpack, nonce, vault.as_ref(), None);
        let signer = sign::recover(&sign::agent_digest(&id, net), &sig).unwrap();
        assert_eq!(signer, w.signer_address());
    }
}

#[test]
fn python_sdk_phantom_agent_matches_production() {
    // test_phantom_agent_creation_matches_production: the order as
    // order_request_to_order_wire writes it (float_to_wire: "1670.1", "0.0147").
    let action = r#"{"type":"order","orders":[{"a":4,"b":true,"p":"1670.1","s":"0.0147","r":false,"t":{"limit":{"tif":"Ioc"}}}],"grouping":"na"}"#;
    let mut m = Vec::new();
    sign::action_msgpack(action.as_bytes(), &mut m).unwrap();
    assert_eq!(
        hex(&sign::connection_id(&m, 1677777606040, None, None)),
        "0fcbeda5ae3c4950a548021552a4fea2226858c4453571bf3f24ba017eac2908"
    );
}

#[test]
fn python_sdk_l1_action_vectors() {
    // float_to_int_for_hashing(1000) = 1000 * 10^8.
    let dummy = r#"{"type":"dummy","num":100000000000}"#;
    check(
        PY_KEY,
        dummy,
        0,
        None,
        (
            "0x53749d5b30552aeb2fca34b530185976545bb22d0b3ce6f62e31be961a59298",
            "0x755c40ba9bf05223521753995abb2f73ab3229be8ec921f350cb447e384d8ed8",
            27,
        ),
        (
            "0x542af61ef1f429707e3c76c5293c80d01f74ef853e34b76efffcb57e574f9510",
            "0x17b8b32f086e8cdede991f1e2c529f5dd5297cbe8128500e00cbaf766204a613",
            28,
        ),
    );
    check(
        PY_KEY,
        dummy,
        0,
        Some("0x1719884eb866cb12b2287399b15f7db5e7d775ea"),
        (
            "0x3c548db75e479f8012acf3000ca3a6b05606bc2ec0c29c50c515066a326239",
            "0x4d402be7396ce74fbba3795769cda45aec00dc3125a984f2a9f23177b190da2c",
            28,
        ),
        (
            "0xe281d2fb5c6e25ca01601f878e4d69c965bb598b88fac58e475dd1f5e56c362b",
            "0x7ddad27e9a238d045c035bc606349d075d5c5cd00a6cd1da23ab5c39d4ef0f60",
            27,
        ),
    );
    check(
        PY_KEY,
        r#"{"type":"createSubAccount","name":"example"}"#,
        0,
        None,
        (
            "0x51096fe3239421d16b671e192f574ae24ae14329099b6db28e479b86cdd6caa7",
            "0xb71f7d293af92d3772572afb8b102d167a7cef7473388286bc01f52a5c5b423",
            27,
        ),
        (
            "0xa699e3ed5c2b89628c746d3298b5dc1cca604694c2c855da8bb8250ec8014a5b",
            "0x53f1b8153a301c72ecc655b1c315d64e1dcea3ee58921fd7507e35818fcc1584",
            28,
        ),
    );
    check(
        PY_KEY,
        r#"{"type":"subAccountTransfer","subAccountUser":"0x1d9470d4b963f552e6f671a81619d395877bf409","isDeposit":true,"usd":10}"#,
        0,
        None,
        (
            "0x43592d7c6c7d816ece2e206f174be61249d651944932b13343f4d13f306ae602",
            "0x71a926cb5c9a7c01c3359ec4c4c34c16ff8107d610994d4de0e6430e5cc0f4c9",
            28,
        ),
        (
            "0xe26574013395ad55ee2f4e0575310f003c5bb3351b5425482e2969fa51543927",
            "0xefb08999196366871f919fd0e138b3a7f30ee33e678df7cfaf203e25f0a4278",
            28,
        ),
    );
}

#[test]
fn python_sdk_order_vectors() {
    // sz 100, limit_px 100: float_to_wire writes "100".
    check(
        PY_KEY,
        r#"{"type":"order","orders":[{"a":1,"b":true,"p":"100","s":"100","r":false,"t":{"limit":{"tif":"Gtc"}}}],"grouping":"na"}"#,
        0,
        None,
        (
            "0xd65369825a9df5d80099e513cce430311d7d26ddf477f5b3a33d2806b100d78e",
            "0x2b54116ff64054968aa237c20ca9ff68000f977c93289157748a3162b6ea940e",
            28,
        ),
        (
            "0x82b2ba28e76b3d761093aaded1b1cdad4960b3af30212b343fb2e6cdfa4e3d54",
            "0x6b53878fc99d26047f4d7e8c90eb98955a109f44209163f52d8dc4278cbbd9f5",
            27,
        ),
    );
    check(
        PY_KEY,
        r#"{"type":"order","orders":[{"a":1,"b":true,"p":"100","s":"100","r":false,"t":{"limit":{"tif":"Gtc"}},"c":"0x00000000000000000000000000000001"}],"grouping":"na"}"#,
        0,
        None,
        (
            "0x41ae18e8239a56cacbc5dad94d45d0b747e5da11ad564077fcac71277a946e3",
            "0x3c61f667e747404fe7eea8f90ab0e76cc12ce60270438b2058324681a00116da",
            27,
        ),
        (
            "0xeba0664bed2676fc4e5a743bf89e5c7501aa6d870bdb9446e122c9466c5cd16d",
            "0x7f3e74825c9114bc59086f1eebea2928c190fdfbfde144827cb02b85bbe90988",
            28,
        ),
    );
    check(
        PY_KEY,
        r#"{"type":"order","orders":[{"a":1,"b":true,"p":"100","s":"100","r":false,"t":{"trigger":{"isMarket":true,"triggerPx":"103","tpsl":"sl"}}}],"grouping":"na"}"#,
        0,
        None,
        (
            "0x98343f2b5ae8e26bb2587daad3863bc70d8792b09af1841b6fdd530a2065a3f9",
            "0x6b5bb6bb0633b710aa22b721dd9dee6d083646a5f8e581a20b545be6c1feb405",
            27,
        ),
        (
            "0x971c554d917c44e0e1b6cc45d8f9404f32172a9d3b3566262347d0302896a2e4",
            "0x206257b104788f80450f8e786c329daa589aa0b32ba96948201ae556d5637eac",
            28,
        ),
    );
}

#[test]
fn python_sdk_schedule_cancel_vectors() {
    check(
        PY_KEY,
        r#"{"type":"scheduleCancel"}"#,
        0,
        None,
        (
            "0x6cdfb286702f5917e76cd9b3b8bf678fcc49aec194c02a73e6d4f16891195df9",
            "0x6557ac307fa05d25b8d61f21fb8a938e703b3d9bf575f6717ba21ec61261b2a0",
            27,
        ),
        (
            "0xc75bb195c3f6a4e06b7d395acc20bbb224f6d23ccff7c6a26d327304e6efaeed",
            "0x342f8ede109a29f2c0723bd5efb9e9100e3bbb493f8fb5164ee3d385908233df",
            28,
        ),
    );
    check(
        PY_KEY,
        r#"{"type":"scheduleCancel","time":123456789}"#,
        0,
        None,
        (
            "0x609cb20c737945d070716dcc696ba030e9976fcf5edad87afa7d877493109d55",
            "0x16c685d63b5c7a04512d73f183b3d7a00da5406ff1f8aad33f8ae2163bab758b",
            28,
        ),
        (
            "0x4e4f2dbd4107c69783e251b7e1057d9f2b9d11cee213441ccfa2be63516dc5bc",
            "0x706c656b23428c8ba356d68db207e11139ede1670481a9e01ae2dfcdb0e1a678",
            27,
        ),
    );
}

/// The Rust SDK prints a signature as r ‖ s ‖ v (v as 0x1b/0x1c).
fn check_rs(action: &str, mainnet: &str, testnet: &str) {
    for (net, want) in [(Network::Mainnet, mainnet), (Network::Testnet, testnet)] {
        let mut w = wallet(RS_KEY, net);
        let sig = w.sign_json(action.as_bytes(), 1583838, None).unwrap();
        let got = format!("0x{}{}{:02x}", hex(&sig.r), hex(&sig.s), sig.v);
        assert_eq!(got, want, "{action} on {net:?}");
    }
}

#[test]
fn rust_sdk_vectors() {
    check_rs(
        r#"{"type":"order","orders":[{"a":1,"b":true,"p":"2000.0","s":"3.5","r":false,"t":{"limit":{"tif":"Ioc"}}}],"grouping":"na"}"#,
        "0x77957e58e70f43b6b68581f2dc42011fc384538a2e5b7bf42d5b936f19fbb67360721a8598727230f67080efee48c812a6a4442013fd3b0eed509171bef9f23f1c",
        "0xcd0925372ff1ed499e54883e9a6205ecfadec748f80ec463fe2f84f1209648776377961965cb7b12414186b1ea291e95fd512722427efcbcfb3b0b2bcd4d79d01c",
    );
    check_rs(
        r#"{"type":"order","orders":[{"a":1,"b":true,"p":"2000.0","s":"3.5","r":false,"t":{"limit":{"tif":"Ioc"}},"c":"0x1e60610f0b3d420597c88c1fed2ad5ee"}],"grouping":"na"}"#,
        "0xd3e894092eb27098077145714630a77bbe3836120ee29df7d935d8510b03a08f456de5ec1be82aa65fc6ecda9ef928b0445e212517a98858cfaa251c4cd7552b1c",
        "0x3768349dbb22a7fd770fc9fc50c7b5124a7da342ea579b309f58002ceae49b4357badc7909770919c45d850aabb08474ff2b7b3204ae5b66d9f7375582981f111c",
    );
    for (tpsl, m, t) in [
        ("tp", "0xb91e5011dff15e4b4a40753730bda44972132e7b75641f3cac58b66159534a170d422ee1ac3c7a7a2e11e298108a2d6b8da8612caceaeeb3e571de3b2dfda9e41b", "0x6df38b609904d0d4439884756b8f366f22b3a081801dbdd23f279094a2299fac6424cb0cdc48c3706aeaa368f81959e91059205403d3afd23a55983f710aee871b"),
        ("sl", "0x8456d2ace666fce1bee1084b00e9620fb20e810368841e9d4dd80eb29014611a0843416e51b1529c22dd2fc28f7ff8f6443875635c72011f60b62cbb8ce90e2d1c", "0xeb5bdb52297c1d19da45458758bd569dcb24c07e5c7bd52cf76600fd92fdd8213e661e21899c985421ec018a9ee7f3790e7b7d723a9932b7b5adcd7def5354601c"),
    ] {
        let action = format!(
            r#"{{"type":"order","orders":[{{"a":1,"b":true,"p":"2000.0","s":"3.5","r":false,"t":{{"trigger":{{"isMarket":true,"triggerPx":"2000.0","tpsl":"{tpsl}"}}}}}}],"grouping":"na"}}"#
        );
        check_rs(&action, m, t);
    }
    check_rs(
        r#"{"type":"cancel","cancels":[{"a":1,"o":82382}]}"#,
        "0x02f76cc5b16e0810152fa0e14e7b219f49c361e3325f771544c6f54e157bf9fa17ed0afc11a98596be85d5cd9f86600aad515337318f7ab346e5ccc1b03425d51b",
        "0x6ffebadfd48067663390962539fbde76cfa36f53be65abe2ab72c9db6d0db44457720db9d7c4860f142a484f070c84eb4b9694c3a617c83f0d698a27e55fd5e01c",
    );
    check_rs(
        r#"{"type":"claimRewards"}"#,
        "0xe13542800ba5ec821153401e1cafac484d1f861adbbb86c00b580ec2560c153248b8d9f0e004ecc86959c07d44b591861ebab2167b54651a81367e2c3d472d4e1c",
        "0x16de9b346ddd8e200492a2db45ec9104dcdfc7fbfdbcd85890a6063bdd56df2c44846714c261a431de7095ad52e07143346eb26d9e66c6aed4674f120a1048131c",
    );
}

#[test]
fn rust_sdk_agent_signature_vector() {
    // create_signature.rs test_sign_l1_action: a given connectionId.
    let id = hex32("0xde6c4037798a4434ca03cd05f00e3b803126221375cd1e7eaaaf041768be06eb");
    for (net, want) in [
        (Network::Mainnet, "0xfa8a41f6a3fa728206df80801a83bcbfbab08649cd34d9c0bfba7c7b2f99340f53a00226604567b98a1492803190d65a201d6805e5831b7044f17fd530aec7841c"),
        (Network::Testnet, "0x1713c0fc661b792a50e8ffdd59b637b1ed172d9a3aa4d801d9d88646710fb74b33959f4d075a7ccbec9f2374a6da21ffa4448d58d0413a0d335775f680a881431c"),
    ] {
        let digest = sign::agent_digest(&id, net);
        let w = wallet(RS_KEY, net);
        let want_sig = Signature {
            r: hex32(&want[2..66]),
            s: hex32(&want[66..130]),
            v: u8::from_str_radix(&want[130..], 16).unwrap(),
        };
        // Recovery alone proves the digest: a wrong digest recovers another key.
        assert_eq!(sign::recover(&digest, &want_sig).unwrap(), w.signer_address());
    }
}

/// One vector the official Python SDK signed (see the generator's docstring).
#[derive(serde::Deserialize)]
struct Vector {
    key: String,
    address: String,
    action: String,
    nonce: u64,
    vault: Option<String>,
    #[serde(rename = "expiresAfter")]
    expires_after: Option<u64>,
    mainnet: bool,
    msgpack: String,
    #[serde(rename = "connectionId")]
    connection_id: String,
    r: String,
    s: String,
    v: u8,
}

#[test]
fn two_hundred_actions_signed_by_the_python_sdk() {
    let text = include_str!("vectors/hyperliquid_sdk_vectors.json");
    let vectors: Vec<Vector> = serde_json::from_str(text).unwrap();
    assert_eq!(vectors.len(), 200);
    let (mut vaults, mut expiring) = (0, 0);
    for (i, t) in vectors.iter().enumerate() {
        let net = if t.mainnet {
            Network::Mainnet
        } else {
            Network::Testnet
        };
        let mut w = wallet(&t.key, net);
        if let Some(v) = &t.vault {
            w = w.for_vault(v).unwrap();
            vaults += 1;
        }
        expiring += usize::from(t.expires_after.is_some());
        assert_eq!(sign::address_hex(&w.signer_address()).as_str(), t.address);
        let mut m = Vec::new();
        sign::action_msgpack(t.action.as_bytes(), &mut m).unwrap();
        assert_eq!(hex(&m), t.msgpack, "vector {i}: msgpack of {}", t.action);
        let vault = t
            .vault
            .as_deref()
            .map(|v| sign::parse_address(v, "vault").unwrap());
        let id = sign::connection_id(&m, t.nonce, vault.as_ref(), t.expires_after);
        assert_eq!(format!("0x{}", hex(&id)), t.connection_id, "vector {i}");
        let sig = w
            .sign_json(t.action.as_bytes(), t.nonce, t.expires_after)
            .unwrap();
        assert_eq!(
            (hex(&sig.r), hex(&sig.s), sig.v),
            (t.r[2..].to_string(), t.s[2..].to_string(), t.v),
            "vector {i}"
        );
    }
    // The generator covers vaults and expiresAfter, not only the plain case.
    assert!(
        vaults > 20 && expiring > 50,
        "{vaults} vaults, {expiring} expiring"
    );
}

#[test]
fn a_bad_key_or_address_is_named_and_never_echoed() {
    let cases: [(&[u8], SignError); 5] = [
        (b"", SignError::KeyNotHex),
        (b"0x0123", SignError::KeyNotHex),
        (
            b"zz23456789012345678901234567890123456789012345678901234567890123",
            SignError::KeyNotHex,
        ),
        (
            b"0000000000000000000000000000000000000000000000000000000000000000",
            SignError::KeyOutOfRange,
        ),
        (
            b"ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
            SignError::KeyOutOfRange,
        ),
    ];
    for (key, want) in cases {
        assert_eq!(
            Wallet::from_key_text(key, Network::Mainnet).unwrap_err(),
            want
        );
    }
    // A file's newline and a 0x prefix are fine.
    let w = Wallet::from_key_text(format!("  {PY_KEY}\n").as_bytes(), Network::Mainnet).unwrap();
    assert!(!format!("{w:?}").contains("0123456789012345678901234567890123456789"));
    assert_eq!(
        wallet(PY_KEY, Network::Mainnet)
            .for_vault("0x1234")
            .unwrap_err(),
        SignError::BadAddress("vault")
    );
    assert_eq!(
        wallet(PY_KEY, Network::Mainnet)
            .acting_for("1719884eb866cb12b2287399b15f7db5e7d775ea00")
            .unwrap_err(),
        SignError::BadAddress("account")
    );
    // Floats are refused: the venue hashes strings for prices and sizes.
    let mut w = wallet(PY_KEY, Network::Mainnet);
    assert_eq!(
        w.sign_json(br#"{"type":"order","p":1.5}"#, 1, None)
            .unwrap_err(),
        SignError::ActionNumber
    );
    assert_eq!(
        w.sign_json(b"[1]", 1, None).unwrap_err(),
        SignError::ActionNotObject
    );
}

#[test]
fn info_requests_ask_about_the_account_or_the_vault() {
    let agent = wallet(PY_KEY, Network::Mainnet);
    let own = sign::address_hex(&agent.signer_address());
    assert_eq!(agent.address(), own.as_str());
    let master = "0x1d9470d4b963f552e6f671a81619d395877bf409";
    let agent = agent.acting_for(master).unwrap();
    assert_eq!(agent.address(), master);
    assert_eq!(agent.vault_address(), None);
    let vault = "0x1719884eb866cb12b2287399b15f7db5e7d775ea";
    let v = agent.for_vault(vault).unwrap();
    assert_eq!((v.address(), v.vault_address()), (vault, Some(vault)));
}

fn exchange(w: Wallet) -> (Exchange<Wallet>, Budget) {
    let mut b = Budget::builder();
    let clock = Clock::anchor(0, 1_700_000_000_000);
    let venue = Hyperliquid::new(&mut b, clock, hyperliquid::Config::default()).unwrap();
    let ex = Exchange::new(venue, w, &[("BTC", 0), ("ETH", 1)], 5000).unwrap();
    (ex, b.build(0).unwrap())
}

/// Reads the signed request the endpoint wrote and recovers its signer from the
/// body alone: what is sent is what was signed.
fn signer_of_body(body: &[u8], net: Network) -> [u8; 20] {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap();
    let action = serde_json::to_string(&v["action"]).unwrap();
    // serde_json without preserve_order sorts keys: take the action's bytes from
    // the body itself.
    let text = std::str::from_utf8(body).unwrap();
    let start = text.find("{\"action\":").unwrap() + "{\"action\":".len();
    let end = text.find(",\"nonce\":").unwrap();
    let action_raw = &text[start..end];
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(action_raw).unwrap(),
        serde_json::from_str::<serde_json::Value>(&action).unwrap()
    );
    let sig = Signature {
        r: hex32(v["signature"]["r"].as_str().unwrap()),
        s: hex32(v["signature"]["s"].as_str().unwrap()),
        v: u8::try_from(v["signature"]["v"].as_u64().unwrap()).unwrap(),
    };
    let vault = v
        .get("vaultAddress")
        .map(|a| sign::parse_address(a.as_str().unwrap(), "vault").unwrap());
    let mut scratch = Vec::new();
    sign::recover_action(
        action_raw.as_bytes(),
        v["nonce"].as_u64().unwrap(),
        vault.as_ref(),
        v["expiresAfter"].as_u64(),
        net,
        &sig,
        &mut scratch,
    )
    .unwrap()
}

fn order(cloid: &str) -> NewOrder<'_> {
    NewOrder {
        symbol: Symbol::new("ETH").unwrap(),
        side: Side::Sell,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Some(Decimal::new("3012.5").unwrap()),
        quantity: Decimal::new("0.25").unwrap(),
        client_order_id: ClientOrderId::new(cloid).unwrap(),
        reduce_only: false,
    }
}

#[test]
fn the_endpoint_sends_what_the_wallet_signed_vault_included() {
    let vault = "0x1719884eb866cb12b2287399b15f7db5e7d775ea";
    for (w, vault) in [
        (wallet(PY_KEY, Network::Testnet), None),
        (
            wallet(PY_KEY, Network::Testnet).for_vault(vault).unwrap(),
            Some(vault),
        ),
    ] {
        let me = w.signer_address();
        let (mut ex, _budget) = exchange(w);
        let mut out = Prepared::default();
        let p = ex
            .new_order(&mut out, &order("0x000000000000000000000000000000aa"), 0)
            .unwrap();
        let body = p.body().to_vec();
        let text = String::from_utf8(body.clone()).unwrap();
        assert_eq!(
            text.contains(&format!("\"vaultAddress\":\"{}\"", vault.unwrap_or("-"))),
            vault.is_some(),
            "{text}"
        );
        assert_eq!(signer_of_body(&body, Network::Testnet), me);
        // On the other network the same bytes recover someone else: the network
        // is in the signature.
        assert_ne!(signer_of_body(&body, Network::Mainnet), me);
    }
}

/// The Rust SDK's wire structs (field order and renames as in its
/// `exchange/order.rs`, `cancel.rs`, `actions.rs`), serialized by rmp-serde as
/// the SDK does (`to_vec_named`): an encoder that shares no code with ours.
mod sdk {
    use serde::Serialize;

    #[derive(Serialize, Clone, Debug)]
    pub struct Limit {
        pub tif: String,
    }

    #[derive(Serialize, Clone, Debug)]
    #[serde(rename_all = "camelCase")]
    pub enum Order {
        Limit(Limit),
    }

    #[derive(Serialize, Clone, Debug)]
    pub struct OrderRequest {
        #[serde(rename = "a")]
        pub asset: u32,
        #[serde(rename = "b")]
        pub is_buy: bool,
        #[serde(rename = "p")]
        pub limit_px: String,
        #[serde(rename = "s")]
        pub sz: String,
        #[serde(rename = "r")]
        pub reduce_only: bool,
        #[serde(rename = "t")]
        pub order_type: Order,
        #[serde(rename = "c", skip_serializing_if = "Option::is_none")]
        pub cloid: Option<String>,
    }

    #[derive(Serialize, Clone, Debug)]
    pub struct CancelCloid {
        pub asset: u32,
        pub cloid: String,
    }

    #[derive(Serialize, Clone, Debug)]
    #[serde(tag = "type", rename_all = "camelCase")]
    pub enum Actions {
        Order {
            orders: Vec<OrderRequest>,
            grouping: String,
        },
        CancelByCloid {
            cancels: Vec<CancelCloid>,
        },
        ScheduleCancel {
            #[serde(skip_serializing_if = "Option::is_none")]
            time: Option<u64>,
        },
        UpdateLeverage {
            asset: u32,
            #[serde(rename = "isCross")]
            is_cross: bool,
            leverage: u32,
        },
    }
}

fn arb_order() -> impl Strategy<Value = sdk::OrderRequest> {
    (
        any::<u32>(),
        any::<bool>(),
        "[0-9]{1,9}(\\.[0-9]{1,8})?",
        "[0-9]{1,9}(\\.[0-9]{1,8})?",
        any::<bool>(),
        prop::sample::select(vec!["Gtc", "Ioc", "Alo"]),
        prop::option::of(any::<u128>()),
    )
        .prop_map(|(a, b, p, s, r, tif, c)| sdk::OrderRequest {
            asset: a,
            is_buy: b,
            limit_px: p,
            sz: s,
            reduce_only: r,
            order_type: sdk::Order::Limit(sdk::Limit {
                tif: tif.to_string(),
            }),
            cloid: c.map(|c| format!("0x{c:032x}")),
        })
}

fn arb_action() -> impl Strategy<Value = sdk::Actions> {
    prop_oneof![
        prop::collection::vec(arb_order(), 1..41).prop_map(|orders| sdk::Actions::Order {
            orders,
            grouping: "na".into()
        }),
        prop::collection::vec((any::<u32>(), any::<u128>()), 1..10).prop_map(|c| {
            sdk::Actions::CancelByCloid {
                cancels: c
                    .into_iter()
                    .map(|(asset, id)| sdk::CancelCloid {
                        asset,
                        cloid: format!("0x{id:032x}"),
                    })
                    .collect(),
            }
        }),
        prop::option::of(any::<u64>()).prop_map(|time| sdk::Actions::ScheduleCancel { time }),
        (any::<u32>(), any::<bool>(), 1..100u32).prop_map(|(asset, is_cross, leverage)| {
            sdk::Actions::UpdateLeverage {
                asset,
                is_cross,
                leverage,
            }
        }),
    ]
}

fn to_json_in_order<T: Serialize>(t: &T) -> String {
    // serde_json writes struct fields in declaration order (no map sorting for
    // structs), the order the SDK's msgpack has.
    serde_json::to_string(t).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_actions_hash_as_the_rust_sdk_and_recover_their_signer(
        action in arb_action(),
        key in any::<[u8; 32]>(),
        nonce in any::<u64>(),
        expires in prop::option::of(any::<u64>()),
        vault in prop::option::of(any::<[u8; 20]>()),
        mainnet in any::<bool>(),
    ) {
        let key_text = hex(&key);
        let net = if mainnet { Network::Mainnet } else { Network::Testnet };
        let Ok(mut w) = Wallet::from_key_text(key_text.as_bytes(), net) else {
            // Zero or above the order: astronomically rare, refused.
            return Ok(());
        };
        if let Some(v) = vault {
            w = w.for_vault(&format!("0x{}", hex(&v))).unwrap();
        }
        let json = to_json_in_order(&action);
        let mut ours = Vec::new();
        sign::action_msgpack(json.as_bytes(), &mut ours).unwrap();
        let theirs = rmp_serde::to_vec_named(&action).unwrap();
        prop_assert_eq!(hex(&ours), hex(&theirs));

        let sig = w.sign_json(json.as_bytes(), nonce, expires).unwrap();
        let mut scratch = Vec::new();
        let signer = sign::recover_action(
            json.as_bytes(), nonce, vault.as_ref(), expires, net, &sig, &mut scratch,
        ).unwrap();
        prop_assert_eq!(signer, w.signer_address());
        // Any other nonce, expiry or network recovers another address.
        let other = sign::recover_action(
            json.as_bytes(), nonce ^ 1, vault.as_ref(), expires, net, &sig, &mut scratch,
        );
        prop_assert_ne!(other.ok(), Some(w.signer_address()));
        let other_net = if mainnet { Network::Testnet } else { Network::Mainnet };
        let other = sign::recover_action(
            json.as_bytes(), nonce, vault.as_ref(), expires, other_net, &sig, &mut scratch,
        );
        prop_assert_ne!(other.ok(), Some(w.signer_address()));
    }
}

fn nonce_of(p: &Prepared) -> u64 {
    let v: serde_json::Value = serde_json::from_slice(p.body()).unwrap();
    v["nonce"].as_u64().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Several processes signing with one key on lanes never write the same
    /// nonce, whatever their clocks and pace; each one's nonces increase and
    /// stay within `lanes` ms of its clock when it sends slower than one a ms.
    #[test]
    fn processes_on_lanes_never_share_a_nonce(
        lanes in 1u16..6,
        steps in prop::collection::vec((0usize..6, 0i64..3_000_000), 1..300),
    ) {
        let mut procs: Vec<Exchange<Wallet>> = (0..lanes)
            .map(|l| {
                exchange(wallet(PY_KEY, Network::Mainnet)).0.nonce_lane(l, lanes).unwrap()
            })
            .collect();
        let mut now = vec![0i64; usize::from(lanes)];
        let mut seen = std::collections::BTreeSet::new();
        let mut last = vec![0u64; usize::from(lanes)];
        for (who, dt) in steps {
            let i = who % usize::from(lanes);
            now[i] += dt;
            let mut out = Prepared::default();
            let p = procs[i].noop(&mut out, now[i]).unwrap();
            let n = nonce_of(p);
            prop_assert!(seen.insert(n), "nonce {} twice", n);
            prop_assert_eq!(n % u64::from(lanes), i as u64);
            prop_assert!(n > last[i]);
            last[i] = n;
            let utc = 1_700_000_000_000 + u64::try_from(now[i] / 1_000_000).unwrap();
            prop_assert!(n >= utc);
        }
    }
}

#[test]
fn a_lane_outside_its_count_is_refused() {
    let (ex, _) = exchange(wallet(PY_KEY, Network::Mainnet));
    assert!(ex.nonce_lane(2, 2).is_err());
    let (ex, _) = exchange(wallet(PY_KEY, Network::Mainnet));
    assert!(ex.nonce_lane(0, 0).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Bad input (a key file's bytes, an action, a signature off the wire): an
    /// error, never a panic.
    #[test]
    fn arbitrary_bytes_are_errors_never_panics(
        bytes in prop::collection::vec(any::<u8>(), 0..200),
        text in "[ -~]{0,120}",
        r in any::<[u8; 32]>(),
        s in any::<[u8; 32]>(),
        v in any::<u8>(),
        digest in any::<[u8; 32]>(),
    ) {
        let _ = Wallet::from_key_text(&bytes, Network::Mainnet);
        let _ = Wallet::from_key_text(text.as_bytes(), Network::Testnet);
        let mut out = Vec::new();
        let _ = sign::action_msgpack(&bytes, &mut out);
        out.clear();
        let _ = sign::action_msgpack(text.as_bytes(), &mut out);
        let _ = sign::parse_address(&text, "vault");
        let _ = sign::recover(&digest, &Signature { r, s, v });
        let mut w = wallet(PY_KEY, Network::Mainnet);
        let _ = w.sign_json(text.as_bytes(), 1, Some(2));
    }
}
