//! What API threads ask of the core, typed, and the door they ask through.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Instant;

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

/// Commands on their way to the core: a deque under a lock, whose room is
/// reused turn after turn (a channel allocates and zeroes a block of slots
/// for every few dozen commands).
struct Queue {
    state: Mutex<Waiting>,
}

struct Waiting {
    commands: VecDeque<Command>,
    /// False once the core is gone: a command sent then is refused.
    open: bool,
}

impl Queue {
    /// Nothing panics while holding the lock, so a poisoned one is sound.
    fn lock(&self) -> MutexGuard<'_, Waiting> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A queue for commands: the callers' door and the core's end of it.
pub(crate) fn command_queue(wake: Arc<dyn Wake>) -> (CommandSender, CommandReceiver) {
    let queue = Arc::new(Queue {
        state: Mutex::new(Waiting {
            commands: VecDeque::new(),
            open: true,
        }),
    });
    (
        CommandSender {
            queue: queue.clone(),
            wake,
        },
        CommandReceiver {
            queue,
            batch: VecDeque::new(),
        },
    )
}

/// Queues commands for the core and wakes its driver. Holding one does not
/// keep the session open.
#[derive(Clone)]
pub(crate) struct CommandSender {
    queue: Arc<Queue>,
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
    /// Queues a command and wakes the driver. `false` if the core is gone
    /// (the command is dropped here, so whoever waits on it hears so).
    pub(crate) fn send(&self, cmd: Command) -> bool {
        {
            let mut state = self.queue.lock();
            if !state.open {
                drop(state);
                drop(cmd);
                return false;
            }
            state.commands.push_back(cmd);
        }
        self.wake.wake()
    }

    /// Queues a command for the lock machine.
    pub(crate) fn lock(&self, cmd: LockCommand) -> bool {
        self.send(Command::Lock(cmd))
    }
}

/// The core's end of the queue. Dropping it closes the queue and drops
/// what is in it, so callers waiting on those commands hear the core is
/// gone.
pub(crate) struct CommandReceiver {
    queue: Arc<Queue>,
    /// Taken from the queue in one go: the lock is held for a swap only.
    batch: VecDeque<Command>,
}

impl CommandReceiver {
    /// Whether a command waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.batch.is_empty() && self.queue.lock().commands.is_empty()
    }

    /// The next command, in the order they were sent.
    pub(crate) fn next(&mut self) -> Option<Command> {
        if self.batch.is_empty() {
            std::mem::swap(&mut self.batch, &mut self.queue.lock().commands);
        }
        self.batch.pop_front()
    }
}

impl Drop for CommandReceiver {
    fn drop(&mut self) {
        let left = {
            let mut state = self.queue.lock();
            state.open = false;
            std::mem::take(&mut state.commands)
        };
        // Outside the lock: a command's drop may send another.
        drop(left);
    }
}
