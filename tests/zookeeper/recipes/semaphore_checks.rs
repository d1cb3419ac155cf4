//! The semaphore's check of the number of leases stored on its path: a
//! refusal by the server is an error, and a check that could not run is
//! run again by the next call; the caller's deadline bounds it.

use super::*;

use testkit::proxy::Proxy;
use zklock::{perms, Acl, CreateMode, CreateOptions, Error, ErrorCode};

/// An admin session and the ACL "the admin may do all, the world `perms`".
fn admin_and(name: &str, world_perms: i32) -> (Client, Vec<Acl>) {
    let admin = client();
    admin
        .add_auth("digest", format!("{name}:secret").as_bytes())
        .unwrap();
    (admin, testkit::admin_and_world_acl(world_perms))
}

fn no_auth(e: &LockError) -> bool {
    matches!(
        e,
        LockError::Client(Error::Server {
            code: ErrorCode::NoAuth,
            ..
        })
    )
}

/// A stored number the user may not read is refused, not taken for a
/// missing path; once readable, it is checked (and disagrees).
#[test]
fn an_unreadable_count_is_refused_and_checked_once_readable() {
    let p = path("sem-unreadable");
    let (admin, acl) = admin_and(
        "sem-read",
        perms::CREATE | perms::WRITE | perms::DELETE | perms::ADMIN,
    );
    admin
        .create_with(
            &p,
            b"3",
            &CreateOptions::new(CreateMode::Persistent).acl(acl),
        )
        .unwrap();
    let two = Semaphore::new(&client(), &p, 2).unwrap();
    let refused = two.acquire_timeout(WAIT).unwrap_err();
    assert!(no_auth(&refused), "{refused:?}");
    admin.set_acl(&p, Acl::open_unsafe(), None).unwrap();
    assert_eq!(
        two.acquire_timeout(WAIT).unwrap_err(),
        LockError::MaxLeasesMismatch {
            stored: 3,
            asked: 2
        }
    );
}

/// A path created empty (as Curator's or kazoo's may be) whose count the
/// user may not write: an error, not a semaphore run unchecked.
#[test]
fn a_count_the_user_may_not_write_is_an_error() {
    let p = path("sem-unwritable");
    let (admin, acl) = admin_and("sem-write", perms::READ | perms::CREATE | perms::DELETE);
    admin
        .create_with(
            &p,
            b"",
            &CreateOptions::new(CreateMode::Persistent).acl(acl),
        )
        .unwrap();
    let refused = Semaphore::new(&client(), &p, 2)
        .unwrap()
        .acquire_timeout(WAIT)
        .unwrap_err();
    assert!(no_auth(&refused), "{refused:?}");
    assert_eq!(admin.get_data(&p).unwrap().0, b"");
}

/// A semaphore path that may not be created is refused; once it may, the
/// next call creates it with the count.
#[test]
fn a_path_that_may_not_be_created_is_refused_and_counted_once_it_may() {
    let base = path("sem-uncreatable");
    let (admin, acl) = admin_and("sem-create", perms::READ);
    admin
        .create_with(
            &base,
            b"",
            &CreateOptions::new(CreateMode::Persistent).acl(acl),
        )
        .unwrap();
    let p = format!("{base}/sem");
    let c = client();
    let two = Semaphore::new(&c, &p, 2).unwrap();
    let refused = two.acquire_timeout(WAIT).unwrap_err();
    assert!(no_auth(&refused), "{refused:?}");
    admin.set_acl(&base, Acl::open_unsafe(), None).unwrap();
    let lease = two.acquire_timeout(WAIT).unwrap();
    assert_eq!(c.get_data(&p).unwrap().0, b"2");
    drop(lease);
}

/// Only the semaphore path carries the count: the parents created on the
/// way are left empty.
#[test]
fn parents_created_on_the_way_carry_no_count() {
    let base = path("sem-deep");
    let p = format!("{base}/inner");
    let c = client();
    let lease = Semaphore::new(&c, &p, 2)
        .unwrap()
        .acquire_timeout(WAIT)
        .unwrap();
    assert_eq!(c.get_data(&base).unwrap().0, b"");
    assert_eq!(c.get_data(&p).unwrap().0, b"2");
    drop(lease);
}

