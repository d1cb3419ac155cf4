//! A client's I/O thread at rest: asleep while its session is over and a
//! clone still holds the client, and still serving after a signal handler
//! of the program ran on it (a program that handles SIGTERM or SIGUSR1, as
//! the CLI does, has no say on which of its threads takes the signal).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use testkit::{io_thread_ids, poll_until, thread_cpu_over, thread_state, wait_until};
use zklock::{Client, SessionState};

const WAIT: Duration = Duration::from_secs(20);

/// The one I/O thread of this process (tests here take turns).
fn the_io_thread() -> u32 {
    let mut ids = Default::default();
    let one = poll_until(WAIT, || {
        ids = io_thread_ids();
        ids.len() == 1
    });
    assert!(one, "expected one I/O thread, found {ids:?}");
    ids.into_iter().next().unwrap_or_default()
}

/// Kills: `Driver::next_deadline` `&&` → `||` (with no connection and none
/// wanted, the retry time of the host list, long past, became the poll's
/// timeout: the thread spun until the last clone went).
#[test]
fn an_ended_sessions_thread_sleeps_while_a_clone_remains() {
    let _turn = crate::one_at_a_time();
    let server = testkit::zk::shared();
    let client = Client::connect(&server.connect_string(), WAIT).unwrap();
    let tid = the_io_thread();
    let clone = client.clone();
    client.close().unwrap();
    drop(client);
    assert!(clone.exists("/").is_err(), "a closed session answered");
    assert_eq!(clone.state(), SessionState::Closed);
    let window = Duration::from_millis(1500);
    let used = thread_cpu_over(tid, window).expect("the I/O thread lives while a clone does");
    assert!(
        used < Duration::from_millis(50),
        "the I/O thread of a closed session used {used:?} of CPU in {window:?}"
    );
    drop(clone);
    wait_until("the I/O thread to end", WAIT, || {
        !io_thread_ids().contains(&tid)
    });
}

/// Kills: `Driver::run` `==` → `!=` on the poll's error kind (an
/// interrupted wait stopped the I/O thread, and with it the session).
#[test]
fn a_signal_handled_on_the_io_thread_leaves_its_client_serving() {
    let _turn = crate::one_at_a_time();
    let handled = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGUSR1, handled.clone()).unwrap();
    let server = testkit::zk::shared();
    let client = Client::connect(&server.connect_string(), WAIT).unwrap();
    let tid = the_io_thread();
    for round in 0..20 {
        // Asleep in its poll, which a handled signal cuts short.
        wait_until("the I/O thread to sleep", WAIT, || {
            thread_state(tid) == Some('S')
        });
        handled.store(false, Ordering::SeqCst);
        signal_thread(tid, signal_hook::consts::SIGUSR1);
        wait_until("the handler to run", WAIT, || {
            handled.load(Ordering::SeqCst)
        });
        assert!(
            client
                .exists("/")
                .unwrap_or_else(|e| panic!("round {round}: {e}"))
                .is_some(),
            "round {round}"
        );
    }
    assert_eq!(client.state(), SessionState::Connected);
    assert!(io_thread_ids().contains(&tid), "the I/O thread ended");
    client.close().unwrap();
}

/// Sends `signal` to one thread of this process.
fn signal_thread(tid: u32, signal: i32) {
    // SAFETY: tgkill reads only its three integer arguments.
    let sent = unsafe {
        libc::syscall(
            libc::SYS_tgkill,
            libc::c_long::from(std::process::id() as i32),
            libc::c_long::from(tid as i32),
            libc::c_long::from(signal),
        )
    };
    assert_eq!(sent, 0, "tgkill: {}", std::io::Error::last_os_error());
}
