//! Revocation against Curator, both ways.

use super::*;

// -------------------------------------------------------------- revocation

/// Curator's revocation both ways: zklock asks a revocable Curator holder
/// to let go, and Curator's `Revoker` asks a revocable zklock holder.
#[test]
fn revocation_with_curator_both_ways() {
    use zklock::recipes::{revoke, revoke_holder, MutexOptions};
    let path = lock_path("revoke");
    let c = client();

    // A Curator holder, asked by zklock.
    let mut cur = Peer::start(
        PeerKind::Curator,
        &connect(),
        &path,
        "revocable-mutex",
        "cur",
    );
    let line = cur.try_acquire(10_000).expect("Curator holds a free lock");
    let cur_node = format!("{path}/{}", acquired_node(&line));
    assert_eq!(
        revoke_holder(&c, &path).unwrap().as_deref(),
        Some(cur_node.as_str())
    );
    let heard = (0..5).find_map(|_| {
        cur.next_line(HANDOVER)
            .filter(|l| l == "revocation-requested")
    });
    assert!(heard.is_some(), "Curator's listener was not called");
    cur.release();

    // A zklock holder, asked by Curator.
    let options = MutexOptions::default().revocable(true);
    let g = Mutex::with_options(&c, &path, options)
        .unwrap()
        .lock_timeout(HANDOVER)
        .unwrap();
    let requests = g.revocation_requests();
    assert!(!g.revocation_requested());
    cur.send(&format!("revoke {}", g.node_path()));
    assert_eq!(
        cur.next_line(HANDOVER).as_deref(),
        Some(format!("revoked {}", g.node_path()).as_str())
    );
    requests
        .recv_timeout(HANDOVER)
        .expect("the zklock holder hears the request");
    assert!(g.revocation_requested());
    // Letting go is the holder's choice; here it does.
    g.unlock().unwrap();
    // A node that is gone: nothing to ask.
    assert!(!revoke(&c, &format!("{path}/_c_gone-lock-0000000001")).unwrap());
    cur.quit();
    assert!(children(&c, &path).is_empty());
}
