//! The account's secrets: from a file only this uid can read, from the
//! environment (scrubbed from `/proc/PID/environ` once read) or, deprecated, from
//! argv; held in memory that is wiped when dropped, never printed.

use std::io::{BufRead, Read};

/// The environment variable the API secret may come from (removed from the
/// environment once read).
pub const SECRET_ENV: &str = "ERGON_API_SECRET";

/// The environment variable the API passphrase (OKX) may come from (removed
/// from the environment once read).
pub const PASSPHRASE_ENV: &str = "ERGON_PASSPHRASE";

/// The API secret, wiped from memory when dropped, never printed.
pub struct Secret(pub zeroize::Zeroizing<Vec<u8>>);

impl core::fmt::Debug for Secret {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// Takes `bytes`, without the line end a file or a pipe usually adds.
    pub fn new(mut bytes: Vec<u8>) -> Result<Secret, String> {
        while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            bytes.pop();
        }
        let s = Secret(zeroize::Zeroizing::new(bytes));
        if s.0.is_empty() {
            return Err("the API secret is empty".into());
        }
        Ok(s)
    }
}

/// Where the API secret comes from.
#[derive(Debug)]
pub enum SecretFrom {
    /// `--api-secret-file PATH`.
    File(std::path::PathBuf),
    /// `--api-secret-stdin`: the first line of standard input.
    Stdin,
    /// `--api-secret S` (deprecated: in /proc/PID/cmdline for every user).
    Arg(Secret),
}

/// Where the API passphrase comes from (None: the environment,
/// [`PASSPHRASE_ENV`], if set).
#[derive(Debug)]
pub enum PassphraseFrom {
    /// `--passphrase-file PATH`.
    File(std::path::PathBuf),
    /// `--passphrase P` (deprecated on the command line: in /proc/PID/cmdline
    /// for every user; from a config file it is not on the command line).
    Arg(Secret),
}

/// Overwrites the value of the environment variable `name` where it lies, then
/// removes it: `remove_var` alone leaves its bytes in the block that
/// `/proc/PID/environ` shows.
#[allow(unsafe_code)]
pub fn scrub_env(name: &str) {
    if let Ok(c) = std::ffi::CString::new(name) {
        // SAFETY: getenv points at the NUL-terminated value inside the
        // environment block, which is writable; called at start-up, before any
        // other thread that could read the environment exists.
        unsafe {
            let p = libc::getenv(c.as_ptr());
            if !p.is_null() {
                for i in 0..libc::strlen(p) {
                    core::ptr::write_volatile(p.add(i), 0);
                }
            }
        }
    }
    std::env::remove_var(name);
}

/// Reads the API secret from where the command line says: a file only this uid
/// can read, standard input, [`SECRET_ENV`], or (deprecated, with a warning) the
/// command line itself.
pub fn load_secret(from: Option<&SecretFrom>) -> Result<Secret, String> {
    let env = std::env::var_os(SECRET_ENV);
    // Out of the environment at once: a child process or a dump of it never sees it.
    scrub_env(SECRET_ENV);
    let env = env.map(|v| Secret::new(std::os::unix::ffi::OsStringExt::into_vec(v)));
    match (from, env) {
        (Some(_), Some(_)) => Err(format!(
            "the API secret is given twice ({SECRET_ENV} and a flag): give one"
        )),
        (None, Some(s)) => s,
        (None, None) => Err(format!(
            "the API secret is required: --api-secret-file PATH, --api-secret-stdin or {SECRET_ENV}"
        )),
        (Some(SecretFrom::Arg(s)), None) => {
            eprintln!(
                "ergon-gateway: warning: --api-secret is deprecated: every user on this host can read it in ps and /proc/PID/cmdline; use --api-secret-file, --api-secret-stdin or {SECRET_ENV}"
            );
            Ok(Secret(s.0.clone()))
        }
        (Some(SecretFrom::Stdin), None) => {
            // Room for the longest accepted: never reallocated (a copy left behind).
            let mut line = zeroize::Zeroizing::new(Vec::with_capacity(4097));
            std::io::stdin()
                .lock()
                .take(4096)
                .read_until(b'\n', &mut line)
                .map_err(|e| format!("--api-secret-stdin: {e}"))?;
            Secret::new(core::mem::take(&mut *line))
        }
        (Some(SecretFrom::File(path)), None) => read_secret_file(path, "--api-secret-file"),
    }
}

/// Reads the API passphrase (OKX) from where the command line says: a file only
/// this uid can read, [`PASSPHRASE_ENV`], a config file's `passphrase`, or
/// (deprecated, with a warning) the command line itself. None: not given.
pub fn load_passphrase(from: Option<&PassphraseFrom>) -> Result<Option<Secret>, String> {
    let env = std::env::var_os(PASSPHRASE_ENV);
    // Out of the environment at once: a child process or a dump of it never sees it.
    scrub_env(PASSPHRASE_ENV);
    let env = env.map(|v| {
        Secret::new(std::os::unix::ffi::OsStringExt::into_vec(v))
            .map_err(|_| format!("{PASSPHRASE_ENV} is empty"))
    });
    match (from, env) {
        (Some(_), Some(_)) => Err(format!(
            "the API passphrase is given twice ({PASSPHRASE_ENV} and a flag): give one"
        )),
        (None, e) => e.transpose(),
        (Some(PassphraseFrom::Arg(p)), None) => {
            // A config file's `passphrase` comes in as the flag too; only the real
            // command line is visible in ps.
            if std::env::args().any(|a| a == "--passphrase") {
                eprintln!(
                    "ergon-gateway: warning: --passphrase is deprecated: every user on this host can read it in ps and /proc/PID/cmdline; use --passphrase-file, {PASSPHRASE_ENV} or the config file"
                );
            }
            Ok(Some(Secret(p.0.clone())))
        }
        (Some(PassphraseFrom::File(path)), None) => {
            read_secret_file(path, "--passphrase-file").map(Some)
        }
    }
}

