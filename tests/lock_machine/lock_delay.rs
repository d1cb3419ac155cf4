//! Lock-delay: tenure marks (src/machine/lock/tenure.rs). A holder marks
//! its tenure; a mark left by an unclean end makes the next holder wait out
//! the delay, then sweep it.

use std::sync::Arc;
use std::time::Duration;

use jute::{CreateMode, ErrorCode, MultiOp, MultiResult, Request, Response};
use zklock::machine::{LockEvent, Outgoing};
use zklock::recipes::{LockError, LockSpec};
use zklock::session::RequestError;

use crate::support::*;

const DELAY: Duration = Duration::from_secs(5);

const STALE_MARK: &str = "~tenure.00000000-0000-4000-8000-00000000dead";

pub(crate) fn delayed_spec() -> Arc<LockSpec> {
    Arc::new(LockSpec {
        lock_delay: Some(DELAY),
        ..(*spec(false)).clone()
    })
}

fn our_mark() -> String {
    format!("{}{UUID}", zklock::machine::TENURE_MARK)
}

/// Attempt 1 with lock-delay finds the lock free (our node: sequence 3)
/// beside `others`; returns the tenure listing it sends next.
pub(crate) fn delayed_free(h: &mut Harness, others: &[&str]) -> Outgoing {
    h.m.acquire(h.now, 1, delayed_spec(), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(3)));
    let mut names = vec![ours(3)];
    names.extend(others.iter().map(|s| s.to_string()));
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    h.reply(&sent[1], Ok(children(&names)));
    assert!(h.events().is_empty(), "no grant before the tenure listing");
    let sent = h.sent();
    let [listing] = &sent[..] else {
        panic!("one tenure listing expected: {sent:?}")
    };
    assert!(matches!(&listing.request, Request::GetChildren(p) if p.path == "/l"));
    listing.clone()
}

/// Whether `o` is the multi that checks our node and creates our mark.
fn marks(o: &Outgoing) -> bool {
    let Request::Multi(ops) = &o.request else {
        return false;
    };
    matches!(&ops[..], [MultiOp::Check(c), MultiOp::Create(m)]
        if c.path == format!("/l/{}", ours(3)) && m.path == format!("/l/{}", our_mark())
            && m.mode == CreateMode::Persistent)
}

pub(crate) fn multi_ok(n: usize) -> Result<Response, RequestError> {
    Ok(Response::Multi(vec![MultiResult::Check; n]))
}

fn granted(events: &[LockEvent], unclean: bool) -> bool {
    matches!(events, [LockEvent::Acquired { id: 1, after_unclean_end, .. }] if *after_unclean_end == unclean)
}

#[test]
fn lock_delay_after_a_clean_end_marks_then_grants_at_once() {
    let mut h = Harness::new();
    let listing = delayed_free(&mut h, &[]);
    h.reply(&listing, Ok(children(&[&ours(3)])));
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
            if n.path == format!("/l/{}", ours(3)) && m.path == format!("/l/{}", our_mark())))
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

#[test]
fn lock_delay_after_an_unclean_end_waits_then_sweeps_and_says_so() {
    let mut h = Harness::new();
    let listing = delayed_free(&mut h, &[STALE_MARK]);
    h.reply(&listing, Ok(children(&[&ours(3), STALE_MARK])));
    assert!(h.sent().is_empty(), "nothing before the delay is served");
    assert_eq!(h.m.poll_timeout(), Some(h.now + DELAY));
    h.m.handle_timeout(h.now + DELAY - Duration::from_millis(1));
    assert!(h.sent().is_empty() && h.events().is_empty());
    h.now += DELAY;
    h.m.handle_timeout(h.now);
    let sent = h.sent();
    assert!(marks(&sent[0]), "{sent:?}");
    assert!(
        matches!(&sent[1].request, Request::Delete(d)
            if d.path == format!("/l/{STALE_MARK}") && d.version == -1),
        "the stale mark swept whatever its version: {sent:?}"
    );
    h.reply(&sent[1], Ok(Response::Empty));
    h.reply(&sent[0], multi_ok(2));
    assert!(granted(&h.events(), true));
}

#[test]
fn lock_delay_a_mark_with_a_live_node_is_no_unclean_end() {
    let mut h = Harness::new();
    let reader = "_c_00000000-0000-4000-8000-00000000beef-__READ__0000000001";
    let live = "~tenure.00000000-0000-4000-8000-00000000beef";
    let listing = delayed_free(&mut h, &[]);
    h.reply(&listing, Ok(children(&[&ours(3), reader, live])));
    let sent = h.sent();
    assert!(matches!(&sent[..], [m] if marks(m)), "{sent:?}");
}

