//! A client that outlives its sessions, against a real ZooKeeper: what an
//! expiry ends (holders, waiters, watches), and that the same client and
//! the same recipe values carry on on the next session. Expiries are made
//! through a [`ClientLink`] (Curator's KillSession: the server closes the
//! session and drops its connection).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use testkit::{wait_children, wait_until, zk, ClientLink};
use zklock::recipes::{Election, LatchEvent, LockError, LockGuard, LockState, LossReason, Mutex};
use zklock::{
    perms, Acl, AddWatchMode, Client, CreateMode, CreateOptions, Error, Id, SessionChange,
    SessionState,
};

const T: Duration = Duration::from_secs(6);
const WAIT: Duration = Duration::from_secs(30);

fn path(name: &str) -> String {
    format!("/renewal-{name}-{}", std::process::id())
}

/// A client of the shared server through a link of its own.
fn linked() -> (ClientLink, Client) {
    let link = ClientLink::start(&zk::shared().connect_string());
    let c = Client::connect(&link.connect_string(), T).expect("connect through the link");
    (link, c)
}

fn observer() -> Client {
    Client::connect(&zk::shared().connect_string(), T).expect("connect")
}

/// The session states a subscription hears until the client is Connected
/// on a session other than `old`.
fn until_new_session(c: &Client, states: &Receiver<SessionState>, old: i64) -> Vec<SessionState> {
    let until = Instant::now() + WAIT;
    let mut heard = Vec::new();
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match states.recv_timeout(left) {
            Ok(s) => heard.push(s),
            Err(e) => {
                panic!("no new session after {old:#x} within {WAIT:?} ({e}); heard {heard:?}")
            }
        }
        if heard.last() == Some(&SessionState::Connected) && c.session_id() != old {
            return heard;
        }
    }
}

/// Expired is heard, then Connecting, then Connected, with nothing
/// Connected between the expiry and the new session.
fn assert_expired_then_new(heard: &[SessionState]) {
    let expired = heard
        .iter()
        .position(|s| *s == SessionState::Expired)
        .unwrap_or_else(|| panic!("no Expired in {heard:?}"));
    assert_eq!(
        &heard[expired..],
        [
            SessionState::Expired,
            SessionState::Connecting,
            SessionState::Connected
        ],
        "{heard:?}"
    );
}

/// What a subscription with session ids hears from the expiry of `old` to
/// the next session's `Connected`: the old session's `Expired`, a new
/// session's `Connecting` (no id yet), then `Connected` under the id the
/// client reports.
fn assert_changes_name_both_sessions(c: &Client, changes: &Receiver<SessionChange>, old: i64) {
    let mut heard = Vec::new();
    let until = Instant::now() + WAIT;
    while !heard
        .last()
        .is_some_and(|h: &SessionChange| h.state == SessionState::Connected && h.session_id != old)
    {
        let left = until.saturating_duration_since(Instant::now());
        match changes.recv_timeout(left) {
            Ok(change) => heard.push(change),
            Err(e) => {
                panic!("no new session after {old:#x} within {WAIT:?} ({e}); heard {heard:?}")
            }
        }
    }
    let states: Vec<(SessionState, i64)> = heard.iter().map(|h| (h.state, h.session_id)).collect();
    let expired = states
        .iter()
        .position(|(s, _)| *s == SessionState::Expired)
        .unwrap_or_else(|| panic!("no Expired in {states:x?}"));
    assert_eq!(
        &states[expired..],
        [
            (SessionState::Expired, old),
            (SessionState::Connecting, 0),
            (SessionState::Connected, c.session_id()),
        ],
        "{states:x?}"
    );
    assert!(
        states[..expired].iter().all(|(_, id)| *id == old),
        "before the expiry only the old session: {states:x?}"
    );
}

fn wait_lost(guard: &LockGuard) {
    let changes = guard.state_changes();
    wait_until("the guard to say Lost", WAIT, || {
        while changes.try_recv().is_ok() {}
        guard.state() == LockState::Lost
    });
    // The server deletes the session's nodes (firing their watches) before
    // it drops the connection: the holder may hear either first.
    assert!(
        matches!(
            guard.lost_reason(),
            Some(LossReason::SessionExpired | LossReason::NodeDeleted)
        ),
        "{:?}",
        guard.lost_reason()
    );
}

