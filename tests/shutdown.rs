//! Dropping the last Client ends its I/O thread, whatever the thread was
//! doing at that moment. (Its own binary: it counts this process's threads.)

use std::net::TcpListener;
use std::time::{Duration, Instant};

use zklock::Client;

/// Threads of this process named like the client's I/O thread.
fn io_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "zklock-io")
        .count()
}

#[test]
fn dropped_clients_leave_no_io_thread_behind() {
    // A port nobody listens on: the thread keeps trying to connect.
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    for i in 0..200 {
        let c = Client::builder(&dead.to_string())
            .session_timeout(Duration::from_secs(2))
            .wait_connected(false)
            .connect()
            .unwrap();
        // Vary the moment of the drop against the thread's retry timer.
        if i % 2 == 0 {
            std::thread::sleep(Duration::from_millis((i % 7) as u64 * 10));
        }
        drop(c);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while io_threads() > 0 {
        assert!(
            Instant::now() < deadline,
            "{} I/O threads outlived their clients",
            io_threads()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
