//! Wire-level checks on hand-driven connections: pings, auth, sync,
//! partial frames and garbage; the same inputs give the same bytes.

use super::*;

#[test]
fn ping_auth_sync_and_partial_frames() {
    let now = Instant::now();
    let mut zk = SimZooKeeper::new(now, TICK);
    let mut raw = Raw::connect(&mut zk, now);
    let mut buf = BytesMut::new();
    encode_connect(
        &mut buf,
        &ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout_ms: 4000,
            session_id: 0,
            passwd: vec![0; 16],
            read_only: false,
        },
    );
    encode_request(&mut buf, jute::xid::PING, &Request::Ping);
    encode_request(
        &mut buf,
        jute::xid::AUTH,
        &Request::Auth(jute::AuthPacket {
            kind: 0,
            scheme: "digest".into(),
            auth: b"u:p".to_vec(),
        }),
    );
    encode_request(&mut buf, 1, &Request::Sync("/".into()));
    // One byte at a time.
    for b in buf.iter() {
        zk.receive(now, raw.conn, &[*b]);
    }
    let frames = raw.frames(&mut zk);
    assert_eq!(frames.len(), 4);
    let ConnectResponse { timeout_ms, .. } = ConnectResponse::decode_exact(&frames[0]).unwrap();
    assert_eq!(timeout_ms, 4000);
    let headers: Vec<_> = frames[1..]
        .iter()
        .map(|f| match decode_server_message(f).unwrap() {
            ServerMessage::Reply { header, .. } => (header.xid, header.zxid, header.err),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        headers,
        vec![
            (-2, 1, ErrorCode::Ok),
            (-4, 0, ErrorCode::Ok),
            (1, 1, ErrorCode::Ok)
        ]
    );
    // An unknown op: Unimplemented, then the close.
    let mut buf = BytesMut::new();
    jute::encode_frame(&mut buf, |b| {
        jute::Encode::encode(
            &jute::RequestHeader {
                xid: 2,
                op: jute::OpCode::Unknown(4242),
            },
            b,
        )
    });
    zk.receive(now, raw.conn, &buf);
    let frames = raw.frames(&mut zk);
    assert!(matches!(
        decode_server_message(&frames[0]).unwrap(),
        ServerMessage::Reply { header, .. } if header.err == ErrorCode::Unimplemented
    ));
    assert_eq!(zk.poll_closed(), Some(raw.conn));
}

/// Prints, when the garbage test fails, the command that sends the same
/// bytes again.
struct GarbageReplay(u64);

impl Drop for GarbageReplay {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "replay: GARBAGE_SEED={} cargo test --test simulation garbage_never_panics",
                self.0
            );
        }
    }
}

#[test]
fn garbage_never_panics_and_closes_the_connection() {
    let now = Instant::now();
    let mut zk = SimZooKeeper::new(now, TICK);
    // A negative frame length.
    let c = zk.connect(now);
    zk.receive(now, c, &[0xff, 0xff, 0xff, 0xfe, 1, 2]);
    assert_eq!(zk.poll_closed(), Some(c));
    // Too large.
    let c = zk.connect(now);
    zk.receive(now, c, &[0x7f, 0, 0, 0]);
    assert_eq!(zk.poll_closed(), Some(c));
    // A frame that is no ConnectRequest.
    let c = zk.connect(now);
    zk.receive(now, c, &[0, 0, 0, 3, 1, 2, 3]);
    assert_eq!(zk.poll_closed(), Some(c));
    // Pseudo-random bytes after a good handshake, many seeds: never a panic.
    // `GARBAGE_SEED` draws other bytes; a failure prints how to replay it.
    let seed = match std::env::var("GARBAGE_SEED") {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("GARBAGE_SEED={s:?} is not a number")),
        Err(_) => 0x1234_5678,
    };
    let _replay = GarbageReplay(seed);
    let mut x: u64 = seed;
    for round in 0..300 {
        let mut raw = Raw::connect(&mut zk, now);
        if round % 3 != 0 {
            raw.handshake(&mut zk, now, 0, 0, vec![0; 16]).unwrap();
        }
        let mut bytes = Vec::new();
        let len = 12 + round % 60;
        for _ in 0..len {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            bytes.push((x >> 56) as u8);
        }
        // A plausible frame header so the body reaches the decoders.
        let body_len = (bytes.len() - 4) as u32;
        bytes[..4].copy_from_slice(&body_len.to_be_bytes());
        if round % 2 == 0 {
            // A known op code with a garbage body.
            bytes[8..12].copy_from_slice(&[0, 0, 0, (round % 16) as u8]);
        }
        zk.receive(now, raw.conn, &bytes);
        while zk.poll_output().is_some() {}
        while zk.poll_closed().is_some() {}
    }
}

#[test]
fn same_inputs_same_bytes() {
    let run = || {
        let mut w = World::with(|zk| zk.with_trace());
        let a = w.client();
        let b = w.client();
        w.call(
            a,
            Request::Create(create("/l", b"", CreateMode::Persistent)),
        )
        .unwrap();
        for i in 0..4 {
            let c = if i % 2 == 0 { a } else { b };
            w.call(
                c,
                Request::Create(create("/l/n-", b"", CreateMode::EphemeralSequential)),
            )
            .unwrap();
            w.call_w(c, Request::GetChildren(pw("/l", true)), true)
                .1
                .unwrap();
        }
        w.cut(a);
        w.advance(TIMEOUT);
        let sid = w.session_id(b);
        w.zk.expire_session(w.now, sid);
        w.advance(TIMEOUT);
        w.zk.take_trace()
    };
    let first = run();
    assert!(first.len() > 30);
    assert!(first.iter().any(|l| l.contains("expired")));
    assert_eq!(first, run());
}

#[test]
#[ignore = "prints a sample trace"]
fn print_trace() {
    let mut w = World::with(|zk| zk.with_trace());
    let a = w.client();
    w.call(
        a,
        Request::Create(create("/l", b"", CreateMode::Persistent)),
    )
    .unwrap();
    w.call_w(a, Request::GetChildren(pw("/l", true)), true)
        .1
        .unwrap();
    w.call(
        a,
        Request::Create(create("/l/n-", b"", CreateMode::EphemeralSequential)),
    )
    .unwrap();
    w.cut(a);
    w.advance(TIMEOUT);
    for line in w.zk.take_trace() {
        println!("{line}");
    }
}
