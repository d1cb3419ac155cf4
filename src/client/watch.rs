//! Watches as the caller sees them: one-shot and persistent.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};
use jute::EventType;

use super::WeakClient;
use crate::driver::Command;
use crate::error::{Error, Result};
use crate::path::Chroot;
use crate::session::{RequestError, WatchedEvent};

/// A watch event, with the path as the caller named it (chroot removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchEvent {
    /// What happened; `EventType::None` from a persistent watch after a
    /// reconnect means "re-read what you follow".
    pub kind: EventType,
    /// The node concerned, as the caller names it.
    pub path: String,
}

/// A one-shot watch: receives exactly one event, or an error saying why it
/// never will (the session ended, or the connection dropped before the
/// watch was set). Once that one outcome is taken, the watch reports
/// [`Error::Closed`].
#[derive(Debug)]
pub struct Watch {
    pub(super) rx: Receiver<std::result::Result<WatchedEvent, RequestError>>,
    pub(super) chroot: Chroot,
    // While this lives, the I/O thread keeps the watch armed.
    pub(super) wanted: Option<Arc<()>>,
}

impl Watch {
    fn convert(&self, r: std::result::Result<WatchedEvent, RequestError>) -> Result<WatchEvent> {
        r.map(|e| WatchEvent {
            kind: e.kind,
            path: self.chroot.strip(&e.path),
        })
        .map_err(Error::from)
    }

    /// Blocks until the watch fires or can no longer fire.
    pub fn recv(&self) -> Result<WatchEvent> {
        match self.rx.recv() {
            Ok(r) => self.convert(r),
            Err(_) => Err(Error::Closed),
        }
    }

    /// Like [`Watch::recv`], giving up with [`Error::Timeout`] after `timeout`.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<WatchEvent> {
        match self.rx.recv_timeout(timeout) {
            Ok(r) => self.convert(r),
            Err(RecvTimeoutError::Timeout) => Err(Error::Timeout),
            Err(RecvTimeoutError::Disconnected) => Err(Error::Closed),
        }
    }

    /// The event if it already came; `Ok(None)` if not yet.
    pub fn try_recv(&self) -> Result<Option<WatchEvent>> {
        match self.rx.try_recv() {
            Ok(r) => self.convert(r).map(Some),
            Err(TryRecvError::Empty) => Ok(None),
            Err(TryRecvError::Disconnected) => Err(Error::Closed),
        }
    }

    /// The underlying channel, for `crossbeam_channel::select!` with other
    /// sources (cancellation, session state). Convert what it yields with
    /// [`Watch::event_from`].
    pub fn receiver(&self) -> &Receiver<std::result::Result<WatchedEvent, RequestError>> {
        &self.rx
    }

    /// Converts a value taken from [`Watch::receiver`].
    pub fn event_from(
        &self,
        r: std::result::Result<WatchedEvent, RequestError>,
    ) -> Result<WatchEvent> {
        self.convert(r)
    }
}

/// A persistent watch from [`Client::add_watch`](super::Client::add_watch): many events, until dropped.
#[derive(Debug)]
pub struct PersistentWatch {
    pub(super) watch: Watch,
    pub(super) client: WeakClient,
    pub(super) server_path: String,
}

impl PersistentWatch {
    /// Blocks until the next event, or an error once the watch can fire no more.
    pub fn recv(&self) -> Result<WatchEvent> {
        self.watch.recv()
    }

    /// Like [`PersistentWatch::recv`], giving up with [`Error::Timeout`] after `timeout`.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<WatchEvent> {
        self.watch.recv_timeout(timeout)
    }

    /// The next event if one is waiting.
    pub fn try_recv(&self) -> Result<Option<WatchEvent>> {
        self.watch.try_recv()
    }

    /// The underlying channel, for `select!`; convert with [`Watch::event_from`].
    pub fn as_watch(&self) -> &Watch {
        &self.watch
    }
}

impl Drop for PersistentWatch {
    fn drop(&mut self) {
        // Give up our token first, so the I/O thread sees us gone.
        self.watch.wanted = None;
        if let Some(client) = self.client.upgrade() {
            let (reply, _) = crossbeam_channel::bounded(1);
            client.inner.driver.send(Command::ReleasePersistent {
                path: std::mem::take(&mut self.server_path),
                reply,
            });
        }
    }
}
