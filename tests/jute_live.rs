//! The codec alone against a real server: a plain blocking TcpStream, the
//! handshake and a few ops encoded and decoded with `jute` only.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::BytesMut;
use jute::*;

struct Raw {
    stream: TcpStream,
    xid: i32,
}

impl Raw {
    fn read_frame(&mut self) -> Vec<u8> {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).expect("frame length");
        let len = frame_len(&len, DEFAULT_MAX_FRAME).unwrap().unwrap();
        let mut body = vec![0; len];
        self.stream.read_exact(&mut body).expect("frame body");
        body
    }

    fn call(&mut self, req: Request) -> (ReplyHeader, ReplyResult) {
        self.xid += 1;
        let mut buf = BytesMut::new();
        encode_request(&mut buf, self.xid, &req);
        self.stream.write_all(&buf).unwrap();
        loop {
            let frame = self.read_frame();
            match decode_server_message(&frame).unwrap() {
                ServerMessage::WatchEvent { .. } => continue,
                ServerMessage::Reply { header, body } => {
                    assert_eq!(header.xid, self.xid, "replies come in request order");
                    let result = decode_reply(req.op_code(), &header, body).unwrap();
                    return (header, result);
                }
            }
        }
    }
}

#[test]
fn handshake_and_basic_ops_with_the_codec_only() {
    let server = support::zk::shared();
    let stream = TcpStream::connect(server.addr()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut raw = Raw { stream, xid: 0 };
    let mut buf = BytesMut::new();
    encode_connect(
        &mut buf,
        &ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout_ms: 6000,
            session_id: 0,
            passwd: vec![0; 16],
            read_only: false,
        },
    );
    raw.stream.write_all(&buf).unwrap();
    let resp = ConnectResponse::decode_exact(&raw.read_frame()).unwrap();
    assert_eq!(resp.timeout_ms, 6000);
    assert_ne!(resp.session_id, 0);

    let root = format!("/jute-live-{}", std::process::id());
    let (h, r) = raw.call(Request::Create2(CreateRequest {
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

    let (_, again) = raw.call(Request::Create2(CreateRequest {
        path: root.clone(),
        data: vec![],
        acl: Acl::open_unsafe(),
        mode: CreateMode::Persistent,
    }));
    assert_eq!(again, Err(ErrorCode::NodeExists));

    let mut created = Vec::new();
    for _ in 0..3 {
        let (_, r) = raw.call(Request::Create2(CreateRequest {
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
    let (_, r) = raw.call(Request::GetChildren2(PathWatch {
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

    let (_, r) = raw.call(Request::Exists(PathWatch {
        path: format!("{root}/missing"),
        watch: false,
    }));
    assert_eq!(r, Err(ErrorCode::NoNode));
    let (_, r) = raw.call(Request::Delete(PathVersion {
        path: root.clone(),
        version: -1,
    }));
    assert_eq!(r, Err(ErrorCode::NotEmpty));
    for c in &created {
        let (_, r) = raw.call(Request::Delete(PathVersion {
            path: format!("{root}/{c}"),
            version: -1,
        }));
        assert_eq!(r, Ok(Response::Empty));
    }
    let (_, r) = raw.call(Request::Delete(PathVersion {
        path: root.clone(),
        version: 5,
    }));
    assert_eq!(r, Err(ErrorCode::BadVersion));
    let (_, r) = raw.call(Request::Delete(PathVersion {
        path: root,
        version: 0,
    }));
    assert_eq!(r, Ok(Response::Empty));

    // Ping uses its reserved xid and answers with an empty body.
    let mut buf = BytesMut::new();
    encode_request(&mut buf, xid::PING, &Request::Ping);
    raw.stream.write_all(&buf).unwrap();
    let frame = raw.read_frame();
    let ServerMessage::Reply { header, body } = decode_server_message(&frame).unwrap() else {
        panic!("ping answered with a watch event")
    };
    assert_eq!(
        (header.xid, header.err, body.len()),
        (xid::PING, ErrorCode::Ok, 0)
    );
}
