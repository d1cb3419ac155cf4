//! Unit tests of the command line parser.

use super::interpret::node_acl;
use super::*;

fn os(v: &[&str]) -> Vec<OsString> {
    v.iter().map(OsString::from).collect()
}

fn parse_ok(v: &[&str]) -> Parsed {
    parse(os(v), None).unwrap_or_else(|e| panic!("{v:?}: {e}"))
}

#[test]
fn acl_specs() {
    use zklock::perms::{ADMIN, ALL, CREATE, DELETE, READ, WRITE};
    assert_eq!(node_acl("creator"), Ok(NodeAcl::Creator));
    assert_eq!(node_acl("open"), Ok(NodeAcl::Open));
    let Ok(NodeAcl::List(acl)) = node_acl("world:r, sasl:alice:cdrwa,digest:bob:SGVsbG8=:rw")
    else {
        panic!("a list")
    };
    let ids: Vec<_> = acl
        .iter()
        .map(|a| (a.id.scheme.as_str(), a.id.id.as_str(), a.perms))
        .collect();
    assert_eq!(
        ids,
        [
            ("world", "anyone", READ),
            ("sasl", "alice", ALL),
            ("digest", "bob:SGVsbG8=", READ | WRITE)
        ]
    );
    assert_eq!(CREATE | DELETE | ADMIN | READ | WRITE, ALL);
    for bad in [
        "",
        "world",
        "sasl:alice",
        "sasl::r",
        ":x:r",
        "sasl:alice:rx",
        "world:",
    ] {
        assert!(node_acl(bad).is_err(), "{bad:?}");
    }
    let p = parse_ok(&["exec", "--acl", "creator", "/l", "--", "true"]);
    assert!(matches!(
        p.command,
        Command::Hold(Hold {
            acl: NodeAcl::Creator,
            ..
        })
    ));
}

#[test]
fn exec_with_options_before_and_after_the_subcommand() {
    let p = parse_ok(&[
        "-c", "h:1", "exec", "-w5", "-s", "--data=x", "/l", "-v", "--", "cmd", "-n",
    ]);
    assert_eq!(p.global.connect, "h:1");
    assert_eq!(p.global.verbose, 1);
    let Command::Hold(h) = p.command else {
        panic!()
    };
    assert_eq!(h.kind, HoldKind::Shared);
    assert_eq!(h.wait, Some(Duration::from_secs(5)));
    assert_eq!(h.data.as_deref(), Some("x"));
    assert_eq!(h.command, os(&["cmd", "-n"]));
}

#[test]
fn bundled_flags_and_exit_code() {
    let Command::Hold(h) = parse_ok(&["exec", "-nsE", "7", "/l", "--", "true"]).command else {
        panic!()
    };
    assert_eq!(h.wait, Some(Duration::ZERO));
    assert_eq!(h.conflict_exit_code, 7);
    assert_eq!(h.kind, HoldKind::Shared);
}

#[test]
fn errors() {
    for bad in [
        &["exec", "/l", "true"][..],
        &["exec", "/l"],
        &["exec", "/l", "--"],
        &["exec", "--", "true"],
        &["exec", "-w", "soon", "/l", "--", "true"],
        &["exec", "-n", "-w", "1", "/l", "--", "true"],
        &["exec", "-E", "300", "/l", "--", "true"],
        &["exec", "--bogus", "/l", "--", "true"],
        &["leader", "/e", "--", "true"],
        &["status"],
        &["status", "/a", "/b"],
        &["frobnicate"],
        &[],
        &["--session-timeout", "0", "status", "/x"],
    ] {
        let e = parse(os(bad), None).expect_err(&format!("{bad:?} should fail"));
        assert!(!e.to_string().contains('\n'), "{e}");
    }
}

#[test]
fn help_everywhere() {
    assert_eq!(parse_ok(&["--help"]).command, Command::Help(MAIN_HELP));
    assert_eq!(
        parse_ok(&["exec", "--help"]).command,
        Command::Help(EXEC_HELP)
    );
    assert_eq!(
        parse_ok(&["-h", "status"]).command,
        Command::Help(STATUS_HELP)
    );
    assert_eq!(
        parse_ok(&["help", "leader"]).command,
        Command::Help(LEADER_HELP)
    );
}

