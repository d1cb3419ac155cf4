//! Watches as the caller sees them: one-shot and persistent.
//!
//! The I/O thread hands each watch's outcomes to a channel of public types
//! that the client made for it: the event with the caller's path (chroot
//! removed) or the client's [`Error`] saying why no (further) event will
//! come. What [`Watch::receiver`] yields is what [`Watch::recv`] returns.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError, TrySendError};
use jute::EventType;

use super::WeakClient;
use crate::error::{Error, Result};
use crate::machine::recipient::WatchSender;
use crate::machine::Command;
use crate::oneshot;
use crate::path::Chroot;
use crate::session::WatchEvent;

/// A one-shot watch: receives exactly one event, or an error saying why it
/// never will: the session ended first ([`Error::SessionExpired`],
/// [`Error::Closed`], [`Error::AuthFailed`]). Once that one outcome is
/// taken, the watch reports [`Error::Closed`]. (A watch the server did not
/// set is never handed out: the call that would have set it fails.)
///
/// A watch survives reconnects: the client sets it again on the new
/// connection, for as long as this value lives.
#[derive(Debug)]
#[must_use = "a watch's event is lost once it is dropped"]
pub struct Watch {
    rx: Receiver<Result<WatchEvent>>,
    // While this lives, the I/O thread keeps the watch armed.
    wanted: Option<Arc<()>>,
}

/// How many unread events a persistent watch keeps by default (see
/// [`ClientBuilder::persistent_watch_capacity`](super::ClientBuilder::persistent_watch_capacity)).
pub const DEFAULT_PERSISTENT_WATCH_CAPACITY: usize = 4096;

impl Watch {
    /// A one-shot watch and the sender the I/O thread delivers to: room
    /// for its one outcome.
    pub(super) fn channel(chroot: Chroot) -> (WatchSender, Watch) {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let (sender, wanted) = WatchSender::new(move |outcome| {
            // Full or nobody listening: a second outcome, or the watch was
            // dropped; neither is wanted.
            let _ = tx.try_send(caller_outcome(&chroot, outcome));
        });
        let watch = Watch {
            rx,
            wanted: Some(wanted),
        };
        (sender, watch)
    }

    /// A persistent watch on `path` (as the caller names it) that keeps at
    /// most `capacity` unread outcomes. When an outcome finds the queue
    /// full, the queued events are discarded and replaced by one
    /// `EventType::None` event for `path` ("re-read what you follow", as
    /// after a reconnect), and `dropped` counts every event discarded so.
    /// The I/O thread never blocks on a reader and the memory stays bounded
    /// however fast the server sends.
    pub(super) fn persistent_channel(
        chroot: Chroot,
        path: String,
        capacity: usize,
        dropped: Arc<AtomicU64>,
    ) -> (WatchSender, Watch) {
        let capacity = capacity.max(2);
        let (tx, rx) = crossbeam_channel::bounded(capacity);
        let drain = rx.clone();
        let (sender, wanted) = WatchSender::new(move |outcome| {
            let outcome = caller_outcome(&chroot, outcome);
            let Err(TrySendError::Full(outcome)) = tx.try_send(outcome) else {
                // Sent, or nobody listening (the watch was dropped).
                return;
            };
            let mut discarded = 0u64;
            while let Ok(old) = drain.try_recv() {
                discarded += u64::from(old.is_ok_and(|e| e.kind != EventType::None));
            }
            let resync = Ok(WatchEvent {
                kind: EventType::None,
                path: path.clone(),
            });
            let last = match outcome {
                // The resync covers this event too.
                Ok(event) => {
                    discarded += u64::from(event.kind != EventType::None);
                    None
                }
                // An end is never discarded.
                Err(e) => Some(Err(e)),
            };
            dropped.fetch_add(discarded, Ordering::Relaxed);
            log::warn!(
                "persistent watch on {path}: {discarded} unread events discarded (queue of \
                 {capacity} full); the reader gets one EventType::None: re-read"
            );
            let _ = tx.try_send(resync);
            if let Some(last) = last {
                let _ = tx.try_send(last);
            }
        });
        let watch = Watch {
            rx,
            wanted: Some(wanted),
        };
        (sender, watch)
    }

    /// Blocks until the watch fires or can no longer fire.
    ///
    /// # Errors
    /// Why the watch will never fire (see [`Watch`]); [`Error::Closed`] once
    /// its one outcome was taken.
    pub fn recv(&self) -> Result<WatchEvent> {
        self.rx.recv().unwrap_or(Err(Error::Closed))
    }

    /// Like [`Watch::recv`], giving up after `timeout`.
    ///
    /// # Errors
    /// [`Error::Timeout`] if nothing came in time; else as [`Watch::recv`].
    pub fn recv_timeout(&self, timeout: Duration) -> Result<WatchEvent> {
        match self.rx.recv_timeout(timeout) {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => Err(Error::Timeout),
            Err(RecvTimeoutError::Disconnected) => Err(Error::Closed),
        }
    }

