//! Faults and refusals: a lost create reply, disconnects, expiry, lost
//! holdings, and releases and acquisitions refused by an ACL.

use super::*;

#[test]
fn lost_create_reply_leaves_exactly_one_node() {
    let path = lock_path("lostreply");
    let proxy = Proxy::start(zk::shared().addr());
    let c = Client::connect(&proxy.connect_string(), T).unwrap();
    let m = Mutex::new(&c, &path).unwrap();
    // Create the parent first, so the dropped reply is the lock node's create2.
    c.create(&path, b"", CreateMode::Persistent).unwrap();
    proxy.drop_reply_of_next(15);
    let g = m.lock_timeout(WAIT).unwrap();
    assert!(
        proxy.wait_reply_dropped(Duration::from_secs(1)),
        "no reply was dropped"
    );
    let kids = children(&client(), &path);
    assert_eq!(kids.len(), 1, "orphan nodes: {kids:?}");
    assert!(g.node_path().ends_with(&kids[0]));
    assert_eq!(g.state(), LockState::Held);
    drop(g);
    testkit::wait_no_children(&client(), &path, WAIT);
}

#[test]
fn disconnect_while_holding_suspends_then_holds_again() {
    let path = lock_path("suspend");
    let proxy = Proxy::start(zk::shared().addr());
    let c = Client::connect(&proxy.connect_string(), T).unwrap();
    let g = Mutex::new(&c, &path).unwrap().lock().unwrap();
    let changes = g.state_changes();
    assert_eq!(changes.recv_timeout(WAIT).unwrap(), LockState::Held);
    assert_eq!(g.lost_reason(), None);
    proxy.cut_all();
    assert_eq!(changes.recv_timeout(WAIT).unwrap(), LockState::Suspended);
    assert_eq!(changes.recv_timeout(WAIT).unwrap(), LockState::Held);
    assert_eq!(c.state(), SessionState::Connected);
}

/// A private server with a short tick, so sessions can expire quickly.
fn fast_server() -> ZkServer {
    ZkServer::start_with(500)
}

#[test]
fn expiry_while_holding_reports_lost_and_while_waiting_fails() {
    let server = fast_server();
    let proxy = Proxy::start(server.addr());
    let t = Duration::from_secs(2);
    let c = Client::connect(&proxy.connect_string(), t).unwrap();
    let path = "/expiry";
    let g = Mutex::new(&c, path).unwrap().lock().unwrap();
    let changes = g.state_changes();
    assert_eq!(changes.recv_timeout(WAIT).unwrap(), LockState::Held);

    // A waiter on a second proxied session.
    let waiter_client = Client::connect(&proxy.connect_string(), t).unwrap();
    let other = Client::connect(&server.connect_string(), t).unwrap();
    let waiter = std::thread::spawn({
        let wc = waiter_client.clone();
        move || {
            Mutex::new(&wc, path)
                .unwrap()
                .lock_timeout(Duration::from_secs(60))
        }
    });
    testkit::wait_children(&other, path, 2, WAIT);
    // Silence both sessions past their timeout; the server expires them.
    proxy.blackhole(Direction::Both);
    testkit::wait_no_children(&other, path, WAIT);
    assert_eq!(changes.recv_timeout(WAIT).unwrap(), LockState::Suspended);
    assert_eq!(changes.recv_timeout(WAIT).unwrap(), LockState::Lost);
    proxy.clear();
    assert_eq!(
        waiter.join().unwrap().unwrap_err(),
        LockError::SessionExpired
    );
    assert_eq!(g.state(), LockState::Lost);
    // Silence for a whole session timeout came first; the expiry after it.
    assert_eq!(g.lost_reason(), Some(LossReason::NoContact));
}