/// Reads a secret file (given with `flag`, which errors name), refused unless
/// it is a regular file (not a symlink) owned by this process's uid that no
/// other user can read or write.
#[allow(unsafe_code)]
pub fn read_secret_file(path: &std::path::Path, flag: &str) -> Result<Secret, String> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let shown = path.display();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => format!("{flag} {shown}: a symlink, refused"),
            _ => format!("{flag} {shown}: {e}"),
        })?;
    // What was opened, not what the path names now.
    let m = f.metadata().map_err(|e| format!("{flag} {shown}: {e}"))?;
    // SAFETY: plain syscall, cannot fail.
    let me = unsafe { libc::geteuid() };
    if !m.file_type().is_file() {
        return Err(format!("{flag} {shown}: not a regular file"));
    }
    if m.uid() != me {
        return Err(format!(
            "{flag} {shown}: owned by uid {}, not by the gateway's uid {me}",
            m.uid()
        ));
    }
    if m.mode() & 0o077 != 0 {
        return Err(format!(
            "{flag} {shown}: mode {:04o}: other users may read it (chmod 0600)",
            m.mode() & 0o7777
        ));
    }
    if m.len() > 4096 {
        return Err(format!("{flag} {shown}: larger than 4096 bytes"));
    }
    let mut buf = zeroize::Zeroizing::new(Vec::with_capacity(4097));
    f.take(4097)
        .read_to_end(&mut buf)
        .map_err(|e| format!("{flag} {shown}: {e}"))?;
    Secret::new(core::mem::take(&mut *buf)).map_err(|_| format!("{flag} {shown}: empty"))
}

/// `--key-type`: the kind of key the secret must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    /// An HMAC-SHA256 secret.
    Hmac,
    /// An Ed25519 private key, PKCS#8 PEM (Binance).
    Ed25519,
}

impl core::str::FromStr for KeyType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "hmac" => Ok(KeyType::Hmac),
            "ed25519" => Ok(KeyType::Ed25519),
            v => Err(format!("--key-type {v:?}: hmac or ed25519")),
        }
    }
}

/// Checks the secret against `--key-type` (None: detected from the secret, a
/// PEM private key being Ed25519) and `venue`: an Ed25519 key is Binance's
/// (Spot, USD-M) only, and must read as a PKCS#8 PEM private key. The error
/// names what is wrong, never the secret.
pub fn check_key_type(want: Option<KeyType>, venue: &str, secret: &Secret) -> Result<(), String> {
    use ergon_venues::endpoint::{is_pem_private_key, SignKey};
    let pem = is_pem_private_key(&secret.0);
    let binance = matches!(venue, "binance-spot" | "binance-futures");
    match (want, pem) {
        (Some(KeyType::Ed25519), false) => Err(
            "--key-type ed25519: the API secret is not a PKCS#8 PEM private key (-----BEGIN PRIVATE KEY-----, as `openssl genpkey -algorithm ed25519` and Binance's key generator write it)".into(),
        ),
        (Some(KeyType::Hmac), true) => Err(
            "--key-type hmac: the API secret is a PEM private key (an Ed25519 key: --key-type ed25519)".into(),
        ),
        (_, true) if !binance => Err(format!(
            "the API secret is a PEM private key: Ed25519 keys are Binance's (binance-spot, binance-futures), not {venue}'s"
        )),
        (_, true) => SignKey::detect(&secret.0)
            .map(|_| ())
            .map_err(|_| "the API secret is a PEM private key but not an unencrypted Ed25519 PKCS#8 one".into()),
        (_, false) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEM: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIOphjDnj177uXH0N7VA8AvzH1KwCiMvsNlT6fbyHUhAr
-----END PRIVATE KEY-----";

    fn s(b: &str) -> Secret {
        Secret::new(b.as_bytes().to_vec()).unwrap()
    }

    #[test]
    fn the_key_type_is_detected_and_a_wrong_flag_named() {
        let (pem, hmac) = (s(PEM), s("NhqPtmdSJYdKjVHjA7PZj4Mge3R5YNiP"));
        assert_eq!(check_key_type(None, "binance-spot", &pem), Ok(()));
        assert_eq!(
            check_key_type(Some(KeyType::Ed25519), "binance-futures", &pem),
            Ok(())
        );
        assert_eq!(check_key_type(None, "bybit", &hmac), Ok(()));
        assert_eq!(
            check_key_type(Some(KeyType::Hmac), "binance-spot", &hmac),
            Ok(())
        );
        let e = check_key_type(Some(KeyType::Ed25519), "binance-spot", &hmac).unwrap_err();
        assert!(e.starts_with("--key-type ed25519"), "{e}");
        let e = check_key_type(Some(KeyType::Hmac), "binance-spot", &pem).unwrap_err();
        assert!(e.starts_with("--key-type hmac"), "{e}");
        let e = check_key_type(None, "okx", &pem).unwrap_err();
        assert!(e.contains("okx"), "{e}");
        let broken = s("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----");
        assert!(check_key_type(None, "binance-spot", &broken).is_err());
        assert!("rsa"
            .parse::<KeyType>()
            .unwrap_err()
            .contains("hmac or ed25519"));
        // Never the secret in an error.
        assert!(!e.contains("MC4CAQ"));
    }
}
