//! The sans-I/O core a client runs on: the session and the lock machine,
//! typed end to end, with no socket, thread or clock of their own.
//!
//! Users never see this module: [`Client`](crate::Client) starts an I/O
//! thread that drives a [`Core`]. The project's simulator drives one by
//! hand (feature `testing`); a program with its own event loop drives the
//! protocol crate's `zklock_proto::Client` instead.
//!
//! Layers: `jute` (the wire) ← `zklock_proto` ← this core ← the I/O
//! thread ← [`Client`](crate::Client) ← [`recipes`](crate::recipes).

mod command;
mod core;
pub(crate) mod error;
pub(crate) mod held;
mod holding;
mod locks;
mod observer;
pub(crate) mod recipient;
pub(crate) mod status;
mod subscriber;

#[cfg(feature = "testing")]
pub(crate) use self::core::CoreHandles;
pub use self::core::{Core, CoreEvent};
#[cfg(feature = "testing")]
pub(crate) use command::NoWake;
pub(crate) use command::{Command, CommandSender, LockCommand, Wake};
pub use error::LockError;
pub use held::STATE_CHANNEL_CAPACITY;
#[cfg(test)]
pub(crate) use holding::ReleaseDoor;
pub(crate) use holding::{GrantSink, Holding};
pub use observer::Observer;
pub(crate) use subscriber::Subscriber;
pub use zklock_proto::lock::{
    AttemptId, LockState, LossReason, NodeKind, NodeOrigin, REVOKE, SEQUENCE_WARNING,
};
