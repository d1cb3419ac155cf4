//! The blocking client against a real standalone ZooKeeper.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use testkit::proxy::{Direction, Proxy};
use testkit::zk;
use zklock::{
    perms, Acl, Client, CreateMode, CreateOptions, Error, ErrorCode, EventType, Id, Op, OpCode,
    OpResult, SessionState,
};

const T: Duration = Duration::from_secs(10);

fn client() -> Client {
    testkit::shared_client(T)
}

/// A fresh persistent root for one test, removed by nobody (the server is per-binary).
fn root(c: &Client, name: &str) -> String {
    let path = format!("/client-{name}-{}", std::process::id());
    c.create(&path, b"", CreateMode::Persistent)
        .expect("create test root");
    path
}

#[test]
fn create_read_update_delete() {
    let c = client();
    let r = root(&c, "crud");
    let p = format!("{r}/a");
    assert_eq!(c.create(&p, b"one", CreateMode::Persistent).unwrap(), p);
    assert_eq!(
        c.create(&p, b"", CreateMode::Persistent).unwrap_err(),
        Error::Server {
            code: ErrorCode::NodeExists,
            op: Some(OpCode::Create2),
            path: Some(p.clone()),
        }
    );
    let (data, stat) = c.get_data(&p).unwrap();
    assert_eq!(data, b"one");
    assert_eq!(stat.version, 0);
    let stat2 = c.set_data(&p, b"two", Some(0)).unwrap();
    assert_eq!(stat2.version, 1);
    assert_eq!(
        c.set_data(&p, b"x", Some(0)).unwrap_err(),
        Error::Server {
            code: ErrorCode::BadVersion,
            op: Some(OpCode::SetData),
            path: Some(p.clone()),
        }
    );
    assert_eq!(c.exists(&p).unwrap().map(|s| s.version), Some(1));
    assert_eq!(c.exists(&format!("{r}/nope")).unwrap(), None);
    assert!(c.get_data(&format!("{r}/nope")).unwrap_err().is_no_node());
    assert_eq!(
        c.delete(&r, None).unwrap_err(),
        Error::Server {
            code: ErrorCode::NotEmpty,
            op: Some(OpCode::Delete),
            path: Some(r.clone()),
        }
    );
    assert_eq!(
        c.delete(&p, Some(0)).unwrap_err(),
        Error::Server {
            code: ErrorCode::BadVersion,
            op: Some(OpCode::Delete),
            path: Some(p.clone()),
        }
    );
    c.delete(&p, Some(1)).unwrap();
    assert!(c.delete(&p, None).unwrap_err().is_no_node());
    c.sync(&r).unwrap();
}

#[test]
fn create_modes() {
    let c = client();
    let r = root(&c, "modes");
    let s1 = c
        .create(&format!("{r}/s-"), b"", CreateMode::PersistentSequential)
        .unwrap();
    let s2 = c
        .create(&format!("{r}/s-"), b"", CreateMode::PersistentSequential)
        .unwrap();
    assert!(
        s1.ends_with("0000000000") && s2.ends_with("0000000001"),
        "{s1} {s2}"
    );
    let (e, stat) = c
        .create_with(
            &format!("{r}/e"),
            b"",
            &CreateOptions::new(CreateMode::Ephemeral),
        )
        .unwrap();
    assert_eq!(stat.ephemeral_owner, c.session_id());
    assert!(c.exists(&e).unwrap().is_some());
    let es = c
        .create(&format!("{r}/es-"), b"", CreateMode::EphemeralSequential)
        .unwrap();
    assert!(es.contains("/es-00000000"));
    let (cont, _) = c
        .create_with(
            &format!("{r}/container"),
            b"",
            &CreateOptions::new(CreateMode::Container),
        )
        .unwrap();
    assert!(c.exists(&cont).unwrap().is_some());
    // TTL nodes need the server's extended types, off by default: the
    // refusal is a typed error (a server that allows them: `ttl_nodes`).
    let ttl = c.create_with(
        &format!("{r}/ttl"),
        b"",
        &CreateOptions::new(CreateMode::PersistentWithTtl).ttl(Duration::from_secs(60)),
    );
    assert_eq!(ttl.unwrap_err().code(), Some(ErrorCode::Unimplemented));
    let (children, stat) = c.get_children_with_stat(&r).unwrap();
    assert_eq!(children.len(), stat.num_children as usize);
    let names: HashSet<_> = children.into_iter().collect();
    assert!(names.contains("e") && names.contains("container"));
    assert!(
        c.create(&format!("{r}/e/child"), b"", CreateMode::Persistent)
            .unwrap_err()
            .code()
            == Some(ErrorCode::NoChildrenForEphemerals)
    );
}

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
fn ten_thousand_requests_from_sixteen_threads() {
    let c = client();
    let r = root(&c, "load");
    for t in 0..16 {
        c.create(
            &format!("{r}/t{t}"),
            format!("{t}").as_bytes(),
            CreateMode::Persistent,
        )
        .unwrap();
    }
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let c = c.clone();
            let r = r.clone();
            std::thread::spawn(move || {
                let path = format!("{r}/t{t}");
                let (mut writes, mut last_version) = (0, 0);
                for i in 0..625 {
                    if i % 5 == 0 {
                        let stat = c.set_data(&path, format!("{t}").as_bytes(), None).unwrap();
                        writes += 1;
                        last_version = stat.version;
                    } else {
                        // Each thread reads its own node: a reply sent to the
                        // wrong caller would show another thread's number.
                        let (data, _) = c.get_data(&path).unwrap();
                        assert_eq!(data, format!("{t}").as_bytes());
                    }
                }
                (writes, last_version)
            })
        })
        .collect();
    for t in threads {
        // Every write was answered to its own caller, in order.
        let (writes, last_version) = t.join().unwrap();
        assert_eq!(last_version, writes);
    }
}