    /// The event if it already came; `Ok(None)` if not yet.
    ///
    /// # Errors
    /// As [`Watch::recv`].
    pub fn try_recv(&self) -> Result<Option<WatchEvent>> {
        match self.rx.try_recv() {
            Ok(r) => r.map(Some),
            Err(TryRecvError::Empty) => Ok(None),
            Err(TryRecvError::Disconnected) => Err(Error::Closed),
        }
    }

    /// The channel the outcome arrives on, for `crossbeam_channel::select!`
    /// with other sources (cancellation, session state, other watches).
    /// It yields exactly what [`Watch::recv`] returns: `Ok(event)`, or the
    /// error that ends the watch. It is disconnected once that one value is
    /// taken (a `select!` then sees `Err(RecvError)` at once: stop selecting
    /// on it).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use crossbeam_channel::{after, select};
    /// use zklock::Client;
    ///
    /// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
    /// let (_, _, config) = client.get_data_and_watch("/config")?;
    /// let (_, jobs) = client.exists_and_watch("/jobs")?;
    /// select! {
    ///     recv(config.receiver()) -> r => match r {
    ///         Ok(Ok(event)) => println!("/config: {:?}", event.kind),
    ///         Ok(Err(e)) => eprintln!("the watch on /config ended: {e}"),
    ///         Err(_) => {} // its one outcome was taken already
    ///     },
    ///     recv(jobs.receiver()) -> r => println!("/jobs: {r:?}"),
    ///     recv(after(Duration::from_secs(60))) -> _ => println!("nothing changed"),
    /// }
    /// # Ok::<(), zklock::Error>(())
    /// ```
    pub fn receiver(&self) -> &Receiver<Result<WatchEvent>> {
        &self.rx
    }
}

/// The caller's view of what the I/O thread delivers: chroot removed,
/// errors in the client's terms.
fn caller_outcome(
    chroot: &Chroot,
    outcome: std::result::Result<WatchEvent, crate::session::RequestError>,
) -> Result<WatchEvent> {
    match outcome {
        Ok(event) => Ok(WatchEvent {
            path: chroot.strip(&event.path),
            ..event
        }),
        Err(e) => Err(Error::from(e)),
    }
}

/// A persistent watch from [`Client::add_watch`](super::Client::add_watch):
/// many events, until dropped (dropping it removes the watch from the
/// server) or until the session ends, which it reports as an error
/// ([`Error::SessionExpired`], [`Error::Closed`], [`Error::AuthFailed`]).
///
/// # When the reader falls behind
/// At most [`ClientBuilder::persistent_watch_capacity`](super::ClientBuilder::persistent_watch_capacity)
/// events wait unread (4096 by default). When one more comes, the waiting
/// events are discarded and replaced by a single event of kind
/// `EventType::None` for the watch's path: the same "re-read what you
/// follow" a reconnect gives. [`PersistentWatch::dropped_events`] counts
/// what was discarded, and a warning is logged. The error that ends the
/// watch is never discarded.
#[derive(Debug)]
#[must_use = "the watch is removed as soon as it is dropped"]
pub struct PersistentWatch {
    pub(super) watch: Watch,
    pub(super) client: WeakClient,
    pub(super) server_path: String,
    pub(super) dropped: Arc<AtomicU64>,
}

impl PersistentWatch {
    /// How many events were discarded, unread, because the queue was full
    /// (see [`PersistentWatch`]); each discard left an `EventType::None`
    /// event in their place.
    pub fn dropped_events(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Blocks until the next event.
    ///
    /// # Errors
    /// Why the watch can fire no more (the session ended), then
    /// [`Error::Closed`].
    pub fn recv(&self) -> Result<WatchEvent> {
        self.watch.recv()
    }

    /// Like [`PersistentWatch::recv`], giving up after `timeout`.
    ///
    /// # Errors
    /// [`Error::Timeout`] if nothing came in time; else as
    /// [`PersistentWatch::recv`].
    pub fn recv_timeout(&self, timeout: Duration) -> Result<WatchEvent> {
        self.watch.recv_timeout(timeout)
    }

    /// The next event if one is waiting.
    ///
    /// # Errors
    /// As [`PersistentWatch::recv`].
    pub fn try_recv(&self) -> Result<Option<WatchEvent>> {
        self.watch.try_recv()
    }

    /// The channel the events arrive on, for `crossbeam_channel::select!`:
    /// it yields what [`PersistentWatch::recv`] returns, and is
    /// disconnected after the error that ends the watch.
    pub fn receiver(&self) -> &Receiver<Result<WatchEvent>> {
        self.watch.receiver()
    }
}

impl Drop for PersistentWatch {
    fn drop(&mut self) {
        // Give up our token first, so the I/O thread sees us gone.
        self.watch.wanted = None;
        if let Some(client) = self.client.upgrade() {
            let (reply, _) = oneshot::channel();
            client.inner.driver.send(Command::ReleasePersistent {
                path: std::mem::take(&mut self.server_path),
                reply,
            });
        }
    }
}