#[test]
fn values_attached_separate_and_after_equals() {
    let Command::Hold(h) = parse_ok(&[
        "exec",
        "--wait=2.5",
        "-k0",
        "--data",
        "--",
        "/l",
        "--",
        "cmd",
        "--",
        "x",
    ])
    .command
    else {
        panic!()
    };
    assert_eq!(h.wait, Some(Duration::from_millis(2500)));
    assert_eq!(h.kill_after, Duration::ZERO);
    assert_eq!(
        h.data.as_deref(),
        Some("--"),
        "an option's value may be '--'"
    );
    assert_eq!(h.command, os(&["cmd", "--", "x"]));
}

#[test]
fn max_hold_is_seconds_above_zero_for_exec_and_leader() {
    let Command::Hold(h) = parse_ok(&["exec", "--max-hold", "1.5", "/l", "--", "true"]).command
    else {
        panic!()
    };
    assert_eq!(h.max_hold, Some(Duration::from_millis(1500)));
    let Command::Hold(h) = parse_ok(&["exec", "/l", "--", "true"]).command else {
        panic!()
    };
    assert_eq!(h.max_hold, None, "no limit unless asked");
    let Command::Hold(h) =
        parse_ok(&["leader", "--id", "a", "--max-hold=60", "/e", "--", "true"]).command
    else {
        panic!()
    };
    assert_eq!(h.max_hold, Some(Duration::from_secs(60)));
    for bad in [
        &["exec", "--max-hold", "0", "/l", "--", "true"][..],
        &["exec", "--max-hold", "soon", "/l", "--", "true"],
        &["exec", "--max-hold", "-1", "/l", "--", "true"],
        &["exec", "--max-hold", "/l", "--", "true"],
        &["status", "--max-hold", "5", "/l"],
    ] {
        let e = parse(os(bad), None).expect_err(&format!("{bad:?} should fail"));
        assert!(e.to_string().contains("see 'zklock"), "{e}");
    }
    let e = parse(os(&["exec", "--max-hold", "0", "/l", "--", "true"]), None).unwrap_err();
    assert!(
        e.to_string()
            .contains("--max-hold wants a number of seconds above 0"),
        "{e}"
    );
}

#[test]
fn options_of_another_subcommand_are_refused() {
    for bad in [
        &["status", "-s", "/l"][..],
        &["leader", "--data", "x", "--id", "a", "/e", "--", "true"],
        &["exec", "--id", "a", "/l", "--", "true"],
        &["-w", "1", "exec", "/l", "--", "true"],
        &["exec", "--json=1", "/l", "--", "true"],
        &["status", "--json=1", "/l"],
    ] {
        let e = parse(os(bad), None).expect_err(&format!("{bad:?} should fail"));
        assert!(e.to_string().contains("see 'zklock"), "{e}");
    }
    assert_eq!(parse_ok(&["--version"]).command, Command::Version);
    assert_eq!(parse_ok(&["status", "--version"]).command, Command::Version);
}

#[test]
fn connect_from_environment() {
    let p = parse(os(&["status", "/x"]), Some("e:9".into())).unwrap();
    assert_eq!(p.global.connect, "e:9");
    let p = parse(os(&["status", "/x"]), None).unwrap();
    assert_eq!(p.global.connect, DEFAULT_CONNECT);
}

/// A usage error names the subcommand it is about and points at that
/// subcommand's help; a path missing from `leader` is an ELECTION_PATH, from
/// the others a LOCK_PATH.
/// Kills: Sub::name -> "" and -> "xyzzy"; interpret::interpret `sub == Sub::Leader` == → != (what is missing).
#[test]
fn usage_errors_name_their_subcommand() {
    for (args, sub, says) in [
        (
            &["exec", "-w", "soon", "/l", "--", "true"][..],
            "exec",
            "--wait",
        ),
        (&["exec"], "exec", "missing LOCK_PATH"),
        (&["leader", "--id", "a"], "leader", "missing ELECTION_PATH"),
        (&["status"], "status", "missing LOCK_PATH"),
        (&["revoke"], "revoke", "missing LOCK_PATH"),
        (
            &["revoke", "/l", "--", "true"],
            "revoke",
            "takes no command",
        ),
    ] {
        let e = parse(os(args), None).expect_err(&format!("{args:?} should fail"));
        let text = e.to_string();
        assert!(text.starts_with(&format!("{sub}: ")), "{args:?}: {text}");
        assert!(text.contains(says), "{args:?}: {text}");
        assert!(
            text.ends_with(&format!("(see 'zklock {sub} --help')")),
            "{args:?}: {text}"
        );
    }
}

