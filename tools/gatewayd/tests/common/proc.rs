//! A child process of a test (a gateway, a strategy's role), killed and reaped
//! when dropped, so that a test that fails leaves none behind. Included by path
//! (`#[path = "common/proc.rs"] mod proc;`) in each binary that starts them.

use std::io::BufReader;
use std::process::{Child, ChildStdout};

/// A child and its standard output.
pub struct Proc {
    /// The process.
    pub child: Child,
    /// Its standard output after the lines the test read: kept open, so that
    /// the process never writes into a closed pipe.
    pub _out: BufReader<ChildStdout>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
