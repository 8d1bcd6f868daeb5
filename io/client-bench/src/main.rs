//! The client benchmark: request round trips on loopback against one test server,
//! in the same run, interleaved in batches so a noisy machine weighs on every
//! client alike.
//!
//! ```text
//! cargo run --release --manifest-path io/client-bench/Cargo.toml -- [--requests N] [--batch B]
//!     [--client-cpu C] [--server-cpu S]
//! ```
//!
//! `--client-cpu` pins the thread that runs every client (and the loops), and
//! `--server-cpu` the server's thread; on a small shared machine pinning them
//! apart takes the scheduler's placement out of the comparison.
//!
//! Clients, all sending the same GET to the same server (one keep-alive connection
//! each, one request at a time):
//! - `floor`: a raw blocking socket writing the exact bytes the native client
//!   writes and reading the response; no client can beat it;
//! - `native-busy`: ergon's native client, event loop in busy-poll mode;
//! - `native-epoll`: the same, the loop parking in epoll between events;
//! - `reqwest`: reqwest's blocking client (keep-alive; its tokio runtime runs on
//!   its own thread, as it does for anyone using it);
//! - `curl`: ergon's libcurl pool (feature `curl`) on the same loop contract.
//!
//! Printed per client: p50, p99 and max round trip in microseconds, the p50 and p99
//! as ratios to the floor's, and allocations per request inside the timed batches
//! (a counting global allocator; the native client's must be 0). Absolute times on
//! a shared machine are noise; the ratios are the result.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};

