//! A holder told `Lost(NoContact)` whose session turns out alive keeps
//! every other contender out until its guard goes, on a real server.
//!
//! "The client has said Lost, the server still has the session" is made
//! certain by stopping the server (SIGKILL) for longer than the session
//! timeout: the client hears nothing and says Lost at T, while a stopped
//! server expires nobody; started again, it gives every session it loads
//! a whole timeout afresh, and the clients (backoff at most 1 s) are back
//! on their old sessions well within it. A network cut cannot do this
//! (the server's clock goes on and expires the session about when the
//! client gives up on it).

use testkit::zk::ZkServer;
use zklock::recipes::{BatchGuard, BatchMutex, LockGuard, LossReason, Mutex, Pending, PendingLock};
use zklock::SessionState;

use super::*;

/// Short enough to wait out, long enough to come back within (the server
/// allows up to 20 ticks).
const SESSION: Duration = Duration::from_secs(8);

/// What B, another process, waits for behind one of A's holdings.
enum Waiter {
    Lock(PendingLock),
    Batch(Pending<BatchGuard>),
}

impl Waiter {
    /// Whether B has been granted (the grant is dropped at once).
    fn granted(&mut self) -> bool {
        match self {
            Waiter::Lock(p) => p.try_take().is_some_and(|r| r.is_ok()),
            Waiter::Batch(p) => p.try_take().is_some_and(|r| r.is_ok()),
        }
    }
}

/// What A holds: a recipe's guard, or a thread's turn in a batch.
enum Holding {
    Guard(LockGuard),
    Batch(BatchGuard),
}

impl Holding {
    fn state(&self) -> LockState {
        match self {
            Holding::Guard(g) => g.state(),
            Holding::Batch(g) => g.state(),
        }
    }

    fn node(&self) -> String {
        match self {
            Holding::Guard(g) => g.node_path().to_owned(),
            Holding::Batch(g) => g.node_path().to_owned(),
        }
    }
}

/// One case: its name, where its queue is, A's holding and B's wait.
struct Case {
    name: &'static str,
    queue: &'static str,
    a: Option<Holding>,
    b: Waiter,
}

/// A round trip on `c` after everything it sent before (a delete queued
/// while the server was down included), and after every watch event the
/// server sent it before that.
fn round_trip(c: &Client) {
    c.sync("/").unwrap();
}