#[test]
fn negotiated_timeout_is_clamped_by_the_server() {
    // The test server's tickTime is 2 s: sessions are clamped to [4 s, 40 s].
    let short =
        Client::connect(&zk::shared().connect_string(), Duration::from_millis(500)).unwrap();
    assert_eq!(short.negotiated_timeout(), Some(Duration::from_secs(4)));
    let long = Client::connect(&zk::shared().connect_string(), Duration::from_secs(600)).unwrap();
    assert_eq!(long.negotiated_timeout(), Some(Duration::from_secs(40)));
}

#[test]
fn idle_session_is_kept_alive_by_pings() {
    let c = Client::connect(&zk::shared().connect_string(), Duration::from_secs(4)).unwrap();
    let states = c.subscribe();
    assert_eq!(states.recv().unwrap(), SessionState::Connected);
    let r = root(&c, "idle");
    let e = c
        .create(&format!("{r}/eph"), b"", CreateMode::Ephemeral)
        .unwrap();
    let id = c.session_id();
    // Idle for three session timeouts: any state change would be a failure.
    let negotiated = c.negotiated_timeout().unwrap();
    assert_eq!(
        states.recv_timeout(negotiated * 3),
        Err(crossbeam_channel::RecvTimeoutError::Timeout)
    );
    assert_eq!(c.state(), SessionState::Connected);
    assert_eq!(c.session_id(), id);
    let other = client();
    let stat = other.exists(&e).unwrap().expect("ephemeral survived");
    assert_eq!(stat.ephemeral_owner, id);
}

#[test]
fn a_refused_operation_names_itself_and_the_callers_path() {
    let c = client();
    let r = root(&c, "refusal");
    // A parent that lets anyone create and read children, but not delete them.
    let world = |perms| Acl {
        perms,
        id: Id {
            scheme: "world".into(),
            id: "anyone".into(),
        },
    };
    let parent =
        CreateOptions::new(CreateMode::Persistent).acl(vec![world(perms::READ | perms::CREATE)]);
    c.create_with(&format!("{r}/jobs"), b"", &parent).unwrap();
    let node = c
        .create(
            &format!("{r}/jobs/lock-"),
            b"",
            CreateMode::EphemeralSequential,
        )
        .unwrap();
    // Through a chroot: the error names the path as this caller named it.
    let rooted = Client::connect(&format!("{}{r}", zk::shared().connect_string()), T).unwrap();
    let mine = node.strip_prefix(&r).unwrap().to_owned();
    let e = rooted.delete(&mine, None).unwrap_err();
    assert_eq!(
        e,
        Error::Server {
            code: ErrorCode::NoAuth,
            op: Some(OpCode::Delete),
            path: Some(mine.clone()),
        }
    );
    assert_eq!(e.to_string(), format!("NoAuth on delete {mine}"));
    assert_eq!(
        (e.code(), e.op(), e.path()),
        (
            Some(ErrorCode::NoAuth),
            Some(OpCode::Delete),
            Some(mine.as_str())
        )
    );
    // Each call says what it was.
    let missing = rooted.get_children("/jobs/nope").unwrap_err();
    assert_eq!(missing.to_string(), "NoNode on getChildren /jobs/nope");
    let exists = rooted
        .create("/jobs", b"", CreateMode::Persistent)
        .unwrap_err();
    assert_eq!(exists.to_string(), "NodeExists on create /jobs");
    let acl = rooted
        .set_acl("/jobs", Acl::open_unsafe(), None)
        .unwrap_err();
    assert_eq!(acl.to_string(), "NoAuth on setACL /jobs");
    // A refused op of a multi: its index, kind and path.
    let m = rooted
        .multi(&[Op::check("/jobs", None), Op::delete(&mine, None)])
        .unwrap_err();
    assert_eq!(
        m,
        Error::MultiFailed {
            index: 1,
            code: ErrorCode::NoAuth,
            op: OpCode::Delete,
            path: mine.clone(),
        }
    );
    assert!(m.to_string().contains(&format!("(delete {mine})")), "{m}");
}

