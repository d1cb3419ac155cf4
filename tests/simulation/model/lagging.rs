//! A follower whose applied state trails the leader's (the model's
//! `lagging.rs`): every client connected to it reads its older state,
//! its watches fire when it applies, a client's own writes are seen in
//! order, `sync` catches it up, and a client that has seen newer zxids is
//! refused there.

use super::*;

const LAG: Duration = Duration::from_millis(400);

fn lagging_world() -> World {
    World::with(|zk| zk.with_lagging_follower(LAG, 7))
}

fn get(w: &mut World, i: usize, path: &str) -> Reply {
    w.call(i, Request::GetData(pw(path, false)))
}

#[test]
fn every_client_of_a_lagging_follower_reads_its_older_state_until_it_applies() {
    let mut w = lagging_world();
    let leader = w.client();
    let (b, c) = (w.client_on(true), w.client_on(true));
    w.call(
        leader,
        Request::Create(create("/x", b"1", CreateMode::Persistent)),
    )
    .unwrap();
    assert!(
        w.zk.follower_zxid() < w.zk.last_zxid(),
        "the txn is still to apply"
    );
    // Both of the follower's clients, neither of which wrote: NoNode.
    assert_eq!(
        get(&mut w, b, "/x"),
        Err(RequestError::Server(ErrorCode::NoNode))
    );
    assert_eq!(
        get(&mut w, c, "/x"),
        Err(RequestError::Server(ErrorCode::NoNode))
    );
    // Replies carry the follower's zxid, never the leader's.
    assert!(w.clients[b].s.last_zxid() < w.zk.last_zxid());
    w.advance(LAG);
    assert_eq!(w.zk.follower_zxid(), w.zk.last_zxid());
    assert!(matches!(get(&mut w, b, "/x"), Ok(Response::Data { data, .. }) if data == b"1"));
    assert!(matches!(get(&mut w, c, "/x"), Ok(Response::Data { .. })));
}

#[test]
fn a_lagging_followers_watches_fire_when_it_applies() {
    let mut w = lagging_world();
    let leader = w.client();
    let b = w.client_on(true);
    assert_eq!(
        w.call_w(b, Request::Exists(pw("/y", true)), true).1,
        Err(RequestError::Server(ErrorCode::NoNode))
    );
    w.call(
        leader,
        Request::Create(create("/y", b"", CreateMode::Persistent)),
    )
    .unwrap();
    assert!(w.zk.follower_zxid() < w.zk.last_zxid());
    assert!(w.fired(b).is_empty(), "fired before the follower applied");
    w.advance(LAG);
    let fired = w.fired(b);
    assert_eq!(fired.len(), 1);
    assert_eq!(
        (fired[0].1, fired[0].2.as_str()),
        (EventType::NodeCreated, "/y")
    );
}

#[test]
fn a_client_of_a_lagging_follower_reads_its_own_writes_in_order() {
    let mut w = lagging_world();
    let leader = w.client();
    let b = w.client_on(true);
    // Another client's write, then ours: a read after ours sees both,
    // since the follower applies in zxid order and answers our read only
    // after our write (CommitProcessor's per-session queue).
    w.call(
        leader,
        Request::Create(create("/w", b"", CreateMode::Persistent)),
    )
    .unwrap();
    let hw = w.submit(
        b,
        Request::Create(create("/v", b"", CreateMode::Persistent)),
        false,
    );
    let hr = w.submit(b, Request::GetData(pw("/w", false)), false);
    let hp = w.submit(b, Request::GetData(pw("/v", false)), false);
    w.pump();
    assert!(
        w.clients[b].replies.is_empty(),
        "answered before the follower applied its write"
    );
    w.advance(LAG);
    let replies: Vec<u64> = w.clients[b].replies.iter().map(|(h, _)| *h).collect();
    assert_eq!(replies, vec![hw, hr, hp]);
    assert!(w.clients[b].replies.iter().all(|(_, r)| r.is_ok()));
}

#[test]
fn sync_on_a_lagging_follower_waits_for_what_the_leader_committed() {
    let mut w = lagging_world();
    let leader = w.client();
    let b = w.client_on(true);
    w.call(
        leader,
        Request::Create(create("/s", b"", CreateMode::Persistent)),
    )
    .unwrap();
    let hs = w.submit(b, Request::Sync("/s".into()), false);
    let hr = w.submit(b, Request::GetData(pw("/s", false)), false);
    w.pump();
    assert!(w.clients[b].replies.is_empty());
    w.advance(LAG);
    let c = &w.clients[b];
    assert_eq!(
        c.replies.iter().map(|(h, _)| *h).collect::<Vec<_>>(),
        vec![hs, hr]
    );
    assert!(c.replies.iter().all(|(_, r)| r.is_ok()));
}

#[test]
fn a_client_ahead_of_a_lagging_follower_is_refused_there_until_it_catches_up() {
    let mut w = lagging_world();
    let a = w.client();
    w.call(
        a,
        Request::Create(create("/z", b"", CreateMode::Persistent)),
    )
    .unwrap();
    let seen = w.clients[a].s.last_zxid();
    assert!(w.zk.follower_zxid() < seen);
    // Its connection moves to the follower, which has not applied what the
    // client saw: closed with no answer (ZooKeeperServer.processConnectRequest).
    w.clients[a].lagging = true;
    w.cut(a);
    assert_ne!(w.clients[a].s.state(), SessionState::Connected);
    // Once the follower has caught up, the same session resumes there.
    w.advance(LAG);
    assert_eq!(w.clients[a].s.state(), SessionState::Connected);
    assert!(w.zk.is_lagging(w.clients[a].conn.expect("connected")));
    assert!(matches!(get(&mut w, a, "/z"), Ok(Response::Data { .. })));
}
