//! A server process that dies with the test process even when `Drop` never
//! runs (a `static` shared server, a panic that aborts, a SIGKILL): the
//! ZooKeeper JVMs ([`crate::zk`]), and any other program a test kit starts
//! the same way.
//!
//! The program is started by a small `bash` wrapper whose stdin is a pipe
//! held only by the test process. When that process goes away the pipe
//! closes, the wrapper's `read` returns EOF, and the wrapper kills the
//! program and removes its directory. A deliberate stop writes a line
//! first, which tells the wrapper to keep the directory.
//!
//! The wrapper runs in a process group of its own, so that a Ctrl-C on the
//! terminal reaches only the test process: the wrapper outlives it, sees its
//! stdin close, and cleans up.

use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// `bash -c WRAPPER_SCRIPT NAME DIR PID_FILE PROGRAM ARGS...`: runs
/// `PROGRAM ARGS...` in the background and ties its life to our stdin.
///
/// * a line on stdin (`stop`): kill the program, keep `DIR`;
/// * EOF without a line (the test process died): kill the program, remove `DIR`;
/// * the program exits on its own: the wrapper exits with its status, so
///   `Child::try_wait` on the wrapper tells whether the program is alive.
///
/// With a `PID_FILE` (not empty), the program's pid is written there.
const WRAPPER_SCRIPT: &str = r#"
dir=$1
pid_file=$2
shift 2
exec 3<&0
"$@" </dev/null 3<&- &
cpid=$!
if [ -n "$pid_file" ]; then echo "$cpid" > "$pid_file"; fi
(
  if IFS= read -r _line <&3; then
    kill -9 "$cpid" 2>/dev/null
  else
    : > "$dir/.orphaned"
    kill -9 "$cpid" 2>/dev/null
  fi
) &
wpid=$!
exec 3<&- 0</dev/null
wait "$cpid"
status=$?
kill "$wpid" 2>/dev/null
wait "$wpid" 2>/dev/null
if [ -e "$dir/.orphaned" ]; then rm -rf "$dir"; fi
exit "$status"
"#;

/// A program running under the watchdog's wrapper, and the write end of
/// the wrapper's stdin: the program lives while this process does.
pub struct Watched {
    wrapper: Child,
    /// Closing it without a line means "we died".
    lifeline: Option<ChildStdin>,
}

impl Watched {
    /// The command that runs `program` under the wrapper: add the
    /// program's arguments, environment, working directory and output,
    /// then [`Watched::spawn`] it. `name` is the wrapper's `$0` (what `ps`
    /// shows), `dir` what it removes when the test process dies, and with
    /// `pid_file` the wrapper writes the program's pid there.
    pub fn command(
        name: &str,
        dir: &Path,
        pid_file: Option<&Path>,
        program: impl AsRef<OsStr>,
    ) -> Command {
        let mut command = Command::new("bash");
        command
            .arg("-c")
            .arg(WRAPPER_SCRIPT)
            .arg(name)
            .arg(dir)
            .arg(pid_file.map_or(OsStr::new(""), Path::as_os_str))
            .arg(program);
        command
    }

    /// Starts a command made by [`Watched::command`], keeping its stdin.
    ///
    /// # Errors
    ///
    /// When `bash` cannot be started.
    pub fn spawn(mut command: Command) -> io::Result<Watched> {
        let mut wrapper = command.stdin(Stdio::piped()).process_group(0).spawn()?;
        let lifeline = wrapper.stdin.take();
        Ok(Watched { wrapper, lifeline })
    }

    /// The wrapper's exit status if it has ended (with the program's).
    ///
    /// # Errors
    ///
    /// As [`Child::try_wait`].
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.wrapper.try_wait()
    }

    /// Tells the wrapper to kill the program (keeping the directory) and
    /// reaps it; kills the wrapper if it has not ended within `timeout`.
    /// Returns whether it ended in time.
    pub fn stop(mut self, timeout: Duration) -> bool {
        if let Some(mut lifeline) = self.lifeline.take() {
            // If the wrapper is already gone this fails with EPIPE; nothing to do then.
            let _ = lifeline.write_all(b"stop\n");
        }
        if wait_with_timeout(&mut self.wrapper, timeout).is_none() {
            let _ = self.wrapper.kill();
            let _ = self.wrapper.wait();
            return false;
        }
        true
    }
}