/// `revoke LOCK_PATH` is a subcommand of its own, with its own help.
/// Kills: Sub::from_name, arm "revoke" deleted.
#[test]
fn revoke_takes_a_lock_path() {
    assert_eq!(
        parse_ok(&["revoke", "/l"]).command,
        Command::Revoke("/l".into())
    );
    assert_eq!(
        parse_ok(&["revoke", "--help"]).command,
        Command::Help(REVOKE_HELP)
    );
}

/// An unknown option is named as the user spelled it, long or short.
/// Kills: spelled -> String::new() and -> "xyzzy".into().
#[test]
fn an_unknown_option_is_named_as_spelled() {
    for (args, named) in [
        (&["exec", "--bogus", "/l", "--", "true"][..], "'--bogus'"),
        (&["status", "-q", "/l"], "'-q'"),
        (&["-Z", "status", "/l"], "'-Z'"),
    ] {
        let e = parse(os(args), None).expect_err(&format!("{args:?} should fail"));
        assert!(e.to_string().contains(named), "{args:?}: {e}");
    }
}

/// The global options that take a file or a name, and the session timeout,
/// are read before or after the subcommand into what they ask for; the
/// client certificate comes as a pair.
/// Kills: read, arms Long("session-timeout"), Long("tls-ca"), Long("tls-cert"),
/// Long("tls-key"), Long("tls-server-name"), Long("sasl-user"),
/// Long("sasl-password-file") and Long("digest-file") deleted;
/// global_from, arm (Some(cert), Some(key)) deleted.
#[test]
fn security_options_and_the_session_timeout_are_read() {
    let p = parse_ok(&[
        "--session-timeout",
        "2.5",
        "--tls-ca",
        "ca.pem",
        "status",
        "--tls-cert=c.pem",
        "--tls-key",
        "k.pem",
        "--tls-server-name",
        "zk.example",
        "--sasl-user",
        "alice",
        "--sasl-password-file",
        "pw",
        "--digest-file",
        "dg",
        "/l",
    ]);
    assert_eq!(p.global.session_timeout, Duration::from_millis(2500));
    assert_eq!(
        p.global.security,
        Security {
            tls_ca: Some("ca.pem".into()),
            tls_client: Some(("c.pem".into(), "k.pem".into())),
            tls_server_name: Some("zk.example".into()),
            sasl_user: Some("alice".into()),
            sasl_password_file: Some("pw".into()),
            digest_file: Some("dg".into()),
        }
    );
    assert_eq!(
        parse_ok(&["status", "/l"]).global.session_timeout,
        Duration::from_secs(10),
        "the default"
    );
}

/// The connection options are checked together: a client certificate or a
/// server name needs the CA, a certificate needs its key, a password file
/// its user; and `--connect` may not be blank.
/// Kills: global_from `tls_client.is_some() || tls_server_name.is_some()` || → &&;
/// global_from, guard `c.trim().is_empty()` → false.
#[test]
fn connection_options_are_checked_together() {
    for (args, says) in [
        (
            &["--tls-server-name", "zk", "status", "/l"][..],
            "need --tls-ca",
        ),
        (
            &["--tls-cert", "c", "--tls-key", "k", "status", "/l"],
            "need --tls-ca",
        ),
        (
            &["--tls-ca", "a", "--tls-cert", "c", "status", "/l"],
            "go together",
        ),
        (
            &["--sasl-password-file", "pw", "status", "/l"],
            "needs --sasl-user",
        ),
        (&["-c", " ", "status", "/l"], "--connect wants"),
        (&["--connect=", "status", "/l"], "--connect wants"),
    ] {
        let e = parse(os(args), None).expect_err(&format!("{args:?} should fail"));
        assert!(e.to_string().contains(says), "{args:?}: {e}");
    }
    let p = parse_ok(&["--tls-ca", "a", "--tls-server-name", "zk", "status", "/l"]);
    assert_eq!(p.global.security.tls_server_name.as_deref(), Some("zk"));
}

