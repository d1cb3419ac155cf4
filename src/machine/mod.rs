//! The sans-I/O core a client runs on: the session and the lock machine,
//! typed end to end, with no socket, thread or clock of their own.
//!
//! Most users never see this module: [`Client`](crate::Client) starts an
//! I/O thread that drives a [`Core`]. It is public for those who drive the
//! core themselves — the deterministic simulator in this crate's tests
//! does, through [`ClientBuilder::build_manual`](crate::ClientBuilder::build_manual) —
//! and for the lock protocol on its own ([`LockMachine`]), which is handed
//! replies, watch events, session changes and the time, and says which
//! requests to send.
//!
//! Layers: `jute` (the wire) ← [`session`](crate::session) ← this core ←
//! the I/O thread ← [`Client`](crate::Client) ← [`recipes`](crate::recipes).

mod command;
mod core;
pub(crate) mod error;
pub(crate) mod held;
mod holding;
mod locks;
mod observer;
pub(crate) mod recipient;
pub(crate) mod status;

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
pub use zklock_proto::lock::{
    AttemptId, LockSpec, LockState, LossReason, NodeKind, NodeOrigin, REVOKE, SEQUENCE_WARNING,
};