#[test]
fn lock_cycles_leave_no_watches_on_the_server() {
    let server = ZkServer::start();
    let c = Client::connect(&server.connect_string(), T).unwrap();
    let m = Mutex::new(&c, "/no-watch-leak").unwrap();
    for _ in 0..100 {
        m.lock().unwrap().unlock().unwrap();
    }
    // A round trip after the last release: every earlier request is done.
    c.sync("/").unwrap();
    let wchs = server.four_letter("wchs");
    let total: u64 = wchs
        .lines()
        .find_map(|l| l.strip_prefix("Total watches:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no watch total in {wchs:?}"));
    assert_eq!(total, 0, "watches left behind: {wchs}");
}

/// A lost holding is never handed out again to the thread that held it:
/// with or without a watch on the node, the next call queues anew.
#[test]
fn a_lost_holding_is_not_reentered_nor_a_deadlock() {
    let path = lock_path("reenter-lost");
    let (c, admin) = (client(), client());
    for watch in [false, true] {
        let options = MutexOptions::default().reentrant(true).watch_node(watch);
        let r = Mutex::with_options(&c, &path, options).unwrap();
        let first = r.lock_timeout(WAIT).unwrap();
        let changes = first.state_changes();
        admin.delete(first.node_path(), None).unwrap();
        if watch {
            assert!(becomes_lost(&changes), "watch {watch}");
        }
        let second = r.lock_timeout(WAIT).unwrap();
        assert_ne!(second.node_path(), first.node_path(), "watch {watch}");
        assert_eq!(second.state(), LockState::Held);
        assert_eq!(first.state(), LockState::Lost, "watch {watch}");
        assert_eq!(first.lost_reason(), Some(LossReason::NodeDeleted));
        drop((first, second));
    }
    // Not re-entrant: a thread whose holding is lost may queue again.
    let m = Mutex::with_options(&c, &path, MutexOptions::default().watch_node(true)).unwrap();
    let first = m.lock_timeout(WAIT).unwrap();
    let changes = first.state_changes();
    admin.delete(first.node_path(), None).unwrap();
    assert!(becomes_lost(&changes));
    let second = m
        .lock_timeout(WAIT)
        .expect("no WouldDeadlock for a lost holding");
    assert_eq!(second.state(), LockState::Held);
}

/// Whether `changes` says Lost within `WAIT`.
fn becomes_lost(changes: &crossbeam_channel::Receiver<LockState>) -> bool {
    let until = std::time::Instant::now() + WAIT;
    while let Ok(s) = changes.recv_deadline(until) {
        if s == LockState::Lost {
            return true;
        }
    }
    false
}

/// A lock path whose ACL lets contenders create but not delete: the
/// release is refused, and both ways of releasing say so; the node (and
/// the lock) goes with the session.
#[test]
fn a_refused_release_is_an_error_not_a_success() {
    use zklock::{perms, CreateOptions, ErrorCode};
    let admin = client();
    admin.add_auth("digest", b"lock-admin:secret").unwrap();
    let parent = CreateOptions::new(CreateMode::Persistent)
        .acl(testkit::admin_and_world_acl(perms::READ | perms::CREATE));
    let base = lock_path("refused");
    admin.create(&base, b"", CreateMode::Persistent).unwrap();
    for side in ["unlock", "drop"] {
        let path = format!("{base}/{side}");
        admin.create_with(&path, b"", &parent).unwrap();
        let contender = client();
        let m = Mutex::new(&contender, &path).unwrap();
        let g = m.lock_timeout(WAIT).unwrap();
        let node = g.node_path().to_owned();
        if side == "unlock" {
            match g.unlock() {
                Err(LockError::ReleaseRefused { path: p, code }) => {
                    assert_eq!((p.as_str(), code), (node.as_str(), ErrorCode::NoAuth));
                }
                other => panic!("unlock said {other:?}"),
            }
        } else {
            let changes = g.state_changes();
            drop(g);
            assert!(becomes_lost(&changes), "the listener hears of it");
        }
        // Still there, and the lock still taken...
        assert!(admin.exists(&node).unwrap().is_some(), "{side}");
        // ...until the session ends.
        contender.close().unwrap();
        testkit::wait_no_children(&admin, &path, WAIT);
    }
}