use ergon_venues::response::Response;
use ergon_core::{Budget, Class, Flight, Part, Spec};
use ergon_io::client::{ClientHandler, Error, PoolConfig, PoolId, RequestId, Sent};
use ergon_io::clock::now_ns;
use ergon_io::curl::CurlConfig;
use ergon_io::event_loop::{allowed_cpus, pin_current_thread, Context, EventLoop, LoopConfig};
use ergon_io::http::{Conn, Limits, Request};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        System.realloc(p, l, n)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const TARGET: &str = "/api/v3/order?symbol=BTCUSDT&orderId=28";
const RESPONSE: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 27\r\n\r\n{\"symbol\":\"BTCUSDT\",\"id\":1}";

/// The test server: one thread for every connection (clients take turns, so one
/// is active at a time; one thread means every client meets the same server
/// thread, wherever the scheduler put it), fixed buffers, the same answer to every
/// request, no allocation per request on its side either.
fn serve(listener: TcpListener, cpu: Option<usize>) {
    use std::os::fd::AsRawFd;
    if let Some(c) = cpu {
        pin_current_thread(c).expect("pinning the server thread");
    }
    struct Peer {
        s: TcpStream,
        buf: [u8; 8192],
        len: usize,
    }
    let mut peers: Vec<Peer> = Vec::with_capacity(16);
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(17);
    loop {
        fds.clear();
        fds.push(libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        for p in &peers {
            fds.push(libc::pollfd {
                fd: p.s.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        // SAFETY: fds is a live array of fds.len() pollfd entries.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if n <= 0 {
            continue;
        }
        if fds[0].revents != 0 {
            if let Ok((s, _)) = listener.accept() {
                let _ = s.set_nodelay(true);
                peers.push(Peer {
                    s,
                    buf: [0; 8192],
                    len: 0,
                });
            }
        }
        let mut k = 0;
        while k < peers.len() {
            if fds.get(k + 1).is_none_or(|f| f.revents == 0) {
                k += 1;
                continue;
            }
            let p = &mut peers[k];
            let alive = match p.s.read(&mut p.buf[p.len..]) {
                Ok(0) | Err(_) => false,
                Ok(n) => {
                    p.len += n;
                    let mut ok = true;
                    // Answer every complete head (GETs carry no body).
                    while let Some(end) = p.buf[..p.len].windows(4).position(|w| w == b"\r\n\r\n") {
                        ok &= p.s.write_all(RESPONSE).is_ok();
                        p.buf.copy_within(end + 4..p.len, 0);
                        p.len -= end + 4;
                    }
                    ok && p.len < p.buf.len()
                }
            };
            if alive {
                k += 1;
            } else {
                // Order of fds no longer matches: poll again before reading more.
                peers.swap_remove(k);
                break;
            }
        }
    }
}

/// The raw socket floor.
struct Floor {
    s: TcpStream,
    req: Vec<u8>,
    buf: Vec<u8>,
}

impl Floor {
    fn new(addr: SocketAddr, req: Vec<u8>) -> Floor {
        let s = TcpStream::connect(addr).unwrap();
        s.set_nodelay(true).unwrap();
        Floor {
            s,
            req,
            buf: vec![0; RESPONSE.len()],
        }
    }
    fn batch(&mut self, n: usize, out: &mut Vec<u64>) {
        for _ in 0..n {
            let t0 = now_ns();
            self.s.write_all(&self.req).unwrap();
            self.s.read_exact(&mut self.buf).unwrap();
            out.push((now_ns() - t0) as u64);
        }
        assert_eq!(&self.buf[..], RESPONSE);
    }
}

/// Drives one batch on an ergon loop (native or curl pool).
struct Batch<'a> {
    pool: PoolId,
    parts: [Part; 1],
    req: Request<'a>,
    left: usize,
    sent_at: i64,
    in_flight: bool,
    out: &'a mut Vec<u64>,
}

impl Batch<'_> {
    fn send(&mut self, cx: &mut Context<'_>) {
        let now = cx.now();
        let ticket = cx
            .budget()
            .try_charge(&self.parts, Class::Normal, now)
            .unwrap();
        self.sent_at = now_ns();
        match cx.request(self.pool, &self.req, ticket, now + 5_000_000_000) {
            Ok(_) => self.in_flight = true,
            Err(r) => cx.refund(r.into_ticket()),
        }
    }
}

impl ClientHandler for Batch<'_> {
    fn on_response(&mut self, cx: &mut Context<'_>, _: RequestId, r: Response<'_>, f: Flight) {
        let t = now_ns();
        self.out.push((t - self.sent_at) as u64);
        assert_eq!(r.status, 200);
        cx.complete(f);
        self.in_flight = false;
        self.left -= 1;
        if self.left == 0 {
            cx.stop();
        } else {
            self.send(cx);
        }
    }
    fn on_error(&mut self, _: &mut Context<'_>, _: RequestId, sent: Sent, e: Error) {
        panic!("request failed: {e} (sent maybe: {})", sent.maybe());
    }
    fn on_turn(&mut self, cx: &mut Context<'_>) {
        if !self.in_flight && self.left > 0 {
            self.send(cx);
        }
    }
}

struct Loop {
    lp: EventLoop,
    pool: PoolId,
    parts: [Part; 1],
}

impl Loop {
    fn new(addr: SocketAddr, busy_poll: bool, curl: bool) -> Loop {
        let mut b = Budget::builder();
        let id = b
            .add(
                "requests",
                Spec::sliding(u32::MAX as u64, 1_000_000_000, 10),
            )
            .unwrap();
        let budget = b.build(now_ns()).unwrap();
        let cfg = LoopConfig {
            busy_poll,
            ..LoopConfig::default()
        };
        let mut lp = EventLoop::new(cfg, budget).unwrap();
        let mut pc = PoolConfig::new(addr, addr.to_string());
        if curl {
            pc.curl = Some(CurlConfig::default());
        }
        let pool = lp.add_pool(pc).unwrap();
        Loop {
            lp,
            pool,
            parts: [Part::new(id, 1)],
        }
    }
    fn batch(&mut self, n: usize, out: &mut Vec<u64>) {
        let mut h = Batch {
            pool: self.pool,
            parts: self.parts,
            req: Request::get(TARGET),
            left: n,
            sent_at: 0,
            in_flight: false,
            out,
        };
        self.lp.run(&mut h).unwrap();
    }
}

struct Reqwest {
    client: reqwest::blocking::Client,
    url: String,
}

impl Reqwest {
    fn batch(&mut self, n: usize, out: &mut Vec<u64>) {
        for _ in 0..n {
            let t0 = now_ns();
            let r = self.client.get(&self.url).send().unwrap();
            assert_eq!(r.status().as_u16(), 200);
            let body = r.bytes().unwrap();
            out.push((now_ns() - t0) as u64);
            assert_eq!(body.len(), 27);
        }
    }
}

enum Client {
    Floor(Floor),
    Loop(Box<Loop>),
    Reqwest(Reqwest),
}

impl Client {
    fn batch(&mut self, n: usize, out: &mut Vec<u64>) {
        match self {
            Client::Floor(c) => c.batch(n, out),
            Client::Loop(c) => c.batch(n, out),
            Client::Reqwest(c) => c.batch(n, out),
        }
    }
}

fn arg(args: &[String], name: &str, default: usize) -> Result<usize, String> {
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .filter(|&v| v > 0)
            .ok_or_else(|| format!("{name} needs a positive integer")),
    }
}

