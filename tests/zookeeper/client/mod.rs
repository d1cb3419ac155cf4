//! The blocking client against a real standalone ZooKeeper.

mod nodes;
mod refusals;
mod session;
mod watches;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use testkit::proxy::{Direction, Proxy};
use testkit::zk;
use zklock::{
    perms, Acl, Client, CreateMode, CreateOptions, Error, ErrorCode, EventType, Id, Op, OpCode,
    OpResult, SessionState,
};

const T: Duration = Duration::from_secs(10);

fn client() -> Client {
    testkit::shared_client(T)
}

/// A fresh persistent root for one test, removed by nobody (the server is per-binary).
fn root(c: &Client, name: &str) -> String {
    let path = format!("/client-{name}-{}", std::process::id());
    c.create(&path, b"", CreateMode::Persistent)
        .expect("create test root");
    path
}
