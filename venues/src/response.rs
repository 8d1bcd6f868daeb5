//! A view of an HTTP response that venue adapters read without I/O.
//!
//! The HTTP client parses into caller-owned arrays and hands out this view; tests
//! build it from fixture bytes. Nothing here allocates or copies.

/// One header as it arrived: name and value bytes, untouched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header<'a> {
    /// The field name (compare case-insensitively).
    pub name: &'a [u8],
    /// The field value, without surrounding whitespace.
    pub value: &'a [u8],
}

/// A complete response: status, headers and the (de-chunked) body.
///
/// ```
/// use ergon_venues::response::{Header, Response};
/// let headers = [Header { name: b"X-MBX-USED-WEIGHT-1M", value: b"17" }];
/// let r = Response { status: 200, headers: &headers, body: b"{}" };
/// assert_eq!(r.header("x-mbx-used-weight-1m"), Some(&b"17"[..]));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response<'a> {
    /// The status code.
    pub status: u16,
    /// Headers in arrival order.
    pub headers: &'a [Header<'a>],
    /// The body, de-chunked.
    pub body: &'a [u8],
}

impl<'a> Response<'a> {
    /// The value of the first header named `name`, compared ASCII case-insensitively.
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        self.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name.as_bytes()))
            .map(|h| h.value)
    }

    /// Every header whose name starts with `prefix`, compared ASCII case-insensitively
    /// (`X-MBX-USED-WEIGHT-` finds each window's usage header).
    pub fn headers_with_prefix<'s>(
        &'s self,
        prefix: &'s str,
    ) -> impl Iterator<Item = Header<'a>> + 's {
        self.headers.iter().copied().filter(move |h| {
            h.name.len() >= prefix.len()
                && h.name[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
        })
    }
}
