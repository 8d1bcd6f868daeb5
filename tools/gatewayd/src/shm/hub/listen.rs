//! The hub's listening sockets: the socket file in the gateway's private
//! runtime directory, which no other uid can take or replace, and the abstract
//! name `@ergon-gateway/NAME` of older clients, which any uid can take first.

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

use ergon_gateway::shm::{os, rundir};

use crate::shm::PrivateDir;

/// The socket file's mode: its owner, and the directory's group (a client of
/// another uid reaches it only where the directory lets it in too).
const SOCKET_MODE: u32 = 0o660;

/// Listens on the gateway `name`'s socket file in `dir` (if given) and on
/// `@ergon-gateway/NAME`. The abstract name held by another uid is a warning
/// naming it, not a refusal to start, when the socket file is served; held by
/// this uid (another gateway of that name), or with no socket file, an error.
pub(super) fn listeners(name: &str, dir: Option<&Path>) -> io::Result<Vec<OwnedFd>> {
    let mut out = Vec::with_capacity(2);
    let mut at = None;
    if let Some(d) = dir {
        let file = rundir::socket_file(name);
        let shown = d.join(&file);
        let fail = |e: io::Error| {
            io::Error::new(
                e.kind(),
                format!("cannot listen on {}: {e}", shown.display()),
            )
        };
        let pd = PrivateDir::open(d).map_err(fail)?;
        // Its errors name the path already.
        pd.clear_socket(&file)?;
        out.push(os::listen_at(pd.fd(), &file, SOCKET_MODE).map_err(fail)?);
        at = Some(shown);
    }
    match os::listen(name) {
        Ok(l) => out.push(l),
        Err(e) => {
            let holder = os::connect(name).and_then(|s| os::peer_cred(&s)).ok();
            let held = holder.map_or(String::new(), |p| {
                format!(", held by uid {} pid {}", p.uid, p.pid)
            });
            match (holder, &at) {
                // Anyone can take an abstract name first: the socket file is
                // the gateway's own, and every client checks the server's uid.
                (Some(p), Some(at)) if p.uid != os::euid() => eprintln!(
                    "ergon-gateway: warning: @ergon-gateway/{name} is taken{held}: serving on {} only (clients of older versions, and of uids its directory keeps out, cannot reach this gateway)",
                    at.display()
                ),
                _ => {
                    return Err(io::Error::other(format!(
                        "cannot listen on @ergon-gateway/{name}: {e}{held} (another gateway of that name?)"
                    )))
                }
            }
        }
    }
    Ok(out)
}
