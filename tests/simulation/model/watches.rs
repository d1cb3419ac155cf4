//! Watches: one-shot data, exist and child watches, SetWatches after a
//! reconnect, persistent and recursive watches.

use super::*;

#[test]
fn exists_watch_on_missing_node_fires_node_created() {
    let mut w = World::new();
    let a = w.client();
    let b = w.client();
    let (h, r) = w.call_w(a, Request::Exists(pw("/later", true)), true);
    assert_eq!(r, Err(RequestError::Server(ErrorCode::NoNode)));
    assert_eq!(w.zk.watch_count(), 1);
    assert_eq!(w.zk.watches_of(w.session_id(a)), 1);
    w.call(
        b,
        Request::Create(create("/later", b"", CreateMode::Persistent)),
    )
    .unwrap();
    assert_eq!(
        w.fired(a),
        vec![(h, EventType::NodeCreated, "/later".to_string())]
    );
    assert_eq!(w.zk.watch_count(), 0);
}

#[test]
fn get_data_on_missing_node_leaves_no_watch() {
    let mut w = World::new();
    let a = w.client();
    let (_, r) = w.call_w(a, Request::GetData(pw("/nothing", true)), true);
    assert_eq!(r, Err(RequestError::Server(ErrorCode::NoNode)));
    assert_eq!(w.zk.watch_count(), 0);
    let (_, r) = w.call_w(a, Request::GetChildren(pw("/nothing", true)), true);
    assert_eq!(r, Err(RequestError::Server(ErrorCode::NoNode)));
    assert_eq!(w.zk.watch_count(), 0);
    assert_eq!(w.clients[a].abandoned.len(), 2);
}

#[test]
fn child_watch_fires_on_create_then_is_gone() {
    let mut w = World::new();
    let a = w.client();
    let b = w.client();
    w.call(
        a,
        Request::Create(create("/p", b"", CreateMode::Persistent)),
    )
    .unwrap();
    let (h, r) = w.call_w(a, Request::GetChildren2(pw("/p", true)), true);
    match r {
        Ok(Response::Children2 { children, stat }) => {
            assert!(children.is_empty());
            assert_eq!(stat.num_children, 0);
        }
        other => panic!("{other:?}"),
    }
    w.call(
        b,
        Request::Create(create("/p/c1", b"", CreateMode::Persistent)),
    )
    .unwrap();
    w.call(
        b,
        Request::Create(create("/p/c2", b"", CreateMode::Persistent)),
    )
    .unwrap();
    // One-shot: only the first create is reported.
    assert_eq!(
        w.fired(a),
        vec![(h, EventType::NodeChildrenChanged, "/p".to_string())]
    );
    assert_eq!(w.zk.watch_count(), 0);
    // Data watch + child watch on a node that is deleted: one NodeDeleted
    // per connection on the wire, both client watchers told.
    let (h1, _) = w.call_w(a, Request::GetData(pw("/p/c1", true)), true);
    let (h2, _) = w.call_w(a, Request::GetChildren(pw("/p/c1", true)), true);
    assert_eq!(w.zk.watch_count(), 2);
    assert!(w.zk.delete_as_admin(w.now, "/p/c1"));
    w.pump();
    let mut fired = w.fired(a);
    fired.sort_by_key(|(h, _, p)| (*h, p.clone()));
    assert_eq!(
        fired,
        vec![
            (h1, EventType::NodeDeleted, "/p/c1".to_string()),
            (h2, EventType::NodeDeleted, "/p/c1".to_string()),
        ]
    );
    assert_eq!(w.zk.watch_count(), 0);
}

