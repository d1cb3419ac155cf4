//! Who hears the session's state changes: a channel of states, or one of
//! states with the id of the session each happened to.

use crossbeam_channel::{Sender, TrySendError};

use crate::session::{SessionChange, SessionState};

/// A subscriber's channel.
pub(crate) enum Subscriber {
    States(Sender<SessionState>),
    Changes(Sender<SessionChange>),
}

impl Subscriber {
    /// Tells the subscriber; `false` once its receiver is gone. A full
    /// channel misses the change: its reader is that far behind.
    pub(crate) fn tell(&self, change: SessionChange) -> bool {
        let gone = match self {
            Subscriber::States(tx) => {
                matches!(
                    tx.try_send(change.state),
                    Err(TrySendError::Disconnected(_))
                )
            }
            Subscriber::Changes(tx) => {
                matches!(tx.try_send(change), Err(TrySendError::Disconnected(_)))
            }
        };
        !gone
    }
}
