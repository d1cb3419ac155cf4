//! Lock nodes with a creator-only ACL.

use super::*;

/// Lock nodes created for an authenticated identity with a creator-only
/// ACL, under a lock path that also denies others: another identity can
/// neither delete the holder's node nor queue (a typed NoAuth), while the
/// same identity on another session queues as usual.
#[test]
fn creator_only_lock_nodes_refuse_other_identities() {
    use zklock::recipes::{Mutex, MutexOptions};
    use zklock::{Acl, Error, ErrorCode};
    let p = path("acl");
    let authed = |who: &[u8]| {
        let c = client();
        c.add_auth("digest", who).unwrap();
        c
    };
    let alice = authed(b"alice:secret");
    let options = MutexOptions::default()
        .acl(Acl::creator_all())
        .parent_acl(Acl::creator_all());
    let held = Mutex::with_options(&alice, &p, options.clone())
        .unwrap()
        .lock()
        .unwrap();
    let bob = authed(b"bob:other");
    assert_eq!(
        bob.delete(held.node_path(), None).unwrap_err().code(),
        Some(ErrorCode::NoAuth)
    );
    // Nor ask it to let go: the refusal is an error, not "nobody holds".
    let asked = zklock::recipes::revoke(&bob, held.node_path()).unwrap_err();
    assert!(
        matches!(
            asked,
            LockError::Client(Error::Server {
                code: ErrorCode::NoAuth,
                ..
            })
        ),
        "{asked:?}"
    );
    let refused = Mutex::with_options(&bob, &p, options.clone())
        .unwrap()
        .try_lock()
        .unwrap_err();
    assert!(
        matches!(
            refused,
            LockError::Client(Error::Server {
                code: ErrorCode::NoAuth,
                ..
            })
        ),
        "{refused:?}"
    );
    let alice_elsewhere = authed(b"alice:secret");
    assert!(Mutex::with_options(&alice_elsewhere, &p, options)
        .unwrap()
        .try_lock()
        .unwrap()
        .is_none());
    drop(held);
    testkit::wait_no_children(&alice, &p, WAIT);
}

/// Two identities, each with creator-only lock paths, lock side by side
/// under one folder that neither made beforehand: the folder the first
/// creates takes the ancestors' ACL (open by default), not its creator-only
/// lock path's, so it locks the second out of nothing. The lock paths stay
/// each identity's own: the other can neither queue there nor delete the
/// holder's node. A semaphore's folders likewise.
#[test]
fn creator_only_lock_paths_leave_the_folder_above_them_shared() {
    use zklock::recipes::{Mutex, MutexOptions};
    use zklock::{Acl, Error, ErrorCode};
    let folder = path("acl-folder");
    let authed = |who: &[u8]| {
        let c = client();
        c.add_auth("digest", who).unwrap();
        c
    };
    let alice = authed(b"alice:secret");
    let bob = authed(b"bob:other");
    let options = MutexOptions::default()
        .acl(Acl::creator_all())
        .parent_acl(Acl::creator_all());
    let lock = |who: &Client, name: &str| {
        Mutex::with_options(who, &format!("{folder}/{name}"), options.clone())
            .unwrap()
            .try_lock()
    };
    let alices = lock(&alice, "a").unwrap().expect("free");
    let bobs = lock(&bob, "b")
        .unwrap_or_else(|e| panic!("bob is locked out of {folder}: {e:?}"))
        .expect("free");
    assert_eq!(alice.get_acl(&folder).unwrap().0, Acl::open_unsafe());
    for (who, theirs) in [(&bob, &alices), (&alice, &bobs)] {
        assert_eq!(
            who.delete(theirs.node_path(), None).unwrap_err().code(),
            Some(ErrorCode::NoAuth),
            "{}",
            theirs.node_path()
        );
    }
    let refused = lock(&bob, "a").unwrap_err();
    assert!(
        matches!(
            refused,
            LockError::Client(Error::Server {
                code: ErrorCode::NoAuth,
                ..
            })
        ),
        "{refused:?}"
    );
    drop((alices, bobs));
    let semaphore = |who: &Client, name: &str| {
        let s = Semaphore::with_options(who, &format!("{folder}-s/{name}"), 1, options.clone())
            .unwrap();
        s.acquire_timeout(T)
    };
    let alices = semaphore(&alice, "a").unwrap();
    let bobs =
        semaphore(&bob, "b").unwrap_or_else(|e| panic!("bob is locked out of {folder}-s: {e:?}"));
    drop((alices, bobs));
}
