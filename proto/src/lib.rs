//! ZooKeeper's session and lock protocols as sans-I/O state machines.
//!
//! Nothing here opens a socket, starts a thread or reads a clock: every
//! input carries `now`, bytes come in through `handle_*` calls, and what
//! to send, what happened and when to wake up next come out of `poll_*`
//! calls and [`Client::output`]. The same code runs under zklock's mio I/O
//! thread, under its deterministic simulator, and under any event loop of
//! your own: an embedded poll loop, an existing mio or epoll reactor, a
//! runtime adapter.
//!
//! - [`Client`]: one session and the locks on it, wired together. What a
//!   driver runs.
//! - [`session`]: the session alone: handshake, xids, pings, read timeouts,
//!   reconnect, expiry, watches and their re-arming, SASL.
//! - [`lock`]: the lock machine alone: queue nodes named Curator's way,
//!   the predecessor watch, recovery of a create whose reply was lost,
//!   holder states, lock-delay.
//!
//! Layers: `zklock-jute` (the wire) ← this crate ← `zklock` (the I/O
//! thread, the blocking client and the recipes).
//!
//! # The contract
//!
//! **Time.** Every call that can change state takes `now`, an [`Instant`]
//! from a monotonic clock that never goes backwards between calls. The
//! crate reads no clock of its own; a simulator hands it virtual time.
//!
//! **Inputs.**
//! - [`Client::handle_connected`] once a connection (TCP, and TLS if any)
//!   is up: the handshake goes out. Which server to dial, and how long to
//!   wait between rounds of failures, is the driver's choice; dial only
//!   while [`Client::wants_connection`] says so, one connection at a time.
//! - [`Client::handle_input`] with the bytes that arrived, in order, cut
//!   anywhere: frames are put back together inside.
//! - [`Client::handle_disconnected`] when the connection is gone (EOF, an
//!   error), whoever closed it.
//! - [`Client::handle_timeout`] at [`Client::poll_timeout`] or later;
//!   calling it early is harmless. It runs the read timeout (two thirds of
//!   the session timeout), the pings (a third of it), the handshake's
//!   limit, the leader check, the holders' no-contact rule and the lock
//!   attempts' deadlines and lock-delay.
//! - The driver's own requests ([`Client::submit`], [`Client::close`],
//!   [`Client::release_persistent`]) and lock commands
//!   ([`Client::acquire`], [`Client::requeue`], [`Client::cancel`],
//!   [`Client::release`]). Attempt ids are the driver's, unique per client:
//!   [`lock::AttemptIds`] hands out ids and the UUIDs that name their nodes.
//! - Before dialling a new connection, [`Client::retain_watches`] drops
//!   the driver's watches nobody waits for any more, so they are not
//!   re-armed.
//!
//! **Outputs.** After every input, drain [`Client::poll_event`] until it
//! says `None`, write [`Client::output`] (a partial write is fine: say how
//! much with [`Client::consume_output`]), then sleep until bytes arrive or
//! [`Client::poll_timeout`] passes.
//!
//! **Events** ([`Event`]):
//! - `Reply`: the driver's request finished, under the handle it gave.
//!   Replies come in the order the requests were submitted. A
//!   `RequestError::ConnectionLoss` means the request may or may not have
//!   been applied.
//! - `Watch`: the driver's watch fired (a one-shot watch once, a
//!   persistent one per change); the path is the server's. `WatchAbandoned`:
//!   it never will, the session ended first.
//! - `State`: the session's state ([`session::SessionState`]): `Connected`;
//!   `Suspended` at once when a connection drops, or when the leader has
//!   not confirmed the session for three quarters of its timeout; `Lost`
//!   after a whole session timeout without such a confirmation; the
//!   terminal `Expired`, `Closed`, `AuthFailed`; each with the id of the
//!   session it happened to ([`session::SessionChange`]), so that after an
//!   expiry the old session's `Expired` and the new one's `Connected` are
//!   told apart.
//! - `DropConnection`: close the socket now (the client counts it as gone
//!   already); dial again when [`Client::wants_connection`] says so.
//! - `Lock`: an acquisition's news ([`lock::LockEvent`]): `Acquired` (the
//!   node and its Stat: the czxid is a fencing token), `Failed`, a holder's
//!   `State` (`Held`, `Suspended`, `Lost`; `Lost` is final), `Released`,
//!   `RevocationRequested`, `Woken`, `NearSequenceEnd`. Every acquisition
//!   ends in exactly one `Acquired` or `Failed`; whatever way it ends, its
//!   nodes are removed while the session lives.
//!
//! **Order.** Events come out in the order they were decided. What a
//! session change did to the holders follows its `State` event; a
//! deletion of a held node heard on one of the driver's watches reaches
//! its holder (`Lock(State(Lost))`) before the driver's `Watch` event, so
//! nothing the driver hands on can say the node is gone while its holder
//! still says `Held`.
//!
//! `examples/poll_loop.rs` takes and releases a lock on a hand-written,
//! single-threaded loop with one blocking socket.
//!
//! [`Instant`]: std::time::Instant
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod client;
pub mod deadline;
pub mod id_hash;
pub mod lock;
pub mod path;
mod random;
pub mod session;
mod spare_room;

pub use client::{Client, Event};
pub use random::random_seed;
