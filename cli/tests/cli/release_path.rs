//! The release path when zklock dies or is stopped while CMD runs: a second
//! `zklock exec` on the same lock never starts its command before the first
//! command has ended, whatever `--kill-after`, and it does start.
//!
//! The proof needs no clock: the first command (a shell) takes an exclusive
//! `flock` on `$1/alive` and keeps it on a descriptor its own children do
//! not inherit, so the kernel drops it exactly when that process ends. The
//! second command tries the same `flock` without waiting the moment it
//! starts and writes `after` (free) or `OVERLAP` (the first still runs).

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use testkit::{process_alive, scratch_dir, wait_until};

use crate::support::{queue_len, read_pid, shared, zklock, Proc, PROMPT};

/// The first command: `$2` says what it does on SIGTERM. `prompt` exits at
/// once; `slow` exits after a second (ignoring further SIGTERMs meanwhile);
/// `stubborn` notes it and runs on, so only SIGKILL ends it. Each SIGTERM
/// is a line in `$1/terms`; an exit of its own accord creates `$1/exited`.
const FIRST: &str = r#"exec 9>"$1/alive"
flock -n 9 || exit 99
case "$2" in
prompt) trap 'echo term >> "$1/terms"; kill $! 2>/dev/null; : > "$1/exited"; exit 0' TERM ;;
slow) trap 'trap "" TERM; echo term >> "$1/terms"; kill $! 2>/dev/null; sleep 1 9>&-; : > "$1/exited"; exit 0' TERM ;;
stubborn) trap 'echo term >> "$1/terms"' TERM ;;
esac
echo $$ > "$1/cmd.tmp"; mv "$1/cmd.tmp" "$1/cmd"
echo locked
while :; do sleep 60 9>&- & wait $!; done"#;

/// The second command: was the first one's `flock` free when it started?
const SECOND: &str = r#"flock -n -E 3 "$1/alive" true; r=$?
case $r in 0) r=after ;; 3) r=OVERLAP ;; *) r="flock failed: $r" ;; esac
echo "$r" > "$1/second.tmp"; mv "$1/second.tmp" "$1/second""#;

/// Session timeout of both zklocks (zklock's default; the shared server
/// grants 4 s to 40 s). The helper gives CMD at most a third of it after
/// SIGTERM, so that CMD has ended before the dead session can expire.
const SESSION: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug)]
enum Stop {
    /// SIGKILL to zklock alone: the release helper takes over.
    Kill,
    /// SIGTERM to zklock's process group: zklock passes it to CMD and
    /// releases when CMD has exited.
    GroupTerm,
    /// SIGTERM to the group, then (CMD still running) SIGKILL to zklock.
    GroupTermThenKill,
}

/// Kills CMD's process group if a failed case left it running.
struct Reap(Option<u32>);

impl Drop for Reap {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = Command::new("kill")
                .args(["-s", "KILL", "--", &format!("-{pid}")])
                .status();
        }
    }
}

fn lines(file: &Path) -> usize {
    std::fs::read_to_string(file).map_or(0, |t| t.lines().count())
}

