//! `zklock exec` holding a lock through a server cut off from the leader
//! (docs/PARTITION.md): CMD must get SIGTERM before another client is
//! granted the lock.
//!
//! The holder connects to a follower F only; F's link to the leader is cut
//! silently (bytes stop, connections stay open). F goes on answering the
//! holder's pings until its own link times out (`syncLimit × tickTime`, 5 s
//! here), while the leader expires the holder's session after the session
//! timeout and a second client, on the leader, is granted. Run with a
//! session timeout below (2 s) and above (6 s) those 5 s, as
//! tests/zookeeper/partition/cut_off.rs does for the library's recipes.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use testkit::zk::{ZkEnsemble, ZkOptions};
use testkit::{children, scratch_dir, wait_children, wait_until};
use zklock::recipes::Mutex;
use zklock::Client;

const BIN: &str = env!("CARGO_BIN_EXE_zklock");
const TICK_MS: u64 = 1000;
const SYNC_LIMIT: u32 = 5;
const WAIT: Duration = Duration::from_secs(30);

/// CMD: says it runs, then records the instant SIGTERM reaches it (`wait`
/// returns at once for a trapped signal; `sleep` would not).
const SCRIPT: &str = r#"trap 'date +%s%N > "$1/term.tmp"; mv "$1/term.tmp" "$1/term"; exit 0' TERM
touch "$1/held"
while :; do sleep 1 & wait $!; done"#;

fn since_epoch(t: SystemTime) -> Duration {
    t.duration_since(UNIX_EPOCH).expect("after 1970")
}

/// One trial; returns (second granted, CMD got SIGTERM) relative to the cut.
fn trial(ens: &ZkEnsemble, timeout: Duration) -> (Duration, Duration) {
    let leader = ens.leader().expect("a leader");
    let follower = ens.followers()[0];
    let dir = scratch_dir(&format!("cli-partition-{}", timeout.as_millis()));
    let path = format!(
        "/cli-partition-{}-{}",
        timeout.as_millis(),
        std::process::id()
    );
    let mut holder: Child = Command::new(BIN)
        .env_remove("ZKLOCK_CONNECT")
        .args(["-c", &ens.member_addr(follower).to_string()])
        .args(["--session-timeout", &format!("{}", timeout.as_secs_f64())])
        .args(["exec", &path, "--", "sh", "-c", SCRIPT, "sh"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start zklock exec");
    wait_until("CMD runs under the lock", WAIT, || {
        dir.join("held").exists()
    });
    let second = Client::builder(&ens.member_addr(leader).to_string())
        .session_timeout(timeout)
        .connect()
        .unwrap();
    assert_eq!(children(&second, &path).len(), 1, "the CLI's node alone");
    let granted = {
        let (second, path) = (second.clone(), path.clone());
        thread::spawn(move || {
            let guard = Mutex::new(&second, &path)
                .unwrap()
                .lock_timeout(Duration::from_secs(90));
            let at = SystemTime::now();
            guard.map(|g| {
                drop(g);
                at
            })
        })
    };
    wait_children(&second, &path, 2, WAIT);
    let cut = SystemTime::now();
    ens.cut_link(follower, leader);
    let granted = granted
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("the second client was never granted: {e}"));
    let term = dir.join("term");
    wait_until("CMD gets SIGTERM", WAIT, || term.exists());
    let stopped = read_nanos(&term);
    // zklock exits once CMD has; bounded.
    wait_until("zklock exits", WAIT, || {
        holder.try_wait().expect("wait").is_some()
    });
    ens.heal_link(follower, leader);
    ens.wait_ready();
    let _ = second.close();
    let base = since_epoch(cut);
    (
        since_epoch(granted).saturating_sub(base),
        stopped.saturating_sub(base),
    )
}

fn read_nanos(file: &Path) -> Duration {
    let text = std::fs::read_to_string(file).expect("the time CMD wrote");
    let nanos: u64 = text.trim().parse().expect("nanoseconds since 1970");
    Duration::from_nanos(nanos)
}

#[test]
fn exec_stops_cmd_before_another_client_is_granted_when_cut_off_from_the_leader() {
    let options = ZkOptions::new().tick_ms(TICK_MS);
    let ens = ZkEnsemble::start_with_links(3, &options, SYNC_LIMIT);
    ens.wait_ready();
    let mut results = Vec::new();
    for timeout in [Duration::from_secs(2), Duration::from_secs(6)] {
        let (granted, stopped) = trial(&ens, timeout);
        eprintln!(
            "zklock exec, timeout {} ms: cut +0, second granted +{} ms, CMD got SIGTERM +{} ms",
            timeout.as_millis(),
            granted.as_millis(),
            stopped.as_millis()
        );
        results.push((timeout, granted, stopped));
    }
    for (timeout, granted, stopped) in &results {
        assert!(
            stopped <= granted,
            "timeout {timeout:?}: CMD ran on after the second client was granted: {results:?}"
        );
    }
}
