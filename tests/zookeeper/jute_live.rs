//! The codec alone against a real server: the handshake and a few ops
//! encoded and decoded with `jute` only (testkit's `RawClient`, a blocking
//! TcpStream), never through zklock's client.

use jute::*;
use testkit::raw::RawClient;

#[test]
fn handshake_and_basic_ops_with_the_codec_only() {
    let server = testkit::zk::shared();
    let mut raw = RawClient::connect(server.addr(), 6000);
    let resp = raw.session().clone();
    assert_eq!(resp.timeout_ms, 6000);
    assert_ne!(resp.session_id, 0);

    let root = format!("/jute-live-{}", std::process::id());
    let (h, r) = raw.call(&Request::Create2(CreateRequest {
        path: root.clone(),
        data: b"root".to_vec(),
        acl: Acl::open_unsafe(),
        mode: CreateMode::Persistent,
    }));
    let Ok(Response::Created { path, stat }) = r else {
        panic!("{r:?}")
    };
    assert_eq!(path, root);
    assert_eq!((stat.czxid, stat.data_length, stat.version), (h.zxid, 4, 0));

    let (_, again) = raw.call(&Request::Create2(CreateRequest {
        path: root.clone(),
        data: vec![],
        acl: Acl::open_unsafe(),
        mode: CreateMode::Persistent,
    }));
    assert_eq!(again, Err(ErrorCode::NodeExists));

    let mut created = Vec::new();
    for _ in 0..3 {
        let (_, r) = raw.call(&Request::Create2(CreateRequest {
            path: format!("{root}/seq-"),
            data: vec![],
            acl: Acl::open_unsafe(),
            mode: CreateMode::EphemeralSequential,
        }));
        let Ok(Response::Created { path, stat }) = r else {
            panic!("{r:?}")
        };
        assert_eq!(stat.ephemeral_owner, resp.session_id);
        created.push(path.rsplit('/').next().unwrap().to_owned());
    }
    let (_, r) = raw.call(&Request::GetChildren2(PathWatch {
        path: root.clone(),
        watch: false,
    }));
    let Ok(Response::Children2 { children, stat }) = r else {
        panic!("{r:?}")
    };
    let mut children = children.to_vec();
    children.sort();
    assert_eq!(children, created);
    assert_eq!(stat.num_children, 3);

    let (_, r) = raw.call(&Request::Exists(PathWatch {
        path: format!("{root}/missing"),
        watch: false,
    }));
    assert_eq!(r, Err(ErrorCode::NoNode));
    let (_, r) = raw.call(&Request::Delete(PathVersion {
        path: root.clone(),
        version: -1,
    }));
    assert_eq!(r, Err(ErrorCode::NotEmpty));
    for c in &created {
        let (_, r) = raw.call(&Request::Delete(PathVersion {
            path: format!("{root}/{c}"),
            version: -1,
        }));
        assert_eq!(r, Ok(Response::Empty));
    }
    let (_, r) = raw.call(&Request::Delete(PathVersion {
        path: root.clone(),
        version: 5,
    }));
    assert_eq!(r, Err(ErrorCode::BadVersion));
    let (_, r) = raw.call(&Request::Delete(PathVersion {
        path: root,
        version: 0,
    }));
    assert_eq!(r, Ok(Response::Empty));

    // Ping uses its reserved xid and answers with an empty body.
    raw.send(xid::PING, &Request::Ping);
    let frame = raw.read_frame().unwrap();
    let ServerMessage::Reply { header, body } = decode_server_message(&frame).unwrap() else {
        panic!("ping answered with a watch event")
    };
    assert_eq!(
        (header.xid, header.err, body.len()),
        (xid::PING, ErrorCode::Ok, 0)
    );
}