/// A holder's horizon: in the future while it holds, moved on by the
/// session's proofs of life, gone once Lost.
#[test]
fn valid_until_lies_ahead_while_held_and_ends_with_the_lock() {
    let path = lock_path("valid-until");
    let (c, admin) = (client(), client());
    let m = Mutex::with_options(&c, &path, MutexOptions::default().watch_node(true)).unwrap();
    let g = m.lock_timeout(WAIT).unwrap();
    let first = g.valid_until().expect("a horizon while held");
    let now = std::time::Instant::now();
    assert!(first > now && first <= now + T, "{:?}", first - now);
    // The session's own syncs (every T/12) push it on.
    testkit::wait_until("the horizon moves on", WAIT, || {
        g.valid_until().is_some_and(|v| v > first)
    });
    let changes = g.state_changes();
    admin.delete(g.node_path(), None).unwrap();
    assert!(becomes_lost(&changes));
    assert_eq!(g.valid_until(), None);
}

/// A lock refused by an ACL names what was refused, where, as the caller
/// named it.
#[test]
fn a_refused_acquisition_names_the_create_and_the_lock_path() {
    use zklock::{perms, Acl, CreateOptions, Error, ErrorCode, Id, OpCode};
    let admin = client();
    admin.add_auth("digest", b"lock-admin:secret").unwrap();
    let read_only = Acl {
        perms: perms::READ,
        id: Id {
            scheme: "world".into(),
            id: "anyone".into(),
        },
    };
    let path = lock_path("refused-create");
    let closed = CreateOptions::new(CreateMode::Persistent)
        .acl([Acl::creator_all(), vec![read_only]].concat());
    admin.create_with(&path, b"", &closed).unwrap();
    let err = Mutex::new(&client(), &path)
        .unwrap()
        .lock_timeout(WAIT)
        .unwrap_err();
    match &err {
        LockError::Client(Error::Server { code, op, path: p }) => {
            assert_eq!(
                (*code, *op, p.as_deref()),
                (ErrorCode::NoAuth, Some(OpCode::Create), Some(path.as_str()))
            );
        }
        other => panic!("{other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains("NoAuth") && text.contains(&path), "{text}");
}

/// A waiter deep in the queue whose node a third party deletes queues
/// again at once, rather than waiting with no node until the node it
/// watches goes (before, it waited for the whole of the holder's hold).
#[test]
fn a_waiter_deep_in_the_queue_whose_node_is_deleted_queues_again() {
    let path = lock_path("waiter-node-deleted");
    let (a, b, c, admin) = (client(), client(), client(), client());
    let holder = Mutex::new(&a, &path).unwrap().lock_timeout(WAIT).unwrap();
    let second = Mutex::new(&b, &path).unwrap().start_lock(None);
    wait_children(&admin, &path, 2, WAIT);
    let third = Mutex::new(&c, &path).unwrap().start_lock(None);
    wait_children(&admin, &path, 3, WAIT);
    // The third in line: it waits behind the second, which waits too.
    let queue = Mutex::new(&admin, &path).unwrap().queue().unwrap();
    let deleted = queue.last().expect("three in the queue").name.clone();
    admin.delete(&format!("{path}/{deleted}"), None).unwrap();
    // Its waiter hears of it and queues again, while both others stay.
    wait_until("a new node for the third waiter", WAIT, || {
        let now = children(&admin, &path);
        now.len() == 3 && !now.contains(&deleted)
    });
    assert_eq!(holder.state(), LockState::Held);
    drop(holder);
    let second = second.wait_timeout(WAIT).expect("the second's turn");
    drop(second);
    let third = third.wait_timeout(WAIT).expect("the third's turn");
    assert!(!third.node_path().ends_with(&deleted));
}
