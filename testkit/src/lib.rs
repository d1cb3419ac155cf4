//! What zklock's tests, examples and benchmark run against, written once.
//! The servers, the fault proxy, the watchdog and the bounded waits are the
//! published crate `zklock-test`, re-exported here, so that the project's
//! tests use the same public API as its users':
//!
//! - [`zk`]: real ZooKeeper 3.8 servers, standalone or in ensembles, plain,
//!   TLS or SASL, each a JVM on free loopback ports with a directory of its own
//!   (`zklock-test`'s, and [`zk::ZkHarness`], a server whose tree a test edits);
//! - [`certs`]: the certificates and key stores for the TLS servers and clients;
//! - [`kdc`]: a real MIT Kerberos KDC, its realm, principals and keytabs, for
//!   the Kerberos (GSSAPI) servers and clients;
//! - [`proxy`]: a fault-injecting TCP proxy (cut, blackhole, stall, delay,
//!   refuse, lose the reply to one request), and [`ClientLink`] over it;
//! - [`mangler`] and [`garbage`]: fake servers that send malformed bytes;
//!   [`flood`]: one that sends watch notifications without end;
//! - [`peers`]: real Curator (Java) and kazoo (Python) processes contending
//!   for the same locks;
//! - [`raw`]: a client made of the codec alone, for tests that must not
//!   lean on the client under test;
//! - bounded waits ([`wait_until`]), scratch directories, free ports,
//!   processes and the client's I/O threads, and helpers over a zklock
//!   client ([`children`], [`wait_no_children`], ...).
//!
//! Everything listens on 127.0.0.1 only. Nothing here skips: a server or
//! peer that cannot start panics and says why (and what to install).

pub mod certs;
mod client;
pub mod flood;
pub mod garbage;
pub mod kdc;
pub mod mangler;
pub mod peers;
mod procfs;
pub mod raw;
mod scratch;
pub mod zk;

pub use zklock_test::{
    established_ports, expire_session, free_ports, poll_until, proxy, scratch_dir, wait_until,
    watchdog, ClientLink,
};

pub use client::{
    admin_and_world_acl, children, read_after_reconnect, sequence_of, shared_client, wait_children,
    wait_no_children,
};
pub use procfs::{
    current_thread_id, io_thread_ids, process_alive, rss_bytes, thread_count, thread_cpu,
    thread_cpu_over, thread_state, thread_switches,
};
pub use scratch::target_dir;
