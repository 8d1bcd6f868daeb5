#!/usr/bin/env python3
"""A bot's ordinary session, with real third-party clients, against ergon-venue-sim.

For each emulated venue it starts the emulator (`ergon-venue-sim --profile P
--listen 127.0.0.1:0`), points the client's REST base at it (only the URLs: every
other option is the client's default, except where noted) and runs the calls a
bot makes in a day: markets, time, book, balance, place, query, open orders,
cancel, cancel all, and the documented refusals (a price outside the filter, an
order past the account's funds). Each call's outcome is judged by the class the
client's own error table raises for the venue's documented answer: OK, or the
exception class a real venue's answer would raise (ccxt: InvalidOrder,
InsufficientFunds, OrderNotFound ...). It prints one line per call and a
summary, and exits 1 if any call answered otherwise.

Clients: ccxt 4.5 on every profile; python-binance 1.0.37 on Binance Spot (REST and
the WebSocket API at `/ws-api/v3`).
Install them in a virtual environment and run (the emulator built first):

    python3 -m venv target/py-clients/venv
    target/py-clients/venv/bin/pip install "ccxt==4.5.*" "python-binance==1.0.37"
    cargo build --release -p ergon-venue-sim
    target/py-clients/venv/bin/python tools/venue-sim/clients/session.py \
        target/release/ergon-venue-sim [PROFILE ...]

Noted departures from the clients' defaults, each because the emulator plays one
market of one venue on one host: ccxt's Binance `fetchMarkets` is limited to the
profile's own market type (spot, or linear for USD-M), since by default it also
asks the other products' hosts (fapi, dapi), which the real venue serves
elsewhere, and USD-M's `fetchCurrencies` (the wallet, on the Spot host) is off;
ccxt's OKX and Bybit are told the market type (swap) the same way; ccxt picks
Binance's error table by host name, so on the emulator's host it is picked by the
path the real host serves (`by_path`).
"""

import re
import subprocess
import sys
import time
import traceback

KEY = "ergon-sim-key"
SECRET = "ergon-sim-secret"
PASSPHRASE = "ergon-sim-passphrase"


