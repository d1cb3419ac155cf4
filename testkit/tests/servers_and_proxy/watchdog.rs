//! Servers die with the test process: a child test process starts a server
//! and exits or is killed without dropping it.

use super::*;

const ORPHAN_MODE_VAR: &str = "ZKLOCK_SELFTEST_ORPHAN_MODE";

/// Not a test on its own: run in a child process by the two tests below.
/// Starts a server, reports the JVM's pid and directory, and waits for the
/// parent to have seen the JVM alive: then either it is SIGKILLed, or its
/// stdin closes and it exits without running any destructor.
#[test]
#[ignore = "helper process for the jvm_dies_* tests"]
fn orphan_helper() {
    if std::env::var_os(ORPHAN_MODE_VAR).is_none() {
        return;
    }
    let server = ZkServer::start();
    let pid = server.java_pid().expect("java pid file written at start");
    println!("ORPHAN java_pid={pid} dir={}", server.dir().display());
    io::stdout().flush().expect("flushing stdout");
    // Returns at EOF: the parent's go, or the parent gone.
    let _ = io::stdin().read_to_end(&mut Vec::new());
    std::process::exit(0);
}

#[test]
fn jvm_dies_when_test_process_exits_without_drop() {
    check_orphaned_jvm_dies("exit");
}

#[test]
fn jvm_dies_when_test_process_is_killed() {
    check_orphaned_jvm_dies("kill");
}

fn check_orphaned_jvm_dies(mode: &str) {
    let exe = std::env::current_exe().expect("path of the test binary");
    let mut child = Command::new(exe)
        .args([
            "watchdog::orphan_helper",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .args(["--test-threads", "1"])
        .env(ORPHAN_MODE_VAR, mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawning the orphan helper");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut report = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("reading the helper's stdout");
        // The harness prints "test watchdog::orphan_helper ... " on the same line first.
        if let Some((_, rest)) = line.split_once("ORPHAN ") {
            report = Some(rest.to_string());
            break;
        }
    }
    let report = report.expect("the helper exited without reporting its server");
    let (pid, dir) = parse_orphan_report(&report);
    assert!(process_alive(pid), "JVM {pid} should be running");

    if mode == "kill" {
        child.kill().expect("SIGKILL the helper");
    } else {
        drop(child.stdin.take());
    }
    let status = child.wait().expect("waiting for the helper");
    eprintln!("orphan helper ({mode}) exited: {status}");

    let gone = poll_until(Duration::from_secs(15), || {
        !process_alive(pid) && !Path::new(&dir).exists()
    });
    assert!(
        gone,
        "JVM {pid} alive: {}, dir {dir} exists: {} after the test process died",
        process_alive(pid),
        Path::new(&dir).exists()
    );
}

fn parse_orphan_report(report: &str) -> (u32, String) {
    let mut pid = None;
    let mut dir = None;
    for field in report.split(' ') {
        if let Some(value) = field.strip_prefix("java_pid=") {
            pid = value.parse().ok();
        } else if let Some(value) = field.strip_prefix("dir=") {
            dir = Some(value.to_string());
        }
    }
    (
        pid.unwrap_or_else(|| panic!("no java_pid in {report:?}")),
        dir.unwrap_or_else(|| panic!("no dir in {report:?}")),
    )
}
