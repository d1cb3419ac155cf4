//! The guard every lock recipe hands out: proof of holding, the holder's
//! state, fencing, and release on drop without blocking.

use std::future::Future;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use jute::{ErrorCode, PathWatch, Request, Response};

use crossbeam_channel::Receiver;

use super::registry::{self, Key};
use crate::client::PendingReply;
use crate::machine::{AttemptId, Holding, LockError, LockState, LossReason};
use crate::oneshot;
use crate::{Client, Error, Op, OpResult};

/// A release under way: the core says when the node is gone.
pub(crate) struct Releasing {
    done: oneshot::Receiver<Result<(), LockError>>,
    /// The node, as the caller names it (for a refusal).
    path: String,
    /// The client's request timeout: how long [`LockGuard::unlock`] waits.
    pub(crate) timeout: Duration,
}

impl std::fmt::Debug for Releasing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Releasing")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Releasing {
    /// A release of attempt `id` of `lock_path` asked of the core directly
    /// (an acquisition that may have been granted meanwhile): its `done`.
    pub(crate) fn of_attempt(
        done: oneshot::Receiver<Result<(), LockError>>,
        lock_path: &str,
        timeout: Duration,
    ) -> Releasing {
        Releasing {
            done,
            path: lock_path.to_owned(),
            timeout,
        }
    }

    /// For a task: ready once the node is gone (or the server refused to
    /// delete it); else the task is woken when the core says so.
    pub(crate) fn poll(&self, cx: &mut Context<'_>) -> Poll<Result<(), LockError>> {
        self.done.poll_recv(cx).map(|answer| match answer {
            Ok(result) => self.named(result),
            // The core ended, and the session with it.
            Err(_) => Ok(()),
        })
    }

    /// A refusal names our node as the caller does.
    fn named(&self, result: Result<(), LockError>) -> Result<(), LockError> {
        match result {
            Err(LockError::ReleaseRefused { code, .. }) => Err(LockError::ReleaseRefused {
                path: self.path.clone(),
                code,
            }),
            other => other,
        }
    }

    /// Waits until the node is gone, `deadline` at the latest.
    ///
    /// # Errors
    /// As [`LockGuard::unlock`].
    pub(crate) fn wait(&self, deadline: Instant) -> Result<(), LockError> {
        match self.done.recv_deadline(deadline) {
            Ok(result) => self.named(result),
            // Disconnected: the core ended, and the session with it.
            Err(RecvTimeoutError::Disconnected) => Ok(()),
            Err(RecvTimeoutError::Timeout) => Err(LockError::Client(Error::Timeout)),
        }
    }

    /// Whether the core has answered (the node is gone, or will stay).
    /// The answer is dropped: for releases whose outcome nobody reports.
    pub(crate) fn settled(&self) -> bool {
        !matches!(
            self.done.try_recv(),
            Err(std::sync::mpsc::TryRecvError::Empty)
        )
    }
}

/// The error for a confirming read not answered by `now`: the caller's
/// deadline passed ([`LockError::Timeout`]), or else the client's request
/// timeout.
pub(crate) fn unanswered(now: Instant, deadline: Option<Instant>) -> LockError {
    if deadline.is_some_and(|d| now >= d) {
        LockError::Timeout
    } else {
        LockError::Client(Error::Timeout)
    }
}

/// Proof that a lock (or read lock, lease, or leadership) is held; releases
/// on drop, without blocking (the node is deleted by the I/O thread, and
/// again after reconnects, for as long as the session lives).
///
/// It can still be lost while the guard exists (session expiry, a deleted
/// node): check [`LockGuard::state`] or listen to
/// [`LockGuard::state_changes`], and use [`LockGuard::fencing_token`] or
/// [`LockGuard::fenced`] where a stale holder must not write.
#[derive(Debug)]
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct LockGuard {
    /// Shared by re-entrant guards: the last one to go releases it.
    holding: Arc<Holding>,
    client: Client,
}

impl LockGuard {
    /// The guard of a holding the core handed out, on `client`'s paths.
    pub(crate) fn new(holding: Holding, client: Client) -> LockGuard {
        let path = client.to_client_path(holding.server_path());
        LockGuard {
            holding: Arc::new(holding.named(path)),
            client,
        }
    }

    /// Another guard on `holding`, which `thread` took before (re-entry).
    pub(crate) fn share(holding: Arc<Holding>, client: Client) -> LockGuard {
        LockGuard { holding, client }
    }

    /// Records that `thread` took this guard through lock object `object`,
    /// for re-entry and deadlock checks.
    pub(crate) fn record(&self, key: Key, thread: ThreadId, object: u64) {
        registry::insert(key, thread, object, &self.holding);
    }

