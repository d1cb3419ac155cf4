//! What every topic shares: the machine under test with the virtual time
//! it is fed ([`Harness`]), the lock spec, the server's replies built by
//! hand, and the common moves (queueing behind a head, a dropped
//! connection, a free lock taken).

use std::sync::Arc;
use std::time::Instant;

use jute::Acl;
use jute::{EventType, Request, Response, Stat};
use zklock_proto::lock::{LockEvent, LockMachine, Outgoing};
use zklock_proto::lock::{LockSpec, LockState, LossReason, Rule};
use zklock_proto::session::{RequestError, SessionState, WatchEvent};

pub(crate) const UUID: &str = "00000000-0000-4000-8000-000000000001";

pub(crate) const SESSION: i64 = 0x77;

pub(crate) fn spec(watch_node: bool) -> Arc<LockSpec> {
    Arc::new(LockSpec {
        parent: "/l".into(),
        marker: "-lock-",
        data: b"me".to_vec(),
        acl: Acl::open_unsafe(),
        parent_acl: Acl::open_unsafe(),
        ancestor_acl: Acl::open_unsafe(),
        rule: Rule::Predecessor,
        watch_node,
        revocable: false,
        lock_delay: None,
        passes: None,
        max_hold: None,
    })
}

pub(crate) struct Harness {
    pub(crate) m: LockMachine,
    pub(crate) now: Instant,
    /// Paths of the syncs sent before recovery listings (answered at once
    /// by `sent`: the machine does not act on their replies).
    pub(crate) synced: Vec<String>,
    /// Waiters woken by a blocker's deletion, as (our node, the blocker):
    /// kept apart by `events`.
    pub(crate) woken: Vec<(String, String)>,
}

impl Harness {
    pub(crate) fn new() -> Harness {
        let now = Instant::now();
        let mut m = LockMachine::new();
        m.handle_session(now, SessionState::Connected, SESSION);
        Harness {
            m,
            now,
            synced: Vec::new(),
            woken: Vec::new(),
        }
    }

    /// What the machine sent, but for the syncs that only catch the
    /// server up before a recovery listing: those are answered here and
    /// their paths kept in `synced`.
    pub(crate) fn sent(&mut self) -> Vec<Outgoing> {
        let all: Vec<Outgoing> = std::iter::from_fn(|| self.m.poll_request()).collect();
        let mut rest = Vec::with_capacity(all.len());
        for o in all {
            match &o.request {
                Request::Sync(path) => {
                    self.synced.push(path.clone());
                    let reply = Ok(Response::Path(path.clone()));
                    self.m.handle_reply(self.now, o.token, reply);
                }
                _ => rest.push(o),
            }
        }
        rest
    }

    /// What the machine decided, but for the wake-ups of waiters: those
    /// are kept in `woken`.
    pub(crate) fn events(&mut self) -> Vec<LockEvent> {
        let mut rest = Vec::new();
        while let Some(e) = self.m.poll_event() {
            match e {
                LockEvent::Woken { node, blocker, .. } => self.woken.push((node, blocker)),
                e => rest.push(e),
            }
        }
        rest
    }

    pub(crate) fn reply(&mut self, o: &Outgoing, r: Result<Response, RequestError>) {
        self.m.handle_reply(self.now, o.token, r);
    }

    pub(crate) fn fire(&mut self, o: &Outgoing, kind: EventType, path: &str) {
        self.m.handle_watch(
            self.now,
            o.token,
            Ok(WatchEvent {
                kind,
                path: path.into(),
            }),
        );
    }
}

pub(crate) fn stat(czxid: i64) -> Stat {
    Stat {
        czxid,
        ephemeral_owner: SESSION,
        ..Stat::default()
    }
}

pub(crate) fn ours(seq: u32) -> String {
    format!("_c_{UUID}-lock-{seq:010}")
}

pub(crate) fn created(seq: u32) -> Response {
    Response::Created {
        path: format!("/l/{}", ours(seq)),
        stat: stat(100 + i64::from(seq)),
    }
}

pub(crate) fn children(names: &[&str]) -> Response {
    Response::Children(names.iter().map(|s| s.to_string()).collect())
}

/// A getData reply carrying `czxid`.
pub(crate) fn data(czxid: i64) -> Result<Response, RequestError> {
    Ok(Response::Data {
        data: vec![],
        stat: stat(czxid),
    })
}

pub(crate) const HEAD: &str = "_c_other-lock-0000000004";

/// Whether `o` is a getData of the node named `name`, with a watch or not.
pub(crate) fn reads(o: &Outgoing, name: &str, watch: bool) -> bool {
    matches!(&o.request, Request::GetData(p) if p.watch == watch && p.path == format!("/l/{name}"))
}

/// Attempt 1 (our node, sequence 5) queued behind `HEAD` alone: the
/// watches it sets, on our own node and on `HEAD`, in the order sent,
/// their replies not given yet.
pub(crate) fn queue_behind_head(h: &mut Harness, watch_node: bool) -> (Outgoing, Outgoing) {
    h.m.acquire(h.now, 1, spec(watch_node), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(5)));
    h.reply(&sent[1], Ok(children(&[&ours(5), HEAD])));
    let watches = h.sent();
    let [own, head] = &watches[..] else {
        panic!("two watches expected: {watches:?}")
    };
    // Our own node's first: its reply comes before anything about the head.
    assert!(reads(own, &ours(5), true), "{own:?}");
    assert!(reads(head, HEAD, true), "{head:?}");
    (own.clone(), head.clone())
}

