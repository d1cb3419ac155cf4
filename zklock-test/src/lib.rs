//! Real ZooKeeper servers and the faults a lock holder must survive, for the
//! tests of programs that use [zklock](https://docs.rs/zklock): what
//! Curator's `curator-test` (`TestingServer`, `TestingCluster`,
//! `KillSession`) is to Java.
//!
//! - [`ZkServer`]: a standalone ZooKeeper on a free 127.0.0.1 port with a
//!   temporary directory; [`ZkEnsemble`]: `n` of them in a quorum, whose
//!   members can be killed and restarted, and, started
//!   [with links](ZkEnsemble::start_with_links), cut off from each other
//!   silently or loudly.
//! - [`ClientLink`]: the way the client under test reaches its servers,
//!   with faults on it: drop the connection, stall, delay, black-hole,
//!   and [expire the session](ClientLink::expire_session) now.
//! - Nothing is left behind: a server stops when dropped, and its JVM and
//!   directory go even when the test panics, aborts or is killed
//!   ([`watchdog`]).
//! - `zklock-test serve` (this crate's binary) starts a server for your
//!   desk on `127.0.0.1:2181`, prints its connect string and runs until
//!   Ctrl-C.
//!
//! Each fault's documentation says what a holder's guard
//! (`zklock::LockGuard::state`: `Held`, `Suspended`, `Lost`) then reports
//! and when.
//!
//! # Which ZooKeeper
//!
//! A JDK (`java`, or `$JAVA_HOME/bin/java`) and ZooKeeper 3.5 or later:
//! Debian's package (`apt-get install zookeeper`, which puts it in
//! `/usr/share/java`), or an unpacked Apache release named by
//! `ZOOKEEPER_HOME` (or [`ZkOptions::zookeeper_home`]), or any classpath
//! in `ZOOKEEPER_CLASSPATH` ([`ZkOptions::classpath`]). A server that cannot
//! start panics with the end of its log: a test never skips quietly.
//!
//! # A holder whose session expires
//!
//! ```
//! use std::time::Duration;
//! use zklock::recipes::{LockState, Mutex};
//! use zklock::Client;
//! use zklock_test::{wait_until, ClientLink, ZkServer};
//!
//! let server = ZkServer::start();
//! // The client under test connects through a link, so that faults can reach it.
//! let link = ClientLink::start(&server.connect_string());
//! let client = Client::connect(&link.connect_string(), Duration::from_secs(10))?;
//! let guard = Mutex::new(&client, "/my-service/lock")?.lock()?;
//! assert_eq!(guard.state(), LockState::Held);
//!
//! link.expire_session();
//! wait_until("the guard to say Lost", Duration::from_secs(30), || {
//!     guard.state() == LockState::Lost
//! });
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # A follower cut off from the leader
//!
//! ```
//! use std::time::Duration;
//! use zklock::recipes::{LockState, Mutex};
//! use zklock::Client;
//! use zklock_test::{wait_until, ZkEnsemble, ZkOptions};
//!
//! // Three members whose links to each other can be cut (syncLimit: 2 ticks).
//! let ensemble = ZkEnsemble::start_with_links(3, &ZkOptions::new().tick_ms(500), 2);
//! let leader = ensemble.leader().expect("a leader");
//! let follower = ensemble.followers()[0];
//!
//! let client = Client::connect(&ensemble.connect_string(), Duration::from_secs(10))?;
//! let guard = Mutex::new(&client, "/my-service/lock")?.lock()?;
//!
//! ensemble.cut_link(leader, follower);
//! // A holder on that follower says Suspended within a second (syncLimit
//! // ticks), then Held again on another member; elsewhere, it never notices.
//! wait_until("the holder to hold", Duration::from_secs(30), || {
//!     guard.state() == LockState::Held
//! });
//! ensemble.heal_all();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

mod expire;
mod link;
mod ports;
pub mod proxy;
mod scratch;
mod sockets;
mod wait;
pub mod watchdog;
pub mod zk;

pub use expire::expire_session;
pub use link::ClientLink;
pub use ports::free_ports;
pub use proxy::{Direction, Handshake, Proxy};
pub use scratch::scratch_dir;
pub use sockets::established_ports;
pub use wait::{poll_until, wait_until};
pub use zk::{LinkState, ZkEnsemble, ZkOptions, ZkServer};

/// README.md's example, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExample;
