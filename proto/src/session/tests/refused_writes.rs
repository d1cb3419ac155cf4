//! Writes the server refuses: a refusal the leader ordered proves the
//! session alive like a success; one a follower may give alone does not.

use super::*;

use jute::{Acl, CreateMode, MultiOp, MultiResult, PathVersion, SetDataRequest};

fn create(path: &str) -> Request {
    Request::Create(jute::CreateRequest {
        path: path.into(),
        data: Vec::new(),
        acl: Acl::open_unsafe(),
        mode: CreateMode::Persistent,
    })
}

fn set_data(path: &str, version: i32) -> Request {
    Request::SetData(SetDataRequest {
        path: path.into(),
        data: b"x".to_vec(),
        version,
    })
}

fn delete(path: &str) -> Request {
    Request::Delete(PathVersion {
        path: path.into(),
        version: -1,
    })
}

/// A multi whose second op fails: ZooKeeper answers it with header Ok,
/// the ops before the failure as `Error(Ok)`, the failing one with its
/// code, the rest `RuntimeInconsistency` (`DataTree.processTxn`).
fn failing_multi() -> (Request, Response) {
    let request = Request::Multi(vec![
        MultiOp::Check(PathVersion {
            path: "/m".into(),
            version: -1,
        }),
        MultiOp::Create(jute::CreateRequest {
            path: "/m/taken".into(),
            data: Vec::new(),
            acl: Acl::open_unsafe(),
            mode: CreateMode::Persistent,
        }),
        MultiOp::Delete(PathVersion {
            path: "/m/other".into(),
            version: -1,
        }),
    ]);
    let results = Response::Multi(vec![
        MultiResult::Error(ErrorCode::Ok),
        MultiResult::Error(ErrorCode::NodeExists),
        MultiResult::Error(ErrorCode::RuntimeInconsistency),
    ]);
    (request, results)
}

