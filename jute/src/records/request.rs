//! Request bodies and the [`Request`] enum that ties each to its op code.

use bytes::BytesMut;

use crate::primitives::{
    write_bool, write_buffer, write_i32, write_i64, write_string, write_string_vec, Reader,
};
use crate::records::data::{read_acls, write_acls};
use crate::records::multi::{read_multi_ops, write_multi_ops, MultiOp};
use crate::records::op::{
    read_create, read_path_version, read_set_data, write_create, write_path_version, write_set_data,
};
pub use crate::records::op::{CreateRequest, PathVersion, SetDataRequest};
use crate::{Acl, AddWatchMode, DecodeError, OpCode, WatcherType};

/// createTTL: a create with a time to live for persistent nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTtlRequest {
    /// The create itself; its mode must be a TTL mode.
    pub create: CreateRequest,
    /// Time to live in milliseconds.
    pub ttl_ms: i64,
}

/// exists, getData, getChildren, getChildren2: a path and whether to leave a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathWatch {
    /// Server path of the node.
    pub path: String,
    /// Leave a one-shot watch (exists leaves one on a missing node too).
    pub watch: bool,
}

/// setACL: replace the node's ACL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAclRequest {
    /// Server path of the node.
    pub path: String,
    /// The new ACL; the server refuses an empty one.
    pub acl: Vec<Acl>,
    /// Expected `Stat::aversion`; -1 skips the check.
    pub version: i32,
}

/// Sent with the reserved auth xid; the server answers only on failure (by closing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthPacket {
    /// The wire's `type` field; ZooKeeper's own client always sends 0.
    pub kind: i32,
    /// Auth provider, e.g. "digest".
    pub scheme: String,
    /// Scheme-specific credentials, e.g. `user:password` for digest.
    pub auth: Vec<u8>,
}

/// Re-arms watches after a reconnect; the server fires at once what changed
/// after `relative_zxid`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetWatches {
    /// The last zxid the client saw.
    pub relative_zxid: i64,
    /// Paths with data watches (getData, or exists on an existing node).
    pub data: Vec<String>,
    /// Paths with exist watches (exists on a missing node).
    pub exist: Vec<String>,
    /// Paths with child watches (getChildren).
    pub child: Vec<String>,
    /// Only carried by setWatches2.
    pub persistent: Vec<String>,
    /// Only carried by setWatches2.
    pub persistent_recursive: Vec<String>,
}

/// addWatch: a watch that stays set after it fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddWatchRequest {
    /// Server path watched (for a recursive watch, the root of the subtree).
    pub path: String,
    /// Persistent, or persistent and recursive.
    pub mode: AddWatchMode,
}

/// removeWatches and checkWatches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchesRequest {
    /// Server path of the watches.
    pub path: String,
    /// Which watches on the path are meant.
    pub kind: WatcherType,
}

/// Every request a client sends after the handshake. The variant decides the
/// op code, so a body can never be sent under the wrong one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Creates a node; the reply carries its path.
    Create(CreateRequest),
    /// Creates a node; the reply carries its path and Stat.
    Create2(CreateRequest),
    /// Creates a container node (mode Container).
    CreateContainer(CreateRequest),
    /// Creates a node with a time to live.
    CreateTtl(CreateTtlRequest),
    /// Deletes a childless node.
    Delete(PathVersion),
    /// A node's Stat; NoNode when missing.
    Exists(PathWatch),
    /// A node's data and Stat.
    GetData(PathWatch),
    /// Replaces a node's data.
    SetData(SetDataRequest),
    /// The ACL and Stat of the node at this server path.
    GetAcl(String),
    /// Replaces a node's ACL.
    SetAcl(SetAclRequest),
    /// A node's child names.
    GetChildren(PathWatch),
    /// A node's child names and its Stat.
    GetChildren2(PathWatch),
    /// Brings the connected server up to date with the leader; the path is
    /// echoed back.
    Sync(String),
    /// A version check, normally sent inside multi.
    Check(PathVersion),
    /// Ops applied atomically, all or none.
    Multi(Vec<MultiOp>),
    /// Adds credentials; sent with the auth xid.
    Auth(AuthPacket),
    /// Re-arms one-shot watches after a reconnect; sent with the setWatches xid.
    SetWatches(SetWatches),
    /// SetWatches with the persistent lists too.
    SetWatches2(SetWatches),
    /// Sets a persistent watch.
    AddWatch(AddWatchRequest),
    /// Removes watches from a path on the server.
    RemoveWatches(WatchesRequest),
    /// Asks whether watches exist on a path; NoWatcher if not.
    CheckWatches(WatchesRequest),
    /// The paths of this session's ephemeral nodes under this path prefix.
    GetEphemerals(String),
    /// The number of nodes below this server path, at any depth.
    GetAllChildrenNumber(String),
    /// The identities the session is authenticated as; no body.
    WhoAmI,
    /// Heartbeat; no body, sent with the ping xid.
    Ping,
    /// Ends the session; no body.
    CloseSession,
}

