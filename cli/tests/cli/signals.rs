//! Signals: passed on to CMD (and its exit status through), cancelling a
//! wait, and SIGKILL of the holder freeing the lock at once.

use std::time::{Duration, Instant};

use testkit::{process_alive, scratch_dir, wait_until};

use crate::support::{
    exec_script, hold, queue_len, read_pid, release, shared, signal, trapping_script,
    until_signalled, zklock, Proc, PROMPT,
};

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
fn sigterm_is_passed_to_the_command_and_its_exit_status_through() {
    let c = shared();
    let script = until_signalled("TERM", 42);
    let mut p = Proc::spawn(zklock(
        &c,
        &["exec", "/cli-term", "--", "sh", "-c", &script],
    ));
    p.expect_line("locked");
    signal(p.pid(), "TERM");
    p.expect_line("got TERM");
    let (status, _, err) = p.finish(PROMPT);
    assert_eq!(status.code(), Some(42), "the command's status: {err}");
    assert_eq!(queue_len(&c, "/cli-term"), 0, "released");
}

/// With `-v`, what zklock passes on is logged by the signal's name.
/// Kills: Caught::name -> "" and -> "xyzzy".
#[test]
fn a_signal_passed_on_is_logged_by_its_name() {
    let c = shared();
    let script = until_signalled("USR1", 0);
    let mut p = Proc::spawn(zklock(
        &c,
        &["-v", "exec", "/cli-sig-name", "--", "sh", "-c", &script],
    ));
    p.expect_line("locked");
    signal(p.pid(), "USR1");
    p.expect_line("got USR1");
    let (status, _, err) = p.finish(PROMPT);
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(err.contains("passing SIGUSR1 to CMD (pid "), "{err}");
}

/// In a terminal's foreground group (here a pseudo-terminal of `script(1)`),
/// CMD joins zklock's process group, so that it can read the terminal and
/// the terminal's signals reach it directly; a signal another process sends
/// to zklock is still passed on.
/// Kills: terminal_foreground_group -> None and == → !=; catch
/// `origin.cause == Cause::Kernel` == → != (a sent signal taken for the
/// terminal's, and not passed on).
#[test]
fn in_a_terminal_the_command_joins_zklocks_group_and_sent_signals_reach_it() {
    let c = shared();
    let cmd = r#"trap 'echo "got USR1"; kill $! 2>/dev/null; exit 0' USR1
echo "group $(cut -d' ' -f5 /proc/$$/stat) parent $PPID"
sleep 60 & wait"#;
    // sh -c 'stty -onlcr; exec zklock ...': zklock leads the session that
    // script(1) starts on the pseudo-terminal, and lines end in "\n" alone.
    let inner = format!(
        "stty -onlcr; exec '{}' -c '{c}' exec /cli-tty -- sh -c '{}'",
        env!("CARGO_BIN_EXE_zklock"),
        cmd.replace('\'', r"'\''")
    );
    let mut under_tty = std::process::Command::new("script");
    under_tty.args(["-qec", &inner, "/dev/null"]);
    let mut p = Proc::spawn(under_tty);
    let line = p.expect_line_starting("group ");
    let (group, parent) = match line.split_whitespace().collect::<Vec<_>>()[..] {
        ["group", g, "parent", z] => (g.to_owned(), z.to_owned()),
        _ => panic!("{line:?}"),
    };
    assert_eq!(group, parent, "CMD is in zklock's process group");
    let zklock_pid: u32 = parent.parse().unwrap();
    signal(zklock_pid, "USR1");
    p.expect_line("got USR1");
    let (status, _, err) = p.finish(PROMPT);
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(queue_len(&c, "/cli-tty"), 0, "released");
}
