//! Small helpers over a zklock [`Client`]: a client of the binary's shared
//! server, and the children of a lock path, now or once they are what a test
//! expects.

use std::time::{Duration, Instant};

use zklock::{Acl, Client, Id, Stat};

use crate::{poll_until, zk};

/// A client of the binary's shared server ([`zk::shared`]).
pub fn shared_client(session_timeout: Duration) -> Client {
    Client::connect(&zk::shared().connect_string(), session_timeout)
        .expect("connect to the test server")
}

/// The children of `path`, sorted (the server lists them in no particular
/// order); none if it does not exist.
pub fn children(c: &Client, path: &str) -> Vec<String> {
    match c.get_children(path) {
        Ok(mut names) => {
            names.sort();
            names
        }
        Err(e) if e.is_no_node() => vec![],
        Err(e) => panic!("listing {path}: {e}"),
    }
}

/// Waits (bounded) until `path` has at least `n` children: contenders
/// started elsewhere have joined the queue.
pub fn wait_children(c: &Client, path: &str, n: usize, timeout: Duration) {
    let mut seen = Vec::new();
    let reached = poll_until(timeout, || {
        seen = children(c, path);
        seen.len() >= n
    });
    assert!(
        reached,
        "{path} never reached {n} children in {timeout:?}; has {seen:?}"
    );
}

/// Waits (bounded) until `path` has no children. A dropped guard releases
/// without blocking: its own session's later calls see the node gone, but
/// another session may look before the delete is applied.
pub fn wait_no_children(c: &Client, path: &str, timeout: Duration) {
    let mut left = Vec::new();
    let gone = poll_until(timeout, || {
        left = children(c, path);
        left.is_empty()
    });
    assert!(gone, "{path} still has {left:?} after {timeout:?}");
}

/// Reads `path` once the client is connected again (bounded by `timeout`):
/// for tests that cut the connection and check what the session kept.
pub fn read_after_reconnect(c: &Client, path: &str, timeout: Duration) -> (Vec<u8>, Stat) {
    let deadline = Instant::now() + timeout;
    loop {
        match c.get_data(path) {
            Ok(read) => return read,
            Err(e) if e.is_connection_loss() && Instant::now() < deadline => {
                let _ = c.wait_connected(Duration::from_millis(200));
            }
            Err(e) => panic!("reading {path} after the reconnect: {e}"),
        }
    }
}

/// An ACL for nodes an admin session creates: its own identity may do all
/// (`Acl::creator_all`), everyone else only `world_perms` (`zklock::perms`).
/// The admin session must have added its credentials first.
pub fn admin_and_world_acl(world_perms: i32) -> Vec<Acl> {
    let world = Acl {
        perms: world_perms,
        id: Id {
            scheme: "world".into(),
            id: "anyone".into(),
        },
    };
    [Acl::creator_all(), vec![world]].concat()
}

/// The number ZooKeeper appended to a node name (`%010d`): ten digits when
/// non-negative; a minus sign and nine or ten digits when negative. The
/// names the tests use end their prefix in `-lock-`, `-latch-`, `-lease-`,
/// `__WRIT__` or kazoo's `__lock__`, so a `-` right after a `-` or `_` is
/// the sign.
pub fn sequence_of(node: &str) -> i32 {
    let head = node.trim_end_matches(|c: char| c.is_ascii_digit());
    let digits = node.len() - head.len();
    let negative =
        head.ends_with('-') && (digits == 9 || head.ends_with("--") || head.ends_with("_-"));
    let start = if negative { head.len() - 1 } else { head.len() };
    node[start..]
        .parse()
        .unwrap_or_else(|e| panic!("{node}: no sequence number: {e}"))
}