fn write_path_watch(buf: &mut BytesMut, p: &PathWatch) {
    write_string(buf, &p.path);
    write_bool(buf, p.watch);
}

fn read_path_watch(r: &mut Reader<'_>) -> Result<PathWatch, DecodeError> {
    Ok(PathWatch {
        path: r.read_string("path")?,
        watch: r.read_bool()?,
    })
}

fn write_set_watches(buf: &mut BytesMut, s: &SetWatches, v2: bool) {
    write_i64(buf, s.relative_zxid);
    write_string_vec(buf, &s.data);
    write_string_vec(buf, &s.exist);
    write_string_vec(buf, &s.child);
    if v2 {
        write_string_vec(buf, &s.persistent);
        write_string_vec(buf, &s.persistent_recursive);
    }
}

fn read_set_watches(r: &mut Reader<'_>, v2: bool) -> Result<SetWatches, DecodeError> {
    let mut s = SetWatches {
        relative_zxid: r.read_i64()?,
        data: r.read_string_vec("watch path")?,
        exist: r.read_string_vec("watch path")?,
        child: r.read_string_vec("watch path")?,
        ..SetWatches::default()
    };
    if v2 {
        s.persistent = r.read_string_vec("watch path")?;
        s.persistent_recursive = r.read_string_vec("watch path")?;
    }
    Ok(s)
}

impl SetWatches {
    /// Whether this batch needs setWatches2 (persistent watches).
    pub fn needs_v2(&self) -> bool {
        !self.persistent.is_empty() || !self.persistent_recursive.is_empty()
    }

    /// Encoded size of the body, to keep each batch under the server's limit.
    pub fn encoded_len(&self) -> usize {
        let list = |v: &Vec<String>| 4 + v.iter().map(|s| 4 + s.len()).sum::<usize>();
        8 + list(&self.data)
            + list(&self.exist)
            + list(&self.child)
            + list(&self.persistent)
            + list(&self.persistent_recursive)
    }
}

impl Request {
    /// The op code this variant is sent under.
    pub fn op_code(&self) -> OpCode {
        match self {
            Request::Create(_) => OpCode::Create,
            Request::Create2(_) => OpCode::Create2,
            Request::CreateContainer(_) => OpCode::CreateContainer,
            Request::CreateTtl(_) => OpCode::CreateTtl,
            Request::Delete(_) => OpCode::Delete,
            Request::Exists(_) => OpCode::Exists,
            Request::GetData(_) => OpCode::GetData,
            Request::SetData(_) => OpCode::SetData,
            Request::GetAcl(_) => OpCode::GetAcl,
            Request::SetAcl(_) => OpCode::SetAcl,
            Request::GetChildren(_) => OpCode::GetChildren,
            Request::GetChildren2(_) => OpCode::GetChildren2,
            Request::Sync(_) => OpCode::Sync,
            Request::Check(_) => OpCode::Check,
            Request::Multi(_) => OpCode::Multi,
            Request::Auth(_) => OpCode::Auth,
            Request::SetWatches(_) => OpCode::SetWatches,
            Request::SetWatches2(_) => OpCode::SetWatches2,
            Request::AddWatch(_) => OpCode::AddWatch,
            Request::RemoveWatches(_) => OpCode::RemoveWatches,
            Request::CheckWatches(_) => OpCode::CheckWatches,
            Request::GetEphemerals(_) => OpCode::GetEphemerals,
            Request::GetAllChildrenNumber(_) => OpCode::GetAllChildrenNumber,
            Request::WhoAmI => OpCode::WhoAmI,
            Request::Ping => OpCode::Ping,
            Request::CloseSession => OpCode::CloseSession,
        }
    }

