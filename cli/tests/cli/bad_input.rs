//! Bad input: usage errors, an unreachable server and missing input files,
//! each with its documented exit code and a one-line reason.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use testkit::scratch_dir;

use crate::support::{one_line, run, shared};

#[test]
fn bad_input_has_documented_codes_and_one_line_reasons() {
    let c = shared();
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["exec", "locks/x", "--", "true"],
            64,
            "must start with '/'",
        ),
        (&["exec", "/x/", "--", "true"], 64, "bad path"),
        (&["status", "relative"], 64, "must start with '/'"),
        (&["exec", "/x", "true"], 64, "'--'"),
        (&["exec", "/x"], 64, "'--'"),
        (&["exec", "/x", "--"], 64, "missing the command"),
        (&["exec", "-w", "soon", "/x", "--", "true"], 64, "--wait"),
        (&["exec", "-E", "256", "/x", "--", "true"], 64, "0..255"),
        (&["exec", "--bogus", "/x", "--", "true"], 64, "--bogus"),
        (&["leader", "/e", "--", "true"], 64, "--id"),
        (&["launch", "/x"], 64, "unknown subcommand"),
        (&["exec", "--acl", "world", "/x", "--", "true"], 64, "--acl"),
        (
            &["exec", "--acl", "sasl:bob:rx", "/x", "--", "true"],
            64,
            "cdrwa",
        ),
        (&[], 64, "missing subcommand"),
    ];
    for (args, want, says) in cases {
        let (code, out, err) = run(&c, args);
        assert_eq!(code, *want, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?} printed {out:?}");
        let line = one_line(&err);
        assert!(
            line.starts_with("zklock: ") && line.contains(says),
            "{args:?}: {line:?} should mention {says:?}"
        );
    }

    // Nothing listens on a port we just had and closed.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dead = format!("127.0.0.1:{port}");
    for args in [
        &["--session-timeout", "1", "exec", "/x", "--", "true"][..],
        &["--session-timeout", "1", "status", "/x"],
    ] {
        let started = Instant::now();
        let (code, _, err) = run(&dead, args);
        assert_eq!(code, 69, "{args:?}: {err}");
        let line = one_line(&err);
        assert!(line.contains("no ZooKeeper server reachable"), "{err}");
        assert_eq!(line.matches(&dead).count(), 1, "the address once: {line}");
        let elapsed = started.elapsed();
        assert!(elapsed < Duration::from_secs(10));
        // The time waited, as the message says it: the session timeout
        // asked (1 s), not less, and no more than the run took.
        let waited = waited_in(line).unwrap_or_else(|| panic!("no time waited in {line:?}"));
        assert!(
            waited >= Duration::from_millis(950) && waited <= elapsed,
            "waited {waited:?} (run took {elapsed:?}): {line}"
        );
    }
    // A host name that does not resolve (a DNS outage alike): no session, 69.
    let (code, _, err) = run("nosuch.invalid:2181", &["status", "/x"]);
    assert_eq!(code, 69, "{err}");
    assert!(one_line(&err).contains("cannot resolve"), "{err}");

    for sub in ["exec", "status", "leader"] {
        let (code, out, _) = run(&c, &[sub, "--help"]);
        assert_eq!(code, 0);
        let text = out.join("\n");
        assert!(text.contains(&format!("zklock {sub}")), "{text}");
        assert!(text.contains("Example"), "{sub} --help has an example");
    }
}

/// A server that takes each connection and closes it before the
/// handshake's answer (as one not serving yet does): the connection is
/// lost every time, no session comes, and zklock exits 69 saying so.
#[test]
fn a_connection_lost_before_every_handshake_exits_69_and_says_why() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
    listener.set_nonblocking(true).unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let closer = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut taken = 0;
            // Bounded: the run ends within its session timeout and the
            // flag is set; a minute at most either way.
            let until = Instant::now() + Duration::from_secs(60);
            while !done.load(std::sync::atomic::Ordering::SeqCst) && Instant::now() < until {
                match listener.accept() {
                    Ok((mut conn, _)) => {
                        taken += 1;
                        // The handshake read first, so that the close is
                        // a clean one (unread bytes would reset it).
                        let _ = conn.set_nonblocking(false);
                        let _ = conn.set_read_timeout(Some(Duration::from_secs(1)));
                        let mut len = [0; 4];
                        if std::io::Read::read_exact(&mut conn, &mut len).is_ok() {
                            let body = u32::from_be_bytes(len).min(4096) as usize;
                            let _ = std::io::Read::read_exact(&mut conn, &mut vec![0; body]);
                        }
                        drop(conn);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            taken
        })
    };
    let (code, _, err) = run(&addr, &["--session-timeout", "2", "status", "/x"]);
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let taken = closer.join().unwrap();
    assert_eq!(code, 69, "{err}");
    let line = one_line(&err);
    assert!(line.contains("no ZooKeeper server reachable"), "{line}");
    assert!(
        line.contains("closed the connection before answering the handshake"),
        "the last failure named: {line}"
    );
    assert!(taken >= 1, "zklock connected");
}

