//! Sessions: the handshake that creates or resumes one, the expiry clock
//! at tick granularity (SessionTrackerImpl's ExpiryQueue), and the end of
//! a session by closeSession or expiry, one txn deleting its ephemerals.

use super::*;

/// Session ids are this plus a counter from 1 (server id 1 in the top byte,
/// as ZooKeeper lays them out).
pub const SESSION_ID_BASE: i64 = 0x0100_0000_0000_0000;

/// Mixed into the password derivation; any constant does.
const PASSWORD_SECRET: u64 = 0x5a6b_6c6f_636b_2173;

#[derive(Debug)]
pub(super) struct SessionEntry {
    pub(super) timeout_ms: i32,
    pub(super) expire_at: Instant,
    /// The expiry the leader has before the last touch is carried to it.
    pub(super) carried_expiry: Instant,
    /// The leader's ping whose answer carries the last touch made on a
    /// follower (at or before now: carried).
    pub(super) carried_at: Instant,
    pub(super) conn: Option<ConnId>,
}

/// The password of a session: a fixed function of its id.
pub fn session_password(session_id: i64) -> Vec<u8> {
    let a = splitmix(session_id as u64 ^ PASSWORD_SECRET);
    let b = splitmix(a);
    let mut p = a.to_be_bytes().to_vec();
    p.extend_from_slice(&b.to_be_bytes());
    p
}

impl SimZooKeeper {
    pub(super) fn on_connect(&mut self, now: Instant, conn: ConnId, frame: &[u8]) {
        if self.behind_cut.contains_key(&conn) {
            // Attaching a session on a follower asks the leader
            // (Learner.validateSession; a new session is a leader-ordered
            // createSession): cut off from it, the handshake goes
            // unanswered until the follower drops its clients.
            return;
        }
        let Ok(req) = ConnectRequest::decode_exact(frame) else {
            self.log(|| format!("conn {conn}: unreadable ConnectRequest"));
            return self.close_conn(conn);
        };
        self.log(|| {
            format!(
                "conn {conn}: connect session={:#x} last_zxid={:#x} timeout={}",
                req.session_id, req.last_zxid_seen, req.timeout_ms
            )
        });
        // ZooKeeperServer.processConnectRequest: "Refusing session request
        // for client ... as it has seen zxid ... client must try another
        // server" (the server's last zxid is what it has applied).
        let applied = self.applied_for(conn);
        if req.last_zxid_seen > applied {
            self.count_refusal(conn);
            let zxid = applied;
            self.log(|| format!("conn {conn}: refused, client is ahead of {zxid:#x}"));
            return self.close_conn(conn);
        }
        let tick = i32::try_from(self.tick_ms).unwrap_or(i32::MAX);
        let timeout = req
            .timeout_ms
            .clamp(tick.saturating_mul(2), tick.saturating_mul(20));
        let mut created = None;
        let session_id = if req.session_id == 0 {
            created = Some(self.next_zxid());
            self.session_counter += 1;
            let id = SESSION_ID_BASE + self.session_counter;
            self.sessions.insert(
                id,
                SessionEntry {
                    timeout_ms: timeout,
                    expire_at: now,
                    carried_expiry: now,
                    carried_at: now,
                    conn: None,
                },
            );
            id
        } else {
            let id = req.session_id;
            if let Some(old) = self.connection_of(id) {
                if old != conn {
                    self.close_conn(old);
                }
            }
            if !self.sessions.contains_key(&id) || req.passwd != session_password(id) {
                self.log(|| format!("conn {conn}: session {id:#x} unknown or bad password"));
                self.send(conn, |b| {
                    ConnectResponse {
                        protocol_version: jute::PROTOCOL_VERSION,
                        timeout_ms: 0,
                        session_id: 0,
                        passwd: vec![0; 16],
                        read_only: false,
                    }
                    .encode(b)
                });
                return self.close_conn(conn);
            }
            id
        };
        if let Some(s) = self.sessions.get_mut(&session_id) {
            s.timeout_ms = timeout;
            s.conn = Some(conn);
        }
        // createSession is leader-ordered, and a session attached on a
        // follower is revalidated by the leader (Learner.validateSession):
        // the leader touches it itself.
        self.touch_at_leader(now, session_id);
        if let Some(c) = self.conns.get_mut(&conn) {
            c.session = Some(session_id);
            c.shown_zxid = req.last_zxid_seen;
        }
        self.log(|| format!("conn {conn}: session {session_id:#x} up, timeout {timeout}ms"));
        let mut frame = BytesMut::new();
        encode_frame(&mut frame, |b| {
            ConnectResponse {
                protocol_version: jute::PROTOCOL_VERSION,
                timeout_ms: timeout,
                session_id,
                passwd: session_password(session_id),
                read_only: false,
            }
            .encode(b)
        });
        match created {
            // A new session on the lagging follower is answered once it has
            // applied the createSession txn (lagging.rs).
            Some(zxid) if self.is_lagging(conn) => self.queue_handshake(conn, zxid, frame.to_vec()),
            _ => {
                let view = self.applied_for(conn);
                self.out.push_back((conn, frame.to_vec(), view));
            }
        }
    }

