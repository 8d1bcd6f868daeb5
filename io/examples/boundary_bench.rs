//! Latency across the boundary: a strategy thread submits through a `Handle`, the
//! loop thread charges and writes the request to a loopback server, the answer
//! comes back through the handle's mailbox.
//!
//! ```text
//! cargo run --release -p ergon-io --example boundary_bench -- [--mode parked|busy]
//!     [--requests N] [--warmup N] [--loop-cpu C] [--submit-cpu C]
//! ```
//!
//! One request at a time (no queueing in the figures). For each it prints, in ns
//! on the loop's clock (quanta):
//! - `submit->sending`: from just before `Handle::submit` to the moment the loop,
//!   having taken the submission and charged the budget, hands the request to the
//!   client, which encodes and writes it right away (the cross-thread part);
//! - `submit->written`: to just after the client's `write` returned (both stamped
//!   by the loop: `BoundaryConfig::stamp`); on a busy machine this includes whatever
//!   preempted the loop during the syscall (often the server being woken);
//! - `submit->answer`: from the same start to the moment `Handle::poll` returned
//!   the answer on the submitting thread (includes the server's turnaround).
//!
//! Output, one line per mode:
//! `mode=<m> requests=<n> submit->sending p50=<ns> p99=<ns> max=<ns> submit->written ... submit->answer ... eventfd_writes=<n> parks=<n>`

use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread;

use ergon_io::boundary::handle::Outcome;
use ergon_io::boundary::{build, BoundaryConfig};
use ergon_io::client::PoolConfig;
use ergon_io::clock;
use ergon_io::core::{Budget, Class, Part, Spec};
use ergon_io::event_loop::{pin_current_thread, EventLoop, LoopConfig};
use ergon_io::http::Request;

struct Args {
    modes: Vec<bool>,
    requests: usize,
    warmup: usize,
    loop_cpu: Option<usize>,
    submit_cpu: Option<usize>,
}

fn usage(why: &str) -> ! {
    eprintln!("boundary_bench: {why}");
    eprintln!(
        "usage: boundary_bench [--mode parked|busy] [--requests N] [--warmup N] \
         [--loop-cpu C] [--submit-cpu C]"
    );
    std::process::exit(2);
}

fn parse_args() -> Args {
    let mut a = Args {
        modes: vec![false, true],
        requests: 20_000,
        warmup: 2_000,
        loop_cpu: None,
        submit_cpu: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
        };
        let mut number = |what: &str| -> usize {
            let v = value();
            v.parse()
                .unwrap_or_else(|_| usage(&format!("{what}: {v:?} is not a number")))
        };
        match flag.as_str() {
            "--mode" => {
                a.modes = match value().as_str() {
                    "parked" => vec![false],
                    "busy" => vec![true],
                    other => usage(&format!("--mode {other:?}: parked or busy")),
                }
            }
            "--requests" => a.requests = number("--requests"),
            "--warmup" => a.warmup = number("--warmup"),
            "--loop-cpu" => a.loop_cpu = Some(number("--loop-cpu")),
            "--submit-cpu" => a.submit_cpu = Some(number("--submit-cpu")),
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    if a.requests == 0 {
        usage("--requests must be at least 1");
    }
    a
}

/// A keep-alive loopback server: answers every request head with a 2-byte 200.
fn serve() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local addr");
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let _ = s.set_nodelay(true);
            thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut have = 0;
                loop {
                    match s.read(&mut buf[have..]) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => have += n,
                    }
                    while let Some(end) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
                        if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                            .is_err()
                        {
                            return;
                        }
                        buf.copy_within(end + 4..have, 0);
                        have -= end + 4;
                    }
                    if have == buf.len() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

fn pct(sorted: &[i64], p: f64) -> i64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn run(args: &Args, addr: std::net::SocketAddr, busy_poll: bool) {
    let mut b = Budget::builder();
    let weight = b
        .add("weight", Spec::sliding(u64::MAX / 4, 60_000_000_000, 60))
        .expect("bucket");
    let budget = b.build(clock::now_ns()).expect("budget");
    let (mut service, handles, _stats, stopper) = build(BoundaryConfig {
        handles: 1,
        stamp: true,
        ..BoundaryConfig::default()
    })
    .expect("boundary");
    let (pool_tx, pool_rx) = std::sync::mpsc::channel();
    let loop_cpu = args.loop_cpu;
    let lp = thread::spawn(move || {
        let cfg = LoopConfig {
            busy_poll,
            cpu: loop_cpu,
            ..LoopConfig::default()
        };
        let mut lp = EventLoop::new(cfg, budget).expect("event loop");
        let pool = lp
            .add_pool(PoolConfig::new(addr, "127.0.0.1"))
            .expect("pool");
        service.attach(&mut lp).expect("attach");
        pool_tx.send(pool).expect("send pool id");
        lp.run(&mut service).expect("loop");
        service.shutdown(&mut lp);
    });
    let pool = pool_rx.recv().expect("pool id");
    let mut h = handles.into_iter().next().expect("one handle");
    if let Some(cpu) = args.submit_cpu {
        pin_current_thread(cpu).unwrap_or_else(|e| usage(&format!("--submit-cpu: {e}")));
    }
    let parts = [Part::new(weight, 1)];
    let req = Request::get("/bench");
    let total = args.warmup + args.requests;
    let mut sending = Vec::with_capacity(args.requests);
    let mut written = Vec::with_capacity(args.requests);
    let mut answered = Vec::with_capacity(args.requests);
    let (mut writes0, mut parks0) = (0, 0);
    let mut i = 0;
    while i < total {
        if i == args.warmup {
            (writes0, parks0) = (h.eventfd_writes(), h.loop_parks());
        }
        let t0 = clock::now_ns();
        if h.submit(pool, &req, &parts, Class::Normal, t0 + 5_000_000_000)
            .is_err()
        {
            usage("submit refused with nothing outstanding");
        }
        let (t_sending, t_written, t_answer, ok) = loop {
            if let Some(a) = h.poll() {
                let t = clock::now_ns();
                break (
                    a.sending_at_ns(),
                    a.written_at_ns(),
                    t,
                    matches!(a.outcome(), Outcome::Response),
                );
            }
            std::hint::spin_loop();
        };
        if !ok {
            // The pool was still connecting: not a measurement, try again.
            continue;
        }
        if i >= args.warmup {
            sending.push(t_sending.map_or(0, |w| w - t0));
            written.push(t_written.map_or(0, |w| w - t0));
            answered.push(t_answer - t0);
        }
        i += 1;
    }
    let (writes, parks) = (h.eventfd_writes() - writes0, h.loop_parks() - parks0);
    stopper.stop();
    lp.join().expect("loop thread");
    sending.sort_unstable();
    written.sort_unstable();
    answered.sort_unstable();
    println!(
        "mode={} requests={} submit->sending p50={} p99={} max={} submit->written p50={} p99={} max={} submit->answer p50={} p99={} max={} eventfd_writes={} parks={}",
        if busy_poll { "busy" } else { "parked" },
        args.requests,
        pct(&sending, 0.5),
        pct(&sending, 0.99),
        sending[sending.len() - 1],
        pct(&written, 0.5),
        pct(&written, 0.99),
        written[written.len() - 1],
        pct(&answered, 0.5),
        pct(&answered, 0.99),
        answered[answered.len() - 1],
        writes,
        parks,
    );
}

fn main() {
    let args = parse_args();
    let addr = serve();
    for &busy in &args.modes {
        run(&args, addr, busy);
    }
}
