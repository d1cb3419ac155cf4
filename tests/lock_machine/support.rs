//! What the tests of this binary share: a client driven by hand and a pump
//! that moves bytes between clients and the simulated server.

use std::time::{Duration, Instant};

use zklock::testing::{Core, CoreEvent};
use zklock::Client;

use zklock_sim::zookeeper as sim_zookeeper;

/// One client: its handle, the core its driver runs, and its connection.
pub(crate) struct Peer {
    pub(crate) client: Client,
    pub(crate) core: Core,
    pub(crate) conn: Option<sim_zookeeper::ConnId>,
    pub(crate) online: bool,
}

impl Peer {
    pub(crate) fn new(now: Instant, seed: u128) -> Peer {
        Peer::with_renewal(now, seed, true)
    }

    /// A client that ends with its first session (`renew` off) or opens a
    /// new one after an expiry (on, the default).
    pub(crate) fn with_renewal(now: Instant, seed: u128, renew: bool) -> Peer {
        let (client, core) = Client::builder("127.0.0.1:2181")
            .session_timeout(Duration::from_secs(30))
            .new_session_after_expiry(renew)
            .build_manual(now, seed)
            .expect("a manual client");
        Peer {
            client,
            core,
            conn: None,
            online: true,
        }
    }
}

/// Drives the clients and the server, with no latency, until nothing moves.
pub(crate) fn pump(zk: &mut sim_zookeeper::SimZooKeeper, peers: &mut [&mut Peer], now: Instant) {
    loop {
        let mut moved = false;
        for p in peers.iter_mut() {
            p.core.turn(now);
            if p.conn.is_none() && p.online && p.core.wants_connection() {
                p.core.prepare_connection();
                p.conn = Some(zk.connect(now));
                p.core.handle_connected(now);
            }
            while let Some(event) = p.core.poll_event() {
                if let CoreEvent::DropConnection(_) = event {
                    if let Some(conn) = p.conn.take() {
                        zk.disconnect(now, conn);
                        p.core.handle_disconnected(now);
                    }
                }
                moved = true;
            }
            if let Some(conn) = p.conn {
                let out = p.core.output().to_vec();
                if !out.is_empty() {
                    p.core.consume_output(out.len());
                    zk.receive(now, conn, &out);
                    moved = true;
                }
            }
        }
        zk.handle_timeout(now);
        while let Some((conn, bytes)) = zk.poll_output() {
            if let Some(p) = peers.iter_mut().find(|p| p.conn == Some(conn)) {
                p.core.handle_input(now, &bytes);
                moved = true;
            }
        }
        while let Some(conn) = zk.poll_closed() {
            if let Some(p) = peers.iter_mut().find(|p| p.conn == Some(conn)) {
                p.conn = None;
                p.core.handle_disconnected(now);
                moved = true;
            }
        }
        if !moved {
            return;
        }
    }
}
