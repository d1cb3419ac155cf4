//! Entry points shared by the cargo-fuzz targets and the stable test suite,
//! so CI exercises the same code the fuzzer does. Each takes raw bytes, must
//! never panic on its own, and panics only when a round trip is not the identity
//! (a real bug for the fuzzer to report).

use bytes::{Bytes, BytesMut};

use crate::{
    decode_reply, decode_reply_pieces, decode_request_header, decode_server_message, encode_frame,
    split_frame, ConnectRequest, ConnectResponse, Decode, Encode, ErrorCode, OpCode, ReplyHeader,
    Request, Response, ServerMessage, WatcherEvent,
};

/// Feeds bytes through the frame splitter with a small limit, in pieces.
pub fn frames(data: &[u8]) {
    let mut buf = BytesMut::new();
    for chunk in data.chunks(7) {
        buf.extend_from_slice(chunk);
        while let Ok(Some(frame)) = split_frame(&mut buf, 4096) {
            server_message(&frame);
        }
    }
}

/// A server frame decoded against every op code, as the session would.
pub fn server_message(frame: &[u8]) {
    match decode_server_message(frame) {
        Ok(ServerMessage::Reply { header, body }) => {
            for op in OpCode::ALL {
                if let Ok(Ok(resp)) = decode_reply(*op, &header, body) {
                    let mut out = BytesMut::new();
                    resp.encode(&mut out);
                    assert_eq!(
                        Response::decode(*op, &out),
                        Ok(resp),
                        "reply round trip for {op:?}"
                    );
                }
            }
        }
        Ok(ServerMessage::WatchEvent { event, .. }) => watcher_event_round_trip(event),
        Err(_) => {}
    }
}

/// The first byte picks an op code; the rest is a reply body.
pub fn reply_body(data: &[u8]) {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let op = OpCode::ALL[pick as usize % OpCode::ALL.len()];
    if let Ok(resp) = Response::decode(op, body) {
        let mut out = BytesMut::new();
        resp.encode(&mut out);
        assert_eq!(
            Response::decode(op, &out),
            Ok(resp),
            "reply round trip for {op:?}"
        );
    }
    in_pieces(op, pick, body);
}

/// The body cut into pieces (sizes drawn from `pick` and the bytes, empty
/// ones among them) decodes to what the whole body does, or fails where it fails.
fn in_pieces(op: OpCode, pick: u8, body: &[u8]) {
    let mut pieces = Vec::new();
    // Drawn from the bytes too, so each input is cut its own way.
    let mut state = body.iter().fold(u32::from(pick) | 1, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(16_777_619)
    });
    let mut rest = body;
    while !rest.is_empty() {
        state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        // Mostly short pieces (names cross them), some long (names lie in them).
        let most = if state & 0x300 == 0 { 48 } else { 9 };
        let n = ((state >> 16) % most) as usize;
        let n = n.min(rest.len());
        pieces.push(Bytes::copy_from_slice(&rest[..n]));
        rest = &rest[n..];
    }
    // A failed op's body is read only for multi.
    for err in [ErrorCode::Ok, ErrorCode::NoNode] {
        let header = ReplyHeader {
            xid: 1,
            zxid: 1,
            err,
        };
        let whole = decode_reply(op, &header, body);
        let parts = decode_reply_pieces(op, &header, &pieces);
        match (whole, parts) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "a reply in pieces for {op:?}"),
            (Err(_), Err(_)) => {}
            (a, b) => panic!("whole {a:?} but in pieces {b:?} for {op:?}"),
        }
    }
}

/// A watch notification body: decode, encode, decode must match.
pub fn watcher_event(data: &[u8]) {
    if let Ok(event) = WatcherEvent::decode_exact(data) {
        watcher_event_round_trip(event);
    }
}

fn watcher_event_round_trip(event: WatcherEvent) {
    let mut out = BytesMut::new();
    event.encode(&mut out);
    assert_eq!(WatcherEvent::decode_exact(&out), Ok(event));
}

/// A handshake body, tried as both response and request: decode, encode,
/// decode must match.
pub fn connect_response(data: &[u8]) {
    if let Ok(resp) = ConnectResponse::decode_exact(data) {
        let mut out = BytesMut::new();
        resp.encode(&mut out);
        assert_eq!(ConnectResponse::decode_exact(&out), Ok(resp));
    }
    if let Ok(req) = ConnectRequest::decode_exact(data) {
        let mut out = BytesMut::new();
        req.encode(&mut out);
        assert_eq!(ConnectRequest::decode_exact(&out), Ok(req));
    }
}

/// A request frame body (header + body): decode, encode, decode again must match.
pub fn request_round_trip(data: &[u8]) {
    let Ok((header, body)) = decode_request_header(data) else {
        return;
    };
    let Ok(req) = Request::decode_body(header.op, body) else {
        return;
    };
    let mut out = BytesMut::new();
    encode_frame(&mut out, |b| {
        header.encode(b);
        req.encode_body(b);
    });
    let (h2, b2) = decode_request_header(&out[4..]).expect("own header decodes");
    assert_eq!(h2, header);
    assert_eq!(
        Request::decode_body(h2.op, b2),
        Ok(req),
        "request round trip"
    );
}
