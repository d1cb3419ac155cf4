//! Revocation: a revocable holder told when someone writes the revocation
//! message to its node, before or after the grant; others ignore it.

use std::sync::Arc;

use jute::{EventType, Request, Response};
use zklock_proto::lock::LockEvent;
use zklock_proto::lock::LockSpec;

use crate::support::*;

fn revocable_spec() -> Arc<LockSpec> {
    let mut s = (*spec(true)).clone();
    s.revocable = true;
    Arc::new(s)
}

#[test]
fn a_revocable_holder_hears_a_revocation_written_before_or_after_the_grant() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, revocable_spec(), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(3)));
    h.reply(&sent[1], Ok(children(&[&ours(3)])));
    assert!(matches!(&h.events()[..], [LockEvent::Acquired { .. }]));
    // Granted: it reads its node, which someone already marked.
    let read = h.sent();
    assert!(matches!(&read[..], [o] if matches!(&o.request, Request::GetData(p) if p.watch)));
    h.reply(
        &read[0],
        Ok(Response::Data {
            data: b"__REVOKE__".to_vec(),
            stat: stat(103),
        }),
    );
    assert_eq!(h.events(), vec![LockEvent::RevocationRequested { id: 1 }]);
    // Asked again later: the data watch fires, the node is read again.
    h.fire(
        &read[0],
        EventType::NodeDataChanged,
        &format!("/l/{}", ours(3)),
    );
    let again = h.sent();
    h.reply(
        &again[0],
        Ok(Response::Data {
            data: b"__REVOKE__".to_vec(),
            stat: stat(103),
        }),
    );
    assert_eq!(h.events(), vec![LockEvent::RevocationRequested { id: 1 }]);
}

#[test]
fn a_holder_that_is_not_revocable_ignores_the_message() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(true), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(3)));
    h.reply(&sent[1], Ok(children(&[&ours(3)])));
    let _ = h.events();
    let read = h.sent();
    h.reply(
        &read[0],
        Ok(Response::Data {
            data: b"__REVOKE__".to_vec(),
            stat: stat(103),
        }),
    );
    assert_eq!(h.events(), vec![]);
}
