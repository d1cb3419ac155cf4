//! Reads of a queue that change between the listing and the reads of its
//! nodes: the proxy holds the reader's requests after the listing's reply,
//! the test changes the server, then lets the reads go. And a node in the
//! queue the reader may not read is an error, not a gap.

use super::*;

use std::sync::mpsc;

use testkit::proxy::Proxy;
use zklock::recipes::{inspect, Mutex, MutexOptions};
use zklock::{Acl, Error, ErrorCode};

/// The op code of the listings (getChildren2).
const LISTING: i32 = 12;

/// A client whose traffic goes through its own proxy.
fn proxied() -> (Proxy, Client) {
    let proxy = Proxy::start(testkit::zk::shared().addr());
    let c = Client::connect(&proxy.connect_string(), T).unwrap();
    (proxy, c)
}

/// Runs `read` on another thread while `change` runs between its listing
/// and its next request; returns what `read` returned.
fn with_change_after_listing<R: Send + 'static>(
    proxy: &Proxy,
    read: impl FnOnce() -> R + Send + 'static,
    change: impl FnOnce(),
) -> R {
    proxy.hold_requests_after_reply_of_next(LISTING);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(read());
    });
    assert!(proxy.wait_requests_held(WAIT), "the listing went through");
    change();
    proxy.clear();
    rx.recv_timeout(WAIT).expect("the read returns")
}

#[test]
fn a_leader_gone_between_the_listing_and_its_read_is_looked_for_again() {
    let p = path("between-leader");
    let (a, b) = (client(), client());
    let first = Election::new(&a, &p, b"a")
        .unwrap()
        .campaign_timeout(WAIT)
        .unwrap();
    let second = Election::new(&b, &p, b"b").unwrap().start_campaign(None);
    wait_children(&a, &p, 2);
    let (proxy, o) = proxied();
    let observed = Election::new(&o, &p, b"observer").unwrap();
    let (leader, _watch) = with_change_after_listing(
        &proxy,
        move || observed.watch_leader().map(|(l, w)| (l.map(|l| l.id), w)),
        || first.unlock().unwrap(),
    )
    .unwrap();
    assert_eq!(leader.as_deref(), Some(&b"b"[..]));
    drop(second.wait_timeout(WAIT).unwrap());
}

#[test]
fn a_node_gone_between_the_listing_and_its_read_leaves_the_queue() {
    let p = path("between-inspect");
    let (a, b) = (client(), client());
    let held = Mutex::new(&a, &p).unwrap().lock().unwrap();
    let waiting = Mutex::new(&b, &p).unwrap().start_lock(None);
    wait_children(&a, &p, 2);
    let (proxy, o) = proxied();
    let q = p.clone();
    let queue =
        with_change_after_listing(&proxy, move || inspect(&o, &q), || held.unlock().unwrap())
            .unwrap();
    assert_eq!(queue.len(), 1, "{queue:?}");
    assert_eq!(queue[0].owner_session, b.session_id());
    drop(waiting.wait_timeout(WAIT).unwrap());
}

/// A holder's node with a creator-only ACL under an open lock path: the
/// others may list the queue but not read that node.
#[test]
fn a_node_the_reader_may_not_read_is_an_error() {
    let p = path("unreadable-holder");
    let a = client();
    a.add_auth("digest", b"unreadable:secret").unwrap();
    let options = MutexOptions::default().acl(Acl::creator_all());
    let election = Election::with_options(&a, &p, b"a", options.clone()).unwrap();
    let lead = election.campaign_timeout(WAIT).unwrap();
    let o = client();
    let no_auth = |e: &Error| e.code() == Some(ErrorCode::NoAuth);
    let listed = inspect(&o, &p).unwrap_err();
    assert!(no_auth(&listed), "{listed:?}");
    watch_leader_refused(&o, &p);
    drop(lead);
    // Nor a lock path the reader may not list.
    let closed = path("unreadable-election");
    a.create_with(
        &closed,
        b"",
        &zklock::CreateOptions::new(zklock::CreateMode::Persistent).acl(Acl::creator_all()),
    )
    .unwrap();
    watch_leader_refused(&o, &closed);
}

/// `watch_leader` on `p` returns NoAuth (on another thread: a call that
/// loops instead fails the test rather than hanging it).
fn watch_leader_refused(o: &Client, p: &str) {
    let observed = Election::new(o, p, b"observer").unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(observed.watch_leader().map(|(l, _)| l));
    });
    match rx.recv_timeout(WAIT).expect("watch_leader returns") {
        Err(LockError::Client(e)) if e.code() == Some(ErrorCode::NoAuth) => {}
        other => panic!("watch_leader on {p} said {other:?}"),
    }
}

/// A lock path that does not exist has an empty queue and no leader.
#[test]
fn a_queue_that_does_not_exist_is_empty() {
    let p = path("never-created");
    let c = client();
    assert_eq!(inspect(&c, &p).unwrap(), vec![]);
    assert_eq!(Election::new(&c, &p, b"x").unwrap().leader().unwrap(), None);
}
