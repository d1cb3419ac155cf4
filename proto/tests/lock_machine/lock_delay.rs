//! Lock-delay: tenure marks (proto/src/lock/tenure.rs). A holder keeps a
//! mark under `/l~tenure`; a mark without its node is an unclean end,
//! recorded on the server by the first grant that sees it, and no one is
//! granted before the server's clock has passed that record plus the
//! delay: a try then is granted at once, a wait waits out only what is
//! left of it.

use std::sync::Arc;
use std::time::Duration;

use jute::{CreateMode, ErrorCode, MultiOp, MultiResult, Request, Response, SetDataRequest, Stat};
use zklock_proto::lock::{LockError, LockSpec};
use zklock_proto::lock::{LockEvent, Outgoing};
use zklock_proto::session::RequestError;

use crate::support::*;

pub(crate) const DELAY: Duration = Duration::from_secs(5);
const DELAY_MS: i64 = 5_000;

/// The owner of a mark whose node is gone (an unclean end).
const DEAD: &str = "00000000-0000-4000-8000-00000000dead";
/// The server's clock when our node is created (ms since the epoch).
pub(crate) const CREATED_AT: i64 = 1_700_000_000_000;

pub(crate) fn delayed_spec() -> Arc<LockSpec> {
    Arc::new(LockSpec {
        lock_delay: Some(DELAY),
        ..(*spec(false)).clone()
    })
}

pub(crate) fn mark_path(owner: &str) -> String {
    format!("/l~tenure/{owner}")
}

/// create2's reply for our node, stamped `ctime` by the server.
pub(crate) fn created_at(seq: u32, ctime: i64) -> Response {
    Response::Created {
        path: format!("/l/{}", ours(seq)),
        stat: Stat {
            ctime,
            mtime: ctime,
            ..stat(100 + i64::from(seq))
        },
    }
}

/// A mark's data and Stat: `version` 0 is a holder's mark as made; a
/// recorded end has version 1 and the record's time as mtime.
pub(crate) fn mark_data(version: i32, mtime: i64) -> Result<Response, RequestError> {
    Ok(Response::Data {
        data: b"ended".to_vec(),
        stat: Stat {
            version,
            mtime,
            ..Stat::default()
        },
    })
}

/// Attempt 1 with lock-delay finds the lock free (our node: sequence 3,
/// created at `CREATED_AT`); returns the grant's two listings: the marks'
/// and the queue's, in that order.
fn delayed_listings(h: &mut Harness, no_wait: bool) -> (Outgoing, Outgoing) {
    h.m.acquire(h.now, 1, delayed_spec(), UUID.into(), None, no_wait);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created_at(3, CREATED_AT)));
    h.reply(&sent[1], Ok(children(&[&ours(3)])));
    assert!(h.events().is_empty(), "no grant before the tenure listings");
    let sent = h.sent();
    let [marks, queue] = &sent[..] else {
        panic!("the marks' listing, then the queue's: {sent:?}")
    };
    assert!(
        matches!(&marks.request, Request::GetChildren(p) if p.path == "/l~tenure" && !p.watch),
        "{sent:?}"
    );
    assert!(matches!(&queue.request, Request::GetChildren(p) if p.path == "/l"));
    (marks.clone(), queue.clone())
}

/// [`delayed_listings`] with the marks answered by `marks`; returns the
/// queue's listing, to answer next.
pub(crate) fn delayed_free_with_marks(h: &mut Harness, marks: &[&str]) -> Outgoing {
    let (listing, queue) = delayed_listings(h, false);
    h.reply(&listing, Ok(children(marks)));
    queue
}

/// No mark at all: returns the queue's listing, to answer next.
pub(crate) fn delayed_free(h: &mut Harness, _others: &[&str]) -> Outgoing {
    let (listing, queue) = delayed_listings(h, false);
    h.reply(&listing, Err(RequestError::Server(ErrorCode::NoNode)));
    queue
}

/// Whether `o` is the multi that checks our node and creates our mark.
pub(crate) fn marks(o: &Outgoing) -> bool {
    let Request::Multi(ops) = &o.request else {
        return false;
    };
    matches!(&ops[..], [MultiOp::Check(c), MultiOp::Create(m)]
        if c.path == format!("/l/{}", ours(3)) && m.path == mark_path(UUID)
            && m.mode == CreateMode::Persistent && m.data == ours(3).as_bytes())
}

