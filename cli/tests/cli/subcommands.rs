//! The subcommands besides `exec`: `status` (with a kazoo holder in the
//! queue), `leader` and `revoke`.

use testkit::peers::{Peer, PeerKind};
use testkit::wait_until;

use crate::support::{
    hold, one_line, queue_len, release, run, shared, until_signalled, zklock, Json, Proc, PROMPT,
};

#[test]
fn status_shows_a_kazoo_holder_and_a_zklock_waiter() {
    let c = shared();
    let path = "/cli-status";
    let (code, out, _) = run(&c, &["status", path]);
    assert_eq!(code, 0);
    assert_eq!(out, ["/cli-status: free (no holder, nobody waiting)"]);

    let mut kazoo = Peer::start(PeerKind::Kazoo, &c, path, "mutex", "kazoo-holder");
    kazoo.acquire();
    kazoo
        .wait_acquired(PROMPT)
        .expect("kazoo acquires a free lock");
    let tricky = "waiter \"one\"\\\ttab\u{1}é";
    let waiter = Proc::spawn(zklock(
        &c,
        &["exec", "-w", "60", "--data", tricky, path, "--", "true"],
    ));
    wait_until("the zklock waiter to queue behind kazoo", PROMPT, || {
        queue_len(&c, path) == 2
    });

    let (code, out, err) = run(&c, &["status", "--json", path]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.len(), 1, "one JSON line: {out:?}");
    let v = Json::parse(&out[0]);
    assert_eq!(v.get("path").str(), path);
    assert_eq!(v.get("holders").num(), 1.0);
    assert_eq!(v.get("waiting").num(), 1.0);
    let q = v.get("queue").array();
    assert_eq!(q[0].get("role").str(), "holder");
    assert_eq!(q[0].get("origin").str(), "kazoo");
    assert_eq!(q[0].get("kind").str(), "exclusive");
    assert_eq!(q[0].get("data").str(), "kazoo-holder");
    assert!(q[0].get("node").str().contains("__lock__"));
    assert_eq!(q[1].get("role").str(), "waiting");
    assert_eq!(q[1].get("origin").str(), "protected");
    assert_eq!(q[1].get("data").str(), tricky, "escaping round trip");
    assert!(q[0].get("sequence").num() < q[1].get("sequence").num());
    assert!(q[0].get("czxid").num() < q[1].get("czxid").num());
    assert!(q[1].get("owner_session").str().starts_with("0x"));
    assert!(q[1].get("node_path").str().starts_with("/cli-status/_c_"));

    let (code, out, _) = run(&c, &["status", path]);
    assert_eq!(code, 0);
    assert_eq!(out[0], "/cli-status: 1 holding, 1 waiting");
    let holder_row = &out[2];
    let waiter_row = &out[3];
    for word in ["holder", "exclusive", "kazoo", "\"kazoo-holder\""] {
        assert!(holder_row.contains(word), "{word} in {holder_row:?}");
    }
    for word in ["waiting", "exclusive", "protected"] {
        assert!(waiter_row.contains(word), "{word} in {waiter_row:?}");
    }

    kazoo.release();
    let (status, _, err) = waiter.finish(PROMPT);
    assert_eq!(status.code(), Some(0), "{err}");
    kazoo.quit();
}