/// Every input file that is missing or unreadable exits 66 (EX_NOINPUT) and
/// is named, once, before any server is tried.
#[test]
fn missing_input_files_exit_66_and_are_named() {
    let missing = scratch_dir("cli-noinput").join("absent.pem");
    let m = missing.to_string_lossy().into_owned();
    let present = scratch_dir("cli-noinput").join("present.pem");
    std::fs::write(&present, "not a certificate").unwrap();
    let p = present.to_string_lossy().into_owned();
    let cases: Vec<Vec<&str>> = vec![
        vec!["--tls-ca", &m],
        vec!["--tls-ca", &p, "--tls-cert", &m, "--tls-key", &p],
        vec!["--tls-ca", &p, "--tls-cert", &p, "--tls-key", &m],
        vec!["--sasl-user", "alice", "--sasl-password-file", &m],
        vec!["--digest-file", &m],
    ];
    for security in cases {
        let mut args = security.clone();
        args.extend(["status", "/x"]);
        let (code, _, err) = run("127.0.0.1:1", &args);
        assert_eq!(code, 66, "{security:?}: {err}");
        let line = one_line(&err);
        assert_eq!(line.matches(m.as_str()).count(), 1, "{security:?}: {line}");
        assert!(!line.contains("127.0.0.1:1"), "{security:?}: {line}");
    }
}

/// The exit codes `zklock --help` lists are the ones cli/README.md's table
/// lists, neither list missing one of the other's.
#[test]
fn a_refusal_zklock_has_no_code_for_exits_70_and_names_it() {
    // ZooKeeper refuses children of an ephemeral node: no usage error, no
    // ACL, no lost session, but a server's refusal all the same.
    let c = shared();
    let owner = zklock::Client::connect(&c, Duration::from_secs(10)).unwrap();
    owner
        .create("/cli-ephemeral", b"", zklock::CreateMode::Ephemeral)
        .unwrap();
    let (code, _, err) = run(&c, &["exec", "-n", "/cli-ephemeral/lock", "--", "true"]);
    assert_eq!(code, 70, "{err}");
    let line = one_line(&err);
    assert!(line.contains("NoChildrenForEphemerals"), "{err}");
    assert!(line.contains("/cli-ephemeral/lock"), "{err}");
}

#[test]
fn the_help_and_the_readme_list_the_same_exit_codes() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_zklock"))
        .arg("--help")
        .output()
        .expect("zklock --help runs");
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).expect("help is UTF-8");
    let section = help
        .split_once("Exit codes:")
        .and_then(|(_, rest)| rest.split_once("\n\n"))
        .map(|(codes, _)| codes)
        .expect("the help has an 'Exit codes:' section");
    // Each entry's first column: the lines indented by two, not by more.
    let help_codes: Vec<String> = section
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .map(|l| first_column(l.trim_start(), "  "))
        .collect();

    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("cli/README.md");
    let table = readme
        .split_once("| code | meaning |")
        .map(|(_, rest)| rest)
        .expect("cli/README.md has the exit code table");
    let readme_codes: Vec<String> = table
        .lines()
        // The rest of the header line, and the line under it.
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| first_column(l.trim_start_matches('|').trim_start(), " |"))
        .collect();

    let numbers = |codes: &[String]| -> Vec<String> {
        let mut n: Vec<String> = codes
            .iter()
            .flat_map(|c| c.split([',', ' ', '(', ')', '`']))
            .filter(|w| w.chars().next().is_some_and(|ch| ch.is_ascii_digit()))
            .map(str::to_owned)
            .collect();
        n.sort();
        n
    };
    assert_eq!(
        numbers(&help_codes),
        numbers(&readme_codes),
        "help {help_codes:?}, README {readme_codes:?}"
    );
    assert!(numbers(&help_codes).len() >= 10, "{help_codes:?}");
}

/// The text before the first `sep`.
fn first_column(line: &str, sep: &str) -> String {
    line.split_once(sep)
        .map_or(line, |(c, _)| c)
        .trim()
        .to_owned()
}

/// The time a "no ZooKeeper server reachable ... within 1.0s" message
/// says it waited.
fn waited_in(line: &str) -> Option<Duration> {
    let (_, after) = line.split_once(" within ")?;
    let word = after.split([':', ';', ' ']).next()?;
    if let Some(ms) = word.strip_suffix("ms") {
        return ms
            .parse::<f64>()
            .ok()
            .map(|ms| Duration::from_secs_f64(ms / 1000.0));
    }
    let secs = word.strip_suffix('s')?.parse::<f64>().ok()?;
    Some(Duration::from_secs_f64(secs))
}
