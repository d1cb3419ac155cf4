//! Nodes: create, read, update, delete, the create modes, multi and TTL nodes.

use super::*;

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
    // A TTL outside the server's bounds (1 ms to 2^40 - 1 ms) is refused
    // before sending: the error is the client's, not the server's
    // Unimplemented. (The bounds themselves are accepted: `ttl_nodes`.)
    for outside in [
        Duration::ZERO,
        Duration::from_micros(999),
        Duration::from_millis(1 << 40),
    ] {
        let refused = c.create_with(
            &format!("{r}/ttl"),
            b"",
            &CreateOptions::new(CreateMode::PersistentWithTtl).ttl(outside),
        );
        assert!(
            matches!(refused, Err(Error::InvalidArgument(_))),
            "{outside:?}: {refused:?}"
        );
    }
    // A TTL given with a mode that has none is ignored: a plain create.
    let (plain, stat) = c
        .create_with(
            &format!("{r}/plain"),
            b"",
            &CreateOptions::new(CreateMode::Persistent).ttl(Duration::from_secs(60)),
        )
        .unwrap();
    assert_eq!((plain, stat.ephemeral_owner), (format!("{r}/plain"), 0));
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
    // The server's bounds, 1 ms and 2^40 - 1 ms, are sent and accepted.
    for edge in [
        Duration::from_millis(1),
        Duration::from_millis((1 << 40) - 1),
    ] {
        c.create_with("/ttl-edge-", b"", &seq.clone().ttl(edge))
            .unwrap_or_else(|e| panic!("{edge:?}: {e:?}"));
    }
    // A refused TTL create names itself and the path.
    assert_eq!(
        c.create_with("/ttl", b"", &ttl).unwrap_err(),
        Error::Server {
            code: ErrorCode::NodeExists,
            op: Some(OpCode::CreateTtl),
            path: Some("/ttl".to_owned()),
        }
    );
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

/// A container is a container on the server: emptied, the server's sweep
/// deletes it (the sweep runs every 100 ms here). Created as an ordinary
/// node, nothing in any reply would differ (a container's Stat says
/// `ephemeral_owner` 0 too), but it would stay for good. Kills nodes.rs
/// `create_with`'s Container arm deleted (sent as create2).
#[test]
fn an_emptied_container_is_deleted_by_the_server() {
    let server = zk::ZkServer::start_with_options(
        &zk::ZkOptions::new().jvm_flag("-Dznode.container.checkIntervalMs=100"),
    );
    let c = Client::connect(&server.connect_string(), T).unwrap();
    let (container, _) = c
        .create_with("/box", b"", &CreateOptions::new(CreateMode::Container))
        .unwrap();
    c.create("/box/item", b"", CreateMode::Persistent).unwrap();
    c.delete("/box/item", None).unwrap();
    testkit::wait_until("the server to sweep the empty container", T * 3, || {
        c.exists(&container).unwrap().is_none()
    });
}
