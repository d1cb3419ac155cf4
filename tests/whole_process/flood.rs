//! A server that sends more than the application reads: a fake server on
//! loopback floods a persistent watch nobody reads with a million
//! notifications. The client's memory stays flat, the watch keeps at most
//! its capacity, and what it discarded is counted and marked.
//!
//! In whole_process, one test at a time: the RSS measured is this
//! process's, and no other test may allocate meanwhile.

use std::time::Duration;

use testkit::flood::FloodServer;
use zklock::{AddWatchMode, Client, EventType, DEFAULT_PERSISTENT_WATCH_CAPACITY};

const EVENTS: u64 = 1_000_000;
/// Growth allowed while a million events pass: an unbounded queue of them
/// grows far past it.
const RSS_SLACK: u64 = 24 << 20;

#[test]
fn an_unread_persistent_watch_flooded_by_the_server_stays_bounded() {
    let _turn = crate::one_at_a_time();
    let server = FloodServer::start("/flooded", EVENTS);
    let c = Client::builder(&server.addr().to_string())
        .session_timeout(Duration::from_secs(20))
        .connect()
        .expect("the fake server grants a session");
    let before = testkit::rss_bytes().expect("/proc/self/status says VmRSS");
    let watch = c
        .add_watch("/flooded", AddWatchMode::Persistent)
        .expect("the fake server answers addWatch");
    testkit::wait_until("the flood to be sent", Duration::from_secs(120), || {
        server.sent() >= EVENTS
    });
    // Answered after every notification: the client has taken them all.
    assert_eq!(c.exists("/after-the-flood").unwrap(), None);
    let after = testkit::rss_bytes().expect("/proc/self/status says VmRSS");
    assert!(
        c.watch_events_received() >= EVENTS,
        "{} events received",
        c.watch_events_received()
    );
    assert!(
        after < before + RSS_SLACK,
        "RSS grew from {} to {} MiB",
        before >> 20,
        after >> 20
    );

    // Unread: at most the capacity, the discarded counted, and a
    // "re-read" event wherever events were discarded.
    let mut queued = 0u64;
    let mut events = 0u64;
    let mut resyncs = 0u64;
    while let Some(e) = watch.try_recv().expect("the watch is alive") {
        queued += 1;
        assert_eq!(e.path, "/flooded");
        match e.kind {
            EventType::None => resyncs += 1,
            EventType::NodeDataChanged => events += 1,
            other => panic!("unexpected event {other:?}"),
        }
    }
    assert!(
        queued <= DEFAULT_PERSISTENT_WATCH_CAPACITY as u64,
        "{queued} queued"
    );
    assert_eq!(resyncs, 1, "the queue starts with the re-read mark");
    let dropped = watch.dropped_events();
    assert!(dropped > 0);
    assert_eq!(events + dropped, EVENTS, "every event read or counted");
    c.close().ok();
}

/// With a small capacity: every overflow leaves one re-read event, the
/// count adds up, and the error that ends the watch is never discarded.
#[test]
fn an_overflowing_watch_still_reports_its_end() {
    let _turn = crate::one_at_a_time();
    const SMALL: usize = 8;
    const SOME: u64 = 1000;
    let server = FloodServer::start("/small", SOME);
    let c = Client::builder(&server.addr().to_string())
        .session_timeout(Duration::from_secs(20))
        .persistent_watch_capacity(SMALL)
        .connect()
        .expect("the fake server grants a session");
    let watch = c
        .add_watch("/small", AddWatchMode::Persistent)
        .expect("the fake server answers addWatch");
    testkit::wait_until("the flood to be sent", Duration::from_secs(60), || {
        server.sent() >= SOME
    });
    assert_eq!(c.exists("/after-the-flood").unwrap(), None);
    c.close().ok();
    let mut outcomes = Vec::new();
    let started = std::time::Instant::now();
    loop {
        match watch.recv_timeout(Duration::from_secs(10)) {
            Ok(e) => outcomes.push(Ok(e.kind)),
            Err(zklock::Error::Timeout) => panic!("no end after {outcomes:?}"),
            Err(e) => {
                outcomes.push(Err(e));
                break;
            }
        }
        assert!(started.elapsed() < Duration::from_secs(30));
    }
    assert!(
        outcomes.len() <= SMALL,
        "{} queued: {outcomes:?}",
        outcomes.len()
    );
    assert_eq!(outcomes.first(), Some(&Ok(EventType::None)), "{outcomes:?}");
    assert_eq!(outcomes.last(), Some(&Err(zklock::Error::Closed)));
    let read = outcomes
        .iter()
        .filter(|o| **o == Ok(EventType::NodeDataChanged))
        .count() as u64;
    assert_eq!(read + watch.dropped_events(), SOME);
    assert_eq!(watch.recv().unwrap_err(), zklock::Error::Closed);
}
