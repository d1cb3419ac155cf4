//! zklock's recipes at the end: each fails closed, sequence numbers parse
//! past it, and the observer is warned before it.

use super::*;

#[test]
fn mutex_fails_closed_at_the_counter_end() {
    let server = ZkHarness::start(TICK);
    let path = "/end/mutex";
    prepare(
        &server,
        |c| {
            Mutex::new(c, path)
                .unwrap()
                .lock()
                .unwrap()
                .unlock()
                .unwrap()
        },
        path,
    );
    let record = contend(
        &server,
        path,
        |c| Mutex::new(c, path).unwrap(),
        |m| m.lock_timeout(ACQUIRE),
    );
    assert_fail_closed(&record, "Mutex", BEFORE_END as usize);
    assert_eq!(server.stored(path).cversion, i32::MAX);
}

#[test]
fn rwlock_writers_fail_closed_at_the_counter_end() {
    let server = ZkHarness::start(TICK);
    let path = "/end/rw";
    prepare(
        &server,
        |c| {
            RwLock::new(c, path)
                .unwrap()
                .write()
                .unwrap()
                .unlock()
                .unwrap()
        },
        path,
    );
    let record = contend(
        &server,
        path,
        |c| RwLock::new(c, path).unwrap(),
        |l| l.write_timeout(ACQUIRE),
    );
    assert_fail_closed(&record, "RwLock (writers)", BEFORE_END as usize);
}