#[test]
fn set_watches_after_reconnect_fires_what_changed_while_away() {
    let mut w = World::new();
    let a = w.client();
    let b = w.client();
    for p in ["/w", "/d", "/c", "/k"] {
        w.call(a, Request::Create(create(p, b"", CreateMode::Persistent)))
            .unwrap();
    }
    let (h_data, _) = w.call_w(a, Request::GetData(pw("/w", true)), true);
    let (h_del, _) = w.call_w(a, Request::Exists(pw("/d", true)), true);
    let (h_exist, _) = w.call_w(a, Request::Exists(pw("/new", true)), true);
    let (h_child, _) = w.call_w(a, Request::GetChildren(pw("/c", true)), true);
    let (h_keep, _) = w.call_w(a, Request::GetData(pw("/k", true)), true);
    assert_eq!(w.zk.watches_of(w.session_id(a)), 5);
    let sid = w.session_id(a);
    // a drops off; its watches are gone from the server.
    w.clients[a].partitioned = true;
    w.cut(a);
    assert_eq!(w.zk.watch_count(), 0);
    w.call(
        b,
        Request::SetData(SetDataRequest {
            path: "/w".into(),
            data: b"x".to_vec(),
            version: -1,
        }),
    )
    .unwrap();
    w.call(
        b,
        Request::Delete(PathVersion {
            path: "/d".into(),
            version: -1,
        }),
    )
    .unwrap();
    w.call(
        b,
        Request::Create(create("/new", b"", CreateMode::Persistent)),
    )
    .unwrap();
    w.call(
        b,
        Request::Create(create("/c/x", b"", CreateMode::Persistent)),
    )
    .unwrap();
    // a comes back on a new connection with the same session.
    w.clients[a].partitioned = false;
    w.advance(Duration::from_millis(1));
    assert_eq!(w.clients[a].s.state(), SessionState::Connected);
    assert_eq!(w.session_id(a), sid);
    let mut fired = w.fired(a);
    fired.sort_by_key(|(h, _, p)| (*h, p.clone()));
    let mut want = vec![
        (h_data, EventType::NodeDataChanged, "/w".to_string()),
        (h_del, EventType::NodeDeleted, "/d".to_string()),
        (h_exist, EventType::NodeCreated, "/new".to_string()),
        (h_child, EventType::NodeChildrenChanged, "/c".to_string()),
    ];
    want.sort_by_key(|(h, _, p)| (*h, p.clone()));
    assert_eq!(fired, want);
    // The unchanged one is re-armed and still works.
    assert_eq!(w.zk.watches_of(sid), 1);
    w.call(
        b,
        Request::SetData(SetDataRequest {
            path: "/k".into(),
            data: b"y".to_vec(),
            version: -1,
        }),
    )
    .unwrap();
    assert_eq!(
        w.fired(a),
        vec![(h_keep, EventType::NodeDataChanged, "/k".to_string())]
    );
}

#[test]
fn forced_expiry_and_third_party_delete_fire_watches() {
    let mut w = World::new();
    let a = w.client();
    let b = w.client();
    w.call(a, Request::Create(create("/e", b"", CreateMode::Ephemeral)))
        .unwrap();
    w.call(
        a,
        Request::Create(create("/p", b"", CreateMode::Persistent)),
    )
    .unwrap();
    let (h1, _) = w.call_w(b, Request::GetData(pw("/e", true)), true);
    let (h2, _) = w.call_w(b, Request::GetData(pw("/p", true)), true);
    let (h3, _) = w.call_w(b, Request::GetChildren(pw("/", true)), true);
    assert!(w.zk.delete_as_admin(w.now, "/p"));
    assert!(!w.zk.delete_as_admin(w.now, "/p"));
    w.pump();
    assert_eq!(
        w.fired(b),
        vec![
            (h2, EventType::NodeDeleted, "/p".to_string()),
            (h3, EventType::NodeChildrenChanged, "/".to_string()),
        ]
    );
    let sid = w.session_id(a);
    w.zk.expire_session(w.now, sid);
    w.advance(Duration::from_millis(1));
    assert_eq!(
        w.fired(b),
        vec![(h1, EventType::NodeDeleted, "/e".to_string())]
    );
    assert!(!w.zk.session_alive(sid));
    assert_eq!(w.clients[a].s.state(), SessionState::Expired);
}

fn add_watch(path: &str, recursive: bool) -> Request {
    Request::AddWatch(jute::AddWatchRequest {
        path: path.into(),
        mode: if recursive {
            jute::AddWatchMode::PersistentRecursive
        } else {
            jute::AddWatchMode::Persistent
        },
    })
}

