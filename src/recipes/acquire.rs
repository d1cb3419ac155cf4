//! Taking a place in a lock queue and waiting for our turn: the part every
//! recipe shares. Safe under connection loss: a create whose reply was lost
//! is found again by its protected name, and every way out of `acquire`
//! removes our node.

use std::time::Instant;

use crossbeam_channel::{never, select, Receiver};
use jute::{CreateMode, CreateRequest, ErrorCode, EventType, PathWatch, Request, Response, Stat};
use uuid::Uuid;

use super::cancel::CancelToken;
use super::error::LockError;
use super::queue::{protected_id, sorted_contenders, Contender};
use crate::{Acl, Client, Error, SessionState};

/// Picks the contender our node must wait for, or `None` when we hold.
/// `me` is our index in the sorted queue.
pub(crate) type Blocker = fn(&[Contender], usize) -> Option<usize>;

/// Mutex, write lock, election: wait for the node just below.
pub(crate) fn predecessor(_queue: &[Contender], me: usize) -> Option<usize> {
    me.checked_sub(1)
}

/// When a node in the queue holds, and what it waits on until then.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Rule {
    /// Hold when the blocker finds nothing; else watch the node it names.
    Queue(Blocker),
    /// Hold among the first `n` (semaphore leases); else watch the children.
    /// Only one waiter at a time may use this (the semaphore's gate ensures
    /// it), or every release would wake them all.
    FirstN(usize),
}

/// What an acquire produced: our node, its Stat (czxid is the fencing token).
#[derive(Debug, Clone)]
pub(crate) struct Acquired {
    pub path: String,
    pub stat: Stat,
}

/// One queue under `parent`, with nodes named `_c_<uuid><marker><seq>`.
#[derive(Debug, Clone)]
pub(crate) struct LockQueue {
    pub client: Client,
    /// The lock path as the caller named it (no chroot).
    pub parent: String,
    pub marker: &'static str,
    pub data: Vec<u8>,
    pub rule: Rule,
}

/// The limits of one acquire: a deadline and a cancel token, either optional.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds<'a> {
    pub deadline: Option<Instant>,
    pub cancel: Option<&'a CancelToken>,
}

impl Bounds<'_> {
    pub(crate) fn check(&self) -> Result<(), LockError> {
        if self.cancel.is_some_and(|c| c.is_cancelled()) {
            return Err(LockError::Cancelled);
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(LockError::Timeout);
        }
        Ok(())
    }

    fn cancel_rx(&self) -> Receiver<()> {
        match self.cancel {
            Some(c) => c.receiver().clone(),
            None => never(),
        }
    }

    fn timeout_rx(&self) -> Receiver<Instant> {
        match self.deadline {
            Some(d) => crossbeam_channel::at(d),
            None => never(),
        }
    }
}

/// How a wait for the blocking node ended.
enum Woken {
    Deleted,
    Changed,
    Retry,
}

/// Every error that means "the outcome is unknown, try again once connected".
fn is_transient(e: &Error) -> bool {
    e.is_connection_loss()
}

impl LockQueue {
    fn child_path(&self, name: &str) -> String {
        if self.parent == "/" {
            format!("/{name}")
        } else {
            format!("{}/{name}", self.parent)
        }
    }

    /// Joins the queue and waits for our turn within `bounds`. On any error
    /// our node is removed (in the background if the server is unreachable).
    pub(crate) fn acquire(&self, bounds: Bounds<'_>) -> Result<Acquired, LockError> {
        let attempt = Uuid::new_v4().to_string();
        let mut node: Option<Acquired> = None;
        let mut maybe_created = false;
        let result = self.acquire_inner(&attempt, &mut node, &mut maybe_created, bounds);
        if result.is_err() {
            self.abandon(&attempt, node.map(|n| n.path), maybe_created);
        }
        result
    }