#[test]
fn leader_runs_the_command_while_elected() {
    let c = shared();
    let mut first = Proc::spawn(zklock(
        &c,
        &[
            "leader",
            "--id",
            "first",
            "/cli-elect",
            "--",
            "sh",
            "-c",
            "echo leading; read x",
        ],
    ));
    first.expect_line("leading");
    let (code, _, err) = run(
        &c,
        &["leader", "-n", "--id", "second", "/cli-elect", "--", "true"],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        one_line(&err).contains(r#"not elected: /cli-elect is led by "first"; not waiting (-n)"#),
        "{err}"
    );
    let (_, out, _) = run(&c, &["status", "--json", "/cli-elect"]);
    let v = Json::parse(&out[0]);
    assert_eq!(v.get("queue").array()[0].get("data").str(), "first");
    first.send_line("bye");
    let (status, _, err) = first.finish(PROMPT);
    assert_eq!(status.code(), Some(0), "{err}");
    let (code, out, _) = run(
        &c,
        &[
            "leader",
            "-n",
            "--id",
            "third",
            "/cli-elect",
            "--",
            "echo",
            "elected",
        ],
    );
    assert_eq!((code, out), (0, vec!["elected".to_owned()]));
}

#[test]
fn revoke_asks_a_revocable_holder_to_let_go() {
    let c = shared();
    let script = until_signalled("TERM", 0);
    // Nobody holds it yet.
    let (code, out, _) = run(&c, &["revoke", "/cli-revoke"]);
    assert_eq!(
        (code, out.join("\n")),
        (1, "nobody holds /cli-revoke".to_string())
    );
    let mut p = Proc::spawn(zklock(
        &c,
        &[
            "exec",
            "--revocable",
            "/cli-revoke",
            "--",
            "sh",
            "-c",
            &script,
        ],
    ));
    p.expect_line("locked");
    let (code, out, err) = run(&c, &["revoke", "/cli-revoke"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out[0].starts_with("asked the holder of /cli-revoke to let go: /cli-revoke/_c_"),
        "{out:?}"
    );
    assert!(
        out[0].contains("only a revocable holder lets go"),
        "{out:?}"
    );
    // CMD gets SIGTERM, exits, and the lock is released.
    p.expect_line("got TERM");
    let (status, _, err) = p.finish(PROMPT);
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(queue_len(&c, "/cli-revoke"), 0, "released");
    // A holder that did not opt in is asked, and carries on.
    let holder = hold(&c, &[], "/cli-revoke");
    let (code, out, _) = run(&c, &["revoke", "/cli-revoke"]);
    assert_eq!(code, 0);
    assert!(
        out[0].contains("any other ignores this and keeps the lock"),
        "the message says it may be ignored: {out:?}"
    );
    assert_eq!(queue_len(&c, "/cli-revoke"), 1, "not revocable: still held");
    release(holder);
}

/// The levels of the `zklock[PID]: LEVEL target: message` lines in `err`;
/// panics on any other line. A last line without its newline is left out:
/// the client's driver thread may still be logging the connection's end
/// when zklock exits, and that line is then cut off.
fn log_levels(err: &str) -> Vec<String> {
    let complete = err.rsplit_once('\n').map_or("", |(lines, _)| lines);
    let mut levels: Vec<String> = complete
        .lines()
        .map(|line| {
            let rest = line
                .strip_prefix("zklock[")
                .and_then(|r| r.split_once("]: "))
                .filter(|(pid, _)| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
                .map(|(_, rest)| rest)
                .unwrap_or_else(|| panic!("not a log line: {line:?} in {err:?}"));
            let (level, _) = rest
                .split_once(' ')
                .unwrap_or_else(|| panic!("no level: {line:?} in {err:?}"));
            level.to_owned()
        })
        .collect();
    levels.sort();
    levels.dedup();
    levels
}

/// `-v` logs to stderr, one `zklock[PID]: LEVEL target: message` line a
/// record: nothing without it, INFO (and above) with `-v`, DEBUG too with
/// `-vv`, and TRACE (the event loop's) only from `-vvv`.
/// Kills: init_logging -> (); init_logging, arms 0, 1 and 2 deleted;
/// StderrLogger::log -> (); StderrLogger::enabled -> false and <= → >.
#[test]
fn verbose_logs_to_stderr_at_the_level_asked() {
    let c = shared();
    for (flags, lowest) in [
        (&[][..], None),
        (&["-v"], Some("INFO")),
        (&["-vv"], Some("DEBUG")),
        (&["-vvv"], Some("TRACE")),
    ] {
        let mut args = flags.to_vec();
        args.extend(["status", "/cli-verbose"]);
        let (code, out, err) = run(&c, &args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert_eq!(out, ["/cli-verbose: free (no holder, nobody waiting)"]);
        let levels = log_levels(&err);
        let Some(lowest) = lowest else {
            assert!(levels.is_empty(), "{args:?}: {err}");
            continue;
        };
        assert!(err.contains(": INFO zklock: connected to "), "{err}");
        assert!(levels.iter().any(|l| l == lowest), "{args:?}: {err}");
        let below = ["INFO", "DEBUG", "TRACE"]
            .into_iter()
            .skip_while(|l| *l != lowest)
            .skip(1);
        for level in below {
            assert!(!levels.iter().any(|l| l == level), "{args:?}: {err}");
        }
    }
}
