//! The semaphore's stored number once the server's reaper has removed the
//! idle path: the path is a container, so its data goes with it, and the
//! next user makes it anew with its own number. A number this `Semaphore`
//! value checked on the old path says nothing about the new one.

use std::sync::OnceLock;

use super::*;

use testkit::proxy::Proxy;
use testkit::zk::{ZkOptions, ZkServer};
use zklock::CreateMode;

/// A server whose container reaper runs every second (the default is a
/// minute), shared by this file's tests.
fn reaping() -> &'static ZkServer {
    static SERVER: OnceLock<ZkServer> = OnceLock::new();
    SERVER.get_or_init(|| {
        ZkServer::start_with_options(
            &ZkOptions::new().jvm_flag("-Dznode.container.checkIntervalMs=1000"),
        )
    })
}

fn connect() -> Client {
    Client::connect(&reaping().connect_string(), T).unwrap()
}

/// Waits until the reaper has removed the idle semaphore path (its
/// `locks` and `leases` go in one pass, the path itself in the next).
fn wait_reaped(c: &Client, p: &str) {
    wait_until("the reaper to remove the idle semaphore path", WAIT, || {
        c.exists(p).unwrap().is_none()
    });
}

/// A value that checked N = 1 on the old path is refused on the path
/// another user made anew with 2, and the other way round: whichever user
/// makes the path anew writes its number, and the other is refused.
#[test]
fn a_different_number_is_refused_after_the_idle_path_was_reaped() {
    let p = path("sem-reaped");
    let (ca, cb) = (connect(), connect());
    let one = Semaphore::new(&ca, &p, 1).unwrap();
    let two = Semaphore::new(&cb, &p, 2).unwrap();
    one.acquire_timeout(WAIT).unwrap().unlock().unwrap();
    wait_reaped(&ca, &p);
    let lease = two.acquire_timeout(WAIT).unwrap();
    assert_eq!(cb.get_data(&p).unwrap().0, b"2");
    assert_eq!(
        one.try_acquire().unwrap_err(),
        LockError::MaxLeasesMismatch {
            stored: 2,
            asked: 1
        }
    );
    lease.unlock().unwrap();
    // Reaped again; now the N = 1 side comes first and makes it anew.
    wait_reaped(&ca, &p);
    let lease = one.acquire_timeout(WAIT).unwrap();
    assert_eq!(ca.get_data(&p).unwrap().0, b"1");
    assert_eq!(
        two.try_acquire().unwrap_err(),
        LockError::MaxLeasesMismatch {
            stored: 1,
            asked: 2
        }
    );
    assert_eq!(one.lease_count().unwrap(), 1);
    lease.unlock().unwrap();
}

/// The same number on both sides: the path made anew is accepted, and
/// both leases of two are granted.
#[test]
fn the_same_number_is_admitted_on_a_path_made_anew() {
    let p = path("sem-reaped-same");
    let (ca, cb) = (connect(), connect());
    let a = Semaphore::new(&ca, &p, 2).unwrap();
    a.acquire_timeout(WAIT).unwrap().unlock().unwrap();
    wait_reaped(&ca, &p);
    let b = Semaphore::new(&cb, &p, 2).unwrap();
    let lease_b = b.acquire_timeout(WAIT).unwrap();
    let lease_a = a.try_acquire().unwrap().expect("the second lease of two");
    assert_eq!(a.lease_count().unwrap(), 2);
    assert_eq!(ca.get_data(&p).unwrap().0, b"2");
    lease_a.unlock().unwrap();
    lease_b.unlock().unwrap();
}

/// The path goes and comes back between a user's check of the number and
/// its queueing: the check passed on the old path, but the user's nodes
/// land on the new one, so it checks again before it takes a lease. Here
/// the user's requests are held after its read of the number; the path is
/// reaped and made anew with 2 by another user; then its requests go on.
#[test]
fn a_path_made_anew_between_the_check_and_the_queue_is_checked_again() {
    /// The op code of getData.
    const GET_DATA: i32 = 4;
    let p = path("sem-reaped-race");
    let c = connect();
    Semaphore::new(&c, &p, 1)
        .unwrap()
        .acquire_timeout(WAIT)
        .unwrap()
        .unlock()
        .unwrap();
    // Kept from the reaper until the user below has read the number.
    let pin = format!("{p}/pin");
    c.create(&pin, b"", CreateMode::Persistent).unwrap();
    let proxy = Proxy::start(reaping().addr());
    let held = Client::connect(&proxy.connect_string(), Duration::from_secs(30)).unwrap();
    let one = Semaphore::new(&held, &p, 1).unwrap();
    proxy.hold_requests_after_reply_of_next(GET_DATA);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(one.acquire_timeout(WAIT).map(drop));
    });
    assert!(proxy.wait_requests_held(WAIT), "the number was read");
    c.delete(&pin, None).unwrap();
    wait_reaped(&c, &p);
    let two = Semaphore::new(&c, &p, 2).unwrap();
    let lease = two.acquire_timeout(WAIT).unwrap();
    assert_eq!(c.get_data(&p).unwrap().0, b"2");
    proxy.clear();
    assert_eq!(
        rx.recv_timeout(WAIT * 2).expect("acquire returns"),
        Err(LockError::MaxLeasesMismatch {
            stored: 2,
            asked: 1
        })
    );
    assert_eq!(two.lease_count().unwrap(), 1);
    lease.unlock().unwrap();
}

/// The path goes and comes back while a user holds the gate and has not
/// yet queued for a lease (a third party deleted its gate node, so
/// nothing kept the idle path from the reaper): its lease node lands on
/// the path made anew with 2, and the lease granted there is released,
/// not handed out under 1.
#[test]
fn a_lease_granted_on_a_path_made_anew_is_checked_before_it_is_handed_out() {
    /// The op code of getChildren, the gate's listing.
    const GET_CHILDREN: i32 = 8;
    let p = path("sem-reaped-grant");
    let c = connect();
    Semaphore::new(&c, &p, 1)
        .unwrap()
        .acquire_timeout(WAIT)
        .unwrap()
        .unlock()
        .unwrap();
    let proxy = Proxy::start(reaping().addr());
    let held = Client::connect(&proxy.connect_string(), Duration::from_secs(30)).unwrap();
    let one = Semaphore::new(&held, &p, 1).unwrap();
    proxy.hold_requests_after_reply_of_next(GET_CHILDREN);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(one.acquire_timeout(WAIT * 2).map(drop));
    });
    assert!(proxy.wait_requests_held(WAIT), "the gate was granted");
    let locks = format!("{p}/locks");
    for node in children(&c, &locks) {
        c.delete(&format!("{locks}/{node}"), None).unwrap();
    }
    wait_reaped(&c, &p);
    let two = Semaphore::new(&c, &p, 2).unwrap();
    let lease = two.acquire_timeout(WAIT).unwrap();
    proxy.clear();
    let leases = format!("{p}/leases");
    wait_children(&c, &leases, 2);
    lease.unlock().unwrap();
    assert_eq!(
        rx.recv_timeout(WAIT * 2).expect("acquire returns"),
        Err(LockError::MaxLeasesMismatch {
            stored: 2,
            asked: 1
        })
    );
    testkit::wait_no_children(&c, &leases, WAIT);
}
