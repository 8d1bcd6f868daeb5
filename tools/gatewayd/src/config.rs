//! `ergon-gateway --config gateway.toml`: every flag of the command line as a key
//! of a TOML file, so the gateway can run as a service with its settings in one
//! reviewed file.
//!
//! A key is the flag without its dashes (`--max-clients 8` is `max-clients = 8`,
//! `--busy` is `busy = true`). The file is turned back into flags that go *before*
//! the command line's, so a flag given on the command line overrides the file
//! (a `true` key cannot be turned off by a flag: leave it out of the file).
//! Commands (`--stats`, `--once`, `clear-halt`) are not keys.
//!
//! Every error names the file, the line and the key: an unknown key (serde's
//! `deny_unknown_fields`), a value of the wrong type (the `toml` crate's span, turned
//! into a line number), and a value the command line would refuse (each key is
//! checked by the command line's own parser, so the two never disagree on a range).
//!
//! What this must never do: accept a key it does not know, or print a value
//! (the file may hold the API secret).

use serde::Deserialize;
use toml::Spanned;

/// One key of the file, as the flags it stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    /// The key, as written in the file (`max-clients`).
    pub key: &'static str,
    /// The line it is on (1-based).
    pub line: usize,
    /// The command-line arguments it stands for (`["--max-clients", "8"]`; empty
    /// for a `false` switch).
    pub args: Vec<String>,
}

/// Why a config file was refused: the file, the line and the key where known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, as given to `--config`.
    pub path: String,
    /// The line of the culprit (1-based), when the parser could place it.
    pub line: Option<usize>,
    /// The key at fault, when one is.
    pub key: Option<String>,
    /// What was wrong.
    pub message: String,
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", self.path)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if let Some(k) = &self.key {
            write!(f, ": key `{k}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// A value that becomes flag arguments.
trait FlagValue {
    fn args(&self, flag: &str) -> Vec<String>;
}

impl FlagValue for String {
    fn args(&self, flag: &str) -> Vec<String> {
        vec![flag.to_string(), self.clone()]
    }
}

impl FlagValue for u64 {
    fn args(&self, flag: &str) -> Vec<String> {
        vec![flag.to_string(), self.to_string()]
    }
}

impl FlagValue for f64 {
    fn args(&self, flag: &str) -> Vec<String> {
        vec![flag.to_string(), self.to_string()]
    }
}

impl FlagValue for bool {
    fn args(&self, flag: &str) -> Vec<String> {
        if *self {
            vec![flag.to_string()]
        } else {
            Vec::new()
        }
    }
}

macro_rules! keys {
    ($($field:ident: $ty:ty => $key:literal,)*) => {
        /// The file, one optional field per flag.
        #[derive(Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            $(
                #[serde(rename = $key)]
                $field: Option<Spanned<$ty>>,
            )*
        }

        /// Every key a config file may hold, in the order they are applied.
        pub const KEYS: &[&str] = &[$($key),*];

        impl File {
            fn settings(self, text: &str) -> Vec<Setting> {
                let mut out = Vec::new();
                $(
                    if let Some(v) = self.$field {
                        out.push(Setting {
                            key: $key,
                            line: line_of(text, v.span().start),
                            args: v.get_ref().args(concat!("--", $key)),
                        });
                    }
                )*
                out
            }
        }
    };
}

