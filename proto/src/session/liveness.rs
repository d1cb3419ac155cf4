//! Proof of life and its deadlines: which answers prove the session alive
//! (with the leader check, only what the leader must have seen), when to
//! ping and to probe with a `sync`, and when a holder is Suspended, then
//! Lost. The derivation is in docs/PARTITION.md.

use super::*;

impl<R, W: Clone> Session<R, W> {
    /// Whether liveness must be confirmed by the leader (the default: on).
    /// Set it before the first connection.
    ///
    /// On, the session counts as alive only what the leader itself must have
    /// seen: the handshake (the leader creates or revalidates the session)
    /// and answered leader-ordered requests (a `sync`, a write, or a write
    /// the leader refused, see docs/PARTITION.md). It sends a `sync` of its
    /// own every twelfth of the session timeout (the first that long after
    /// the handshake was sent), whether or not the previous one was answered
    /// and whatever else goes out; it reports [`SessionState::Suspended`]
    /// (and drops the connection, so that another server may be tried) when
    /// the proof grows older than three quarters of the session timeout,
    /// and [`SessionState::Lost`] when it is a whole timeout old. Off, every
    /// answer counts, pings included: a follower cut off from the leader
    /// answers pings by itself while the leader expires the session, so a
    /// lock holder may go on believing it holds.
    ///
    /// # Why these numbers
    ///
    /// A follower records each client packet in its touch table
    /// (`LearnerSessionTracker.touchSession`, called from
    /// `ZooKeeperServer.submitRequestNow` before the request is processed)
    /// and hands that table to the leader only in its reply to the leader's
    /// quorum ping (`Learner.ping`); the leader pings every `tickTime / 2`
    /// (`Leader.lead`) and touches each session listed
    /// (`LearnerHandler`, `Leader.touch`), which sets its expiry to
    /// `now + timeout` rounded up to a tick (`ExpiryQueue.update`). So a
    /// touch reaches the leader up to half a tick after it *arrives*, or
    /// never if the link dies first. A `sync` or a write is forwarded to the
    /// leader on the same link after every ping reply the follower wrote
    /// before it, and answered only once the leader has taken it. When a
    /// touch arrived is not known, only a bound: no later than the answer
    /// to it or to anything sent after it (one connection is FIFO both
    /// ways), which a link that held it back and then delivered it with
    /// everything behind it puts late. So an answer to a request sent at
    /// `s` proves a touch whose arrival bound is at or before
    /// `s - tickTime / 2 - transit`. The server clamps the timeout `T` to at
    /// least `2 × tickTime`, so `tickTime / 2 <= T / 4`; we take the gap `G`
    /// as `7T / 24`, leaving `T / 24` for the leader's ping to reach the
    /// follower when `T` is at its minimum. The proven touch `c` gives the
    /// leader's expiry `E > c + T` (or, had the leader expired the session
    /// before that touch arrived, we said Lost already: by the same argument
    /// one proof earlier). Suspended at `3T/4` leaves a quarter of the
    /// timeout between the holder hearing it and the earliest moment the
    /// leader may expire the session.
    ///
    /// No false alarm while every answer comes within `R = T/8` of its
    /// request: probes go every `P = T/12` after the previous one was sent,
    /// each probe is answered within `R` and so proves the probe sent
    /// `⌈(G + R) / P⌉ = 5` periods before it. The first probe goes `P` after
    /// the handshake was sent, or as the session opens if that is later
    /// (at most `R` after); until the one five periods later is answered,
    /// the proof is the handshake: at most `max(P, R) + 5P + R = 3T/4` old
    /// at `R = T/8`, the binding case. After that, at most `6P + R` old.
    /// (A server configured with `minSessionTimeout` below `2 × tickTime`
    /// breaks the `T / 4` bound.) The derivation is in docs/PARTITION.md.
    pub fn set_leader_check(&mut self, on: bool) {
        self.leader_check = on;
    }

    /// How often the core sends its own `sync`: a twelfth of the session
    /// timeout, so that a probe answered within `T / 8` is proven by the one
    /// sent five periods after it (see [`Self::set_leader_check`]).
    pub(super) fn probe_period(&self) -> Duration {
        self.timeout() / 12
    }

    pub(super) fn timeout(&self) -> Duration {
        self.negotiated.unwrap_or(self.config.session_timeout)
    }

    pub(super) fn read_timeout(&self) -> Duration {
        self.timeout() * 2 / 3
    }

    pub(super) fn ping_interval(&self) -> Duration {
        self.timeout() / 3
    }