/// A write of each everyday kind the server refuses, sent every 200 ms on a
/// healthy link (syncs and pings answered): the session never leaves
/// Connected. Before refusals counted, every sent write put the session's
/// own sync off and none proved anything: Suspended at 3T/4.
#[test]
fn refused_writes_keep_a_healthy_session_connected() {
    type Refusal = (&'static str, fn() -> (Request, ErrorCode, Response));
    let kinds: [Refusal; 5] = [
        ("create of an existing path", || {
            (create("/taken"), ErrorCode::NodeExists, Response::Empty)
        }),
        ("setData at a stale version", || {
            (set_data("/n", 3), ErrorCode::BadVersion, Response::Empty)
        }),
        ("delete of a missing node", || {
            (delete("/gone"), ErrorCode::NoNode, Response::Empty)
        }),
        ("check at a stale version", || {
            let check = Request::Check(PathVersion {
                path: "/n".into(),
                version: 3,
            });
            (check, ErrorCode::BadVersion, Response::Empty)
        }),
        ("a failing multi", || {
            let (request, results) = failing_multi();
            (request, ErrorCode::Ok, results)
        }),
    ];
    for (name, refusal) in kinds {
        let mut h = Harness::new();
        h.connect(1, 9000);
        h.events();
        let start = h.now;
        let rtt = Duration::from_millis(20);
        let mut token = 0;
        while h.now < start + T * 10 {
            h.advance(Duration::from_millis(200));
            let (request, code, body) = refusal();
            h.s.submit(h.now, request, token, None);
            token += 1;
            let sent = h.sent_requests();
            h.now += rtt;
            for (xid, request) in sent {
                match request {
                    Request::Sync(path) => h.reply(xid, 9, ErrorCode::Ok, Response::Path(path)),
                    Request::Ping => h.reply(xid, 9, ErrorCode::Ok, Response::Empty),
                    _ => h.reply(xid, 9, code, body.clone()),
                }
            }
            h.s.handle_timeout(h.now);
            let ev = h.events();
            assert_eq!(states(&ev), vec![], "{name}");
            assert_eq!(drops(&ev), 0, "{name}");
        }
    }
}

/// Whether an answer with this code proves the session to the leader:
/// after the handshake, half a timeout of reads answered (they touch the
/// session but prove nothing; time is moved on without timeouts, so that
/// the core sends no sync of its own), then one write answered `code`.
fn proves(request: Request, code: ErrorCode, body: Response) -> bool {
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.events();
    let handshake = h.now;
    while h.now < handshake + T / 2 {
        h.now += Duration::from_millis(100);
        h.s.submit(h.now, exists("/r", false), 0, None);
        for (xid, _) in h.sent_requests() {
            h.reply(xid, 9, ErrorCode::NoNode, Response::Empty);
        }
        h.events();
    }
    assert_eq!(h.s.leader_touch, Some(handshake), "reads prove nothing");
    h.s.submit(h.now, request, 1, None);
    let sent = h.sent_requests();
    assert_eq!(sent.len(), 1, "only the write went out");
    h.reply(sent[0].0, 9, code, body);
    assert_eq!(replies(&h.events()).len(), 1, "{code:?}: answered");
    h.s.leader_touch != Some(handshake)
}

#[test]
fn refusals_the_leader_ordered_prove_the_session_and_others_do_not() {
    let e = Response::Empty;
    // Produced only by the leader's PrepRequestProcessor, after its
    // checkSession, and answered after the quorum committed the error.
    assert!(proves(create("/a"), ErrorCode::NodeExists, e.clone()));
    assert!(proves(create("/a/b"), ErrorCode::NoNode, e.clone()));
    assert!(proves(
        create("/eph/b"),
        ErrorCode::NoChildrenForEphemerals,
        e.clone()
    ));
    assert!(proves(set_data("/a", 3), ErrorCode::BadVersion, e.clone()));
    assert!(proves(set_data("/a", 3), ErrorCode::NoNode, e.clone()));
    assert!(proves(delete("/a"), ErrorCode::NoNode, e.clone()));
    assert!(proves(delete("/a"), ErrorCode::NotEmpty, e.clone()));
    assert!(proves(delete("/a"), ErrorCode::BadArguments, e.clone()));
    let check = Request::Check(PathVersion {
        path: "/a".into(),
        version: 3,
    });
    assert!(proves(check, ErrorCode::BadVersion, e.clone()));
    let set_acl = Request::SetAcl(jute::SetAclRequest {
        path: "/a".into(),
        acl: Acl::open_unsafe(),
        version: 3,
    });
    assert!(proves(set_acl, ErrorCode::BadVersion, e.clone()));
    assert!(proves(
        create("/a"),
        ErrorCode::Ok,
        Response::Path("/a".into())
    ));
    let (multi, results) = failing_multi();
    assert!(proves(multi.clone(), ErrorCode::Ok, results));
    // A multi failing on its first op with a code of the leader's checks.
    let first = Response::Multi(vec![
        MultiResult::Error(ErrorCode::BadVersion),
        MultiResult::Error(ErrorCode::RuntimeInconsistency),
        MultiResult::Error(ErrorCode::RuntimeInconsistency),
    ]);
    assert!(proves(multi.clone(), ErrorCode::Ok, first));

    // A follower may answer these alone, or the leader may give them before
    // it checked the session.
    assert!(!proves(create("/a"), ErrorCode::Throttled, e.clone()));
    assert!(!proves(create("/a"), ErrorCode::NoAuth, e.clone()));
    assert!(!proves(set_data("/a", 1), ErrorCode::NoAuth, e.clone()));
    assert!(!proves(create("/a"), ErrorCode::InvalidAcl, e.clone()));
    assert!(!proves(
        create("/a"),
        ErrorCode::MarshallingError,
        e.clone()
    ));
    assert!(!proves(create("/a"), ErrorCode::BadArguments, e.clone()));
    assert!(!proves(create("/a"), ErrorCode::Unimplemented, e.clone()));
    assert!(!proves(delete("/a"), ErrorCode::NotReadOnly, e.clone()));
    assert!(!proves(delete("/a"), ErrorCode::ConnectionLoss, e.clone()));
    // The first op refused before or by the session check: nothing proven.
    for code in [
        ErrorCode::SessionMoved,
        ErrorCode::NoAuth,
        ErrorCode::BadArguments,
    ] {
        let results = Response::Multi(vec![
            MultiResult::Error(code),
            MultiResult::Error(ErrorCode::RuntimeInconsistency),
            MultiResult::Error(ErrorCode::RuntimeInconsistency),
        ]);
        assert!(!proves(multi.clone(), ErrorCode::Ok, results), "{code:?}");
    }
    // A multi the server could not read.
    assert!(!proves(multi, ErrorCode::MarshallingError, e.clone()));
    // Reads are answered by the follower alone, whatever they say.
    assert!(!proves(exists("/a", false), ErrorCode::NoNode, e));
}

/// The whole table of docs/PARTITION.md ("What counts as the leader's
/// word"), op by op: each code it counts proves the session for every op
/// of its row, and a code the row does not name proves nothing for that
/// op. A multi proves it when its first op failed with a code of the
/// leader's own checks, and not when that op failed otherwise.
#[test]
fn every_refusal_of_the_table_proves_the_session_for_each_op() {
    use ErrorCode as E;
    let e = Response::Empty;
    let plain = |mode| jute::CreateRequest {
        path: "/a/b".into(),
        data: Vec::new(),
        acl: Acl::open_unsafe(),
        mode,
    };
    let creates = [
        ("create", Request::Create(plain(CreateMode::Persistent))),
        ("create2", Request::Create2(plain(CreateMode::Persistent))),
        (
            "createContainer",
            Request::CreateContainer(plain(CreateMode::Container)),
        ),
        (
            "createTTL",
            Request::CreateTtl(jute::CreateTtlRequest {
                create: plain(CreateMode::PersistentWithTtl),
                ttl_ms: 60_000,
            }),
        ),
    ];
    for (op, request) in &creates {
        for code in [
            E::NodeExists,
            E::NoNode,
            E::NoChildrenForEphemerals,
            E::QuotaExceeded,
        ] {
            assert!(proves(request.clone(), code, e.clone()), "{op}: {code:?}");
        }
        for code in [E::BadVersion, E::NotEmpty, E::BadArguments, E::NoAuth] {
            assert!(!proves(request.clone(), code, e.clone()), "{op}: {code:?}");
        }
    }

    let check = Request::Check(PathVersion {
        path: "/a".into(),
        version: 3,
    });
    let set_acl = Request::SetAcl(jute::SetAclRequest {
        path: "/a".into(),
        acl: Acl::open_unsafe(),
        version: 3,
    });
    let rows: [(&str, Request, &[ErrorCode], &[ErrorCode]); 4] = [
        (
            "delete",
            delete("/a"),
            &[E::NoNode, E::BadVersion, E::NotEmpty, E::BadArguments],
            &[E::NodeExists, E::QuotaExceeded, E::NoAuth],
        ),
        (
            "check",
            check,
            &[E::NoNode, E::BadVersion, E::BadArguments],
            &[E::NotEmpty, E::NodeExists, E::NoAuth],
        ),
        (
            "setACL",
            set_acl,
            &[E::NoNode, E::BadVersion, E::BadArguments],
            &[E::NotEmpty, E::NodeExists, E::InvalidAcl],
        ),
        (
            "setData",
            set_data("/a", 3),
            &[E::NoNode, E::BadVersion, E::BadArguments, E::QuotaExceeded],
            &[E::NotEmpty, E::NodeExists, E::NoAuth],
        ),
    ];
    for (op, request, counted, not_counted) in rows {
        for &code in counted {
            assert!(proves(request.clone(), code, e.clone()), "{op}: {code:?}");
        }
        for &code in not_counted {
            assert!(!proves(request.clone(), code, e.clone()), "{op}: {code:?}");
        }
    }

    let (multi, _) = failing_multi();
    let first_failing = |code| {
        Response::Multi(vec![
            MultiResult::Error(code),
            MultiResult::Error(E::RuntimeInconsistency),
            MultiResult::Error(E::RuntimeInconsistency),
        ])
    };
    for code in [
        E::NodeExists,
        E::NoNode,
        E::BadVersion,
        E::NotEmpty,
        E::NoChildrenForEphemerals,
        E::QuotaExceeded,
    ] {
        assert!(
            proves(multi.clone(), E::Ok, first_failing(code)),
            "multi, first op {code:?}"
        );
    }
    for code in [E::InvalidAcl, E::Throttled, E::Unimplemented] {
        assert!(
            !proves(multi.clone(), E::Ok, first_failing(code)),
            "multi, first op {code:?}"
        );
    }
}

/// The reconfig refusals prove nothing. `ReconfigDisabled` comes before
/// the leader's session check (`PrepRequestProcessor`, the reconfig case);
/// `ReconfigInProgress` and `NewConfigNoQuorum` after it, but this client
/// sends no reconfig, and a proof left uncounted costs only availability.
/// The rule is read from the answers alone, beside an answered reconfig,
/// which the leader ordered.
/// Kills: a reconfig refusal counted as the leader's word.
#[test]
fn reconfig_refusals_prove_nothing_and_an_answered_reconfig_does() {
    use super::super::liveness::leader_proof;
    for code in [
        ErrorCode::ReconfigInProgress,
        ErrorCode::NewConfigNoQuorum,
        ErrorCode::ReconfigDisabled,
        ErrorCode::NoAuth,
        ErrorCode::BadArguments,
    ] {
        assert!(!leader_proof(OpCode::Reconfig, &Err(code)), "{code:?}");
    }
    assert!(leader_proof(OpCode::Reconfig, &Ok(Response::Empty)));
}
