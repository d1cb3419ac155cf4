//! multi: several ops applied atomically. Each op and each result is preceded
//! by a header (type, done, err); a header with done = true ends the list.

use bytes::BytesMut;

use crate::primitives::{write_bool, write_i32, write_string, Reader};
use crate::records::op::{
    read_create, read_path_version, read_set_data, write_create, write_path_version,
    write_set_data, CreateRequest, PathVersion, SetDataRequest,
};
use crate::{Decode, DecodeError, Encode, ErrorCode, OpCode, Stat};

/// One op inside a multi request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiOp {
    /// A create whose result carries only the path.
    Create(CreateRequest),
    /// A create whose result carries the new node's Stat.
    Create2(CreateRequest),
    /// Deletes the node if at the version (-1: any).
    Delete(PathVersion),
    /// Replaces the node's data if at the version (-1: any).
    SetData(SetDataRequest),
    /// Fails the whole multi unless the node is at the version (-1: exists).
    Check(PathVersion),
}

impl MultiOp {
    /// The op code written in this op's header inside the multi.
    pub fn op_code(&self) -> OpCode {
        match self {
            MultiOp::Create(_) => OpCode::Create,
            MultiOp::Create2(_) => OpCode::Create2,
            MultiOp::Delete(_) => OpCode::Delete,
            MultiOp::SetData(_) => OpCode::SetData,
            MultiOp::Check(_) => OpCode::Check,
        }
    }
}

/// One op's outcome inside a multi reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiResult {
    /// The create succeeded.
    Create {
        /// The node's actual path (with the sequence suffix, if any).
        path: String,
    },
    /// The create2 succeeded.
    Create2 {
        /// The node's actual path (with the sequence suffix, if any).
        path: String,
        /// The new node's Stat.
        stat: Stat,
    },
    /// The node was deleted.
    Delete,
    /// The data was replaced.
    SetData {
        /// The node's Stat after the write.
        stat: Stat,
    },
    /// The version check passed.
    Check,
    /// This op failed (or was rolled back because another did).
    Error(ErrorCode),
}

impl MultiResult {
    /// The op a failed multi failed on, and why: the others report `Ok`
    /// (before it) or `RuntimeInconsistency` (after it). `None` if every
    /// op succeeded.
    pub fn first_failure(results: &[MultiResult]) -> Option<(usize, ErrorCode)> {
        results.iter().enumerate().find_map(|(i, r)| match r {
            MultiResult::Error(c)
                if *c != ErrorCode::Ok && *c != ErrorCode::RuntimeInconsistency =>
            {
                Some((i, *c))
            }
            _ => None,
        })
    }
}

/// Type, done and err; the smallest thing a multi list can hold.
const HEADER_LEN: usize = 9;

fn write_header(buf: &mut BytesMut, op: i32, done: bool, err: i32) {
    write_i32(buf, op);
    write_bool(buf, done);
    write_i32(buf, err);
}

fn read_header(r: &mut Reader<'_>) -> Result<(OpCode, bool, i32), DecodeError> {
    Ok((OpCode::from(r.read_i32()?), r.read_bool()?, r.read_i32()?))
}

fn write_end(buf: &mut BytesMut) {
    write_header(buf, -1, true, -1);
}

pub(crate) fn write_multi_ops(buf: &mut BytesMut, ops: &[MultiOp]) {
    for op in ops {
        write_header(buf, op.op_code().code(), false, -1);
        match op {
            MultiOp::Create(c) | MultiOp::Create2(c) => write_create(buf, c),
            MultiOp::Delete(p) | MultiOp::Check(p) => write_path_version(buf, p),
            MultiOp::SetData(s) => write_set_data(buf, s),
        }
    }
    write_end(buf);
}

pub(crate) fn read_multi_ops(r: &mut Reader<'_>) -> Result<Vec<MultiOp>, DecodeError> {
    let mut ops = Vec::new();
    loop {
        let (op, done, _) = read_header(r)?;
        if done {
            return Ok(ops);
        }
        ops.push(match op {
            OpCode::Create => MultiOp::Create(read_create(r)?),
            OpCode::Create2 => MultiOp::Create2(read_create(r)?),
            OpCode::Delete => MultiOp::Delete(read_path_version(r)?),
            OpCode::SetData => MultiOp::SetData(read_set_data(r)?),
            OpCode::Check => MultiOp::Check(read_path_version(r)?),
            _ => return Err(DecodeError::BadMulti("unsupported op in multi request")),
        });
    }
}

pub(crate) fn write_multi_results(buf: &mut BytesMut, results: &[MultiResult]) {
    for res in results {
        match res {
            MultiResult::Create { path } => {
                write_header(buf, OpCode::Create.code(), false, 0);
                write_string(buf, path);
            }
            MultiResult::Create2 { path, stat } => {
                write_header(buf, OpCode::Create2.code(), false, 0);
                write_string(buf, path);
                stat.encode(buf);
            }
            MultiResult::Delete => write_header(buf, OpCode::Delete.code(), false, 0),
            MultiResult::Check => write_header(buf, OpCode::Check.code(), false, 0),
            MultiResult::SetData { stat } => {
                write_header(buf, OpCode::SetData.code(), false, 0);
                stat.encode(buf);
            }
            MultiResult::Error(e) => {
                write_header(buf, OpCode::Error.code(), false, e.code());
                write_i32(buf, e.code());
            }
        }
    }
    write_end(buf);
}

pub(crate) fn read_multi_results(r: &mut Reader<'_>) -> Result<Vec<MultiResult>, DecodeError> {
    let mut results = Vec::new();
    loop {
        if r.remaining() < HEADER_LEN {
            return Err(DecodeError::BadMulti("result list not terminated"));
        }
        let (op, done, _) = read_header(r)?;
        if done {
            return Ok(results);
        }
        results.push(match op {
            OpCode::Create => MultiResult::Create {
                path: r.read_string("path")?,
            },
            OpCode::Create2 => MultiResult::Create2 {
                path: r.read_string("path")?,
                stat: Stat::decode(r)?,
            },
            OpCode::Delete => MultiResult::Delete,
            OpCode::Check => MultiResult::Check,
            OpCode::SetData => MultiResult::SetData {
                stat: Stat::decode(r)?,
            },
            OpCode::Error => MultiResult::Error(ErrorCode::from(r.read_i32()?)),
            _ => return Err(DecodeError::BadMulti("unexpected op in multi result")),
        });
    }
}