    /// How long before an answered leader-ordered request was sent a touch
    /// must have arrived for that answer to prove the touch reached the
    /// leader (see [`Self::set_leader_check`]): `7T / 24`, half a tick at
    /// most and the leader's ping's way to the follower.
    pub(super) fn leader_gap(&self) -> Duration {
        self.timeout() * 7 / 24
    }

    /// When the leader's proof of our session is too old to say Connected.
    pub(super) fn unconfirmed_deadline(&self) -> Option<Instant> {
        if !self.leader_check || self.phase != Phase::Connected {
            return None;
        }
        self.leader_touch
            .map(|t| t + self.timeout() - self.timeout() / 4)
    }

    /// When our own next `sync` is due: a probe period after the last one
    /// was sent, answered or not; the first, a probe period after the
    /// handshake was sent (at once when the session opens later).
    pub(super) fn probe_due(&self) -> Option<Instant> {
        if !self.leader_check || !self.is_open() {
            return None;
        }
        Some(self.last_probe.unwrap_or(self.handshake_sent) + self.probe_period())
    }

    /// Sends our own liveness `sync`, and keeps its send as a touch even
    /// within a touch's grain of another: a later probe proves exactly this
    /// one.
    pub(super) fn send_probe(&mut self, now: Instant) {
        self.send_as(now, Request::Sync("/".to_owned()), None, None);
        if self.touches.back().map(|t| t.sent) != Some(now) {
            self.touches.push_back(Touch::sent(now));
        }
        self.last_probe = Some(now);
    }

    /// Something was written at `now`: it touches the session where it lands.
    pub(super) fn mark_sent(&mut self, now: Instant) {
        self.last_sent = now;
        if !self.leader_check {
            return;
        }
        let grain = self.timeout() / TOUCH_GRAIN;
        if self.touches.back().is_none_or(|t| now >= t.sent + grain) {
            self.touches.push_back(Touch::sent(now));
        }
    }

    /// What we sent at `sent` was answered at `now`: it, and every touch
    /// sent before it, had arrived by then.
    pub(super) fn arrived(&mut self, now: Instant, sent: Instant) {
        // The touches not yet known to have arrived are the newest ones.
        for t in self.touches.iter_mut().rev() {
            if t.arrived_by.is_some() {
                break;
            }
            if t.sent <= sent {
                t.arrived_by = Some(now);
            }
        }
    }

    /// A leader-ordered request sent at `sent` was answered: every touch
    /// that had arrived at least [`Self::leader_gap`] before it was sent
    /// reached the leader.
    pub(super) fn leader_answered(&mut self, sent: Instant) {
        let Some(limit) = sent.checked_sub(self.leader_gap()) else {
            return;
        };
        let mut proven = None;
        while let Some(&t) = self.touches.front() {
            if t.arrived_by.is_none_or(|a| a > limit) {
                break;
            }
            proven = Some(t);
            self.touches.pop_front();
        }
        if let Some(t) = proven {
            // Keep it: a later answer may need nothing newer.
            self.touches.push_front(t);
            self.leader_touch = Some(self.leader_touch.map_or(t.sent, |l| l.max(t.sent)));
        }
    }

    /// Until when the server cannot have expired this session: the
    /// earliest moment the leader may expire it, from the last proof of
    /// life (see [`Session::set_leader_check`]). `None` before a session,
    /// once it ended, or once Lost was reported.
    pub fn valid_until(&self) -> Option<Instant> {
        self.lost_deadline()
    }

    /// When the server may expire us: a session timeout after the send
    /// time of the last request it answered.
    pub(super) fn lost_deadline(&self) -> Option<Instant> {
        if self.lost_reported || self.session_id == 0 || self.state.is_terminal() {
            return None;
        }
        let proof = if self.leader_check {
            self.leader_touch
        } else {
            self.last_answered_send
        };
        proof.map(|sent| sent + self.timeout())
    }

    pub(super) fn check_lost(&mut self, now: Instant) {
        let Some(deadline) = self.lost_deadline() else {
            return;
        };
        if now < deadline {
            return;
        }
        if matches!(self.phase, Phase::Connected | Phase::Handshaking { .. }) {
            // A connection that let a whole session timeout pass unanswered
            // is no connection: the session may already be gone.
            self.drop_connection(now, DropReason::ReadTimeout);
        }
        self.lost_reported = true;
        self.set_state(SessionState::Lost);
    }

    pub(super) fn answered(&mut self, now: Instant, sent: Instant) {
        self.last_answered_send = Some(self.last_answered_send.map_or(sent, |a| a.max(sent)));
        if self.leader_check {
            self.arrived(now, sent);
        }
    }
}

