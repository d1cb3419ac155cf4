//! A lost lock (the session expired while zklock was stopped, or cut off by
//! the proxy): CMD is terminated and zklock exits 75.

use std::time::{Duration, Instant};

use testkit::proxy::{Direction, Proxy};
use testkit::zk::ZkServer;
use testkit::{process_alive, scratch_dir, wait_until};

use crate::support::{
    exec_script, one_line, queue_len, read_pid, run, signal, trapping_script, PROMPT,
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
