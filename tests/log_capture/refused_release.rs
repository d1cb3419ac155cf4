//! A release the server refuses: the dropped guard hears `Lost`, and the
//! error, naming the node and what to do, is in the log.

use zklock::recipes::{LockState, Mutex};
use zklock::{perms, CreateOptions};

use super::*;

#[test]
fn a_dropped_guard_whose_release_is_refused_logs_an_error_naming_its_node() {
    init();
    let server = fast();
    let t = Duration::from_secs(6);
    let admin = Client::connect(&server.connect_string(), t).unwrap();
    admin.add_auth("digest", b"log-admin:secret").unwrap();
    // A lock path its contenders may create in but not delete from.
    let path = format!("/res-refused-release-{}", std::process::id());
    let no_delete = CreateOptions::new(CreateMode::Persistent)
        .acl(testkit::admin_and_world_acl(perms::READ | perms::CREATE));
    admin.create_with(&path, b"", &no_delete).unwrap();

    let c = Client::connect(&server.connect_string(), t).unwrap();
    let guard = Mutex::new(&c, &path)
        .unwrap()
        .lock_timeout(Duration::from_secs(20))
        .unwrap();
    let node = guard.node_path().to_owned();
    let states = guard.state_changes();
    drop(guard);
    loop {
        match states.recv_timeout(Duration::from_secs(20)) {
            Ok(LockState::Lost) => break,
            Ok(_) => {}
            Err(e) => panic!("the dropped guard heard no Lost ({e})"),
        }
    }
    let line = format!("ERROR: the server refused to delete lock node {node}");
    wait_until("the refusal in the log", Duration::from_secs(20), || {
        logged(&line)
    });
    assert!(logged(
        "until this session ends (close the client to free it)"
    ));
    assert_no_io_panic();
    c.close().unwrap();
}