/// Something we wrote on the current connection, which touched the session
/// on the server where it landed.
#[derive(Clone, Copy, Debug)]
pub(super) struct Touch {
    pub(super) sent: Instant,
    /// The earliest answer to it or to anything sent after it: it had
    /// reached the server by then (`None` until one comes).
    pub(super) arrived_by: Option<Instant>,
}

impl Touch {
    fn sent(sent: Instant) -> Touch {
        Touch {
            sent,
            arrived_by: None,
        }
    }
}

/// Requests a follower must pass to the leader (`FollowerRequestProcessor`
/// forwards them with `Learner.request`), some answers to which prove the
/// leader heard this session through the server we talk to
/// ([`leader_proof`]).
pub(super) fn leader_ordered(op: OpCode) -> bool {
    matches!(
        op,
        OpCode::Create
            | OpCode::Create2
            | OpCode::CreateContainer
            | OpCode::CreateTtl
            | OpCode::Delete
            | OpCode::SetData
            | OpCode::SetAcl
            | OpCode::Check
            | OpCode::Multi
            | OpCode::Reconfig
            | OpCode::Sync
    )
}

/// Whether this answer to a leader-ordered request could only come after
/// the leader took the request and checked the session, so that it proves
/// what an answered `sync` proves (see [`Session::set_leader_check`]).
///
/// In ZooKeeper 3.8 a follower answers a write only once the leader's
/// transaction for it is committed: `PrepRequestProcessor.pRequest2Txn`
/// turns a refused write into an error transaction (`ErrorTxn`) the quorum
/// commits like any other, and the follower replies with its code. Counted
/// are `Ok` and the codes that method raises only after its
/// `sessionTracker.checkSession` for that op: `NodeExists`, `NoNode`,
/// `NoChildrenForEphemerals` and `QuotaExceeded` for a create (its
/// `validateCreateRequest` checks the session, or the global session for
/// an ephemeral, first); `NoNode`, `BadVersion`, `NotEmpty` and
/// `BadArguments` for a delete, setData (also `QuotaExceeded`), setACL and
/// check (each checks the session on its first line). A multi is answered
/// `Ok` with one result per op (`FinalRequestProcessor`; `DataTree`
/// marks ops before the failing one `Ok`, those after it
/// `RuntimeInconsistency`): it counts when no op failed, when the first
/// failing op is not the first (the first passed its own check), or when
/// the first op failed with a code every op type raises only after the
/// check.
///
/// Not counted, because a follower may give them alone or the leader may
/// give them before its check: `Throttled` (`RequestThrottler`; the
/// follower then never forwards), `NoAuth` and `InvalidAcl` (a follower
/// with `zookeeper.enableEagerACLCheck` refuses in
/// `ZooKeeperServer.authWriteRequest` without the leader), `BadArguments`
/// and `Unimplemented` for a create (`CreateMode.fromFlag` and the TTL
/// checks run before the session's), `MarshallingError` (also the
/// follower's own `FinalRequestProcessor`), `NotReadOnly` (a read-only
/// server), the reconfig refusals, and anything else. `SessionMoved` never
/// arrives as a reply (the server closes the connection) and
/// `SessionExpired` ends the session.
pub(super) fn leader_proof(op: OpCode, reply: &Result<Response, ErrorCode>) -> bool {
    use ErrorCode as E;
    let code = match reply {
        Ok(Response::Multi(results)) if op == OpCode::Multi => {
            let failed = results
                .iter()
                .position(|r| matches!(r, MultiResult::Error(c) if *c != E::Ok));
            return match failed {
                None | Some(1..) => true,
                Some(_) => matches!(
                    results.first(),
                    Some(MultiResult::Error(
                        E::NodeExists
                            | E::NoNode
                            | E::BadVersion
                            | E::NotEmpty
                            | E::NoChildrenForEphemerals
                            | E::QuotaExceeded
                    ))
                ),
            };
        }
        Ok(_) => return leader_ordered(op),
        Err(code) => *code,
    };
    match op {
        OpCode::Create | OpCode::Create2 | OpCode::CreateContainer | OpCode::CreateTtl => matches!(
            code,
            E::NodeExists | E::NoNode | E::NoChildrenForEphemerals | E::QuotaExceeded
        ),
        OpCode::Delete => matches!(
            code,
            E::NoNode | E::BadVersion | E::NotEmpty | E::BadArguments
        ),
        OpCode::SetData => matches!(
            code,
            E::NoNode | E::BadVersion | E::BadArguments | E::QuotaExceeded
        ),
        OpCode::SetAcl | OpCode::Check => {
            matches!(code, E::NoNode | E::BadVersion | E::BadArguments)
        }
        _ => false,
    }
}
