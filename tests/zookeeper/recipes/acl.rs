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
