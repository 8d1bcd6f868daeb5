//! Stands in for [`crate::tls`] when the `tls` feature is off: a session that
//! cannot exist, so every TLS branch of the client compiles and is never taken.
#![allow(dead_code)]

use std::os::raw::c_int;

/// What one read from the socket into the session gave.
pub(crate) enum Input {
    Data { plaintext: bool, closed: bool },
    WouldBlock,
    Eof,
}

/// A socket write failed after `written` bytes had left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WriteFailed {
    pub(crate) written: usize,
    pub(crate) errno: i32,
}

/// Why a session step failed.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fault {
    Io(i32),
}

/// What a plaintext read gave.
pub(crate) enum Plain {
    Data(usize),
    None,
    Closed,
    Truncated,
}

/// No session can be built without the feature.
#[derive(Debug)]
pub(crate) enum Session {}

impl Session {
    pub(crate) fn is_handshaking(&self) -> bool {
        match *self {}
    }
    pub(crate) fn wants_write(&self) -> bool {
        match *self {}
    }
    pub(crate) fn take_plaintext(&mut self, _: &[u8]) -> usize {
        match *self {}
    }
    pub(crate) fn write_records(&mut self, _: c_int) -> Result<(usize, bool), WriteFailed> {
        match *self {}
    }
    pub(crate) fn read_records(&mut self, _: c_int) -> Result<Input, Fault> {
        match *self {}
    }
    pub(crate) fn send_close_notify(&mut self) {
        match *self {}
    }
    pub(crate) fn read_plaintext(&mut self, _: &mut [u8]) -> Plain {
        match *self {}
    }
}
