//! The blocking client: many threads share one connection and one session.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use jute::{
    Acl, AddWatchMode, AddWatchRequest, AuthPacket, CreateMode, CreateRequest, CreateTtlRequest,
    ErrorCode, MultiOp, MultiResult, PathVersion, PathWatch, Request, Response, SetAclRequest,
    SetDataRequest, Stat,
};

use crate::driver::{Command, DriverHandle, IoTask, TaskSender, WatchSender};
use crate::error::{Error, Result};
use crate::path::{validate_path, Chroot};
use crate::session::{RequestError, SessionState};

mod builder;
mod connect;
mod ops;
mod watch;

pub use builder::ClientBuilder;
pub use ops::{CreateOptions, Op, OpResult};
pub use watch::{PersistentWatch, Watch};

/// A ZooKeeper client: one session, one connection, one I/O thread.
///
/// Cheap to clone; every clone shares the session. The session is closed
/// when [`Client::close`] is called or the last clone is dropped.
///
/// ```no_run
/// use std::time::Duration;
/// use zklock::{Client, CreateMode};
///
/// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
/// let path = client.create("/demo", b"hello", CreateMode::Ephemeral)?;
/// let (data, stat) = client.get_data(&path)?;
/// assert_eq!(data, b"hello");
/// client.delete(&path, Some(stat.version))?;
/// # Ok::<(), zklock::Error>(())
/// ```
///
/// # Errors
///
/// Each call lists the errors worth handling in its own terms (the server's
/// codes it commonly gets, mostly). Besides those, every call that talks to
/// the server can fail with:
/// * [`Error::InvalidPath`], [`Error::InvalidArgument`], [`Error::TooLarge`]:
///   refused by the client; nothing was sent;
/// * [`Error::ConnectionLoss`], [`Error::Timeout`]: the request may or may
///   not have been applied ([`Error::is_outcome_unknown`]); the session may
///   well live on;
/// * [`Error::SessionExpired`], [`Error::Closed`], [`Error::AuthFailed`]: the
///   session is over ([`Error::is_session_ended`]); open a new client;
/// * [`Error::Server`] with [`ErrorCode::NoAuth`]: an ACL refused us;
/// * [`Error::Protocol`]: the server's reply made no sense.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    driver: DriverHandle,
    chroot: Chroot,
    request_timeout: Duration,
    max_frame: usize,
    /// Number of distinct server addresses.
    host_count: usize,
    /// Per-client state of the layer above (the recipes' holder monitor),
    /// kept here so it lives and dies with the client without the client
    /// knowing its type.
    extension: std::sync::OnceLock<Box<dyn std::any::Any + Send + Sync>>,
}

/// A reference to a client that does not keep its session open.
#[derive(Clone)]
pub(crate) struct WeakClient(std::sync::Weak<Inner>);

impl std::fmt::Debug for WeakClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WeakClient")
    }
}

impl WeakClient {
    pub(crate) fn upgrade(&self) -> Option<Client> {
        self.0.upgrade().map(|inner| Client { inner })
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The I/O thread closes the session and ends.
        self.driver.send(Command::Shutdown);
        if let Some(t) = self.driver.thread.take() {
            // Do not block a dropping caller on the network: the thread ends
            // by itself once the close is answered or times out.
            drop(t);
        }
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("session_id", &format_args!("{:#x}", self.session_id()))
            .field("state", &self.state())
            .finish()
    }
}

fn version_or_any(v: Option<i32>) -> i32 {
    v.unwrap_or(-1)
}

impl Client {
    /// Connects and waits until the session is established (up to
    /// `session_timeout`, at least 1 s).
    ///
    /// # Errors
    /// As [`ClientBuilder::connect`].
    pub fn connect(connect_string: &str, session_timeout: Duration) -> Result<Client> {
        Client::builder(connect_string)
            .session_timeout(session_timeout)
            .connect()
    }