    /// Expires every session whose deadline is `<= now`, earliest first.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.clock = self.clock.max(now);
        if !self.running {
            return;
        }
        let mut due: Vec<(Instant, i64)> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.expire_at <= now)
            .map(|(id, s)| (s.expire_at, *id))
            .collect();
        due.sort();
        for (_, id) in due {
            self.expire(now, id);
        }
        self.land_due_late_writes(now);
        self.apply_due_txns(now);
    }

    /// The next session expiry, if any session lives (None while stopped).
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.running {
            return None;
        }
        let expiry = self.sessions.values().map(|s| s.expire_at).min();
        [expiry, self.late_timeout(), self.follower_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    /// The session deadline after a packet at `now`, on a tick boundary.
    fn deadline(&self, now: Instant, timeout_ms: i32) -> Instant {
        let elapsed = now.saturating_duration_since(self.base).as_millis() as u64;
        let t = elapsed + timeout_ms.max(0) as u64;
        let at = (t / self.tick_ms + 1) * self.tick_ms;
        self.base + Duration::from_millis(at)
    }

    /// A packet of `session` reached its server, a follower: the touch
    /// sits in the follower's LearnerSessionTracker until its answer to
    /// the leader's next ping carries it (Learner.ping); the leader then
    /// touches the session (LearnerHandler, Leader's SessionTracker). The
    /// leader pings every follower each half tick (Leader.lead). Carried
    /// in time, the expiry is counted from that ping; a follower cut from
    /// the leader before the ping never carries it
    /// ([`SimZooKeeper::cut_from_leader`]).
    pub(super) fn touch(&mut self, now: Instant, session: i64) {
        let ping = self.next_leader_ping(now);
        self.touch_from(now, ping, session);
    }

    /// The leader touched `session` itself, at `now`.
    pub(super) fn touch_at_leader(&mut self, now: Instant, session: i64) {
        self.touch_from(now, now, session);
    }

    fn touch_from(&mut self, now: Instant, carried_at: Instant, session: i64) {
        let Some(timeout) = self.sessions.get(&session).map(|s| s.timeout_ms) else {
            return;
        };
        let at = self.deadline(carried_at, timeout);
        if let Some(s) = self.sessions.get_mut(&session) {
            if s.carried_at <= now {
                s.carried_expiry = s.expire_at;
            }
            s.expire_at = at.max(s.expire_at);
            s.carried_at = carried_at;
        }
    }

    /// The leader's first ping of its followers after `now`: every half
    /// tick, on a grid from `new`.
    fn next_leader_ping(&self, now: Instant) -> Instant {
        let half = (self.tick_ms / 2).max(1);
        let elapsed = now.saturating_duration_since(self.base).as_millis() as u64;
        self.base + Duration::from_millis((elapsed / half + 1) * half)
    }

    /// The follower of `session` is cut from the leader at `now`: a touch
    /// its answer to the next ping would have carried never arrives.
    pub(super) fn lose_uncarried_touch(&mut self, now: Instant, session: i64) {
        if let Some(s) = self.sessions.get_mut(&session) {
            if s.carried_at > now {
                s.expire_at = s.carried_expiry;
                s.carried_at = now;
            }
        }
    }

    /// closeSession / expiry: one txn deleting every ephemeral of the
    /// session; watches fire; the session is gone. Returns the txn's zxid.
    pub(super) fn kill_session(&mut self, session: i64) -> i64 {
        let zxid = self.next_zxid();
        self.acting = session;
        for path in self.ephemerals_of(session) {
            self.remove_node(&path, zxid);
        }
        self.commit();
        self.sessions.remove(&session);
        zxid
    }

    pub(super) fn expire(&mut self, _now: Instant, session: i64) {
        self.log(|| format!("session {session:#x}: expired"));
        let conn = self.connection_of(session);
        self.kill_session(session);
        if let Some(conn) = conn {
            self.close_conn(conn);
        }
    }
}
