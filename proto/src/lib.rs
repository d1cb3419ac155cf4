//! ZooKeeper's session and lock protocols as sans-I/O state machines.
//!
//! Nothing here opens a socket, starts a thread or reads a clock: every
//! input carries `now`, bytes come in through `handle_*` calls, and what
//! to send, what happened and when to wake up next come out of `poll_*`
//! calls and [`session::Session::output`]. The same code runs under
//! zklock's mio I/O thread, under its deterministic simulator, and under
//! any event loop of your own.
//!
//! - [`session`]: one ZooKeeper session across connections: handshake,
//!   xids, pings, read timeouts, reconnect, expiry, watches and their
//!   re-arming, SASL.
//! - [`lock`]: the lock protocol for every acquisition of one session:
//!   queue nodes named Curator's way, the predecessor watch, recovery of a
//!   create whose reply was lost, holder states, lock-delay.
//!
//! Layers: `zklock-jute` (the wire) ← this crate ← `zklock` (the I/O
//! thread, the blocking client and the recipes).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod client;
pub mod deadline;
pub mod lock;
pub mod path;
mod random;
pub mod session;
mod spare_room;

pub use client::{Client, Event};
pub use random::random_seed;
