//! The release helper: what frees the lock when zklock is SIGKILLed.
//!
//! A killed process cannot clean up after itself, and ZooKeeper keeps a
//! session (and its lock node) alive for the whole session timeout after its
//! connection closes. So zklock starts a second copy of itself,
//! `zklock --release-helper`, in a process group of its own (a terminal's
//! Ctrl-C and signals sent to zklock's group never reach it). zklock tells
//! it, over the helper's stdin, which node it holds for which session and
//! which process runs CMD; on a normal exit it says `done`.
//!
//! The helper blocks reading its stdin. End of input without `done` means
//! zklock died: the kernel has already sent CMD SIGTERM (`PR_SET_PDEATHSIG`);
//! the helper passes SIGTERM on to CMD's process group, waits for CMD to end
//! (SIGKILL after the grace period, and to what is left of its group), then
//! opens a session of its own and deletes the lock node if it still belongs
//! to zklock's session. The next waiter is woken by that delete.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Stdio};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::process::{Pid, PidfdFlags, Signal};
use zklock::Client;

use crate::secs;

/// The hidden first argument that turns zklock into the helper.
pub const FLAG: &str = "--release-helper";

/// zklock's side: the helper's stdin.
pub struct ReleaseHelper {
    child: Child,
    stdin: ChildStdin,
}

impl ReleaseHelper {
    /// Starts the helper. It connects to `connect` only if it has to act.
    pub fn start(
        connect: &str,
        session_timeout: Duration,
        kill_after: Duration,
        verbose: u8,
    ) -> std::io::Result<ReleaseHelper> {
        let exe = std::env::current_exe()?;
        let mut child = std::process::Command::new(exe)
            .arg0("zklock")
            .arg(FLAG)
            .arg(connect)
            .arg(session_timeout.as_secs_f64().to_string())
            .arg(kill_after.as_secs_f64().to_string())
            .arg(verbose.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no pipe to the release helper"))?;
        Ok(ReleaseHelper { child, stdin })
    }

    fn say(&mut self, line: &str) {
        // One short write: the helper sees whole lines.
        if let Err(e) = self.stdin.write_all(format!("{line}\n").as_bytes()) {
            log::warn!("release helper: {e}; a SIGKILL would leave the lock held until the session times out");
        }
    }

    /// The lock node that session `session_id` holds.
    pub fn holding(&mut self, session_id: i64, node: &str) {
        self.say(&format!("hold {session_id} {node}"));
    }

    /// CMD's pid; `own_group` when CMD leads a process group of its own.
    pub fn running(&mut self, pid: Pid, own_group: bool) {
        self.say(&format!(
            "cmd {} {}",
            pid.as_raw_nonzero(),
            u8::from(own_group)
        ));
    }

    /// zklock is done and has cleaned up: the helper exits without acting.
    pub fn finish(mut self) {
        self.say("done");
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

/// What the helper was told.
#[derive(Default)]
struct Told {
    hold: Option<(i64, String)>,
    cmd: Option<(Pid, bool, Option<OwnedFd>)>,
    done: bool,
}

fn parse_secs(text: Option<&String>) -> Duration {
    text.and_then(|t| t.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map_or(Duration::from_secs(10), Duration::from_secs_f64)
}

/// The helper process: `args` are what [`ReleaseHelper::start`] passed.
pub fn run(args: &[String]) -> u8 {
    let connect = args.first().cloned().unwrap_or_default();
    let session_timeout = parse_secs(args.get(1));
    let kill_after = parse_secs(args.get(2));
    let verbose = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(0);
    crate::init_logging(verbose);

    let mut told = Told::default();
    for line in BufReader::new(std::io::stdin().lock()).lines() {
        let Ok(line) = line else { break };
        let mut words = line.splitn(3, ' ');
        match (words.next(), words.next(), words.next()) {
            (Some("hold"), Some(session), Some(node)) => {
                if let Ok(session) = session.parse() {
                    told.hold = Some((session, node.to_owned()));
                }
            }
            (Some("cmd"), Some(pid), Some(group)) => {
                let Some(pid) = pid.parse().ok().and_then(Pid::from_raw) else {
                    continue;
                };
                // A pidfd names this very process, whatever reuses the pid later.
                let pidfd = rustix::process::pidfd_open(pid, PidfdFlags::empty()).ok();
                told.cmd = Some((pid, group == "1", pidfd));
            }
            (Some("done"), _, _) => told.done = true,
            _ => log::warn!("release helper: unknown line {line:?}"),
        }
    }
    if told.done {
        return 0;
    }
    log::warn!("zklock died: stopping CMD and freeing its lock");
    if let Some((pid, own_group, pidfd)) = &told.cmd {
        stop_orphaned(*pid, *own_group, pidfd.as_ref(), kill_after);
    }
    if let Some((session, node)) = &told.hold {
        delete_node(&connect, session_timeout, *session, node);
    }
    0
}

/// Stops CMD, which is no longer our sibling's child but nobody's.
fn stop_orphaned(pid: Pid, own_group: bool, pidfd: Option<&OwnedFd>, grace: Duration) {
    let Some(pidfd) = pidfd else {
        // CMD had already ended when the helper heard of it.
        return;
    };
    if own_group {
        let _ = rustix::process::kill_process_group(pid, Signal::TERM);
    }
    if !wait_exit(pidfd, grace) {
        log::warn!("CMD still running {} after SIGTERM: SIGKILL", secs(grace));
        let _ = rustix::process::pidfd_send_signal(pidfd, Signal::KILL);
        wait_exit(pidfd, Duration::from_secs(5));
    }
    if own_group {
        // Whatever CMD left behind must not run on once the lock is free.
        let _ = rustix::process::kill_process_group(pid, Signal::KILL);
    }
}

/// Waits at most `limit` for the process behind `pidfd` to exit.
fn wait_exit(pidfd: &OwnedFd, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let timeout = rustix::event::Timespec::try_from(left).ok();
        let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(n) if n > 0 => return true,
            Ok(_) => return false,
            Err(rustix::io::Errno::INTR) if !left.is_zero() => {}
            Err(_) => return false,
        }
    }
}

/// Deletes `node` if `session` still owns it: the dead zklock's lock.
fn delete_node(connect: &str, session_timeout: Duration, session: i64, node: &str) {
    let client = match Client::builder(connect)
        .session_timeout(session_timeout)
        .connect()
    {
        Ok(c) => c,
        Err(e) => {
            crate::complain(&format!(
                "release helper: cannot reach ZooKeeper ({e}); {node} is freed when the session times out"
            ));
            return;
        }
    };
    match client.exists(node) {
        Ok(Some(stat)) if stat.ephemeral_owner == session => {
            match client.delete(node, Some(stat.version)) {
                Ok(()) => log::info!("release helper: deleted {node}"),
                Err(e) => log::warn!("release helper: deleting {node}: {e}"),
            }
        }
        Ok(_) => log::info!("release helper: {node} is already gone"),
        Err(e) => log::warn!("release helper: looking at {node}: {e}"),
    }
    let _ = client.close();
}
