//! A max hold (`LockSpec::max_hold`): counted from the grant, on the
//! machine's virtual time. At its end the holder is told `Lost(MaxHold)`
//! and its node's delete is sent in the same turn, whatever the holder was
//! told before; a release before it cancels the timer; with lock-delay the
//! node goes without its mark, so the next holder serves the delay.

use std::sync::Arc;
use std::time::Duration;

use jute::{ErrorCode, MultiOp, Request, Response, Stat};
use zklock_proto::lock::{LockEvent, LockSpec, LockState, LossReason, Outgoing};
use zklock_proto::session::{RequestError, SessionState};

use crate::lock_delay::{
    created_at, delayed_spec, mark_data, mark_path, marks, multi_ok, reads_mark, records_mark,
    CREATED_AT, DELAY,
};
use crate::support::*;

const MAX_HOLD: Duration = Duration::from_secs(2);
const NEXT: &str = "00000000-0000-4000-8000-000000000002";

fn capped(spec: Arc<LockSpec>) -> Arc<LockSpec> {
    Arc::new(LockSpec {
        max_hold: Some(MAX_HOLD),
        ..(*spec).clone()
    })
}

/// What a release asked with `report` says once the node is gone.
fn released(id: u64) -> Vec<LockEvent> {
    vec![LockEvent::Released { id, refused: None }]
}

fn lost_max_hold(id: u64) -> LockEvent {
    LockEvent::State {
        id,
        state: LockState::Lost,
        reason: Some(LossReason::MaxHold),
    }
}

/// Attempt 1 with a max hold takes the free lock `/l` (our node: sequence
/// 3); returns its grant's event.
fn hold_capped(h: &mut Harness, watch_node: bool) -> LockEvent {
    h.m.acquire(h.now, 1, capped(spec(watch_node)), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(3)));
    h.reply(&sent[1], Ok(children(&[&ours(3)])));
    let events = h.events();
    let [grant @ LockEvent::Acquired { id: 1, .. }] = &events[..] else {
        panic!("granted: {events:?}")
    };
    grant.clone()
}

/// Whether `sent` is the plain delete of our node alone.
fn deletes_our_node(sent: &[Outgoing]) -> bool {
    matches!(sent, [o] if matches!(&o.request, Request::Delete(d)
        if d.path == format!("/l/{}", ours(3)) && d.version == -1))
}

#[test]
fn a_holder_is_told_lost_at_its_max_hold_and_its_node_deleted_in_that_turn() {
    let mut h = Harness::new();
    let granted_at = h.now;
    let grant = hold_capped(&mut h, true);
    let end = granted_at + MAX_HOLD;
    assert!(
        matches!(grant, LockEvent::Acquired { max_hold_end: Some(e), .. } if e == end),
        "{grant:?}"
    );
    // The holder's own check of its watched node, answered.
    let check = h.sent();
    assert!(
        matches!(&check[..], [c] if reads(c, &ours(3), true)),
        "{check:?}"
    );
    h.reply(&check[0], data(103));
    assert!(h.events().is_empty());
    assert_eq!(h.m.poll_timeout(), Some(end));
    // Not early: nothing a millisecond before.
    h.now = end - Duration::from_millis(1);
    h.m.handle_timeout(h.now);
    assert!(h.events().is_empty() && h.sent().is_empty());
    // Not late: at it, Lost, and the delete of our node in the same turn.
    h.now = end;
    h.m.handle_timeout(h.now);
    assert_eq!(h.events(), vec![lost_max_hold(1)]);
    let sent = h.sent();
    assert!(deletes_our_node(&sent), "{sent:?}");
    assert_eq!(h.m.poll_timeout(), None, "no timer left");
    // The guard let go while the delete is out: told once it is done.
    h.m.release(h.now, 1, true);
    assert!(h.events().is_empty());
    h.reply(&sent[0], Ok(Response::Empty));
    assert_eq!(h.events(), released(1));
    assert!(h.m.is_empty());
    // A guard let go after that has nothing more to do.
    h.m.release(h.now, 1, true);
    assert_eq!(h.events(), released(1));
    assert!(h.sent().is_empty());
}

#[test]
fn a_release_before_the_max_hold_cancels_its_timer() {
    let mut h = Harness::new();
    hold_capped(&mut h, false);
    assert_eq!(h.m.poll_timeout(), Some(h.now + MAX_HOLD));
    h.now += MAX_HOLD / 2;
    h.m.release(h.now, 1, false);
    let sent = h.sent();
    assert!(deletes_our_node(&sent), "{sent:?}");
    assert_eq!(h.m.poll_timeout(), None, "the max hold's timer is gone");
    h.now += MAX_HOLD;
    h.m.handle_timeout(h.now);
    assert!(h.events().is_empty(), "no Lost after a release");
    h.reply(&sent[0], Ok(Response::Empty));
    assert!(h.m.is_empty());
}

#[test]
fn a_requeue_before_the_max_hold_cancels_the_old_holders_timer() {
    let mut h = Harness::new();
    hold_capped(&mut h, false);
    h.m.requeue(h.now, 1, 2, capped(spec(false)), NEXT.into(), None);
    let sent = h.sent();
    assert!(
        matches!(&sent[..], [m, _] if matches!(&m.request, Request::Multi(ops)
            if matches!(&ops[..], [MultiOp::Delete(_), MultiOp::Create2(_)]))),
        "{sent:?}"
    );
    assert_eq!(h.m.poll_timeout(), None, "the old holder's timer is gone");
    h.now += MAX_HOLD;
    h.m.handle_timeout(h.now);
    assert!(h.events().is_empty(), "no Lost for a holder let go");
}