/// An option is accepted only by the subcommands where it means something:
/// the waiting and holding options by exec and leader, `-s`, `--data` and
/// `--revocable` by exec, `--json` by status.
/// Kills: read, guard in_hold → true for -n, -E, -k and --acl; guard
/// `sub == Some(Sub::Status)` → true, → false and == → != (--json); guard
/// `sub == Some(Sub::Exec)` → true, → false and == → != (--revocable).
#[test]
fn an_option_is_accepted_only_where_it_means_something() {
    for bad in [
        &["status", "-n", "/l"][..],
        &["revoke", "--nonblock", "/l"],
        &["status", "-E", "3", "/l"],
        &["status", "--kill-after", "1", "/l"],
        &["revoke", "-k1", "/l"],
        &["status", "--acl", "open", "/l"],
        &["exec", "--json", "/l", "--", "true"],
        &["leader", "--id", "a", "--json", "/e", "--", "true"],
        &["status", "--revocable", "/l"],
        &["leader", "--id", "a", "--revocable", "/e", "--", "true"],
    ] {
        let e = parse(os(bad), None).expect_err(&format!("{bad:?} should fail"));
        assert!(e.to_string().contains("unknown option"), "{bad:?}: {e}");
    }
    assert_eq!(
        parse_ok(&["status", "--json", "/l"]).command,
        Command::Status(Status {
            path: "/l".into(),
            json: true
        })
    );
    let Command::Hold(h) = parse_ok(&["exec", "--revocable", "/l", "--", "true"]).command else {
        panic!("exec holds")
    };
    assert!(h.revocable);
    let Command::Hold(h) = parse_ok(&[
        "leader", "--id", "a", "-n", "-E", "3", "-k", "2", "--acl", "open", "/e", "--", "true",
    ])
    .command
    else {
        panic!("leader holds")
    };
    assert_eq!(
        (
            h.wait,
            h.conflict_exit_code,
            h.kill_after,
            h.acl,
            h.revocable
        ),
        (
            Some(Duration::ZERO),
            3,
            Duration::from_secs(2),
            NodeAcl::Open,
            false
        )
    );
}

/// `--help` and `--version` come first: given before an unknown subcommand,
/// or before a subcommand whose options are wrong, they still answer (and
/// exit 0), while an unknown subcommand alone is named as one.
/// Kills: parse, guard `given.version || given.help` → true, → false and || → &&;
/// parse `!given.help && !given.version` && → ||.
#[test]
fn help_and_version_come_first() {
    assert_eq!(
        parse_ok(&["--help", "frobnicate"]).command,
        Command::Help(MAIN_HELP)
    );
    assert_eq!(
        parse_ok(&["--version", "frobnicate"]).command,
        Command::Version
    );
    assert_eq!(
        parse_ok(&["--help", "exec", "--bogus", "-w", "soon"]).command,
        Command::Help(EXEC_HELP)
    );
    assert_eq!(
        parse_ok(&["--version", "status", "--bogus"]).command,
        Command::Version
    );
    let e = parse(os(&["frobnicate", "/l"]), None).unwrap_err();
    assert!(e.to_string().contains("unknown subcommand"), "{e}");
}

/// A leader must name itself: an empty `--id` is refused like a missing one.
/// Kills: interpret, guard `!id.is_empty()` → true.
#[test]
fn an_empty_leader_id_is_refused() {
    for bad in [
        &["leader", "--id", "", "/e", "--", "true"][..],
        &["leader", "--id=", "/e", "--", "true"],
    ] {
        let e = parse(os(bad), None).expect_err(&format!("{bad:?} should fail"));
        assert!(e.to_string().contains("--id"), "{bad:?}: {e}");
    }
}

/// Only `world` may leave out its id (`world:r`); any other scheme without
/// an id is refused rather than read as world:anyone.
/// Kills: node_acl, guard `head == "world"` → true.
#[test]
fn only_world_may_leave_out_the_acl_id() {
    for bad in ["sasl:r", "digest:cdrwa", "ip:r,world:r"] {
        let e = node_acl(bad).expect_err(bad);
        assert!(e.contains("no id"), "{bad:?}: {e}");
    }
}

/// A bad path's reason names the subcommand it was given to: leader for an
/// election path, exec for a lock path.
/// Kills: Hold::subcommand -> "" and -> "xyzzy"; Hold::subcommand, arm HoldKind::Leader deleted.
#[test]
fn a_bad_path_names_leader_or_exec() {
    for (args, sub) in [
        (&["leader", "--id", "a", "e", "--", "true"][..], "leader"),
        (&["exec", "l", "--", "true"], "exec"),
        (&["exec", "-s", "l", "--", "true"], "exec"),
    ] {
        let Command::Hold(h) = parse_ok(args).command else {
            panic!("{args:?} holds")
        };
        let f = crate::check_path(&h.path, h.subcommand()).expect_err("a relative path");
        assert_eq!(f.code, crate::exit::USAGE);
        assert!(
            f.message.starts_with(&format!("{sub}: bad path")),
            "{args:?}: {}",
            f.message
        );
    }
}
