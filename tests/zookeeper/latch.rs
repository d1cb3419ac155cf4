//! Leader latches against a real ZooKeeper: `close` leaves nothing behind
//! when it returns, whatever moment it lands on. (That they start no thread
//! of their own is counted in the whole_process binary, where no other test
//! runs meanwhile.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zklock::recipes::{CloseMode, Election, LatchEvent};
use zklock::{Client, Observer};

const WAIT: Duration = Duration::from_secs(20);

/// Counts the grants of nodes under one path, on the client's I/O thread,
/// in the turn that hands the grant to the latch (just before it).
struct Grants {
    path: String,
    count: AtomicUsize,
}

impl Observer for Grants {
    fn lock_acquired(&self, node: &str, _waited: Duration) {
        if node.starts_with(&self.path) {
            self.count.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// How long after the grant reached the I/O thread an odd round closes:
/// 0 to 7.9 µs, in steps of 100 ns. The latch handles the grant a few µs
/// after the observer hears of it; the window where a close used to let a
/// `Gained` through after `Closed` is about a µs wide.
fn delay_ns(round: usize) -> u64 {
    (round / 2 % 80) as u64 * 100
}

/// Rounds of the race below, and a bound on their time.
const ROUNDS: usize = 2000;
const ROUNDS_TIME: Duration = Duration::from_secs(120);

/// `close` racing the grant of a latch first in line. Even rounds close
/// right after the start (the create or the grant still on its way); odd
/// rounds close when the grant reaches the client's I/O thread, 0 to 7.9 µs
/// later ([`delay_ns`]), so that the close lands before, inside and after
/// the latch's handling of the grant. After `close` returns `Ok`:
/// the node is gone on the server (another session lists none), and once
/// a later reply has come back on the latch's client (the I/O thread is
/// past the grant), the events end with one `Closed`: `Gained` never
/// follows it.
#[test]
fn close_racing_the_grant_leaves_no_node_and_no_event_after_closed() {
    let server = testkit::zk::shared();
    let path = format!("/latch-close-race-{}", std::process::id());
    let grants = Arc::new(Grants {
        path: format!("{path}/"),
        count: AtomicUsize::new(0),
    });
    let client = Client::builder(&server.connect_string())
        .session_timeout(WAIT)
        .observer(grants.clone())
        .connect()
        .unwrap();
    let other = Client::connect(&server.connect_string(), WAIT).unwrap();
    let started = Instant::now();
    let (mut nodes_left, mut after_closed, mut rounds) = (Vec::new(), Vec::new(), 0);
    for round in 0..ROUNDS {
        if started.elapsed() > ROUNDS_TIME {
            break;
        }
        rounds += 1;
        let granted_before = grants.count.load(Ordering::SeqCst);
        let latch = Election::new(&client, &path, b"me").unwrap().latch();
        let reader = latch.events().clone();
        if round % 2 == 1 {
            let by = Instant::now() + WAIT;
            while grants.count.load(Ordering::SeqCst) == granted_before {
                assert!(Instant::now() < by, "round {round}: never granted");
                std::hint::spin_loop();
            }
            let later = Instant::now() + Duration::from_nanos(delay_ns(round));
            while Instant::now() < later {
                std::hint::spin_loop();
            }
        }
        latch.close(CloseMode::NotifyLeader).unwrap();
        let left = testkit::children(&other, &path);
        if !left.is_empty() {
            nodes_left.push((round, left));
        }
        client.exists("/").unwrap();
        let told: Vec<_> = reader.try_iter().collect();
        let well_ended = matches!(
            &told[..],
            [LatchEvent::Closed]
                | [
                    LatchEvent::Gained { .. },
                    LatchEvent::Lost { reason: None },
                    LatchEvent::Closed
                ]
        );
        if !well_ended {
            after_closed.push((round, told));
        }
        testkit::wait_no_children(&other, &path, WAIT);
    }
    eprintln!(
        "{rounds} rounds: {} with our node listed after close, {} with events out of order",
        nodes_left.len(),
        after_closed.len()
    );
    assert!(
        nodes_left.is_empty(),
        "the node was still there when close returned: {:?}",
        &nodes_left[..nodes_left.len().min(5)]
    );
    assert!(
        after_closed.is_empty(),
        "events after close (round, events): {:?}",
        &after_closed[..after_closed.len().min(5)]
    );
}