/// Suspended or told Lost for no contact before its max hold, a holder is
/// still let go at it: told Lost if it was not yet, and its node deleted
/// even where no contact would keep it (a thread that hangs never lets
/// go), the delete waiting in the session for a connection.
#[test]
fn a_holder_whatever_its_state_is_let_go_at_its_max_hold() {
    let mut h = Harness::new();
    hold_capped(&mut h, false);
    h.m.handle_session(h.now, SessionState::Suspended, SESSION);
    let suspended = LockEvent::State {
        id: 1,
        state: LockState::Suspended,
        reason: None,
    };
    assert_eq!(h.events(), vec![suspended]);
    h.now += MAX_HOLD;
    h.m.handle_timeout(h.now);
    assert_eq!(h.events(), vec![lost_max_hold(1)]);
    assert!(deletes_our_node(&h.sent()));

    let mut h = Harness::new();
    hold_capped(&mut h, false);
    h.m.handle_session(h.now, SessionState::Suspended, SESSION);
    h.m.handle_session(h.now, SessionState::Lost, SESSION);
    let events = h.events();
    assert!(
        matches!(
            &events[..],
            [
                _,
                LockEvent::State {
                    state: LockState::Lost,
                    reason: Some(LossReason::NoContact),
                    ..
                }
            ]
        ),
        "{events:?}"
    );
    assert!(h.sent().is_empty(), "no contact keeps the node");
    h.now += MAX_HOLD;
    h.m.handle_timeout(h.now);
    assert!(h.events().is_empty(), "Lost already, for its first reason");
    assert!(deletes_our_node(&h.sent()), "the node goes at the max hold");
}

/// With lock-delay a max hold's end is an unclean one: the node goes
/// alone, its mark stays, and the next waiter records the end and serves
/// the delay before its grant, which says it follows an unclean end.
#[test]
fn with_lock_delay_a_max_hold_ends_uncleanly_and_the_next_holder_serves_the_delay() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, capped(delayed_spec()), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created_at(3, CREATED_AT)));
    h.reply(&sent[1], Ok(children(&[&ours(3)])));
    let sent = h.sent();
    let [marks_listing, queue] = &sent[..] else {
        panic!("{sent:?}")
    };
    h.reply(marks_listing, Err(RequestError::Server(ErrorCode::NoNode)));
    h.reply(queue, Ok(children(&[&ours(3)])));
    let sent = h.sent();
    assert!(matches!(&sent[..], [m] if marks(m)), "{sent:?}");
    h.reply(&sent[0], multi_ok(2));
    let events = h.events();
    assert!(
        matches!(&events[..], [LockEvent::Acquired { max_hold_end: Some(e), .. }] if *e == h.now + MAX_HOLD),
        "{events:?}"
    );
    h.now += MAX_HOLD;
    h.m.handle_timeout(h.now);
    assert_eq!(h.events(), vec![lost_max_hold(1)]);
    let sent = h.sent();
    assert!(
        deletes_our_node(&sent),
        "the node alone, not the mark: {sent:?}"
    );
    h.reply(&sent[0], Ok(Response::Empty));
    assert!(h.m.is_empty());

    // The next waiter, on another client: our mark without its node.
    let mut next = Harness::new();
    let name = format!("_c_{NEXT}-lock-0000000004");
    next.m
        .acquire(next.now, 2, delayed_spec(), NEXT.into(), None, false);
    let sent = next.sent();
    next.reply(
        &sent[0],
        Ok(Response::Created {
            path: format!("/l/{name}"),
            stat: Stat {
                ctime: CREATED_AT + 2_000,
                ..stat(104)
            },
        }),
    );
    next.reply(&sent[1], Ok(children(&[&name])));
    let sent = next.sent();
    let [marks_listing, queue] = &sent[..] else {
        panic!("{sent:?}")
    };
    next.reply(marks_listing, Ok(children(&[UUID])));
    next.reply(queue, Ok(children(&[&name])));
    let sent = next.sent();
    assert!(matches!(&sent[..], [r] if reads_mark(r, UUID)), "{sent:?}");
    next.reply(&sent[0], mark_data(0, CREATED_AT));
    let sent = next.sent();
    assert!(
        matches!(&sent[..], [w] if records_mark(w, UUID)),
        "{sent:?}"
    );
    let recorded = Stat {
        version: 1,
        mtime: CREATED_AT + 2_010,
        ..Stat::default()
    };
    next.reply(&sent[0], Ok(Response::Stat(recorded)));
    assert!(next.events().is_empty(), "no grant within the delay");
    assert_eq!(next.m.poll_timeout(), Some(next.now + DELAY));
    next.now += DELAY;
    next.m.handle_timeout(next.now);
    let sent = next.sent();
    let [mark] = &sent[..] else {
        panic!("{sent:?}")
    };
    assert!(
        matches!(&mark.request, Request::Multi(ops)
            if matches!(&ops[..], [MultiOp::Check(_), MultiOp::Create(m)] if m.path == mark_path(NEXT))),
        "{mark:?}"
    );
    next.reply(mark, multi_ok(2));
    let events = next.events();
    assert!(
        matches!(
            &events[..],
            [LockEvent::Acquired {
                id: 2,
                after_unclean_end: true,
                max_hold_end: None,
                ..
            }]
        ),
        "{events:?}"
    );
}
