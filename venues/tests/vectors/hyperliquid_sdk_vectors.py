"""Writes hyperliquid_sdk_vectors.json: random L1 actions of the kinds ergon sends,
signed by the official Python SDK (hyperliquid-python-sdk 0.22.0, eth-account
0.13.7, msgpack 1.2.4), for venues/tests/hyperliquid_sign.rs to sign again.

    python3 -m venv /tmp/hl && /tmp/hl/bin/pip install hyperliquid-python-sdk==0.22.0
    /tmp/hl/bin/python venues/tests/vectors/hyperliquid_sdk_vectors.py

Seeded: the same SDK writes the same file. Each vector: the key, the action as
compact JSON (member order as the SDK builds it), nonce, vault, expiresAfter,
network, and what the SDK computed: msgpack, connectionId, r, s, v.
"""
import json
import random
import sys

import eth_account
import msgpack
from hyperliquid.utils.signing import action_hash, sign_l1_action

rng = random.Random(44)


def hexs(n):
    return "0x" + "".join(rng.choice("0123456789abcdef") for _ in range(n))


def decimal():
    whole = rng.choice(["0", "1", "12", "105", "2000", "65432", "123456789"])
    if rng.random() < 0.5:
        return whole
    return whole + "." + str(rng.randint(1, 99999999)).rstrip("0")


def order():
    o = {
        "a": rng.choice([0, 1, 4, 127, 128, 255, 256, 10000, 65536, 110000]),
        "b": rng.random() < 0.5,
        "p": decimal(),
        "s": decimal(),
        "r": rng.random() < 0.2,
        "t": {"limit": {"tif": rng.choice(["Gtc", "Ioc", "Alo"])}},
    }
    if rng.random() < 0.8:
        o["c"] = hexs(32)
    return o


def action():
    kind = rng.choice(["order", "order", "cancelByCloid", "cancel", "modify", "batchModify",
                       "scheduleCancel", "noop", "updateLeverage"])
    if kind == "order":
        return {"type": "order", "orders": [order() for _ in range(rng.choice([1, 1, 2, 5, 17, 40]))],
                "grouping": "na"}
    if kind == "cancelByCloid":
        return {"type": "cancelByCloid",
                "cancels": [{"asset": rng.randint(0, 300), "cloid": hexs(32)} for _ in range(rng.randint(1, 4))]}
    if kind == "cancel":
        return {"type": "cancel",
                "cancels": [{"a": rng.randint(0, 300), "o": rng.randint(0, 2**40)} for _ in range(rng.randint(1, 4))]}
    if kind == "modify":
        return {"type": "modify", "oid": rng.choice([rng.randint(0, 2**40), hexs(32)]), "order": order()}
    if kind == "batchModify":
        return {"type": "batchModify",
                "modifies": [{"oid": rng.choice([rng.randint(0, 2**40), hexs(32)]), "order": order()}
                             for _ in range(rng.randint(1, 3))]}
    if kind == "scheduleCancel":
        return {"type": "scheduleCancel", "time": rng.randint(1_700_000_000_000, 1_900_000_000_000)} \
            if rng.random() < 0.7 else {"type": "scheduleCancel"}
    if kind == "noop":
        return {"type": "noop"}
    return {"type": "updateLeverage", "asset": rng.randint(0, 300), "isCross": rng.random() < 0.5,
            "leverage": rng.randint(1, 50)}


vectors = []
for _ in range(200):
    key = hexs(64)
    wallet = eth_account.Account.from_key(key)
    a = action()
    nonce = rng.choice([0, 1, rng.randint(1_700_000_000_000, 1_900_000_000_000)])
    vault = hexs(40) if rng.random() < 0.3 else None
    expires = rng.choice([None, nonce + rng.randint(1, 120_000)])
    mainnet = rng.random() < 0.5
    sig = sign_l1_action(wallet, a, vault, nonce, expires, mainnet)
    vectors.append({
        "key": key,
        "address": wallet.address.lower(),
        "action": json.dumps(a, separators=(",", ":")),
        "nonce": nonce,
        "vault": vault,
        "expiresAfter": expires,
        "mainnet": mainnet,
        "msgpack": msgpack.packb(a).hex(),
        "connectionId": "0x" + action_hash(a, vault, nonce, expires).hex(),
        "r": "0x%064x" % int(sig["r"], 16),
        "s": "0x%064x" % int(sig["s"], 16),
        "v": sig["v"],
    })

json.dump(vectors, sys.stdout if len(sys.argv) < 2 else open(sys.argv[1], "w"), indent=0)
