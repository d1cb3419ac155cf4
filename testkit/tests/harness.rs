//! Self-test of `testkit::zk::ZkHarness`: a real embedded ZooKeeper whose
//! stored cversion a test can set, started and removed by testkit.

use std::time::Duration;

use testkit::zk::ZkHarness;
use zklock::{Client, CreateMode};

#[test]
fn harness_sets_the_counter_a_client_then_sees() {
    let server = ZkHarness::start(Duration::from_millis(200));
    let dir = server.dir().to_path_buf();
    let c = Client::connect(&server.connect_string(), Duration::from_secs(4)).unwrap();
    c.create("/p", b"", CreateMode::Persistent).unwrap();
    assert_eq!(server.stored("/p").cversion, 0);
    server.set_sequence_counter("/p", i32::MAX - 1);
    let a = c
        .create("/p/n-", b"", CreateMode::PersistentSequential)
        .unwrap();
    let b = c
        .create("/p/n-", b"", CreateMode::PersistentSequential)
        .unwrap();
    assert_eq!(
        (a.as_str(), b.as_str()),
        ("/p/n-2147483646", "/p/n-2147483647")
    );
    // DataTree.createNode stores only a greater cversion: it stays at the end.
    let stored = server.stored("/p");
    assert_eq!((stored.cversion, stored.num_children), (i32::MAX, 2));
    drop(c);
    server.stop();
    assert!(dir.is_dir(), "stop keeps the directory");
    drop(server);
    assert!(!dir.exists(), "drop removes {}", dir.display());
}

#[test]
#[should_panic(expected = "NoNode")]
fn harness_refuses_a_missing_node() {
    let server = ZkHarness::start(Duration::from_millis(200));
    server.set_sequence_counter("/nope", 1);
}