fn pct(sorted: &[u64], p: f64) -> u64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let known = ["--requests", "--batch", "--client-cpu", "--server-cpu"];
    if let Some(bad) = args
        .iter()
        .step_by(2)
        .find(|a| !known.contains(&a.as_str()))
    {
        eprintln!("client_bench: unknown argument {bad}");
        eprintln!(
            "usage: client_bench [--requests N] [--batch B] [--client-cpu C] [--server-cpu S]"
        );
        return ExitCode::from(2);
    }
    let (requests, batch) = match (arg(&args, "--requests", 20_000), arg(&args, "--batch", 200)) {
        (Ok(r), Ok(b)) => (r, b.min(r)),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("client_bench: {e}");
            return ExitCode::from(2);
        }
    };

    let cpu = |name: &str| -> Result<Option<usize>, String> {
        if !args.iter().any(|a| a == name) {
            return Ok(None);
        }
        let i = args.iter().position(|a| a == name).unwrap();
        args.get(i + 1)
            .and_then(|v| v.parse().ok())
            .map(Some)
            .ok_or_else(|| format!("{name} needs a CPU number"))
    };
    let (client_cpu, server_cpu) = match (cpu("--client-cpu"), cpu("--server-cpu")) {
        (Ok(c), Ok(s)) => (c, s),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("client_bench: {e}");
            return ExitCode::from(2);
        }
    };
    for (flag, c) in [("--client-cpu", client_cpu), ("--server-cpu", server_cpu)] {
        if let Some(c) = c.filter(|c| !allowed_cpus().contains(c)) {
            eprintln!("client_bench: {flag} {c}: not a CPU this process may use");
            return ExitCode::from(2);
        }
    }

    // Spawned before the main thread is pinned, so it does not inherit the pin.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || serve(listener, server_cpu));
    if let Some(c) = client_cpu {
        if let Err(e) = pin_current_thread(c) {
            eprintln!("client_bench: --client-cpu {c}: {e}");
            return ExitCode::from(2);
        }
    }

    // The floor writes exactly what the native client writes.
    let mut conn = Conn::new(Limits::default());
    conn.send(&Request::get(TARGET), &addr.to_string()).unwrap();
    let req_bytes = conn.transmit().to_vec();

    let mut clients: Vec<(&str, Client)> = vec![
        ("floor", Client::Floor(Floor::new(addr, req_bytes))),
        (
            "native-busy",
            Client::Loop(Box::new(Loop::new(addr, true, false))),
        ),
        (
            "native-epoll",
            Client::Loop(Box::new(Loop::new(addr, false, false))),
        ),
        (
            "reqwest",
            Client::Reqwest(Reqwest {
                client: reqwest::blocking::Client::builder()
                    .pool_max_idle_per_host(1)
                    .build()
                    .unwrap(),
                url: format!("http://{addr}{TARGET}"),
            }),
        ),
        ("curl", Client::Loop(Box::new(Loop::new(addr, false, true)))),
    ];
    let mut samples: Vec<Vec<u64>> = clients
        .iter()
        .map(|_| Vec::with_capacity(requests + batch))
        .collect();
    let mut allocs = vec![0u64; clients.len()];

    // Warm-up: connections open, buffers grown, caches hot.
    let mut scratch = Vec::with_capacity(1000);
    for (_, c) in clients.iter_mut() {
        scratch.clear();
        c.batch(500.min(scratch.capacity()), &mut scratch);
    }

    let mut done = 0;
    while done < requests {
        let n = batch.min(requests - done);
        for (k, (_, c)) in clients.iter_mut().enumerate() {
            let before = ALLOCS.load(Ordering::Relaxed);
            c.batch(n, &mut samples[k]);
            allocs[k] += ALLOCS.load(Ordering::Relaxed) - before;
        }
        done += n;
    }

    let mut floor = (0, 0);
    println!(
        "{:<13} {:>9} {:>9} {:>9} {:>10} {:>10} {:>11}",
        "client", "p50_us", "p99_us", "max_us", "p50/floor", "p99/floor", "allocs/req"
    );
    for (k, (name, _)) in clients.iter().enumerate() {
        let s = &mut samples[k];
        s.sort_unstable();
        let (p50, p99, max) = (pct(s, 0.50), pct(s, 0.99), *s.last().unwrap());
        if k == 0 {
            floor = (p50, p99);
        }
        println!(
            "{:<13} {:>9.1} {:>9.1} {:>9.1} {:>10.2} {:>10.2} {:>11.2}",
            name,
            p50 as f64 / 1e3,
            p99 as f64 / 1e3,
            max as f64 / 1e3,
            p50 as f64 / floor.0 as f64,
            p99 as f64 / floor.1 as f64,
            allocs[k] as f64 / s.len() as f64
        );
    }
    println!(
        "requests per client: {requests}, interleaved in batches of {batch}; client cpu {}, server cpu {}",
        client_cpu.map_or("any".into(), |c| c.to_string()),
        server_cpu.map_or("any".into(), |c| c.to_string()),
    );
    ExitCode::SUCCESS
}
