//! Sequential names at the end of the parent's counter: one create at a
//! time, creates in flight, and multis.

use super::*;

/// Protected-style names with a unique prefix per create, as Curator and
/// zklock name lock nodes.
fn unique(k: usize) -> Request {
    Request::Create2(create(
        &format!("/lock/_c_{k:04}-lock-"),
        b"",
        CreateMode::EphemeralSequential,
    ))
}

/// The number after `-lock-` (`%010d`: eleven characters when negative).
fn suffix(path: &str) -> i32 {
    let (_, n) = path
        .rsplit_once("-lock-")
        .unwrap_or(("", &path[path.len() - 10..]));
    n.parse().unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// DataTree.createNode stores a parent's cversion only if greater: one
/// create at a time, the counter stops at i32::MAX; plain names then fail
/// NodeExists, unique prefixes reuse the suffix; deletes move neither the
/// counter nor cversion's end, only pzxid.
#[test]
fn sequential_names_stop_at_the_counter_end() {
    let mut w = World::with(|zk| zk.with_sequence_start(i32::MAX - 1));
    let a = w.client();
    w.call(
        a,
        Request::Create(create("/lock", b"", CreateMode::Persistent)),
    )
    .unwrap();
    let mk = |w: &mut World| {
        w.call(
            a,
            Request::Create(create("/lock/n-", b"", CreateMode::EphemeralSequential)),
        )
    };
    assert_eq!(created_path(mk(&mut w)), "/lock/n-2147483646");
    assert_eq!(created_path(mk(&mut w)), "/lock/n-2147483647");
    let pzxid = w.zk.exists("/lock").unwrap().pzxid;
    assert_eq!(mk(&mut w), Err(RequestError::Server(ErrorCode::NodeExists)));
    assert_eq!(w.zk.sequence_counter("/lock"), Some(i32::MAX));
    let names: Vec<String> = (0..3).map(|k| created_path(w.call(a, unique(k)))).collect();
    assert!(names.iter().all(|n| suffix(n) == i32::MAX), "{names:?}");
    assert_eq!(w.zk.sequence_counter("/lock"), Some(i32::MAX));
    // Creates at the end leave pzxid where it was.
    assert_eq!(w.zk.exists("/lock").unwrap().pzxid, pzxid);
    // DataNode.copyStat: 2 × stored − numChildren, in Java ints.
    assert_eq!(
        w.zk.exists("/lock").unwrap().cversion,
        i32::MAX.wrapping_mul(2).wrapping_sub(5)
    );
    assert!(w.zk.delete_as_admin(w.now, "/lock/n-2147483647"));
    assert!(w.zk.exists("/lock").unwrap().pzxid > pzxid);
    assert_eq!(w.zk.sequence_counter("/lock"), Some(i32::MAX));
    assert_eq!(created_path(mk(&mut w)), "/lock/n-2147483647");
    // Small numbers are zero-padded to ten digits, negative ones too.
    let mut w = World::with(|zk| zk.with_sequence_start(-1));
    let a = w.client();
    w.call(
        a,
        Request::Create(create("/q", b"", CreateMode::Persistent)),
    )
    .unwrap();
    let first = created_path(w.call(
        a,
        Request::Create(create("/q/x", b"", CreateMode::PersistentSequential)),
    ));
    let second = created_path(w.call(
        a,
        Request::Create(create("/q/x", b"", CreateMode::PersistentSequential)),
    ));
    assert_eq!(
        (first.as_str(), second.as_str()),
        ("/q/x-000000001", "/q/x0000000000")
    );
}

/// Sends `reqs` without pumping in between: they reach the server in one
/// `receive`, one burst in flight. Returns the replies in order.
fn burst(w: &mut World, i: usize, reqs: Vec<Request>) -> Vec<Reply> {
    let handles: Vec<u64> = reqs.into_iter().map(|r| w.submit(i, r, false)).collect();
    w.pump();
    handles
        .iter()
        .map(|h| {
            let c = &mut w.clients[i];
            let pos = c.replies.iter().position(|(rh, _)| rh == h).expect("reply");
            c.replies.remove(pos).1
        })
        .collect()
}

/// PrepRequestProcessor names a create from the outstanding parent record
/// (cversion + 1 in Java ints) while an earlier create is in flight: at the
/// end a burst comes out 2147483647, -2147483648, -2147483647, …; the
/// stored counter stays at i32::MAX, so the next burst issues -2147483648
/// again.
#[test]
fn creates_in_flight_at_the_end_come_out_negative() {
    let mut w = World::with(|zk| zk.with_sequence_start(i32::MAX));
    let a = w.client();
    w.call(
        a,
        Request::Create(create("/lock", b"", CreateMode::Persistent)),
    )
    .unwrap();
    let names =
        |rs: Vec<Reply>| -> Vec<i32> { rs.into_iter().map(|r| suffix(&created_path(r))).collect() };
    let first = names(burst(&mut w, a, (0..4).map(unique).collect()));
    assert_eq!(first, [i32::MAX, i32::MIN, i32::MIN + 1, i32::MIN + 2]);
    assert_eq!(w.zk.sequence_counter("/lock"), Some(i32::MAX));
    let second = names(burst(&mut w, a, (4..6).map(unique).collect()));
    assert_eq!(second, [i32::MAX, i32::MIN]);
    // A delete in flight carries the prepped cversion on (its parent record
    // is a duplicate of the outstanding one).
    let third = burst(
        &mut w,
        a,
        vec![
            unique(6),
            Request::Delete(PathVersion {
                path: "/lock/_c_0000-lock-2147483647".into(),
                version: -1,
            }),
            unique(7),
        ],
    );
    assert_eq!(suffix(&created_path(third[0].clone())), i32::MAX);
    assert!(third[1].is_ok(), "{:?}", third[1]);
    assert_eq!(suffix(&created_path(third[2].clone())), i32::MIN);
}

/// Two sequential creates in one multi at the end: the second is prepped
/// against the first's record. A failed multi puts the outstanding records
/// back (PrepRequestProcessor.rollbackPendingChanges).
#[test]
fn multi_at_the_counter_end_and_its_rollback() {
    let mut w = World::with(|zk| zk.with_sequence_start(i32::MAX));
    let a = w.client();
    let b = w.client();
    w.call(
        a,
        Request::Create(create("/lock", b"", CreateMode::Persistent)),
    )
    .unwrap();
    let seq = |k: usize| {
        MultiOp::Create(create(
            &format!("/lock/_c_{k:04}-lock-"),
            b"",
            CreateMode::PersistentSequential,
        ))
    };
    match w.call(a, Request::Multi(vec![seq(0), seq(1)])) {
        Ok(Response::Multi(rs)) => assert_eq!(
            rs,
            vec![
                MultiResult::Create {
                    path: "/lock/_c_0000-lock-2147483647".into()
                },
                MultiResult::Create {
                    path: "/lock/_c_0001-lock--2147483648".into()
                },
            ]
        ),
        other => panic!("{other:?}"),
    }
    // One window of requests in flight across two connections.
    w.zk.hold_in_flight(true);
    assert_eq!(suffix(&created_path(w.call(a, unique(2)))), i32::MAX);
    let failing = Request::Multi(vec![
        seq(3),
        MultiOp::Check(PathVersion {
            path: "/missing".into(),
            version: -1,
        }),
    ]);
    assert!(matches!(w.call(b, failing), Ok(Response::Multi(_))));
    assert_eq!(suffix(&created_path(w.call(b, unique(4)))), i32::MIN);
    w.zk.hold_in_flight(false);
    assert_eq!(suffix(&created_path(w.call(b, unique(5)))), i32::MAX);
    assert_eq!(w.zk.sequence_counter("/lock"), Some(i32::MAX));
}
