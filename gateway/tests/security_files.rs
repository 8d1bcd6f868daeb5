//! `ergon-gateway` as a security boundary, second pass (issue 41): the
//! directories and files it keeps. Real processes: the gateway binary against
//! the venue emulator (in this process); the attacker's directories are owned
//! by a second uid.

#[path = "common/ready.rs"]
mod ready;
#[path = "common/sec.rs"]
mod sec;
use sec::*;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// A directory `dir/sub` owned by `owner`, mode 0755.
fn owned_dir(dir: &Path, sub: &str, owner: (u32, u32)) -> std::path::PathBuf {
    let d = dir.join(sub);
    std::fs::create_dir_all(&d).expect("mkdir");
    std::os::unix::fs::chown(&d, Some(owner.0), Some(owner.1)).expect("chown");
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    d
}

/// Starts a gateway with `extra` that must refuse to start: what it said.
fn refused(dir: &Path, test: &str, extra: Vec<String>) -> String {
    let s = sim();
    let name = unique(test);
    let (mut child, stderr) = spawn_gateway(
        &s,
        &name,
        dir,
        Opts {
            extra,
            secret_by_flag: true,
            ..Opts::default()
        },
    );
    let r = ready::ready(&mut child, &name);
    let err = std::fs::read_to_string(&stderr).unwrap_or_default();
    let _ = child.kill();
    let _ = child.wait();
    assert!(r.is_err(), "the gateway started: {err}");
    err
}

// ---- item 6: directories no other uid can write ----

#[test]
fn a_journal_in_a_directory_another_uid_owns_is_refused() {
    let Some(att) = attacker() else { return };
    let dir = Scratch::new("jdir");
    let theirs = owned_dir(&dir.0, "theirs", att);
    // On main it was accepted: deleting `journal.owners` there then opened the
    // earlier orders to every client, silently.
    let journal = theirs.join("journal").to_string_lossy().into_owned();
    let err = refused(&dir.0, "jdir", vec!["--journal".into(), journal]);
    assert!(
        err.contains(&format!("owned by uid {}", att.0)) && err.contains("theirs"),
        "the refusal names the directory and its owner: {err}"
    );
    assert!(
        !theirs.join("journal").exists(),
        "a journal was created there"
    );
}

#[test]
fn a_runtime_directory_under_a_parent_another_uid_owns_is_refused() {
    let Some(att) = attacker() else { return };
    let dir = Scratch::new("rdir");
    let theirs = owned_dir(&dir.0, "theirs", att);
    // On main it was accepted: the attacker could rename the runtime directory
    // away and put a symlink in its place, redirecting the `protection` file.
    let rt = theirs.join("rt").to_string_lossy().into_owned();
    let err = refused(&dir.0, "rdir", vec!["--runtime-dir".into(), rt]);
    assert!(
        err.contains(&format!("owned by uid {}", att.0)),
        "the refusal names the parent's owner: {err}"
    );
}

#[test]
fn a_group_writable_parent_is_refused_too() {
    if !is_root() {
        return;
    }
    let dir = Scratch::new("gdir");
    let open = dir.0.join("open");
    std::fs::create_dir_all(&open).expect("mkdir");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o775)).expect("chmod");
    let journal = open
        .join("j")
        .join("journal")
        .to_string_lossy()
        .into_owned();
    std::fs::create_dir_all(open.join("j")).expect("mkdir");
    std::fs::set_permissions(open.join("j"), std::fs::Permissions::from_mode(0o700))
        .expect("chmod");
    let err = refused(&dir.0, "gdir", vec!["--journal".into(), journal]);
    assert!(err.contains("mode 0775"), "{err}");
}

#[test]
fn a_symlink_planted_at_the_protection_file_is_not_followed() {
    if !is_root() {
        return;
    }
    let s = sim();
    let dir = Scratch::new("prot");
    let name = unique("prot");
    let rt = dir.0.join("rt");
    std::fs::create_dir_all(&rt).expect("mkdir");
    std::fs::set_permissions(&rt, std::fs::Permissions::from_mode(0o750)).expect("chmod");
    let victim = dir.0.join("victim");
    std::fs::write(&victim, "precious\n").expect("victim");
    std::os::unix::fs::symlink(&victim, rt.join("protection")).expect("symlink");
    // On main the gateway wrote its protection line through the symlink.
    let gw = gateway(
        &s,
        &name,
        &dir.0,
        Opts {
            extra: vec!["--runtime-dir".into(), rt.to_string_lossy().into_owned()],
            secret_by_flag: true,
            ..Opts::default()
        },
    );
    stats_until(&name, |t| t.contains("\nbucket "));
    let (_, err) = gw.finish();
    assert_eq!(
        std::fs::read_to_string(&victim).expect("victim"),
        "precious\n",
        "the protection line went through the symlink"
    );
    assert!(
        err.contains("protection file") && err.contains("symlink"),
        "{err}"
    );
}

// ---- item 9: what is left behind ----

#[test]
fn the_secret_from_the_environment_is_gone_from_proc_environ() {
    let s = sim();
    let dir = Scratch::new("environ");
    let name = unique("environ");
    let secret = s.config().accounts[0].secret.clone();
    let gw = gateway(
        &s,
        &name,
        &dir.0,
        Opts {
            extra: journal_args(&dir.0),
            env: vec![("ERGON_API_SECRET", secret.clone())],
            ..Opts::default()
        },
    );
    // On main, remove_var left the bytes where /proc/PID/environ shows them.
    let environ = std::fs::read(format!("/proc/{}/environ", gw.child.id())).expect("environ");
    assert!(
        !environ
            .windows(secret.len())
            .any(|w| w == secret.as_bytes()),
        "the secret is still in /proc/PID/environ"
    );
    // It signed with it: the owner's order goes through.
    let me = run_role_order(&name);
    assert_eq!(me, 1);
}

/// One order through the gateway `name`, from this process.
fn run_role_order(name: &str) -> u64 {
    let mut c = ergon_gateway::shm::ShmClient::attach(name, "owner", false).expect("attach");
    one_order(&mut c)
}