pub(crate) fn reads_mark(o: &Outgoing, owner: &str) -> bool {
    matches!(&o.request, Request::GetData(p) if p.path == mark_path(owner) && !p.watch)
}

pub(crate) fn records_mark(o: &Outgoing, owner: &str) -> bool {
    matches!(&o.request, Request::SetData(SetDataRequest { path, version: 0, .. })
        if *path == mark_path(owner))
}

pub(crate) fn multi_ok(n: usize) -> Result<Response, RequestError> {
    Ok(Response::Multi(vec![MultiResult::Check; n]))
}

fn granted(events: &[LockEvent], unclean: bool) -> bool {
    matches!(events, [LockEvent::Acquired { id: 1, after_unclean_end, .. }] if *after_unclean_end == unclean)
}

fn timed_out(events: &[LockEvent]) -> bool {
    matches!(
        events,
        [LockEvent::Failed {
            id: 1,
            error: LockError::Timeout
        }]
    )
}

#[test]
fn lock_delay_after_a_clean_end_marks_outside_the_lock_path_then_grants_at_once() {
    let mut h = Harness::new();
    let queue = delayed_free(&mut h, &[]);
    h.reply(&queue, Ok(children(&[&ours(3)])));
    let sent = h.sent();
    assert!(matches!(&sent[..], [m] if marks(m)), "{sent:?}");
    assert!(h.m.poll_timeout().is_none(), "no delay is due");
    h.reply(&sent[0], multi_ok(2));
    assert!(granted(&h.events(), false));
    // The release removes node and mark in one multi.
    h.m.release(h.now, 1, true);
    let sent = h.sent();
    let [release] = &sent[..] else {
        panic!("{sent:?}")
    };
    assert!(
        matches!(&release.request, Request::Multi(ops) if matches!(&ops[..],
        [MultiOp::Delete(n), MultiOp::Delete(m)]
            if n.path == format!("/l/{}", ours(3)) && m.path == mark_path(UUID)))
    );
    h.reply(release, Ok(Response::Multi(vec![MultiResult::Delete; 2])));
    assert!(matches!(
        &h.events()[..],
        [LockEvent::Released {
            id: 1,
            refused: None
        }]
    ));
    assert!(h.m.is_empty());
}

/// The first to see an unclean end records it (a write at version 0
/// whose mtime is the server's clock), then waits the whole delay from
/// that reply, then sweeps the mark.
#[test]
fn lock_delay_the_first_to_see_an_unclean_end_records_it_waits_then_sweeps() {
    let mut h = Harness::new();
    let queue = delayed_free_with_marks(&mut h, &[DEAD]);
    h.reply(&queue, Ok(children(&[&ours(3)])));
    let sent = h.sent();
    assert!(matches!(&sent[..], [r] if reads_mark(r, DEAD)), "{sent:?}");
    h.reply(&sent[0], mark_data(0, CREATED_AT - 60_000));
    let sent = h.sent();
    assert!(
        matches!(&sent[..], [w] if records_mark(w, DEAD)),
        "{sent:?}"
    );
    h.now += Duration::from_millis(40);
    let recorded = CREATED_AT + 40;
    h.reply(
        &sent[0],
        Ok(Response::Stat(Stat {
            version: 1,
            mtime: recorded,
            ..Stat::default()
        })),
    );
    assert!(h.sent().is_empty(), "nothing before the delay is served");
    assert!(h.events().is_empty());
    assert_eq!(h.m.poll_timeout(), Some(h.now + DELAY));
    h.m.handle_timeout(h.now + DELAY - Duration::from_millis(1));
    assert!(h.sent().is_empty() && h.events().is_empty());
    h.now += DELAY;
    h.m.handle_timeout(h.now);
    let sent = h.sent();
    assert!(matches!(&sent[..], [m] if marks(m)), "{sent:?}");
    h.reply(&sent[0], multi_ok(2));
    assert!(granted(&h.events(), true));
    // Swept once granted, whatever its version.
    let sent = h.sent();
    assert!(
        sent.iter().any(|o| matches!(&o.request, Request::Delete(d)
            if d.path == mark_path(DEAD) && d.version == -1)),
        "the stale mark swept: {sent:?}"
    );
}

