//! ZooKeeper's Jute wire format: records, op codes, error codes and length
//! framing. Bytes in, values out: no I/O, no clock, no threads, and no panic
//! on any input.
//!
//! ```
//! use bytes::BytesMut;
//! use zklock_jute::{encode_request, Request, PathWatch, OpCode};
//!
//! let mut buf = BytesMut::new();
//! encode_request(&mut buf, 7, &Request::Exists(PathWatch { path: "/a".into(), watch: false }));
//! let mut frame = zklock_jute::split_frame(&mut buf, zklock_jute::DEFAULT_MAX_FRAME).unwrap().unwrap();
//! let (header, body) = zklock_jute::decode_request_header(&frame).unwrap();
//! assert_eq!((header.xid, header.op), (7, OpCode::Exists));
//! assert!(matches!(Request::decode_body(header.op, body), Ok(Request::Exists(_))));
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(missing_debug_implementations)]

mod codes;
mod error;
mod frame;
mod pieces;
pub mod primitives;
mod records;

#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzz;

use bytes::BytesMut;

pub use codes::{
    perms, xid, AddWatchMode, CreateMode, ErrorCode, EventType, KeeperState, OpCode, WatcherType,
};
pub use error::DecodeError;
pub use frame::{encode_frame, frame_len, split_frame, DEFAULT_MAX_FRAME};
pub use primitives::Reader;
pub use records::connect::{ConnectRequest, ConnectResponse};
pub use records::data::{Acl, Id, Stat, STAT_LEN};
pub use records::header::{ReplyHeader, RequestHeader};
pub use records::multi::{MultiOp, MultiResult};
pub use records::names::{Names, NamesIter};
pub use records::request::{
    AddWatchRequest, AuthPacket, CreateRequest, CreateTtlRequest, PathVersion, PathWatch, Request,
    SetAclRequest, SetDataRequest, SetWatches, WatchesRequest,
};
pub use records::response::{
    decode_reply, decode_reply_in, decode_reply_pieces, ReplyResult, Response,
};
pub use records::watch::WatcherEvent;

/// A record that can be written to the wire.
pub trait Encode {
    /// Appends the record's bytes to `buf` (no frame length).
    fn encode(&self, buf: &mut BytesMut);
}

/// A record that can be read from the wire.
pub trait Decode: Sized {
    /// Reads one record from `r`, leaving whatever follows it.
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError>;

    /// Decodes a record that must fill `bytes` exactly.
    fn decode_exact(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let v = Self::decode(&mut r)?;
        r.finish()?;
        Ok(v)
    }
}

/// Protocol version every ZooKeeper release speaks.
pub const PROTOCOL_VERSION: i32 = 0;

/// Appends the framed handshake. Returns the body length.
pub fn encode_connect(buf: &mut BytesMut, req: &ConnectRequest) -> usize {
    encode_frame(buf, |b| req.encode(b))
}

/// Appends one framed request with its header. Returns the body length so the
/// caller can refuse a frame over its limit.
pub fn encode_request(buf: &mut BytesMut, xid: i32, req: &Request) -> usize {
    encode_frame(buf, |b| {
        RequestHeader {
            xid,
            op: req.op_code(),
        }
        .encode(b);
        req.encode_body(b);
    })
}

/// Splits a request frame into its header and body.
pub fn decode_request_header(frame: &[u8]) -> Result<(RequestHeader, &[u8]), DecodeError> {
    let mut r = Reader::new(frame);
    let header = RequestHeader::decode(&mut r)?;
    Ok((header, r.take(r.remaining())?))
}

/// What a server frame after the handshake is, before any op-specific decoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerMessage<'a> {
    /// A watch fired (xid -1).
    WatchEvent {
        /// The reply header's zxid; servers may send -1 here rather than the
        /// zxid of the change.
        zxid: i64,
        /// The notification itself.
        event: WatcherEvent,
    },
    /// The answer to a numbered request or to a reserved xid (ping, auth,
    /// setWatches); decode the body with [`decode_reply`] and the op code
    /// remembered for this xid.
    Reply {
        /// Which xid it answers, the server's zxid and the error code.
        header: ReplyHeader,
        /// Everything after the header; empty when `header.err` is not Ok,
        /// except for multi.
        body: &'a [u8],
    },
}

/// Reads the reply header and, for a watch event, the whole event.
pub fn decode_server_message(frame: &[u8]) -> Result<ServerMessage<'_>, DecodeError> {
    let mut r = Reader::new(frame);
    let header = ReplyHeader::decode(&mut r)?;
    if header.xid == xid::WATCH_EVENT {
        let event = WatcherEvent::decode(&mut r)?;
        r.finish()?;
        return Ok(ServerMessage::WatchEvent {
            zxid: header.zxid,
            event,
        });
    }
    let body = r.take(r.remaining())?;
    Ok(ServerMessage::Reply { header, body })
}
