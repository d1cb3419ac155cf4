//! Watches: one-shot watches fire once, persistent ones on every change.

use super::*;

#[test]
fn watches_fire_exactly_once() {
    let c = client();
    let other = client();
    let r = root(&c, "watches");
    let p = format!("{r}/w");

    // exists on a missing node fires on creation.
    let (none, created) = c.exists_and_watch(&p).unwrap();
    assert!(none.is_none());
    assert_eq!(created.try_recv().unwrap(), None);
    other.create(&p, b"", CreateMode::Persistent).unwrap();
    let ev = created.recv_timeout(T).unwrap();
    assert_eq!(
        (ev.kind, ev.path.as_str()),
        (EventType::NodeCreated, p.as_str())
    );

    // getData fires on data change, once, though the node changes twice.
    let (_, _, changed) = c.get_data_and_watch(&p).unwrap();
    other.set_data(&p, b"1", None).unwrap();
    other.set_data(&p, b"2", None).unwrap();
    assert_eq!(
        changed.recv_timeout(T).unwrap().kind,
        EventType::NodeDataChanged
    );
    // exists on an existing node, and children, both fire on deletion / child change.
    let (_, _, children) = c.get_children_and_watch(&p).unwrap();
    other
        .create(&format!("{p}/kid"), b"", CreateMode::Ephemeral)
        .unwrap();
    assert_eq!(
        children.recv_timeout(T).unwrap().kind,
        EventType::NodeChildrenChanged
    );
    other.delete(&format!("{p}/kid"), None).unwrap();
    let (some, deleted) = c.exists_and_watch(&p).unwrap();
    assert!(some.is_some());
    other.delete(&p, None).unwrap();
    assert_eq!(
        deleted.recv_timeout(T).unwrap().kind,
        EventType::NodeDeleted
    );

    // A round trip after all the changes proves no second event is queued.
    c.sync(&r).unwrap();
    c.exists(&r).unwrap();
    for w in [&created, &changed, &children, &deleted] {
        // Spent: the channel is closed and holds no second event.
        assert_eq!(w.try_recv(), Err(Error::Closed), "a watch fired twice");
    }
}

#[test]
fn persistent_watches_fire_on_every_change_and_survive_reconnects() {
    use zklock::AddWatchMode;
    let server = zk::ZkServer::start();
    let proxy = Proxy::start(server.addr());
    let c = Client::connect(&proxy.connect_string(), T).unwrap();
    let other = Client::connect(&server.connect_string(), T).unwrap();
    let node = c.add_watch("/pw", AddWatchMode::Persistent).unwrap();
    let tree = c
        .add_watch("/tree", AddWatchMode::PersistentRecursive)
        .unwrap();
    other.create("/pw", b"", CreateMode::Persistent).unwrap();
    other.set_data("/pw", b"1", None).unwrap();
    other.set_data("/pw", b"2", None).unwrap();
    other.create("/tree", b"", CreateMode::Persistent).unwrap();
    other
        .create("/tree/a", b"", CreateMode::Persistent)
        .unwrap();
    other
        .create("/tree/a/b", b"", CreateMode::Persistent)
        .unwrap();
    let kinds = |w: &zklock::PersistentWatch, n: usize| -> Vec<(EventType, String)> {
        (0..n)
            .map(|_| {
                let e = w.recv_timeout(T).unwrap();
                (e.kind, e.path)
            })
            .collect()
    };
    assert_eq!(
        kinds(&node, 3),
        vec![
            (EventType::NodeCreated, "/pw".to_string()),
            (EventType::NodeDataChanged, "/pw".to_string()),
            (EventType::NodeDataChanged, "/pw".to_string()),
        ]
    );
    assert_eq!(
        kinds(&tree, 3),
        vec![
            (EventType::NodeCreated, "/tree".to_string()),
            (EventType::NodeCreated, "/tree/a".to_string()),
            (EventType::NodeCreated, "/tree/a/b".to_string()),
        ]
    );
    // Away while things change: the server does not replay them, so each
    // watch says "look again" once; later changes arrive as before.
    proxy.refuse(true);
    proxy.cut_all();
    other.set_data("/pw", b"3", None).unwrap();
    proxy.refuse(false);
    c.wait_connected(T * 2).unwrap();
    for w in [&node, &tree] {
        assert_eq!(w.recv_timeout(T).unwrap().kind, EventType::None);
    }
    assert_eq!(c.get_data("/pw").unwrap().0, b"3");
    other.set_data("/pw", b"4", None).unwrap();
    other.delete("/tree/a/b", None).unwrap();
    assert_eq!(
        node.recv_timeout(T).unwrap().kind,
        EventType::NodeDataChanged
    );
    let gone = tree.recv_timeout(T).unwrap();
    assert_eq!(
        (gone.kind, gone.path.as_str()),
        (EventType::NodeDeleted, "/tree/a/b")
    );
    // Dropped: the server forgets them too.
    drop(node);
    drop(tree);
    c.sync("/").unwrap();
    let wchs = server.four_letter("wchs");
    assert!(wchs.contains("Total watches:0"), "{wchs}");
}
