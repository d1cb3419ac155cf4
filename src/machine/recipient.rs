//! Who receives what the session core answers: a blocked caller's channel,
//! or a watcher.

use std::sync::{Arc, Weak};

use jute::Response;

use crate::oneshot;
use crate::session::{RequestError, WatchEvent};

/// Where a caller waits for its reply.
pub(crate) type ReplySender = oneshot::Sender<Result<Response, RequestError>>;
/// What a watch hands on: an event, or why no (further) event will come.
pub(crate) type WatchOutcome = Result<WatchEvent, RequestError>;

/// Where a watcher's events go (for a one-shot watch: its one event, or the
/// reason it will never come), and whether anyone still waits there. The
/// layer above says how an outcome is delivered (its own channel, in its
/// own types); the I/O thread only calls it.
#[derive(Clone)]
pub(crate) struct WatchSender {
    deliver: Arc<dyn Fn(WatchOutcome) + Send + Sync>,
    wanted: Weak<()>,
}

impl WatchSender {
    /// A watcher that hands each outcome to `deliver`, and is wanted while
    /// the returned token lives. Dropping the last clone of the sender drops
    /// `deliver` (and so the channel it sends on).
    pub(crate) fn new(
        deliver: impl Fn(WatchOutcome) + Send + Sync + 'static,
    ) -> (WatchSender, Arc<()>) {
        let token = Arc::new(());
        let sender = WatchSender {
            deliver: Arc::new(deliver),
            wanted: Arc::downgrade(&token),
        };
        (sender, token)
    }

    /// Hands on an event, or why no (further) event will come.
    pub(crate) fn deliver(&self, outcome: WatchOutcome) {
        (self.deliver)(outcome)
    }

    pub(crate) fn is_wanted(&self) -> bool {
        self.wanted.strong_count() > 0
    }
}
