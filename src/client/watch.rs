//! Watches as the caller sees them: one-shot and persistent.
//!
//! The I/O thread hands each watch's outcomes to a channel of public types
//! that the client made for it: the event with the caller's path (chroot
//! removed) or the client's [`Error`] saying why no (further) event will
//! come. What [`Watch::receiver`] yields is what [`Watch::recv`] returns.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};

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

impl Watch {
    /// A watch and the sender the I/O thread delivers to. `persistent`:
    /// room for any number of events, not just one.
    pub(super) fn channel(chroot: Chroot, persistent: bool) -> (WatchSender, Watch) {
        let (tx, rx) = if persistent {
            crossbeam_channel::unbounded()
        } else {
            crossbeam_channel::bounded(1)
        };
        let (sender, wanted) = WatchSender::new(move |outcome| {
            let outcome = match outcome {
                Ok(event) => Ok(WatchEvent {
                    path: chroot.strip(&event.path),
                    ..event
                }),
                Err(e) => Err(Error::from(e)),
            };
            // Nobody listening: the watch was dropped.
            let _ = tx.send(outcome);
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

/// A persistent watch from [`Client::add_watch`](super::Client::add_watch):
/// many events, until dropped (dropping it removes the watch from the
/// server) or until the session ends, which it reports as an error
/// ([`Error::SessionExpired`], [`Error::Closed`], [`Error::AuthFailed`]).
#[derive(Debug)]
#[must_use = "the watch is removed as soon as it is dropped"]
pub struct PersistentWatch {
    pub(super) watch: Watch,
    pub(super) client: WeakClient,
    pub(super) server_path: String,
}

impl PersistentWatch {
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
