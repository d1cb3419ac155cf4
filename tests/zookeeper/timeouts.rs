//! Every duration the API takes, at its extremes (0, 1 ns, huge,
//! `Duration::MAX`), against a real server: no call panics or kills the I/O
//! thread; each either works, times out as asked, or is refused with a
//! typed error. And settings that cannot work are refused before anything
//! starts.

use std::time::{Duration, Instant};

use testkit::zk;
use zklock::recipes::{
    BatchMutex, Election, LockError, MultiLock, Mutex, PendingSet, RwLock, Semaphore,
};
use zklock::{AddWatchMode, Client, CreateMode, CreateOptions, Error, SessionState};

const T: Duration = Duration::from_secs(10);

/// The table: each value every timeout-taking call is tried with.
const EXTREMES: [Duration; 4] = [
    Duration::ZERO,
    Duration::from_nanos(1),
    Duration::from_secs(u64::MAX / 4),
    Duration::MAX,
];

fn connect_string() -> String {
    zk::shared().connect_string()
}

fn client() -> Client {
    testkit::shared_client(T)
}

fn path(name: &str, d: Duration) -> String {
    format!("/timeouts-{name}-{}-{}", std::process::id(), d.as_nanos())
}

#[test]
fn session_connect_and_request_timeouts_at_their_extremes() {
    for d in EXTREMES {
        // Session timeout: the server clamps what it is asked.
        let c = Client::connect(&connect_string(), d)
            .unwrap_or_else(|e| panic!("session timeout {d:?}: {e}"));
        assert_eq!(c.state(), SessionState::Connected, "{d:?}");
        assert!(c.negotiated_timeout().is_some_and(|t| t > Duration::ZERO));
        c.sync("/").unwrap();

        // Connect timeout: clamped, never fatal to the I/O thread.
        let c = Client::builder(&connect_string())
            .session_timeout(T)
            .connect_timeout(d)
            .connect()
            .unwrap_or_else(|e| panic!("connect timeout {d:?}: {e}"));
        c.sync("/").unwrap();

        // Request timeout: zero is refused, the rest are honoured.
        let built = Client::builder(&connect_string())
            .session_timeout(T)
            .request_timeout(d)
            .connect();
        if d.is_zero() {
            assert!(
                matches!(
                    built,
                    Err(Error::InvalidSetting {
                        setting: "request_timeout",
                        ..
                    })
                ),
                "{built:?}"
            );
            continue;
        }
        let c = built.unwrap_or_else(|e| panic!("request timeout {d:?}: {e}"));
        match c.exists("/") {
            Ok(stat) => assert!(stat.is_some()),
            // A 1 ns deadline may pass before the reply.
            Err(Error::Timeout) => assert!(d < Duration::from_millis(1), "{d:?}"),
            Err(e) => panic!("request timeout {d:?}: {e}"),
        }
        if d >= Duration::from_secs(1) {
            c.create(&path("request", d), b"", CreateMode::Ephemeral)
                .unwrap();
            let (_, _, watch) = c.get_data_and_watch(&path("request", d)).unwrap();
            c.delete(&path("request", d), None).unwrap();
            watch.recv_timeout(d).unwrap();
            let pw = c.add_watch("/", AddWatchMode::PersistentRecursive).unwrap();
            c.create(&path("persistent", d), b"", CreateMode::Ephemeral)
                .unwrap();
            pw.recv_timeout(d).unwrap();
        }
        match c.close() {
            Ok(()) => {}
            // The close is sent; its answer may take longer than 1 ns.
            Err(Error::Timeout) => assert!(d < Duration::from_millis(1), "{d:?}"),
            Err(e) => panic!("close with request timeout {d:?}: {e}"),
        }
    }
}

