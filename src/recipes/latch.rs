//! Leadership that keeps campaigning: a LeaderLatch (Curator's name) over
//! an [`Election`], reporting each gain and loss on a channel.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam_channel::{select, Receiver, Sender};

use super::cancel::CancelToken;
use super::election::Election;
use super::error::LockError;
use super::held::{LockState, LossReason};
use crate::Error;

/// What a [`LeaderLatch`] reports, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LatchEvent {
    /// We lead, with this fencing token.
    Gained {
        /// The leadership node's czxid: pass it to what the leader writes.
        fencing_token: i64,
    },
    /// The connection dropped: stop acting as the leader until `Resumed`
    /// (or `Lost`).
    Suspended,
    /// Back, and still the leader.
    Resumed,
    /// We no longer lead; the latch campaigns again.
    Lost {
        /// Why, when known.
        reason: Option<LossReason>,
    },
    /// The latch stopped for good: the session ended or campaigning failed.
    Stopped(LockError),
}

/// Campaigns, leads, and after a loss campaigns again, until dropped.
/// One thread per latch; dropping it withdraws the candidacy (and
/// leadership) without blocking.
///
/// ```no_run
/// use std::time::Duration;
/// use zklock::{Client, recipes::{Election, LatchEvent}};
///
/// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
/// let latch = Election::new(&client, "/election/scheduler", b"node-a")?.latch();
/// for event in latch.events() {
///     match event {
///         LatchEvent::Gained { fencing_token } => println!("leading ({fencing_token})"),
///         LatchEvent::Lost { .. } | LatchEvent::Suspended => println!("pausing"),
///         LatchEvent::Stopped(e) => return Err(e.into()),
///         _ => {}
///     }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
#[must_use = "dropping the latch withdraws the candidacy"]
pub struct LeaderLatch {
    events: Receiver<LatchEvent>,
    leading: Arc<AtomicBool>,
    stop: CancelToken,
}

impl LeaderLatch {
    pub(crate) fn start(election: Election) -> LeaderLatch {
        let (tx, events) = crossbeam_channel::unbounded();
        let leading = Arc::new(AtomicBool::new(false));
        let stop = CancelToken::new();
        let spawned = std::thread::Builder::new()
            .name("zklock-latch".into())
            .spawn({
                let (leading, stop, tx) = (leading.clone(), stop.clone(), tx.clone());
                move || campaign_forever(&election, &tx, &leading, &stop)
            });
        if let Err(e) = spawned {
            let _ = tx.send(LatchEvent::Stopped(LockError::Client(Error::from(e))));
        }
        LeaderLatch {
            events,
            leading,
            stop,
        }
    }

    /// Gains, losses and the rest, in order.
    pub fn events(&self) -> &Receiver<LatchEvent> {
        &self.events
    }

    /// Whether we lead now (held, and connected).
    pub fn is_leader(&self) -> bool {
        self.leading.load(Ordering::SeqCst)
    }
}

impl Drop for LeaderLatch {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn campaign_forever(
    election: &Election,
    tx: &Sender<LatchEvent>,
    leading: &AtomicBool,
    stop: &CancelToken,
) {
    loop {
        let guard = match election.campaign_with(None, Some(stop)) {
            Ok(guard) => guard,
            Err(LockError::Cancelled) => return,
            // Lost between the grant and the check of its owner: again.
            Err(LockError::Lost) => continue,
            Err(e) => {
                let _ = tx.send(LatchEvent::Stopped(e));
                return;
            }
        };
        leading.store(true, Ordering::SeqCst);
        let _ = tx.send(LatchEvent::Gained {
            fencing_token: guard.fencing_token(),
        });
        let changes = guard.state_changes();
        loop {
            select! {
                recv(changes) -> state => match state {
                    Ok(LockState::Held) => {
                        if !leading.swap(true, Ordering::SeqCst) {
                            let _ = tx.send(LatchEvent::Resumed);
                        }
                    }
                    Ok(LockState::Suspended) => {
                        leading.store(false, Ordering::SeqCst);
                        let _ = tx.send(LatchEvent::Suspended);
                    }
                    Ok(LockState::Lost) | Err(_) => break,
                },
                recv(stop.receiver()) -> _ => {
                    leading.store(false, Ordering::SeqCst);
                    return;
                }
            }
        }
        leading.store(false, Ordering::SeqCst);
        let _ = tx.send(LatchEvent::Lost {
            reason: guard.lost_reason(),
        });
        drop(guard);
        if stop.is_cancelled() {
            return;
        }
    }
}
