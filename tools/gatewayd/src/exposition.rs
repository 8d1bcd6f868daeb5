//! The two text formats `/metrics` speaks, chosen by the scraper's `Accept`
//! header as Prometheus servers and exporters do: OpenMetrics 1.0 when asked for
//! (`application/openmetrics-text`, at a quality no lower than the classic
//! format's), the classic text format 0.0.4 otherwise (no `Accept`, `*/*`,
//! `text/plain`).
//!
//! The OpenMetrics text is the one `crate::metrics` encodes; the classic text is
//! derived from it by the differences between the two formats: a counter's
//! `# HELP` and `# TYPE` name the family with its `_total` (as its samples),
//! there is no `# UNIT` and no `# EOF`. Sources:
//! <https://prometheus.io/docs/instrumenting/exposition_formats/> (the classic
//! format, and the `Accept` header Prometheus sends),
//! <https://github.com/OpenObservability/OpenMetrics/blob/main/specification/OpenMetrics.md>.
//!
//! Pure text in, text out: no I/O, no clock.

/// The `Content-Type` of an OpenMetrics answer.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The `Content-Type` of a classic text answer.
pub const CLASSIC: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The format of one answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0 text.
    OpenMetrics,
    /// The classic Prometheus text format 0.0.4.
    Classic,
}

impl Format {
    /// The format an `Accept` header (None: absent) asks for: OpenMetrics when
    /// it offers `application/openmetrics-text` at a quality above zero and no
    /// lower than any classic range (`text/plain`, `*/*`); classic otherwise.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Classic;
        };
        let (mut open, mut classic) = (0.0f64, 0.0f64);
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let mut q = 1.0;
            for p in parts {
                if let Some(v) = p.strip_prefix("q=").or_else(|| p.strip_prefix("Q=")) {
                    q = v
                        .parse::<f64>()
                        .ok()
                        .filter(|q| q.is_finite())
                        .unwrap_or(0.0);
                }
            }
            match media.as_str() {
                "application/openmetrics-text" => open = open.max(q),
                "text/plain" | "text/*" | "*/*" => classic = classic.max(q),
                _ => {}
            }
        }
        if open > 0.0 && open >= classic {
            Format::OpenMetrics
        } else {
            Format::Classic
        }
    }

    /// The `Content-Type` of an answer in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => OPENMETRICS,
            Format::Classic => CLASSIC,
        }
    }
}

/// The value of the header `name` (any case) in a request head, if present once
/// the head's request line is skipped.
pub fn header<'h>(head: &'h [u8], name: &str) -> Option<&'h str> {
    let end = head
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(head.len());
    let text = core::str::from_utf8(&head[..end]).ok()?;
    text.split("\r\n").skip(1).find_map(|line| {
        let (k, v) = line.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// The classic text of an OpenMetrics exposition (as the encoder writes it:
/// each family's `# HELP` and `# TYPE` before its samples).
pub fn to_classic(open: &str) -> String {
    let counters: Vec<&str> = open
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(open.len() + 16 * counters.len());
    for line in open.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        match meta {
            Some((p, rest)) => {
                let (fam, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                out.push_str(p);
                out.push_str(fam);
                if counters.contains(&fam) {
                    out.push_str("_total");
                }
                out.push(' ');
                out.push_str(tail);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_picks_the_format() {
        use Format::*;
        assert_eq!(Format::negotiate(None), Classic);
        assert_eq!(Format::negotiate(Some("*/*")), Classic);
        assert_eq!(Format::negotiate(Some("text/plain;version=0.0.4")), Classic);
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text; version=1.0.0")),
            OpenMetrics
        );
        // What Prometheus 2.x sends by default: OpenMetrics first.
        assert_eq!(
            Format::negotiate(Some(
                "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
            )),
            OpenMetrics
        );
        // Classic preferred, or OpenMetrics refused.
        assert_eq!(
            Format::negotiate(Some(
                "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;q=0.5"
            )),
            Classic
        );
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text;q=0")),
            Classic
        );
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text;q=x")),
            Classic
        );
    }

    #[test]
    fn headers_are_found_in_any_case() {
        let head = b"GET /metrics HTTP/1.1\r\nHost: x\r\naccept: text/plain\r\n\r\n";
        assert_eq!(header(head, "Accept"), Some("text/plain"));
        assert_eq!(header(head, "X-None"), None);
        assert_eq!(header(b"\xff\r\nAccept: a\r\n\r\n", "Accept"), None);
    }

    #[test]
    fn counters_take_their_total_in_the_classic_format() {
        let open = "# HELP ergon_sent Sends.\n# TYPE ergon_sent counter\nergon_sent_total 3\n\
                    # HELP ergon_up Up.\n# TYPE ergon_up gauge\n# UNIT ergon_up x\nergon_up 1\n# EOF\n";
        assert_eq!(
            to_classic(open),
            "# HELP ergon_sent_total Sends.\n# TYPE ergon_sent_total counter\nergon_sent_total 3\n\
             # HELP ergon_up Up.\n# TYPE ergon_up gauge\nergon_up 1\n"
        );
    }
}
