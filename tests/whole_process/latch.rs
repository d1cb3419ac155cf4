//! Leader latches have no thread of their own: the client's I/O thread
//! drives them.

use std::time::Duration;

use zklock::recipes::{Election, LatchEvent};
use zklock::Client;

const WAIT: Duration = Duration::from_secs(20);

#[test]
fn a_hundred_latches_start_no_thread_and_each_leads_its_path() {
    let _turn = crate::one_at_a_time();
    let server = testkit::zk::shared();
    let client = Client::connect(&server.connect_string(), WAIT).unwrap();
    let before = testkit::thread_count();
    let base = format!("/latches-{}", std::process::id());
    let latches: Vec<_> = (0..100)
        .map(|i| {
            Election::new(&client, &format!("{base}/{i}"), b"me")
                .unwrap()
                .latch()
        })
        .collect();
    for (i, latch) in latches.iter().enumerate() {
        match latch.events().recv_timeout(WAIT) {
            Ok(LatchEvent::Gained { .. }) => assert!(latch.is_leader(), "latch {i}"),
            other => panic!("latch {i}: {other:?}"),
        }
    }
    assert_eq!(
        testkit::thread_count(),
        before,
        "latches must not start threads"
    );
    // Dropped: every leadership node goes, without blocking.
    drop(latches);
    for i in 0..100 {
        testkit::wait_no_children(&client, &format!("{base}/{i}"), WAIT);
    }
}
