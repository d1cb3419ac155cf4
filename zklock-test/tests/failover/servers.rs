//! Servers start, serve, and leave nothing behind: dropped, in a panicking
//! test, or started from a ZooKeeper that is not there.

use std::panic;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread;

use zklock_test::{free_ports, wait_until, ZkEnsemble, ZkOptions, ZkServer};

use super::*;

/// Whether anything answers ZooKeeper's `ruok` at `server`'s address.
fn answers(server: &ZkServer) -> bool {
    zklock_test::zk::try_four_letter(server.addr(), "ruok").is_ok()
}

#[test]
fn a_standalone_server_serves_on_its_port_and_leaves_nothing_when_dropped() {
    let port = free_ports(1)[0];
    let server = ZkServer::start_with_options(&ZkOptions::new().client_port(port));
    assert_eq!(server.connect_string(), format!("127.0.0.1:{port}"));
    let (client, guard) = holder(
        &server.connect_string(),
        Duration::from_secs(10),
        "/servers/one",
    );
    drop(guard);
    client.close().expect("closing");
    let dir = server.dir().to_path_buf();
    assert!(dir.join("zoo.cfg").is_file());
    let addr = server.addr();

    drop(server);
    assert!(!dir.exists(), "{} is left behind", dir.display());
    assert!(zklock_test::zk::try_four_letter(addr, "ruok").is_err());
}

#[test]
fn a_server_in_a_panicking_test_is_stopped_and_removed() {
    let (tx, rx) = mpsc::channel::<(PathBuf, u32)>();
    let outcome = thread::spawn(move || {
        let server = ZkServer::start();
        assert!(answers(&server));
        let pid = server.java_pid().expect("the JVM's pid");
        tx.send((server.dir().to_path_buf(), pid)).expect("sending");
        panic!("a test fails while its server runs");
    })
    .join();
    assert!(outcome.is_err());
    let (dir, pid) = rx.recv().expect("the server's directory");
    assert!(!dir.exists(), "{} is left behind", dir.display());
    wait_until("the JVM to be gone", WAIT, || {
        !PathBuf::from(format!("/proc/{pid}")).exists()
    });
}

#[test]
fn a_zookeeper_given_by_classpath_serves() {
    // Debian's jar, named explicitly as a user names any other ZooKeeper.
    let classpath = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar";
    let server = ZkServer::start_with_options(&ZkOptions::new().classpath(classpath));
    assert!(server.four_letter("srvr").contains("Mode: standalone"));
    let pid = server.java_pid().expect("the JVM's pid");
    let command_line = std::fs::read(format!("/proc/{pid}/cmdline")).expect("its command line");
    let args: Vec<&[u8]> = command_line.split(|&b| b == 0).collect();
    let cp = args
        .iter()
        .position(|a| *a == b"-cp")
        .expect("a -cp argument");
    assert_eq!(args[cp + 1], classpath.as_bytes());
}

#[test]
fn a_missing_zookeeper_fails_loudly() {
    let options = ZkOptions::new().zookeeper_home("/nonexistent/zookeeper");
    let failure = panic::catch_unwind(|| ZkServer::start_with_options(&options))
        .err()
        .expect("no server without ZooKeeper");
    let message = failure
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(
        message.contains("exited") && message.contains("ZooKeeperServerMain"),
        "the failure says why: {message}"
    );
}

#[test]
fn an_ensemble_of_three_elects_a_leader_and_serves_locks() {
    let ensemble = ZkEnsemble::start(3);
    assert_eq!(ensemble.len(), 3);
    let leader = ensemble.leader().expect("a leader");
    let followers = ensemble.followers();
    assert_eq!(followers.len(), 2);
    assert!(!followers.contains(&leader));
    let (_client, guard) = holder(
        &ensemble.connect_string(),
        Duration::from_secs(10),
        "/servers/ensemble",
    );
    assert!(!lock_is_free(
        &ensemble.connect_string(),
        "/servers/ensemble"
    ));
    guard.unlock().expect("releasing");
    wait_until("the lock to be free", WAIT, || {
        lock_is_free(&ensemble.connect_string(), "/servers/ensemble")
    });
}
