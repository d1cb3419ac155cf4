//! The `zklock` command line against a real ZooKeeper: exclusion, waiting
//! options, exit codes, environment, signals, SIGKILL, lock loss, status
//! (with a kazoo holder in the queue) and bad input.
//!
//! Every wait between processes is a bounded poll for a condition (a line on
//! stdout, a queue length, a file); no sleep stands in for synchronisation.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use testkit::peers::{Peer, PeerKind};
use testkit::proxy::{Direction, Proxy};
use testkit::zk::{self, ZkServer};
use testkit::{process_alive, scratch_dir, wait_until};

const BIN: &str = env!("CARGO_BIN_EXE_zklock");
/// Bound for anything that should happen promptly.
const PROMPT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(25);

fn shared() -> String {
    zk::shared().connect_string()
}

fn zklock(connect: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env_remove("ZKLOCK_CONNECT")
        .arg("-c")
        .arg(connect)
        .args(args);
    cmd
}

/// A running zklock with its stdout lines and stderr collected.
struct Proc {
    label: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    seen: Vec<String>,
    stderr: Arc<Mutex<String>>,
    stderr_reader: Option<JoinHandle<()>>,
}

impl Proc {
    fn spawn(mut cmd: Command) -> Proc {
        let label = format!("{cmd:?}");
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {label}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut err_pipe = child.stderr.take().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let stderr_reader = thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Proc {
            label,
            stdin: child.stdin.take(),
            child,
            lines,
            seen: Vec::new(),
            stderr,
            stderr_reader: Some(stderr_reader),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for a stdout line equal to `want`.
    fn expect_line(&mut self, want: &str) {
        let deadline = Instant::now() + PROMPT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line == want => {
                    self.seen.push(line);
                    return;
                }
                Ok(line) => self.seen.push(line),
                Err(_) => panic!(
                    "{}: no line {want:?} within {PROMPT:?}; stdout so far {:?}; stderr {:?}",
                    self.label,
                    self.seen,
                    self.stderr()
                ),
            }
        }
    }

    /// Ends CMD's `read` by sending a line.
    fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits (bounded) for exit; returns the status, all stdout lines and stderr.
    fn finish(mut self, timeout: Duration) -> (ExitStatus, Vec<String>, String) {
        self.stdin = None;
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                panic!(
                    "{}: still running after {timeout:?}; stdout {:?}; stderr {:?}",
                    self.label,
                    self.seen,
                    self.stderr()
                );
            }
            thread::sleep(POLL);
        };
        // The pipes close once every process that shares them is gone.
        let end = Instant::now() + Duration::from_secs(5);
        if let Some(reader) = self.stderr_reader.take() {
            while !reader.is_finished() && Instant::now() < end {
                thread::sleep(POLL);
            }
        }
        while let Ok(line) = self
            .lines
            .recv_timeout(end.saturating_duration_since(Instant::now()))
        {
            self.seen.push(line);
        }
        let err = self.stderr();
        (status, std::mem::take(&mut self.seen), err)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs zklock to completion within `PROMPT`.
fn run(connect: &str, args: &[&str]) -> (i32, Vec<String>, String) {
    let (status, out, err) = Proc::spawn(zklock(connect, args)).finish(PROMPT);
    (status.code().unwrap_or(-1), out, err)
}

/// A process holding `path` until `release`: CMD prints `locked`, then reads a line.
fn hold(connect: &str, extra: &[&str], path: &str) -> Proc {
    let mut args = vec!["exec"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[path, "--", "sh", "-c", "echo locked; read x"]);
    let mut p = Proc::spawn(zklock(connect, &args));
    p.expect_line("locked");
    p
}

/// `zklock exec OPTIONS PATH -- sh -c SCRIPT sh DIR`: a shell script as
/// CMD, with a scratch directory as `$1`.
fn exec_script(connect: &str, options: &[&str], path: &str, script: &str, dir: &str) -> Proc {
    let mut args = vec!["exec"];
    args.extend_from_slice(options);
    args.extend_from_slice(&[path, "--", "sh", "-c", script, "sh", dir]);
    Proc::spawn(zklock(connect, &args))
}

/// A CMD for [`exec_script`] that writes its pid to `$1/cmd`, prints
/// `locked` and waits; on SIGTERM it creates `$1/<marker>` and exits `code`.
fn trapping_script(marker: &str, code: u8) -> String {
    format!(
        r#"trap 'echo {marker} > "$1/{marker}"; kill $! 2>/dev/null; exit {code}' TERM
echo $$ > "$1/cmd"
echo locked
sleep 60 & wait"#
    )
}

