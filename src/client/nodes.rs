//! The calls on data nodes: create and delete, exists, data, children,
//! ACLs, sync, and multi.

use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use jute::{
    Acl, CreateMode, CreateRequest, CreateTtlRequest, ErrorCode, MultiOp, MultiResult, OpCode,
    PathVersion, PathWatch, Request, Response, SetAclRequest, SetDataRequest, Stat,
};

use super::{Client, CreateOptions, Op, OpResult, Watch};
use crate::error::{Error, Result};
use crate::machine::Command;
use crate::oneshot;
use crate::session::RequestError;

/// The longest time to live ZooKeeper accepts: 40 bits of milliseconds
/// (about 34 years), what its TTL node ids can carry.
const MAX_TTL: Duration = Duration::from_millis((1 << 40) - 1);

fn version_or_any(v: Option<i32>) -> i32 {
    v.unwrap_or(-1)
}

impl Client {
    /// Creates a node with an open ACL; returns its path (with the sequence
    /// suffix for sequential modes).
    ///
    /// # Errors
    /// [`ErrorCode::NodeExists`] (see [`Error::is_node_exists`]);
    /// [`ErrorCode::NoNode`] if the parent is missing;
    /// [`ErrorCode::NoChildrenForEphemerals`] under an ephemeral parent;
    /// [`Error::InvalidArgument`] for a TTL mode (use
    /// [`Client::create_with`]); and [those of every call](Client#errors).
    pub fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> Result<String> {
        self.create_with(path, data, &CreateOptions::new(mode))
            .map(|(p, _)| p)
    }

