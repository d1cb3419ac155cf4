//! A lost lock (the session expired while zklock was stopped, cut off by
//! the proxy, its node deleted, or its `--max-hold` reached): CMD is
//! terminated and zklock exits 75.

use std::time::{Duration, Instant};

use testkit::proxy::{Direction, Proxy};
use testkit::zk::ZkServer;
use testkit::{process_alive, scratch_dir, wait_until};

use crate::support::{
    exec_script, one_line, queue_len, read_pid, run, shared, signal, trapping_script, zklock, Proc,
    PROMPT,
};

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

/// `--max-hold 1.5`: the lock is let go 1.5 s after its grant while CMD
/// still runs, CMD gets SIGTERM, zklock says why and exits 75, and a waiter
/// is granted. Not early: the waiter's command runs no sooner than 1.5 s
/// after the holder's zklock started (an instant before its grant). Not
/// late: within `BOUND` of 1.5 s after the holder's command said `locked`
/// (an instant after its grant): the I/O thread's timer, the delete's round
/// trip, the waiter's notification and grant, and its `sh` starting are
/// each well under 100 ms on loopback; the rest is room for a loaded
/// machine.
#[test]
fn max_hold_lets_the_lock_go_stops_the_command_and_exits_75() {
    const BOUND: Duration = Duration::from_secs(2);
    let max = Duration::from_millis(1500);
    let connect = shared();
    let path = format!("/cli-max-hold-{}", std::process::id());
    let dir = scratch_dir("cli-max-hold");
    let d = dir.to_str().unwrap();
    let script = trapping_script("terminated", 143);
    let started = Instant::now();
    let mut holder = exec_script(&connect, &["--max-hold", "1.5"], &path, &script, d);
    holder.expect_line("locked");
    let locked = Instant::now();
    let mut waiter = Proc::spawn(zklock(
        &connect,
        &["exec", "-w", "20", &path, "--", "sh", "-c", "echo got"],
    ));
    waiter.expect_line("got");
    let got = Instant::now();
    assert!(
        got >= started + max,
        "the waiter ran {:?} after the holder started, before its max hold {max:?}",
        got - started
    );
    assert!(
        got <= locked + max + BOUND,
        "the waiter ran {:?} past the max hold, over {BOUND:?}",
        got - (locked + max)
    );
    let (status, _, err) = holder.finish(PROMPT);
    assert_eq!(status.code(), Some(75), "{err}");
    let err = one_line(&err);
    assert!(
        err.contains(&format!("lost the lock {path}")) && err.contains("--max-hold of 1.5s"),
        "{err}"
    );
    assert!(dir.join("terminated").exists(), "CMD got no SIGTERM");
    let (status, _, err) = waiter.finish(PROMPT);
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(queue_len(&connect, &path), 0);
    let _ = std::fs::remove_dir_all(dir);
}

/// `leader --max-hold`: at the max hold the leadership goes, the command is
/// stopped, zklock exits 75, and the candidate behind is elected, not
/// before the max hold and not long after it.
#[test]
fn leader_max_hold_lets_the_leadership_go_stops_the_command_and_exits_75() {
    const BOUND: Duration = Duration::from_secs(2);
    let max = Duration::from_millis(1500);
    let connect = shared();
    let path = format!("/cli-leader-max-hold-{}", std::process::id());
    let dir = scratch_dir("cli-leader-max-hold");
    let d = dir.to_str().unwrap();
    let script = trapping_script("terminated", 143);
    let started = Instant::now();
    let mut leader = Proc::spawn(zklock(
        &connect,
        &[
            "leader",
            "--max-hold",
            "1.5",
            "--id",
            "first",
            &path,
            "--",
            "sh",
            "-c",
            &script,
            "sh",
            d,
        ],
    ));
    leader.expect_line("locked");
    let elected = Instant::now();
    let mut next = Proc::spawn(zklock(
        &connect,
        &[
            "leader", "--id", "next", &path, "--", "sh", "-c", "echo got",
        ],
    ));
    next.expect_line("got");
    let got = Instant::now();
    assert!(
        got >= started + max,
        "the next candidate led {:?} after the first started, before its max hold {max:?}",
        got - started
    );
    assert!(
        got <= elected + max + BOUND,
        "the next candidate led {:?} past the max hold, over {BOUND:?}",
        got - (elected + max)
    );
    let (status, _, err) = leader.finish(PROMPT);
    assert_eq!(status.code(), Some(75), "{err}");
    let err = one_line(&err);
    assert!(
        err.contains(&format!("lost leadership at {path}")) && err.contains("--max-hold of 1.5s"),
        "{err}"
    );
    assert!(dir.join("terminated").exists(), "CMD got no SIGTERM");
    let (status, _, err) = next.finish(PROMPT);
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(queue_len(&connect, &path), 0);
    let _ = std::fs::remove_dir_all(dir);
}

/// A third party deletes the holder's node: zklock stops the command and
/// exits 75, naming the deletion.
#[test]
fn a_deleted_node_stops_the_command_and_exits_75() {
    let connect = shared();
    let path = format!("/cli-node-deleted-{}", std::process::id());
    let dir = scratch_dir("cli-node-deleted");
    let d = dir.to_str().unwrap();
    let script = trapping_script("terminated", 143);
    let mut holder = exec_script(&connect, &[], &path, &script, d);
    holder.expect_line("locked");
    let admin = zklock::Client::connect(&connect, Duration::from_secs(10)).unwrap();
    let nodes = testkit::children(&admin, &path);
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    admin.delete(&format!("{path}/{}", nodes[0]), None).unwrap();
    let (status, _, err) = holder.finish(PROMPT);
    assert_eq!(status.code(), Some(75), "{err}");
    let err = one_line(&err);
    assert!(
        err.contains(&format!("lost the lock {path}")) && err.contains("its node was deleted"),
        "{err}"
    );
    assert!(dir.join("terminated").exists(), "CMD got no SIGTERM");
    assert_eq!(queue_len(&connect, &path), 0);
    let _ = std::fs::remove_dir_all(dir);
}