fn wait_with_timeout(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scratch::scratch_dir;
    use std::path::PathBuf;

    /// How long any step here may take on a busy machine.
    const PATIENCE: Duration = Duration::from_secs(20);

    /// Polls `done` until it holds, or panics naming `what` after PATIENCE.
    fn until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !done() {
            assert!(Instant::now() < deadline, "{what}: not within {PATIENCE:?}");
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// `sleep 1000` under the wrapper, with its directory and pid file.
    fn sleeper() -> (Watched, PathBuf, u32) {
        let dir = scratch_dir("watchdog");
        let pid_file = dir.join("pid");
        let mut command = Watched::command("zklock-watchdog-test", &dir, Some(&pid_file), "sleep");
        command.arg("1000");
        let watched = Watched::spawn(command).expect("starting bash");
        let mut pid = None;
        until("the pid file", || {
            pid = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|s| s.trim().parse().ok());
            pid.is_some()
        });
        (watched, dir, pid.unwrap_or_default())
    }

    fn alive(pid: u32) -> bool {
        Path::new(&format!("/proc/{pid}")).exists()
    }

    /// Kills: `Watched::stop` → false; `wait_with_timeout` → None, its
    /// `Ok(Some)` arm deleted, its deadline's `+` made `-`, or its
    /// deadline guard made false (`<` made `==` or `>`: the wrapper is
    /// given up on at its first look).
    #[test]
    fn a_stopped_program_is_killed_and_its_directory_kept() {
        let (mut watched, dir, pid) = sleeper();
        assert!(alive(pid));
        assert!(watched.try_wait().expect("try_wait").is_none());
        assert!(watched.stop(PATIENCE), "the wrapper did not end in time");
        assert!(!alive(pid), "the program outlived its stop");
        assert!(dir.exists(), "a stop keeps the directory");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Kills `Watched::try_wait` → `Ok(Some(..))` (above: alive is None)
    /// and → `Ok(None)` (here: the program's own end shows).
    #[test]
    fn a_program_that_ends_on_its_own_shows_its_status() {
        let dir = scratch_dir("watchdog");
        let mut command = Watched::command("zklock-watchdog-test", &dir, None, "sh");
        command.args(["-c", "exit 3"]);
        let mut watched = Watched::spawn(command).expect("starting bash");
        let mut status = None;
        until("the program's end", || {
            status = watched.try_wait().expect("try_wait");
            status.is_some()
        });
        assert_eq!(status.and_then(|s| s.code()), Some(3));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The test process "dies": the lifeline closes without a line, and the
    /// wrapper kills the program and removes its directory.
    #[test]
    fn a_lifeline_closed_without_a_word_kills_the_program_and_removes_its_directory() {
        let (watched, dir, pid) = sleeper();
        let Watched {
            mut wrapper,
            lifeline,
        } = watched;
        drop(lifeline);
        until("the program's death", || !alive(pid));
        until("the wrapper's end", || {
            matches!(wrapper.try_wait(), Ok(Some(_)))
        });
        assert!(!dir.exists(), "the directory outlived the test process");
    }

    /// Kills `Watched::stop` → true, `wait_with_timeout` → `Some(..)`, and
    /// its deadline guard made true (the wait never gives up): a child
    /// that ignores the stop line is killed at the timeout, and `stop`
    /// says it did not end in time.
    #[test]
    fn a_wrapper_that_does_not_end_in_time_is_killed() {
        let mut command = Command::new("sleep");
        command.arg("1000");
        let watched = Watched::spawn(command).expect("starting sleep");
        let pid = watched.wrapper.id();
        assert!(!watched.stop(Duration::from_millis(200)));
        assert!(!alive(pid), "killed and reaped");
    }
}