#[test]
fn semaphore_fails_closed_at_the_counter_end() {
    let server = ZkHarness::start(TICK);
    let path = "/end/sem";
    let parents = prepare(
        &server,
        |c| {
            Semaphore::new(c, path, 1)
                .unwrap()
                .acquire()
                .unwrap()
                .unlock()
                .unwrap()
        },
        path,
    );
    assert!(parents.len() >= 3, "semaphore parents: {parents:?}");
    let record = Arc::new(Record::default());
    // The error names whichever queue ran out (the gate or the leases).
    let threads: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let c = client(&server);
            let sem = Semaphore::new(&c, path, 1).unwrap();
            let record = record.clone();
            let parents = parents.clone();
            thread::spawn(move || {
                for _ in 0..ROUNDS {
                    match sem.acquire_timeout(ACQUIRE) {
                        Err(LockError::SequenceExhausted { path: p }) if parents.contains(&p) => {
                            record
                                .outcome(&p, Err(LockError::SequenceExhausted { path: p.clone() }))
                        }
                        other => record.outcome(path, other),
                    }
                }
                drop(sem);
                drop(c);
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a contender panicked");
    }
    assert_fail_closed(&record, "Semaphore (1 lease)", BEFORE_END as usize);
}

#[test]
fn election_fails_closed_at_the_counter_end() {
    let server = ZkHarness::start(TICK);
    let path = "/end/election";
    prepare(
        &server,
        |c| {
            Election::new(c, path, b"warm")
                .unwrap()
                .campaign()
                .unwrap()
                .unlock()
                .unwrap()
        },
        path,
    );
    let record = contend(
        &server,
        path,
        |c| Election::new(c, path, b"candidate").unwrap(),
        |e| e.campaign_timeout(ACQUIRE),
    );
    assert_fail_closed(&record, "Election", BEFORE_END as usize);
}

/// LeaderLatch campaigns again after every loss: at the end it must stop
/// with the typed error rather than lead on a node past the end. Each
/// client runs a latch until it gains (then resigns by dropping it) or
/// stops, `ROUNDS` times.
#[test]
fn leader_latch_stops_at_the_counter_end() {
    let server = ZkHarness::start(TICK);
    let path = "/end/latch";
    prepare(
        &server,
        |c| {
            Election::new(c, path, b"warm")
                .unwrap()
                .campaign()
                .unwrap()
                .unlock()
                .unwrap()
        },
        path,
    );
    let record = Arc::new(Record::default());
    let threads: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let c = client(&server);
            let record = record.clone();
            thread::spawn(move || {
                for _ in 0..ROUNDS {
                    let latch = Election::new(&c, path, b"latch").unwrap().latch();
                    match latch.events().recv_timeout(ACQUIRE) {
                        Ok(LatchEvent::Gained { .. }) => {
                            let latch = Arc::new(latch);
                            let l = latch.clone();
                            let id = record.begin_hold("latch", Arc::new(move || l.is_leader()));
                            thread::sleep(Duration::from_millis(5));
                            record.end_hold(id, "latch");
                            drop(latch);
                            continue;
                        }
                        Ok(LatchEvent::Stopped(LockError::SequenceExhausted { path: p })) => {
                            record.exhausted.fetch_add(1, Ordering::SeqCst);
                            if p != path {
                                record.wrong(format!("SequenceExhausted names {p}"));
                            }
                        }
                        other => record.wrong(format!("latch: {other:?}")),
                    }
                    drop(latch);
                }
                drop(c);
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a contender panicked");
    }
    assert_fail_closed(&record, "LeaderLatch", BEFORE_END as usize);
}

#[test]
fn sequence_numbers_parse_past_the_end() {
    assert_eq!(sequence_of("/a/_c_x-lock-2147483647"), i32::MAX);
    assert_eq!(sequence_of("/a/_c_x-lock--2147483648"), i32::MIN);
    assert_eq!(sequence_of("/a/_c_x-__WRIT__0000000012"), 12);
    assert_eq!(sequence_of("/a/_c_x-latch--000000001"), -1);
    assert_eq!(sequence_of("0f3a__lock__2147483647"), i32::MAX);
    assert_eq!(sequence_of("0f3a__lock__-2147483647"), -i32::MAX);
    assert_eq!(sequence_of("0f3a__lock__-000000012"), -12);
    assert_eq!(sequence_of("_c_9-lock-0000000001"), 1);
}

/// Well before the end, the observer (and the log) hear that the counter
/// runs out, once per node issued past `SEQUENCE_WARNING`; before it,
/// never.
#[test]
fn the_observer_is_warned_near_the_end() {
    use std::sync::atomic::AtomicI32;
    use zklock::recipes::SEQUENCE_WARNING;
    use zklock::Observer;
    #[derive(Default)]
    struct Warned {
        calls: AtomicUsize,
        last: AtomicI32,
    }
    impl Observer for Warned {
        fn sequence_near_end(&self, _node: &str, sequence: i32) {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.last.store(sequence, Ordering::SeqCst);
        }
    }
    let server = ZkHarness::start(TICK);
    let warned = Arc::new(Warned::default());
    let c = Client::builder(&server.connect_string())
        .session_timeout(SESSION)
        .observer(warned.clone())
        .connect()
        .unwrap();
    let path = "/end/warned";
    let m = Mutex::new(&c, path).unwrap();
    m.lock_timeout(ACQUIRE).unwrap().unlock().unwrap();
    assert_eq!(warned.calls.load(Ordering::SeqCst), 0, "far from the end");
    server.set_sequence_counter(path, SEQUENCE_WARNING + 1);
    for _ in 0..3 {
        m.lock_timeout(ACQUIRE).unwrap().unlock().unwrap();
    }
    assert_eq!(warned.calls.load(Ordering::SeqCst), 3);
    assert_eq!(warned.last.load(Ordering::SeqCst), SEQUENCE_WARNING + 3);
}

/// A holder that loops with `Mutex::requeue` uses a counter up fastest: it
/// is warned as often as one that locks and unlocks. ZooKeeper 3.8 answers
/// the create inside requeue's multi as a plain create (no Stat); the
/// warning comes from the name.
#[test]
fn requeue_near_the_end_warns_the_observer() {
    use std::sync::atomic::AtomicI32;
    use zklock::recipes::SEQUENCE_WARNING;
    use zklock::Observer;
    #[derive(Default)]
    struct Warned {
        calls: AtomicUsize,
        last: AtomicI32,
    }
    impl Observer for Warned {
        fn sequence_near_end(&self, _node: &str, sequence: i32) {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.last.store(sequence, Ordering::SeqCst);
        }
    }
    let server = ZkHarness::start(TICK);
    let warned = Arc::new(Warned::default());
    let c = Client::builder(&server.connect_string())
        .session_timeout(SESSION)
        .observer(warned.clone())
        .connect()
        .unwrap();
    let path = "/end/requeued";
    let m = Mutex::new(&c, path).unwrap();
    m.lock_timeout(ACQUIRE).unwrap().unlock().unwrap();
    server.set_sequence_counter(path, SEQUENCE_WARNING + 1);
    let mut guard = m.lock_timeout(ACQUIRE).unwrap();
    assert_eq!(warned.calls.load(Ordering::SeqCst), 1, "the lock itself");
    for round in 2..=4 {
        guard = m
            .requeue(guard, Some(Instant::now() + ACQUIRE))
            .wait()
            .unwrap_or_else(|e| panic!("requeue {round}: {e}"));
        assert_eq!(
            sequence_of(guard.node_path()),
            SEQUENCE_WARNING + round,
            "one create per requeue"
        );
        assert_eq!(
            warned.calls.load(Ordering::SeqCst),
            round as usize,
            "requeue {round} was not announced"
        );
        assert_eq!(warned.last.load(Ordering::SeqCst), SEQUENCE_WARNING + round);
    }
    guard.unlock().unwrap();
}