fn release(mut p: Proc) {
    p.send_line("go");
    let (status, _, err) = p.finish(PROMPT);
    assert_eq!(status.code(), Some(0), "holder: {err}");
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args(["-s", sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -s {sig} {pid}");
}

fn one_line(err: &str) -> &str {
    let t = err.trim_end();
    assert!(
        !t.is_empty() && !t.contains('\n'),
        "expected one line on stderr, got {err:?}"
    );
    t
}

/// The pid a command wrote to `file`.
fn read_pid(file: &std::path::Path) -> u32 {
    let text =
        std::fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
    text.trim().parse().unwrap()
}

/// The live children of `pid`, as (pid, comm, command line), from /proc.
fn children_of(pid: u32) -> Vec<(u32, String, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...; comm may hold spaces and parentheses.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next().unwrap_or("Z");
        let ppid = fields.next().and_then(|p| p.parse::<u32>().ok());
        if ppid != Some(pid) || state == "Z" {
            continue;
        }
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        found.push((child, comm.trim().to_owned(), cmdline.trim().to_owned()));
    }
    found
}

fn comm_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// Number of contenders `zklock status --json` reports.
fn queue_len(connect: &str, path: &str) -> usize {
    let (code, out, err) = run(connect, &["status", "--json", path]);
    assert_eq!(code, 0, "status: {err}");
    let v = Json::parse(&out.join("\n"));
    v.get("queue").array().len()
}

#[test]
fn concurrent_execs_exclude_each_other_and_tokens_rise() {
    let c = shared();
    let dir = scratch_dir("cli-excl");
    let script = r#"set -C
: > "$1/marker" || { echo OVERLAP >&2; exit 99; }
echo "$ZKLOCK_FENCING_TOKEN" >> "$1/tokens"
sleep 0.1
rm "$1/marker""#;
    let d = dir.to_str().unwrap();
    let procs: Vec<Proc> = (0..5)
        .map(|_| {
            Proc::spawn(zklock(
                &c,
                &[
                    "exec",
                    "-w",
                    "30",
                    "/cli-excl",
                    "--",
                    "sh",
                    "-c",
                    script,
                    "sh",
                    d,
                ],
            ))
        })
        .collect();
    for p in procs {
        let (status, _, err) = p.finish(Duration::from_secs(30));
        assert_eq!(
            status.code(),
            Some(0),
            "an exec failed or overlapped: {err}"
        );
    }
    let tokens: Vec<i64> = std::fs::read_to_string(dir.join("tokens"))
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(tokens.len(), 5);
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens must rise with every holder: {tokens:?}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn nonblock_wait_and_conflict_exit_code() {
    let c = shared();
    let holder = hold(&c, &[], "/cli-nb");

    let (code, _, err) = run(&c, &["exec", "-n", "/cli-nb", "--", "true"]);
    assert_eq!(code, 1, "{err}");
    assert!(one_line(&err).contains("not acquired"), "{err}");

    let (code, _, err) = run(&c, &["exec", "-n", "-E", "42", "/cli-nb", "--", "true"]);
    assert_eq!(code, 42, "{err}");

    let started = Instant::now();
    let (code, _, err) = run(&c, &["exec", "-w", "0.5", "/cli-nb", "--", "true"]);
    let waited = started.elapsed();
    assert_eq!(code, 1, "{err}");
    assert!(one_line(&err).contains("gave up after 0.5s"), "{err}");
    assert!(
        waited >= Duration::from_millis(500),
        "gave up after {waited:?}"
    );

    // A patient waiter gets the lock once the holder is done.
    let mut waiter = Proc::spawn(zklock(
        &c,
        &["exec", "-w", "30", "/cli-nb", "--", "echo", "got it"],
    ));
    wait_until("the waiter to queue", PROMPT, || {
        queue_len(&c, "/cli-nb") == 2
    });
    release(holder);
    waiter.expect_line("got it");
    let (status, _, err) = waiter.finish(PROMPT);
    assert_eq!(status.code(), Some(0), "{err}");
}

#[test]
fn exit_status_environment_and_shared_mode() {
    let c = shared();
    let (code, out, err) = run(
        &c,
        &[
            "exec",
            "/cli-env",
            "--",
            "sh",
            "-c",
            "echo \"$ZKLOCK_FENCING_TOKEN $ZKLOCK_NODE\"; env | grep -c ZKLOCK_INTERNAL; exit 7",
        ],
    );
    assert_eq!(code, 7, "CMD's exit status is zklock's: {err}");
    let (token, node) = out[0].split_once(' ').unwrap();
    assert!(token.parse::<i64>().unwrap() > 0, "{out:?}");
    assert!(
        node.starts_with("/cli-env/_c_") && node.contains("-lock-"),
        "{node}"
    );
    assert_eq!(out[1], "0", "internal variables leak into CMD");

    // -s takes the read side: read nodes, and two readers at once.
    let reader = hold(&c, &["-s"], "/cli-env");
    let (code, out, err) = run(
        &c,
        &[
            "exec",
            "-s",
            "-n",
            "/cli-env",
            "--",
            "sh",
            "-c",
            "echo $ZKLOCK_NODE",
        ],
    );
    assert_eq!(code, 0, "a second reader must not wait: {err}");
    assert!(out[0].contains("__READ__"), "{out:?}");
    let (code, _, _) = run(&c, &["exec", "-n", "/cli-env", "--", "true"]);
    assert_eq!(code, 1, "an exclusive exec must wait for readers");
    release(reader);

    // A CMD killed by a signal: 128 + N, as a shell reports it.
    let (code, _, _) = run(&c, &["exec", "/cli-env", "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(code, 143);
    // A CMD that does not exist: 127, and the lock is released.
    let (code, _, err) = run(&c, &["exec", "/cli-env", "--", "/no/such/program"]);
    assert_eq!(code, 127, "{err}");
    assert!(one_line(&err).contains("cannot run"), "{err}");
    assert_eq!(queue_len(&c, "/cli-env"), 0);
}

#[test]
fn signals_are_passed_to_the_command_and_cancel_waiting() {
    let c = shared();
    let script = r#"trap 'echo "got $1"; kill $! 2>/dev/null; exit 3' HUP INT QUIT TERM USR1 USR2
echo locked
sleep 60 & wait"#;
    for sig in ["HUP", "INT", "QUIT", "TERM", "USR1", "USR2"] {
        let mut p = Proc::spawn(zklock(
            &c,
            &["exec", "/cli-sig", "--", "sh", "-c", script, "sh", sig],
        ));
        p.expect_line("locked");
        signal(p.pid(), sig);
        p.expect_line(&format!("got {sig}"));
        let (status, _, err) = p.finish(PROMPT);
        assert_eq!(status.code(), Some(3), "SIG{sig}: {err}");
        assert_eq!(queue_len(&c, "/cli-sig"), 0, "released after SIG{sig}");
    }

    // A signal while waiting gives up the place in the queue.
    let holder = hold(&c, &[], "/cli-sig");
    let waiter = Proc::spawn(zklock(&c, &["exec", "/cli-sig", "--", "true"]));
    wait_until("the waiter to queue", PROMPT, || {
        queue_len(&c, "/cli-sig") == 2
    });
    signal(waiter.pid(), "TERM");
    let (status, _, err) = waiter.finish(PROMPT);
    assert_eq!(status.code(), Some(128 + 15), "{err}");
    assert_eq!(queue_len(&c, "/cli-sig"), 1, "the waiter's node is gone");
    release(holder);
}

#[test]
fn sigkill_of_the_holder_frees_the_lock_and_stops_its_command() {
    let c = shared();
    let dir = scratch_dir("cli-kill");
    let d = dir.to_str().unwrap();
    let script = trapping_script("stopped", 0);
    let mut holder = exec_script(&c, &[], "/cli-kill", &script, d);
    holder.expect_line("locked");
    let cmd_pid = read_pid(&dir.join("cmd"));
    let mut waiter = Proc::spawn(zklock(
        &c,
        &["exec", "-w", "30", "/cli-kill", "--", "echo", "taken over"],
    ));
    wait_until("the waiter to queue", PROMPT, || {
        queue_len(&c, "/cli-kill") == 2
    });
    let killed = Instant::now();
    holder.child.kill().unwrap(); // SIGKILL
    waiter.expect_line("taken over");
    let took = killed.elapsed();
    // The lock node was deleted, not left to the session's expiry (10 s).
    assert!(took < Duration::from_secs(1), "takeover took {took:?}");
    // The old command ended before the successor got the lock.
    assert!(
        !process_alive(cmd_pid),
        "the killed holder's command still runs"
    );
    assert!(dir.join("stopped").exists(), "the command got no SIGTERM");
    let (status, _, err) = waiter.finish(PROMPT);
    assert_eq!(status.code(), Some(0), "{err}");
    drop(holder);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn one_process_holds_the_lock_and_runs_the_command_without_a_shell() {
    let c = shared();
    let path = "/cli-tree";
    let holder = Proc::spawn(zklock(&c, &["exec", path, "--", "sleep", "30"]));
    let pid = holder.pid();
    wait_until("the command to start under zklock", PROMPT, || {
        children_of(pid).iter().any(|(_, comm, _)| comm == "sleep")
    });
    assert_eq!(comm_of(pid), "zklock", "the pid the user started is zklock");
    let children = children_of(pid);
    let shells = ["sh", "bash", "dash", "zsh", "busybox"];
    assert!(
        children
            .iter()
            .all(|(_, comm, _)| !shells.contains(&comm.as_str())),
        "a shell under zklock: {children:?}"
    );
    // The command and the release helper (zklock itself), nothing else.
    let mut comms: Vec<&str> = children.iter().map(|(_, comm, _)| comm.as_str()).collect();
    comms.sort_unstable();
    assert_eq!(comms, ["sleep", "zklock"], "{children:?}");
    let helper = children
        .iter()
        .find(|(_, comm, _)| comm == "zklock")
        .unwrap();
    assert!(helper.2.contains("--release-helper"), "{children:?}");
    assert!(
        children_of(helper.0).is_empty(),
        "the helper runs nothing: {:?}",
        children_of(helper.0)
    );
    // zklock holds the session itself: it is the lock node's data.
    let (_, out, _) = run(&c, &["status", "--json", path]);
    let v = Json::parse(&out[0]);
    let data = v.get("queue").array()[0].get("data").str().to_owned();
    assert!(data.ends_with(&format!(":{pid}")), "{data}");

    // SIGTERM to zklock reaches the command; sleep dies of it: 128 + 15.
    signal(pid, "TERM");
    let (status, _, err) = holder.finish(PROMPT);
    assert_eq!(status.code(), Some(143), "{err}");
    assert_eq!(queue_len(&c, path), 0, "released");
}

#[test]
fn sigterm_is_passed_to_the_command_and_its_exit_status_through() {
    let c = shared();
    let script = r#"trap 'echo "got TERM"; kill $! 2>/dev/null; exit 42' TERM
echo locked
sleep 60 & wait"#;
    let mut p = Proc::spawn(zklock(&c, &["exec", "/cli-term", "--", "sh", "-c", script]));
    p.expect_line("locked");
    signal(p.pid(), "TERM");
    p.expect_line("got TERM");
    let (status, _, err) = p.finish(PROMPT);
    assert_eq!(status.code(), Some(42), "the command's status: {err}");
    assert_eq!(queue_len(&c, "/cli-term"), 0, "released");
}

#[test]
fn sigstop_past_the_session_timeout_ends_in_75_with_the_command_terminated() {
    // Short ticks so that a 1 s session is allowed and expires quickly.
    let server = ZkServer::start_with(250);
    let connect = server.connect_string();
    let dir = scratch_dir("cli-stop");
    let d = dir.to_str().unwrap();
    let script = trapping_script("terminated", 143);
    let mut holder = exec_script(
        &connect,
        &["--session-timeout", "1"],
        "/cli-stop",
        &script,
        d,
    );
    holder.expect_line("locked");
    let cmd_pid = read_pid(&dir.join("cmd"));
    // Stop the very pid the user started, until the server has expired its
    // session (the lock node is gone) ...
    signal(holder.pid(), "STOP");
    wait_until("the stopped holder's session to expire", PROMPT, || {
        queue_len(&connect, "/cli-stop") == 0
    });
    assert!(
        process_alive(cmd_pid),
        "the command runs on while zklock is stopped"
    );
    // ... and on resume it learns the lock is lost, stops CMD and exits 75.
    signal(holder.pid(), "CONT");
    let (status, _, err) = holder.finish(PROMPT);
    assert_eq!(status.code(), Some(75), "{err}");
    assert!(err.contains("lost the lock /cli-stop"), "{err}");
    assert!(
        dir.join("terminated").exists(),
        "the command got no SIGTERM"
    );
    wait_until("the command to end", PROMPT, || !process_alive(cmd_pid));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn lost_lock_stops_the_command_and_exits_75() {
    // A private server with short ticks, so that sessions expire fast.
    let server = ZkServer::start_with(250);
    let proxy = Proxy::start(server.addr());
    let dir = scratch_dir("cli-lost");
    let d = dir.to_str().unwrap();
    // CMD leaves a child behind that ignores SIGTERM: SIGKILL after -k.
    let script = r#"trap 'echo terminated > "$1/terminated"; kill $! 2>/dev/null; exit 143' TERM
(trap '' TERM; exec sleep 60) &
echo $! > "$1/stubborn"
echo locked
sleep 60 & wait"#;
    let mut holder = exec_script(
        &proxy.connect_string(),
        &["--session-timeout", "1", "-k", "0.5"],
        "/cli-lost",
        script,
        d,
    );
    holder.expect_line("locked");
    let stubborn: u32 = std::fs::read_to_string(dir.join("stubborn"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    proxy.blackhole(Direction::Both);
    let cut = Instant::now();
    let (status, _, err) = holder.finish(PROMPT);
    assert_eq!(status.code(), Some(75), "{err}");
    assert!(one_line(&err).contains("lost the lock /cli-lost"), "{err}");
    assert!(dir.join("terminated").exists(), "CMD got no SIGTERM");
    assert!(
        cut.elapsed() < Duration::from_secs(10),
        "{:?}",
        cut.elapsed()
    );
    wait_until("CMD's leftover child to be killed", PROMPT, || {
        !process_alive(stubborn)
    });
    // The server expired the session: the lock is free for others.
    let (code, _, err) = run(
        &server.connect_string(),
        &["exec", "-w", "10", "/cli-lost", "--", "true"],
    );
    assert_eq!(code, 0, "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn status_shows_a_kazoo_holder_and_a_zklock_waiter() {
    let c = shared();
    let path = "/cli-status";
    let (code, out, _) = run(&c, &["status", path]);
    assert_eq!(code, 0);
    assert_eq!(out, ["/cli-status: free (no holder, nobody waiting)"]);

    let mut kazoo = Peer::start(PeerKind::Kazoo, &c, path, "mutex", "kazoo-holder");
    kazoo.acquire();
    kazoo
        .wait_acquired(PROMPT)
        .expect("kazoo acquires a free lock");
    let tricky = "waiter \"one\"\\\ttab\u{1}é";
    let waiter = Proc::spawn(zklock(
        &c,
        &["exec", "-w", "60", "--data", tricky, path, "--", "true"],
    ));
    wait_until("the zklock waiter to queue behind kazoo", PROMPT, || {
        queue_len(&c, path) == 2
    });

    let (code, out, err) = run(&c, &["status", "--json", path]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.len(), 1, "one JSON line: {out:?}");
    let v = Json::parse(&out[0]);
    assert_eq!(v.get("path").str(), path);
    assert_eq!(v.get("holders").num(), 1.0);
    assert_eq!(v.get("waiting").num(), 1.0);
    let q = v.get("queue").array();
    assert_eq!(q[0].get("role").str(), "holder");
    assert_eq!(q[0].get("origin").str(), "kazoo");
    assert_eq!(q[0].get("kind").str(), "exclusive");
    assert_eq!(q[0].get("data").str(), "kazoo-holder");
    assert!(q[0].get("node").str().contains("__lock__"));
    assert_eq!(q[1].get("role").str(), "waiting");
    assert_eq!(q[1].get("origin").str(), "protected");
    assert_eq!(q[1].get("data").str(), tricky, "escaping round trip");
    assert!(q[0].get("sequence").num() < q[1].get("sequence").num());
    assert!(q[0].get("czxid").num() < q[1].get("czxid").num());
    assert!(q[1].get("owner_session").str().starts_with("0x"));
    assert!(q[1].get("node_path").str().starts_with("/cli-status/_c_"));

    let (code, out, _) = run(&c, &["status", path]);
    assert_eq!(code, 0);
    assert_eq!(out[0], "/cli-status: 1 holding, 1 waiting");
    let holder_row = &out[2];
    let waiter_row = &out[3];
    for word in ["holder", "exclusive", "kazoo", "\"kazoo-holder\""] {
        assert!(holder_row.contains(word), "{word} in {holder_row:?}");
    }
    for word in ["waiting", "exclusive", "protected"] {
        assert!(waiter_row.contains(word), "{word} in {waiter_row:?}");
    }

    kazoo.release();
    let (status, _, err) = waiter.finish(PROMPT);
    assert_eq!(status.code(), Some(0), "{err}");
    kazoo.quit();
}

#[test]
fn leader_runs_the_command_while_elected() {
    let c = shared();
    let mut first = Proc::spawn(zklock(
        &c,
        &[
            "leader",
            "--id",
            "first",
            "/cli-elect",
            "--",
            "sh",
            "-c",
            "echo leading; read x",
        ],
    ));
    first.expect_line("leading");
    let (code, _, err) = run(
        &c,
        &["leader", "-n", "--id", "second", "/cli-elect", "--", "true"],
    );
    assert_eq!(code, 1, "{err}");
    assert!(one_line(&err).contains("not elected"), "{err}");
    let (_, out, _) = run(&c, &["status", "--json", "/cli-elect"]);
    let v = Json::parse(&out[0]);
    assert_eq!(v.get("queue").array()[0].get("data").str(), "first");
    first.send_line("bye");
    let (status, _, err) = first.finish(PROMPT);
    assert_eq!(status.code(), Some(0), "{err}");
    let (code, out, _) = run(
        &c,
        &[
            "leader",
            "-n",
            "--id",
            "third",
            "/cli-elect",
            "--",
            "echo",
            "elected",
        ],
    );
    assert_eq!((code, out), (0, vec!["elected".to_owned()]));
}

#[test]
fn bad_input_has_documented_codes_and_one_line_reasons() {
    let c = shared();
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["exec", "locks/x", "--", "true"],
            64,
            "must start with '/'",
        ),
        (&["exec", "/x/", "--", "true"], 64, "bad path"),
        (&["status", "relative"], 64, "must start with '/'"),
        (&["exec", "/x", "true"], 64, "'--'"),
        (&["exec", "/x"], 64, "'--'"),
        (&["exec", "/x", "--"], 64, "missing the command"),
        (&["exec", "-w", "soon", "/x", "--", "true"], 64, "--wait"),
        (&["exec", "-E", "256", "/x", "--", "true"], 64, "0..255"),
        (&["exec", "--bogus", "/x", "--", "true"], 64, "--bogus"),
        (&["leader", "/e", "--", "true"], 64, "--id"),
        (&["launch", "/x"], 64, "unknown subcommand"),
        (&["exec", "--acl", "world", "/x", "--", "true"], 64, "--acl"),
        (
            &["exec", "--acl", "sasl:bob:rx", "/x", "--", "true"],
            64,
            "cdrwa",
        ),
        (&[], 64, "missing subcommand"),
    ];
    for (args, want, says) in cases {
        let (code, out, err) = run(&c, args);
        assert_eq!(code, *want, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?} printed {out:?}");
        let line = one_line(&err);
        assert!(
            line.starts_with("zklock: ") && line.contains(says),
            "{args:?}: {line:?} should mention {says:?}"
        );
    }

    // Nothing listens on a port we just had and closed.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dead = format!("127.0.0.1:{port}");
    for args in [
        &["--session-timeout", "1", "exec", "/x", "--", "true"][..],
        &["--session-timeout", "1", "status", "/x"],
    ] {
        let started = Instant::now();
        let (code, _, err) = run(&dead, args);
        assert_eq!(code, 69, "{args:?}: {err}");
        let line = one_line(&err);
        assert!(line.contains("no ZooKeeper server reachable"), "{err}");
        assert_eq!(line.matches(&dead).count(), 1, "the address once: {line}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    for sub in ["exec", "status", "leader"] {
        let (code, out, _) = run(&c, &[sub, "--help"]);
        assert_eq!(code, 0);
        let text = out.join("\n");
        assert!(text.contains(&format!("zklock {sub}")), "{text}");
        assert!(text.contains("Example"), "{sub} --help has an example");
    }
}

// ---------------------------------------------------------------- JSON

/// `status --json` output, read strictly: every accessor panics on a missing
/// key or a value of another type.
#[derive(Clone)]
struct Json(serde_json::Value);

impl Json {
    fn parse(text: &str) -> Json {
        Json(serde_json::from_str(text).unwrap_or_else(|e| panic!("{e} in {text:?}")))
    }

    fn get(&self, key: &str) -> Json {
        let value = self.0.get(key);
        Json(
            value
                .unwrap_or_else(|| panic!("no {key:?} in {}", self.0))
                .clone(),
        )
    }

    fn str(&self) -> &str {
        self.0
            .as_str()
            .unwrap_or_else(|| panic!("not a string: {}", self.0))
    }

    fn num(&self) -> f64 {
        self.0
            .as_f64()
            .unwrap_or_else(|| panic!("not a number: {}", self.0))
    }

    fn array(&self) -> Vec<Json> {
        let items = self.0.as_array();
        items
            .unwrap_or_else(|| panic!("not an array: {}", self.0))
            .iter()
            .cloned()
            .map(Json)
            .collect()
    }
}

/// `exec` and `status` against a server with a secure client port, with a
/// client certificate (mutual TLS); without the CA the command says why.
#[cfg(feature = "tls")]
#[test]
fn exec_and_status_over_tls() {
    let certs = testkit::certs::shared();
    let server = ZkServer::start_with_options(&certs.server_options(true));
    let c = server.secure_addr().to_string();
    let ca = certs.ca_pem.to_string_lossy().into_owned();
    let cert = certs.client_pem.to_string_lossy().into_owned();
    let key = certs.client_key.to_string_lossy().into_owned();
    let tls = ["--tls-ca", &ca, "--tls-cert", &cert, "--tls-key", &key];
    let mut holder_args: Vec<&str> = tls.to_vec();
    holder_args.extend(["exec", "/cli-tls", "--", "sh", "-c", "echo locked; read x"]);
    let mut holder = Proc::spawn(zklock(&c, &holder_args));
    holder.expect_line("locked");
    let mut status_args: Vec<&str> = tls.to_vec();
    status_args.extend(["status", "--json", "/cli-tls"]);
    let (code, out, err) = run(&c, &status_args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(Json::parse(&out[0]).get("queue").array().len(), 1);
    holder.send_line("bye");
    let (status, _, err) = holder.finish(PROMPT);
    assert_eq!(status.code(), Some(0), "{err}");
    // The other CA: refused with a reason, not a hang.
    let other = certs.other_ca_pem.to_string_lossy().into_owned();
    let (code, _, err) = run(
        &c,
        &[
            "--tls-ca",
            &other,
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "status",
            "/cli-tls",
        ],
    );
    assert_eq!(code, 69, "{err}");
    assert!(
        err.to_lowercase().contains("ca") || err.contains("certificate"),
        "{err}"
    );
    let line = one_line(&err);
    assert_eq!(line.matches(&c).count(), 1, "the address once: {line}");
}

/// SASL DIGEST-MD5 with the password from the environment (never argv);
/// a wrong one is refused with exit 77; no password at all is a usage error.
#[test]
fn status_with_a_sasl_login() {
    let server = ZkServer::start_with_options(
        &testkit::zk::ZkOptions::new().sasl_digest(&[("alice", "alice-secret")]),
    );
    let c = server.connect_string();
    let status = |password: Option<&str>| {
        let mut cmd = zklock(&c, &["--sasl-user", "alice", "status", "/cli-sasl"]);
        cmd.env_remove("ZKLOCK_SASL_PASSWORD");
        if let Some(p) = password {
            cmd.env("ZKLOCK_SASL_PASSWORD", p);
        }
        let (status, _, err) = Proc::spawn(cmd).finish(PROMPT);
        (status.code().unwrap_or(-1), err)
    };
    let (code, err) = status(Some("alice-secret"));
    assert_eq!(code, 0, "{err}");
    let (code, err) = status(Some("wrong"));
    assert_eq!(code, 77, "{err}");
    let (code, err) = status(None);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("ZKLOCK_SASL_PASSWORD"), "{err}");
}

/// The release helper's pid, among `zklock_pid`'s children.
fn release_helper_of(zklock_pid: u32) -> u32 {
    let mut found = None;
    wait_until("the release helper to start", PROMPT, || {
        found = children_of(zklock_pid)
            .into_iter()
            .find(|(_, _, cmdline)| cmdline.contains("--release-helper"))
            .map(|(pid, _, _)| pid);
        found.is_some()
    });
    found.expect("found above")
}

/// The environment of a process of ours, one `KEY=value` a line.
fn environ_of(pid: u32) -> Vec<String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_else(|e| panic!("reading the environment of {pid}: {e}"));
    raw.split(|b| *b == 0)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect()
}

/// zklock reads its secrets from the environment, and removes them from
/// what it hands on: CMD and the release helper see neither the names nor
/// the values, while the rest of the environment goes through.
#[test]
fn secret_variables_reach_neither_the_command_nor_the_helper() {
    let c = shared();
    let mut cmd = zklock(
        &c,
        &[
            "exec",
            "/cli-secrets",
            "--",
            "sh",
            "-c",
            "env; echo locked; read x",
        ],
    );
    cmd.env("ZKLOCK_DIGEST", "carol:digest-s3cret")
        .env("ZKLOCK_SASL_PASSWORD", "sasl-s3cret")
        .env("ZKLOCK_TEST_CANARY", "passed-on");
    let mut p = Proc::spawn(cmd);
    p.expect_line("locked");
    let leaks = |what: &str, vars: &[String]| {
        assert!(
            vars.iter().any(|v| v == "ZKLOCK_TEST_CANARY=passed-on"),
            "{what}: the environment read is not the one handed on: {vars:?}"
        );
        for v in vars {
            assert!(
                !v.starts_with("ZKLOCK_DIGEST")
                    && !v.starts_with("ZKLOCK_SASL_PASSWORD")
                    && !v.contains("s3cret"),
                "{what} sees a secret: {v}"
            );
        }
    };
    leaks("CMD", &p.seen);
    assert!(
        p.seen
            .iter()
            .any(|v| v.starts_with("ZKLOCK_NODE=/cli-secrets/")),
        "CMD's own variables: {:?}",
        p.seen
    );
    let helper = release_helper_of(p.pid());
    leaks("the release helper", &environ_of(helper));
    let cmdline = std::fs::read(format!("/proc/{helper}/cmdline")).unwrap();
    assert!(
        !String::from_utf8_lossy(&cmdline).contains("s3cret"),
        "the helper's command line holds a secret"
    );
    p.send_line("done");
    let (status, _, err) = p.finish(PROMPT);
    assert_eq!(status.code(), Some(0), "{err}");
}

/// SIGKILL a holder started with `security` (and `env`) while a waiter
/// with the same queues; the waiter must take over within a second: the
/// helper deleted the node, it did not wait for the session to expire.
fn sigkill_takeover(c: &str, security: &[&str], env: &[(&str, &str)], path: &str) -> Duration {
    let dir = scratch_dir("cli-kill-secure");
    let d = dir.to_str().unwrap();
    let script = trapping_script("stopped", 0);
    let with = |args: &[&str]| {
        let mut all: Vec<&str> = security.to_vec();
        all.extend_from_slice(args);
        let mut cmd = zklock(c, &all);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd
    };
    let mut holder = Proc::spawn(with(&["exec", path, "--", "sh", "-c", &script, "sh", d]));
    holder.expect_line("locked");
    let mut waiter = Proc::spawn(with(&[
        "exec",
        "-w",
        "30",
        path,
        "--",
        "echo",
        "taken over",
    ]));
    let mut queued = false;
    wait_until("the waiter to queue", PROMPT, || {
        let (code, out, _) = Proc::spawn(with(&["status", "--json", path])).finish(PROMPT);
        queued =
            code.code() == Some(0) && Json::parse(&out.join("\n")).get("queue").array().len() == 2;
        queued
    });
    let killed = Instant::now();
    holder.child.kill().unwrap(); // SIGKILL
    waiter.expect_line("taken over");
    let took = killed.elapsed();
    assert!(dir.join("stopped").exists(), "the command got no SIGTERM");
    let (status, _, err) = waiter.finish(PROMPT);
    assert_eq!(status.code(), Some(0), "{err}");
    drop(holder);
    let _ = std::fs::remove_dir_all(dir);
    took
}

/// Under mutual TLS the helper connects with the holder's CA, certificate
/// and key, so a SIGKILLed holder's lock is freed at once (not after the
/// session timeout, which is what a helper without them would wait).
#[cfg(feature = "tls")]
#[test]
fn sigkill_of_a_tls_holder_frees_the_lock_at_once() {
    let certs = testkit::certs::shared();
    let server = ZkServer::start_with_options(&certs.server_options(true));
    let c = server.secure_addr().to_string();
    let ca = certs.ca_pem.to_string_lossy().into_owned();
    let cert = certs.client_pem.to_string_lossy().into_owned();
    let key = certs.client_key.to_string_lossy().into_owned();
    let tls = ["--tls-ca", &ca, "--tls-cert", &cert, "--tls-key", &key];
    let took = sigkill_takeover(&c, &tls, &[], "/cli-kill-tls");
    assert!(took < Duration::from_secs(1), "takeover took {took:?}");
}

/// On an ensemble that refuses sessions without SASL, the helper logs in
/// with the holder's user and password (handed over its pipe), so a
/// SIGKILLed holder's lock is freed at once.
#[test]
fn sigkill_of_a_sasl_holder_frees_the_lock_at_once() {
    let server = ZkServer::start_with_options(
        &testkit::zk::ZkOptions::new()
            .sasl_digest(&[("alice", "alice-secret")])
            .config("enforce.auth.enabled", "true")
            .config("enforce.auth.schemes", "sasl"),
    );
    let c = server.connect_string();
    // The control: without the login, the server refuses us.
    let (code, _, err) = run(&c, &["status", "/cli-kill-sasl"]);
    assert_ne!(code, 0, "the server must require SASL for this test: {err}");
    let took = sigkill_takeover(
        &c,
        &["--sasl-user", "alice"],
        &[("ZKLOCK_SASL_PASSWORD", "alice-secret")],
        "/cli-kill-sasl",
    );
    assert!(took < Duration::from_secs(1), "takeover took {took:?}");
}

#[test]
fn revoke_asks_a_revocable_holder_to_let_go() {
    let c = shared();
    let script = r#"trap 'echo "got TERM"; kill $! 2>/dev/null; exit 0' TERM
echo locked
sleep 60 & wait"#;
    // Nobody holds it yet.
    let (code, out, _) = run(&c, &["revoke", "/cli-revoke"]);
    assert_eq!(
        (code, out.join("\n")),
        (1, "nobody holds /cli-revoke".to_string())
    );
    let mut p = Proc::spawn(zklock(
        &c,
        &[
            "exec",
            "--revocable",
            "/cli-revoke",
            "--",
            "sh",
            "-c",
            script,
        ],
    ));
    p.expect_line("locked");
    let (code, out, err) = run(&c, &["revoke", "/cli-revoke"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out[0].starts_with("asked the holder of /cli-revoke to let go: /cli-revoke/_c_"),
        "{out:?}"
    );
    // CMD gets SIGTERM, exits, and the lock is released.
    p.expect_line("got TERM");
    let (status, _, err) = p.finish(PROMPT);
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(queue_len(&c, "/cli-revoke"), 0, "released");
    // A holder that did not opt in is asked, and carries on.
    let holder = hold(&c, &[], "/cli-revoke");
    let (code, _, _) = run(&c, &["revoke", "/cli-revoke"]);
    assert_eq!(code, 0);
    assert_eq!(queue_len(&c, "/cli-revoke"), 1, "not revocable: still held");
    release(holder);
}

/// Every input file that is missing or unreadable exits 66 (EX_NOINPUT) and
/// is named, once, before any server is tried.
#[test]
fn missing_input_files_exit_66_and_are_named() {
    let missing = scratch_dir("cli-noinput").join("absent.pem");
    let m = missing.to_string_lossy().into_owned();
    let present = scratch_dir("cli-noinput").join("present.pem");
    std::fs::write(&present, "not a certificate").unwrap();
    let p = present.to_string_lossy().into_owned();
    let cases: Vec<Vec<&str>> = vec![
        vec!["--tls-ca", &m],
        vec!["--tls-ca", &p, "--tls-cert", &m, "--tls-key", &p],
        vec!["--tls-ca", &p, "--tls-cert", &p, "--tls-key", &m],
        vec!["--sasl-user", "alice", "--sasl-password-file", &m],
        vec!["--digest-file", &m],
    ];
    for security in cases {
        let mut args = security.clone();
        args.extend(["status", "/x"]);
        let (code, _, err) = run("127.0.0.1:1", &args);
        assert_eq!(code, 66, "{security:?}: {err}");
        let line = one_line(&err);
        assert_eq!(line.matches(m.as_str()).count(), 1, "{security:?}: {line}");
        assert!(!line.contains("127.0.0.1:1"), "{security:?}: {line}");
    }
}

/// With a SASL login, `exec` makes its node and the lock path creator-only:
/// another user (and an anonymous client) can neither change nor delete
/// the holder's node. `--acl open` makes them open again.
#[test]
fn exec_under_sasl_makes_creator_only_nodes_and_acl_opens_them() {
    use zklock::{Client, ErrorCode, SaslConfig};
    let server = ZkServer::start_with_options(
        &testkit::zk::ZkOptions::new()
            .sasl_digest(&[("alice", "alice-secret"), ("bob", "bob-secret")]),
    );
    let c = server.connect_string();
    let as_alice = |args: &[&str]| {
        let mut all = vec!["--sasl-user", "alice"];
        all.extend_from_slice(args);
        let mut cmd = zklock(&c, &all);
        cmd.env("ZKLOCK_SASL_PASSWORD", "alice-secret");
        cmd
    };
    let bob = Client::builder(&c)
        .sasl(SaslConfig::digest_md5("bob", "bob-secret"))
        .connect()
        .unwrap();
    let anonymous = Client::connect(&c, PROMPT).unwrap();
    for (path, acl, refused) in [
        ("/cli-acl/default", None, true),
        ("/cli-acl/open", Some("open"), false),
    ] {
        let mut args = vec!["exec"];
        if let Some(acl) = acl {
            args.extend(["--acl", acl]);
        }
        let script = "echo \"$ZKLOCK_NODE\"; echo locked; read x";
        args.extend([path, "--", "sh", "-c", script]);
        let mut holder = Proc::spawn(as_alice(&args));
        holder.expect_line("locked");
        let node = holder.seen[0].clone();
        assert!(node.starts_with(path), "{node}");
        for (who, client) in [("bob", &bob), ("anonymous", &anonymous)] {
            let write = client.set_data(&node, b"mine", None).map(drop);
            if refused {
                let delete = client.delete(&node, None);
                for (op, r) in [("setData", write), ("delete", delete)] {
                    assert_eq!(
                        r.as_ref().err().and_then(|e| e.code()),
                        Some(ErrorCode::NoAuth),
                        "{who} {op} on {node}: {r:?}"
                    );
                }
            } else {
                assert!(write.is_ok(), "{who}: {write:?}");
            }
        }
        holder.send_line("bye");
        let (status, _, err) = holder.finish(PROMPT);
        assert_eq!(status.code(), Some(0), "{err}");
    }
}
