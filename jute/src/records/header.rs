//! The headers that start every request and every reply after the handshake.

use bytes::BytesMut;

use crate::primitives::{write_i32, write_i64, Reader};
use crate::{Decode, DecodeError, Encode, ErrorCode, OpCode};

/// Starts every request: the caller's xid and what is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    /// The number the reply echoes: positive for ordinary requests, a
    /// reserved negative ([`crate::xid`]) for ping, auth and setWatches.
    pub xid: i32,
    /// What the body asks for; decides its layout.
    pub op: OpCode,
}

impl Encode for RequestHeader {
    fn encode(&self, buf: &mut BytesMut) {
        write_i32(buf, self.xid);
        write_i32(buf, self.op.code());
    }
}

impl Decode for RequestHeader {
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(RequestHeader {
            xid: r.read_i32()?,
            op: OpCode::from(r.read_i32()?),
        })
    }
}

/// Starts every server message: which request it answers (or a reserved
/// xid), the zxid the server had reached, and the outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyHeader {
    /// The xid of the request answered, or a reserved one ([`crate::xid`]).
    pub xid: i32,
    /// The last zxid the server had seen when it answered.
    pub zxid: i64,
    /// Ok, or why the request failed (then no body follows, except for multi).
    pub err: ErrorCode,
}

impl Encode for ReplyHeader {
    fn encode(&self, buf: &mut BytesMut) {
        write_i32(buf, self.xid);
        write_i64(buf, self.zxid);
        write_i32(buf, self.err.code());
    }
}

impl Decode for ReplyHeader {
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(ReplyHeader {
            xid: r.read_i32()?,
            zxid: r.read_i64()?,
            err: ErrorCode::from(r.read_i32()?),
        })
    }
}