def start(sim, profile):
    """The emulator of `profile` on a free loopback port: (process, base URL)."""
    # It serves until its stdin closes: a pipe kept open until `stop`.
    p = subprocess.Popen(
        [sim, "--profile", profile, "--listen", "127.0.0.1:0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    for line in p.stdout:
        m = re.match(r"listening on (http://\S+)", line.strip())
        if m:
            return p, m.group(1)
    raise RuntimeError(f"{profile}: the emulator did not start")


def repoint(urls, base):
    """Every URL of a ccxt `urls['api']` tree, its scheme and host replaced by `base`."""
    if isinstance(urls, str):
        return re.sub(r"^https?://[^/]+", base, urls)
    if isinstance(urls, dict):
        return {k: repoint(v, base) for k, v in urls.items()}
    return urls


def by_path(ex, base):
    """ccxt picks Binance's error table (spot, linear ...) by the request's host
    (api., fapi. ...); on the emulator's one host it is picked by the path the
    real hosts serve, so each answer meets the table it would meet there."""
    hosts = {"/fapi/": "https://fapi.binance.com", "/api/": "https://api.binance.com",
             "/sapi/": "https://api.binance.com"}
    plain = ex.get_exceptions_by_url

    def get(url, kind):
        if url and url.startswith(base):
            path = url[len(base):]
            for prefix, host in hosts.items():
                if path.startswith(prefix):
                    return plain(host + path, kind)
        return plain(url, kind)

    ex.get_exceptions_by_url = get


class Session:
    def __init__(self, venue):
        self.venue = venue
        self.lines = []
        self.good = 0
        self.total = 0

    def call(self, what, expect, f):
        """Runs `f`; `expect` is None (it must succeed) or the exception class
        the venue's documented answer raises in the client."""
        self.total += 1
        try:
            out = f()
            got = "OK"
        except Exception as e:  # the class is the verdict
            out = None
            got = type(e).__name__
            detail = str(e)[:160]
        want = "OK" if expect is None else expect.__name__
        ok = got == want or (expect is not None and got != "OK" and issubclass_name(got, expect))
        self.good += ok
        mark = "ok  " if ok else "FAIL"
        extra = "" if got == "OK" else f" ({detail})"
        self.lines.append(f"{mark} {self.venue}: {what}: want {want}, got {got}{extra}")
        return out


    def burst(self, what, expect, n, f):
        """Calls `f` up to `n` times at once (the client's own throttle off):
        the venue's limit must answer before the n-th, with `expect`'s class."""
        for i in range(n):
            try:
                f(i)
            except Exception as e:
                self.total += 1
                got = type(e).__name__
                ok = got == expect.__name__ or issubclass_name(got, expect)
                self.good += ok
                mark = "ok  " if ok else "FAIL"
                self.lines.append(
                    f"{mark} {self.venue}: {what}: want {expect.__name__}, got {got} at call {i + 1} ({str(e)[:120]})"
                )
                return
        self.total += 1
        self.lines.append(f"FAIL {self.venue}: {what}: want {expect.__name__}, got OK {n} times")


def issubclass_name(name, cls):
    """Whether the ccxt exception class `name` is `cls` or one of its kinds."""
    import ccxt

    c = getattr(ccxt, name, None)
    return isinstance(c, type) and issubclass(c, cls)


def stop(proc):
    """Ends the emulator: its stdin closes, it reports and exits."""
    proc.stdin.close()
    proc.stdout.read()
    proc.wait()


def ccxt_session(sim, profile, klass, symbol, options, amount, big, no_cancel_all=False):
    import ccxt

    proc, base = start(sim, profile)
    s = Session(f"ccxt {klass} on {profile}")
    try:
        ex = getattr(ccxt, klass)(
            {"apiKey": KEY, "secret": SECRET, "password": PASSPHRASE, "options": options}
        )
        ex.urls["api"] = repoint(ex.urls["api"], base)
        if klass.startswith("binance"):
            by_path(ex, base)
        s.call("load_markets", None, lambda: ex.load_markets())
        s.call("fetch_time", None, lambda: ex.fetch_time())
        s.call("fetch_order_book", None, lambda: ex.fetch_order_book(symbol))
        s.call("fetch_balance", None, lambda: ex.fetch_balance())
        o = s.call("create_order", None, lambda: ex.create_order(symbol, "limit", "buy", amount, 49000))
        oid = o["id"] if o else "0"
        # ccxt's Bybit asks the caller to acknowledge that fetchOrder sees only
        # the last 500 orders (its own check, before any call).
        ack = {"acknowledged": True} if klass == "bybit" else {}
        s.call("fetch_order", None, lambda: ex.fetch_order(oid, symbol, ack))
        s.call("fetch_open_orders", None, lambda: ex.fetch_open_orders(symbol))
        s.call("cancel_order", None, lambda: ex.cancel_order(oid, symbol))
        # Deribit keeps a cancelled order: cancelling it again is 11044
        # not_open_order, which ccxt raises as InvalidOrder.
        gone = ccxt.InvalidOrder if klass == "deribit" else ccxt.OrderNotFound
        s.call("cancel_order of a cancelled order", gone, lambda: ex.cancel_order(oid, symbol))
        s.call("create_order", None, lambda: ex.create_order(symbol, "limit", "buy", amount, 48000))
        if no_cancel_all:
            # The client's own answer, before any call (ccxt 4.5 has no
            # cancelAllOrders for OKX).
            s.call("cancel_all_orders", ccxt.NotSupported, lambda: ex.cancel_all_orders(symbol))
        else:
            s.call("cancel_all_orders", None, lambda: ex.cancel_all_orders(symbol))
        # USD-M's price filter codes (-4002, -4013, -4014) are BadRequest in
        # ccxt's table; Spot's -1013 and the others' are InvalidOrder.
        past = ccxt.BadRequest if klass == "binanceusdm" else ccxt.InvalidOrder
        s.call(
            "a price past the filter",
            past,
            lambda: ex.create_order(symbol, "limit", "buy", amount, 2_000_000),
        )
        s.call(
            "an order past the funds",
            ccxt.InsufficientFunds,
            lambda: ex.create_order(symbol, "limit", "buy", big, 49000),
        )
        # Both kinds of burst, the client's own throttle off: reads past the IP's
        # (or the pool's) limit, then orders past the account's order limit.
        # Each venue's answer: Binance 429 -1015/-1003 and Deribit 10028
        # (DDoSProtection in ccxt), Bybit 10006 and OKX 50011 (RateLimitExceeded).
        # Orders first: a read burst's 429 holds the IP until its window ends,
        # and sending inside it is what gets an IP banned.
        ex.enableRateLimit = False
        reads, orders = BURSTS[profile]
        limited = ccxt.RateLimitExceeded if klass in ("bybit", "okx") else ccxt.DDoSProtection
        # USD-M's 300 orders per 10 s pass its 200 open orders: its burst is IOC
        # orders, which expire at once.
        tif = {"timeInForce": "IOC"} if klass == "binanceusdm" else {}
        # Binance's and OKX's windows are fixed, aligned on the venue's clock: a
        # burst that starts near a window's end is split across two windows, and
        # neither count reaches the limit (seen in CI: "got OK 30 times" once in
        # four runs). Each burst starts with most of a window ahead of it.
        order_window, read_window = WINDOWS_MS.get(profile, (None, None))
        align(ex, order_window)
        s.burst("a burst of orders", limited, orders,
                lambda i: ex.create_order(symbol, "limit", "buy", amount, 40000 + i, tif))
        if reads:
            align(ex, read_window)
            s.burst("a burst of book reads", limited, reads,
                    lambda i: ex.fetch_order_book(symbol, READ_DEPTH.get(profile)))
    except Exception:
        s.lines.append(f"FAIL {s.venue}: the session broke: {traceback.format_exc()}")
        s.total += 1
    finally:
        stop(proc)
    return s


# How many calls each burst may take before the venue's limit must answer
# (reads, orders): Binance Spot 6,000 weight a minute at 250 a 5,000-deep book
# and 100 orders per 10 s; USD-M 2,400 at 20 a 1,000-deep book and 300 orders per
# 10 s; Bybit 10 creates a second per UID (its IP limit answers with a 10-minute
# ban: not burst here); OKX 40 book reads and 60 orders per 2 s; Deribit 100
# non-matching and 20 matching-engine requests of credit.
BURSTS = {
    "binance-spot": (30, 110),
    "binance-futures": (130, 310),
    "bybit": (None, 15),
    "okx": (45, 65),
    "deribit": (110, 25),
}
READ_DEPTH = {"binance-spot": 5000, "binance-futures": 1000}
# The fixed windows the bursts above count in (orders, reads), in ms of the
# venue's clock; Bybit's are rolling and Deribit's are credits that refill.
WINDOWS_MS = {
    "binance-spot": (10_000, 60_000),
    "binance-futures": (10_000, 60_000),
    "okx": (2_000, 2_000),
}


def align(ex, window_ms):
    """Waits for the next fixed window of `window_ms` to start on the venue's
    clock (its `fetch_time`) when less than a burst's room is left of this one:
    four fifths of a window, at most 20 s (a burst takes a few seconds)."""
    if not window_ms:
        return
    left = window_ms - ex.fetch_time() % window_ms
    if left < min(window_ms * 4 // 5, 20_000):
        # Sleeps: the emulator runs as a subprocess on the wall clock, which a
        # third-party client's session cannot jump.
        time.sleep(left / 1000 + 0.05)


def python_binance_session(sim):
    from binance.client import Client
    from binance import exceptions

    proc, base = start(sim, "binance-spot")
    s = Session("python-binance on binance-spot")
    try:
        c = Client(KEY, SECRET, ping=False)
        c.API_URL = base + "/api"
        c.MARGIN_API_URL = base + "/sapi"
        s.call("get_server_time", None, c.get_server_time)
        s.call("get_exchange_info", None, c.get_exchange_info)
        s.call("get_order_book", None, lambda: c.get_order_book(symbol="BTCUSDT"))
        s.call("get_account", None, c.get_account)
        o = s.call(
            "create_order",
            None,
            lambda: c.create_order(
                symbol="BTCUSDT", side="BUY", type="LIMIT", timeInForce="GTC",
                quantity="0.01", price="49000",
            ),
        )
        oid = o["orderId"] if o else 0
        s.call("get_order", None, lambda: c.get_order(symbol="BTCUSDT", orderId=oid))
        s.call("get_open_orders", None, lambda: c.get_open_orders(symbol="BTCUSDT"))
        s.call("cancel_order", None, lambda: c.cancel_order(symbol="BTCUSDT", orderId=oid))
        s.call(
            "a price past PRICE_FILTER",
            exceptions.BinanceAPIException,
            lambda: c.create_order(
                symbol="BTCUSDT", side="BUY", type="LIMIT", timeInForce="GTC",
                quantity="0.01", price="2000000",
            ),
        )
        # The WebSocket API (`/ws-api/v3` on the same port).
        from binance.ws.websocket_api import WebsocketAPI

        c.ws_api = WebsocketAPI(url=base.replace("http://", "ws://") + "/ws-api/v3", tld="com")
        s.call("ws_get_time", None, c.ws_get_time)
        s.call("ws_get_order_book", None, lambda: c.ws_get_order_book(symbol="BTCUSDT", limit=5))
        o = s.call(
            "ws_create_order",
            None,
            lambda: c.ws_create_order(
                symbol="BTCUSDT", side="BUY", type="LIMIT", timeInForce="GTC",
                quantity="0.01", price="49000",
            ),
        )
        oid = o["orderId"] if o else 0
        s.call("ws_get_order", None, lambda: c.ws_get_order(symbol="BTCUSDT", orderId=oid))
        s.call("ws_cancel_order", None, lambda: c.ws_cancel_order(symbol="BTCUSDT", orderId=oid))
        s.call(
            "ws_create_order past PRICE_FILTER",
            exceptions.BinanceAPIException,
            lambda: c.ws_create_order(
                symbol="BTCUSDT", side="BUY", type="LIMIT", timeInForce="GTC",
                quantity="0.01", price="2000000",
            ),
        )
    except Exception:
        s.lines.append(f"FAIL {s.venue}: the session broke: {traceback.format_exc()}")
        s.total += 1
    finally:
        stop(proc)
    return s


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    sim = sys.argv[1]
    wanted = set(sys.argv[2:])
    sessions = [
        ("binance-spot", "binance", "BTC/USDT", {"fetchMarkets": ["spot"]}, 0.01, 2500),
        (
            "binance-futures",
            "binanceusdm",
            "BTC/USDT:USDT",
            {"fetchMarkets": ["linear"], "fetchCurrencies": False},
            0.01,
            50,
        ),
        ("bybit", "bybit", "BTC/USDT:USDT", {"defaultType": "swap"}, 0.01, 100),
        ("okx", "okx", "BTC/USDT:USDT", {"defaultType": "swap"}, 1, 100000),
        ("deribit", "deribit", "BTC/USD:BTC", {}, 10, 30000000),
    ]
    results = []
    for profile, klass, symbol, options, amount, big in sessions:
        if wanted and profile not in wanted:
            continue
        results.append(
            ccxt_session(sim, profile, klass, symbol, options, amount, big, klass == "okx")
        )
    if not wanted or "binance-spot" in wanted:
        results.append(python_binance_session(sim))
    good = sum(r.good for r in results)
    total = sum(r.total for r in results)
    for r in results:
        print("\n".join(r.lines))
    for r in results:
        print(f"{r.venue}: {r.good} of {r.total} answered like the venue")
    print(f"all: {good} of {total} calls answered like the venue")
    return 0 if good == total else 1


if __name__ == "__main__":
    sys.exit(main())