/// Expiry while holding: the guard is Lost for good; subscribers hear
/// Expired, then the new session (with each session's id, when they ask
/// for it); the same `Mutex` holds on it, and the
/// new node is the new session's.
#[test]
fn expiry_while_holding_loses_the_guard_and_the_same_mutex_holds_again() {
    let (link, c) = linked();
    let p = path("holding");
    let m = Mutex::new(&c, &p).unwrap();
    let old_guard = m.lock_timeout(WAIT).unwrap();
    let first = c.session_id();
    let states = c.subscribe();
    assert_eq!(states.recv_timeout(WAIT), Ok(SessionState::Connected));
    let changes = c.session_changes();

    let expired_at = Instant::now();
    link.expire_session();
    let heard = until_new_session(&c, &states, first);
    let reopened = expired_at.elapsed();
    assert_expired_then_new(&heard);
    assert_changes_name_both_sessions(&c, &changes, first);
    wait_lost(&old_guard);
    let second = c.session_id();
    assert_ne!(second, first);
    // On a healthy server the new session is asked for as soon as the
    // expiry is heard, and opens within one handshake.
    assert!(reopened < T, "the new session took {reopened:?}");

    let guard = m.lock_timeout(WAIT).unwrap();
    assert_eq!(guard.state(), LockState::Held);
    assert_eq!(guard.owner_session(), second);
    let view = observer();
    let node = format!("{p}/{}", testkit::children(&view, &p).join(""));
    assert_eq!(
        view.exists(&node).unwrap().map(|s| s.ephemeral_owner),
        Some(second),
        "the only contender is the new session's node"
    );
    assert_eq!(old_guard.state(), LockState::Lost, "never Held again");
}

/// Expiry while waiting: the waiter fails with SessionExpired; on the new
/// session the same `Mutex` queues again and is served when the holder
/// lets go.
#[test]
fn expiry_while_waiting_fails_the_waiter_and_the_next_wait_is_served() {
    let (link, c) = linked();
    let p = path("waiting");
    let holder = observer();
    let held = Mutex::new(&holder, &p).unwrap().lock_timeout(WAIT).unwrap();
    let m = Arc::new(Mutex::new(&c, &p).unwrap());
    let first = c.session_id();
    let waiter = std::thread::spawn({
        let m = m.clone();
        move || m.lock_timeout(WAIT).map(drop)
    });
    wait_children(&holder, &p, 2, WAIT);
    link.expire_session();
    assert_eq!(
        waiter.join().unwrap().unwrap_err(),
        LockError::SessionExpired
    );
    wait_until("a new session", WAIT, || {
        c.state() == SessionState::Connected && c.session_id() != first
    });
    let waiter = std::thread::spawn({
        let m = m.clone();
        move || m.lock_timeout(WAIT).map(|g| g.owner_session())
    });
    wait_children(&holder, &p, 2, WAIT);
    drop(held);
    assert_eq!(waiter.join().unwrap().unwrap(), c.session_id());
}

/// Expiry while leading: the latch reports the loss and leads again on the
/// new session, with a larger fencing token; it never stops.
#[test]
fn expiry_while_leading_the_latch_campaigns_and_leads_again() {
    let (link, c) = linked();
    let latch = Election::new(&c, &path("leading"), b"a").unwrap().latch();
    let events = latch.events().clone();
    let first_token = match events.recv_timeout(WAIT) {
        Ok(LatchEvent::Gained { fencing_token }) => fencing_token,
        other => panic!("first event: {other:?}"),
    };
    link.expire_session();
    let mut heard = Vec::new();
    let second_token = loop {
        match events.recv_timeout(WAIT) {
            Ok(LatchEvent::Gained { fencing_token }) => break fencing_token,
            Ok(LatchEvent::Stopped(e)) => panic!("the latch stopped: {e} after {heard:?}"),
            Ok(e) => heard.push(e),
            Err(e) => panic!("no new leadership ({e}); heard {heard:?}"),
        }
    };
    assert!(
        heard.iter().any(|e| matches!(e, LatchEvent::Lost { .. })),
        "the loss is told first: {heard:?}"
    );
    assert!(second_token > first_token);
    assert!(latch.is_leader());
    latch.close(zklock::recipes::CloseMode::Silent).unwrap();
}

/// An expiry while the client is closing opens no new session: the close
/// ends the client, whatever the server said meanwhile.
#[test]
fn expiry_while_closing_opens_no_new_session() {
    let (link, c) = linked();
    let guard = Mutex::new(&c, &path("closing"))
        .unwrap()
        .lock_timeout(WAIT)
        .unwrap();
    let first = link.last_session().expect("a session").session_id;
    link.blackhole();
    link.expire_session();
    let closing = std::thread::spawn({
        let c = c.clone();
        move || c.close()
    });
    // Closed for its users as soon as the close is asked.
    wait_until("the close to be asked", WAIT, || {
        c.state() == SessionState::Closed
    });
    link.heal();
    // The close ends by its reply or by its wait; either way, closed.
    let _ = closing.join().unwrap();
    assert_eq!(c.state(), SessionState::Closed);
    assert_eq!(c.wait_connected(T).unwrap_err(), Error::Closed);
    assert_eq!(guard.state(), LockState::Lost);
    assert_eq!(
        link.last_session().map(|s| s.session_id),
        Some(first),
        "no new session went through the link"
    );
}

