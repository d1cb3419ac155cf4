//! The data tree: create, get, set, delete, multi, containers and child
//! order, and writes whose reply is lost.

use super::*;

#[test]
fn create_get_set_delete() {
    let mut w = World::new();
    let a = w.client();
    let z0 = w.zk.last_zxid();
    let r = w.call(
        a,
        Request::Create2(create("/a", b"hello", CreateMode::Persistent)),
    );
    let Ok(Response::Created { path, stat }) = r else {
        panic!("{r:?}")
    };
    assert_eq!(path, "/a");
    assert_eq!(stat.czxid, z0 + 1);
    assert_eq!((stat.mzxid, stat.pzxid), (z0 + 1, z0 + 1));
    assert_eq!(
        (stat.version, stat.data_length, stat.ephemeral_owner),
        (0, 5, 0)
    );
    assert_eq!(w.zk.last_zxid(), z0 + 1);

    match w.call(a, Request::GetData(pw("/a", false))) {
        Ok(Response::Data { data, stat }) => {
            assert_eq!(data, b"hello");
            assert_eq!(stat.czxid, z0 + 1);
        }
        other => panic!("{other:?}"),
    }
    // Reads do not move the zxid.
    assert_eq!(w.zk.last_zxid(), z0 + 1);
    assert_eq!(
        w.call(
            a,
            Request::Create(create("/a", b"", CreateMode::Persistent))
        ),
        Err(RequestError::Server(ErrorCode::NodeExists))
    );
    assert_eq!(
        w.call(
            a,
            Request::Create(create("/x/y", b"", CreateMode::Persistent))
        ),
        Err(RequestError::Server(ErrorCode::NoNode))
    );
    assert_eq!(
        w.call(
            a,
            Request::Create(create("bad", b"", CreateMode::Persistent))
        ),
        Err(RequestError::Server(ErrorCode::BadArguments))
    );
    match w.call(
        a,
        Request::SetData(SetDataRequest {
            path: "/a".into(),
            data: b"bye".to_vec(),
            version: 0,
        }),
    ) {
        Ok(Response::Stat(stat)) => assert_eq!((stat.version, stat.data_length), (1, 3)),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        w.call(
            a,
            Request::Create(create("/a/c", b"", CreateMode::Persistent))
        )
        .map(|_| ()),
        Ok(())
    );
    assert_eq!(
        w.call(
            a,
            Request::Delete(PathVersion {
                path: "/a".into(),
                version: 1
            })
        ),
        Err(RequestError::Server(ErrorCode::NotEmpty))
    );
    assert_eq!(
        w.call(
            a,
            Request::Delete(PathVersion {
                path: "/a/c".into(),
                version: 3
            })
        ),
        Err(RequestError::Server(ErrorCode::BadVersion))
    );
    let before = w.zk.exists("/a").unwrap();
    let counter = w.zk.sequence_counter("/a").unwrap();
    w.call(
        a,
        Request::Delete(PathVersion {
            path: "/a/c".into(),
            version: 0,
        }),
    )
    .unwrap();
    let after = w.zk.exists("/a").unwrap();
    // Delete moves the parent's pzxid and the cversion clients see, not
    // the sequence counter (ZooKeeper 3.8 stores creates only and reports
    // creates × 2 − children).
    assert_eq!(w.zk.sequence_counter("/a"), Some(counter));
    assert_eq!(after.cversion, before.cversion + 1);
    assert!(after.pzxid > before.pzxid);
    w.call(
        a,
        Request::Delete(PathVersion {
            path: "/a".into(),
            version: 1,
        }),
    )
    .unwrap();
    assert!(w.zk.exists("/a").is_none());
    assert_eq!(
        w.call(a, Request::Exists(pw("/a", false))),
        Err(RequestError::Server(ErrorCode::NoNode))
    );
    assert_eq!(
        w.call(
            a,
            Request::Delete(PathVersion {
                path: "/zookeeper".into(),
                version: -1
            })
        ),
        Err(RequestError::Server(ErrorCode::BadArguments))
    );
    match w.call(a, Request::GetChildren(pw("/", false))) {
        Ok(Response::Children(c)) => assert_eq!(c.to_vec(), vec!["zookeeper".to_string()]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn failed_multi_applies_nothing_and_reports_per_op_errors() {
    let mut w = World::new();
    let a = w.client();
    w.call(
        a,
        Request::Create(create("/m", b"", CreateMode::Persistent)),
    )
    .unwrap();
    let (h, _) = w.call_w(a, Request::GetChildren(pw("/m", true)), true);
    let cversion = w.zk.exists("/m").unwrap().cversion;
    let z0 = w.zk.last_zxid();
    let r = w.call(
        a,
        Request::Multi(vec![
            MultiOp::Create(create("/m/x", b"", CreateMode::PersistentSequential)),
            MultiOp::Check(PathVersion {
                path: "/missing".into(),
                version: -1,
            }),
            MultiOp::Delete(PathVersion {
                path: "/m".into(),
                version: -1,
            }),
        ]),
    );
    assert_eq!(
        r,
        Ok(Response::Multi(vec![
            MultiResult::Error(ErrorCode::Ok),
            MultiResult::Error(ErrorCode::NoNode),
            MultiResult::Error(ErrorCode::RuntimeInconsistency),
        ]))
    );
    assert!(w.zk.children("/m").is_empty());
    assert_eq!(w.zk.exists("/m").unwrap().cversion, cversion);
    // A failed multi is still a txn.
    assert_eq!(w.zk.last_zxid(), z0 + 1);
    assert!(w.fired(a).is_empty());
    // A good one applies every op, later ops seeing earlier ones.
    let r = w.call(
        a,
        Request::Multi(vec![
            MultiOp::Create2(create("/m/x", b"", CreateMode::PersistentSequential)),
            MultiOp::Create(create("/m/x", b"", CreateMode::PersistentSequential)),
            MultiOp::Check(PathVersion {
                path: "/m/x0000000000".into(),
                version: 0,
            }),
            MultiOp::SetData(SetDataRequest {
                path: "/m/x0000000001".into(),
                data: b"d".to_vec(),
                version: 0,
            }),
        ]),
    );
    let Ok(Response::Multi(results)) = r else {
        panic!("{r:?}")
    };
    // 3.8 answers a create2 inside a multi with the path only.
    assert_eq!(
        results[0],
        MultiResult::Create {
            path: "/m/x0000000000".into()
        }
    );
    assert_eq!(w.zk.exists("/m/x0000000000").unwrap().czxid, z0 + 2);
    assert_eq!(
        results[1],
        MultiResult::Create {
            path: "/m/x0000000001".into()
        }
    );
    assert_eq!(results[2], MultiResult::Check);
    assert!(matches!(&results[3], MultiResult::SetData { stat } if stat.version == 1));
    assert_eq!(w.zk.last_zxid(), z0 + 2);
    assert_eq!(
        w.fired(a),
        vec![(h, EventType::NodeChildrenChanged, "/m".to_string())]
    );
}

#[test]
fn containers_are_collected_once_emptied() {
    let mut w = World::new();
    let a = w.client();
    let r = w.call(
        a,
        Request::CreateContainer(create("/ct", b"", CreateMode::Container)),
    );
    let Ok(Response::Created { stat, .. }) = r else {
        panic!("{r:?}")
    };
    // Stored as a container owner, shown to clients as 0.
    assert_eq!(stat.ephemeral_owner, 0);
    assert_eq!(w.zk.collect_containers(w.now), 0);
    w.call(
        a,
        Request::Create(create("/ct/x", b"", CreateMode::Ephemeral)),
    )
    .unwrap();
    assert_eq!(w.zk.collect_containers(w.now), 0);
    w.call(
        a,
        Request::Delete(PathVersion {
            path: "/ct/x".into(),
            version: -1,
        }),
    )
    .unwrap();
    assert_eq!(w.zk.collect_containers(w.now), 1);
    assert!(w.zk.exists("/ct").is_none());
}

#[test]
fn child_order_seed_permutes_listing_deterministically() {
    let names = |seed: u64| {
        let mut w = World::with(|zk| zk.with_child_order_seed(seed));
        let a = w.client();
        w.call(
            a,
            Request::Create(create("/p", b"", CreateMode::Persistent)),
        )
        .unwrap();
        for i in 0..8 {
            w.call(
                a,
                Request::Create(create(&format!("/p/c{i}"), b"", CreateMode::Persistent)),
            )
            .unwrap();
        }
        match w.call(a, Request::GetChildren(pw("/p", false))) {
            Ok(Response::Children(c)) => c.to_vec(),
            other => panic!("{other:?}"),
        }
    };
    let sorted: Vec<String> = (0..8).map(|i| format!("c{i}")).collect();
    assert_eq!(names(0), sorted);
    let a = names(7);
    assert_eq!(a, names(7));
    assert_ne!(a, sorted);
    let mut again = a.clone();
    again.sort();
    assert_eq!(again, sorted);
}

#[test]
fn a_lost_reply_leaves_the_write_applied() {
    let mut w = World::new();
    let a = w.client();
    let sid = w.session_id(a);
    let h = w.submit(
        a,
        Request::Create2(create("/lock-", b"", CreateMode::EphemeralSequential)),
        false,
    );
    // The request reaches the server; the connection dies before the reply.
    let out = w.clients[a].s.output().to_vec();
    w.clients[a].s.consume_output(out.len());
    let conn = w.clients[a].conn.unwrap();
    w.zk.receive(w.now, conn, &out);
    w.clients[a].conn = None;
    w.zk.disconnect(w.now, conn);
    w.clients[a].s.handle_disconnected(w.now);
    w.advance(Duration::from_millis(1));
    let pos = w.clients[a]
        .replies
        .iter()
        .position(|(rh, _)| *rh == h)
        .unwrap();
    assert_eq!(
        w.clients[a].replies[pos].1,
        Err(RequestError::ConnectionLoss)
    );
    assert_eq!(w.clients[a].s.state(), SessionState::Connected);
    assert_eq!(
        w.zk.ephemerals_of(sid),
        vec!["/lock-0000000000".to_string()]
    );
}
