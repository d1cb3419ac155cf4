//! The network between the clients and the servers: bytes in flight in
//! both directions, delivered when their latency has passed, and the
//! ensemble a client connects to.

use super::super::rng::Rng;
use super::*;

impl World {
    /// Moves bytes that have arrived, in both directions.
    pub(super) fn move_bytes(&mut self, c: usize) -> Result<(), Violation> {
        let now = self.now;
        let Some(link) = self.clients[c].link.as_mut() else {
            return Ok(());
        };
        if link.stalled_until.is_some_and(|s| s > now) {
            return Ok(());
        }
        link.stalled_until = None;
        let conn = link.conn;
        let mut arrived = Vec::new();
        while link.up.front().is_some_and(|(at, _)| *at <= now) {
            arrived.push(link.up.pop_front().expect("present").1);
        }
        for bytes in arrived {
            self.server.receive(now, conn, &bytes);
        }
        self.move_bytes_down(c)
    }

    fn move_bytes_down(&mut self, c: usize) -> Result<(), Violation> {
        let now = self.now;
        loop {
            let Some(link) = self.clients[c].link.as_mut() else {
                return Ok(());
            };
            if link.down.front().is_none_or(|(at, _, _)| *at > now) {
                return Ok(());
            }
            let (_, written, bytes) = link.down.pop_front().expect("present");
            match bytes {
                Some(bytes) => {
                    self.clients[c].last_heard = now;
                    self.note_answers(c, &bytes);
                    self.clients[c].core.handle_input(now, &bytes);
                    self.after_core(c)?;
                    self.check_told_of_deletion(c, written)?;
                    self.latch_told_of_deletion(c, written)?;
                }
                None => {
                    self.clients[c].link = None;
                    self.clients[c].core.handle_disconnected(now);
                    self.clients[c].connect_at = now + Duration::from_millis(5);
                    self.after_core(c)?;
                    return Ok(());
                }
            }
        }
    }

    /// Puts what the server wrote on the wire.
    pub(super) fn server_output(&mut self) {
        let now = self.now;
        while let Some((conn, bytes, view)) = self.server.poll_output_viewed() {
            let at = now + self.latency_of(conn);
            self.writes += 1;
            let n = self.write_number(view);
            if let Some(link) = self.link_mut(conn) {
                link.down.push_back((at, n, Some(bytes)));
            }
        }
        while let Some(conn) = self.server.poll_closed() {
            let at = now + self.latency_of(conn);
            self.writes += 1;
            let n = self.writes;
            if let Some(link) = self.link_mut(conn) {
                link.down.push_back((at, n, None));
            }
        }
    }

    /// The latency of the link of connection `conn` (any, if no client's).
    fn latency_of(&mut self, conn: ConnId) -> Duration {
        let c = self
            .clients
            .iter()
            .position(|c| c.link.as_ref().is_some_and(|l| l.conn == conn))
            .unwrap_or(0);
        self.latency(c)
    }

    fn link_mut(&mut self, conn: ConnId) -> Option<&mut Link> {
        self.clients
            .iter_mut()
            .filter_map(|c| c.link.as_mut())
            .find(|l| l.conn == conn)
    }
}

/// The ensemble the clients connect to: two servers up to date (the leader
/// and a follower; one model) and, in some seeds, a follower whose applied
/// state trails the leader's by up to `max_lag` (zookeeper/lagging.rs).
/// Each client tries them in its own shuffled order, the next one at each
/// connection, as the driver's host list does (src/driver/hosts.rs), so
/// reconnects land on the lagging follower too, a client that has seen
/// newer zxids elsewhere included: the follower refuses it and it tries the
/// next.
#[derive(Debug, Default)]
pub(super) struct Ensemble {
    /// Zero: no lagging follower.
    pub(super) max_lag: Duration,
    /// Per client: its order of the three servers (2: the lagging one), and
    /// how many connections it has made.
    order: Vec<([u8; 3], usize)>,
    /// A third party's deletions: the zxid of each, and the number of the
    /// server's last write before it (checker.rs's `admin_deleted`).
    deletions: BTreeMap<i64, u64>,
}

/// The most a follower lags in any seed.
const LAG_CAP: Duration = Duration::from_millis(400);

impl World {
    /// In half of the seeds, a follower lagging by up to what keeps every
    /// client's round trip (its link's and the lag) inside the `T/8` the
    /// leader check tolerates on a healthy server (docs/PARTITION.md, "No
    /// false alarm"): a follower lagging within it is a healthy server, one
    /// lagging more is not (the client says Suspended and moves, as it
    /// should). Draws nothing from the world's own stream.
    pub(super) fn plan_ensemble(&mut self, rng: &mut Rng) {
        if !rng.chance(1, 2) {
            return;
        }
        let budget = (0..self.clients.len())
            .map(|c| {
                let link = 2 * (self.steady_latency(c) + MAX_JITTER);
                (self.timeout(c) / 8).saturating_sub(link)
            })
            .min()
            .unwrap_or_default();
        let max_lag = (budget * 9 / 10).min(LAG_CAP);
        let max_lag = Duration::from_millis(rng.below(max_lag.as_millis() as u64 + 1));
        if max_lag.is_zero() {
            return;
        }
        self.ensemble.max_lag = max_lag;
        self.ensemble.order = (0..self.clients.len())
            .map(|_| {
                let mut order = [0, 1, 2];
                for i in (1..3).rev() {
                    order.swap(i, rng.below(i as u64 + 1) as usize);
                }
                (order, rng.below(3) as usize)
            })
            .collect();
        self.server.add_lagging_follower(max_lag, rng.next());
        self.note(|| format!("a follower lags by up to {max_lag:?}"));
    }

    /// A new connection of client `c`, to the next server of its order.
    pub(super) fn connect_next(&mut self, c: usize) -> ConnId {
        let now = self.now;
        let Some((order, made)) = self.ensemble.order.get_mut(c) else {
            return self.server.connect(now);
        };
        let server = order[*made % 3];
        *made += 1;
        if server == 2 {
            let conn = self.server.connect_lagging(now);
            self.note(|| format!("c{c}: connects to the lagging follower (conn {conn})"));
            conn
        } else {
            self.server.connect(now)
        }
    }

    /// A third party's deletion was just made, after the server's write
    /// number `written`.
    pub(super) fn note_deletion(&mut self, written: u64) {
        self.ensemble
            .deletions
            .insert(self.server.last_zxid(), written);
    }

    /// The number a frame is held to by the deletion checks: a frame the
    /// lagging follower wrote before it applied a deletion counts as
    /// written before that deletion, whenever it left.
    fn write_number(&self, view: i64) -> u64 {
        if view >= self.server.last_zxid() {
            return self.writes;
        }
        self.ensemble
            .deletions
            .range(view + 1..)
            .next()
            .map_or(self.writes, |(_, w)| (*w).min(self.writes))
    }
}
