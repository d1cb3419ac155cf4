//! Through the real session, against the simulated server: the machine
//! inside the real core (session, SetWatches), driven with no latency by
//! [`pump`]. The order in which SetWatches fires is the server's, not the
//! test's.

use std::time::{Duration, Instant};

use zklock::recipes::{LockError, LockGuard, LockState, Mutex, PendingLock, PendingSet};
use zklock::testing::CoreEvent;
use zklock::{Client, DropReason, SessionState};

use zklock_sim::zookeeper as sim_zookeeper;

use crate::support::{pump, Peer};

/// A takes the free lock on `/l`, then B queues behind it and waits.
fn a_holds_b_waits(
    zk: &mut sim_zookeeper::SimZooKeeper,
    a: &mut Peer,
    b: &mut Peer,
    now: Instant,
) -> (LockGuard, PendingLock) {
    let ma = Mutex::new(&a.client, "/l").unwrap();
    let mb = Mutex::new(&b.client, "/l").unwrap();
    let pa = ma.start_lock(None);
    pump(zk, &mut [&mut *a, &mut *b], now);
    let ga = pa.try_take().expect("a free lock").unwrap();
    let pb = mb.start_lock(None);
    pump(zk, &mut [&mut *a, &mut *b], now);
    assert!(pb.try_take().is_none(), "B waits");
    (ga, pb)
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
        let (ga, pb) = a_holds_b_waits(&mut zk, &mut a, &mut b, now);
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

/// A session listener, a guard's state channel and a latch's events that
/// nobody reads stay bounded however often the connection flaps (600
/// changes here), and still work afterwards: no growth the server can
/// drive.
#[test]
fn unread_state_channels_stay_bounded_across_many_reconnects() {
    use zklock::recipes::STATE_CHANNEL_CAPACITY;
    use zklock::recipes::{Election, LatchEvent, Mutex};
    let now = Instant::now();
    let mut zk = sim_zookeeper::SimZooKeeper::new(now, Duration::from_millis(2000));
    let mut p = Peer::new(now, 7);
    pump(&mut zk, &mut [&mut p], now);
    let states = p.client.subscribe();
    let m = Mutex::new(&p.client, "/bounded").unwrap();
    let pending = m.start_lock(None);
    let latch = Election::new(&p.client, "/bounded-latch", b"me")
        .unwrap()
        .latch();
    pump(&mut zk, &mut [&mut p], now);
    let guard = pending.try_take().expect("granted").unwrap();
    let changes = guard.state_changes();
    assert!(latch.is_leader());
    let events = latch.events();
    for _ in 0..300 {
        let conn = p.conn.take().expect("connected");
        zk.disconnect(now, conn);
        p.core.handle_disconnected(now);
        pump(&mut zk, &mut [&mut p], now);
    }
    assert!(states.len() <= STATE_CHANNEL_CAPACITY, "{}", states.len());
    assert!(changes.len() <= STATE_CHANNEL_CAPACITY, "{}", changes.len());
    assert!(events.len() <= STATE_CHANNEL_CAPACITY, "{}", events.len());
    assert_eq!(
        states.len(),
        STATE_CHANNEL_CAPACITY,
        "it was full: changes were dropped, not queued"
    );
    assert_eq!(events.len(), STATE_CHANNEL_CAPACITY, "the latch's too");
    assert!(latch.is_leader(), "the current state stays readable");
    // Still attached: once read, the next change arrives.
    while states.try_recv().is_ok() {}
    while changes.try_recv().is_ok() {}
    while events.try_recv().is_ok() {}
    let conn = p.conn.take().expect("connected");
    zk.disconnect(now, conn);
    p.core.handle_disconnected(now);
    pump(&mut zk, &mut [&mut p], now);
    assert!(
        states.try_recv().is_ok(),
        "the listener hears later changes"
    );
    assert!(changes.try_recv().is_ok(), "the guard's channel too");
    assert_eq!(
        events.try_recv(),
        Ok(LatchEvent::Suspended),
        "and the latch's"
    );
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
    let (ga, pb) = a_holds_b_waits(&mut zk, &mut a, &mut b, now);
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
/// not never. (A Mutex waiter's channel disconnects anyway; the next test
/// is the one that needs the core's goodbye.)
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

/// The same for a waiter in a `PendingSet`, whose channel the set keeps a
/// sender of (for the keys it starts later): it never disconnects, so only
/// the core's own goodbye (`Drop for Locks`) tells the waiter. Kills
/// locks.rs `Drop for Locks` emptied (docs/MUTANTS.md, "Still open").
#[test]
fn a_pending_set_waiter_hears_closed_when_the_core_goes() {
    let now = Instant::now();
    let p = Peer::new(now, 1);
    let m = Mutex::new(&p.client, "/l").unwrap();
    let mut set = PendingSet::new();
    let key = set.start_lock(&m, None);
    let Peer {
        mut core, client, ..
    } = p;
    core.turn(now);
    assert!(set.try_recv().is_none(), "no server: it waits");
    drop(core);
    let (told, outcome) = set.try_recv().expect("told at once");
    assert_eq!(told, key);
    assert!(
        matches!(outcome, Err(LockError::Client(zklock::Error::Closed))),
        "{:?}",
        outcome.map(|g| g.node_path().to_owned())
    );
    drop(client);
}

/// The I/O thread's stop condition. A core is done only once no Client is
/// left and its session has ended: while connected it is neither finished
/// nor done; a session that expired is finished, but the core stays (later
/// calls hear "expired" from it) while a Client remains; the last Client's
/// drop then ends it. Kills: Core::is_finished and Core::is_done faked,
/// is_done's `&&` made `||` or its `!` deleted (core.rs:194, :199): the
/// driver's thread would end under a live client or never end; and
/// Core::wants_connection made `true` (core.rs:189): an ended session
/// connecting again and again.
#[test]
fn a_core_is_done_only_once_its_session_ended_and_no_client_is_left() {
    let now = Instant::now();
    let mut zk = sim_zookeeper::SimZooKeeper::new(now, Duration::from_millis(2000));
    let mut p = Peer::with_renewal(now, 5, false);
    pump(&mut zk, &mut [&mut p], now);
    assert_eq!(p.core.state(), SessionState::Connected);
    assert!(!p.core.is_finished(), "a live session is not finished");
    assert!(!p.core.is_done(), "nor is its core done");
    zk.expire_session(now, p.core.session_id());
    pump(&mut zk, &mut [&mut p], now);
    assert_eq!(p.core.state(), SessionState::Expired);
    assert!(p.core.is_finished(), "an expired session is finished");
    assert!(!p.core.wants_connection(), "nor does it want a connection");
    assert!(!p.core.is_done(), "a Client remains: the core stays");
    let Peer {
        client, mut core, ..
    } = p;
    drop(client);
    core.turn(now);
    assert!(core.is_done(), "no Client left and the session over");
}

/// A driver that cannot go on (its poll failed) aborts its core: the
/// session is closed at once, not left to expire, so the server deletes
/// our lock node now and the client says Closed. Kills: Core::abort
/// emptied (core.rs:155), which left the node held for a session timeout
/// by a client that no longer runs.
#[test]
fn an_aborted_core_closes_its_session_and_its_nodes_go_at_once() {
    let now = Instant::now();
    let mut zk = sim_zookeeper::SimZooKeeper::new(now, Duration::from_millis(2000));
    let mut p = Peer::new(now, 6);
    let m = Mutex::new(&p.client, "/l").unwrap();
    let pending = m.start_lock(None);
    pump(&mut zk, &mut [&mut p], now);
    let guard = pending.try_take().expect("a free lock").unwrap();
    assert!(zk.exists(guard.node_path()).is_some());
    p.core.abort(now);
    pump(&mut zk, &mut [&mut p], now);
    assert!(
        zk.children("/l").is_empty(),
        "our node went with the session"
    );
    assert_eq!(p.client.state(), SessionState::Closed);
    assert!(p.core.is_finished());
    assert!(
        !p.core.wants_connection() && p.conn.is_none(),
        "no reconnect"
    );
    assert_ne!(guard.state(), LockState::Held);
}

/// What a driver hears from its core: the session's state changes, and a
/// connection to drop when the server falls silent (no answer within the
/// read timeout), Suspended with it. Kills: Core::poll_event made `None`
/// (core.rs:175), which left a driver on a dead connection for good.
#[test]
fn a_silent_server_makes_the_core_ask_its_driver_to_drop_the_connection() {
    let now = Instant::now();
    let mut zk = sim_zookeeper::SimZooKeeper::new(now, Duration::from_millis(2000));
    let (client, mut core) = Client::builder("127.0.0.1:2181")
        .session_timeout(Duration::from_secs(30))
        .build_manual(now, 8)
        .expect("a manual client");
    core.turn(now);
    assert!(core.wants_connection());
    core.prepare_connection();
    let conn = zk.connect(now);
    core.handle_connected(now);
    let out = core.output().to_vec();
    core.consume_output(out.len());
    zk.receive(now, conn, &out);
    while let Some((_, bytes)) = zk.poll_output() {
        core.handle_input(now, &bytes);
    }
    let events: Vec<CoreEvent> = std::iter::from_fn(|| core.poll_event()).collect();
    assert_eq!(events, [CoreEvent::State(SessionState::Connected)]);
    // The server says nothing more; the client's pings go unanswered.
    let mut heard = Vec::new();
    let mut at = now;
    for _ in 0..30 {
        at += Duration::from_secs(1);
        core.turn(at);
        heard.extend(std::iter::from_fn(|| core.poll_event()));
    }
    assert_eq!(
        heard,
        [
            CoreEvent::DropConnection(DropReason::ReadTimeout),
            CoreEvent::State(SessionState::Suspended),
            CoreEvent::State(SessionState::Lost),
        ]
    );
    assert_eq!(client.state(), SessionState::Lost);
}

/// A driver about to sleep looks once more for commands sent since its
/// last turn (the wake-up it may have missed): the core says whether any
/// wait. Kills: Core::has_commands made `false` (core.rs:204), a lost
/// wake-up: a lock request sent in that window would wait for the next
/// timer.
#[test]
fn a_core_says_when_commands_wait_for_its_turn() {
    let now = Instant::now();
    let mut zk = sim_zookeeper::SimZooKeeper::new(now, Duration::from_millis(2000));
    let mut p = Peer::new(now, 9);
    pump(&mut zk, &mut [&mut p], now);
    assert!(!p.core.has_commands());
    let m = Mutex::new(&p.client, "/l").unwrap();
    let pending = m.start_lock(None);
    assert!(p.core.has_commands(), "the lock request waits for a turn");
    p.core.turn(now);
    assert!(!p.core.has_commands());
    pump(&mut zk, &mut [&mut p], now);
    assert!(pending.try_take().expect("a free lock").is_ok());
}

/// A caller blocked in `wait_connected` keeps its listener while others
/// subscribe: another listener's arrival (which forgets listeners whose
/// caller is gone) does not cut it off, and with no server it waits out
/// its own timeout. Kills: the scoped-listener test of the Subscribe
/// command made `strong_count() == 0` or `< 0` (core.rs:263), which drops
/// live waiters: they fail at once with Closed on a working client.
#[test]
fn a_caller_waiting_to_connect_is_not_cut_off_by_another_listener() {
    let now = Instant::now();
    let mut p = Peer::new(now, 10);
    let waiter = {
        let client = p.client.clone();
        std::thread::spawn(move || client.wait_connected(Duration::from_secs(1)))
    };
    // The waiter's listener reaches the core (no sleep: its command is
    // what this waits for; the bound only turns a core that never says so
    // into a failure instead of a hang).
    let give_up = Instant::now() + Duration::from_secs(30);
    while !p.core.has_commands() {
        assert!(Instant::now() < give_up, "no command arrived");
        std::thread::yield_now();
    }
    p.core.turn(now);
    let other = p.client.subscribe();
    p.core.turn(now);
    assert_eq!(other.try_recv(), Ok(p.client.state()));
    // No server: the waiter hears nothing more and times out, whatever
    // the time it took to get here. Cut off, it would say Closed.
    assert_eq!(
        waiter.join().expect("no panic"),
        Err(zklock::Error::Timeout)
    );
}

/// A scoped listener (`wait_connected`'s) is forgotten at the next
/// subscription once its caller has returned, on a session that never
/// changes state. Kills core.rs:263:85 `>`→`>=`, which kept every such
/// listener until the next state change: one channel leaked per call.
#[test]
fn a_returned_wait_connected_leaves_no_listener_behind() {
    let now = Instant::now();
    let mut p = Peer::new(now, 11);
    for _ in 0..3 {
        let client = p.client.clone();
        let waiter = std::thread::spawn(move || client.wait_connected(Duration::ZERO));
        assert_eq!(
            waiter.join().expect("no panic"),
            Err(zklock::Error::Timeout),
            "no server: nothing connects"
        );
    }
    // The three listeners' Subscribe commands were sent before their
    // callers returned; the core reads them all now, each one forgetting
    // the scoped ones before it whose token is gone.
    p.core.turn(now);
    let other = p.client.subscribe();
    p.core.turn(now);
    assert_eq!(other.try_recv(), Ok(p.client.state()));
    assert_eq!(p.core.state_listeners(), 1, "only `other` is left");
}

/// A holder whose node a third party deletes is told by any watch its
/// session has on the node: here only the caller's own (the lock taken
/// without `watch_node`). The guard says Lost before the caller's watch
/// hands over the deletion.
#[test]
fn a_deletion_heard_only_on_the_callers_watch_tells_the_holder_first() {
    let now = Instant::now();
    let mut zk = sim_zookeeper::SimZooKeeper::new(now, Duration::from_millis(2000));
    let mut a = Peer::new(now, 12);
    let options = zklock::recipes::MutexOptions::default().watch_node(false);
    let m = Mutex::with_options(&a.client, "/l", options).unwrap();
    let pending = m.start_lock(None);
    pump(&mut zk, &mut [&mut a], now);
    let guard = pending.try_take().expect("a free lock").unwrap();
    let node = guard.node_path().to_owned();
    let reader = {
        let (client, node) = (a.client.clone(), node.clone());
        std::thread::spawn(move || client.get_data_and_watch(&node))
    };
    // The caller's read reaches the core (the bound only turns a core
    // that never gets it into a failure instead of a hang).
    let give_up = Instant::now() + Duration::from_secs(30);
    while !a.core.has_commands() {
        assert!(Instant::now() < give_up, "no command arrived");
        std::thread::yield_now();
    }
    pump(&mut zk, &mut [&mut a], now);
    let (_, _, watch) = reader.join().expect("no panic").expect("the read");
    assert_eq!(guard.state(), LockState::Held);
    assert!(zk.delete_as_admin(now, &node));
    pump(&mut zk, &mut [&mut a], now);
    let event = watch.try_recv().expect("no error").expect("the deletion");
    assert_eq!(event.kind, zklock::EventType::NodeDeleted);
    assert_eq!(guard.state(), LockState::Lost, "told with the caller");
}

/// A manual core's first handshake is given a third of the session timeout
/// when no connect timeout is set (the I/O thread's rule for one host): a
/// silent server leaves time to try again before the wait for a session
/// ends. Kills builder.rs `session_timeout / 3` → `* 3` in `build_manual`.
#[test]
fn a_manual_cores_first_handshake_waits_a_third_of_the_session_timeout() {
    let now = Instant::now();
    let (_client, mut core) = Client::builder("127.0.0.1:2181")
        .session_timeout(Duration::from_secs(9))
        .build_manual(now, 12)
        .expect("a manual client");
    core.turn(now);
    assert!(core.wants_connection());
    core.prepare_connection();
    core.handle_connected(now);
    assert_eq!(core.poll_timeout(), Some(now + Duration::from_secs(3)));
}