#[test]
fn lock_delay_a_try_lock_does_not_wait_out_the_delay() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, delayed_spec(), UUID.into(), None, true);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(3)));
    h.reply(&sent[1], Ok(children(&[&ours(3), STALE_MARK])));
    let listing = h.sent();
    h.reply(&listing[0], Ok(children(&[&ours(3), STALE_MARK])));
    assert!(matches!(
        &h.events()[..],
        [LockEvent::Failed {
            id: 1,
            error: LockError::Timeout
        }]
    ));
    // Our node goes; the stale mark stays for whoever comes next.
    assert_eq!(deletes(&h.sent()), vec![format!("/l/{}", ours(3))]);
}

#[test]
fn lock_delay_a_mark_whose_reply_was_lost_is_found_and_not_made_twice() {
    let mut h = Harness::new();
    let listing = delayed_free(&mut h, &[]);
    h.reply(&listing, Ok(children(&[&ours(3)])));
    let sent = h.sent();
    h.reply(&sent[0], Err(RequestError::ConnectionLoss));
    // Listed again: our mark is there, so the multi was applied.
    let again = h.sent();
    h.reply(&again[0], Ok(children(&[&ours(3), &our_mark()])));
    let tenure = h.sent();
    assert_eq!(tenure.len(), 1, "{tenure:?}");
    h.reply(&tenure[0], Ok(children(&[&ours(3), &our_mark()])));
    let events = h.events();
    assert!(granted(&events, false), "{events:?}");
    assert!(h.sent().is_empty(), "no second mark");
}

#[test]
fn lock_delay_our_node_gone_at_the_mark_means_queueing_again() {
    let mut h = Harness::new();
    let listing = delayed_free(&mut h, &[]);
    h.reply(&listing, Ok(children(&[&ours(3)])));
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
    let listing = delayed_free(&mut h, &[]);
    h.reply(&listing, Ok(children(&[&ours(3)])));
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
    h.m.acquire(h.now, 1, delayed_spec(), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(3)));
    h.reply(&sent[1], Ok(children(&[&ours(3)])));
    let listing = h.sent();
    h.reply(&listing[0], Ok(children(&[&ours(3)])));
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
    h.reply(&sent[0], Ok(created(3)));
    h.reply(&sent[1], Ok(children(&[&ours(3), STALE_MARK])));
    let listing = h.sent();
    h.reply(&listing[0], Ok(children(&[&ours(3), STALE_MARK])));
    h.now = deadline;
    h.m.handle_timeout(h.now);
    assert!(matches!(
        &h.events()[..],
        [LockEvent::Failed {
            id: 1,
            error: LockError::Timeout
        }]
    ));
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

#[test]
fn lock_delay_served_while_a_listing_is_in_flight_marks_only_after_it() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, delayed_spec(), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(3)));
    // A duplicate of our attempt (a create whose reply was lost) is found.
    h.reply(&sent[1], Ok(children(&[&ours(3), &ours(9), STALE_MARK])));
    let sent = h.sent();
    let stray = sent
        .iter()
        .find(|o| matches!(&o.request, Request::Delete(d) if d.path == format!("/l/{}", ours(9))))
        .expect("the duplicate deleted")
        .clone();
    let tenure = sent
        .iter()
        .find(|o| matches!(o.request, Request::GetChildren(_)))
        .expect("the tenure listing")
        .clone();
    h.reply(&tenure, Ok(children(&[&ours(3), &ours(9), STALE_MARK])));
    assert!(h.sent().is_empty(), "the delay is being served");
    // The duplicate's delete answers: the attempt lists again meanwhile.
    h.reply(&stray, Ok(Response::Empty));
    let relist = h.sent();
    assert!(matches!(&relist[..], [l] if matches!(l.request, Request::GetChildren(_))));
    h.now += DELAY;
    h.m.handle_timeout(h.now);
    assert!(
        h.sent().is_empty(),
        "no mark while the listing is in flight"
    );
    h.reply(&relist[0], Ok(children(&[&ours(3), STALE_MARK])));
    let tenure = h.sent();
    h.reply(&tenure[0], Ok(children(&[&ours(3), STALE_MARK])));
    let sent = h.sent();
    assert!(marks(&sent[0]), "marked once the listing is in: {sent:?}");
}
