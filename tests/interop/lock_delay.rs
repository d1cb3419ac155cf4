//! Lock-delay's tenure marks against Curator: they stay out of every
//! listing a peer makes of the lock path. Curator counts every child of a
//! lock path as a participant (`LockInternals.getParticipantNodes`, behind
//! `InterProcessMutex.getParticipantNodes` and `LeaderLatch` /
//! `LeaderSelector.getParticipants`) and every child of a semaphore's
//! `leases` as a lease; a mark there would be a phantom participant, and
//! after an unclean end a phantom lease for good.

use super::*;
use zklock::recipes::MutexOptions;

/// Longer than any test: a grant under it proves no delay was due.
const FOREVER: Duration = Duration::from_secs(3600);

fn delayed() -> MutexOptions {
    MutexOptions::default().lock_delay(FOREVER)
}

/// The peer's own participant listing (`participants` command), sorted.
fn participants(peer: &mut Peer) -> Vec<String> {
    peer.send("participants");
    let line = peer
        .next_line(QUEUE_WAIT)
        .expect("a reply to `participants`");
    let rest = line
        .strip_prefix("participants")
        .unwrap_or_else(|| panic!("expected `participants ...`, got `{line}`"));
    rest.trim()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// `InterProcessMutex.getParticipantNodes` (and kazoo's listing, and
/// `inspect`): only the holder's node while a zklock holder with
/// lock-delay holds, and nothing after its unclean end.
/// Before, the holder's mark `~tenure.<uuid>` was listed beside its node,
/// and stayed listed after the end.
#[test]
fn curator_mutex_participants_never_list_tenure_marks() {
    let path = lock_path("delay-participants");
    let a = client();
    let held = Mutex::with_options(&a, &path, delayed())
        .unwrap()
        .lock_timeout(HANDOVER)
        .unwrap();
    let node = last_segment(held.node_path()).to_string();
    let mut peer = Peer::start(PeerKind::Curator, &connect(), &path, "mutex", "c1");
    assert_eq!(participants(&mut peer), vec![node.clone()]);
    // kazoo's view (its contenders are filtered from this listing) and
    // our own inspection see the node alone too.
    let mut kazoo = Peer::start(PeerKind::Kazoo, &connect(), &path, "mutex", "k1");
    assert_eq!(kazoo.children(), vec![node.clone()]);
    kazoo.quit();
    let q = queue(&a, &path);
    assert_eq!(q.len(), 1, "{}", describe(&q));
    std::mem::forget(held);
    a.close().unwrap();
    let c = client();
    testkit::wait_no_children(&c, &path, QUEUE_WAIT);
    assert_eq!(participants(&mut peer), Vec::<String>::new());
    peer.quit();
}

/// `LeaderLatch.getParticipants` reads each child's data as an id: only
/// the zklock leader's id is listed.
#[test]
fn curator_latch_participants_never_list_tenure_marks() {
    let path = lock_path("delay-latch-participants");
    let c = client();
    let leading = Election::with_options(&c, &path, b"zklock-leader", delayed())
        .unwrap()
        .campaign_timeout(HANDOVER)
        .unwrap();
    let mut peer = Peer::start(PeerKind::Curator, &connect(), &path, "leader", "c1");
    assert_eq!(participants(&mut peer), vec!["zklock-leader".to_string()]);
    drop(leading);
    peer.quit();
}

/// After a zklock lease holder's unclean end, Curator's semaphore of two
/// leases still grants two: no stale mark sits among the leases. Before,
/// the mark counted as a lease, and Curator's second acquire timed out.
#[test]
fn curator_semaphore_counts_no_tenure_mark_as_a_lease() {
    let path = lock_path("delay-sem");
    let leases = format!("{path}/leases");
    let a = client();
    let lease = Semaphore::with_options(&a, &path, 2, delayed())
        .unwrap()
        .acquire_timeout(HANDOVER)
        .unwrap();
    std::mem::forget(lease);
    a.close().unwrap();
    let c = client();
    let gone = poll_until(QUEUE_WAIT, || {
        children(&c, &leases).iter().all(|n| !n.contains("-lease-"))
    });
    assert!(gone, "the lease's node outlived its session");
    let mut s1 = Peer::start(PeerKind::Curator, &connect(), &path, "semaphore:2", "s1");
    let mut s2 = Peer::start(PeerKind::Curator, &connect(), &path, "semaphore:2", "s2");
    let first = s1.try_acquire(10_000);
    let second = s2.try_acquire(5_000);
    assert!(first.is_some(), "Curator's first lease refused");
    assert!(
        second.is_some(),
        "Curator's second lease refused: {:?}",
        children(&c, &leases)
    );
    let listed = participants(&mut s1);
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed.iter().all(|n| n.contains("-lease-")), "{listed:?}");
    s1.release();
    s2.release();
    s1.quit();
    s2.quit();
}
