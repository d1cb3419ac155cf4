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
