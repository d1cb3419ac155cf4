//! Security: TLS and SASL logins, secrets kept from CMD and the release
//! helper, the helper freeing a SIGKILLed secure holder's lock at once, and
//! the ACLs of the nodes `exec` makes.

use std::time::{Duration, Instant};

use testkit::zk::ZkServer;
use testkit::{scratch_dir, wait_until};

#[cfg(feature = "tls")]
use crate::support::one_line;
use crate::support::{children_of, run, shared, trapping_script, zklock, Json, Proc, PROMPT};

/// `exec` and `status` against a server with a secure client port, with a
/// client certificate (mutual TLS); without the CA the command says why.
#[cfg(feature = "tls")]
#[test]
fn exec_and_status_over_tls() {
    let certs = testkit::certs::shared();
    let server = ZkServer::start_with_options(&certs.server_options(true));
    let c = server.secure_addr().to_string();
    let ca = certs.ca_pem.to_string_lossy().into_owned();
    let cert = certs.client_pem.to_string_lossy().into_owned();
    let key = certs.client_key.to_string_lossy().into_owned();
    let tls = ["--tls-ca", &ca, "--tls-cert", &cert, "--tls-key", &key];
    let mut holder_args: Vec<&str> = tls.to_vec();
    holder_args.extend(["exec", "/cli-tls", "--", "sh", "-c", "echo locked; read x"]);
    let mut holder = Proc::spawn(zklock(&c, &holder_args));
    holder.expect_line("locked");
    let mut status_args: Vec<&str> = tls.to_vec();
    status_args.extend(["status", "--json", "/cli-tls"]);
    let (code, out, err) = run(&c, &status_args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(Json::parse(&out[0]).get("queue").array().len(), 1);
    holder.send_line("bye");
    let (status, _, err) = holder.finish(PROMPT);
    assert_eq!(status.code(), Some(0), "{err}");
    // The other CA: refused with a reason, not a hang.
    let other = certs.other_ca_pem.to_string_lossy().into_owned();
    let (code, _, err) = run(
        &c,
        &[
            "--tls-ca",
            &other,
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "status",
            "/cli-tls",
        ],
    );
    assert_eq!(code, 69, "{err}");
    assert!(
        err.to_lowercase().contains("ca") || err.contains("certificate"),
        "{err}"
    );
    let line = one_line(&err);
    assert_eq!(line.matches(&c).count(), 1, "the address once: {line}");
}

/// SASL DIGEST-MD5 with the password from the environment (never argv);
/// a wrong one is refused with exit 77; no password at all is a usage error.
#[test]
fn status_with_a_sasl_login() {
    let server = ZkServer::start_with_options(
        &testkit::zk::ZkOptions::new().sasl_digest(&[("alice", "alice-secret")]),
    );
    let c = server.connect_string();
    let status = |password: Option<&str>| {
        let mut cmd = zklock(&c, &["--sasl-user", "alice", "status", "/cli-sasl"]);
        cmd.env_remove("ZKLOCK_SASL_PASSWORD");
        if let Some(p) = password {
            cmd.env("ZKLOCK_SASL_PASSWORD", p);
        }
        let (status, _, err) = Proc::spawn(cmd).finish(PROMPT);
        (status.code().unwrap_or(-1), err)
    };
    let (code, err) = status(Some("alice-secret"));
    assert_eq!(code, 0, "{err}");
    let (code, err) = status(Some("wrong"));
    assert_eq!(code, 77, "{err}");
    let (code, err) = status(None);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("ZKLOCK_SASL_PASSWORD"), "{err}");
}

/// The release helper's pid, among `zklock_pid`'s children.
fn release_helper_of(zklock_pid: u32) -> u32 {
    let mut found = None;
    wait_until("the release helper to start", PROMPT, || {
        found = children_of(zklock_pid)
            .into_iter()
            .find(|(_, _, cmdline)| cmdline.contains("--release-helper"))
            .map(|(pid, _, _)| pid);
        found.is_some()
    });
    found.expect("found above")
}

/// The environment of a process of ours, one `KEY=value` a line.
fn environ_of(pid: u32) -> Vec<String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_else(|e| panic!("reading the environment of {pid}: {e}"));
    raw.split(|b| *b == 0)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect()
}