#[test]
fn waits_of_the_client_at_their_extremes() {
    let c = client();
    for d in EXTREMES {
        c.wait_connected(d)
            .unwrap_or_else(|e| panic!("wait_connected({d:?}): {e}"));
        let p = path("watch", d);
        c.create(&p, b"", CreateMode::Ephemeral).unwrap();
        let (_, watch) = c.exists_and_watch(&p).unwrap();
        // Nothing yet: a short wait ends empty-handed, at once.
        if d < Duration::from_millis(1) {
            assert_eq!(watch.recv_timeout(d).unwrap_err(), Error::Timeout);
        }
        c.set_data(&p, b"x", None).unwrap();
        // The event is there (or comes): a long wait returns with it.
        let started = Instant::now();
        let event = loop {
            match watch.recv_timeout(d.max(Duration::from_millis(1))) {
                Ok(e) => break e,
                Err(Error::Timeout) if started.elapsed() < T => {}
                Err(e) => panic!("watch recv_timeout({d:?}): {e}"),
            }
        };
        assert_eq!(event.path, p);
    }
}

/// A lock taken with each extreme timeout: free, it is had at once; held
/// by another, the short waits time out and the long ones are not tried.
#[test]
fn lock_timeouts_at_their_extremes() {
    let c = client();
    let other = client();
    for d in EXTREMES {
        let short = d < Duration::from_secs(1);
        let p = path("mutex", d);
        let g = Mutex::new(&c, &p)
            .unwrap()
            .lock_timeout(d)
            .unwrap_or_else(|e| panic!("Mutex::lock_timeout({d:?}): {e}"));
        if short {
            let started = Instant::now();
            assert_eq!(
                Mutex::new(&other, &p).unwrap().lock_timeout(d).unwrap_err(),
                LockError::Timeout
            );
            assert!(started.elapsed() < T);
        }
        drop(g);

        let p = path("rwlock", d);
        let rw = RwLock::new(&c, &p).unwrap();
        drop(
            rw.write_timeout(d)
                .unwrap_or_else(|e| panic!("write {d:?}: {e}")),
        );
        drop(
            rw.read_timeout(d)
                .unwrap_or_else(|e| panic!("read {d:?}: {e}")),
        );

        let sem = Semaphore::new(&c, &path("semaphore", d), 2).unwrap();
        drop(
            sem.acquire_timeout(d)
                .unwrap_or_else(|e| panic!("semaphore {d:?}: {e}")),
        );

        let e = Election::new(&c, &path("election", d), b"me").unwrap();
        drop(
            e.campaign_timeout(d)
                .unwrap_or_else(|e| panic!("campaign {d:?}: {e}")),
        );

        let (a, b) = (path("multi-a", d), path("multi-b", d));
        let multi = MultiLock::new(&c, &[&a, &b]).unwrap();
        drop(
            multi
                .lock_timeout(d)
                .unwrap_or_else(|e| panic!("multi {d:?}: {e}")),
        );

        let batch = BatchMutex::new(&c, &path("batch", d), 4).unwrap();
        drop(
            batch
                .lock_timeout(d)
                .unwrap_or_else(|e| panic!("batch {d:?}: {e}")),
        );

        let m = Mutex::new(&c, &path("pending", d)).unwrap();
        let pending = m.start_lock(None);
        drop(
            pending
                .wait_timeout(d)
                .or_else(|e| match e {
                    // A zero wait may end before the reply; the lock is
                    // then given up, and asked for again below.
                    LockError::Timeout if short => m.lock_timeout(T),
                    e => Err(e),
                })
                .unwrap_or_else(|e| panic!("PendingLock::wait_timeout({d:?}): {e}")),
        );

        let mut set = PendingSet::new();
        set.start_lock(&m, None);
        let started = Instant::now();
        let outcome = loop {
            if let Some(o) = set.recv_timeout(d) {
                break o;
            }
            assert!(started.elapsed() < T, "PendingSet::recv_timeout({d:?})");
        };
        drop(
            outcome
                .1
                .unwrap_or_else(|e| panic!("PendingSet {d:?}: {e}")),
        );
    }
}

