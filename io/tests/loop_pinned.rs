//! The loop pinned to a CPU runs there: every turn samples `sched_getcpu`.

mod common;

use common::driver::{order, Answer, Driver, SEC};
use common::server::Server;
use ergon_io::client::{ClientHandler, Error, RequestId, Sent};
use ergon_io::core::Flight;
use ergon_io::event_loop::{
    allowed_cpus, current_cpu, pin_current_thread, Context, LoopConfig, LoopError,
};
use ergon_venues::response::Response;

struct Sample {
    turns: u64,
    off_cpu: u64,
    want: usize,
}

impl ClientHandler for Sample {
    fn on_response(&mut self, _: &mut Context<'_>, _: RequestId, _: Response<'_>, _: Flight) {}
    fn on_error(&mut self, _: &mut Context<'_>, _: RequestId, _: Sent, _: Error) {}
    fn on_turn(&mut self, cx: &mut Context<'_>) {
        self.turns += 1;
        if current_cpu() != Some(self.want) {
            self.off_cpu += 1;
        }
        if self.turns == 20_000 {
            cx.stop();
        }
    }
}

/// CPU 1 when this process may use it (the usual isolated core on a small box),
/// otherwise the last CPU it may use.
fn target_cpu() -> usize {
    let allowed = allowed_cpus();
    assert!(!allowed.is_empty(), "sched_getaffinity gave no CPU");
    if allowed.contains(&1) {
        1
    } else {
        *allowed.last().unwrap()
    }
}

#[test]
fn a_pinned_busy_polling_loop_runs_on_its_cpu_and_serves_requests() {
    let cpu = target_cpu();
    let server = Server::start(|p| p.echo());
    let addr = server.addr;
    let t = std::thread::spawn(move || {
        let cfg = LoopConfig {
            cpu: Some(cpu),
            busy_poll: true,
            ..LoopConfig::default()
        };
        let mut d = Driver::with_config(addr, cfg, |_| {});
        let mut h = Sample {
            turns: 0,
            off_cpu: 0,
            want: cpu,
        };
        d.lp.run(&mut h).unwrap();
        assert_eq!(d.lp.cpu(), Some(cpu));
        // Requests still work (and the pin holds) in the same thread.
        let (a, _) = d.send(&order("id=pinned"), 10 * SEC);
        assert_eq!(a, Answer::ok(b"id=pinned"));
        (h.turns, h.off_cpu, current_cpu())
    });
    let (turns, off, after) = t.join().unwrap();
    assert_eq!(turns, 20_000);
    assert_eq!(off, 0, "turns ran off CPU {cpu}");
    assert_eq!(after, Some(cpu));
}

#[test]
fn pinning_to_a_cpu_outside_the_mask_is_an_error() {
    let t = std::thread::spawn(|| pin_current_thread(100_000));
    assert_eq!(t.join().unwrap(), Err(LoopError::CpuNotAllowed(100_000)));
}
