//! What API threads ask of the core, typed, and the door they ask through.

use std::sync::{Arc, Weak};
use std::time::Instant;

use crossbeam_channel::Sender;
use jute::Request;

use super::holding::{GrantSink, ReleaseDoor};
use super::recipient::{ReplySender, WatchSender};
use super::subscriber::Subscriber;
use crate::oneshot;
use zklock_proto::lock::AttemptId;
use zklock_proto::lock::LockSpec;

/// A request of an API thread to the core.
pub(crate) enum Command {
    /// Sends `request`; its reply (and watch, if any) go to the caller.
    Submit {
        request: Request,
        reply: ReplySender,
        watcher: Option<WatchSender>,
    },
    /// Closes the session; `reply` hears when it is closed.
    Close { reply: ReplySender },
    /// The last Client is gone: close the session, then let the driver end.
    /// Sent as a command (not left to the channel's disconnection, which
    /// wakes nobody) so a sleeping driver is woken for it.
    Shutdown,
    /// A persistent watch's owner dropped it.
    ReleasePersistent { path: String, reply: ReplySender },
    /// Adds a listener for state changes. With a liveness token, the
    /// listener is forgotten as soon as the token is dropped; without one,
    /// at the first state change after its receiver is gone.
    Subscribe(Subscriber, Option<Weak<()>>),
    /// For the lock machine.
    Lock(LockCommand),
    /// Wakes the task at the instant (a future's deadline: nothing else
    /// would poll it then).
    WakeAt(Instant, std::task::Waker),
}

/// A request to the lock machine.
pub(crate) enum LockCommand {
    /// Queues for the lock `spec` describes; the outcome goes to `outcome`.
    Acquire {
        id: AttemptId,
        spec: Arc<LockSpec>,
        uuid: String,
        deadline: Option<Instant>,
        no_wait: bool,
        outcome: GrantSink,
    },
    /// The waiter gave up; a grant already handed out releases itself.
    /// The holder `old` lets go and `id` queues again, in one write.
    Requeue {
        old: AttemptId,
        id: AttemptId,
        spec: Arc<LockSpec>,
        uuid: String,
        deadline: Option<Instant>,
        outcome: GrantSink,
    },
    Cancel(AttemptId),
    /// The waiter gave up, and a grant already handed out will never be
    /// read (it waits in a channel its owner keeps open): release it too.
    Withdraw(AttemptId),
    /// The holder let go; `done` hears when the node is gone.
    Release {
        id: AttemptId,
        done: Option<oneshot::Sender<Result<(), super::error::LockError>>>,
    },
}

/// Wakes whoever drives the core when a command is queued (the I/O
/// thread's poll, or nothing for a core driven by hand).
pub(crate) trait Wake: Send + Sync {
    /// `false` if the driver is gone.
    fn wake(&self) -> bool;
}

/// For a core driven by hand: it looks at its queue every turn anyway.
#[cfg(feature = "testing")]
pub(crate) struct NoWake;

#[cfg(feature = "testing")]
impl Wake for NoWake {
    fn wake(&self) -> bool {
        true
    }
}

/// Queues commands for the core and wakes its driver. Holding one does not
/// keep the session open.
#[derive(Clone)]
pub(crate) struct CommandSender {
    commands: Sender<Command>,
    wake: Arc<dyn Wake>,
}

impl std::fmt::Debug for CommandSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CommandSender")
    }
}

impl ReleaseDoor for CommandSender {
    fn release(
        &self,
        id: AttemptId,
        done: Option<oneshot::Sender<Result<(), super::error::LockError>>>,
    ) -> bool {
        self.lock(LockCommand::Release { id, done })
    }
}

impl CommandSender {
    pub(crate) fn new(commands: Sender<Command>, wake: Arc<dyn Wake>) -> Self {
        CommandSender { commands, wake }
    }

    /// Queues a command and wakes the driver. `false` if the core is gone.
    pub(crate) fn send(&self, cmd: Command) -> bool {
        if self.commands.send(cmd).is_err() {
            return false;
        }
        self.wake.wake()
    }

    /// Queues a command for the lock machine.
    pub(crate) fn lock(&self, cmd: LockCommand) -> bool {
        self.send(Command::Lock(cmd))
    }
}
