//! CMD as zklock's direct child: started so that it dies with zklock,
//! signalled (alone or with its process group), stopped with a grace period.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use rustix::process::{Pid, Signal};

use crate::signals::Caught;
use crate::{exit, secs};

/// How often a process group is looked at again while it empties, when
/// no SIGCHLD says so first (members that are not our children).
const GROUP_RECHECK: Duration = Duration::from_millis(50);

/// Our process group when it is the foreground group of our controlling
/// terminal: CMD then joins it, so it can read the terminal and Ctrl-C
/// reaches it directly.
pub fn terminal_foreground_group() -> Option<Pid> {
    let tty = File::open("/dev/tty").ok()?;
    let foreground = rustix::termios::tcgetpgrp(&tty).ok()?;
    (foreground == rustix::process::getpgrp()).then_some(foreground)
}

/// A running CMD.
pub struct Cmd {
    pub child: Child,
    /// CMD leads a process group of its own: signals go to the whole group.
    pub own_group: bool,
}

impl Cmd {
    /// Starts `argv` with `env` added and zklock's secret variables
    /// removed. With `in_our_group` CMD stays in
    /// zklock's process group (a terminal's foreground); otherwise it gets a
    /// group of its own, so that stopping it stops its children too.
    ///
    /// CMD gets SIGTERM from the kernel the moment zklock dies, however it
    /// dies (`PR_SET_PDEATHSIG`); the release helper does the rest. The
    /// signal follows the thread that forked, so call this from the main
    /// thread, which lives as long as zklock.
    #[allow(unsafe_code)]
    pub fn spawn(argv: &[OsString], env: &[(&str, String)], in_our_group: bool) -> io::Result<Cmd> {
        let mut cmd = std::process::Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        for k in crate::SECRET_VARS {
            cmd.env_remove(k);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        if !in_our_group {
            cmd.process_group(0);
        }
        let zklock = rustix::process::getpid();
        // SAFETY: the closure runs in the forked child before exec, where only
        // async-signal-safe calls are allowed: it makes two raw system calls
        // (prctl, getppid) through rustix and builds an io::Error from a
        // number, none of which allocates or takes a lock.
        unsafe {
            cmd.pre_exec(move || {
                rustix::process::set_parent_process_death_signal(Some(Signal::TERM))?;
                // zklock died before the prctl: the signal will never come.
                if rustix::process::getppid() != Some(zklock) {
                    return Err(io::Error::from_raw_os_error(
                        rustix::io::Errno::SRCH.raw_os_error(),
                    ));
                }
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        Ok(Cmd {
            child,
            own_group: !in_our_group,
        })
    }

    pub fn pid(&self) -> Pid {
        Pid::from_child(&self.child)
    }

    /// Sends `signal` (a raw number) to CMD, or to its whole group.
    pub fn signal(&self, signal: i32) {
        let Some(sig) = Signal::from_named_raw(signal) else {
            log::warn!("cannot pass on signal {signal}");
            return;
        };
        let sent = if self.own_group {
            rustix::process::kill_process_group(self.pid(), sig)
        } else {
            rustix::process::kill_process(self.pid(), sig)
        };
        if let Err(e) = sent {
            log::debug!("SIG{} to CMD: {e}", crate::signals::Caught::name(signal));
        }
    }

    /// Whether any member of CMD's group is alive. Reaps the members that
    /// became our children (zklock is a child subreaper), so that a zombie
    /// does not count.
    fn group_alive(&self) -> bool {
        if !self.own_group {
            return false;
        }
        while let Ok(Some(_)) =
            rustix::process::waitpgid(self.pid(), rustix::process::WaitOptions::NOHANG)
        {}
        rustix::process::test_kill_process_group(self.pid()).is_ok()
    }

    /// SIGTERM to CMD (its group), SIGKILL after `grace`; returns how CMD
    /// ended. With a group of its own, the members CMD left behind must
    /// end within `grace` too, or get the SIGKILL.
    pub fn stop(&mut self, grace: Duration, signals: &Receiver<Caught>) -> ExitStatus {
        self.signal(signal_hook::consts::SIGTERM);
        let deadline = Instant::now() + grace;
        let mut ended = None;
        loop {
            if ended.is_none() {
                ended = self.child.try_wait().ok().flatten();
            }
            if let Some(status) = ended {
                if !self.group_alive() {
                    return status;
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            // SIGCHLD wakes us; other signals are not passed on meanwhile.
            let _ = signals.recv_timeout(left.min(GROUP_RECHECK));
        }
        log::warn!(
            "{} still running {} after SIGTERM: SIGKILL",
            if ended.is_some() {
                "CMD's children"
            } else {
                "CMD"
            },
            secs(grace)
        );
        self.signal(signal_hook::consts::SIGKILL);
        let _ = self.child.kill();
        let status = match ended {
            Some(status) => status,
            None => self.child.wait().unwrap_or(ExitStatus::from_raw(9)),
        };
        self.group_alive();
        status
    }
}

/// Exit code for a finished child: its code, or 128+N for signal N.
pub fn status_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(c), _) => (c & 0xff) as u8,
        (None, Some(s)) => 128u8.wrapping_add(s as u8),
        (None, None) => exit::SOFTWARE,
    }
}