#[test]
fn chroot_is_applied_and_stripped() {
    let c = client();
    let r = root(&c, "chroot");
    let rooted = Client::connect(&format!("{}{r}", zk::shared().connect_string()), T).unwrap();
    let p = rooted.create("/x", b"in", CreateMode::Persistent).unwrap();
    assert_eq!(p, "/x");
    assert_eq!(c.get_data(&format!("{r}/x")).unwrap().0, b"in");
    let s = rooted
        .create("/seq-", b"", CreateMode::PersistentSequential)
        .unwrap();
    assert!(s.starts_with("/seq-"), "{s}");
    let mut kids = rooted.get_children("/").unwrap();
    kids.sort();
    assert_eq!(kids[1], "x");
    let (_, w) = rooted.exists_and_watch("/x").unwrap();
    c.delete(&format!("{r}/x"), None).unwrap();
    assert_eq!(w.recv_timeout(T).unwrap().path, "/x");
    let results = rooted
        .multi(&[Op::create("/m", b"", CreateMode::Persistent)])
        .unwrap();
    assert!(matches!(&results[0], OpResult::Create { path, .. } if path == "/m"));
}

#[test]
fn digest_auth_and_creator_acl() {
    let owner = client();
    owner.add_auth("digest", b"alice:secret").unwrap();
    let r = root(&owner, "auth");
    let p = format!("{r}/private");
    owner
        .create_with(
            &p,
            b"s3cret",
            &CreateOptions::new(CreateMode::Persistent).acl(Acl::creator_all()),
        )
        .unwrap();
    assert_eq!(owner.get_data(&p).unwrap().0, b"s3cret");
    let (acl, _) = owner.get_acl(&p).unwrap();
    assert_eq!(acl[0].id.scheme, "digest");
    assert!(acl[0].id.id.starts_with("alice:"));

    let stranger = client();
    assert_eq!(
        stranger.get_data(&p).unwrap_err(),
        Error::Server {
            code: ErrorCode::NoAuth,
            op: Some(OpCode::GetData),
            path: Some(p.clone()),
        }
    );
    let wrong = client();
    wrong.add_auth("digest", b"alice:wrong").unwrap();
    assert_eq!(
        wrong.get_data(&p).unwrap_err(),
        Error::Server {
            code: ErrorCode::NoAuth,
            op: Some(OpCode::GetData),
            path: Some(p.clone()),
        }
    );
    let friend = client();
    friend.add_auth("digest", b"alice:secret").unwrap();
    assert_eq!(friend.get_data(&p).unwrap().0, b"s3cret");
    let stat = owner.set_acl(&p, Acl::open_unsafe(), None).unwrap();
    assert_eq!(stat.aversion, 1);
    assert_eq!(stranger.get_data(&p).unwrap().0, b"s3cret");
}

#[test]
fn multi_applies_all_or_nothing() {
    let c = client();
    let r = root(&c, "multi");
    let a = format!("{r}/a");
    let results = c
        .multi(&[
            Op::create(&a, b"1", CreateMode::Persistent),
            Op::set_data(&a, b"2", Some(0)),
            Op::check(&a, Some(1)),
        ])
        .unwrap();
    assert!(matches!(results[0], OpResult::Create { .. }));
    assert!(matches!(results[1], OpResult::SetData(stat) if stat.version == 1));
    assert_eq!(results[2], OpResult::Check);
    let err = c
        .multi(&[
            Op::create(&format!("{r}/b"), b"", CreateMode::Persistent),
            Op::check(&a, Some(7)),
        ])
        .unwrap_err();
    assert_eq!(
        err,
        Error::MultiFailed {
            index: 1,
            code: ErrorCode::BadVersion,
            op: OpCode::Check,
            path: a.clone(),
        }
    );
    assert_eq!(c.exists(&format!("{r}/b")).unwrap(), None);
    c.multi(&[Op::delete(&a, None)]).unwrap();
    assert_eq!(c.exists(&a).unwrap(), None);
}

