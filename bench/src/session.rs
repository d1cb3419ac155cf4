//! zklock's sessions as the worker opens and watches them: how a client
//! connects (the `leader_check` and `timeout_ms` parameters), the alarms
//! counted from the session's and each guard's state changes, and the
//! lock+release cycle of the timed loops.

use std::time::Duration;

use crossbeam_channel::Receiver;
use zklock::recipes::{LockState, Mutex};
use zklock::{Client, SessionState};

use crate::stage::Params;
use crate::BoxResult;

const SESSION_TIMEOUT: Duration = Duration::from_secs(30);

/// How zklock's clients connect: the `leader_check` (`on`, the default, or
/// `off`) and `timeout_ms` (the session timeout, default 30 s) parameters.
#[derive(Clone, Copy)]
pub(crate) struct Conn {
    pub(crate) leader_check: bool,
    pub(crate) timeout: Duration,
}

impl Conn {
    pub(crate) fn of(p: &Params) -> BoxResult<Conn> {
        let leader_check = match p.str("leader_check", "on") {
            "on" => true,
            "off" => false,
            other => return Err(format!("leader_check={other} is neither on nor off").into()),
        };
        let timeout = match p.get("timeout_ms") {
            None => SESSION_TIMEOUT,
            Some(_) => Duration::from_millis(p.usize("timeout_ms", 0)? as u64),
        };
        Ok(Conn {
            leader_check,
            timeout,
        })
    }

    pub(crate) fn connect(&self, connect: &str) -> BoxResult<Client> {
        Ok(Client::builder(connect)
            .session_timeout(self.timeout)
            .leader_check(self.leader_check)
            .connect()?)
    }
}

/// Counts the times a session went Suspended, Lost or Expired, from
/// [`Client::subscribe`] (its first message is the state at subscription).
/// Read by draining at the end: the channel keeps the first
/// `STATE_CHANNEL_CAPACITY` changes, so a first alarm is never missed.
pub(crate) struct SessionAlarms(Receiver<SessionState>);

impl SessionAlarms {
    pub(crate) fn of(client: &Client) -> SessionAlarms {
        SessionAlarms(client.subscribe())
    }

    pub(crate) fn count(&self) -> usize {
        self.0
            .try_iter()
            .filter(|s| {
                matches!(
                    s,
                    SessionState::Suspended | SessionState::Lost | SessionState::Expired
                )
            })
            .count()
    }
}

/// The states other than `Held` a guard went through from `changes`
/// (its [`LockGuard::state_changes`], taken right after the lock was granted)
/// until now.
pub(crate) fn guard_alarms(changes: &Receiver<LockState>) -> usize {
    changes.try_iter().filter(|s| *s != LockState::Held).count()
}

/// One lock and release. zklock's own way to release is dropping the guard:
/// it returns at once, and the delete travels ahead of whatever the session
/// sends next (the next create, in a loop), so another session can take the
/// lock as soon as the server applies it, as with a waited-for unlock.
pub(crate) fn cycle(mutex: &Mutex) -> BoxResult<()> {
    drop(mutex.lock()?);
    Ok(())
}

/// [`cycle`], counting the states other than `Held` the guard went through
/// while held into `alarms` (from its `state_changes`, taken as soon as it
/// is granted and read just before the release), released as `release`
/// says (dropped, or `unlock()` waiting for the delete's reply).
pub(crate) fn checked_cycle(mutex: &Mutex, alarms: &mut usize, release: Release) -> BoxResult<()> {
    let guard = mutex.lock()?;
    let changes = guard.state_changes();
    *alarms += guard_alarms(&changes);
    match release {
        Release::Unlock => guard.unlock()?,
        Release::Drop | Release::Requeue => drop(guard),
    }
    Ok(())
}

/// How zklock's timed loops let the lock go: the `release` parameter.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Release {
    /// `drop` (the default): the guard is dropped, which returns at once;
    /// the delete travels ahead of whatever the session sends next.
    Drop,
    /// `unlock`: `LockGuard::unlock()`, which returns once the server has
    /// answered the delete.
    Unlock,
    /// `requeue` (the timed loops only): `Mutex::requeue(guard, None)`
    /// releases and queues again in one multi (delete + create, one
    /// commit); the next turn waits on the `PendingLock` it returns.
    Requeue,
}

impl Release {
    pub(crate) fn of(p: &Params) -> BoxResult<Release> {
        match p.str("release", "drop") {
            "drop" => Ok(Release::Drop),
            "unlock" => Ok(Release::Unlock),
            "requeue" => Ok(Release::Requeue),
            other => Err(format!("release={other} is not drop, unlock or requeue").into()),
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Release::Drop => "drop",
            Release::Unlock => "unlock",
            Release::Requeue => "requeue",
        }
    }
}
