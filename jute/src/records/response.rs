//! Reply bodies. The wire does not say which op a reply answers, so decoding
//! takes the op code the caller remembered for that xid.

use bytes::{Bytes, BytesMut};

use crate::pieces::PieceReader;
use crate::primitives::{write_buffer, write_string, Reader};
use crate::records::data::{read_acls, write_acls};
use crate::records::multi::{read_multi_results, write_multi_results, MultiResult};
use crate::records::names::Names;
use crate::{Acl, Decode, DecodeError, Encode, ErrorCode, OpCode, ReplyHeader, Stat, STAT_LEN};

/// A successful reply's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// Ops whose success carries no body: delete, check, auth, setWatches,
    /// removeWatches, checkWatches, ping, closeSession.
    Empty,
    /// create and sync: the path (with a sequence suffix, for sequential creates).
    Path(String),
    /// create2, createContainer and createTTL: the path and the new node's Stat.
    Created {
        /// The node's actual path (with the sequence suffix, if any).
        path: String,
        /// The new node's Stat.
        stat: Stat,
    },
    /// exists, setData, setACL.
    Stat(Stat),
    /// getData.
    Data {
        /// The node's contents (a null on the wire reads as empty).
        data: Vec<u8>,
        /// The node's Stat.
        stat: Stat,
    },
    /// getChildren (child names) and getEphemerals (node paths).
    Children(Names),
    /// getChildren2.
    Children2 {
        /// Child names, not full paths, in no guaranteed order.
        children: Names,
        /// The parent's Stat.
        stat: Stat,
    },
    /// getACL.
    Acl {
        /// The node's ACL.
        acl: Vec<Acl>,
        /// The node's Stat (its `aversion` is what setACL checks).
        stat: Stat,
    },
    /// multi: one result per op, in request order.
    Multi(Vec<MultiResult>),
    /// getAllChildrenNumber.
    Count(i32),
    /// addWatch: the server answers with a bare error code (0 on success).
    Status(ErrorCode),
}

impl Response {
    /// Decodes a successful reply body for a request sent under `op`.
    /// The whole body must be consumed.
    pub fn decode(op: OpCode, body: &[u8]) -> Result<Response, DecodeError> {
        Response::decode_in(op, body, None)
    }

    /// [`Response::decode`], with `shared` the buffer `body` lies in:
    /// listed names then stay in it rather than being copied.
    pub fn decode_in(
        op: OpCode,
        body: &[u8],
        shared: Option<&Bytes>,
    ) -> Result<Response, DecodeError> {
        let mut r = Reader::new(body);
        let resp = match op {
            OpCode::Create | OpCode::Sync => Response::Path(r.read_string("path")?),
            OpCode::Create2 | OpCode::CreateContainer | OpCode::CreateTtl => Response::Created {
                path: r.read_string("path")?,
                stat: Stat::decode(&mut r)?,
            },
            OpCode::Exists | OpCode::SetData | OpCode::SetAcl => {
                Response::Stat(Stat::decode(&mut r)?)
            }
            OpCode::GetData => Response::Data {
                data: r.read_buffer()?,
                stat: Stat::decode(&mut r)?,
            },
            OpCode::GetChildren | OpCode::GetEphemerals => {
                Response::Children(Names::decode(&mut r, shared)?)
            }
            OpCode::GetChildren2 => Response::Children2 {
                children: Names::decode(&mut r, shared)?,
                stat: Stat::decode(&mut r)?,
            },
            OpCode::GetAcl => Response::Acl {
                acl: read_acls(&mut r)?,
                stat: Stat::decode(&mut r)?,
            },
            OpCode::Multi => Response::Multi(read_multi_results(&mut r)?),
            OpCode::GetAllChildrenNumber => Response::Count(r.read_i32()?),
            OpCode::AddWatch => Response::Status(ErrorCode::from(r.read_i32()?)),
            OpCode::Delete
            | OpCode::Check
            | OpCode::Auth
            | OpCode::SetWatches
            | OpCode::SetWatches2
            | OpCode::RemoveWatches
            | OpCode::CheckWatches
            | OpCode::Ping
            | OpCode::CloseSession => Response::Empty,
            other => return Err(DecodeError::UnknownOpCode(other.code())),
        };
        r.finish()?;
        Ok(resp)
    }

    /// Writes the body a server would send for this reply.
    pub fn encode(&self, buf: &mut BytesMut) {
        match self {
            Response::Empty => {}
            Response::Path(p) => write_string(buf, p),
            Response::Created { path, stat } => {
                write_string(buf, path);
                stat.encode(buf);
            }
            Response::Stat(stat) => stat.encode(buf),
            Response::Data { data, stat } => {
                write_buffer(buf, data);
                stat.encode(buf);
            }
            Response::Children(c) => c.encode(buf),
            Response::Children2 { children, stat } => {
                children.encode(buf);
                stat.encode(buf);
            }
            Response::Acl { acl, stat } => {
                write_acls(buf, acl);
                stat.encode(buf);
            }
            Response::Multi(results) => write_multi_results(buf, results),
            Response::Count(n) => crate::primitives::write_i32(buf, *n),
            Response::Status(code) => crate::primitives::write_i32(buf, code.code()),
        }
    }
}

/// A reply's outcome: the body, or the server's error code.
pub type ReplyResult = Result<Response, ErrorCode>;

/// Decodes the body that follows `header` for a request sent under `op`.
/// A failed op has no body, except multi, whose per-op errors travel in the body.
pub fn decode_reply(
    op: OpCode,
    header: &ReplyHeader,
    body: &[u8],
) -> Result<ReplyResult, DecodeError> {
    decode_reply_in(op, header, body, None)
}

/// [`decode_reply`], with `frame` the buffer `body` lies in (the frame
/// [`split_frame`](crate::split_frame) gave): a listing's names stay in it.
pub fn decode_reply_in(
    op: OpCode,
    header: &ReplyHeader,
    body: &[u8],
    frame: Option<&Bytes>,
) -> Result<ReplyResult, DecodeError> {
    if header.err == ErrorCode::Ok || (op == OpCode::Multi && !body.is_empty()) {
        let resp = Response::decode_in(op, body, frame)?;
        if header.err == ErrorCode::Ok {
            return Ok(Ok(resp));
        }
        return Ok(Err(header.err));
    }
    Ok(Err(header.err))
}

/// [`decode_reply_in`] for a body that arrived in pieces (a long reply
/// gathered in bounded buffers). A listing is read in place, its names
/// staying in the pieces; any other body is first joined into one buffer.
/// Decodes exactly what [`decode_reply`] decodes from the pieces joined.
pub fn decode_reply_pieces(
    op: OpCode,
    header: &ReplyHeader,
    body: &[Bytes],
) -> Result<ReplyResult, DecodeError> {
    let listing = matches!(
        op,
        OpCode::GetChildren | OpCode::GetEphemerals | OpCode::GetChildren2
    );
    if header.err != ErrorCode::Ok || !listing {
        let joined = Bytes::from(body.concat());
        return decode_reply_in(op, header, &joined, Some(&joined));
    }
    let mut r = PieceReader::new(body);
    let children = Names::decode_pieces(&mut r)?;
    let resp = if op == OpCode::GetChildren2 {
        let mut stat = [0u8; STAT_LEN];
        r.copy_into(&mut stat)?;
        Response::Children2 {
            children,
            stat: Stat::decode_exact(&stat)?,
        }
    } else {
        Response::Children(children)
    };
    r.finish()?;
    Ok(Ok(resp))
}
