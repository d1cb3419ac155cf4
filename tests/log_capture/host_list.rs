//! The host list: garbage-speaking, dead and silent hosts are skipped, and
//! all dead fails in bounded time.

use super::*;

#[test]
fn garbage_speaking_hosts_in_the_list_are_skipped() {
    init();
    let server = fast();
    let garbage = GarbageServer::start();

    // Only garbage: never connected, keeps retrying (every kind of junk), no panic.
    let t = Duration::from_secs(2);
    let start = Instant::now();
    let r = Client::connect(&garbage.addr().to_string(), t);
    assert!(matches!(r, Err(Error::NoSession(_))), "{r:?}");
    assert!(start.elapsed() < t + Duration::from_secs(2));
    let c = Client::builder(&garbage.addr().to_string())
        .session_timeout(t)
        .wait_connected(false)
        .connect()
        .unwrap();
    let before = garbage.accepted();
    wait_until(
        "four more attempts on the garbage host",
        Duration::from_secs(15),
        || garbage.accepted() >= before + 4,
    );
    assert_eq!(c.state(), SessionState::Connecting);
    assert_eq!(c.session_id(), 0);
    drop(c);

    // Garbage plus a real server: every client ends up on the real one.
    let cs = format!("{},{}", garbage.addr(), server.addr());
    for i in 0..4 {
        let c = Client::connect(&cs, Duration::from_secs(4))
            .unwrap_or_else(|e| panic!("client {i}: {e:?}"));
        assert!(c.exists("/").unwrap().is_some());
        assert_eq!(c.state(), SessionState::Connected);
    }
    assert_no_io_panic();
}

// ---------------------------------------------------------------------------
// 6. Multi-host failover
// ---------------------------------------------------------------------------

#[test]
fn dead_and_silent_hosts_are_skipped_and_all_dead_fails_in_bounded_time_without_spinning() {
    init();
    let server = fast();
    let dead = testkit::free_ports(2);
    // Listens (the kernel completes TCP handshakes) but never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap();

    let t = Duration::from_secs(3);
    let cs = format!("127.0.0.1:{},{silent_addr},{}", dead[0], server.addr());
    for i in 0..3 {
        let start = Instant::now();
        let c = Client::connect(&cs, t).unwrap_or_else(|e| panic!("client {i}: {e:?}"));
        assert!(start.elapsed() < t, "took {:?}", start.elapsed());
        assert!(c.exists("/").unwrap().is_some());
    }

    // Every host dead: connect gives up after about the session timeout,
    // naming both.
    let all_dead = format!("127.0.0.1:{},127.0.0.1:{}", dead[0], dead[1]);
    let start = Instant::now();
    let r = Client::connect(&all_dead, t);
    let took = start.elapsed();
    assert!(
        matches!(&r, Err(Error::NoSession(ns)) if ns.servers.len() == 2),
        "{r:?}"
    );
    assert!(took < t + Duration::from_secs(2), "connect took {took:?}");

    // And its I/O thread sleeps between attempts. Find the thread of a new
    // client (retrying if another test spawned one at the same moment).
    let mut probe = None;
    for _ in 0..5 {
        let before = io_thread_ids();
        let c = Client::builder(&all_dead)
            .session_timeout(t)
            .wait_connected(false)
            .connect()
            .unwrap();
        // A new thread names itself once it runs: wait for that.
        let mut new = Vec::new();
        let named = Instant::now();
        while new.is_empty() && named.elapsed() < Duration::from_secs(2) {
            new = io_thread_ids().difference(&before).copied().collect();
            thread::sleep(Duration::from_millis(5));
        }
        if let [tid] = new[..] {
            probe = Some((c, tid));
            break;
        }
    }
    let (c, tid) = probe.expect("could not single out the new client's I/O thread");
    // Let its backoff reach the steady state, then measure over a second.
    wait_until("the backoff to settle", Duration::from_secs(5), || {
        Instant::now() >= start + took + Duration::from_secs(2)
    });
    let measure = Duration::from_millis(1500);
    let used = thread_cpu_over(tid, measure).expect("cpu of the I/O thread");
    assert_eq!(c.state(), SessionState::Connecting);
    assert!(
        used < Duration::from_millis(50),
        "the I/O thread used {used:?} of CPU in {measure:?} with every host dead"
    );
    drop(c);
    // Dropping a client that never connected ends its I/O thread.
    wait_until(
        "the dropped client's I/O thread to end",
        Duration::from_secs(5),
        || !io_thread_ids().contains(&tid),
    );

    // A host that accepts and closes at once: attempts are paced by the backoff.
    let closer = TcpListener::bind("127.0.0.1:0").unwrap();
    let closer_addr = closer.local_addr().unwrap();
    let attempts = Arc::new(AtomicU64::new(0));
    {
        let attempts = attempts.clone();
        thread::spawn(move || {
            for conn in closer.incoming().flatten() {
                attempts.fetch_add(1, Ordering::SeqCst);
                let _ = conn.shutdown(Shutdown::Both);
            }
        });
    }
    let c = Client::builder(&closer_addr.to_string())
        .session_timeout(t)
        .wait_connected(false)
        .connect()
        .unwrap();
    wait_until("a few attempts", Duration::from_secs(10), || {
        attempts.load(Ordering::SeqCst) >= 3
    });
    let (a0, w0) = (attempts.load(Ordering::SeqCst), Instant::now());
    wait_until("the measuring window", measure * 2, || {
        w0.elapsed() >= measure * 2
    });
    let rate = (attempts.load(Ordering::SeqCst) - a0) as f64 / w0.elapsed().as_secs_f64();
    eprintln!("failover: all-dead connect failed after {took:?}; idle I/O thread used {used:?}; {rate:.1} attempts/s on a closing host");
    assert!(rate < 10.0, "{rate:.1} connection attempts per second");
    drop(c);
    drop(silent);
    assert_no_io_panic();
}
