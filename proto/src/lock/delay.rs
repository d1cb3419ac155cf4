//! Lock-delay as a sub-machine of an attempt: where its grant stands in the
//! reading of the tenure marks, why each of its requests was sent, and what
//! it is told from outside the grant (the time, the server's clock in any
//! reply, the release). The grant's steps are in `lock::tenure`.

use std::time::{Duration, Instant};

use jute::{ErrorCode, MultiOp, PathVersion, Request};

use super::{AttemptId, LockMachine};
use crate::lock::queue::tenure_path;

/// Why a lock-delay request was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DelayPurpose {
    /// getChildren of the lock path's tenure marks at the grant; sent just
    /// before [`DelayPurpose::List`].
    Marks,
    /// getChildren of the lock path at the grant: which marks have no node
    /// any more (holders that ended uncleanly).
    List,
    /// getData of a mark without a node: when its end was recorded.
    Read,
    /// setData of a mark without a node at version 0: records its end,
    /// stamped with the server's time.
    Record,
    /// createContainer of the lock path's tenure marks' parent.
    Dir,
    /// multi(check our node, create our tenure mark): the grant.
    Mark,
    /// delete of a tenure mark left by a holder that ended uncleanly, once
    /// the delay has been served.
    Sweep,
}

impl DelayPurpose {
    /// The marks' listing rides ahead of the main line; a sweep is fire
    /// and forget.
    pub(crate) fn is_main_line(self) -> bool {
        !matches!(self, DelayPurpose::Marks | DelayPurpose::Sweep)
    }
}

/// One attempt's lock-delay, kept from its first reply (the server's clock
/// is read from then on) to its release.
#[derive(Debug, Default)]
pub(crate) struct Delay {
    /// The best sample of the server's clock seen (see [`ServerClock`]).
    pub clock: Option<ServerClock>,
    /// A holder before us ended uncleanly: told with the grant.
    pub unclean: bool,
    pub stage: Stage,
}

/// Where the grant stands. Each stage owns what it waits for; what a stage
/// interrupted by a lost connection leaves for the next round of listings
/// is handed on by [`Stage::leftover`].
#[derive(Debug, Default)]
pub(crate) enum Stage {
    /// Not at the grant (yet, or since a round that sent nothing).
    #[default]
    Idle,
    /// The marks and the queue are listed (the marks' reply comes first).
    Listing {
        /// The marks' listing in flight.
        marks_token: Option<u64>,
        /// Its answer, once in.
        marks: Option<Vec<String>>,
        /// With the marks' refusal, if they were refused.
        left: Leftover,
    },
    /// Marks without a node read (or recorded) one by one, last first.
    Reading {
        to_read: Vec<String>,
        /// Marks left by unclean ends, with the server time their end was
        /// recorded at (ms); deleted once the delay is served.
        stale: Vec<(String, i64)>,
        left: Leftover,
    },
    /// The delay is being served: the mark is made at `until`, the local
    /// instant by which the server's clock has passed the end of it.
    Serving {
        until: Instant,
        stale: Vec<(String, i64)>,
    },
    /// Our mark (or the marks' parent before it) is being made.
    Marking { stale: Vec<(String, i64)> },
    /// Our mark is on the server, made for this node of ours: released
    /// together with it.
    Marked { name: String },
}

/// What a round of the grant carries into the next when a lost connection
/// cuts it short.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Leftover {
    /// A delay timer still registered from a round cut short while serving:
    /// removed when the next decision is made (or fired, to no effect).
    pub timer: Option<Instant>,
    /// When we saw a mark without a node that the marks' ACL kept us from
    /// reading or recording: its delay counts from then.
    pub unrecorded: Option<Instant>,
    /// The server refused to list the marks (an ACL): the grant fails,
    /// once the queue's listing is in.
    pub refused: Option<ErrorCode>,
}

impl Stage {
    /// What a new round of listings inherits from this stage.
    pub(crate) fn leftover(&self) -> Leftover {
        match self {
            Stage::Listing { left, .. } | Stage::Reading { left, .. } => *left,
            Stage::Serving { until, .. } => Leftover {
                timer: Some(*until),
                ..Leftover::default()
            },
            Stage::Idle | Stage::Marking { .. } | Stage::Marked { .. } => Leftover::default(),
        }
    }