keys! {
    venue: String => "venue",
    base: String => "base",
    api_key: String => "api-key",
    api_secret: String => "api-secret",
    api_secret_file: String => "api-secret-file",
    api_secret_stdin: bool => "api-secret-stdin",
    key_type: String => "key-type",
    passphrase: String => "passphrase",
    passphrase_file: String => "passphrase-file",
    name: String => "name",
    symbol: String => "symbol",
    cpu: u64 => "cpu",
    max_clients: u64 => "max-clients",
    in_flight: u64 => "in-flight",
    share: f64 => "share",
    keep: f64 => "keep",
    busy: bool => "busy",
    guard_ms: u64 => "guard-ms",
    journal: String => "journal",
    runtime_dir: String => "runtime-dir",
    start_timeout: f64 => "start-timeout",
    allow_uid: String => "allow-uid",
    allow_gid: String => "allow-gid",
    class_ceiling: String => "class-ceiling",
    order_entry: String => "order-entry",
    ws_api: String => "ws-api",
    private_ws: String => "private-ws",
    no_stream: bool => "no-stream",
    protection: String => "protection",
    protection_timeout: f64 => "protection-timeout",
    etcd: String => "etcd",
    account: String => "account",
    safe_share: f64 => "safe-share",
    hosts: u64 => "hosts",
    host: String => "host",
    lease_ttl: u64 => "lease-ttl",
    etcd_ca: String => "etcd-ca",
    etcd_cert: String => "etcd-cert",
    etcd_key: String => "etcd-key",
    etcd_user: String => "etcd-user",
    etcd_password_file: String => "etcd-password-file",
    metrics: String => "metrics",
    degraded_pct: f64 => "degraded-pct",
    degraded_secs: f64 => "degraded-secs",
    unreachable_secs: f64 => "unreachable-secs",
    private_key_file: String => "private-key-file",
    account_address: String => "account-address",
    vault_address: String => "vault-address",
    testnet: bool => "testnet",
    reserve_budget: f64 => "reserve-budget",
}

/// The 1-based line of byte `at` in `text`.
/// A flag's value as a number in `lo..=hi`; the error names the flag, the
/// value and the range (the command line's flags and the config file's keys
/// alike).
pub fn flag_number(flag: &str, v: &str, lo: f64, hi: f64) -> Result<f64, String> {
    v.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x >= lo && *x <= hi)
        .ok_or_else(|| format!("{flag} {v:?}: expected a number in {lo}..={hi}"))
}

fn line_of(text: &str, at: usize) -> usize {
    let at = at.min(text.len());
    text.as_bytes()[..at]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The bare key at the start of `line` (`cpu = "x"` → `cpu`), if it has one.
fn key_on(line: &str) -> Option<String> {
    let (k, _) = line.split_once('=')?;
    let k = k.trim().trim_matches('"');
    (!k.is_empty() && !k.starts_with('#')).then(|| k.to_string())
}

/// Parses the text of a config file (`path` only names it in errors).
pub fn parse(path: &str, text: &str) -> Result<Vec<Setting>, ConfigError> {
    let file: File = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| line_of(text, s.start));
        let msg = e.message().trim().to_string();
        // serde names an unknown key in its message: `unknown field `x``.
        let key = msg
            .strip_prefix("unknown field `")
            .and_then(|r| r.split('`').next())
            .map(str::to_string)
            .or_else(|| line.and_then(|l| text.lines().nth(l - 1)).and_then(key_on));
        ConfigError {
            path: path.to_string(),
            line,
            key,
            message: msg,
        }
    })?;
    Ok(file.settings(text))
}

/// Reads and parses a config file. One that holds a secret itself
/// (`api-secret`, `passphrase`) is refused, naming that key, unless it is a
/// regular file of this process's uid with no group or other bits (as
/// `--api-secret-file` is): a file mode 0644 shows the key to every user.
pub fn load(path: &str) -> Result<Vec<Setting>, ConfigError> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let err = |line, key: Option<&str>, message: String| ConfigError {
        path: path.to_string(),
        line,
        key: key.map(str::to_string),
        message,
    };
    let mut f = std::fs::File::open(path).map_err(|e| err(None, None, e.to_string()))?;
    let m = f.metadata().map_err(|e| err(None, None, e.to_string()))?;
    let mut text = String::new();
    f.read_to_string(&mut text)
        .map_err(|e| err(None, None, e.to_string()))?;
    let settings = parse(path, &text)?;
    // SAFETY: geteuid cannot fail.
    #[allow(unsafe_code)]
    let me = unsafe { libc::geteuid() };
    let private = m.file_type().is_file() && m.uid() == me && m.mode() & 0o077 == 0;
    match settings
        .iter()
        .find(|s| matches!(s.key, "api-secret" | "passphrase"))
    {
        Some(s) if !private => Err(err(
            Some(s.line),
            Some(s.key),
            format!(
                "a secret in a file of uid {} mode {:04o}: other users may read it (chown to uid {me}, chmod 0600, or use {}-file)",
                m.uid(),
                m.mode() & 0o7777,
                s.key
            ),
        )),
        _ => Ok(settings),
    }
}