/// An attempt that gives up with its mark in flight sweeps nothing: the
/// next holder is still told of the unclean end.
#[test]
fn lock_delay_given_up_with_the_mark_in_flight_leaves_the_record() {
    let mut h = Harness::new();
    let queue = delayed_free_with_marks(&mut h, &[DEAD]);
    h.reply(&queue, Ok(children(&[&ours(3)])));
    let sent = h.sent();
    h.reply(&sent[0], mark_data(1, CREATED_AT - DELAY_MS));
    let mark = h.sent();
    assert!(matches!(&mark[..], [m] if marks(m)), "{mark:?}");
    h.m.cancel(h.now, 1);
    h.reply(&mark[0], multi_ok(2));
    let sent = h.sent();
    assert!(
        !sent
            .iter()
            .any(|o| matches!(&o.request, Request::Delete(d) if d.path == mark_path(DEAD))),
        "{sent:?}"
    );
}

/// A try whose node the server created a delay or more after the recorded
/// end is granted at once, however recently the caller itself first
/// looked. Before, every try counted its own delay and was refused.
#[test]
fn lock_delay_a_try_after_the_recorded_end_plus_the_delay_is_granted_at_once() {
    let mut h = Harness::new();
    let (listing, queue) = delayed_listings(&mut h, true);
    h.reply(&listing, Ok(children(&[DEAD])));
    h.reply(&queue, Ok(children(&[&ours(3)])));
    let sent = h.sent();
    assert!(matches!(&sent[..], [r] if reads_mark(r, DEAD)), "{sent:?}");
    h.reply(&sent[0], mark_data(1, CREATED_AT - DELAY_MS));
    let sent = h.sent();
    assert!(
        matches!(&sent[..], [m] if marks(m)),
        "marked at once: {sent:?}"
    );
    h.reply(&sent[0], multi_ok(2));
    assert!(granted(&h.events(), true));
    assert!(deletes(&h.sent()).contains(&mark_path(DEAD)));
}

/// A try whose node came before the recorded end plus the delay is
/// refused, writes nothing over the record and leaves it for the next.
#[test]
fn lock_delay_a_try_within_the_delay_is_refused_and_leaves_the_record() {
    let mut h = Harness::new();
    let (listing, queue) = delayed_listings(&mut h, true);
    h.reply(&listing, Ok(children(&[DEAD])));
    h.reply(&queue, Ok(children(&[&ours(3)])));
    let sent = h.sent();
    h.reply(&sent[0], mark_data(1, CREATED_AT - DELAY_MS + 1));
    assert!(timed_out(&h.events()));
    // Our node goes; the record stays for whoever comes next.
    let sent = h.sent();
    assert_eq!(deletes(&sent), vec![format!("/l/{}", ours(3))]);
    assert!(sent
        .iter()
        .all(|o| !matches!(o.request, Request::SetData(_))));
}

/// A try that is the first to see the end records it and is refused; the
/// next try, made a delay later on the server's clock, is granted.
#[test]
fn lock_delay_the_first_try_records_the_end_and_a_later_one_is_granted() {
    let mut h = Harness::new();
    let (listing, queue) = delayed_listings(&mut h, true);
    h.reply(&listing, Ok(children(&[DEAD])));
    h.reply(&queue, Ok(children(&[&ours(3)])));
    let sent = h.sent();
    h.reply(&sent[0], mark_data(0, 0));
    let sent = h.sent();
    assert!(
        matches!(&sent[..], [w] if records_mark(w, DEAD)),
        "{sent:?}"
    );
    h.reply(
        &sent[0],
        Ok(Response::Stat(Stat {
            version: 1,
            mtime: CREATED_AT + 2,
            ..Stat::default()
        })),
    );
    assert!(timed_out(&h.events()));
    h.sent();
    // The next try, on a fresh machine: its node is stamped a delay after
    // the record.
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, delayed_spec(), UUID.into(), None, true);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created_at(3, CREATED_AT + 2 + DELAY_MS)));
    h.reply(&sent[1], Ok(children(&[&ours(3)])));
    let sent = h.sent();
    h.reply(&sent[0], Ok(children(&[DEAD])));
    h.reply(&sent[1], Ok(children(&[&ours(3)])));
    let sent = h.sent();
    h.reply(&sent[0], mark_data(1, CREATED_AT + 2));
    let sent = h.sent();
    assert!(marks(&sent[0]), "{sent:?}");
    h.reply(&sent[0], multi_ok(2));
    assert!(granted(&h.events(), true));
}

