//! Dropping the last Client ends its I/O thread, whatever the thread was
//! doing at that moment. (In whole_process, one test at a time: it counts
//! this process's I/O threads.)

use std::net::TcpListener;
use std::time::Duration;

use testkit::{io_thread_ids, poll_until};
use zklock::Client;

#[test]
fn dropped_clients_leave_no_io_thread_behind() {
    let _turn = crate::one_at_a_time();
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
    let ended = poll_until(Duration::from_secs(10), || io_thread_ids().is_empty());
    assert!(
        ended,
        "{} I/O threads outlived their clients",
        io_thread_ids().len()
    );
}
