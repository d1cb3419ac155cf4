//! The bodies an op carries both alone and inside a multi (create, delete,
//! check, setData), with their encoding: shared by `request` and `multi`.

use bytes::BytesMut;

use crate::primitives::{write_buffer, write_i32, write_string, Reader};
use crate::records::data::{read_acls, write_acls};
use crate::{Acl, CreateMode, DecodeError};

/// create, create2 and createContainer share this body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateRequest {
    /// Server path of the node; for sequential modes, the prefix the counter is appended to.
    pub path: String,
    /// Initial contents.
    pub data: Vec<u8>,
    /// The new node's ACL; the server refuses an empty one.
    pub acl: Vec<Acl>,
    /// The wire's `flags` field.
    pub mode: CreateMode,
}

/// delete, and check inside multi: act only if the node is at `version` (-1: any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathVersion {
    /// Server path of the node.
    pub path: String,
    /// Expected `Stat::version`; -1 skips the check.
    pub version: i32,
}

/// setData, alone or inside multi: replace the node's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetDataRequest {
    /// Server path of the node.
    pub path: String,
    /// The new contents, replacing the old entirely.
    pub data: Vec<u8>,
    /// Expected `Stat::version`; -1 skips the check.
    pub version: i32,
}

pub(crate) fn write_create(buf: &mut BytesMut, c: &CreateRequest) {
    write_string(buf, &c.path);
    write_buffer(buf, &c.data);
    write_acls(buf, &c.acl);
    write_i32(buf, c.mode.code());
}

pub(crate) fn read_create(r: &mut Reader<'_>) -> Result<CreateRequest, DecodeError> {
    Ok(CreateRequest {
        path: r.read_string("path")?,
        data: r.read_buffer()?,
        acl: read_acls(r)?,
        mode: CreateMode::from(r.read_i32()?),
    })
}

pub(crate) fn write_path_version(buf: &mut BytesMut, p: &PathVersion) {
    write_string(buf, &p.path);
    write_i32(buf, p.version);
}

pub(crate) fn read_path_version(r: &mut Reader<'_>) -> Result<PathVersion, DecodeError> {
    Ok(PathVersion {
        path: r.read_string("path")?,
        version: r.read_i32()?,
    })
}

pub(crate) fn write_set_data(buf: &mut BytesMut, s: &SetDataRequest) {
    write_string(buf, &s.path);
    write_buffer(buf, &s.data);
    write_i32(buf, s.version);
}

pub(crate) fn read_set_data(r: &mut Reader<'_>) -> Result<SetDataRequest, DecodeError> {
    Ok(SetDataRequest {
        path: r.read_string("path")?,
        data: r.read_buffer()?,
        version: r.read_i32()?,
    })
}
