//! zklock: distributed locks on Apache ZooKeeper, with a blocking client of
//! its own and no async runtime.
//!
//! Layers, each depending only on the ones before it: the [`jute`] wire
//! codec, the sans-I/O session and lock machine of the protocol crate
//! ([`zklock_proto`], whose documentation states their contract), a mio
//! I/O thread, the blocking [`Client`], and the lock [`recipes`].
//!
//! ```no_run
//! use std::time::Duration;
//! use zklock::{Client, recipes::{Mutex, LockState}};
//!
//! fn main() {
//!     if let Err(e) = run() {
//!         eprintln!("error: {e}"); // Display: one line, unlike `?` in main (Debug)
//!         std::process::exit(1);
//!     }
//! }
//!
//! fn run() -> Result<(), Box<dyn std::error::Error>> {
//!     let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
//!     let lock = Mutex::new(&client, "/locks/report")?;
//!     let guard = lock.lock_timeout(Duration::from_secs(30))?;
//!     assert_eq!(guard.state(), LockState::Held);
//!     // Hand the token to storage that refuses writes from older holders.
//!     let token = guard.fencing_token();
//!     println!("holding /locks/report, fencing token {token}");
//!     Ok(())
//! }
//! ```
//!
//! A server for it on your desk: `./scripts/zk.sh` in a checkout of the
//! repository. Without one, [`Client::connect`] fails after the session
//! timeout with [`Error::NoSession`], naming the servers it tried, the time
//! it waited and the last failure.
//!
//! # Cargo features
//!
//! * `sasl` (default): SASL authentication with DIGEST-MD5
//!   (`ClientBuilder::sasl`, `SaslConfig`). A program that never logs
//!   in with SASL can leave it out (`default-features = false`) and is
//!   smaller for it.
//! * `tls`: TLS to ZooKeeper's secure client port (rustls, `ring`).
//! * `kerberos`: SASL GSSAPI (Kerberos v5) through the system's GSSAPI
//!   library; implies `sasl`.
//! * `testing`: **unstable**, for this project's own simulator and tests,
//!   with no semver promise (any release may change or remove what it
//!   adds): the `testing` module (the sans-I/O `Core` a caller drives
//!   itself), `ClientBuilder::build_manual` that hands one out,
//!   `Pending::try_take_at` that polls a handle on its clock, and
//!   diagnostic counters (`Client::watch_events_received`,
//!   `BatchMutex::local_waiters`). Off by default; leave it off.
//!
//! # Channels
//!
//! Handles that deliver over time hand out `crossbeam_channel::Receiver`s
//! ([`Pending::receiver`](recipes::Pending::receiver),
//! [`LockGuard::state_changes`](recipes::LockGuard::state_changes),
//! [`Client::subscribe`], a latch's events): chosen so that one thread can
//! `select!` over locks, watches and its own channels together. The crate
//! re-exports [`crossbeam_channel`] so that callers use the same version.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod client;
mod deadline;
mod driver;
mod error;
mod machine;
mod oneshot;
mod path;
pub mod recipes;
// The protocol crate's session, under the path the crate's code names it by.
use zklock_proto::session;
mod sync;
#[cfg(feature = "testing")]
pub mod testing;
#[cfg(feature = "tls")]
mod tls;
mod wakers;

pub use client::{
    Client, ClientBuilder, CreateOptions, Op, OpResult, PersistentWatch, Watch,
    DEFAULT_PERSISTENT_WATCH_CAPACITY, MIN_MAX_FRAME,
};
pub use crossbeam_channel;
pub use error::{ConnectError, Error, NoSession, Result};
pub use jute::{perms, Acl, AddWatchMode, CreateMode, ErrorCode, EventType, Id, OpCode, Stat};
pub use machine::Observer;
pub use path::validate_path;
pub use session::{DropReason, SessionChange, SessionState, WatchEvent};
#[cfg(feature = "sasl")]
pub use session::{SaslConfig, SaslMechanism};
#[cfg(feature = "tls")]
pub use tls::{TlsError, TlsOptions};

#[cfg(test)]
mod tests;
