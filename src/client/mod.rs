//! The blocking client: many threads share one connection and one session.

use std::sync::{mpsc, Arc};
use std::task::Waker;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use jute::{AddWatchMode, AddWatchRequest, AuthPacket, OpCode, Request, Response};

use crate::deadline;
use crate::driver::DriverHandle;
use crate::error::{Error, Result};
use crate::machine::recipient::WatchSender;
use crate::machine::{AttemptId, Command, CommandSender, Subscriber};
use crate::oneshot;
use crate::path::{validate_path, Chroot};
use crate::session::{SessionChange, SessionState};
use zklock_proto::lock::AttemptIds;

mod builder;
mod connect;
mod nodes;
mod ops;
mod reply;
mod watch;

pub use builder::{ClientBuilder, MIN_MAX_FRAME};
pub use ops::{CreateOptions, Op, OpResult};
pub(crate) use reply::PendingReply;
pub use watch::{PersistentWatch, Watch, DEFAULT_PERSISTENT_WATCH_CAPACITY};

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
///   session is over ([`Error::is_session_ended`]). After an expiry the
///   client opens a new session by itself and later calls run on it
///   ([`ClientBuilder::new_session_after_expiry`]); after `Closed` or
///   `AuthFailed`, open a new client;
/// * [`Error::Server`] with [`ErrorCode::NoAuth`](crate::ErrorCode::NoAuth):
///   an ACL refused us;
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
    /// Unread events a persistent watch keeps before it collapses them.
    persistent_watch_capacity: usize,
    /// Number of distinct server addresses.
    host_count: usize,
    /// Names lock attempts: a counter, and a random seed for their UUIDs.
    attempts: AttemptIds,
    /// An expired session is followed by a new one.
    renews: bool,
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
            persistent_watch_capacity: watch::DEFAULT_PERSISTENT_WATCH_CAPACITY,
            wait_connected: true,
            #[cfg(feature = "sasl")]
            sasl: None,
            observer: None,
            leader_check: true,
            new_session_after_expiry: true,
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
        let deadline = deadline::from_now(timeout);
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

    /// Whether an expired session is followed by a new one
    /// ([`ClientBuilder::new_session_after_expiry`]): a latch campaigns
    /// again on it.
    pub(crate) fn renews_sessions(&self) -> bool {
        self.inner.renews
    }

    /// The session id (0 until the first session is established, and
    /// while a new one is being opened after an expiry).
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
    /// It keeps at most [`STATE_CHANNEL_CAPACITY`](crate::recipes::STATE_CHANNEL_CAPACITY)
    /// unread changes: a reader that far behind misses later ones until it
    /// reads ([`Client::state`] is always current).
    pub fn subscribe(&self) -> Receiver<SessionState> {
        self.subscribe_with(None)
    }

    /// Like [`Client::subscribe`], each state with the id of the session it
    /// happened to: after an expiry ([`ClientBuilder::new_session_after_expiry`]),
    /// the old session's `Expired`, then `Connecting` (id 0) and the new
    /// session's `Connected` with its id.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), zklock::Error> {
    /// let client = zklock::Client::connect("127.0.0.1:2181", std::time::Duration::from_secs(10))?;
    /// for change in client.session_changes() {
    ///     println!("session {:#x}: {:?}", change.session_id, change.state);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn session_changes(&self) -> Receiver<SessionChange> {
        let (tx, rx) = crossbeam_channel::bounded(crate::recipes::STATE_CHANNEL_CAPACITY);
        let subscriber = Subscriber::Changes(tx.clone());
        if !self.inner.driver.send(Command::Subscribe(subscriber, None)) {
            let _ = tx.send(SessionChange {
                state: SessionState::Closed,
                session_id: self.session_id(),
            });
        }
        rx
    }

    /// Like [`Client::subscribe`], forgotten as soon as the returned token
    /// drops: for short-lived listeners created on every operation.
    pub(crate) fn subscribe_scoped(&self) -> (Receiver<SessionState>, Arc<()>) {
        let token = Arc::new(());
        (self.subscribe_with(Some(Arc::downgrade(&token))), token)
    }

    fn subscribe_with(&self, token: Option<std::sync::Weak<()>>) -> Receiver<SessionState> {
        // Bounded: a listener that stops reading costs at most this much
        // (see `Client::subscribe`).
        let (tx, rx) = crossbeam_channel::bounded(crate::recipes::STATE_CHANNEL_CAPACITY);
        if !self
            .inner
            .driver
            .send(Command::Subscribe(Subscriber::States(tx.clone()), token))
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

    /// What `request` does and to which path (as the caller names it): what
    /// a refusal of it reports.
    fn place(&self, request: &Request) -> (OpCode, Option<String>) {
        let path = match request {
            Request::Create(c) | Request::Create2(c) | Request::CreateContainer(c) => Some(&c.path),
            Request::CreateTtl(t) => Some(&t.create.path),
            Request::Delete(pv) | Request::Check(pv) => Some(&pv.path),
            Request::Exists(pw)
            | Request::GetData(pw)
            | Request::GetChildren(pw)
            | Request::GetChildren2(pw) => Some(&pw.path),
            Request::SetData(r) => Some(&r.path),
            Request::SetAcl(r) => Some(&r.path),
            Request::AddWatch(r) => Some(&r.path),
            Request::RemoveWatches(w) | Request::CheckWatches(w) => Some(&w.path),
            Request::GetAcl(p)
            | Request::Sync(p)
            | Request::GetEphemerals(p)
            | Request::GetAllChildrenNumber(p) => Some(p),
            _ => None,
        };
        (request.op_code(), path.map(|p| self.client_path(p)))
    }

    /// Sends a request and waits for its reply within the request timeout.
    fn call(&self, request: Request) -> Result<Response> {
        self.call_until(request, None, None)
    }

    /// Like `call`, but gives up at `deadline` too (whichever comes first):
    /// for the layers above, whose callers have deadlines of their own.
    pub(crate) fn call_by(&self, request: Request, deadline: Option<Instant>) -> Result<Response> {
        self.call_until(request, None, deadline)
    }

    /// Like `call`, and with `watch` a one-shot watch set by the request.
    fn call_watch(&self, request: Request, watch: bool) -> Result<(Response, Option<Watch>)> {
        if !watch {
            return self.call(request).map(|r| (r, None));
        }
        let (watcher, watch) = self.new_watch();
        self.call_until(request, Some(watcher), None)
            .map(|r| (r, Some(watch)))
    }

    /// Like `call_by`, with the one-shot watch `request` sets.
    pub(crate) fn call_watch_by(
        &self,
        request: Request,
        deadline: Option<Instant>,
    ) -> Result<(Response, Watch)> {
        let (watcher, watch) = self.new_watch();
        self.call_until(request, Some(watcher), deadline)
            .map(|r| (r, watch))
    }

    /// Sends `request` (with `watcher`, where its events go, if it sets a
    /// watch) and waits for the reply until the request timeout or
    /// `deadline`. The caller's side of a watch stays with the caller, so
    /// that a call without one links none of its channel.
    fn call_until(
        &self,
        request: Request,
        watcher: Option<WatchSender>,
        deadline: Option<Instant>,
    ) -> Result<Response> {
        let until = self.reply_deadline(Instant::now(), deadline);
        let pending = self.submit_with(request, watcher)?;
        match pending.reply.recv_deadline(until) {
            Ok(reply) => pending.answer(reply),
            Err(mpsc::RecvTimeoutError::Timeout) => Err(Error::Timeout),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(Error::Closed),
        }
    }

    /// When a request sent at `now` stops waiting for its reply: the
    /// request timeout, or the caller's `deadline` if sooner.
    pub(crate) fn reply_deadline(&self, now: Instant, deadline: Option<Instant>) -> Instant {
        let until = deadline::after(now, self.inner.request_timeout);
        deadline.map_or(until, |d| until.min(d))
    }

    /// Has the core wake `task` at `at`: a future's deadline, when nothing
    /// else would poll it. `false` if the core is gone.
    pub(crate) fn wake_at(&self, at: Instant, task: Waker) -> bool {
        self.inner.driver.send(Command::WakeAt(at, task))
    }

    /// Sends `request` and returns at once; its reply is read with
    /// [`PendingReply::take`], for callers that poll.
    pub(crate) fn submit(&self, request: Request) -> Result<PendingReply> {
        self.submit_with(request, None)
    }

    fn submit_with(&self, request: Request, watcher: Option<WatchSender>) -> Result<PendingReply> {
        let (op, path) = self.place(&request);
        let (tx, rx) = oneshot::channel();
        if !self.inner.driver.send(Command::Submit {
            request,
            reply: tx,
            watcher,
        }) {
            return Err(Error::Closed);
        }
        Ok(PendingReply {
            reply: rx,
            op,
            path,
        })
    }

    fn new_watch(&self) -> (WatchSender, Watch) {
        Watch::channel(self.inner.chroot.clone())
    }

    fn unexpected(resp: Response) -> Error {
        log::error!("reply of an unexpected shape: {resp:?}");
        Error::Protocol(format!("reply of an unexpected shape: {resp:?}"))
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
    /// A reader that falls behind gets the same event in place of the
    /// events it did not read (see [`PersistentWatch`]).
    ///
    /// # Errors
    /// [`ErrorCode::Unimplemented`](crate::ErrorCode::Unimplemented) from a
    /// server older than 3.6; and [those of every call](Client#errors). A
    /// missing node is no error: the watch reports its creation.
    pub fn add_watch(&self, path: &str, mode: AddWatchMode) -> Result<PersistentWatch> {
        let server_path = self.server_path(path, false)?;
        let dropped = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (wtx, watch) = Watch::persistent_channel(
            self.inner.chroot.clone(),
            path.to_owned(),
            self.inner.persistent_watch_capacity,
            dropped.clone(),
        );
        let (tx, reply) = oneshot::channel();
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
                dropped,
            }),
            Ok(Err(e)) => Err(Error::from(e).at(OpCode::AddWatch, Some(path.to_owned()))),
            Err(mpsc::RecvTimeoutError::Timeout) => Err(Error::Timeout),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(Error::Closed),
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
        let (tx, rx) = oneshot::channel();
        if !self.inner.driver.send(Command::Close { reply: tx }) {
            return Ok(());
        }
        match rx.recv_timeout(self.inner.request_timeout) {
            Ok(_) | Err(mpsc::RecvTimeoutError::Disconnected) => Ok(()),
            Err(mpsc::RecvTimeoutError::Timeout) => Err(Error::Timeout),
        }
    }

    /// [`Client::close`] for async code: resolves once the server has
    /// answered the close (or the I/O thread has given up on it and ended
    /// the session), woken by the I/O thread; no runtime is needed. The
    /// client is `Closed` as soon as this is called.
    pub fn close_async(&self) -> impl std::future::Future<Output = ()> + Send {
        let (tx, rx) = oneshot::channel();
        let sent = self.inner.driver.send(Command::Close { reply: tx });
        std::future::poll_fn(move |cx| match sent {
            true => rx.poll_recv(cx).map(drop),
            false => std::task::Poll::Ready(()),
        })
    }

    /// Watch events this client has received since it started (diagnostics:
    /// herd-free recipes wake one waiter per release).
    ///
    /// **Unstable** (feature `testing`, for this project's tests; no semver
    /// promise).
    #[cfg(feature = "testing")]
    pub fn watch_events_received(&self) -> u64 {
        self.inner
            .driver
            .watch_events
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sends several requests back to back and waits for all the replies:
    /// one round trip instead of one each. Replies come in request order.
    pub(crate) fn pipeline(&self, requests: Vec<Request>) -> Vec<Result<Response>> {
        let deadline = deadline::from_now(self.inner.request_timeout);
        let mut waiting = Vec::with_capacity(requests.len());
        for request in requests {
            let place = self.place(&request);
            let (tx, rx) = oneshot::channel();
            let sent = self.inner.driver.send(Command::Submit {
                request,
                reply: tx,
                watcher: None,
            });
            waiting.push(sent.then_some((rx, place)));
        }
        waiting
            .into_iter()
            .map(|waiting| {
                let Some((rx, (op, path))) = waiting else {
                    return Err(Error::Closed);
                };
                match rx.recv_deadline(deadline) {
                    Ok(r) => r.map_err(|e| Error::from(e).at(op, path)),
                    Err(mpsc::RecvTimeoutError::Timeout) => Err(Error::Timeout),
                    Err(mpsc::RecvTimeoutError::Disconnected) => Err(Error::Closed),
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

    /// The door to this client's core; does not keep the session open.
    pub(crate) fn command_sender(&self) -> CommandSender {
        self.inner.driver.sender.clone()
    }

    /// Until when the server cannot have expired the session.
    pub(crate) fn valid_until(&self) -> Option<Instant> {
        self.inner.driver.status.valid_until()
    }

    /// A new lock attempt's id and protected UUID.
    pub(crate) fn next_attempt(&self) -> (AttemptId, String) {
        self.inner.attempts.next()
    }

    /// The deadline of each call (by default the session timeout).
    pub(crate) fn request_timeout(&self) -> Duration {
        self.inner.request_timeout
    }

    /// The frame limit this client enforces.
    pub fn max_frame(&self) -> usize {
        self.inner.max_frame
    }
}