/// A waiter whose node is older than the record waits until the server's
/// clock passes record + delay, counted from its node's ctime and the
/// instant that came in: not a whole delay from its own look.
#[test]
fn lock_delay_a_waiter_waits_only_what_is_left_of_the_delay() {
    let mut h = Harness::new();
    let created_local = h.now;
    let blocker = "_c_other-lock-0000000002";
    h.m.acquire(h.now, 1, delayed_spec(), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created_at(3, CREATED_AT)));
    h.reply(&sent[1], Ok(children(&[&ours(3), blocker])));
    let watches = h.sent();
    let [own, below] = &watches[..] else {
        panic!("{watches:?}")
    };
    h.reply(own, data(103));
    h.reply(below, data(2));
    // Ten seconds later the blocker is gone; another recorded its unclean
    // end three seconds ago (on the server's clock).
    h.now += Duration::from_secs(10);
    let recorded = CREATED_AT + 7_000;
    h.fire(
        below,
        jute::EventType::NodeDeleted,
        &format!("/l/{blocker}"),
    );
    one_end_recorded_at(&mut h, recorded);
    let until = created_local + Duration::from_millis((recorded + DELAY_MS - CREATED_AT) as u64);
    assert_eq!(h.m.poll_timeout(), Some(until));
    assert!(until < h.now + DELAY, "a whole delay from its own look");
    h.now = until;
    marked_and_granted_after_the_delay(&mut h);
}

/// The grant's listings just sent: one unclean end (`DEAD`'s mark) and our
/// node alone in the queue; the mark's read finds the end recorded at
/// `recorded` (the server's clock).
fn one_end_recorded_at(h: &mut Harness, recorded: i64) {
    let sent = h.sent();
    let [marks_listing, queue] = &sent[..] else {
        panic!("{sent:?}")
    };
    h.reply(marks_listing, Ok(children(&[DEAD])));
    h.reply(queue, Ok(children(&[&ours(3)])));
    let sent = h.sent();
    assert!(reads_mark(&sent[0], DEAD), "{sent:?}");
    h.reply(&sent[0], mark_data(1, recorded));
}

/// The delay is served at `h.now`: our mark is made and the lock granted.
fn marked_and_granted_after_the_delay(h: &mut Harness) {
    h.m.handle_timeout(h.now);
    let sent = h.sent();
    assert!(marks(&sent[0]), "{sent:?}");
    h.reply(&sent[0], multi_ok(2));
    assert!(granted(&h.events(), true));
}

#[test]
fn lock_delay_a_node_stamped_long_before_its_reply_waits_only_the_delay_from_the_record() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, delayed_spec(), UUID.into(), None, false);
    let sent = h.sent();
    // The create's reply comes 30 s after the server stamped our node (a
    // slow link; or a node found again after a reconnect): its ctime says
    // little of the server's clock now.
    h.now += Duration::from_secs(30);
    h.reply(&sent[0], Ok(created_at(3, CREATED_AT)));
    h.reply(&sent[1], Ok(children(&[&ours(3)])));
    // Recorded just now, on the server's clock.
    one_end_recorded_at(&mut h, CREATED_AT + 30_000);
    assert_eq!(
        h.m.poll_timeout(),
        Some(h.now + DELAY),
        "the delay from the record, read just now, not from the old ctime"
    );
    h.now += DELAY;
    marked_and_granted_after_the_delay(&mut h);
}