    /// Options beyond [`Client::connect`]'s: defaults are a 10 s session
    /// timeout, the server's default frame limit, and waiting for the session.
    /// `connect_string` is `host[:port][,host[:port]...][/chroot]`; the port
    /// defaults to 2181.
    pub fn builder(connect_string: &str) -> ClientBuilder {
        ClientBuilder {
            connect_string: connect_string.to_owned(),
            session_timeout: Duration::from_secs(10),
            connect_timeout: None,
            request_timeout: None,
            max_frame: jute::DEFAULT_MAX_FRAME,
            wait_connected: true,
            sasl: None,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// Blocks until connected.
    ///
    /// # Errors
    /// [`Error::Timeout`] if not connected within `timeout`;
    /// [`Error::SessionExpired`], [`Error::AuthFailed`] or [`Error::Closed`]
    /// if the session ended.
    pub fn wait_connected(&self, timeout: Duration) -> Result<()> {
        let (states, _token) = self.subscribe_scoped();
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(outcome) = connect::settled(self.state()) {
                return outcome;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match states.recv_timeout(left) {
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => return Err(Error::Timeout),
                Err(RecvTimeoutError::Disconnected) => return Err(Error::Closed),
            }
        }
    }

    /// The session state the I/O thread last reported.
    pub fn state(&self) -> SessionState {
        self.inner.driver.status.state()
    }

    /// The session id (0 until the first session is established).
    pub fn session_id(&self) -> i64 {
        self.inner.driver.status.session_id()
    }

    /// The session timeout the server granted.
    pub fn negotiated_timeout(&self) -> Option<Duration> {
        self.inner.driver.status.negotiated()
    }

    /// The highest zxid this client has seen.
    pub fn last_zxid(&self) -> i64 {
        self.inner.driver.status.last_zxid()
    }

    /// A channel of session state changes, starting with the current state.
    /// The I/O thread forgets it at the first change after it is dropped.
    pub fn subscribe(&self) -> Receiver<SessionState> {
        self.subscribe_with(None)
    }

    /// Like [`Client::subscribe`], forgotten as soon as the returned token
    /// drops: for short-lived listeners created on every operation.
    pub(crate) fn subscribe_scoped(&self) -> (Receiver<SessionState>, Arc<()>) {
        let token = Arc::new(());
        (self.subscribe_with(Some(Arc::downgrade(&token))), token)
    }

    fn subscribe_with(&self, token: Option<std::sync::Weak<()>>) -> Receiver<SessionState> {
        let (tx, rx) = crossbeam_channel::unbounded();
        if !self
            .inner
            .driver
            .send(Command::Subscribe(tx.clone(), token))
        {
            let _ = tx.send(SessionState::Closed);
        }
        rx
    }

    /// The chroot-aware server path, after validation.
    fn server_path(&self, path: &str, sequential: bool) -> Result<String> {
        validate_path(path, sequential)?;
        Ok(self.inner.chroot.apply(path))
    }

    fn client_path(&self, server_path: &str) -> String {
        self.inner.chroot.strip(server_path)
    }

    /// Sends a request and waits for its reply within the request timeout.
    fn call(&self, request: Request) -> Result<Response> {
        self.call_watch(request, false).map(|(r, _)| r)
    }

    /// Like `call`, but gives up at `deadline` too (whichever comes first):
    /// for the layers above, whose callers have deadlines of their own.
    pub(crate) fn call_by(&self, request: Request, deadline: Option<Instant>) -> Result<Response> {
        self.call_until(request, false, deadline).map(|(r, _)| r)
    }

    fn call_watch(&self, request: Request, watch: bool) -> Result<(Response, Option<Watch>)> {
        self.call_until(request, watch, None)
    }

    fn call_until(
        &self,
        request: Request,
        watch: bool,
        deadline: Option<Instant>,
    ) -> Result<(Response, Option<Watch>)> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let (watcher, watch) = if watch {
            let (wtx, w) = self.new_watch();
            (Some(wtx), Some(w))
        } else {
            (None, None)
        };
        if !self.inner.driver.send(Command::Submit {
            request,
            reply: tx,
            watcher,
        }) {
            return Err(Error::Closed);
        }
        let mut until = Instant::now() + self.inner.request_timeout;
        if let Some(d) = deadline {
            until = until.min(d);
        }
        match rx.recv_deadline(until) {
            Ok(Ok(resp)) => Ok((resp, watch)),
            Ok(Err(e)) => Err(e.into()),
            Err(RecvTimeoutError::Timeout) => Err(Error::Timeout),
            Err(RecvTimeoutError::Disconnected) => Err(Error::Closed),
        }
    }

    fn new_watch(&self) -> (WatchSender, Watch) {
        Watch::channel(self.inner.chroot.clone(), false)
    }

    fn unexpected(resp: Response) -> Error {
        log::error!("reply of an unexpected shape: {resp:?}");
        Error::Protocol(format!("reply of an unexpected shape: {resp:?}"))
    }

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
    /// mode without [`CreateOptions::ttl`], and [`ErrorCode::Unimplemented`]
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
            (m, Some(ttl)) if m.is_ttl() => Request::CreateTtl(CreateTtlRequest {
                create,
                ttl_ms: i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX),
            }),
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
        let path = self.server_path(path, false)?;
        let (tx, rx) = crossbeam_channel::bounded(1);
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
            Ok(Err(e)) => Err(e.into()),
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
        let results = match self.call(Request::Multi(wire))? {
            Response::Multi(results) => results,
            other => return Err(Self::unexpected(other)),
        };
        // Rolled-back ops report RuntimeInconsistency; the culprit has the real code.
        let failed = results.iter().enumerate().find(|(_, r)| {
            matches!(r, MultiResult::Error(c) if *c != ErrorCode::Ok && *c != ErrorCode::RuntimeInconsistency)
        });
        if let Some((index, MultiResult::Error(code))) = failed {
            return Err(Error::MultiFailed { index, code: *code });
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
                MultiResult::SetData { stat } => Ok(OpResult::SetData { stat }),
                MultiResult::Check => Ok(OpResult::Check),
                MultiResult::Error(code) => Err(Error::MultiFailed { index, code }),
            })
            .collect()
    }

    /// Leaves a persistent watch on `path` (ZooKeeper 3.6 and later): it
    /// fires on every change, is re-armed after reconnects, and is removed
    /// from the server when the returned [`PersistentWatch`] is dropped.
    /// `PersistentRecursive` covers every node below `path` too (creations,
    /// deletions and data changes; no child-list events).
    ///
    /// The server does not replay changes made while the connection was
    /// down: after each reconnect the watch yields one event of kind
    /// `EventType::None` for its path, meaning "re-read what you follow".
    ///
    /// # Errors
    /// [`ErrorCode::Unimplemented`] from a server older than 3.6; and
    /// [those of every call](Client#errors). A missing node is no error: the
    /// watch reports its creation.
    pub fn add_watch(&self, path: &str, mode: AddWatchMode) -> Result<PersistentWatch> {
        let server_path = self.server_path(path, false)?;
        let (wtx, watch) = Watch::channel(self.inner.chroot.clone(), true);
        let (tx, reply) = crossbeam_channel::bounded(1);
        let sent = self.inner.driver.send(Command::Submit {
            request: Request::AddWatch(AddWatchRequest {
                path: server_path.clone(),
                mode,
            }),
            reply: tx,
            watcher: Some(wtx),
        });
        if !sent {
            return Err(Error::Closed);
        }
        match reply.recv_timeout(self.inner.request_timeout) {
            Ok(Ok(_)) => Ok(PersistentWatch {
                watch,
                client: self.downgrade(),
                server_path,
            }),
            Ok(Err(e)) => Err(e.into()),
            Err(RecvTimeoutError::Timeout) => Err(Error::Timeout),
            Err(RecvTimeoutError::Disconnected) => Err(Error::Closed),
        }
    }

    /// Adds credentials to the session (e.g. scheme "digest", auth "user:password").
    /// They are sent again after every reconnect.
    ///
    /// # Errors
    /// [`Error::AuthFailed`] if the server refuses them (an unknown scheme):
    /// the session ends. And [those of every call](Client#errors).
    pub fn add_auth(&self, scheme: &str, auth: &[u8]) -> Result<()> {
        self.call(Request::Auth(AuthPacket {
            kind: 0,
            scheme: scheme.to_owned(),
            auth: auth.to_vec(),
        }))
        .map(drop)
    }

    /// Ends the session: its ephemeral nodes are deleted at once. The
    /// client is `Closed` as soon as the close is sent; closing a closed
    /// client does nothing.
    ///
    /// # Errors
    /// [`Error::Timeout`] if the server's answer did not come within the
    /// request timeout: the client is closed all the same, but the server
    /// may keep the session (and its ephemeral nodes) until it expires.
    pub fn close(&self) -> Result<()> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        if !self.inner.driver.send(Command::Close { reply: tx }) {
            return Ok(());
        }
        match rx.recv_timeout(self.inner.request_timeout) {
            Ok(_) | Err(RecvTimeoutError::Disconnected) => Ok(()),
            Err(RecvTimeoutError::Timeout) => Err(Error::Timeout),
        }
    }

    /// Watch events this client has received since it started (diagnostics:
    /// herd-free recipes wake one waiter per release).
    pub fn watch_events_received(&self) -> u64 {
        self.inner
            .driver
            .watch_events
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sends several requests back to back and waits for all the replies:
    /// one round trip instead of one each. Replies come in request order.
    pub(crate) fn pipeline(&self, requests: Vec<Request>) -> Vec<Result<Response>> {
        let deadline = Instant::now() + self.inner.request_timeout;
        let mut waiting = Vec::with_capacity(requests.len());
        for request in requests {
            let (tx, rx) = crossbeam_channel::bounded(1);
            let sent = self.inner.driver.send(Command::Submit {
                request,
                reply: tx,
                watcher: None,
            });
            waiting.push(sent.then_some(rx));
        }
        waiting
            .into_iter()
            .map(|rx| {
                let Some(rx) = rx else {
                    return Err(Error::Closed);
                };
                match rx.recv_deadline(deadline) {
                    Ok(r) => r.map_err(Error::from),
                    Err(RecvTimeoutError::Timeout) => Err(Error::Timeout),
                    Err(RecvTimeoutError::Disconnected) => Err(Error::Closed),
                }
            })
            .collect()
    }

    /// The server path for `path` (chroot applied), validated.
    pub(crate) fn to_server_path(&self, path: &str, sequential: bool) -> Result<String> {
        self.server_path(path, sequential)
    }

    /// The caller's path for a server path (chroot removed).
    pub(crate) fn to_client_path(&self, server_path: &str) -> String {
        self.client_path(server_path)
    }

    pub(crate) fn downgrade(&self) -> WeakClient {
        WeakClient(Arc::downgrade(&self.inner))
    }

    /// Runs `task` on this client's I/O thread, fed in the same loop turn as
    /// the session (the first task installed stays; later ones are dropped).
    pub(crate) fn install_task(&self, task: Box<dyn IoTask>) -> bool {
        self.inner.driver.send(Command::InstallTask(task))
    }

    /// Sends messages to the installed task; does not keep the session open.
    pub(crate) fn task_sender(&self) -> TaskSender {
        TaskSender::new(self.inner.driver.sender.clone())
    }

    /// The deadline of each call (by default the session timeout).
    pub(crate) fn request_timeout(&self) -> Duration {
        self.inner.request_timeout
    }

    /// The layer above's per-client value, created by `init` on first use.
    pub(crate) fn extension<T: Send + Sync + 'static>(
        &self,
        init: impl FnOnce() -> T,
    ) -> Option<&T> {
        self.inner
            .extension
            .get_or_init(|| Box::new(init()))
            .downcast_ref::<T>()
    }

    /// The frame limit this client enforces.
    pub fn max_frame(&self) -> usize {
        self.inner.max_frame
    }
}
