//! The line a gateway prints first once it serves, `ready NAME`. Included by path
//! (`#[path = "common/ready.rs"] mod ready;`) in each binary that starts one.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout};

/// Takes `child`'s standard output and reads its first line: `Ok` with the
/// output (to keep open: the gateway never writes into a closed pipe) if it is
/// `ready NAME`. Otherwise the gateway failed to start: it is waited for, and
/// the error is its exit code and what it printed, that line and then its
/// standard error where that was piped and not taken.
pub fn ready(
    child: &mut Child,
    name: &str,
) -> Result<BufReader<ChildStdout>, (Option<i32>, String)> {
    let mut out = BufReader::new(child.stdout.take().expect("stdout piped"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read the gateway's stdout");
    if line.trim() == format!("ready {name}") {
        return Ok(out);
    }
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let code = child.wait().expect("wait").code();
    Err((code, format!("{line}{err}")))
}
