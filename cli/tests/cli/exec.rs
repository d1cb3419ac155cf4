//! `zklock exec`: exclusion with rising fencing tokens, `-n` and `-w` with
//! the conflict exit code, CMD's exit status and environment, the shared
//! mode, and the process tree (no shell between zklock and CMD).

use std::time::{Duration, Instant};

use testkit::{scratch_dir, wait_until};

use crate::support::{
    children_of, comm_of, hold, one_line, queue_len, release, run, shared, signal, zklock, Json,
    Proc, PROMPT,
};

#[test]
fn concurrent_execs_exclude_each_other_and_tokens_rise() {
    let c = shared();
    let dir = scratch_dir("cli-excl");
    let script = r#"set -C
: > "$1/marker" || { echo OVERLAP >&2; exit 99; }
echo "$ZKLOCK_FENCING_TOKEN" >> "$1/tokens"
sleep 0.1
rm "$1/marker""#;
    let d = dir.to_str().unwrap();
    let procs: Vec<Proc> = (0..5)
        .map(|_| {
            Proc::spawn(zklock(
                &c,
                &[
                    "exec",
                    "-w",
                    "30",
                    "/cli-excl",
                    "--",
                    "sh",
                    "-c",
                    script,
                    "sh",
                    d,
                ],
            ))
        })
        .collect();
    for p in procs {
        let (status, _, err) = p.finish(Duration::from_secs(30));
        assert_eq!(
            status.code(),
            Some(0),
            "an exec failed or overlapped: {err}"
        );
    }
    let tokens: Vec<i64> = std::fs::read_to_string(dir.join("tokens"))
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(tokens.len(), 5);
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens must rise with every holder: {tokens:?}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn nonblock_wait_and_conflict_exit_code() {
    let c = shared();
    let holder = hold(&c, &[], "/cli-nb");

    let (code, _, err) = run(&c, &["exec", "-n", "/cli-nb", "--", "true"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        one_line(&err).contains("lock not acquired: /cli-nb is held by "),
        "{err}"
    );

    let (code, _, err) = run(&c, &["exec", "-n", "-E", "42", "/cli-nb", "--", "true"]);
    assert_eq!(code, 42, "{err}");

    let started = Instant::now();
    let (code, _, err) = run(&c, &["exec", "-w", "0.5", "/cli-nb", "--", "true"]);
    let waited = started.elapsed();
    assert_eq!(code, 1, "{err}");
    assert!(one_line(&err).contains("gave up after 0.5s"), "{err}");
    // Not early: the whole wait. Not late: past it only the start, the
    // connect, the withdrawal of our node and the close, each a round trip
    // on loopback; a give-up that waited for the holder or for the session
    // (10 s) would be far past 5 s more.
    assert!(
        waited >= Duration::from_millis(500) && waited <= Duration::from_millis(5500),
        "gave up after {waited:?}"
    );

    // A patient waiter gets the lock once the holder is done.
    let mut waiter = Proc::spawn(zklock(
        &c,
        &["exec", "-w", "30", "/cli-nb", "--", "echo", "got it"],
    ));
    wait_until("the waiter to queue", PROMPT, || {
        queue_len(&c, "/cli-nb") == 2
    });
    release(holder);
    waiter.expect_line("got it");
    let (status, _, err) = waiter.finish(PROMPT);
    assert_eq!(status.code(), Some(0), "{err}");
}

#[test]
fn exit_status_environment_and_shared_mode() {
    let c = shared();
    let (code, out, err) = run(
        &c,
        &[
            "exec",
            "/cli-env",
            "--",
            "sh",
            "-c",
            "echo \"$ZKLOCK_FENCING_TOKEN $ZKLOCK_NODE\"; env | grep -c ZKLOCK_INTERNAL; exit 7",
        ],
    );
    assert_eq!(code, 7, "CMD's exit status is zklock's: {err}");
    let (token, node) = out[0].split_once(' ').unwrap();
    assert!(token.parse::<i64>().unwrap() > 0, "{out:?}");
    assert!(
        node.starts_with("/cli-env/_c_") && node.contains("-lock-"),
        "{node}"
    );
    assert_eq!(out[1], "0", "internal variables leak into CMD");

    // -s takes the read side: read nodes, and two readers at once.
    let reader = hold(&c, &["-s"], "/cli-env");
    let (code, out, err) = run(
        &c,
        &[
            "exec",
            "-s",
            "-n",
            "/cli-env",
            "--",
            "sh",
            "-c",
            "echo $ZKLOCK_NODE",
        ],
    );
    assert_eq!(code, 0, "a second reader must not wait: {err}");
    assert!(out[0].contains("__READ__"), "{out:?}");
    let (code, _, _) = run(&c, &["exec", "-n", "/cli-env", "--", "true"]);
    assert_eq!(code, 1, "an exclusive exec must wait for readers");
    release(reader);

    // A CMD killed by a signal: 128 + N, as a shell reports it.
    let (code, _, _) = run(&c, &["exec", "/cli-env", "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(code, 143);
    // A CMD that does not exist: 127, and the lock is released.
    let (code, _, err) = run(&c, &["exec", "/cli-env", "--", "/no/such/program"]);
    assert_eq!(code, 127, "{err}");
    assert!(one_line(&err).contains("cannot run"), "{err}");
    assert_eq!(queue_len(&c, "/cli-env"), 0);

    // A CMD that exists but cannot be run (not executable): 126, and the
    // lock is released.
    let dir = scratch_dir("cli-126");
    let script = dir.join("not-executable");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    let script = script.to_str().unwrap();
    let (code, _, err) = run(&c, &["exec", "/cli-env", "--", script]);
    assert_eq!(code, 126, "{err}");
    assert!(one_line(&err).contains("cannot run"), "{err}");
    assert_eq!(queue_len(&c, "/cli-env"), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn one_process_holds_the_lock_and_runs_the_command_without_a_shell() {
    let c = shared();
    let path = "/cli-tree";
    let holder = Proc::spawn(zklock(&c, &["exec", path, "--", "sleep", "30"]));
    let pid = holder.pid();
    wait_until("the command to start under zklock", PROMPT, || {
        children_of(pid).iter().any(|(_, comm, _)| comm == "sleep")
    });
    assert_eq!(comm_of(pid), "zklock", "the pid the user started is zklock");
    let children = children_of(pid);
    let shells = ["sh", "bash", "dash", "zsh", "busybox"];
    assert!(
        children
            .iter()
            .all(|(_, comm, _)| !shells.contains(&comm.as_str())),
        "a shell under zklock: {children:?}"
    );
    // The command and the release helper (zklock itself), nothing else.
    let mut comms: Vec<&str> = children.iter().map(|(_, comm, _)| comm.as_str()).collect();
    comms.sort_unstable();
    assert_eq!(comms, ["sleep", "zklock"], "{children:?}");
    let helper = children
        .iter()
        .find(|(_, comm, _)| comm == "zklock")
        .unwrap();
    assert!(helper.2.contains("--release-helper"), "{children:?}");
    assert!(
        children_of(helper.0).is_empty(),
        "the helper runs nothing: {:?}",
        children_of(helper.0)
    );
    // zklock holds the session itself: it is the lock node's data.
    let (_, out, _) = run(&c, &["status", "--json", path]);
    let v = Json::parse(&out[0]);
    let data = v.get("queue").array()[0].get("data").str().to_owned();
    assert!(data.ends_with(&format!(":{pid}")), "{data}");

    // SIGTERM to zklock reaches the command; sleep dies of it: 128 + 15.
    signal(pid, "TERM");
    let (status, _, err) = holder.finish(PROMPT);
    assert_eq!(status.code(), Some(143), "{err}");
    assert_eq!(queue_len(&c, path), 0, "released");
}
