//! What a write asks for: create options and the ops of a multi.

use std::time::Duration;

use jute::{Acl, CreateMode, Stat};

/// A node to create: mode, ACL and (for TTL modes) time to live.
#[derive(Debug, Clone)]
pub struct CreateOptions {
    /// Lifetime and naming of the node.
    pub mode: CreateMode,
    /// The new node's ACL; [`Acl::open_unsafe`] by default.
    pub acl: Vec<Acl>,
    /// Time to live, sent in milliseconds; required by TTL modes and ignored
    /// by the others.
    pub ttl: Option<Duration>,
}

impl CreateOptions {
    /// `mode` with an open ACL and no TTL.
    pub fn new(mode: CreateMode) -> Self {
        CreateOptions {
            mode,
            acl: Acl::open_unsafe(),
            ttl: None,
        }
    }

    /// Replaces the ACL.
    pub fn acl(mut self, acl: Vec<Acl>) -> Self {
        self.acl = acl;
        self
    }

    /// Sets the time to live TTL modes need (the server must have extended
    /// types enabled).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }
}

/// One operation of a [`Client::multi`](super::Client::multi) transaction.
#[derive(Debug, Clone)]
pub enum Op {
    /// Creates a node; its result carries the actual path and Stat.
    Create {
        /// Path as the caller names it (chroot is applied).
        path: String,
        /// Initial contents.
        data: Vec<u8>,
        /// Lifetime and naming of the node (there is no field for a TTL).
        mode: CreateMode,
        /// The new node's ACL.
        acl: Vec<Acl>,
    },
    /// Deletes a childless node.
    Delete {
        /// Path as the caller names it.
        path: String,
        /// Expected `Stat::version`; `None` deletes whatever the version.
        version: Option<i32>,
    },
    /// Replaces a node's data.
    SetData {
        /// Path as the caller names it.
        path: String,
        /// The new contents.
        data: Vec<u8>,
        /// Expected `Stat::version`; `None` writes whatever the version.
        version: Option<i32>,
    },
    /// Fails the transaction unless the node exists (at `version`, if given).
    Check {
        /// Path as the caller names it.
        path: String,
        /// Expected `Stat::version`; `None` only requires the node to exist.
        version: Option<i32>,
    },
}

impl Op {
    /// A create with an open ACL.
    pub fn create(path: &str, data: &[u8], mode: CreateMode) -> Op {
        Op::Create {
            path: path.into(),
            data: data.to_vec(),
            mode,
            acl: Acl::open_unsafe(),
        }
    }
    /// A delete, at `version` if given.
    pub fn delete(path: &str, version: Option<i32>) -> Op {
        Op::Delete {
            path: path.into(),
            version,
        }
    }
    /// A data write, at `version` if given.
    pub fn set_data(path: &str, data: &[u8], version: Option<i32>) -> Op {
        Op::SetData {
            path: path.into(),
            data: data.to_vec(),
            version,
        }
    }
    /// A check that the node exists, at `version` if given.
    pub fn check(path: &str, version: Option<i32>) -> Op {
        Op::Check {
            path: path.into(),
            version,
        }
    }
}

/// The outcome of one op of a successful [`Client::multi`](super::Client::multi).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    /// The node was created.
    Create {
        /// The node's path as the caller names it, with the sequence suffix if any.
        path: String,
        /// The new node's Stat.
        stat: Stat,
    },
    /// [`Op::Delete`] removed its node.
    Delete,
    /// [`Op::SetData`] wrote; the node's Stat after the write.
    SetData(Stat),
    /// [`Op::Check`] found the version it asked for.
    Check,
}