    /// The node our mark was made for, if made.
    pub(crate) fn marked(&self) -> Option<&str> {
        match self {
            Stage::Marked { name } => Some(name),
            _ => None,
        }
    }
}

/// One reading of the server's clock: a time the server stamped on a node
/// (ms since the epoch, the leader's wall clock) and a local instant at
/// which that time had already passed on the server (the reply carrying it
/// had come in). From it, `local + (t - server_ms)` is an instant by which
/// the server's time has reached `t`, whatever our own clock says the time
/// of day is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ServerClock {
    pub server_ms: i64,
    pub local: Instant,
}

impl ServerClock {
    /// The local instant by which the server's clock reads `t` (ms) or
    /// later.
    pub(crate) fn reaches(&self, t: i64) -> Instant {
        let ahead = u64::try_from(t.saturating_sub(self.server_ms)).unwrap_or(0);
        crate::deadline::after(self.local, Duration::from_millis(ahead))
    }

    /// The better of two readings: the one that says the server's time
    /// reaches a given time sooner.
    pub(crate) fn best(self, other: Option<ServerClock>) -> ServerClock {
        let Some(other) = other else {
            return self;
        };
        let probe = self.server_ms.max(other.server_ms);
        if other.reaches(probe) < self.reaches(probe) {
            other
        } else {
            self
        }
    }
}

impl Delay {
    /// Takes a reading of the server's clock, keeping the better one.
    pub(crate) fn read_clock(&mut self, server_ms: i64, local: Instant) {
        let reading = ServerClock { server_ms, local };
        self.clock = Some(reading.best(self.clock));
    }
}

impl LockMachine {
    /// Delays served by `now`: those still waiting make their marks.
    pub(super) fn serve_delays(&mut self, now: Instant) {
        while let Some(&(at, id)) = self.delays.first() {
            if at > now {
                break;
            }
            self.delays.remove(&(at, id));
            let Some(d) = self.attempts.get_mut(&id).and_then(|a| a.delay.as_mut()) else {
                continue;
            };
            if let Stage::Serving { until, stale } = &mut d.stage {
                if *until == at {
                    let stale = std::mem::take(stale);
                    d.stage = Stage::Marking { stale };
                    self.mark(id);
                }
            }
        }
    }

    /// Takes a reading of the server's clock from our node's ctime, with
    /// `now`, the instant a reply about the attempt came in (the node's
    /// Stat came in then or before).
    pub(super) fn read_server_clock(&mut self, id: AttemptId, now: Instant) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let (Some(d), Some(stat)) = (a.delay.as_mut(), a.node.as_ref().and_then(|n| n.stat)) else {
            return;
        };
        d.read_clock(stat.ctime, now);
    }

    /// The release of a marked holder: node and mark in one write, so an
    /// unclean end is the only way a mark outlives its node.
    pub(super) fn release_marked(&mut self, id: AttemptId, name: &str) -> Option<Request> {
        let a = self.attempts.get(&id)?;
        if a.delay.as_ref()?.stage.marked()? != name {
            return None;
        }
        Some(Request::Multi(vec![
            MultiOp::Delete(PathVersion {
                path: a.spec.child(name),
                version: -1,
            }),
            MultiOp::Delete(PathVersion {
                path: crate::path::join(&tenure_path(&a.spec.parent), &a.uuid),
                version: -1,
            }),
        ]))
    }

    /// Our node is deleted alone from now on: our mark was gone when we
    /// released (deleted by a third party), or is to stay, as an unclean
    /// end's does, for the next holder to see (a max hold's end).
    pub(super) fn forget_mark(&mut self, id: AttemptId) {
        if let Some(d) = self.attempts.get_mut(&id).and_then(|a| a.delay.as_mut()) {
            if d.stage.marked().is_some() {
                d.stage = Stage::Idle;
            }
        }
    }
}