/// One first/second pair on a lock of its own.
fn case(stop: Stop, behaviour: &str, kill_after: &str) {
    let c = shared();
    let label = format!("{stop:?}, {behaviour} CMD, --kill-after {kill_after}");
    let dir = scratch_dir("cli-release");
    let d = dir.to_str().unwrap();
    let path = format!(
        "/cli-release-{}-{stop:?}-{behaviour}-{kill_after}",
        std::process::id()
    );
    let session = SESSION.as_secs().to_string();
    let exec = |script: &str, extra: &[&str]| {
        let mut args = vec!["--session-timeout", &session, "exec", "-k", kill_after];
        args.extend_from_slice(extra);
        args.extend_from_slice(&[path.as_str(), "--", "sh", "-c", script, "sh", d, behaviour]);
        let mut cmd = zklock(&c, &args);
        // A group of its own: the group SIGTERM reaches no test process.
        cmd.process_group(0);
        Proc::spawn(cmd)
    };

    let mut first = exec(FIRST, &[]);
    first.expect_line("locked");
    let mut reap = Reap(Some(read_pid(&dir.join("cmd"))));
    let cmd_pid = reap.0.unwrap();
    let second = exec(SECOND, &["-w", "120"]);
    wait_until(
        &format!("{label}: the second zklock to queue"),
        PROMPT,
        || queue_len(&c, &path) == 2,
    );

    let zklock_pid = first.pid();
    let group_term = || {
        let ok = Command::new("kill")
            .args(["-s", "TERM", "--", &format!("-{zklock_pid}")])
            .status()
            .unwrap()
            .success();
        assert!(ok, "{label}: kill -s TERM -{zklock_pid}");
    };
    let stopped = Instant::now();
    match stop {
        Stop::Kill => first.child.kill().unwrap(),
        Stop::GroupTerm => group_term(),
        Stop::GroupTermThenKill => {
            group_term();
            wait_until(&format!("{label}: CMD to get SIGTERM"), PROMPT, || {
                lines(&dir.join("terms")) >= 1
            });
            first.child.kill().unwrap();
        }
    }

    // The helper's grace period: --kill-after, but at most a third of the
    // session timeout (zklock's own wait after a forwarded signal has no
    // bound; CMD's own exit ends it here).
    let k: f64 = kill_after.parse().unwrap();
    let grace = Duration::from_secs_f64(k).min(SESSION / 3);
    // Availability: CMD ends within the grace period (the slow one within
    // a second); the helper then connects (at most a session timeout) and
    // deletes the node, or else the server expires the dead session
    // (another session timeout, rounded up to a tick). 12 s more for
    // starting processes and sessions on a loaded machine.
    let bound = grace + SESSION * 2 + Duration::from_secs(12);
    let marker = dir.join("second");
    wait_until(
        &format!("{label}: the second command to start"),
        bound,
        || marker.exists(),
    );
    let took = stopped.elapsed();
    let seen = std::fs::read_to_string(&marker).unwrap();
    assert_eq!(
        seen.trim(),
        "after",
        "{label}: the second command started {took:?} after the stop, while the first \
         (pid {cmd_pid}, alive now: {}) still held its flock",
        process_alive(cmd_pid)
    );
    assert!(
        !process_alive(cmd_pid),
        "{label}: the first command outlives its flock"
    );
    reap.0 = None;

    match behaviour {
        // Given the time, it stopped by itself rather than by SIGKILL.
        "prompt" | "slow" if grace >= Duration::from_secs(2) => assert!(
            dir.join("exited").exists(),
            "{label}: SIGKILLed before --kill-after was up"
        ),
        // With any grace at all, SIGTERM came first (whoever sent it), and
        // the shell ran its trap before the SIGKILL.
        "prompt" | "slow" if !grace.is_zero() => assert!(
            lines(&dir.join("terms")) >= 1,
            "{label}: CMD was never sent SIGTERM before its SIGKILL"
        ),
        // SIGKILL no sooner than the grace period; given the time, the
        // shell has run its trap for the SIGTERM before.
        "stubborn" => assert!(
            took >= grace && (grace < Duration::from_secs(2) || lines(&dir.join("terms")) >= 1),
            "{label}: SIGTERM, then SIGKILL no sooner than {grace:?} (took {took:?})"
        ),
        _ => {}
    }
    let (status, _, err) = second.finish(PROMPT);
    assert_eq!(status.code(), Some(0), "{label}: second zklock: {err}");
    if let Stop::GroupTerm = stop {
        // zklock itself saw CMD end, released, and exited with its status.
        let (status, _, err) = first.finish(PROMPT);
        assert_eq!(status.code(), Some(0), "{label}: first zklock: {err}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn sigkill_of_zklock_frees_the_lock_only_after_its_command_ended() {
    for behaviour in ["prompt", "slow", "stubborn"] {
        for kill_after in ["0", "0.3", "2"] {
            case(Stop::Kill, behaviour, kill_after);
        }
    }
}

#[test]
fn sigterm_to_zklocks_group_frees_the_lock_only_after_its_command_ended() {
    for behaviour in ["prompt", "slow"] {
        for kill_after in ["0", "2"] {
            case(Stop::GroupTerm, behaviour, kill_after);
        }
    }
    // A command that ignores the SIGTERM holds the lock until zklock, too,
    // is SIGKILLed; the helper then SIGKILLs it after --kill-after.
    for kill_after in ["0", "0.3", "2"] {
        case(Stop::GroupTermThenKill, "stubborn", kill_after);
    }
}

#[test]
fn sigkill_of_zklock_with_a_kill_after_beyond_the_session_timeout() {
    // Were CMD given all of --kill-after, the server would expire zklock's
    // session (and free the lock) while it still runs.
    case(Stop::Kill, "stubborn", "15");
    case(Stop::Kill, "slow", "15");
}