#[test]
fn lock_delay_a_mark_with_a_live_node_is_no_unclean_end() {
    let mut h = Harness::new();
    let owner = "00000000-0000-4000-8000-00000000beef";
    let reader = format!("_c_{owner}-__READ__0000000001");
    let queue = delayed_free_with_marks(&mut h, &[owner]);
    h.reply(&queue, Ok(children(&[&ours(3), &reader])));
    let sent = h.sent();
    assert!(matches!(&sent[..], [m] if marks(m)), "{sent:?}");
}

/// A mark listed whose node is not in the queue listed after, but which
/// is gone when read: its holder released cleanly in between (node and
/// mark in one write). No delay.
#[test]
fn lock_delay_a_mark_gone_when_read_was_a_clean_release() {
    let mut h = Harness::new();
    let queue = delayed_free_with_marks(&mut h, &[DEAD]);
    h.reply(&queue, Ok(children(&[&ours(3)])));
    let sent = h.sent();
    h.reply(&sent[0], Err(RequestError::Server(ErrorCode::NoNode)));
    let sent = h.sent();
    assert!(matches!(&sent[..], [m] if marks(m)), "{sent:?}");
    h.reply(&sent[0], multi_ok(2));
    assert!(granted(&h.events(), false));
}

/// Two see the end at once: the second's recording write finds version
/// 1 and reads the first's time instead.
#[test]
fn lock_delay_a_record_made_meanwhile_is_read_back() {
    let mut h = Harness::new();
    let queue = delayed_free_with_marks(&mut h, &[DEAD]);
    h.reply(&queue, Ok(children(&[&ours(3)])));
    let sent = h.sent();
    h.reply(&sent[0], mark_data(0, 0));
    let sent = h.sent();
    h.reply(&sent[0], Err(RequestError::Server(ErrorCode::BadVersion)));
    let sent = h.sent();
    assert!(matches!(&sent[..], [r] if reads_mark(r, DEAD)), "{sent:?}");
    h.reply(&sent[0], mark_data(1, CREATED_AT - DELAY_MS));
    let sent = h.sent();
    assert!(marks(&sent[0]), "{sent:?}");
}

/// A free lock whose mark's create fails NoNode: the create of the marks'
/// parent, to answer next.
fn marks_parent_create(h: &mut Harness) -> Outgoing {
    let queue = delayed_free(h, &[]);
    h.reply(&queue, Ok(children(&[&ours(3)])));
    let sent = h.sent();
    h.reply(
        &sent[0],
        Ok(Response::Multi(vec![
            MultiResult::Error(ErrorCode::Ok),
            MultiResult::Error(ErrorCode::NoNode),
        ])),
    );
    let sent = h.sent();
    assert!(
        matches!(&sent[..], [c] if matches!(&c.request, Request::CreateContainer(r) if r.path == "/l~tenure")),
        "{sent:?}"
    );
    sent[0].clone()
}

/// The marks' parent may not be made: the attempt fails with the refusal.
/// Made impossible by a lock path gone meanwhile (NoNode): it goes on
/// (queues again), it does not fail.
#[test]
fn lock_delay_a_refused_marks_parent_fails_the_attempt_and_a_missing_lock_path_does_not() {
    let mut h = Harness::new();
    let create = marks_parent_create(&mut h);
    h.reply(&create, Err(RequestError::Server(ErrorCode::NoAuth)));
    assert!(failed_with(&h.events(), "NoAuth"));

    let mut h = Harness::new();
    let create = marks_parent_create(&mut h);
    h.reply(&create, Err(RequestError::Server(ErrorCode::NoNode)));
    let events = h.events();
    assert!(events.is_empty(), "{events:?}");
}

/// The marks' parent reaped (every mark gone) or never made: the mark's
/// create fails NoNode, the parent is made as a container, then the mark.
#[test]
fn lock_delay_the_marks_parent_is_made_when_missing() {
    let mut h = Harness::new();
    let create = marks_parent_create(&mut h);
    h.reply(&create, Err(RequestError::Server(ErrorCode::NodeExists)));
    let sent = h.sent();
    assert!(matches!(&sent[..], [m] if marks(m)), "{sent:?}");
    h.reply(&sent[0], multi_ok(2));
    assert!(granted(&h.events(), false));
}

