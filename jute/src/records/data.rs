//! Node metadata and access control: Stat, Id, Acl.

use bytes::BytesMut;

use crate::primitives::{write_i32, write_i64, write_string, Reader};
use crate::{Decode, DecodeError, Encode};

/// A node's metadata, as every read and write reply carries it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Stat {
    /// Zxid of the create; strictly increasing across the ensemble (a fencing token).
    pub czxid: i64,
    /// Zxid of the last data change.
    pub mzxid: i64,
    /// Creation time, in milliseconds since the epoch (the server's clock).
    pub ctime: i64,
    /// Last data change, in milliseconds since the epoch (the server's clock).
    pub mtime: i64,
    /// Number of data changes; what delete's and setData's expected version is checked against.
    pub version: i32,
    /// Number of changes to the children list.
    pub cversion: i32,
    /// Number of ACL changes; what setACL's expected version is checked against.
    pub aversion: i32,
    /// Session that owns an ephemeral node, 0 for a persistent one.
    pub ephemeral_owner: i64,
    /// Length of the node's data, in bytes.
    pub data_length: i32,
    /// Number of direct children.
    pub num_children: i32,
    /// Zxid of the last change to the children list.
    pub pzxid: i64,
}

/// Encoded size of a Stat, for bounds checks.
pub const STAT_LEN: usize = 68;

impl Encode for Stat {
    fn encode(&self, buf: &mut BytesMut) {
        write_i64(buf, self.czxid);
        write_i64(buf, self.mzxid);
        write_i64(buf, self.ctime);
        write_i64(buf, self.mtime);
        write_i32(buf, self.version);
        write_i32(buf, self.cversion);
        write_i32(buf, self.aversion);
        write_i64(buf, self.ephemeral_owner);
        write_i32(buf, self.data_length);
        write_i32(buf, self.num_children);
        write_i64(buf, self.pzxid);
    }
}

impl Decode for Stat {
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Stat {
            czxid: r.read_i64()?,
            mzxid: r.read_i64()?,
            ctime: r.read_i64()?,
            mtime: r.read_i64()?,
            version: r.read_i32()?,
            cversion: r.read_i32()?,
            aversion: r.read_i32()?,
            ephemeral_owner: r.read_i64()?,
            data_length: r.read_i32()?,
            num_children: r.read_i32()?,
            pzxid: r.read_i64()?,
        })
    }
}

/// An authenticated identity: scheme ("world", "digest", "ip", "auth") and id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Id {
    /// The auth provider that vouches for `id`.
    pub scheme: String,
    /// Meaning depends on the scheme: "anyone" for world, `user:base64(sha1(user:password))`
    /// for digest, an address or CIDR range for ip; empty for auth.
    pub id: String,
}

/// Permissions (see [`crate::perms`]) granted to one identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Acl {
    /// Bitmask of [`crate::perms`].
    pub perms: i32,
    /// Who receives them.
    pub id: Id,
}

impl Acl {
    /// Anyone may do anything (ZooKeeper's OPEN_ACL_UNSAFE).
    pub fn open_unsafe() -> Vec<Acl> {
        vec![Acl {
            perms: crate::perms::ALL,
            id: Id {
                scheme: "world".into(),
                id: "anyone".into(),
            },
        }]
    }

    /// Only the identities the creating session authenticated as (CREATOR_ALL_ACL).
    pub fn creator_all() -> Vec<Acl> {
        vec![Acl {
            perms: crate::perms::ALL,
            id: Id {
                scheme: "auth".into(),
                id: String::new(),
            },
        }]
    }

    /// Anyone may read (READ_ACL_UNSAFE).
    pub fn read_unsafe() -> Vec<Acl> {
        vec![Acl {
            perms: crate::perms::READ,
            id: Id {
                scheme: "world".into(),
                id: "anyone".into(),
            },
        }]
    }
}

impl Encode for Acl {
    fn encode(&self, buf: &mut BytesMut) {
        write_i32(buf, self.perms);
        write_string(buf, &self.id.scheme);
        write_string(buf, &self.id.id);
    }
}

impl Decode for Acl {
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Acl {
            perms: r.read_i32()?,
            id: Id {
                scheme: r.read_string("acl scheme")?,
                id: r.read_string("acl id")?,
            },
        })
    }
}

/// Smallest encoded ACL: perms plus two string lengths.
pub(crate) const ACL_MIN_LEN: usize = 12;

pub(crate) fn write_acls(buf: &mut BytesMut, acl: &[Acl]) {
    crate::primitives::write_vec(buf, acl, |b, a| a.encode(b));
}

pub(crate) fn read_acls(r: &mut Reader<'_>) -> Result<Vec<Acl>, DecodeError> {
    r.read_vec(ACL_MIN_LEN, Acl::decode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perms;

    fn acl(perms: i32, scheme: &str, id: &str) -> Acl {
        Acl {
            perms,
            id: Id {
                scheme: scheme.into(),
                id: id.into(),
            },
        }
    }

    /// ZooKeeper's `ZooDefs.Ids`: the three ACLs every client knows by name.
    /// Kills: `Acl::creator_all` and `Acl::read_unsafe` made empty.
    #[test]
    fn the_named_acls_are_zookeepers() {
        assert_eq!(Acl::open_unsafe(), [acl(perms::ALL, "world", "anyone")]);
        assert_eq!(Acl::creator_all(), [acl(perms::ALL, "auth", "")]);
        assert_eq!(Acl::read_unsafe(), [acl(perms::READ, "world", "anyone")]);
    }
}