    /// Sends a read of our node and returns at once; hand its reply to
    /// [`LockGuard::confirmed`].
    pub(crate) fn start_confirm(&self) -> Result<PendingReply, LockError> {
        Ok(self.client.submit(self.confirm_request())?)
    }

    fn confirm_request(&self) -> Request {
        let path = self.holding.server_path().to_owned();
        Request::Exists(PathWatch { path, watch: false })
    }

    /// What the reply to the confirming read says: our node still there
    /// (true), or gone (false, and the holding is Lost from now on).
    pub(crate) fn confirmed(&self, reply: crate::Result<Response>) -> Result<bool, LockError> {
        let there = match reply {
            Ok(Response::Stat(stat)) => stat.ephemeral_owner == self.owner_session(),
            Err(Error::Server {
                code: ErrorCode::NoNode,
                ..
            }) => false,
            Ok(_) => {
                return Err(LockError::Client(Error::Protocol(
                    "exists answered otherwise".into(),
                )))
            }
            Err(e) => return Err(e.into()),
        };
        if !there {
            self.holding.state().lose(LossReason::NodeDeleted);
        }
        // Lost meanwhile (the session's time ran out while the read was
        // away): not ours to share any more.
        Ok(there && self.state() != LockState::Lost)
    }

    /// Our lock node's path.
    pub fn node_path(&self) -> &str {
        self.holding.client_path()
    }

    /// The lock node's creation zxid: strictly increasing across holders of
    /// every lock in the ensemble. Pass it to the resources you protect and
    /// let them refuse a token lower than one they have seen.
    pub fn fencing_token(&self) -> i64 {
        self.holding.stat().czxid
    }

    /// Whether a holder before this one ended uncleanly (its session ended
    /// without a release) and this grant waited out the
    /// [lock-delay](super::MutexOptions::lock_delay) first. Work the last
    /// holder left half done may need repair. Always `false` without
    /// lock-delay.
    pub fn follows_unclean_end(&self) -> bool {
        self.holding.follows_unclean_end()
    }

    /// The session that owns our node.
    pub fn owner_session(&self) -> i64 {
        self.holding.stat().ephemeral_owner
    }

    /// What the holder can rely on now (see [`LockState`]). Reads memory
    /// only: the I/O thread keeps it current.
    pub fn state(&self) -> LockState {
        self.holding.state().current()
    }

    /// Why the lock was lost, once [`LockGuard::state`] is `Lost`.
    pub fn lost_reason(&self) -> Option<LossReason> {
        self.holding.state().reason()
    }

    /// Calls `f` on the core's thread with each later state change.
    pub(crate) fn on_state_change(&self, f: crate::machine::held::StateCallback) {
        self.holding.state().on_change(f);
    }

    /// The latest instant up to which this holder can be sure that no one
    /// else holds the lock: the server cannot have expired our session
    /// before it (counted from the last answer the leader itself gave, see
    /// docs/PARTITION.md). Check it before a side effect outside ZooKeeper
    /// and stop if it is near; pass [`LockGuard::fencing_token`] along too,
    /// since a process can pause after the check. `None` once Lost (or with
    /// no proof of life yet). With a [max hold](super::MutexOptions::max_hold)
    /// it is never later than the max hold's end, when the node goes. A
    /// node deleted by a third party is not covered: [`LockGuard::state`]
    /// reports that.
    pub fn valid_until(&self) -> Option<Instant> {
        if self.state() == LockState::Lost {
            return None;
        }
        let session = self.client.valid_until()?;
        Some(match self.holding.max_hold_end() {
            Some(end) => session.min(end),
            None => session,
        })
    }

    /// Whether someone asked this holder to let go (a
    /// [revocable](super::MutexOptions::revocable) lock). Letting go stays
    /// the holder's decision.
    pub fn revocation_requested(&self) -> bool {
        self.holding.state().revocation_requested()
    }

    /// A channel that yields once per revocation request (at once if one
    /// came already), for `select!` beside the holder's work.
    pub fn revocation_requests(&self) -> Receiver<()> {
        self.holding.state().revocations()
    }

    /// A channel that yields the current state, then every change. It keeps
    /// at most [`STATE_CHANNEL_CAPACITY`](crate::recipes::STATE_CHANNEL_CAPACITY)
    /// unread changes: a reader that far behind misses later ones until it
    /// reads ([`LockGuard::state`] is always current).
    pub fn state_changes(&self) -> Receiver<LockState> {
        self.holding.state().changes()
    }