/// Two expiries in a row, and one while the client is reconnecting (its
/// link refusing connections): each time the next session opens and the
/// same `Mutex` holds on it.
#[test]
fn two_expiries_in_a_row_and_one_during_a_reconnect() {
    let (link, c) = linked();
    let m = Mutex::new(&c, &path("twice")).unwrap();
    let mut sessions = vec![c.session_id()];
    for during_reconnect in [false, false, true] {
        let guard = m.lock_timeout(WAIT).unwrap();
        let states = c.subscribe();
        let old = c.session_id();
        if during_reconnect {
            link.refuse(true);
            link.drop_connections();
            wait_until("the client to notice", WAIT, || {
                c.state() != SessionState::Connected
            });
            link.expire_session();
            link.refuse(false);
        } else {
            link.expire_session();
        }
        assert_expired_then_new(&until_new_session(&c, &states, old));
        wait_lost(&guard);
        sessions.push(c.session_id());
    }
    let mut distinct = sessions.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "four sessions: {sessions:x?}");
    assert_eq!(m.lock_timeout(WAIT).unwrap().state(), LockState::Held);
}

/// The credentials go to the new session: a node only this identity may
/// read stays readable after the expiry.
#[test]
fn digest_credentials_are_carried_to_the_new_session() {
    let (link, c) = linked();
    c.add_auth("digest", b"renewer:secret").unwrap();
    let p = path("digest");
    let creator_only = vec![Acl {
        perms: perms::ALL,
        id: Id {
            scheme: "auth".into(),
            id: String::new(),
        },
    }];
    c.create_with(
        &p,
        b"mine",
        &CreateOptions::new(CreateMode::Persistent).acl(creator_only),
    )
    .unwrap();
    assert!(observer().get_data(&p).is_err(), "the ACL bites");
    let first = c.session_id();
    let states = c.subscribe();
    link.expire_session();
    until_new_session(&c, &states, first);
    assert_eq!(c.get_data(&p).unwrap().0, b"mine");
}

/// The old session's watches, one-shot and persistent, end with
/// `SessionExpired`; watches set on the new session fire.
#[test]
fn the_old_sessions_watches_end_with_session_expired() {
    let (link, c) = linked();
    let p = path("watches");
    c.create(&p, b"", CreateMode::Persistent).unwrap();
    let (_, one_shot) = c.exists_and_watch(&p).unwrap();
    let persistent = c.add_watch(&p, AddWatchMode::Persistent).unwrap();
    let first = c.session_id();
    let states = c.subscribe();
    link.expire_session();
    assert_eq!(
        one_shot.recv_timeout(WAIT).unwrap_err(),
        Error::SessionExpired
    );
    let ended = loop {
        match persistent.recv_timeout(WAIT) {
            // A re-read event before the end is allowed.
            Ok(_) => continue,
            Err(e) => break e,
        }
    };
    assert_eq!(ended, Error::SessionExpired);
    until_new_session(&c, &states, first);
    let (_, fresh) = c.exists_and_watch(&p).unwrap();
    observer().set_data(&p, b"x", None).unwrap();
    assert!(fresh.recv_timeout(WAIT).is_ok());
}

/// Every recipe value made before an expiry works on the new session as
/// it is: each takes its lock (each guard the new session's where it tells).
#[test]
fn every_recipe_value_works_on_the_new_session() {
    use zklock::recipes::{BatchMutex, MultiLock, RwLock, Semaphore};
    let (link, c) = linked();
    let p = |name: &str| format!("{}/{name}", path("recipes"));
    let rw = RwLock::new(&c, &p("rw")).unwrap();
    let sem = Semaphore::new(&c, &p("sem"), 2).unwrap();
    let multi = MultiLock::new(&c, &[&p("m0"), &p("m1")]).unwrap();
    let batch = BatchMutex::new(&c, &p("batch"), 2).unwrap();
    let election = Election::new(&c, &p("election"), b"a").unwrap();
    // Each used once on the first session.
    drop(rw.write_timeout(WAIT).unwrap());
    drop(sem.acquire_timeout(WAIT).unwrap());
    drop(multi.lock_timeout(WAIT).unwrap());
    drop(batch.lock_timeout(WAIT).unwrap());
    drop(election.campaign_timeout(WAIT).unwrap());

    let first = c.session_id();
    let states = c.subscribe();
    link.expire_session();
    until_new_session(&c, &states, first);
    let second = c.session_id();

    let w = rw.write_timeout(WAIT).unwrap();
    assert_eq!(w.owner_session(), second);
    drop(w);
    let r = rw.read_timeout(WAIT).unwrap();
    assert_eq!(r.owner_session(), second);
    drop(r);
    let lease = sem.acquire_timeout(WAIT).unwrap();
    assert_eq!(lease.owner_session(), second);
    drop(lease);
    assert!(multi.lock_timeout(WAIT).is_ok());
    assert!(batch.lock_timeout(WAIT).is_ok());
    let leader = election.campaign_timeout(WAIT).unwrap();
    assert_eq!(leader.owner_session(), second);
}