#[test]
fn close_removes_ephemerals_and_ends_the_session() {
    let c = client();
    let watcher = client();
    let r = root(&c, "close");
    let e = c
        .create(&format!("{r}/e"), b"", CreateMode::Ephemeral)
        .unwrap();
    let (_, w) = watcher.exists_and_watch(&e).unwrap();
    let (_, _, pending) = c.get_data_and_watch(&r).unwrap();
    c.close().unwrap();
    assert_eq!(c.state(), SessionState::Closed);
    assert_eq!(w.recv_timeout(T).unwrap().kind, EventType::NodeDeleted);
    assert_eq!(pending.recv_timeout(T).unwrap_err(), Error::Closed);
    assert_eq!(c.exists(&r).unwrap_err(), Error::Closed);
}

#[test]
fn bad_input_is_refused_without_sending() {
    let proxy = Proxy::start(zk::shared().addr());
    let c = Client::connect(&proxy.connect_string(), Duration::from_secs(30)).unwrap();
    let r = root(&c, "bad");
    let before = proxy.bytes_forwarded(Direction::ClientToServer);
    for bad in [
        "",
        "rel",
        "/a/",
        "/a//b",
        "/a/./b",
        "/a/../b",
        "/nul\0",
        "/ctl\u{1}",
    ] {
        assert!(
            matches!(c.exists(bad), Err(Error::InvalidPath { .. })),
            "{bad:?} accepted"
        );
        assert!(matches!(
            c.create(bad, b"", CreateMode::Persistent),
            Err(Error::InvalidPath { .. })
        ));
    }
    let huge = vec![0u8; 2 * 1024 * 1024];
    assert!(matches!(
        c.create(&format!("{r}/huge"), &huge, CreateMode::Persistent),
        Err(Error::TooLarge { .. })
    ));
    assert!(matches!(
        c.multi(&[Op::check("relative", None)]),
        Err(Error::InvalidPath { .. })
    ));
    assert_eq!(proxy.bytes_forwarded(Direction::ClientToServer), before);
    // The client is still healthy after refusing all that.
    assert!(c.exists(&r).unwrap().is_some());

    match Client::connect("no-such-host.invalid:2181", T) {
        Err(e @ Error::Resolve { .. }) => {
            assert!(
                std::error::Error::source(&e).is_some(),
                "the resolver's error is kept"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        Client::connect("", T),
        Err(Error::InvalidConnectString(_))
    ));
    assert!(matches!(
        Client::connect("127.0.0.1:2181/bad/", T),
        Err(Error::InvalidPath { .. })
    ));
}

#[test]
fn clients_are_send_sync_and_share_one_session() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Client>();
    let c = Arc::new(client());
    let c2 = (*c).clone();
    assert_eq!(c.session_id(), c2.session_id());
}

#[test]
fn connections_use_tcp_keepalive() {
    let server = zk::ZkServer::start();
    let c = Client::connect(&server.connect_string(), Duration::from_secs(30)).unwrap();
    c.exists("/").unwrap();
    // /proc/net/tcp: the client side of the connection (remote port = the
    // server's) carries timer 02, the keepalive timer, once idle.
    let port = format!(":{:04X}", server.addr().port());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
        let timers: Vec<String> = table
            .lines()
            .skip(1)
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.get(2)?.ends_with(&port) && f.get(3)? == &"01")
                    .then(|| f.get(5).map(|t| t[..2].to_string()))?
            })
            .collect();
        assert_eq!(timers.len(), 1, "expected our one connection: {timers:?}");
        if timers[0] == "02" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no keepalive timer: {timers:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(c);
}

#[test]
fn ttl_nodes() {
    let server = zk::ZkServer::start_with_options(
        &zk::ZkOptions::new().config("extendedTypesEnabled", "true"),
    );
    let c = Client::connect(&server.connect_string(), T).unwrap();
    let ttl = CreateOptions::new(CreateMode::PersistentWithTtl).ttl(Duration::from_secs(60));
    let (p, stat) = c.create_with("/ttl", b"x", &ttl).unwrap();
    assert_eq!(p, "/ttl");
    assert_eq!(c.exists("/ttl").unwrap(), Some(stat));
    let seq =
        CreateOptions::new(CreateMode::PersistentSequentialWithTtl).ttl(Duration::from_secs(60));
    let (s, _) = c.create_with("/ttl-", b"", &seq).unwrap();
    assert!(s.starts_with("/ttl-00000000"), "{s}");
    // A TTL mode without a TTL never reaches the wire.
    assert_eq!(
        c.create_with(
            "/nope",
            b"",
            &CreateOptions::new(CreateMode::PersistentWithTtl)
        )
        .unwrap_err(),
        Error::InvalidArgument("a TTL mode needs CreateOptions::ttl")
    );
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
