//! Every example runs to success against a real ZooKeeper: what a new user
//! copies must work. `cargo test --all-targets` builds examples only as test
//! harnesses, so scripts/test.sh builds them as programs first with
//! `cargo build --examples --all-features`; run alone, do the same.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

const EXAMPLES: &[&str] = &[
    "mutex",
    "rwlock",
    "semaphore",
    "election",
    "multilock",
    "future_block_on",
    "future_tokio",
    "observer_log",
    "observer_prometheus",
    "failover_service",
    "long_running_service",
    // zklock-proto's: a lock on a hand-written poll loop, no I/O thread.
    "poll_loop",
];

/// target/<profile>/examples, next to this test's deps/ directory.
fn examples_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    exe.parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("examples"))
        .expect("a target directory")
}

#[test]
fn every_example_runs_against_a_real_server() {
    let server = testkit::zk::shared();
    let dir = examples_dir();
    for name in EXAMPLES {
        let bin = dir.join(name);
        assert!(
            bin.exists(),
            "example {name} is not built at {}: run `cargo build --examples --all-features` first (scripts/test.sh does)",
            bin.display()
        );
        let mut child = Command::new(&bin)
            .env("ZKLOCK_CONNECT", server.connect_string())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let until = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            if Instant::now() > until {
                let _ = child.kill();
                panic!("example {name} did not finish within 60 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let out = child.wait_with_output().expect("output");
        assert!(
            status.success(),
            "example {name} failed: {status}\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