/// Children of the lock path named the old way (`~tenure.<uuid>`) are
/// neither contenders nor marks.
#[test]
fn lock_delay_old_marks_in_the_lock_path_are_ignored() {
    let mut h = Harness::new();
    let old = format!("{}{DEAD}", zklock_proto::lock::TENURE_MARK);
    let queue = delayed_free(&mut h, &[]);
    h.reply(&queue, Ok(children(&[&ours(3), &old])));
    let sent = h.sent();
    assert!(matches!(&sent[..], [m] if marks(m)), "{sent:?}");
}

#[test]
fn lock_delay_a_mark_whose_reply_was_lost_is_found_and_not_made_twice() {
    let mut h = Harness::new();
    let queue = delayed_free(&mut h, &[]);
    h.reply(&queue, Ok(children(&[&ours(3)])));
    let sent = h.sent();
    h.reply(&sent[0], Err(RequestError::ConnectionLoss));
    // Listed again: our mark is there, so the multi was applied.
    let again = h.sent();
    h.reply(&again[0], Ok(children(&[&ours(3)])));
    let tenure = h.sent();
    assert_eq!(tenure.len(), 2, "{tenure:?}");
    h.reply(&tenure[0], Ok(children(&[UUID])));
    h.reply(&tenure[1], Ok(children(&[&ours(3)])));
    let events = h.events();
    assert!(granted(&events, false), "{events:?}");
    assert!(h.sent().is_empty(), "no second mark");
}

#[test]
fn lock_delay_our_node_gone_at_the_mark_means_queueing_again() {
    let mut h = Harness::new();
    let queue = delayed_free(&mut h, &[]);
    h.reply(&queue, Ok(children(&[&ours(3)])));
    let sent = h.sent();
    h.reply(
        &sent[0],
        Ok(Response::Multi(vec![
            MultiResult::Error(ErrorCode::NoNode),
            MultiResult::Error(ErrorCode::RuntimeInconsistency),
        ])),
    );
    assert!(h.events().is_empty());
    assert!(queues_again(&h.sent()));
}

#[test]
fn lock_delay_a_release_whose_mark_is_gone_deletes_the_node_alone() {
    let mut h = Harness::new();
    let queue = delayed_free(&mut h, &[]);
    h.reply(&queue, Ok(children(&[&ours(3)])));
    let sent = h.sent();
    h.reply(&sent[0], multi_ok(2));
    h.events();
    h.m.release(h.now, 1, false);
    let release = h.sent();
    h.reply(
        &release[0],
        Ok(Response::Multi(vec![
            MultiResult::Error(ErrorCode::Ok),
            MultiResult::Error(ErrorCode::NoNode),
        ])),
    );
    assert_eq!(deletes(&h.sent()), vec![format!("/l/{}", ours(3))]);
}

#[test]
fn lock_delay_given_up_with_the_mark_in_flight_removes_both() {
    let mut h = Harness::new();
    let queue = delayed_free(&mut h, &[]);
    h.reply(&queue, Ok(children(&[&ours(3)])));
    let mark = h.sent();
    h.m.cancel(h.now, 1);
    assert!(h.sent().is_empty(), "the mark's reply says what to delete");
    h.reply(&mark[0], multi_ok(2));
    let sent = h.sent();
    assert!(
        matches!(&sent[..], [r] if matches!(&r.request, Request::Multi(ops) if ops.len() == 2)),
        "{sent:?}"
    );
}

#[test]
fn lock_delay_an_attempt_given_up_during_the_delay_makes_no_mark() {
    let mut h = Harness::new();
    let deadline = h.now + DELAY / 2;
    h.m.acquire(h.now, 1, delayed_spec(), UUID.into(), Some(deadline), false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created_at(3, CREATED_AT)));
    h.reply(&sent[1], Ok(children(&[&ours(3)])));
    let listings = h.sent();
    h.reply(&listings[0], Ok(children(&[DEAD])));
    h.reply(&listings[1], Ok(children(&[&ours(3)])));
    let read = h.sent();
    h.reply(&read[0], mark_data(1, CREATED_AT));
    h.now = deadline;
    h.m.handle_timeout(h.now);
    assert!(timed_out(&h.events()));
    assert_eq!(deletes(&h.sent()), vec![format!("/l/{}", ours(3))]);
    // The delay's end finds nothing to mark.
    h.now += DELAY;
    h.m.handle_timeout(h.now);
    let sent = h.sent();
    assert!(
        !sent.iter().any(|o| matches!(o.request, Request::Multi(_))),
        "{sent:?}"
    );
}