    /// Applies `ops` atomically, only while our lock node exists: a write
    /// that a paused or partitioned former holder cannot make.
    ///
    /// # Errors
    /// [`LockError::Lost`] if our node is gone (the guard then reports
    /// `Lost`); the client's error if the multi could not be applied.
    pub fn fenced(&self, ops: &[Op]) -> Result<Vec<OpResult>, LockError> {
        let mut all = Vec::with_capacity(ops.len() + 1);
        all.push(Op::check(self.node_path(), None));
        all.extend_from_slice(ops);
        match self.client.multi(&all) {
            Ok(mut results) => {
                results.remove(0);
                Ok(results)
            }
            Err(Error::MultiFailed { index: 0, .. }) => {
                self.holding.state().lose(LossReason::NodeDeleted);
                Err(LockError::Lost)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Releases now and waits (at most the client's request timeout) until
    /// the node is gone. Re-entrant guards release when the last one goes.
    ///
    /// # Errors
    /// [`Error::Timeout`] (as [`LockError::Client`]) if the server did not
    /// confirm in time; the delete goes on in the background while the
    /// session lives.
    pub fn unlock(self) -> Result<(), LockError> {
        let Some(releasing) = self.start_release() else {
            return Ok(());
        };
        releasing.wait(crate::deadline::after(Instant::now(), releasing.timeout))
    }

    /// [`LockGuard::unlock`] for async code: resolves once the node is gone
    /// (or the server refused to delete it), woken by the I/O thread; no
    /// runtime is needed. It has no timer of its own: while the connection
    /// is down the delete waits for the next one, for as long as the
    /// session lives, so bound it with your runtime's timeout. The release
    /// is asked for at once, and dropping the future does not stop it.
    ///
    /// # Errors
    /// [`LockError::ReleaseRefused`] if the server refused the delete.
    pub fn unlock_async(self) -> impl Future<Output = Result<(), LockError>> + Send {
        let releasing = self.start_release();
        std::future::poll_fn(move |cx| match &releasing {
            Some(r) => r.poll(cx),
            None => Poll::Ready(Ok(())),
        })
    }

    /// The next change of [`LockGuard::state`], for async code: resolves
    /// with the state it changed to, woken by the I/O thread (no runtime
    /// needed). At once with `Lost` if the lock is lost already: nothing
    /// follows it.
    pub fn next_state_change(&self) -> impl Future<Output = LockState> + Send + '_ {
        let state = self.holding.state();
        let seen = state.change_count();
        std::future::poll_fn(move |cx| state.poll_change(seen, cx))
    }

    /// Resolves once someone has asked this holder to let go (at once if
    /// someone has), for async code beside the holder's work (a
    /// [revocable](super::MutexOptions::revocable) lock).
    pub fn revocation_request(&self) -> impl Future<Output = ()> + Send + '_ {
        let state = self.holding.state();
        std::future::poll_fn(move |cx| state.poll_revocation(cx))
    }

    /// Asks for the release and returns at once, with what tells when the
    /// node is gone; `None` if there is nothing to wait for (re-entrant
    /// guards still share the acquisition, or it was released already).
    pub(crate) fn start_release(self) -> Option<Releasing> {
        let holding = Arc::try_unwrap(self.holding).ok()?;
        let (done, rx) = oneshot::channel();
        if !holding.release(Some(done)) {
            return None;
        }
        Some(Releasing {
            done: rx,
            path: holding.client_path().to_owned(),
            timeout: self.client.request_timeout(),
        })
    }

    /// Gives up releasing: our node is not deleted, now or later, by this
    /// guard or by the I/O thread (but at the end of a
    /// [max hold](super::MutexOptions::max_hold), if the lock has one). It
    /// stays until our session ends (closed, or expired) or someone deletes
    /// it; until then the lock stays taken,
    /// by us as far as anyone else can tell, and a later acquisition of the
    /// same lock by this session queues behind it.
    ///
    /// For a holder that knows releasing is pointless or must not happen:
    /// the lock is [`Lost`](LockState::Lost) already (no request is sent to
    /// a server that may be unreachable), or the process is about to exit
    /// and its session's end removes the node anyway. A guard told `Lost`
    /// by zklock's own judgement ([`LossReason::NoContact`],
    /// [`LossReason::SequenceExhausted`]) may still have its node, if the
    /// session lives: abandoned, it stays until the session ends; dropped
    /// or unlocked, it is deleted. Re-entrant guards share
    /// one acquisition: abandoning one abandons it for all of them, and none
    /// deletes the node when it drops. [`LockGuard::state_changes`] channels
    /// taken before go on reporting.
    pub fn abandon(self) {
        self.holding.abandon();
    }

    /// Hands the acquisition over to a requeue, which releases it in the
    /// same write: the grant will not release it. `None` (the guard
    /// dropped as usual) while re-entrant guards share it.
    pub(crate) fn into_requeue(self) -> Option<AttemptId> {
        let holding = Arc::try_unwrap(self.holding).ok()?;
        holding.abandon();
        Some(holding.id())
    }
}
