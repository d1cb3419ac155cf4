//! zklock: distributed locks on Apache ZooKeeper, with a blocking client of
//! its own and no async runtime.
//!
//! Layers, each depending only on the ones before it: the [`jute`] wire
//! codec, the sans-I/O [`session`] core, a mio I/O thread, the blocking
//! [`Client`], and the lock recipes.
#![forbid(unsafe_code)]

mod client;
mod driver;
mod error;
mod path;
pub mod recipes;
pub mod session;

pub use client::{Client, ClientBuilder, CreateOptions, Op, OpResult, Watch, WatchEvent};
pub use error::{Error, Result};
pub use jute::{perms, Acl, CreateMode, ErrorCode, EventType, Id, Stat};
pub use path::validate_path;
pub use session::SessionState;