    fn acquire_inner(
        &self,
        attempt: &str,
        node: &mut Option<Acquired>,
        maybe_created: &mut bool,
        bounds: Bounds<'_>,
    ) -> Result<Acquired, LockError> {
        let prefix = self.child_path(&format!("_c_{attempt}{}", self.marker));
        let mut listing: Option<Vec<String>> = None;
        loop {
            bounds.check()?;
            if node.is_none() {
                *maybe_created = true;
                match self.create_and_list(&prefix) {
                    Ok((created, children)) => {
                        *maybe_created = false;
                        *node = Some(created);
                        listing = children;
                    }
                    Err(e) if e.is_no_node() => {
                        *maybe_created = false;
                        self.ensure_parents()?;
                        continue;
                    }
                    Err(e) if is_transient(&e) => {
                        self.wait_connected(bounds)?;
                        match self.find_ours(attempt) {
                            Ok(found) => {
                                *maybe_created = false;
                                *node = found;
                            }
                            Err(e) if is_transient(&e) => {}
                            Err(e) => return Err(e.into()),
                        }
                        continue;
                    }
                    Err(e) => {
                        *maybe_created = false;
                        return Err(e.into());
                    }
                }
            }
            let Some(ours) = node.clone() else { continue };
            let children = match listing.take() {
                Some(c) => c,
                None => match self.client.get_children(&self.parent) {
                    Ok(c) => c,
                    Err(e) if is_transient(&e) => {
                        self.wait_connected(bounds)?;
                        continue;
                    }
                    Err(e) if e.is_no_node() => {
                        // The parent vanished, and our node with it.
                        *node = None;
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                },
            };
            let mut queue = sorted_contenders(&children);
            let our_name = ours.path.rsplit('/').next().unwrap_or_default();
            // A create whose reply was lost can show up late, after we
            // created again: any other node with our attempt id is ours
            // and would hold the queue forever. Remove it.
            let strays: Vec<String> = queue
                .iter()
                .filter(|c| c.protected_id() == Some(attempt) && c.name != our_name)
                .map(|c| c.name.clone())
                .collect();
            if !strays.is_empty() {
                for stray in &strays {
                    log::warn!("removing a duplicate node of this attempt: {stray}");
                    if let Err(e) = Cleanup::Node(self.child_path(stray)).run_once(&self.client) {
                        if is_transient(&e) {
                            self.wait_connected(bounds)?;
                        } else {
                            return Err(e.into());
                        }
                    }
                }
                continue;
            }
            let Some(me) = queue.iter().position(|c| c.name == our_name) else {
                // Our node is gone: deleted by someone, or our session ended.
                self.session_alive()?;
                *node = None;
                continue;
            };
            let blocker = match self.rule {
                Rule::Queue(blocker) => blocker,
                Rule::FirstN(n) if me < n => return Ok(ours),
                Rule::FirstN(_) => {
                    self.wait_children(bounds)?;
                    continue;
                }
            };
            let Some(b) = blocker(&queue, me) else {
                return Ok(ours);
            };
            let blocking = queue[b].name.clone();
            match self.wait_for(&blocking, bounds)? {
                Woken::Deleted => {
                    // If nothing else blocks us once it is gone, we hold the
                    // lock without listing again: later nodes sort after ours.
                    queue.remove(b);
                    let me = if b < me { me - 1 } else { me };
                    if blocker(&queue, me).is_none() {
                        return Ok(ours);
                    }
                }
                Woken::Changed | Woken::Retry => {}
            }
        }
    }

    /// create2 and getChildren back to back: one round trip when the lock is free.
    fn create_and_list(&self, prefix: &str) -> Result<(Acquired, Option<Vec<String>>), Error> {
        let server_prefix = self.client.to_server_path(prefix, true)?;
        let parent = self.client.to_server_path(&self.parent, false)?;
        let mut replies = self
            .client
            .pipeline(vec![
                Request::Create2(CreateRequest {
                    path: server_prefix,
                    data: self.data.clone(),
                    acl: Acl::open_unsafe(),
                    mode: CreateMode::EphemeralSequential,
                }),
                Request::GetChildren(PathWatch {
                    path: parent,
                    watch: false,
                }),
            ])
            .into_iter();
        let created = replies.next().unwrap_or(Err(Error::Closed))?;
        let Response::Created { path, stat } = created else {
            return Err(Error::Server(ErrorCode::MarshallingError));
        };
        let children = match replies.next() {
            Some(Ok(Response::Children(c))) => Some(c),
            _ => None,
        };
        Ok((
            Acquired {
                path: self.client.to_client_path(&path),
                stat,
            },
            children,
        ))
    }

    /// After a create whose outcome is unknown: our node, if it was created
    /// and belongs to our session. A node of ours owned by another session
    /// cannot exist without a bug elsewhere; it is deleted, never adopted.
    fn find_ours(&self, attempt: &str) -> Result<Option<Acquired>, Error> {
        let children = match self.client.get_children(&self.parent) {
            Ok(c) => c,
            Err(e) if e.is_no_node() => return Ok(None),
            Err(e) => return Err(e),
        };
        for name in children.iter().filter(|n| protected_id(n) == Some(attempt)) {
            let path = self.child_path(name);
            match self.client.exists(&path)? {
                Some(stat) if stat.ephemeral_owner == self.client.session_id() => {
                    return Ok(Some(Acquired { path, stat }));
                }
                Some(_) => {
                    log::warn!("deleting {path}: our attempt id, another session's node");
                    match self.client.delete(&path, None) {
                        Ok(()) => {}
                        Err(e) if e.is_no_node() => {}
                        Err(e) => return Err(e),
                    }
                }
                None => {}
            }
        }
        Ok(None)
    }

    /// Creates every missing ancestor, and the lock path itself, as container
    /// nodes, which the server removes once they are empty.
    fn ensure_parents(&self) -> Result<(), LockError> {
        let mut path = String::new();
        for segment in self.parent.split('/').filter(|s| !s.is_empty()) {
            path.push('/');
            path.push_str(segment);
            let opts = crate::CreateOptions::new(CreateMode::Container);
            match self.client.create_with(&path, b"", &opts) {
                Ok(_) => {}
                Err(e) if e.is_node_exists() => {}
                Err(e) if e.is_no_node() => {
                    // A parent vanished under us (an emptied container): start over.
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Watches the children of the queue and waits for any change.
    fn wait_children(&self, bounds: Bounds<'_>) -> Result<(), LockError> {
        match self.client.get_children_w(&self.parent) {
            Ok((_, _, watch)) => self.wait_on(&watch, bounds).map(drop),
            Err(e) if is_transient(&e) => self.wait_connected(bounds),
            Err(e) => Err(e.into()),
        }
    }

    /// Watches `name` and waits until it changes, the deadline passes or
    /// the caller cancels.
    fn wait_for(&self, name: &str, bounds: Bounds<'_>) -> Result<Woken, LockError> {
        let path = self.child_path(name);
        let watch = match self.client.exists_w(&path) {
            // Already gone between the listing and the watch: list again at once.
            Ok((None, _)) => return Ok(Woken::Retry),
            Ok((Some(_), w)) => w,
            Err(e) if is_transient(&e) => {
                self.wait_connected(bounds)?;
                return Ok(Woken::Retry);
            }
            Err(e) => return Err(e.into()),
        };
        self.wait_on(&watch, bounds)
    }

    fn wait_on(&self, watch: &crate::Watch, bounds: Bounds<'_>) -> Result<Woken, LockError> {
        let cancel = bounds.cancel_rx();
        let timeout = bounds.timeout_rx();
        select! {
            recv(watch.receiver()) -> msg => match msg {
                Ok(r) => match watch.event_from(r) {
                    Ok(ev) if ev.kind == EventType::NodeDeleted => Ok(Woken::Deleted),
                    Ok(_) => Ok(Woken::Changed),
                    Err(e) if is_transient(&e) => {
                        self.wait_connected(bounds)?;
                        Ok(Woken::Retry)
                    }
                    Err(e) => Err(e.into()),
                },
                Err(_) => Err(LockError::Client(Error::Closed)),
            },
            recv(cancel) -> _ => Err(LockError::Cancelled),
            recv(timeout) -> _ => Err(LockError::Timeout),
        }
    }

    /// Blocks until the session is connected again, within `bounds`.
    fn wait_connected(&self, bounds: Bounds<'_>) -> Result<(), LockError> {
        let (states, _token) = self.client.subscribe_scoped();
        let cancel = bounds.cancel_rx();
        let timeout = bounds.timeout_rx();
        loop {
            match self.client.state() {
                SessionState::Connected => return Ok(()),
                SessionState::Expired => return Err(LockError::SessionExpired),
                SessionState::Closed => return Err(LockError::Client(Error::Closed)),
                SessionState::AuthFailed => return Err(LockError::Client(Error::AuthFailed)),
                _ => {}
            }
            select! {
                recv(states) -> s => if s.is_err() { return Err(LockError::Client(Error::Closed)) },
                recv(cancel) -> _ => return Err(LockError::Cancelled),
                recv(timeout) -> _ => return Err(LockError::Timeout),
            }
        }
    }

    fn session_alive(&self) -> Result<(), LockError> {
        match self.client.state() {
            SessionState::Expired => Err(LockError::SessionExpired),
            SessionState::Closed => Err(LockError::Client(Error::Closed)),
            SessionState::AuthFailed => Err(LockError::Client(Error::AuthFailed)),
            _ => Ok(()),
        }
    }

    /// Removes our node after a failed acquire: at once if we can, else in
    /// the background for as long as the session lives.
    fn abandon(&self, attempt: &str, node: Option<String>, maybe_created: bool) {
        let target = match node {
            Some(path) => Cleanup::Node(path),
            None if maybe_created => Cleanup::Attempt {
                parent: self.parent.clone(),
                attempt: attempt.to_owned(),
            },
            None => return,
        };
        if let Err(e) = target.run_once(&self.client) {
            if e.is_session_ended() {
                return;
            }
            log::info!("removing our lock node later: {e}");
            target.spawn(self.client.clone());
        }
    }
}

/// A lock node to remove: by path, or by the attempt id in its protected name.
#[derive(Debug, Clone)]
pub(crate) enum Cleanup {
    Node(String),
    Attempt { parent: String, attempt: String },
}

impl Cleanup {
    pub(crate) fn run_once(&self, client: &Client) -> Result<(), Error> {
        match self {
            Cleanup::Node(path) => match client.delete(path, None) {
                Ok(()) => Ok(()),
                Err(e) if e.is_no_node() => Ok(()),
                Err(e) => Err(e),
            },
            Cleanup::Attempt { parent, attempt } => {
                let children = match client.get_children(parent) {
                    Ok(c) => c,
                    Err(e) if e.is_no_node() => return Ok(()),
                    Err(e) => return Err(e),
                };
                for name in children.iter().filter(|n| protected_id(n) == Some(attempt)) {
                    let path = if parent == "/" {
                        format!("/{name}")
                    } else {
                        format!("{parent}/{name}")
                    };
                    Cleanup::Node(path).run_once(client)?;
                }
                Ok(())
            }
        }
    }

    /// Retries in a background thread until done or the session ends.
    pub(crate) fn spawn(self, client: Client) {
        let spawned = std::thread::Builder::new()
            .name("zklock-cleanup".into())
            .spawn(move || {
                let (states, _token) = client.subscribe_scoped();
                loop {
                    match client.state() {
                        s if s.is_terminal() => return,
                        SessionState::Connected => match self.run_once(&client) {
                            Ok(()) => return,
                            Err(e) if e.is_session_ended() => return,
                            Err(e) => log::debug!("cleanup retry: {e}"),
                        },
                        _ => {}
                    }
                    // Wait for the next state change; bounded so a quiet
                    // but healthy session still gets another try.
                    let _ = states.recv_timeout(std::time::Duration::from_secs(1));
                }
            });
        if let Err(e) = spawned {
            log::error!("cannot start the cleanup thread: {e}");
        }
    }
}
