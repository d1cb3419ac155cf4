//! `zklock-test serve`: prints the connect string first, serves, and stops
//! cleanly when its stdin closes, on SIGTERM, and when it is killed.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;

use zklock_test::{poll_until, wait_until};

use super::*;

/// `zklock-test serve --port 0 ARGS...` with piped stdin and stdout, and
/// the first line it printed.
fn serve(args: &[&str]) -> (Child, String, BufReader<ChildStdout>) {
    serve_with(args, &[])
}

/// [`serve`] with these environment variables set for it.
fn serve_with(args: &[&str], env: &[(&str, &str)]) -> (Child, String, BufReader<ChildStdout>) {
    spawn_serve(args, env, Stdio::inherit())
}

/// [`serve_with`], its stderr going to `stderr`.
fn spawn_serve(
    args: &[&str],
    env: &[(&str, &str)],
    stderr: Stdio,
) -> (Child, String, BufReader<ChildStdout>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_zklock-test"))
        .args(["serve", "--port", "0"])
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("starting zklock-test serve");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut first = String::new();
    stdout
        .read_line(&mut first)
        .expect("reading the first line");
    (child, first.trim().to_owned(), stdout)
}

/// Waits (bounded) for `child` to exit and returns whether it succeeded.
fn exits(child: &mut Child) -> bool {
    let mut status = None;
    wait_until("zklock-test serve to exit", WAIT, || {
        status = child.try_wait().expect("polling the child");
        status.is_some()
    });
    status.is_some_and(|s| s.success())
}

/// The directories of servers started by process `pid` (scratch_dir names
/// them `zklock-<kind>-<pid>-...`).
fn dirs_of(pid: u32) -> Vec<std::path::PathBuf> {
    let prefix = format!("-{pid}-");
    std::fs::read_dir(std::env::temp_dir())
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                    name.starts_with("zklock-") && name.contains(&prefix)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn no_server_at(connect: &str) -> bool {
    connect.split(',').all(|host| {
        let addr = host.parse().expect("an address");
        zklock_test::zk::try_four_letter(addr, "ruok").is_err()
    })
}

#[test]
fn serve_prints_the_connect_string_first_and_stops_when_stdin_closes() {
    let (mut child, connect, _out) = serve(&[]);
    assert!(connect.starts_with("127.0.0.1:"), "first line: {connect:?}");
    let pid = child.id();
    assert_eq!(dirs_of(pid).len(), 1);
    let (client, guard) = holder(&connect, Duration::from_secs(10), "/serve/stdin");
    drop(guard);
    let _ = client.close();

    drop(child.stdin.take());
    assert!(exits(&mut child));
    assert!(no_server_at(&connect));
    assert_eq!(dirs_of(pid), Vec::<std::path::PathBuf>::new());
}

#[test]
fn serve_stops_an_ensemble_on_sigterm() {
    let (child, connect, _out) = serve(&["--ensemble", "3"]);
    assert_eq!(connect.split(',').count(), 3, "first line: {connect:?}");
    let (_client, _guard) = holder(&connect, Duration::from_secs(10), "/serve/sigterm");
    assert_stops_on_signal(child, &connect, "-TERM");
}

/// Sends `signal` to a running serve and checks that it exits cleanly,
/// its servers stopped and their directories removed.
fn assert_stops_on_signal(mut child: Child, connect: &str, signal: &str) {
    let pid = child.id();
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("running kill");
    assert!(status.success());
    assert!(exits(&mut child));
    assert!(no_server_at(connect));
    assert_eq!(dirs_of(pid), Vec::<std::path::PathBuf>::new());
}

/// `ZKLOCK_KEEP_ZK_DIRS=1`: the server stops, and its directory stays,
/// with its config and log, for a look after the test.
#[test]
fn with_keep_zk_dirs_the_directory_stays_after_the_stop() {
    let (mut child, connect, _out) = serve_with(&[], &[("ZKLOCK_KEEP_ZK_DIRS", "1")]);
    let pid = child.id();
    drop(child.stdin.take());
    assert!(exits(&mut child));
    assert!(no_server_at(&connect));
    let kept = dirs_of(pid);
    assert_eq!(kept.len(), 1, "{kept:?}");
    let log = std::fs::read_dir(&kept[0])
        .expect("the kept directory")
        .flatten()
        .any(|e| e.file_name().to_string_lossy().ends_with(".log"));
    std::fs::remove_dir_all(&kept[0]).expect("removing the kept directory");
    assert!(log, "no log kept in {}", kept[0].display());
}

/// Ctrl-C at a terminal: SIGINT stops the server and removes its
/// directory, as SIGTERM does.
#[test]
fn serve_stops_on_sigint() {
    let (child, connect, _out) = serve(&[]);
    let (_client, _guard) = holder(&connect, Duration::from_secs(10), "/serve/sigint");
    assert_stops_on_signal(child, &connect, "-INT");
}

#[test]
fn a_killed_serve_leaves_nothing_behind() {
    let (mut child, connect, _out) = serve(&[]);
    let pid = child.id();
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    // The watchdog's wrapper sees its lifeline close, kills the JVM and
    // removes the directory.
    assert!(
        poll_until(WAIT, || no_server_at(&connect) && dirs_of(pid).is_empty()),
        "left behind: server answering {}, directories {:?}",
        !no_server_at(&connect),
        dirs_of(pid)
    );
    // The pipe held open to the end: a write now fails or goes nowhere.
    let _ = child.stdin.take().map(|mut stdin| stdin.write_all(b"\n"));
}

#[test]
fn serve_on_a_taken_port_says_so_and_starts_nothing() {
    // Another server on the port: its answer must not pass for readiness.
    let other = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
    let port = other.local_addr().expect("its address").port().to_string();
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_zklock-test"))
        .args(["serve", "--port", &port])
        .stdin(Stdio::null())
        .output()
        .expect("running zklock-test serve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(out.stdout.is_empty(), "no connect string printed: {out:?}");
    assert!(
        stderr.contains(&format!("cannot serve on 127.0.0.1:{port}")) && stderr.contains("in use"),
        "the reason: {stderr}"
    );
    assert!(started.elapsed() < WAIT, "no JVM was waited for");
    drop(other);
}

/// Kills the exit code and messages of a refused command line, `--help`,
/// and the parser's guards (a second word, a missing value, a zero-member
/// ensemble): each is refused before any server starts.
#[test]
fn serve_refuses_a_command_line_it_does_not_understand() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_zklock-test"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("running zklock-test")
    };
    let help = run(&["serve", "--help"]);
    assert!(help.status.success(), "{help:?}");
    assert!(String::from_utf8_lossy(&help.stdout).starts_with("usage: zklock-test serve"));
    for (args, says) in [
        (&[][..], "which command? (serve)"),
        (&["start"][..], "unknown command \"start\""),
        (&["serve", "again"][..], "unexpected argument \"again\""),
        (&["serve", "--port"][..], "--port needs a value"),
        (
            &["serve", "--port", "high"][..],
            "--port: not a number: \"high\"",
        ),
        (
            &["serve", "--ensemble", "0"][..],
            "--ensemble needs at least one member",
        ),
        (&["serve", "--tick-ms", "-1"][..], "--tick-ms: not a number"),
        (&["serve", "--verbose"][..], "--verbose"),
    ] {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
        assert!(
            stderr.starts_with("zklock-test: ") && stderr.contains(says),
            "{args:?} should say {says:?}: {stderr}"
        );
        assert!(
            stderr.contains("usage: zklock-test serve"),
            "{args:?}: the usage follows"
        );
    }
}