    /// Creates a node; returns its path and Stat (one round trip).
    ///
    /// # Errors
    /// As [`Client::create`]; besides, [`Error::InvalidArgument`] for a TTL
    /// mode without [`CreateOptions::ttl`] or with one under 1 ms or over
    /// 2^40 - 1 ms (the server's bounds; nothing is sent), and [`ErrorCode::Unimplemented`]
    /// for a TTL mode on a server that does not allow TTL nodes
    /// (`zookeeper.extendedTypesEnabled`).
    pub fn create_with(
        &self,
        path: &str,
        data: &[u8],
        options: &CreateOptions,
    ) -> Result<(String, Stat)> {
        let server_path = self.server_path(path, options.mode.is_sequential())?;
        let create = CreateRequest {
            path: server_path,
            data: data.to_vec(),
            acl: options.acl.clone(),
            mode: options.mode,
        };
        let request = match (options.mode, options.ttl) {
            (CreateMode::Container, _) => Request::CreateContainer(create),
            (m, Some(ttl)) if m.is_ttl() => {
                if ttl < Duration::from_millis(1) || ttl > MAX_TTL {
                    return Err(Error::InvalidArgument(
                        "a TTL must be between 1 ms and 2^40 - 1 ms (about 34 years)",
                    ));
                }
                Request::CreateTtl(CreateTtlRequest {
                    create,
                    ttl_ms: i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX),
                })
            }
            (m, None) if m.is_ttl() => {
                return Err(Error::InvalidArgument(
                    "a TTL mode needs CreateOptions::ttl",
                ))
            }
            _ => Request::Create2(create),
        };
        match self.call(request)? {
            Response::Created { path, stat } => Ok((self.client_path(&path), stat)),
            other => Err(Self::unexpected(other)),
        }
    }

    /// Deletes a node (at `version`, if given).
    ///
    /// # Errors
    /// [`ErrorCode::NoNode`] (see [`Error::is_no_node`]);
    /// [`ErrorCode::BadVersion`] if `version` is not the node's;
    /// [`ErrorCode::NotEmpty`] if it has children; and
    /// [those of every call](Client#errors).
    pub fn delete(&self, path: &str, version: Option<i32>) -> Result<()> {
        let path = self.server_path(path, false)?;
        self.call(Request::Delete(PathVersion {
            path,
            version: version_or_any(version),
        }))
        .map(drop)
    }

    fn exists_inner(&self, path: &str, watch: bool) -> Result<(Option<Stat>, Option<Watch>)> {
        let caller_path = path;
        let path = self.server_path(path, false)?;
        let (tx, rx) = oneshot::channel();
        let (wtx, w) = self.new_watch();
        if !self.inner.driver.send(Command::Submit {
            request: Request::Exists(PathWatch { path, watch }),
            reply: tx,
            watcher: watch.then_some(wtx),
        }) {
            return Err(Error::Closed);
        }
        let w = watch.then_some(w);
        match rx.recv_timeout(self.inner.request_timeout) {
            Ok(Ok(Response::Stat(stat))) => Ok((Some(stat), w)),
            Ok(Ok(other)) => Err(Self::unexpected(other)),
            // A missing node is an answer, and the watch waits for its creation.
            Ok(Err(RequestError::Server(ErrorCode::NoNode))) => Ok((None, w)),
            Ok(Err(e)) => Err(Error::from(e).at(OpCode::Exists, Some(caller_path.to_owned()))),
            Err(RecvTimeoutError::Timeout) => Err(Error::Timeout),
            Err(RecvTimeoutError::Disconnected) => Err(Error::Closed),
        }
    }

    /// The node's Stat, or `None` if it does not exist.
    ///
    /// # Errors
    /// [Those of every call](Client#errors) (a missing node is `Ok(None)`).
    pub fn exists(&self, path: &str) -> Result<Option<Stat>> {
        self.exists_inner(path, false).map(|(s, _)| s)
    }

    /// Like [`Client::exists`], leaving a watch that fires on creation,
    /// deletion or data change.
    ///
    /// # Errors
    /// As [`Client::exists`]; the watch is set only if the call succeeds.
    pub fn exists_and_watch(&self, path: &str) -> Result<(Option<Stat>, Watch)> {
        let (stat, w) = self.exists_inner(path, true)?;
        w.map(|w| (stat, w)).ok_or(Error::Closed)
    }

    fn get_data_inner(&self, path: &str, watch: bool) -> Result<(Vec<u8>, Stat, Option<Watch>)> {
        let path = self.server_path(path, false)?;
        match self.call_watch(Request::GetData(PathWatch { path, watch }), watch)? {
            (Response::Data { data, stat }, w) => Ok((data, stat, w)),
            (other, _) => Err(Self::unexpected(other)),
        }
    }

    /// The node's data and Stat.
    ///
    /// # Errors
    /// [`ErrorCode::NoNode`] (see [`Error::is_no_node`]); and
    /// [those of every call](Client#errors).
    pub fn get_data(&self, path: &str) -> Result<(Vec<u8>, Stat)> {
        self.get_data_inner(path, false).map(|(d, s, _)| (d, s))
    }

    /// Like [`Client::get_data`], leaving a watch for data change or deletion.
    ///
    /// # Errors
    /// As [`Client::get_data`]; the watch is set only if the call succeeds.
    pub fn get_data_and_watch(&self, path: &str) -> Result<(Vec<u8>, Stat, Watch)> {
        let (d, s, w) = self.get_data_inner(path, true)?;
        w.map(|w| (d, s, w)).ok_or(Error::Closed)
    }

    fn get_children_inner(
        &self,
        path: &str,
        watch: bool,
    ) -> Result<(Vec<String>, Stat, Option<Watch>)> {
        let path = self.server_path(path, false)?;
        match self.call_watch(Request::GetChildren2(PathWatch { path, watch }), watch)? {
            (Response::Children2 { children, stat }, w) => Ok((children.to_vec(), stat, w)),
            (other, _) => Err(Self::unexpected(other)),
        }
    }

    /// Child names (not full paths), in the server's order.
    ///
    /// # Errors
    /// [`ErrorCode::NoNode`] (see [`Error::is_no_node`]); and
    /// [those of every call](Client#errors).
    pub fn get_children(&self, path: &str) -> Result<Vec<String>> {
        self.get_children_inner(path, false).map(|(c, _, _)| c)
    }

    /// Child names and the parent's Stat.
    ///
    /// # Errors
    /// As [`Client::get_children`].
    pub fn get_children_with_stat(&self, path: &str) -> Result<(Vec<String>, Stat)> {
        self.get_children_inner(path, false).map(|(c, s, _)| (c, s))
    }

    /// Like [`Client::get_children_with_stat`], leaving a watch for child
    /// changes or deletion.
    ///
    /// # Errors
    /// As [`Client::get_children`]; the watch is set only if the call
    /// succeeds.
    pub fn get_children_and_watch(&self, path: &str) -> Result<(Vec<String>, Stat, Watch)> {
        let (c, s, w) = self.get_children_inner(path, true)?;
        w.map(|w| (c, s, w)).ok_or(Error::Closed)
    }

    /// Replaces the node's data (if at `version`, when given); returns the new Stat.
    ///
    /// # Errors
    /// [`ErrorCode::NoNode`]; [`ErrorCode::BadVersion`] if `version` is not
    /// the node's; and [those of every call](Client#errors).
    pub fn set_data(&self, path: &str, data: &[u8], version: Option<i32>) -> Result<Stat> {
        let path = self.server_path(path, false)?;
        match self.call(Request::SetData(SetDataRequest {
            path,
            data: data.to_vec(),
            version: version_or_any(version),
        }))? {
            Response::Stat(stat) => Ok(stat),
            other => Err(Self::unexpected(other)),
        }
    }

    /// The node's ACL and Stat.
    ///
    /// # Errors
    /// [`ErrorCode::NoNode`]; and [those of every call](Client#errors).
    pub fn get_acl(&self, path: &str) -> Result<(Vec<Acl>, Stat)> {
        let path = self.server_path(path, false)?;
        match self.call(Request::GetAcl(path))? {
            Response::Acl { acl, stat } => Ok((acl, stat)),
            other => Err(Self::unexpected(other)),
        }
    }

    /// Replaces the node's ACL (if its `Stat::aversion` is `version`, when
    /// given); returns the new Stat.
    ///
    /// # Errors
    /// [`ErrorCode::NoNode`]; [`ErrorCode::BadVersion`] if `version` is not
    /// the node's `aversion`; [`ErrorCode::InvalidAcl`] for an ACL the server
    /// cannot apply (e.g. `auth` with no credentials added); and
    /// [those of every call](Client#errors).
    pub fn set_acl(&self, path: &str, acl: Vec<Acl>, version: Option<i32>) -> Result<Stat> {
        let path = self.server_path(path, false)?;
        match self.call(Request::SetAcl(SetAclRequest {
            path,
            acl,
            version: version_or_any(version),
        }))? {
            Response::Stat(stat) => Ok(stat),
            other => Err(Self::unexpected(other)),
        }
    }

    /// Waits until the server we talk to has caught up with the leader.
    ///
    /// # Errors
    /// [Those of every call](Client#errors).
    pub fn sync(&self, path: &str) -> Result<()> {
        let path = self.server_path(path, false)?;
        self.call(Request::Sync(path)).map(drop)
    }

    /// Applies every op or none. On failure, says which op failed and why.
    ///
    /// # Errors
    /// [`Error::MultiFailed`] with the index and code of the op the server
    /// refused (nothing was applied); [`Error::InvalidPath`] if any op's path
    /// is invalid (nothing was sent); and [those of every call](Client#errors).
    pub fn multi(&self, ops: &[Op]) -> Result<Vec<OpResult>> {
        let mut wire = Vec::with_capacity(ops.len());
        for op in ops {
            wire.push(match op {
                Op::Create {
                    path,
                    data,
                    mode,
                    acl,
                } => MultiOp::Create2(CreateRequest {
                    path: self.server_path(path, mode.is_sequential())?,
                    data: data.clone(),
                    acl: acl.clone(),
                    mode: *mode,
                }),
                Op::Delete { path, version } => MultiOp::Delete(PathVersion {
                    path: self.server_path(path, false)?,
                    version: version_or_any(*version),
                }),
                Op::SetData {
                    path,
                    data,
                    version,
                } => MultiOp::SetData(SetDataRequest {
                    path: self.server_path(path, false)?,
                    data: data.clone(),
                    version: version_or_any(*version),
                }),
                Op::Check { path, version } => MultiOp::Check(PathVersion {
                    path: self.server_path(path, false)?,
                    version: version_or_any(*version),
                }),
            });
        }
        let refused = |index: usize, code: ErrorCode| {
            let (op, path) = match ops.get(index) {
                Some(Op::Create { path, .. }) => (OpCode::Create, path.clone()),
                Some(Op::Delete { path, .. }) => (OpCode::Delete, path.clone()),
                Some(Op::SetData { path, .. }) => (OpCode::SetData, path.clone()),
                Some(Op::Check { path, .. }) => (OpCode::Check, path.clone()),
                None => (OpCode::Error, String::new()),
            };
            Error::MultiFailed {
                index,
                code,
                op,
                path,
            }
        };
        let results = match self.call(Request::Multi(wire))? {
            Response::Multi(results) => results,
            other => return Err(Self::unexpected(other)),
        };
        if let Some((index, code)) = jute::MultiResult::first_failure(&results) {
            return Err(refused(index, code));
        }
        results
            .into_iter()
            .enumerate()
            .map(|(index, r)| match r {
                MultiResult::Create { path } => Ok(OpResult::Create {
                    path: self.client_path(&path),
                    stat: Stat::default(),
                }),
                MultiResult::Create2 { path, stat } => Ok(OpResult::Create {
                    path: self.client_path(&path),
                    stat,
                }),
                MultiResult::Delete => Ok(OpResult::Delete),
                MultiResult::SetData { stat } => Ok(OpResult::SetData(stat)),
                MultiResult::Check => Ok(OpResult::Check),
                MultiResult::Error(code) => Err(refused(index, code)),
            })
            .collect()
    }
}
