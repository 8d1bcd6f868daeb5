//! A TCP proxy on loopback that a test can black-hole, as a user's firewall would
//! drop a host's packets to etcd: once cut, every byte either way is read and
//! dropped and new connections are accepted and left silent, so the client sees
//! no answer and no reset (its calls time out), while the host's other traffic
//! (the venue) goes on. Real sockets, one thread per direction.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A proxy to one upstream address.
pub struct Blackhole {
    /// `http://ADDR` of the proxy's listening end.
    pub url: String,
    cut: Arc<AtomicBool>,
}

impl Blackhole {
    /// A proxy to `upstream` (`http://HOST:PORT`), forwarding until [`Blackhole::cut`].
    pub fn to(upstream: &str) -> Blackhole {
        let up = upstream.trim_start_matches("http://").to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let cut = Arc::new(AtomicBool::new(false));
        let c = cut.clone();
        std::thread::spawn(move || {
            let mut silent = Vec::new();
            for down in listener.incoming().flatten() {
                if c.load(Ordering::Relaxed) {
                    silent.push(down);
                    continue;
                }
                let Ok(upper) = TcpStream::connect(&up) else {
                    continue;
                };
                for (from, to) in [(&down, &upper), (&upper, &down)] {
                    let (from, to) = (from.try_clone(), to.try_clone());
                    let (Ok(from), Ok(to)) = (from, to) else {
                        continue;
                    };
                    let cut = c.clone();
                    std::thread::spawn(move || pipe(from, to, &cut));
                }
            }
        });
        Blackhole { url, cut }
    }

    /// From now on nothing passes, either way.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::Relaxed);
    }
}

fn pipe(mut from: TcpStream, mut to: TcpStream, cut: &AtomicBool) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            // Dropped, as a firewall drops: no answer, no reset.
            Ok(_) if cut.load(Ordering::Relaxed) => {}
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    if !cut.load(Ordering::Relaxed) {
        let _ = to.shutdown(Shutdown::Write);
    }
}
