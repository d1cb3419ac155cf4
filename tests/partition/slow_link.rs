//! A slow but steady link is no fault: a holder behind a round trip just
//! inside the leader check's bound, 5T/24 (docs/PARTITION.md, "No false
//! alarm"), stays Held and its session Connected.

use super::*;

use crate::delay_line::DelayLine;

/// T = 8 s on a follower, through a link that delays every chunk 750 ms
/// each way: a round trip of 1.5 s and the servers' own time, about
/// 0.19 T, inside the bound of 5T/24 (1667 ms). One held `Mutex`, observed
/// for four timeouts: no state change. Before the probes were pipelined
/// (each waited for the previous answer), such a link said Suspended
/// within a timeout.
#[test]
fn a_holder_behind_a_slow_steady_link_inside_the_bound_is_never_suspended() {
    const T: Duration = Duration::from_secs(8);
    let ens = ensemble();
    let follower = ens.member_addr(ens.followers()[0]);
    let line = DelayLine::start(follower, Duration::from_millis(750));
    let client = Client::builder(&line.addr().to_string())
        .session_timeout(T)
        .connect()
        .unwrap();
    assert_eq!(client.negotiated_timeout(), Some(T));
    let session_states = client.subscribe();
    assert_eq!(
        session_states.recv_timeout(WAIT),
        Ok(zklock::SessionState::Connected)
    );
    let asked = Instant::now();
    client.sync("/").unwrap();
    eprintln!(
        "a sync's round trip through the line: {:?}",
        asked.elapsed()
    );
    let path = format!("/partition-slow-link-{}", std::process::id());
    let guard = Mutex::new(&client, &path)
        .unwrap()
        .lock_timeout(WAIT)
        .unwrap();
    let guard_states = guard.state_changes();
    assert_eq!(guard_states.recv_timeout(WAIT), Ok(LockState::Held));
    // The observation window: four timeouts, more than five times 3T/4.
    match guard_states.recv_timeout(T * 4) {
        Err(RecvTimeoutError::Timeout) => {}
        other => panic!(
            "the holder left Held behind a healthy slow link: {other:?} (session states {:?})",
            session_states.try_iter().collect::<Vec<_>>()
        ),
    }
    let seen: Vec<_> = session_states.try_iter().collect();
    assert!(
        seen.is_empty(),
        "session states behind a healthy slow link: {seen:?}"
    );
    assert_eq!(guard.state(), LockState::Held);
    drop(guard);
    drop(client);
    drop(line);
}
