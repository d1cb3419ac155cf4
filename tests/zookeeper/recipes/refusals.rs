//! Failures reported as what they are: a client error is not a lost
//! leadership, and a refused release is not a success.

use super::*;

use zklock::recipes::Mutex;
use zklock::{perms, CreateMode, CreateOptions, Error, ErrorCode};

/// A proclaim that fails for want of a connection has not lost
/// leadership: the caller hears the client's error.
#[test]
fn a_proclaim_without_a_connection_is_a_client_error_not_lost() {
    let p = path("proclaim-closed");
    let a = client();
    let election = Election::new(&a, &p, b"a").unwrap();
    let lead = election.campaign_timeout(WAIT).unwrap();
    a.close().unwrap();
    assert_eq!(
        election.proclaim(&lead, b"after close"),
        Err(LockError::Client(Error::Closed))
    );
}

/// An admin client that made each of `paths` with an ACL that lets the
/// world create children but not delete them.
fn parents_without_delete(paths: &[&str]) -> Client {
    let admin = client();
    admin.add_auth("digest", b"multi-admin:secret").unwrap();
    let no_delete = CreateOptions::new(CreateMode::Persistent)
        .acl(testkit::admin_and_world_acl(perms::READ | perms::CREATE));
    for p in paths {
        admin.create_with(p, b"", &no_delete).unwrap();
    }
    admin
}

/// A mutex's `unlock` waits for the delete and reports its refusal; the
/// node stays until the session ends.
#[test]
fn a_mutex_whose_release_is_refused_says_so() {
    let p = path("refused-mutex");
    let admin = parents_without_delete(&[&p]);
    let contender = client();
    let guard = Mutex::new(&contender, &p)
        .unwrap()
        .lock_timeout(WAIT)
        .unwrap();
    match guard.unlock() {
        Err(LockError::ReleaseRefused { code, .. }) => assert_eq!(code, ErrorCode::NoAuth),
        other => panic!("unlock said {other:?}"),
    }
    assert_eq!(children(&admin, &p).len(), 1);
    contender.close().unwrap();
    testkit::wait_no_children(&admin, &p, WAIT);
}

/// A multi-lock's `unlock` waits for every delete and reports a refused
/// one (here a parent that lets the world create but not delete).
#[test]
fn a_multi_lock_whose_release_is_refused_says_so() {
    let (x, y) = (path("refused-multi-x"), path("refused-multi-y"));
    let admin = parents_without_delete(&[&x, &y]);
    let contender = client();
    let both = MultiLock::new(&contender, &[&x, &y]).unwrap();
    let guards = both.lock_timeout(WAIT).unwrap();
    match guards.unlock() {
        Err(LockError::ReleaseRefused { code, .. }) => assert_eq!(code, ErrorCode::NoAuth),
        other => panic!("unlock said {other:?}"),
    }
    // Still held until the session ends.
    assert_eq!(children(&admin, &x).len(), 1);
    assert_eq!(children(&admin, &y).len(), 1);
    contender.close().unwrap();
    testkit::wait_no_children(&admin, &x, WAIT);
    testkit::wait_no_children(&admin, &y, WAIT);
}