/// With the server unreachable, the check ends at the caller's deadline
/// as a `Timeout`; with a deadline beyond the request timeout, it ends at
/// the request timeout as the client's `Timeout`.
#[test]
fn the_count_check_ends_at_the_callers_deadline_or_the_request_timeout() {
    let proxy = Proxy::start(testkit::zk::shared().addr());
    let c = Client::builder(&proxy.connect_string())
        .session_timeout(T)
        .request_timeout(Duration::from_secs(1))
        .connect()
        .unwrap();
    let p = path("sem-deadline");
    let sem = Semaphore::new(&c, &p, 2).unwrap();
    proxy.stall();
    assert_eq!(
        sem.acquire_timeout(Duration::from_millis(200)).unwrap_err(),
        LockError::Timeout
    );
    assert_eq!(
        sem.acquire_timeout(T).unwrap_err(),
        LockError::Client(Error::Timeout)
    );
    proxy.clear();
    let lease = sem.acquire_timeout(WAIT).unwrap();
    drop(lease);
}

/// Two first users of a path created empty: the one whose write of the
/// count loses (another wrote between its read and its write) reads the
/// count again and agrees, instead of failing.
#[test]
fn a_count_written_between_our_read_and_our_write_is_read_again() {
    /// The op code of getData.
    const GET_DATA: i32 = 4;
    let p = path("sem-raced");
    let c = client();
    c.create(&p, b"", CreateMode::Persistent).unwrap();
    let proxy = Proxy::start(testkit::zk::shared().addr());
    let raced = Client::connect(&proxy.connect_string(), T).unwrap();
    let sem = Semaphore::new(&raced, &p, 2).unwrap();
    proxy.hold_requests_after_reply_of_next(GET_DATA);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(sem.acquire_timeout(WAIT).map(drop));
    });
    assert!(proxy.wait_requests_held(WAIT), "the count was read");
    c.set_data(&p, b"2", None).unwrap();
    proxy.clear();
    assert_eq!(rx.recv_timeout(WAIT).expect("acquire returns"), Ok(()));
    assert_eq!(c.get_data(&p).unwrap().1.version, 1, "written once");
}

/// While the watch left by the last agreeing read is quiet, no read is
/// made: the path's ACL changed to refuse reads (a setACL fires no watch)
/// leaves a checked semaphore value acquiring as before, where a value
/// that has not checked yet must read, and is refused.
/// Kills: the check reading again whatever its watch says (`still_checked`
/// made false), which costs every acquisition a round trip.
#[test]
fn a_checked_count_is_not_read_again_while_its_watch_is_quiet() {
    let p = path("sem-quiet");
    let (admin, acl) = admin_and("sem-quiet", perms::ALL);
    admin
        .create_with(
            &p,
            b"2",
            &CreateOptions::new(CreateMode::Persistent).acl(acl),
        )
        .unwrap();
    let c = client();
    let checked = Semaphore::new(&c, &p, 2).unwrap();
    drop(checked.acquire_timeout(WAIT).unwrap());
    let no_read = testkit::admin_and_world_acl(perms::ALL & !perms::READ);
    admin.set_acl(&p, no_read, None).unwrap();
    let lease = checked.acquire_timeout(WAIT).unwrap();
    drop(lease);
    let fresh = Semaphore::new(&c, &p, 2).unwrap();
    let refused = fresh.acquire_timeout(WAIT).unwrap_err();
    assert!(no_auth(&refused), "{refused:?}");
}

/// `start_acquire` passes no gate and reads no count, as its rustdoc says:
/// under a path that stores another number it is still granted a lease,
/// where `acquire` is refused.
#[test]
fn start_acquire_does_not_check_the_stored_count() {
    let p = path("sem-unchecked-start");
    let c = client();
    c.create(&p, b"3", CreateMode::Persistent).unwrap();
    let two = Semaphore::new(&c, &p, 2).unwrap();
    assert_eq!(
        two.acquire_timeout(WAIT).unwrap_err(),
        LockError::MaxLeasesMismatch {
            stored: 3,
            asked: 2
        }
    );
    let lease = two
        .start_acquire(Some(std::time::Instant::now() + WAIT))
        .wait()
        .unwrap();
    assert_eq!(lease.state(), zklock::recipes::LockState::Held);
    assert_eq!(c.get_data(&p).unwrap().0, b"3", "the count left as it was");
}
