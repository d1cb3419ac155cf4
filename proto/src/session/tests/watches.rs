//! Watches: firing, re-arming with SetWatches after a reconnect, persistent
//! and recursive watches.

use super::*;

#[test]
fn reconnect_resumes_the_session_and_rearms_watches() {
    let mut h = Harness::new();
    h.connect(0x77, 9000);
    h.s.submit(h.now, exists("/w", true), 1, Some(501));
    h.s.submit(
        h.now,
        Request::GetChildren(PathWatch {
            path: "/c".into(),
            watch: true,
        }),
        2,
        Some(502),
    );
    h.sent();
    h.reply(1, 40, ErrorCode::NoNode, Response::Empty);
    h.reply(2, 41, ErrorCode::Ok, Response::Children(Names::new()));
    h.events();
    assert_eq!(h.s.watch_count(), 2);
    h.s.handle_disconnected(h.now);
    let req = h.connect(0x77, 9000);
    assert_eq!(req.session_id, 0x77);
    assert_eq!(req.passwd, vec![7; 16]);
    assert_eq!(req.last_zxid_seen, 41);
    let sent = h.sent_requests();
    let [(xid, Request::SetWatches(sw))] = sent.as_slice() else {
        panic!("expected one SetWatches, got {sent:?}")
    };
    assert_eq!(*xid, -8);
    assert_eq!(sw.relative_zxid, 41);
    assert_eq!(sw.exist, vec!["/w".to_string()]);
    assert_eq!(sw.child, vec!["/c".to_string()]);
    assert_eq!(
        states(&h.events()),
        vec![SessionState::Suspended, SessionState::Connected]
    );
    // The server fires what changed while we were away: once each.
    h.reply(-8, 42, ErrorCode::Ok, Response::Empty);
    h.watch_event(EventType::NodeCreated, "/w");
    h.watch_event(EventType::NodeCreated, "/w");
    assert_eq!(
        fired(&h.events()),
        vec![(501, EventType::NodeCreated, "/w".to_string())]
    );
}

/// Thousands of watches go back in few SetWatches, as ZooKeeper's client
/// sends them (batches up to 128 KiB): here 2 000 paths of 20 bytes, about
/// 48 KB, in one.
#[test]
fn many_watches_are_rearmed_in_one_set_watches() {
    let mut h = Harness::new();
    h.connect(0x78, 9000);
    let paths: Vec<String> = (0..2000).map(|i| format!("/watched/node-{i:06}")).collect();
    for (i, path) in paths.iter().enumerate() {
        let n = i as u32 + 1;
        h.s.submit(h.now, exists(path, true), n, Some(n));
        h.sent();
        // The session numbers its requests from 1.
        h.reply(n as i32, 40, ErrorCode::NoNode, Response::Empty);
    }
    h.events();
    assert_eq!(h.s.watch_count(), 2000);
    h.s.handle_disconnected(h.now);
    h.connect(0x78, 9000);
    let sent = h.sent_requests();
    let [(_, Request::SetWatches(sw))] = sent.as_slice() else {
        panic!("expected one SetWatches, got {} requests", sent.len())
    };
    assert_eq!(sw.exist, paths);
}

#[test]
fn node_deleted_fires_data_and_child_watches_once() {
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.s.submit(h.now, exists("/d", true), 1, Some(10));
    h.s.submit(
        h.now,
        Request::GetChildren2(PathWatch {
            path: "/d".into(),
            watch: true,
        }),
        2,
        Some(11),
    );
    h.reply(1, 2, ErrorCode::Ok, Response::Stat(Stat::default()));
    h.reply(
        2,
        2,
        ErrorCode::Ok,
        Response::Children2 {
            children: Names::new(),
            stat: Stat::default(),
        },
    );
    h.events();
    h.watch_event(EventType::NodeDeleted, "/d");
    let mut fired: Vec<u32> = fired(&h.events()).into_iter().map(|(w, _, _)| w).collect();
    fired.sort();
    assert_eq!(fired, vec![10, 11]);
    assert_eq!(h.s.watch_count(), 0);
}

#[test]
fn unwanted_watches_are_not_rearmed() {
    let mut h = Harness::new();
    h.connect(4, 9000);
    for (i, p) in ["/keep", "/drop"].iter().enumerate() {
        h.s.submit(h.now, exists(p, true), i as u32, Some(100 + i as u32));
        h.reply(i as i32 + 1, 2, ErrorCode::NoNode, Response::Empty);
    }
    h.events();
    assert_eq!(h.s.watch_count(), 2);
    h.s.handle_disconnected(h.now);
    h.s.retain_watches(|w| *w == 100);
    assert_eq!(h.s.watch_count(), 1);
    h.connect(4, 9000);
    let sent = h.sent_requests();
    let [(_, Request::SetWatches(sw))] = sent.as_slice() else {
        panic!("expected one SetWatches, got {sent:?}")
    };
    assert_eq!(sw.exist, vec!["/keep".to_string()]);
}

/// Kills: a read without a watch registered as one (send_as's guard →
/// true): SetWatches would then set, after a reconnect, watches that were
/// never asked for.
#[test]
fn a_read_without_a_watch_leaves_none_to_rearm() {
    let mut h = Harness::new();
    h.connect(4, 9000);
    h.s.submit(h.now, exists("/plain", false), 1, Some(100));
    h.reply(1, 2, ErrorCode::NoNode, Response::Empty);
    h.events();
    assert_eq!(h.s.watch_count(), 0);
    h.s.handle_disconnected(h.now);
    h.connect(4, 9000);
    assert_eq!(h.sent_requests(), vec![]);
}