    /// Writes the body (no header, no frame length).
    pub fn encode_body(&self, buf: &mut BytesMut) {
        match self {
            Request::Create(c) | Request::Create2(c) | Request::CreateContainer(c) => {
                write_create(buf, c)
            }
            Request::CreateTtl(t) => {
                write_create(buf, &t.create);
                write_i64(buf, t.ttl_ms);
            }
            Request::Delete(p) | Request::Check(p) => write_path_version(buf, p),
            Request::Exists(p)
            | Request::GetData(p)
            | Request::GetChildren(p)
            | Request::GetChildren2(p) => write_path_watch(buf, p),
            Request::SetData(s) => write_set_data(buf, s),
            Request::GetAcl(path)
            | Request::Sync(path)
            | Request::GetEphemerals(path)
            | Request::GetAllChildrenNumber(path) => write_string(buf, path),
            Request::SetAcl(s) => {
                write_string(buf, &s.path);
                write_acls(buf, &s.acl);
                write_i32(buf, s.version);
            }
            Request::Multi(ops) => write_multi_ops(buf, ops),
            Request::Auth(a) => {
                write_i32(buf, a.kind);
                write_string(buf, &a.scheme);
                write_buffer(buf, &a.auth);
            }
            Request::SetWatches(s) => write_set_watches(buf, s, false),
            Request::SetWatches2(s) => write_set_watches(buf, s, true),
            Request::AddWatch(a) => {
                write_string(buf, &a.path);
                write_i32(buf, a.mode.code());
            }
            Request::RemoveWatches(w) | Request::CheckWatches(w) => {
                write_string(buf, &w.path);
                write_i32(buf, w.kind.code());
            }
            Request::WhoAmI | Request::Ping | Request::CloseSession => {}
        }
    }

    /// Reads a body sent under `op` (for servers, proxies, tests and fuzzing).
    /// The whole input must be consumed.
    pub fn decode_body(op: OpCode, body: &[u8]) -> Result<Request, DecodeError> {
        let mut r = Reader::new(body);
        let req = match op {
            OpCode::Create => Request::Create(read_create(&mut r)?),
            OpCode::Create2 => Request::Create2(read_create(&mut r)?),
            OpCode::CreateContainer => Request::CreateContainer(read_create(&mut r)?),
            OpCode::CreateTtl => Request::CreateTtl(CreateTtlRequest {
                create: read_create(&mut r)?,
                ttl_ms: r.read_i64()?,
            }),
            OpCode::Delete => Request::Delete(read_path_version(&mut r)?),
            OpCode::Check => Request::Check(read_path_version(&mut r)?),
            OpCode::Exists => Request::Exists(read_path_watch(&mut r)?),
            OpCode::GetData => Request::GetData(read_path_watch(&mut r)?),
            OpCode::GetChildren => Request::GetChildren(read_path_watch(&mut r)?),
            OpCode::GetChildren2 => Request::GetChildren2(read_path_watch(&mut r)?),
            OpCode::SetData => Request::SetData(read_set_data(&mut r)?),
            OpCode::GetAcl => Request::GetAcl(r.read_string("path")?),
            OpCode::Sync => Request::Sync(r.read_string("path")?),
            OpCode::GetEphemerals => Request::GetEphemerals(r.read_string("path")?),
            OpCode::GetAllChildrenNumber => Request::GetAllChildrenNumber(r.read_string("path")?),
            OpCode::SetAcl => Request::SetAcl(SetAclRequest {
                path: r.read_string("path")?,
                acl: read_acls(&mut r)?,
                version: r.read_i32()?,
            }),
            OpCode::Multi => Request::Multi(read_multi_ops(&mut r)?),
            OpCode::Auth => Request::Auth(AuthPacket {
                kind: r.read_i32()?,
                scheme: r.read_string("auth scheme")?,
                auth: r.read_buffer()?,
            }),
            OpCode::SetWatches => Request::SetWatches(read_set_watches(&mut r, false)?),
            OpCode::SetWatches2 => Request::SetWatches2(read_set_watches(&mut r, true)?),
            OpCode::AddWatch => Request::AddWatch(AddWatchRequest {
                path: r.read_string("path")?,
                mode: AddWatchMode::from(r.read_i32()?),
            }),
            OpCode::RemoveWatches | OpCode::CheckWatches => {
                let w = WatchesRequest {
                    path: r.read_string("path")?,
                    kind: WatcherType::from(r.read_i32()?),
                };
                if op == OpCode::RemoveWatches {
                    Request::RemoveWatches(w)
                } else {
                    Request::CheckWatches(w)
                }
            }
            OpCode::WhoAmI => Request::WhoAmI,
            OpCode::Ping => Request::Ping,
            OpCode::CloseSession => Request::CloseSession,
            other => return Err(DecodeError::UnknownOpCode(other.code())),
        };
        r.finish()?;
        Ok(req)
    }
}