/// A max hold at each extreme: zero is refused by every recipe before
/// anything is sent; 1 ns ends each hold as soon as it is granted (the
/// guard says `Lost` with `MaxHold`, its node goes); the huge ones hold as
/// if there were none.
#[test]
fn max_holds_at_their_extremes() {
    use zklock::recipes::{LockState, LossReason, MutexOptions};
    let c = client();
    for d in EXTREMES {
        let options = MutexOptions::default().max_hold(d);
        let p = path("max-hold", d);
        let refused = |what: &str, r: Result<(), LockError>| {
            if d.is_zero() {
                assert!(
                    matches!(
                        r,
                        Err(LockError::Client(Error::InvalidSetting {
                            setting: "max_hold",
                            ..
                        }))
                    ),
                    "{what}: {r:?}"
                );
            } else {
                assert_eq!(r, Ok(()), "{what} with max_hold({d:?})");
            }
        };
        let mutex = Mutex::with_options(&c, &p, options.clone());
        refused("Mutex", mutex.as_ref().map(|_| ()).map_err(Clone::clone));
        let (a, b) = (format!("{p}-a"), format!("{p}-b"));
        let others = [
            (
                "RwLock",
                RwLock::with_options(&c, &p, options.clone()).map(drop),
            ),
            (
                "Semaphore",
                Semaphore::with_options(&c, &p, 2, options.clone()).map(drop),
            ),
            (
                "MultiLock",
                MultiLock::with_options(&c, &[&a, &b], options.clone()).map(drop),
            ),
            (
                "BatchMutex",
                BatchMutex::with_options(&c, &p, 2, options.clone()).map(drop),
            ),
            (
                "Election",
                Election::with_options(&c, &p, b"me", options.clone()).map(drop),
            ),
        ];
        for (what, r) in others {
            refused(what, r);
        }
        let Ok(mutex) = mutex else { continue };
        let guard = mutex
            .lock_timeout(T)
            .unwrap_or_else(|e| panic!("lock with max_hold({d:?}): {e}"));
        if d < Duration::from_secs(1) {
            let lost = testkit::poll_until(T, || guard.state() == LockState::Lost);
            assert!(lost, "max_hold({d:?}) never ended the hold");
            assert_eq!(guard.lost_reason(), Some(LossReason::MaxHold));
            testkit::wait_no_children(&c, &p, T);
        } else {
            assert_eq!(guard.state(), LockState::Held, "max_hold({d:?})");
            assert!(guard.valid_until().is_some());
        }
        assert_eq!(guard.unlock(), Ok(()));
    }
}

/// A TTL outside what the server takes is refused before sending; one
/// inside is sent (created, or refused by the server itself when it does
/// not enable TTL nodes).
#[test]
fn ttls_at_their_extremes() {
    let c = client();
    for d in EXTREMES {
        let options = CreateOptions::new(CreateMode::PersistentWithTtl).ttl(d);
        let e = c.create_with(&path("ttl", d), b"", &options).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "ttl {d:?}: {e:?}");
    }
    let sane = CreateOptions::new(CreateMode::PersistentWithTtl).ttl(Duration::from_secs(60));
    match c.create_with(&path("ttl", T), b"", &sane) {
        Ok(_) => {}
        Err(e) => assert!(e.code().is_some(), "the server's answer: {e:?}"),
    }
}

#[test]
fn settings_that_cannot_work_are_refused_before_anything_starts() {
    let started = Instant::now();
    for frame in [0, 1, zklock::MIN_MAX_FRAME - 1] {
        let e = Client::builder(&connect_string())
            .max_frame(frame)
            .connect()
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::InvalidSetting {
                    setting: "max_frame",
                    ..
                }
            ),
            "max_frame({frame}): {e:?}"
        );
        assert!(e.to_string().contains("max_frame"), "{e}");
    }
    Client::builder(&connect_string())
        .max_frame(zklock::MIN_MAX_FRAME)
        .connect()
        .expect("the smallest frame limit accepted works");
    // A persistent watch needs room for a re-read event and the end: 2.
    for capacity in [0, 1] {
        let e = Client::builder(&connect_string())
            .persistent_watch_capacity(capacity)
            .connect()
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::InvalidSetting {
                    setting: "persistent_watch_capacity",
                    ..
                }
            ),
            "persistent_watch_capacity({capacity}): {e:?}"
        );
    }
    Client::builder(&connect_string())
        .persistent_watch_capacity(2)
        .connect()
        .expect("the smallest watch capacity accepted works");
    for s in ["127.0.0.1:0", "127.0.0.1:2181,127.0.0.1:0/app", "[::1]:0"] {
        let e = Client::connect(s, T).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidConnectString(why) if why.contains("port 0")),
            "{s}: {e:?}"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "refusals come at once, not after a timeout: {:?}",
        started.elapsed()
    );
}
