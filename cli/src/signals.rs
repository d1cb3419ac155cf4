//! The signals zklock catches, as a channel.
//!
//! signal-hook's handler only writes to a self-pipe; a thread reads it and
//! sends each signal, with whether the kernel raised it for a terminal
//! (Ctrl-C, Ctrl-\, hang-up) or a process sent it, into a channel that the
//! rest of zklock selects on beside the lock's state.

use std::thread;

use crossbeam_channel::Receiver;
use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::iterator::SignalsInfo;
use signal_hook::low_level::siginfo::Cause;

/// Signals passed on to CMD (and that cancel the wait for the lock).
pub const FORWARDED: [i32; 6] = [SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2];

/// One signal zklock received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caught {
    /// One of [`FORWARDED`]; `from_terminal` when the kernel sent it to the
    /// terminal's foreground process group rather than a process to us.
    Forwardable { signal: i32, from_terminal: bool },
    /// A child of ours changed state (CMD or one of its orphans ended).
    Child,
}

impl Caught {
    /// `SIGTERM` → `TERM`.
    pub fn name(signal: i32) -> &'static str {
        signal_hook::low_level::signal_name(signal)
            .map(|n| n.trim_start_matches("SIG"))
            .unwrap_or("?")
    }
}

/// Installs the handlers; from now on these signals no longer end zklock.
pub fn catch() -> std::io::Result<Receiver<Caught>> {
    let mut wanted = FORWARDED.to_vec();
    wanted.push(SIGCHLD);
    let mut signals = SignalsInfo::<WithOrigin>::new(&wanted)?;
    let (tx, rx) = crossbeam_channel::unbounded();
    thread::Builder::new()
        .name("zklock-signals".into())
        .spawn(move || {
            for origin in signals.forever() {
                let caught = if origin.signal == SIGCHLD {
                    Caught::Child
                } else {
                    Caught::Forwardable {
                        signal: origin.signal,
                        from_terminal: origin.cause == Cause::Kernel,
                    }
                };
                if tx.send(caught).is_err() {
                    return;
                }
            }
        })?;
    Ok(rx)
}