/// As [`queue_behind_head`], both watches set (replies given in order).
pub(crate) fn queued_behind_head(h: &mut Harness, watch_node: bool) -> (Outgoing, Outgoing) {
    let (own, head) = queue_behind_head(h, watch_node);
    h.reply(&own, data(105));
    h.reply(&head, data(1));
    (own, head)
}

/// Attempt 1 (our node, sequence 9, not watched once held) queued deep:
/// behind `_c_b-lock-0000000007`, with `_c_a-lock-0000000002` below that.
/// Its three watches set, on our own node, on 7 and on 2 (the scout),
/// replies given in order.
pub(crate) fn queued_deep(h: &mut Harness) -> (Outgoing, Outgoing) {
    let (own, blocker, _) = queued_deep_with_scout(h);
    (own, blocker)
}

/// As [`queued_deep`], the scout's watch (on 2) returned too.
pub(crate) fn queued_deep_with_scout(h: &mut Harness) -> (Outgoing, Outgoing, Outgoing) {
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(9)));
    let queue = [&ours(9), "_c_a-lock-0000000002", "_c_b-lock-0000000007"];
    h.reply(&sent[1], Ok(children(&queue)));
    let watches = h.sent();
    let [own, blocker, scout] = &watches[..] else {
        panic!("our own node's watch, the blocker's and its scout's expected: {watches:?}")
    };
    assert!(reads(own, &ours(9), true), "{own:?}");
    assert!(reads(blocker, "_c_b-lock-0000000007", true), "{blocker:?}");
    // The node below the blocker: its deletion means listing again early.
    assert!(reads(scout, "_c_a-lock-0000000002", true), "{scout:?}");
    h.reply(own, data(109));
    h.reply(blocker, data(7));
    h.reply(scout, data(2));
    (own.clone(), blocker.clone(), scout.clone())
}

pub(crate) fn head_deleted(h: &mut Harness, head: &Outgoing) {
    h.fire(head, EventType::NodeDeleted, &format!("/l/{HEAD}"));
}

pub(crate) fn acquired(events: &[LockEvent]) -> bool {
    matches!(events, [LockEvent::Acquired { id: 1, stat, .. }] if stat.czxid == 105)
}

pub(crate) fn lost_node_deleted() -> Vec<LockEvent> {
    vec![LockEvent::State {
        id: 1,
        state: LockState::Lost,
        reason: Some(LossReason::NodeDeleted),
    }]
}

/// A new node and the listing behind it: queueing again.
pub(crate) fn queues_again(sent: &[Outgoing]) -> bool {
    matches!(sent, [c, l] if matches!(c.request, Request::Create2(_)) && matches!(l.request, Request::GetChildren(_)))
}

pub(crate) fn drop_connection(h: &mut Harness, in_flight: &[&Outgoing]) {
    for o in in_flight {
        h.reply(o, Err(RequestError::ConnectionLoss));
        if o.watch {
            h.m.handle_watch(h.now, o.token, Err(RequestError::ConnectionLoss));
        }
    }
    h.m.handle_session(h.now, SessionState::Suspended, SESSION);
}

/// Answers the reads of who owns these nodes of our attempt id (the
/// exists in `sent` of `/l/<name>`) with our session, and returns what
/// follows: their deletes.
pub(crate) fn owned_by_us(h: &mut Harness, sent: &[Outgoing], names: &[String]) -> Vec<Outgoing> {
    for o in sent {
        if let Request::Exists(p) = &o.request {
            if names.iter().any(|n| p.path == format!("/l/{n}")) {
                h.reply(o, Ok(Response::Stat(stat(1))));
            }
        }
    }
    h.sent()
}

pub(crate) fn deletes(sent: &[Outgoing]) -> Vec<String> {
    sent.iter()
        .filter_map(|o| match &o.request {
            Request::Delete(d) => Some(d.path.clone()),
            _ => None,
        })
        .collect()
}

/// A spec like [`spec`] on another lock path.
pub(crate) fn spec_at(parent: &str, watch_node: bool) -> Arc<LockSpec> {
    Arc::new(LockSpec {
        parent: parent.into(),
        ..(*spec(watch_node)).clone()
    })
}

/// Attempt `id` takes the free lock at `parent` (our node: sequence `seq`);
/// returns its node's path. The Acquired event is consumed.
pub(crate) fn hold_free(
    h: &mut Harness,
    id: u64,
    parent: &str,
    watch_node: bool,
    seq: u32,
) -> String {
    h.m.acquire(
        h.now,
        id,
        spec_at(parent, watch_node),
        UUID.into(),
        None,
        false,
    );
    let sent = h.sent();
    let name = ours(seq);
    h.reply(
        &sent[0],
        Ok(Response::Created {
            path: format!("{parent}/{name}"),
            stat: stat(100 + i64::from(seq)),
        }),
    );
    h.reply(&sent[1], Ok(children(&[&name])));
    let events = h.events();
    assert!(
        matches!(&events[..], [LockEvent::Acquired { id: i, .. }] if *i == id),
        "{events:?}"
    );
    format!("{parent}/{name}")
}
