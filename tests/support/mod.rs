//! Shared by every integration test binary: real servers, the fault proxy,
//! peers, and small helpers over the client.
#![allow(dead_code)]

pub mod certs;
pub mod peers;
pub mod proxy;
pub mod zk;

use std::time::{Duration, Instant};

use zklock::Client;

/// A client of the binary's shared server.
pub fn shared_client(session_timeout: Duration) -> Client {
    Client::connect(&zk::shared().connect_string(), session_timeout)
        .expect("connect to the test server")
}

/// The children of `path`; none if it does not exist.
pub fn children(c: &Client, path: &str) -> Vec<String> {
    match c.get_children(path) {
        Ok(c) => c,
        Err(e) if e.is_no_node() => vec![],
        Err(e) => panic!("listing {path}: {e}"),
    }
}

/// Waits (bounded) until `path` has at least `n` children: contenders
/// started elsewhere have joined the queue.
pub fn wait_children(c: &Client, path: &str, n: usize, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while children(c, path).len() < n {
        assert!(
            Instant::now() < deadline,
            "{path} never reached {n} children"
        );
        std::thread::yield_now();
    }
}

/// Waits (bounded) until `path` has no children. A dropped guard releases
/// without blocking: its own session's later calls see the node gone, but
/// another session may look before the delete is applied.
pub fn wait_no_children(c: &Client, path: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let left = children(c, path);
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{path} still has {left:?} after {timeout:?}"
        );
        std::thread::yield_now();
    }
}