/// The command line with `--config PATH` replaced by the file's settings, put
/// before the remaining flags so that those override the file. `check` is the
/// command line's parser, run on each setting alone: a value it refuses is an
/// error that names the key and its line. Without `--config`, `args` as given.
pub fn expand(
    args: Vec<String>,
    check: impl Fn(&[String]) -> Result<(), String>,
) -> Result<Vec<String>, String> {
    let mut rest = Vec::with_capacity(args.len());
    let mut path = None;
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        if a == "--config" {
            if path.is_some() {
                return Err("--config given twice".into());
            }
            path = Some(it.next().ok_or("--config needs a value")?);
        } else {
            rest.push(a);
        }
    }
    let Some(path) = path else { return Ok(rest) };
    let mut out = Vec::new();
    for s in load(&path).map_err(|e| e.to_string())? {
        check(&s.args).map_err(|m| {
            ConfigError {
                path: path.clone(),
                line: Some(s.line),
                key: Some(s.key.to_string()),
                message: m,
            }
            .to_string()
        })?;
        out.extend(s.args);
    }
    out.extend(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_good_file_becomes_flags_in_order() {
        let s = parse(
            "g.toml",
            "# a comment\nvenue = \"binance-spot\"\nmax-clients = 8\nshare = 50\nbusy = true\nno-stream = false\n",
        )
        .unwrap();
        let args: Vec<_> = s.iter().flat_map(|s| s.args.clone()).collect();
        assert_eq!(
            args,
            [
                "--venue",
                "binance-spot",
                "--max-clients",
                "8",
                "--share",
                "50",
                "--busy"
            ]
        );
        assert_eq!(
            s.iter().map(|s| s.line).collect::<Vec<_>>(),
            [2, 3, 4, 5, 6]
        );
    }

    #[test]
    fn an_unknown_key_is_named_with_its_line() {
        let e = parse("g.toml", "venue = \"okx\"\n\nmax-client = 3\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("max-client"));
        assert_eq!(e.line, Some(3));
        assert!(
            e.to_string().starts_with("g.toml:3: key `max-client`: "),
            "{e}"
        );
    }

    #[test]
    fn a_bad_type_is_named_with_its_line() {
        let e = parse("g.toml", "name = \"main\"\ncpu = \"two\"\n").unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(2), Some("cpu")), "{e}");
        let e = parse("g.toml", "busy = 1\n").unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(1), Some("busy")), "{e}");
    }

    #[test]
    fn the_example_in_deploy_parses() {
        let text = include_str!("../../../deploy/gateway.toml");
        let s = parse("deploy/gateway.toml", text).unwrap();
        assert!(s.iter().any(|s| s.key == "metrics"), "{s:?}");
        assert_eq!(s.len(), 13);
    }

    #[test]
    fn a_flag_on_the_command_line_overrides_the_file() {
        let dir = std::env::temp_dir().join(format!("ergon-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("g.toml");
        std::fs::write(&p, "name = \"file\"\nshare = 20\n").unwrap();
        let args = ["--share", "30", "--config", p.to_str().unwrap()].map(String::from);
        let out = expand(args.to_vec(), |_| Ok(())).unwrap();
        assert_eq!(out, ["--name", "file", "--share", "20", "--share", "30"]);
        // A value the command line refuses names the key and its line.
        let e = expand(args.to_vec(), |a| {
            if a[0] == "--share" {
                Err("--share \"20\": too small".into())
            } else {
                Ok(())
            }
        })
        .unwrap_err();
        assert!(e.contains(":2: key `share`: "), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_secret_in_a_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("ergon-config-s-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("g.toml");
        std::fs::write(&p, "name = \"main\"\napi-secret = \"s3cret\"\n").unwrap();
        let path = p.to_str().unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        // On main it was accepted.
        let e = load(path).unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(2), Some("api-secret")),
            "{e}"
        );
        assert!(e.message.contains("mode 0644"), "{e}");
        assert!(!e.to_string().contains("s3cret"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(load(path).is_ok());
        // A file without a secret may be read by others.
        std::fs::write(&p, "name = \"main\"\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(load(path).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