/// A listing in flight when the delay is served: the mark waits for it;
/// the grant it leads to decides again from the server's record, and the
/// first decision's timer marks nothing.
#[test]
fn lock_delay_served_while_a_listing_is_in_flight_marks_only_after_it() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, delayed_spec(), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created_at(3, CREATED_AT)));
    // A duplicate of our attempt (a create whose reply was lost) is found.
    h.reply(&sent[1], Ok(children(&[&ours(3), &ours(9)])));
    let sent = h.sent();
    let owned = owned_by_us(&mut h, &sent, &[ours(9)]);
    let stray = owned
        .iter()
        .find(|o| matches!(&o.request, Request::Delete(d) if d.path == format!("/l/{}", ours(9))))
        .expect("the duplicate deleted")
        .clone();
    let listings: Vec<Outgoing> = sent
        .iter()
        .filter(|o| matches!(o.request, Request::GetChildren(_)))
        .cloned()
        .collect();
    h.reply(&listings[0], Ok(children(&[DEAD])));
    h.reply(&listings[1], Ok(children(&[&ours(3), &ours(9)])));
    let read = h.sent();
    h.reply(&read[0], mark_data(1, CREATED_AT));
    assert!(h.sent().is_empty(), "the delay is being served");
    let until = h.m.poll_timeout().expect("a delay");
    // The duplicate's delete answers: the attempt lists again meanwhile.
    h.reply(&stray, Ok(Response::Empty));
    let relist = h.sent();
    assert!(matches!(&relist[..], [l] if matches!(l.request, Request::GetChildren(_))));
    h.now = until;
    h.m.handle_timeout(h.now);
    assert!(
        h.sent().is_empty(),
        "no mark while the listing is in flight"
    );
    h.reply(&relist[0], Ok(children(&[&ours(3)])));
    let tenure = h.sent();
    h.reply(&tenure[0], Ok(children(&[DEAD])));
    h.reply(&tenure[1], Ok(children(&[&ours(3)])));
    let read = h.sent();
    h.reply(&read[0], mark_data(1, CREATED_AT));
    let sent = h.sent();
    assert!(marks(&sent[0]), "marked once the listing is in: {sent:?}");
}

/// The mark's reply comes in at the deadline, before the timer fired: no
/// grant (the caller has given up on its own clock), no sweep, node and
/// mark released together.
#[test]
fn lock_delay_a_mark_answered_past_the_deadline_is_no_grant() {
    let mut h = Harness::new();
    let deadline = h.now + Duration::from_secs(1);
    h.m.acquire(h.now, 1, delayed_spec(), UUID.into(), Some(deadline), false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created_at(3, CREATED_AT)));
    h.reply(&sent[1], Ok(children(&[&ours(3)])));
    let listings = h.sent();
    h.reply(&listings[0], Ok(children(&[DEAD])));
    h.reply(&listings[1], Ok(children(&[&ours(3)])));
    let read = h.sent();
    h.reply(&read[0], mark_data(1, CREATED_AT - DELAY_MS));
    let mark = h.sent();
    assert!(matches!(&mark[..], [m] if marks(m)), "{mark:?}");
    h.now = deadline;
    h.reply(&mark[0], multi_ok(2));
    assert!(timed_out(&h.events()));
    let sent = h.sent();
    assert!(
        matches!(&sent[..], [r] if matches!(&r.request, Request::Multi(ops) if ops.len() == 2)),
        "node and mark released, the record kept: {sent:?}"
    );
}