#[test]
fn a_holder_lost_for_no_contact_keeps_others_out_until_its_guard_goes() {
    let server = ZkServer::start_with(500);
    let a = Client::connect(&server.connect_string(), SESSION).unwrap();
    let b = Client::connect(&server.connect_string(), SESSION).unwrap();
    let (a_id, b_id) = (a.session_id(), b.session_id());
    // Each recipe, A's object and B's.
    let mutex = [&a, &b].map(|c| Mutex::new(c, "/nc-mutex").unwrap());
    let rw = [&a, &b].map(|c| RwLock::new(c, "/nc-rw").unwrap());
    let sem = [&a, &b].map(|c| Semaphore::new(c, "/nc-sem", 1).unwrap());
    let elect = [&a, &b].map(|c| Election::new(c, "/nc-elect", b"x").unwrap());
    let batch = [&a, &b].map(|c| BatchMutex::new(c, "/nc-batch", 4).unwrap());
    let mut cases = vec![
        Case {
            name: "mutex",
            queue: "/nc-mutex",
            a: Some(Holding::Guard(mutex[0].lock().unwrap())),
            b: Waiter::Lock(mutex[1].start_lock(None)),
        },
        Case {
            name: "write lock, a reader behind",
            queue: "/nc-rw",
            a: Some(Holding::Guard(rw[0].write().unwrap())),
            b: Waiter::Lock(rw[1].start_read(None)),
        },
        Case {
            name: "semaphore",
            queue: "/nc-sem/leases",
            a: Some(Holding::Guard(sem[0].acquire().unwrap())),
            b: Waiter::Lock(sem[1].start_acquire(None)),
        },
        Case {
            name: "election",
            queue: "/nc-elect",
            a: Some(Holding::Guard(elect[0].campaign().unwrap())),
            b: Waiter::Lock(elect[1].start_campaign(None)),
        },
        Case {
            name: "batch, a thread inside",
            queue: "/nc-batch",
            a: Some(Holding::Batch(batch[0].lock().unwrap())),
            b: Waiter::Batch(batch[1].start_lock(None)),
        },
    ];
    for case in &mut cases {
        let (name, queue, waiter) = (case.name, case.queue, &mut case.b);
        // (A batch's waiter queues for its process when polled.)
        wait_until(&format!("{name}: B queued"), WAIT, || {
            assert!(!waiter.granted(), "{name}: B granted while A holds");
            b.get_children(queue).is_ok_and(|k| k.len() == 2)
        });
    }

    let down = Instant::now();
    server.stop();
    wait_until("every holding of A told Lost", SESSION + WAIT, || {
        cases
            .iter()
            .all(|c| c.a.as_ref().is_some_and(|h| h.state() == LockState::Lost))
    });
    let told = down.elapsed();
    for case in &cases {
        if let Some(Holding::Guard(g)) = &case.a {
            assert_eq!(
                g.lost_reason(),
                Some(LossReason::NoContact),
                "{}",
                case.name
            );
        }
    }
    server.restart();
    wait_until("A and B back", WAIT, || {
        [&a, &b]
            .iter()
            .all(|c| c.state() == SessionState::Connected || c.state().is_terminal())
    });
    assert!(
        a.session_id() == a_id
            && b.session_id() == b_id
            && [&a, &b].iter().all(|c| !c.state().is_terminal()),
        "the sessions did not survive the restart ({:?}, {:?}; told Lost after {told:?}, back \
         after {:?}): the case needs them alive",
        a.state(),
        b.state(),
        down.elapsed()
    );
    // A's connection has carried whatever A's lock machine queued while
    // the server was down (under the old rule, a delete of every node);
    // B has heard every watch event that followed, and a grant needs at
    // most one read more.
    round_trip(&a);
    round_trip(&b);
    round_trip(&b);
    for case in &mut cases {
        let Some(held) = &case.a else { continue };
        let node = held.node();
        assert!(
            b.exists(&node).unwrap().is_some(),
            "{}: A's node {node} went while A's guard, told Lost, still exists",
            case.name
        );
        assert_eq!(
            held.state(),
            LockState::Lost,
            "{}: never Held again",
            case.name
        );
        assert!(
            !case.b.granted(),
            "{}: B granted while A's guard, told Lost, still exists",
            case.name
        );
    }
    // A thread that keeps a guard told Lost and asks for the same lock
    // again would wait behind its own node: refused at once.
    let refused = [
        ("mutex", mutex[0].lock_timeout(BRIEF).map(drop)),
        ("write lock", rw[0].write_timeout(BRIEF).map(drop)),
        (
            "read under the write lock",
            rw[0].read_timeout(BRIEF).map(drop),
        ),
        ("election", elect[0].campaign_timeout(BRIEF).map(drop)),
    ];
    for (name, result) in refused {
        assert_eq!(result, Err(LockError::WouldDeadlock), "{name}");
    }
    // A lets go, case by case: only then is B granted.
    for case in &mut cases {
        let node = match case.a.take() {
            Some(Holding::Guard(g)) => {
                let node = g.node_path().to_owned();
                g.unlock().unwrap();
                node
            }
            Some(Holding::Batch(g)) => {
                let node = g.node_path().to_owned();
                drop(g);
                node
            }
            None => continue,
        };
        wait_until(&format!("{}: B granted", case.name), WAIT, || {
            case.b.granted()
        });
        assert!(b.exists(&node).unwrap().is_none(), "{}", case.name);
    }
}