/// zklock reads its secrets from the environment, and removes them from
/// what it hands on: CMD and the release helper see neither the names nor
/// the values, while the rest of the environment goes through.
#[test]
fn secret_variables_reach_neither_the_command_nor_the_helper() {
    let c = shared();
    let mut cmd = zklock(
        &c,
        &[
            "exec",
            "/cli-secrets",
            "--",
            "sh",
            "-c",
            "env; echo locked; read x",
        ],
    );
    cmd.env("ZKLOCK_DIGEST", "carol:digest-s3cret")
        .env("ZKLOCK_SASL_PASSWORD", "sasl-s3cret")
        .env("ZKLOCK_TEST_CANARY", "passed-on");
    let mut p = Proc::spawn(cmd);
    p.expect_line("locked");
    let leaks = |what: &str, vars: &[String]| {
        assert!(
            vars.iter().any(|v| v == "ZKLOCK_TEST_CANARY=passed-on"),
            "{what}: the environment read is not the one handed on: {vars:?}"
        );
        for v in vars {
            assert!(
                !v.starts_with("ZKLOCK_DIGEST")
                    && !v.starts_with("ZKLOCK_SASL_PASSWORD")
                    && !v.contains("s3cret"),
                "{what} sees a secret: {v}"
            );
        }
    };
    leaks("CMD", &p.seen);
    assert!(
        p.seen
            .iter()
            .any(|v| v.starts_with("ZKLOCK_NODE=/cli-secrets/")),
        "CMD's own variables: {:?}",
        p.seen
    );
    let helper = release_helper_of(p.pid());
    leaks("the release helper", &environ_of(helper));
    let cmdline = std::fs::read(format!("/proc/{helper}/cmdline")).unwrap();
    assert!(
        !String::from_utf8_lossy(&cmdline).contains("s3cret"),
        "the helper's command line holds a secret"
    );
    p.send_line("done");
    let (status, _, err) = p.finish(PROMPT);
    assert_eq!(status.code(), Some(0), "{err}");
}

/// SIGKILL a holder started with `security` (and `env`) while a waiter
/// with the same queues; the waiter must take over within a second: the
/// helper deleted the node, it did not wait for the session to expire.
fn sigkill_takeover(c: &str, security: &[&str], env: &[(&str, &str)], path: &str) -> Duration {
    let dir = scratch_dir("cli-kill-secure");
    let d = dir.to_str().unwrap();
    let script = trapping_script("stopped", 0);
    let with = |args: &[&str]| {
        let mut all: Vec<&str> = security.to_vec();
        all.extend_from_slice(args);
        let mut cmd = zklock(c, &all);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd
    };
    let mut holder = Proc::spawn(with(&["exec", path, "--", "sh", "-c", &script, "sh", d]));
    holder.expect_line("locked");
    let mut waiter = Proc::spawn(with(&[
        "exec",
        "-w",
        "30",
        path,
        "--",
        "echo",
        "taken over",
    ]));
    let mut queued = false;
    wait_until("the waiter to queue", PROMPT, || {
        let (code, out, _) = Proc::spawn(with(&["status", "--json", path])).finish(PROMPT);
        queued =
            code.code() == Some(0) && Json::parse(&out.join("\n")).get("queue").array().len() == 2;
        queued
    });
    let killed = Instant::now();
    holder.child.kill().unwrap(); // SIGKILL
    waiter.expect_line("taken over");
    let took = killed.elapsed();
    assert!(dir.join("stopped").exists(), "the command got no SIGTERM");
    let (status, _, err) = waiter.finish(PROMPT);
    assert_eq!(status.code(), Some(0), "{err}");
    drop(holder);
    let _ = std::fs::remove_dir_all(dir);
    took
}

/// Under mutual TLS the helper connects with the holder's CA, certificate
/// and key, so a SIGKILLed holder's lock is freed at once (not after the
/// session timeout, which is what a helper without them would wait).
#[cfg(feature = "tls")]
#[test]
fn sigkill_of_a_tls_holder_frees_the_lock_at_once() {
    let certs = testkit::certs::shared();
    let server = ZkServer::start_with_options(&certs.server_options(true));
    let c = server.secure_addr().to_string();
    let ca = certs.ca_pem.to_string_lossy().into_owned();
    let cert = certs.client_pem.to_string_lossy().into_owned();
    let key = certs.client_key.to_string_lossy().into_owned();
    let tls = ["--tls-ca", &ca, "--tls-cert", &cert, "--tls-key", &key];
    let took = sigkill_takeover(&c, &tls, &[], "/cli-kill-tls");
    assert!(took < Duration::from_secs(1), "takeover took {took:?}");
}

/// On an ensemble that refuses sessions without SASL, the helper logs in
/// with the holder's user and password (handed over its pipe), so a
/// SIGKILLed holder's lock is freed at once.
#[test]
fn sigkill_of_a_sasl_holder_frees_the_lock_at_once() {
    let server = ZkServer::start_with_options(
        &testkit::zk::ZkOptions::new()
            .sasl_digest(&[("alice", "alice-secret")])
            .config("enforce.auth.enabled", "true")
            .config("enforce.auth.schemes", "sasl"),
    );
    let c = server.connect_string();
    // The control: without the login, the server refuses us.
    let (code, _, err) = run(&c, &["status", "/cli-kill-sasl"]);
    assert_ne!(code, 0, "the server must require SASL for this test: {err}");
    let took = sigkill_takeover(
        &c,
        &["--sasl-user", "alice"],
        &[("ZKLOCK_SASL_PASSWORD", "alice-secret")],
        "/cli-kill-sasl",
    );
    assert!(took < Duration::from_secs(1), "takeover took {took:?}");
}

