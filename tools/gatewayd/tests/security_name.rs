//! Nobody keeps the gateway from starting by taking its name (issue 41, item
//! 1): another uid holding `@ergon-gateway/NAME` and
//! `@ergon-gateway-health/NAME` first costs the gateway nothing, since it serves
//! on a socket file in its private runtime directory that no other uid can take,
//! and the clients find it there first. What another uid puts at a socket's
//! path (where a directory would let it) is never spoken to. Real processes:
//! the gateway binary against the venue emulator, the attacker as a second uid
//! (this test binary again, in `role`).

#[path = "common/ready.rs"]
mod ready;
#[path = "common/sec.rs"]
mod sec;
use sec::*;

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use ergon_gateway::shm::{self, os, rundir, ShmClient};

/// The gateway binary's exit status, stdout and stderr for `args`.
fn control(args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_ergon-gateway"))
        .args(args)
        .env_remove(rundir::RUNTIME_DIR_ENV)
        .stdin(Stdio::null())
        .output()
        .expect("run ergon-gateway");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The `heard` lines an impostor printed.
fn heard(imp: Role) -> Vec<String> {
    imp.finish()
        .lines()
        .filter(|l| l.starts_with("heard"))
        .map(String::from)
        .collect()
}

#[test]
fn an_impostor_on_both_abstract_names_neither_stops_the_gateway_nor_hears_a_word() {
    let Some(att) = attacker() else { return };
    let s = sim();
    let dir = Scratch::new("name");
    let name = unique("name");
    // The gateway's runtime directory by the default rule (root: under /run):
    // no flag anywhere below, on either side.
    let run = Path::new("/run/ergon-gateway").join(&name);
    let imp = spawn_role(&["impostor", &name, "-"], Some(att), "listening");
    // On 1799dd3 the gateway exited here: "cannot listen on
    // @ergon-gateway/NAME: Address already in use (os error 98), held by uid U".
    let gw = journaled_gateway(&s, &name, &dir.0, Vec::new());
    // A strategy attaches and trades (through the socket file).
    let mut c = ShmClient::attach(&name, "owner", false).expect("attach the real gateway");
    assert_eq!(one_order(&mut c), 1, "the order went through");
    stats_until(&name, |t| t.contains("client owner"));
    // --stats: the real stats and the real health lines.
    let (ok, out, err) = control(&["--stats", "--once", "--name", &name]);
    assert!(ok, "--stats: {err}");
    assert!(out.contains("client owner"), "{out}");
    assert!(out.contains("\nhealth "), "the real health lines: {out}");
    assert!(
        !out.contains("forged"),
        "--stats printed the impostor's: {out}"
    );
    // clear-halt reaches the real gateway: nothing is halted, and it says so
    // (the impostor would have said `ok cleared`).
    let (ok, out, err) = control(&["clear-halt", "orders_1s", "--name", &name]);
    assert!(
        !ok && (out.contains("is not halted") || out.contains("no bucket named")),
        "{out}{err}"
    );
    drop(c);
    let (_, gw_err) = gw.finish();
    let words = heard(imp);
    assert!(words.is_empty(), "the impostor heard {words:?}");
    let uid = format!("uid {}", att.0);
    assert!(
        gw_err.contains(&format!("@ergon-gateway/{name} is taken, held by {uid}")),
        "the gateway says who holds its name: {gw_err}"
    );
    assert!(
        gw_err.contains(&format!("@ergon-gateway-health/{name} is taken by {uid}")),
        "the gateway says who holds its health name: {gw_err}"
    );
    let sock = run.join(rundir::socket_file(&name));
    let m = std::fs::symlink_metadata(&sock).expect("the socket file");
    assert_eq!(m.permissions().mode() & 0o777, 0o660, "{}", sock.display());
    let _ = std::fs::remove_dir_all(&run);
}

#[test]
fn a_symlink_or_another_uids_socket_at_the_path_is_never_spoken_to() {
    let Some(att) = attacker() else { return };
    let dir = Scratch::new("name-path");
    let name = unique("name-path");
    // A directory that lets the attacker in (a gateway's never does: its
    // runtime directory is refused unless only its uid can write it).
    let open = dir.0.join("open");
    std::fs::create_dir(&open).expect("mkdir");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let open_s = open.to_string_lossy().into_owned();
    let imp = spawn_role(&["impostor", &name, &open_s], Some(att), "listening");
    let me = shm::own_uid();
    let e = shm::read_stats_in(Some(&open), &name, me).expect_err("believed another uid's socket");
    assert!(
        e.to_string().contains(&format!("owned by uid {}", att.0)),
        "names the uid it found: {e}"
    );
    // The same socket through a symlink of the owner's uid: refused as a symlink.
    let mine = dir.0.join("mine");
    std::fs::create_dir(&mine).expect("mkdir");
    let file = rundir::socket_file(&name);
    std::os::unix::fs::symlink(open.join(&file), mine.join(&file)).expect("symlink");
    let e = shm::read_stats_in(Some(&mine), &name, me).expect_err("followed a symlink");
    assert!(e.to_string().contains("a symlink"), "{e}");
    let e = ShmClient::attach_in(Some(&mine), &name, "x", shm::AttachOptions::new())
        .expect_err("attached through a symlink");
    assert!(e.to_string().contains("a symlink"), "{e}");
    // The gateway itself refuses to start on a runtime directory another uid
    // can write (its socket could be swapped there).
    let s = sim();
    let (mut child, stderr) = spawn_gateway(
        &s,
        &name,
        &dir.0,
        Opts {
            extra: vec!["--runtime-dir".into(), open_s.clone()],
            secret_by_flag: true,
            ..Opts::default()
        },
    );
    assert!(
        ready::ready(&mut child, &name).is_err(),
        "started in {open_s}"
    );
    let _ = child.wait();
    let err = std::fs::read_to_string(stderr).unwrap_or_default();
    assert!(err.contains("mode 0777"), "{err}");
    let words = heard(imp);
    assert!(words.is_empty(), "the impostor heard {words:?}");
}

/// The impostor: holds `@ergon-gateway/NAME` and `@ergon-gateway-health/NAME`
/// (`dir` "-"), or the gateway's socket file in `dir`, and answers every
/// command with a forgery, saying `heard CMD` for each.
fn impostor(name: &str, dir: &str) {
    let l = if dir == "-" {
        forge_health(name);
        os::listen(name).expect("bind @ergon-gateway/NAME")
    } else {
        let d = os::open_dir(Path::new(dir)).expect("open dir");
        os::listen_at(d.as_raw_fd(), &rundir::socket_file(name), 0o666).expect("bind")
    };
    println!("listening");
    let _ = std::io::stdout().flush();
    loop {
        os::poll_fds([l.as_raw_fd()], -1);
        let Ok(Some(c)) = os::accept(&l) else {
            continue;
        };
        os::poll_fds([c.as_raw_fd()], 1000);
        let mut buf = [0u8; 512];
        let Ok(os::Recv::Msg(n, _)) = os::recv_fds(c.as_raw_fd(), &mut buf) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&buf[..n]).into_owned();
        println!("heard {cmd}");
        let _ = std::io::stdout().flush();
        let _ = os::send_fds(c.as_raw_fd(), forged_answer(&cmd).as_bytes(), &[]);
    }
}

#[test]
#[ignore = "a client or attacker process's role, run by the other tests"]
fn role() {
    let Ok(spec) = std::env::var("ERGON_SEC_ROLE") else {
        return;
    };
    let a: Vec<&str> = spec.split(' ').collect();
    match a[0] {
        // impostor GW DIR|-: hold the names (or the path), answer with forgeries.
        "impostor" => impostor(a[1], a[2]),
        other => panic!("unknown role {other}"),
    }
}
