//! A listing decodes to names that agree with themselves: as many names
//! iterated as `len()` says, each one readable, and encoding them gives
//! bytes that decode to the same listing, whichever way the body arrived
//! (whole, inside a shared frame, or cut in pieces anywhere).
//!
//! An empty name is valid Jute (a string of length 0) and the Java client
//! reads it as `""`; ZooKeeper never lists one (every child is the last
//! component of a path `PathUtils.validatePath` accepted, and that refuses
//! empty components), so the codec keeps it as it came and leaves the
//! meaning to the layers above, which skip names that are not theirs.

use bytes::{Bytes, BytesMut};
use zklock_jute::*;

/// Listings with empty names first, last, alone, repeated, between others.
fn listings() -> Vec<Vec<&'static str>> {
    vec![
        vec![""],
        vec!["", ""],
        vec!["a", ""],
        vec!["", "a"],
        vec!["lock-0000000001", "", "lock-0000000002"],
        vec!["x", "", "", "żółw", ""],
        vec![],
    ]
}

fn body(op: OpCode, names: &[&str]) -> Bytes {
    let listing: Names = names.iter().copied().collect();
    let resp = match op {
        OpCode::GetChildren2 => Response::Children2 {
            children: listing,
            stat: Stat::default(),
        },
        _ => Response::Children(listing),
    };
    let mut out = BytesMut::new();
    resp.encode(&mut out);
    out.freeze()
}

fn listing_of(resp: &Response) -> &Names {
    match resp {
        Response::Children(n) | Response::Children2 { children: n, .. } => n,
        other => panic!("not a listing: {other:?}"),
    }
}

/// `len()`, `get` and iteration agree, and the names are the ones sent.
fn check_consistent(names: &Names, want: &[&str], how: &str) {
    assert_eq!(names.len(), want.len(), "{how}: len");
    assert_eq!(names.iter().count(), names.len(), "{how}: iterated");
    assert_eq!(names.iter().len(), names.len(), "{how}: size hint");
    for (i, w) in want.iter().enumerate() {
        assert_eq!(names.get(i), Some(*w), "{how}: name {i}");
    }
    assert_eq!(names.get(want.len()), None, "{how}: past the end");
    assert_eq!(names.to_vec(), want, "{how}: to_vec");
}

const LISTING_OPS: [OpCode; 3] = [
    OpCode::GetChildren,
    OpCode::GetEphemerals,
    OpCode::GetChildren2,
];

/// The input the `reply_body` and `server_message` fuzz targets stopped on:
/// a getChildren listing of one empty name, the last bytes of the body.
#[test]
fn one_empty_name_at_the_end_of_a_listing_round_trips() {
    let wire = [0, 0, 0, 1, 0, 0, 0, 0];
    let resp = Response::decode(OpCode::GetChildren, &wire).expect("valid Jute");
    check_consistent(listing_of(&resp), &[""], "decoded");
    let mut out = BytesMut::new();
    resp.encode(&mut out);
    assert_eq!(&out[..], &wire[..], "encodes to the bytes it came from");
    assert_eq!(Response::decode(OpCode::GetChildren, &out), Ok(resp));
}

#[test]
fn listings_with_empty_names_round_trip_whole_shared_and_in_pieces() {
    let header = ReplyHeader {
        xid: 3,
        zxid: 9,
        err: ErrorCode::Ok,
    };
    for op in LISTING_OPS {
        for want in listings() {
            let body = body(op, &want);
            let how = format!("{op:?} {want:?}");
            let whole = Response::decode(op, &body).unwrap();
            check_consistent(listing_of(&whole), &want, &format!("{how} whole"));
            let shared = Response::decode_in(op, &body, Some(&body)).unwrap();
            check_consistent(listing_of(&shared), &want, &format!("{how} shared"));
            assert_eq!(shared, whole);
            let mut again = BytesMut::new();
            whole.encode(&mut again);
            assert_eq!(&again[..], &body[..], "{how}: re-encoded");
            // Cut in two at every place, and in pieces of every small size.
            let mut cuts: Vec<Vec<Bytes>> = (0..=body.len())
                .map(|at| vec![body.slice(..at), body.slice(at..)])
                .collect();
            for size in 1..=5 {
                cuts.push(body.chunks(size).map(Bytes::copy_from_slice).collect());
            }
            for pieces in cuts {
                let sizes: Vec<usize> = pieces.iter().map(Bytes::len).collect();
                let got = decode_reply_pieces(op, &header, &pieces).unwrap().unwrap();
                check_consistent(listing_of(&got), &want, &format!("{how} in {sizes:?}"));
                assert_eq!(got, whole, "{how} in {sizes:?}");
            }
        }
    }
}

/// The fuzz entry points on the inputs they stopped on.
#[test]
fn the_fuzz_entry_points_accept_an_empty_name() {
    let pick = OpCode::ALL
        .iter()
        .position(|op| *op == OpCode::GetChildren)
        .unwrap() as u8;
    fuzz::reply_body(&[pick, 0, 0, 0, 1, 0, 0, 0, 0]);
    // A reply frame body: xid 1, zxid 1, err 0, then the same listing.
    let mut frame = vec![0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0];
    frame.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0]);
    fuzz::server_message(&frame);
}