/// With a SASL login, `exec` makes its node and the lock path creator-only:
/// another user (and an anonymous client) can neither change nor delete
/// the holder's node. `--acl open` makes them open again.
#[test]
fn exec_under_sasl_makes_creator_only_nodes_and_acl_opens_them() {
    use zklock::{Client, ErrorCode, SaslConfig};
    let server = ZkServer::start_with_options(
        &testkit::zk::ZkOptions::new()
            .sasl_digest(&[("alice", "alice-secret"), ("bob", "bob-secret")]),
    );
    let c = server.connect_string();
    let as_alice = |args: &[&str]| {
        let mut all = vec!["--sasl-user", "alice"];
        all.extend_from_slice(args);
        let mut cmd = zklock(&c, &all);
        cmd.env("ZKLOCK_SASL_PASSWORD", "alice-secret");
        cmd
    };
    let bob = Client::builder(&c)
        .sasl(SaslConfig::digest_md5("bob", "bob-secret"))
        .connect()
        .unwrap();
    let anonymous = Client::connect(&c, PROMPT).unwrap();
    for (path, acl, refused) in [
        ("/cli-acl/default", None, true),
        ("/cli-acl/open", Some("open"), false),
    ] {
        let mut args = vec!["exec"];
        if let Some(acl) = acl {
            args.extend(["--acl", acl]);
        }
        let script = "echo \"$ZKLOCK_NODE\"; echo locked; read x";
        args.extend([path, "--", "sh", "-c", script]);
        let mut holder = Proc::spawn(as_alice(&args));
        holder.expect_line("locked");
        let node = holder.seen[0].clone();
        assert!(node.starts_with(path), "{node}");
        for (who, client) in [("bob", &bob), ("anonymous", &anonymous)] {
            let write = client.set_data(&node, b"mine", None).map(drop);
            if refused {
                let delete = client.delete(&node, None);
                for (op, r) in [("setData", write), ("delete", delete)] {
                    assert_eq!(
                        r.as_ref().err().and_then(|e| e.code()),
                        Some(ErrorCode::NoAuth),
                        "{who} {op} on {node}: {r:?}"
                    );
                }
            } else {
                assert!(write.is_ok(), "{who}: {write:?}");
            }
        }
        holder.send_line("bye");
        let (status, _, err) = holder.finish(PROMPT);
        assert_eq!(status.code(), Some(0), "{err}");
    }
}