/// A mark the ACL keeps us from reading (or recording): the delay counts
/// from when we saw it, as if we had recorded it then; a try is refused.
#[test]
fn lock_delay_a_mark_we_may_not_read_counts_from_our_sight_of_it() {
    let mut h = Harness::new();
    let queue = delayed_free_with_marks(&mut h, &[DEAD]);
    h.reply(&queue, Ok(children(&[&ours(3)])));
    let read = h.sent();
    h.now += Duration::from_millis(10);
    h.reply(&read[0], Err(RequestError::Server(ErrorCode::NoAuth)));
    assert!(h.sent().is_empty() && h.events().is_empty());
    assert_eq!(h.m.poll_timeout(), Some(h.now + DELAY));
    h.now += DELAY;
    h.m.handle_timeout(h.now);
    let sent = h.sent();
    assert!(matches!(&sent[..], [m] if marks(m)), "{sent:?}");
    h.reply(&sent[0], multi_ok(2));
    assert!(granted(&h.events(), true));
}

#[test]
fn lock_delay_a_try_that_may_not_read_a_mark_is_refused_at_once() {
    let mut h = Harness::new();
    let (listing, queue) = delayed_listings(&mut h, true);
    h.reply(&listing, Ok(children(&[DEAD])));
    h.reply(&queue, Ok(children(&[&ours(3)])));
    let read = h.sent();
    h.reply(&read[0], Err(RequestError::Server(ErrorCode::NoAuth)));
    assert!(timed_out(&h.events()));
}

/// The marks' listing refused (an ACL on `/l~tenure`): the attempt fails
/// with that refusal at once, rather than listing again and again.
#[test]
fn lock_delay_a_refused_listing_of_the_marks_fails_the_attempt() {
    let mut h = Harness::new();
    let (listing, queue) = delayed_listings(&mut h, false);
    h.reply(&listing, Err(RequestError::Server(ErrorCode::NoAuth)));
    h.reply(&queue, Ok(children(&[&ours(3)])));
    let events = h.events();
    assert!(failed_with(&events, "NoAuth"), "{events:?}");
    assert_eq!(deletes(&h.sent()), vec![format!("/l/{}", ours(3))]);
}

/// The read of a mark without its node, and the read answered "not
/// recorded yet" (version 0): the recording write, to answer next.
fn record_of_dead_mark(h: &mut Harness) -> Outgoing {
    let queue = delayed_free_with_marks(h, &[DEAD]);
    h.reply(&queue, Ok(children(&[&ours(3)])));
    let read = h.sent();
    assert!(matches!(&read[..], [r] if reads_mark(r, DEAD)), "{read:?}");
    h.reply(&read[0], mark_data(0, CREATED_AT - 1));
    let record = h.sent();
    assert!(
        matches!(&record[..], [r] if records_mark(r, DEAD)),
        "{record:?}"
    );
    record[0].clone()
}

/// Whether `events` is attempt 1 failing with the server's `code`.
fn failed_with(events: &[LockEvent], code: &str) -> bool {
    matches!(events, [LockEvent::Failed { id: 1, error }] if format!("{error:?}").contains(code))
}

/// A recording write the marks' ACL refuses: as a read refused, the delay
/// counts from our sight of the mark, and nothing is asked again meanwhile.
#[test]
fn lock_delay_a_mark_we_may_not_record_counts_from_our_sight_of_it() {
    let mut h = Harness::new();
    let record = record_of_dead_mark(&mut h);
    h.now += Duration::from_millis(10);
    h.reply(&record, Err(RequestError::Server(ErrorCode::NoAuth)));
    assert!(h.sent().is_empty() && h.events().is_empty());
    assert_eq!(h.m.poll_timeout(), Some(h.now + DELAY));
}

/// Any other refusal of a mark's read or record fails the attempt with
/// it, rather than listing again and again.
#[test]
fn lock_delay_another_refusal_of_a_marks_read_or_record_fails_the_attempt() {
    let mut h = Harness::new();
    let record = record_of_dead_mark(&mut h);
    h.reply(&record, Err(RequestError::Server(ErrorCode::Unimplemented)));
    assert!(failed_with(&h.events(), "Unimplemented"));

    let mut h = Harness::new();
    let queue = delayed_free_with_marks(&mut h, &[DEAD]);
    h.reply(&queue, Ok(children(&[&ours(3)])));
    let read = h.sent();
    h.reply(
        &read[0],
        Err(RequestError::Server(ErrorCode::Unimplemented)),
    );
    assert!(failed_with(&h.events(), "Unimplemented"));
}