/// [`serve`] with its stderr kept, for the tests that read what it says:
/// a thread reads it as it comes and hands it over whole when it ends.
fn serve_keeping_stderr(args: &[&str]) -> (Child, String, mpsc::Receiver<String>) {
    let (mut child, connect, _stdout) = spawn_serve(args, &[], Stdio::piped());
    let mut stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        let _ = tx.send(text);
    });
    (child, connect, rx)
}

/// The pid of the JVM whose directory (made by process `pid`) has
/// `kind` in its name: `zk` for a standalone server, `ens-mN` for member N.
fn java_pid(pid: u32, kind: &str) -> u32 {
    let dir = dirs_of(pid)
        .into_iter()
        .find(|d| d.to_string_lossy().contains(&format!("zklock-{kind}-")))
        .unwrap_or_else(|| panic!("no {kind} directory of {pid}: {:?}", dirs_of(pid)));
    std::fs::read_to_string(dir.join("java.pid"))
        .expect("the JVM's pid file")
        .trim()
        .parse()
        .expect("a pid")
}

/// Checks that `child` is still running over `window` (serve looks at its
/// servers once a second), then kills the JVM `java`, and returns serve's
/// stderr once it has exited with a failure.
fn dies_with_its_server(
    (mut child, stderr): (Child, mpsc::Receiver<String>),
    java: u32,
    window: Duration,
) -> String {
    let start = Instant::now();
    while start.elapsed() < window {
        assert!(
            child.try_wait().expect("polling serve").is_none(),
            "serve exited while its servers lived"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let killed = Command::new("kill")
        .args(["-KILL", &java.to_string()])
        .status()
        .expect("running kill");
    assert!(killed.success());
    assert!(
        !exits(&mut child),
        "serve exited with success after its server died"
    );
    let stderr = stderr
        .recv_timeout(WAIT)
        .expect("serve's stderr closed within WAIT of its exit");
    assert!(stderr.contains("a server exited on its own"), "{stderr}");
    stderr
}

/// Kills `Running::all_alive` → true or false (standalone), its guard in
/// `main` made true or false, `dead_logs` emptied, and `describe`'s text
/// (the banner names the server's directory).
#[test]
fn serve_runs_while_its_server_lives_and_fails_when_it_dies() {
    let (child, connect, stderr) = serve_keeping_stderr(&[]);
    let pid = child.id();
    let dir = dirs_of(pid).pop().expect("the server's directory");
    let java = java_pid(pid, "zk");
    let stderr = dies_with_its_server((child, stderr), java, Duration::from_millis(2500));
    let banner = format!("ZooKeeper standalone ({}) on {connect};", dir.display());
    assert!(stderr.contains(&banner), "{banner:?} in {stderr}");
    assert!(stderr.contains("server log:\n"), "{stderr}");
}

/// The same for an ensemble: only the member that died has its log shown.
/// Kills `Running::all_alive`'s ensemble arm and `dead_logs`'s filter.
#[test]
fn an_ensemble_member_that_dies_fails_serve_with_its_own_log() {
    let (child, connect, stderr) = serve_keeping_stderr(&["--ensemble", "3"]);
    assert_eq!(connect.split(',').count(), 3, "first line: {connect:?}");
    let java = java_pid(child.id(), "ens-m2");
    let stderr = dies_with_its_server((child, stderr), java, Duration::from_millis(1500));
    assert!(
        stderr.contains(&format!("ZooKeeper ensemble of 3 on {connect};")),
        "{stderr}"
    );
    assert!(stderr.contains("member 1's log:\n"), "{stderr}");
    assert!(
        !stderr.contains("member 0's log") && !stderr.contains("member 2's log"),
        "{stderr}"
    );
}