/// With logins, only the lock path is creator-only. The folder above it
/// that the first user's `exec` creates lets anyone create locks in it, so
/// a second user locks beside the first under the same folder (it was
/// `NoAuth on createContainer`, exit 77); yet neither can delete the
/// other's node or lock path, queue on the other's lock path, or change
/// the folder.
#[test]
fn without_a_login_the_folders_and_the_lock_path_are_open() {
    use zklock::{Acl, Client};
    let c = shared();
    let (code, _, err) = run(&c, &["exec", "-n", "/cli-open/jobs/a", "--", "true"]);
    assert_eq!(code, 0, "{err}");
    let reader = Client::connect(&c, Duration::from_secs(10)).unwrap();
    for path in ["/cli-open", "/cli-open/jobs", "/cli-open/jobs/a"] {
        assert_eq!(
            reader.get_acl(path).unwrap().0,
            Acl::open_unsafe(),
            "{path} is not open"
        );
    }
    // A second lock in the same folder is let in.
    let (code, _, err) = run(&c, &["exec", "-n", "/cli-open/jobs/b", "--", "true"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn two_logins_lock_side_by_side_under_one_folder() {
    use zklock::{perms, Acl, Client, ErrorCode, Id, SaslConfig};
    let server = ZkServer::start_with_options(
        &testkit::zk::ZkOptions::new()
            .sasl_digest(&[("alice", "alice-secret"), ("bob", "bob-secret")]),
    );
    let c = server.connect_string();
    let as_user = |user: &str, args: &[&str]| {
        let mut all = vec!["--sasl-user", user];
        all.extend_from_slice(args);
        let mut cmd = zklock(&c, &all);
        cmd.env("ZKLOCK_SASL_PASSWORD", format!("{user}-secret"));
        cmd
    };
    let holding = |user: &str, path: &str| {
        let script = "echo \"$ZKLOCK_NODE\"; echo locked; read x";
        let mut p = Proc::spawn(as_user(
            user,
            &["exec", "-n", path, "--", "sh", "-c", script],
        ));
        p.expect_line("locked");
        let node = p.seen[0].clone();
        assert!(node.starts_with(&format!("{path}/")), "{node}");
        (p, node)
    };
    let once = |user: &str, path: &str| {
        let (status, _, err) =
            Proc::spawn(as_user(user, &["exec", "-n", path, "--", "true"])).finish(PROMPT);
        (status.code(), err)
    };
    let login = |user: &str| {
        Client::builder(&c)
            .sasl(SaslConfig::digest_md5(user, &format!("{user}-secret")))
            .connect()
            .unwrap()
    };
    let (alice, bob) = (login("alice"), login("bob"));
    // The measured case: alice first, then bob, one after the other.
    let (code, err) = once("alice", "/sasl/a");
    assert_eq!(code, Some(0), "{err}");
    let (code, err) = once("bob", "/sasl/b");
    assert_eq!(code, Some(0), "bob is locked out of /sasl: {err}");
    // Side by side.
    let (alices, alice_node) = holding("alice", "/sasl/a");
    let (bobs, bob_node) = holding("bob", "/sasl/b");
    let sasl = |user: &str, perms| Acl {
        perms,
        id: Id {
            scheme: "sasl".into(),
            id: user.into(),
        },
    };
    let anyone = Acl {
        perms: perms::READ | perms::CREATE,
        id: Id {
            scheme: "world".into(),
            id: "anyone".into(),
        },
    };
    assert_eq!(
        alice.get_acl("/sasl").unwrap().0,
        vec![anyone, sasl("alice", perms::ALL)]
    );
    assert_eq!(
        alice.get_acl("/sasl/a").unwrap().0,
        vec![sasl("alice", perms::ALL)]
    );
    assert_eq!(
        bob.get_acl("/sasl/b").unwrap().0,
        vec![sasl("bob", perms::ALL)]
    );
    let no_auth = |what: &str, r: zklock::Result<()>| {
        assert_eq!(
            r.as_ref().err().and_then(|e| e.code()),
            Some(ErrorCode::NoAuth),
            "{what}: {r:?}"
        );
    };
    no_auth("bob deletes alice's node", bob.delete(&alice_node, None));
    no_auth("alice deletes bob's node", alice.delete(&bob_node, None));
    no_auth("bob deletes alice's lock path", bob.delete("/sasl/a", None));
    no_auth(
        "bob writes the folder",
        bob.set_data("/sasl", b"mine", None).map(drop),
    );
    no_auth(
        "bob changes the folder's ACL",
        bob.set_acl("/sasl", Acl::open_unsafe(), None).map(drop),
    );
    let (code, err) = once("bob", "/sasl/a");
    assert_eq!(code, Some(77), "bob queues on alice's lock path: {err}");
    for mut p in [alices, bobs] {
        p.send_line("bye");
        let (status, _, err) = p.finish(PROMPT);
        assert_eq!(status.code(), Some(0), "{err}");
    }
}

/// `--digest-file` logs in with the `user:password` in the file (its
/// trailing newline dropped): the lock path zklock creates is then
/// creator-only, for that digest identity alone.
/// Kills: digest_credentials -> Ok(None), -> Ok(Some(String::new())) and ->
/// Ok(Some("xyzzy".into())).
#[test]
fn a_digest_file_logs_in_and_its_nodes_are_creator_only() {
    use zklock::Client;
    let c = shared();
    let file = scratch_dir("cli-digest").join("digest");
    std::fs::write(&file, "carol:carol-s3cret\n").unwrap();
    let f = file.to_string_lossy().into_owned();
    let (code, _, err) = run(
        &c,
        &[
            "--digest-file",
            &f,
            "exec",
            "-n",
            "/cli-digest/a",
            "--",
            "true",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let carol = Client::connect(&c, Duration::from_secs(10)).unwrap();
    carol.add_auth("digest", b"carol:carol-s3cret").unwrap();
    let (acl, _) = carol.get_acl("/cli-digest/a").unwrap();
    let ids: Vec<_> = acl
        .iter()
        .map(|a| (a.id.scheme.as_str(), a.id.id.split(':').next(), a.perms))
        .collect();
    assert_eq!(
        ids,
        [("digest", Some("carol"), zklock::perms::ALL)],
        "{acl:?}"
    );
    // The same login, from the same file, may change it; anyone else may not.
    assert!(carol.set_data("/cli-digest/a", b"x", None).is_ok());
    let anonymous = Client::connect(&c, Duration::from_secs(10)).unwrap();
    assert_eq!(
        anonymous
            .set_data("/cli-digest/a", b"y", None)
            .err()
            .and_then(|e| e.code()),
        Some(zklock::ErrorCode::NoAuth)
    );
}