#[test]
fn persistent_watches_stay_until_removed() {
    let mut w = World::new();
    let a = w.client();
    let r = w.client();
    let b = w.client();
    w.call(
        a,
        Request::Create(create("/r", b"", CreateMode::Persistent)),
    )
    .unwrap();
    let (hp, res) = w.call_w(a, add_watch("/r", false), true);
    res.unwrap();
    let (hr, res) = w.call_w(r, add_watch("/r", true), true);
    res.unwrap();
    // One entry per table each.
    assert_eq!(w.zk.persistent_watch_count(), 4);
    assert_eq!(w.zk.watch_count(), 0);
    w.call(
        b,
        Request::Create(create("/r/x", b"", CreateMode::Persistent)),
    )
    .unwrap();
    w.call(
        b,
        Request::Create(create("/r/x/y", b"", CreateMode::Persistent)),
    )
    .unwrap();
    w.zk.set_data_as_admin(w.now, "/r", b"1").unwrap();
    w.pump();
    // Plain on /r: its child list and its data, every time.
    assert_eq!(
        w.fired(a),
        vec![
            (hp, EventType::NodeChildrenChanged, "/r".to_string()),
            (hp, EventType::NodeDataChanged, "/r".to_string()),
        ]
    );
    // Recursive: creates below and the data change, never
    // NodeChildrenChanged.
    assert_eq!(
        w.fired(r),
        vec![
            (hr, EventType::NodeCreated, "/r/x".to_string()),
            (hr, EventType::NodeCreated, "/r/x/y".to_string()),
            (hr, EventType::NodeDataChanged, "/r".to_string()),
        ]
    );
    assert_eq!(w.zk.persistent_watch_count(), 4);
    // They survive a reconnect (setWatches2 re-arms them).
    w.cut(a);
    assert_eq!(w.zk.persistent_watch_count(), 4);
    let res = w.call(
        a,
        Request::RemoveWatches(jute::WatchesRequest {
            path: "/r".into(),
            kind: jute::WatcherType::Any,
        }),
    );
    assert_eq!(res, Ok(Response::Empty));
    assert_eq!(w.zk.persistent_watch_count(), 2);
    let res = w.call(
        a,
        Request::CheckWatches(jute::WatchesRequest {
            path: "/r".into(),
            kind: jute::WatcherType::Any,
        }),
    );
    // 3.8's checkWatches answers Ok while *any* connection (here r's)
    // watches the path; removeWatches only touches the caller's own.
    assert_eq!(res, Ok(Response::Empty));
    let res = w.call(
        a,
        Request::RemoveWatches(jute::WatchesRequest {
            path: "/r".into(),
            kind: jute::WatcherType::Any,
        }),
    );
    assert_eq!(res, Err(RequestError::Server(ErrorCode::NoWatcher)));
    assert_eq!(w.zk.persistent_watch_count(), 2);
}

#[test]
fn one_mode_per_path_and_connection_as_in_3_8() {
    let mut w = World::new();
    let a = w.client();
    let b = w.client();
    w.call(
        a,
        Request::Create(create("/r", b"", CreateMode::Persistent)),
    )
    .unwrap();
    // A one-shot child watch on a path with a persistent watch replaces the
    // persistent mode in the child table (ZooKeeper 3.8, fixed in 3.9 by
    // ZOOKEEPER-4466): after it fires, child changes are no longer seen.
    let (hp, _) = w.call_w(a, add_watch("/r", false), true);
    let (hc, _) = w.call_w(a, Request::GetChildren(pw("/r", true)), true);
    for name in ["/r/1", "/r/2"] {
        w.call(
            b,
            Request::Create(create(name, b"", CreateMode::Persistent)),
        )
        .unwrap();
    }
    let fired = w.fired(a);
    // The client core hands the one notification to both its watchers.
    assert_eq!(
        fired,
        vec![
            (hc, EventType::NodeChildrenChanged, "/r".to_string()),
            (hp, EventType::NodeChildrenChanged, "/r".to_string()),
        ]
    );
    // The data half is still persistent.
    w.zk.set_data_as_admin(w.now, "/r", b"1").unwrap();
    w.zk.set_data_as_admin(w.now, "/r", b"2").unwrap();
    w.pump();
    assert_eq!(w.fired(a).len(), 2);
}

#[test]
fn one_notification_per_connection_when_watches_overlap() {
    let mut w = World::with(|zk| zk.with_trace());
    let a = w.client();
    w.call(
        a,
        Request::Create(create("/r", b"", CreateMode::Persistent)),
    )
    .unwrap();
    let (hr, _) = w.call_w(
        a,
        Request::AddWatch(jute::AddWatchRequest {
            path: "/r".into(),
            mode: jute::AddWatchMode::PersistentRecursive,
        }),
        true,
    );
    let (he, _) = w.call_w(a, Request::Exists(pw("/r/z", true)), true);
    w.zk.take_trace();
    w.zk.create_as_admin(w.now, "/r/z", b"", CreateMode::Persistent)
        .unwrap();
    w.pump();
    let events: Vec<String> =
        w.zk.take_trace()
            .into_iter()
            .filter(|l| l.contains("event"))
            .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    let mut fired = w.fired(a);
    fired.sort_by_key(|(h, _, _)| *h);
    let mut want = vec![
        (hr, EventType::NodeCreated, "/r/z".to_string()),
        (he, EventType::NodeCreated, "/r/z".to_string()),
    ];
    want.sort_by_key(|(h, _, _)| *h);
    assert_eq!(fired, want);
}
