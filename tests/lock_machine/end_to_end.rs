//! Through the real session, against the simulated server: the machine
//! inside the real core (session, SetWatches), driven with no latency by
//! [`pump`]. The order in which SetWatches fires is the server's, not the
//! test's.

use std::time::{Duration, Instant};

use zklock::machine::{Core, CoreEvent};
use zklock::recipes::{LockState, Mutex};
use zklock::Client;

use crate::sim_zookeeper;

/// One client: its handle, the core its driver runs, and its connection.
struct Peer {
    client: Client,
    core: Core,
    conn: Option<sim_zookeeper::ConnId>,
    online: bool,
}

impl Peer {
    fn new(now: Instant, seed: u128) -> Peer {
        let (client, core) = Client::builder("127.0.0.1:2181")
            .session_timeout(Duration::from_secs(30))
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
fn pump(zk: &mut sim_zookeeper::SimZooKeeper, peers: &mut [&mut Peer], now: Instant) {
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

/// The case the in-order argument does not cover, end to end: B waits
/// alone behind A, its own watch set; B is cut off; a third party deletes
/// B's node, then A releases. On B's reconnect SetWatches fires both
/// deletions in the order of its list (by path), A's first when A's node
/// sorts first. B must not take A's deletion for a grant: it queues again
/// with a new node and holds by that one.
#[test]
fn end_to_end_setwatches_firing_the_blocker_first_grants_nothing_stale() {
    let mut covered = 0;
    for seed in 2..40u128 {
        let now = Instant::now();
        let mut zk = sim_zookeeper::SimZooKeeper::new(now, Duration::from_millis(2000));
        let mut a = Peer::new(now, 1);
        let mut b = Peer::new(now, seed);
        let ma = Mutex::new(&a.client, "/l").unwrap();
        let mb = Mutex::new(&b.client, "/l").unwrap();
        let pa = ma.start_lock(None);
        pump(&mut zk, &mut [&mut a, &mut b], now);
        let ga = pa.try_take().expect("a free lock").unwrap();
        let pb = mb.start_lock(None);
        pump(&mut zk, &mut [&mut a, &mut b], now);
        assert!(pb.try_take().is_none(), "B waits");
        let a_path = ga.node_path().to_owned();
        let b_name = zk
            .children("/l")
            .into_iter()
            .find(|n| format!("/l/{n}") != a_path)
            .expect("B's node");
        let b_path = format!("/l/{b_name}");
        let b_conn = b.conn.expect("connected");
        assert!(
            zk.data_watchers(&b_path).contains(&b_conn),
            "B watches its own node while waiting"
        );
        if a_path > b_path {
            // SetWatches would fire B's own deletion first: the easy order.
            continue;
        }
        covered += 1;
        zk.disconnect(now, b_conn);
        b.conn = None;
        b.core.handle_disconnected(now);
        b.online = false;
        pump(&mut zk, &mut [&mut a, &mut b], now);
        assert!(zk.delete_as_admin(now, &b_path));
        drop(ga);
        pump(&mut zk, &mut [&mut a, &mut b], now);
        assert!(zk.children("/l").is_empty(), "A released");
        b.online = true;
        pump(&mut zk, &mut [&mut a, &mut b], now);
        let gb = pb
            .try_take()
            .expect("B holds by a new node")
            .expect("B holds");
        assert_ne!(
            gb.node_path(),
            b_path,
            "seed {seed}: held by a deleted node"
        );
        assert!(zk.exists(gb.node_path()).is_some());
        assert_eq!(gb.state(), LockState::Held);
    }
    assert!(covered > 0, "no seed put A's node first");
}

/// A session listener and a guard's state channel that nobody reads stay
/// bounded however often the connection flaps (600 changes here), and
/// still work afterwards: no growth the server can drive.
#[test]
fn unread_state_channels_stay_bounded_across_many_reconnects() {
    use zklock::machine::STATE_CHANNEL_CAPACITY;
    use zklock::recipes::Mutex;
    let now = Instant::now();
    let mut zk = sim_zookeeper::SimZooKeeper::new(now, Duration::from_millis(2000));
    let mut p = Peer::new(now, 7);
    pump(&mut zk, &mut [&mut p], now);
    let states = p.client.subscribe();
    let m = Mutex::new(&p.client, "/bounded").unwrap();
    let pending = m.start_lock(None);
    pump(&mut zk, &mut [&mut p], now);
    let guard = pending.try_take().expect("granted").unwrap();
    let changes = guard.state_changes();
    for _ in 0..300 {
        let conn = p.conn.take().expect("connected");
        zk.disconnect(now, conn);
        p.core.handle_disconnected(now);
        pump(&mut zk, &mut [&mut p], now);
    }
    assert!(states.len() <= STATE_CHANNEL_CAPACITY, "{}", states.len());
    assert!(changes.len() <= STATE_CHANNEL_CAPACITY, "{}", changes.len());
    assert_eq!(
        states.len(),
        STATE_CHANNEL_CAPACITY,
        "it was full: changes were dropped, not queued"
    );
    // Still attached: once read, the next change arrives.
    while states.try_recv().is_ok() {}
    while changes.try_recv().is_ok() {}
    let conn = p.conn.take().expect("connected");
    zk.disconnect(now, conn);
    p.core.handle_disconnected(now);
    pump(&mut zk, &mut [&mut p], now);
    assert!(
        states.try_recv().is_ok(),
        "the listener hears later changes"
    );
    assert!(changes.try_recv().is_ok(), "the guard's channel too");
    assert_eq!(guard.state(), zklock::recipes::LockState::Held);
}

/// The leader check is the builder's to switch: on (the default), an idle
/// session sends its own `sync`s; off, only pings.
#[test]
fn the_builder_switches_the_leader_check() {
    for on in [true, false] {
        let start = Instant::now();
        let mut zk =
            sim_zookeeper::SimZooKeeper::new(start, Duration::from_millis(2000)).with_trace();
        let (client, core) = Client::builder("127.0.0.1:2181")
            .session_timeout(Duration::from_secs(8))
            .leader_check(on)
            .build_manual(start, 1)
            .unwrap();
        let mut p = Peer {
            client,
            core,
            conn: None,
            online: true,
        };
        // Ten virtual seconds, idle, in 100 ms steps.
        for step in 0..100u32 {
            pump(
                &mut zk,
                &mut [&mut p],
                start + Duration::from_millis(100) * step,
            );
        }
        let syncs = zk
            .take_trace()
            .iter()
            .filter(|l| l.contains("Sync("))
            .count();
        if on {
            assert!(
                syncs >= 5,
                "an idle session proves itself to the leader: {syncs}"
            );
        } else {
            assert_eq!(syncs, 0, "no syncs with the check off");
        }
        assert_eq!(p.client.state(), zklock::SessionState::Connected);
    }
}

/// A watch the machine no longer wants is not re-armed after a reconnect:
/// B waits on A's node, gives up (its own node goes; its watch on A's
/// node stays on the server, the machine no longer cares), is cut off and
/// comes back: SetWatches leaves A's node unwatched by B. Kills:
/// Locks::wants_watch made `true` (locks.rs:145), which re-arms every
/// watch ever left and leaks them on the server.
#[test]
fn end_to_end_a_watch_given_up_is_not_rearmed_after_a_reconnect() {
    let now = Instant::now();
    let mut zk = sim_zookeeper::SimZooKeeper::new(now, Duration::from_millis(2000));
    let mut a = Peer::new(now, 1);
    let mut b = Peer::new(now, 2);
    let ma = Mutex::new(&a.client, "/l").unwrap();
    let mb = Mutex::new(&b.client, "/l").unwrap();
    let pa = ma.start_lock(None);
    pump(&mut zk, &mut [&mut a, &mut b], now);
    let ga = pa.try_take().expect("a free lock").unwrap();
    let pb = mb.start_lock(None);
    pump(&mut zk, &mut [&mut a, &mut b], now);
    assert!(pb.try_take().is_none(), "B waits");
    let a_path = ga.node_path();
    let b_conn = b.conn.expect("connected");
    assert!(zk.data_watchers(a_path).contains(&b_conn), "B watches A");
    drop(pb);
    pump(&mut zk, &mut [&mut a, &mut b], now);
    assert_eq!(zk.children("/l").len(), 1, "B's node is gone");
    zk.disconnect(now, b_conn);
    b.conn = None;
    b.core.handle_disconnected(now);
    pump(&mut zk, &mut [&mut a, &mut b], now);
    let b_conn = b.conn.expect("B is back");
    assert!(
        !zk.data_watchers(a_path).contains(&b_conn),
        "a watch B gave up was re-armed"
    );
    drop(ga);
}

/// A waiter whose core goes (the I/O thread ends) hears Closed at once,
/// not never. (Written for Locks' Drop emptied, locks.rs:230; it does not
/// kill it: a Mutex waiter's channel disconnects anyway. See
/// docs/MUTANTS.md.)
#[test]
fn a_waiter_hears_closed_when_the_core_goes() {
    let now = Instant::now();
    let p = Peer::new(now, 1);
    let m = Mutex::new(&p.client, "/l").unwrap();
    let pending = m.start_lock(None);
    let Peer {
        mut core, client, ..
    } = p;
    core.turn(now);
    assert!(pending.try_take().is_none(), "no server: it waits");
    drop(core);
    let outcome = pending.try_take().expect("told at once");
    assert!(
        outcome.is_err(),
        "{:?}",
        outcome.map(|g| g.node_path().to_owned())
    );
    drop(client);
}