fn add_watch(path: &str, mode: jute::AddWatchMode) -> Request {
    Request::AddWatch(jute::AddWatchRequest {
        path: path.into(),
        mode,
    })
}

fn fired(events: &[SessionEvent<u32, u32>]) -> Vec<(u32, EventType, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::Watch { watcher, event } => {
                Some((*watcher, event.kind, event.path.clone()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn persistent_watches_fire_repeatedly_and_recursive_ones_cover_descendants() {
    let mut h = Harness::new();
    h.connect(8, 9000);
    h.s.submit(
        h.now,
        add_watch("/p", jute::AddWatchMode::Persistent),
        1,
        Some(10),
    );
    h.s.submit(
        h.now,
        add_watch("/r", jute::AddWatchMode::PersistentRecursive),
        2,
        Some(20),
    );
    h.reply(1, 2, ErrorCode::Ok, Response::Status(ErrorCode::Ok));
    h.reply(2, 2, ErrorCode::Ok, Response::Status(ErrorCode::Ok));
    h.events();
    h.watch_event(EventType::NodeDataChanged, "/p");
    h.watch_event(EventType::NodeChildrenChanged, "/p");
    h.watch_event(EventType::NodeCreated, "/r/a/b");
    h.watch_event(EventType::NodeChildrenChanged, "/r/a");
    h.watch_event(EventType::NodeDeleted, "/r");
    h.watch_event(EventType::NodeCreated, "/rx");
    let got = fired(&h.events());
    assert_eq!(
        got,
        vec![
            (10, EventType::NodeDataChanged, "/p".into()),
            (10, EventType::NodeChildrenChanged, "/p".into()),
            (20, EventType::NodeCreated, "/r/a/b".into()),
            (20, EventType::NodeDeleted, "/r".into()),
        ]
    );
    assert_eq!(h.s.watch_count(), 2, "persistent watches stay registered");
    // Re-armed with setWatches2 after a reconnect.
    h.s.handle_disconnected(h.now);
    h.connect(8, 9000);
    let sent = h.sent_requests();
    let [(_, Request::SetWatches2(sw))] = sent.as_slice() else {
        panic!("expected one SetWatches2, got {sent:?}")
    };
    assert_eq!(sw.persistent, vec!["/p".to_string()]);
    assert_eq!(sw.persistent_recursive, vec!["/r".to_string()]);
    // What changed meanwhile is not replayed: each owner is told to look
    // again (kills the resumed flag inverted in on_connect_response).
    let mut told = fired(&h.events());
    told.sort_by_key(|(watcher, _, _)| *watcher);
    assert_eq!(
        told,
        vec![
            (10, EventType::None, "/p".into()),
            (20, EventType::None, "/r".into())
        ]
    );
}

#[test]
fn releasing_a_persistent_watch_removes_it_from_the_server_when_the_last_goes() {
    let mut h = Harness::new();
    h.connect(8, 9000);
    for (i, w) in [(1, 10), (2, 11)] {
        h.s.submit(
            h.now,
            add_watch("/p", jute::AddWatchMode::Persistent),
            i,
            Some(w),
        );
        h.reply(i as i32, 2, ErrorCode::Ok, Response::Status(ErrorCode::Ok));
    }
    h.events();
    h.sent();
    // One of two watchers goes: nothing to tell the server.
    h.s.release_persistent(h.now, "/p", |w| *w != 10, 50);
    assert!(h.sent().is_empty());
    assert_eq!(replies(&h.events()), vec![(50, Ok(Response::Empty))]);
    // The last one goes: removeWatches(/p, Any), as 3.8 servers need.
    h.s.release_persistent(h.now, "/p", |_| false, 51);
    let sent = h.sent_requests();
    assert_eq!(
        sent,
        vec![(
            3,
            Request::RemoveWatches(jute::WatchesRequest {
                path: "/p".into(),
                kind: jute::WatcherType::Any
            })
        )]
    );
    assert_eq!(h.s.watch_count(), 0);
}

#[test]
fn expiry_abandons_persistent_watches() {
    let mut h = Harness::new();
    h.connect(8, 9000);
    h.s.submit(
        h.now,
        add_watch("/p", jute::AddWatchMode::Persistent),
        1,
        Some(10),
    );
    h.reply(1, 2, ErrorCode::Ok, Response::Status(ErrorCode::Ok));
    h.events();
    h.s.handle_disconnected(h.now);
    h.connect(0, 0);
    let ev = h.events();
    assert!(ev.iter().any(|e| matches!(
        e,
        SessionEvent::WatchAbandoned {
            watcher: 10,
            reason: RequestError::SessionExpired
        }
    )));
}

/// A long frame that answers no request (a watch event on a path longer
/// than a long reply) is joined and read as what it is, not as a reply.
#[test]
fn a_long_watch_event_is_read_as_a_watch_event() {
    let mut h = Harness::with_max_frame(1 << 20);
    h.connect(5, 9000);
    let path = format!("/{}", "p".repeat(40_000));
    h.s.submit(h.now, exists(&path, true), 1, Some(501));
    h.sent();
    h.reply(1, 40, ErrorCode::NoNode, Response::Empty);
    h.events();
    let wire = watch_event_frame(EventType::NodeCreated, KeeperState::SyncConnected, &path);
    for read in wire.chunks(5000) {
        h.s.handle_input(h.now, read);
    }
    assert_eq!(
        fired(&h.events()),
        vec![(501, EventType::NodeCreated, path)]
    );
}
