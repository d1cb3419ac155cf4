//! `zklock exec` at the end of ZooKeeper's sequence counter (the lock
//! parent's stored cversion set near 2147483647 by `testkit::zk::ZkHarness`,
//! docs/SEQUENCE_END.md): a holder whose queue runs past the end is told it
//! lost the lock and stops CMD, but no other `zklock exec` may run its
//! command before that CMD has ended. The referee: each CMD makes the same
//! directory with an atomic `mkdir`; a second one inside fails it.

use std::time::Duration;

use testkit::zk::ZkHarness;
use testkit::{children, scratch_dir, wait_children, wait_until};
use zklock::{Client, CreateMode};

use crate::support::{exec_script, PROMPT};

const LOCK: &str = "/cli-end";

/// The first holder: inside the referee, then waits; on SIGTERM it says
/// so (`told`) and stays inside until the test lets it finish (`go`),
/// polling for that file a bounded number of times.
const SLOW_TO_STOP: &str = r#"mkdir "$1/inside" || { echo OVERLAP; exit 99; }
trap 'touch "$1/told"; n=0; while [ ! -e "$1/go" ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done; rmdir "$1/inside"; exit 143' TERM
echo locked
sleep 60 & wait"#;

/// The next holder: in and out of the referee.
const QUICK: &str = r#"mkdir "$1/inside" || { echo OVERLAP; exit 99; }
echo inside
rmdir "$1/inside""#;

/// A sequential node named as a zklock contender, owned by `admin`.
fn contender_node(admin: &Client) -> String {
    admin
        .create(
            &format!("{LOCK}/_c_00000000-0000-4000-8000-00000000000a-lock-"),
            b"",
            CreateMode::EphemeralSequential,
        )
        .expect("create a contender's node")
}

/// The holder A (node 2147483644) is queued before by a gate node G
/// (…645, the test's) and a second `zklock exec` B (…646, issued before
/// the end, so it may be granted). A node X past the end (…647) appears:
/// A is told Lost and its CMD, slow to stop, gets SIGTERM. X and G go;
/// nothing but A's node now stands before B. A's node must stay until its
/// CMD has ended: B's CMD then finds the referee free.
#[test]
fn a_holder_told_of_the_counters_end_keeps_others_out_until_its_command_ends() {
    let server = ZkHarness::start(Duration::from_millis(200));
    let connect = server.connect_string();
    let admin = Client::connect(&connect, Duration::from_secs(10)).unwrap();
    admin.create(LOCK, b"", CreateMode::Persistent).unwrap();
    server.set_sequence_counter(LOCK, i32::MAX - 3);
    let dir = scratch_dir("cli-end");
    let d = dir.to_str().unwrap();

    let mut a = exec_script(&connect, &["-w", "30", "-k", "60"], LOCK, SLOW_TO_STOP, d);
    a.expect_line("locked");
    let [a_node] = &children(&admin, LOCK)[..] else {
        panic!("one node: {:?}", children(&admin, LOCK))
    };
    assert!(a_node.ends_with("-2147483644"), "{a_node}");
    let gate = contender_node(&admin);
    let b = exec_script(&connect, &["-w", "30"], LOCK, QUICK, d);
    wait_children(&admin, LOCK, 3, PROMPT);

    let past_the_end = contender_node(&admin);
    assert!(past_the_end.ends_with("-2147483647"), "{past_the_end}");
    wait_until("A to be told and its CMD to get SIGTERM", PROMPT, || {
        dir.join("told").exists()
    });
    admin.delete(&past_the_end, None).unwrap();
    admin.delete(&gate, None).unwrap();
    // A's CMD is still inside: its node must still keep B out.
    let queue = children(&admin, LOCK);
    if !queue.contains(a_node) {
        // B is let in now: the referee tells what it found.
        let (status, out, err) = b.finish(PROMPT);
        panic!(
            "A's node went while its CMD was still running: {queue:?}; B's CMD ran then, \
             and exited {status}: {out:?} {err}"
        );
    }
    std::fs::write(dir.join("go"), b"").unwrap();

    let (status, _, err) = a.finish(PROMPT);
    assert_eq!(status.code(), Some(75), "A: {err}");
    assert!(err.contains("sequence counter is exhausted"), "A: {err}");
    let (status, out, err) = b.finish(PROMPT);
    assert!(
        !out.iter().any(|l| l == "OVERLAP"),
        "B's CMD ran while A's was inside: {out:?} {err}"
    );
    assert_eq!(status.code(), Some(0), "B: {out:?} {err}");
    assert_eq!(out, ["inside"], "B: {err}");
    let _ = std::fs::remove_dir_all(dir);
}
