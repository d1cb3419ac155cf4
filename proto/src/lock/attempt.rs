//! One acquisition as the lock machine tracks it: what it wants, what it
//! knows of its node, and which of its requests and watches are in flight.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jute::{Acl, Names, Stat};

use super::delay::Delay;
use super::phase::{Phase, Step};
use super::queue::{past_the_end, sequence_order, Contender};

/// Which contender a node waits for: the rule of a recipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Mutex, write lock, election: wait for the node just below.
    Predecessor,
    /// Read lock: wait for the nearest node below that excludes readers.
    NearestWriter,
    /// Semaphore leases: hold among the first `n`; else wait for any change.
    FirstN(usize),
}

impl Rule {
    /// Where `our_name` stands among `children` (a listing, in any order),
    /// found in one pass that copies no names: a long queue costs each
    /// waiter one scan, not a sorted copy. `None` if our node is not there.
    ///
    /// A node of ours issued past the end of the parent's counter, or one
    /// that shares its suffix with another contender, cannot be ordered:
    /// the standing then says so, and no rule grants by it. Nodes past the
    /// end below a node that is not were issued after it, so they never
    /// block it.
    ///
    /// `passes`, a node of ours that holds the lock, never blocks us; a
    /// contender that would block us from above it waits, directly or not,
    /// for that node, which the standing then says.
    pub(crate) fn standing<'a>(
        self,
        children: &'a Names,
        our_name: &str,
        passes: Option<&str>,
    ) -> Option<Standing<'a>> {
        let (our_sequence, _) = Contender::classify(our_name)?;
        let passed = passes.and_then(|name| Some((Contender::classify(name)?.0, name)));
        let mut passed_listed = false;
        let mut above_passed = false;
        let mut unordered = past_the_end(our_sequence);
        let below = |seq: i32, name: &str| {
            sequence_order(seq, our_sequence)
                .then_with(|| name.cmp(our_name))
                .is_lt()
        };
        let mut found = false;
        // Contenders below us that block us, and the nearest of them.
        let mut blocking = 0usize;
        let mut nearest: Option<(i32, &'a str)> = None;
        // The blocking contender just below `nearest`.
        let mut second: Option<(i32, &'a str)> = None;
        let mut below_us = 0usize;
        for name in children.iter() {
            if name == our_name {
                found = true;
                continue;
            }
            let Some((seq, kind)) = Contender::classify(name) else {
                continue;
            };
            if seq == our_sequence {
                unordered = true;
            }
            if !below(seq, name) {
                continue;
            }
            if passed.is_some_and(|(_, n)| n == name) {
                passed_listed = true;
                continue;
            }
            below_us += 1;
            let blocks = match self {
                Rule::Predecessor | Rule::FirstN(_) => true,
                Rule::NearestWriter => kind.blocks_readers(),
            };
            if !blocks {
                continue;
            }
            blocking += 1;
            let above = |than: Option<(i32, &str)>| {
                than.is_none_or(|(s, n)| sequence_order(seq, s).then_with(|| name.cmp(n)).is_gt())
            };
            above_passed |= passed.is_some() && above(passed);
            if above(nearest) {
                second = nearest;
                nearest = Some((seq, name));
            } else if above(second) {
                second = Some((seq, name));
            }
        }
        if !found {
            return None;
        }
        if unordered {
            return Some(Standing {
                blocker: None,
                scout: None,
                past_the_end: true,
                behind_passed: false,
            });
        }
        let blocker = match self {
            Rule::FirstN(n) if below_us < n.max(1) => None,
            Rule::FirstN(_) => Some(Blocker::Queue),
            _ => nearest.map(|(_, name)| Blocker::Node {
                name,
                alone: blocking == 1,
            }),
        };
        let scout = match blocker {
            Some(Blocker::Node { alone: false, .. }) => second.map(|(_, name)| name),
            _ => None,
        };
        Some(Standing {
            blocker,
            scout,
            past_the_end: false,
            behind_passed: passed_listed && above_passed,
        })
    }
}

/// What stands between an attempt and the lock, from one listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Standing<'a> {
    /// `None`: the lock is ours (unless `past_the_end`).
    pub blocker: Option<Blocker<'a>>,
    /// With a blocker not alone: the blocking contender just below it.
    /// Its deletion most often means the blocker now leads, so a waiter
    /// that watches it lists again then, while the blocker holds, and can
    /// be granted on the blocker's deletion alone.
    pub scout: Option<&'a str>,
    /// Our node cannot be ordered (issued past the end of the parent's
    /// counter, or sharing its suffix): fail closed.
    pub past_the_end: bool,
    /// A contender that blocks us stands above the node we pass, and so
    /// waits for it: waiting would be waiting for ourselves.
    pub behind_passed: bool,
}

/// Whom to wait for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Blocker<'a> {
    /// The node to watch; `alone`: nothing else below us blocks us, so its
    /// deletion alone grants the lock (later nodes sort after ours).
    Node { name: &'a str, alone: bool },
    /// Not among the first n: any change to the queue may let us in.
    Queue,
}

/// What a recipe asks the machine for: where to queue and how.
#[derive(Debug, Clone)]
pub struct LockSpec {
    /// The lock path as the server names it (chroot applied).
    pub parent: String,
    /// The text before the sequence: `-lock-`, `-__READ__`, `-lease-`...
    pub marker: &'static str,
    /// Data stored in our node (who holds or waits).
    pub data: Vec<u8>,
    /// ACL of our node.
    pub acl: Vec<Acl>,
    /// ACL of the lock path, the parent of the contenders' nodes, when
    /// created. It decides who may queue (CREATE) and who may delete a
    /// contender's node (DELETE: ZooKeeper checks it on the parent).
    pub parent_acl: Vec<Acl>,
    /// ACL of the folders above the lock path created on the way. They
    /// are shared by every lock below them, whoever creates them first.
    pub ancestor_acl: Vec<Acl>,
    /// When our node is in the way of others.
    pub rule: Rule,
    /// Whether a holder watches its own node, to learn at once that it was
    /// deleted.
    pub watch_node: bool,
    /// Whether a holder heeds a revocation request: a third party writing
    /// [`REVOKE`](crate::lock::REVOKE) into its node (Curator's
    /// `Revoker` protocol). Implies watching the node.
    pub revocable: bool,
    /// Lock-delay: after a holder's unclean end (its session ended, not a
    /// release), no one is granted before this long has passed since the
    /// end was first recorded on the server. Holders then keep a tenure
    /// mark outside the lock path (see `lock::tenure`).
    pub lock_delay: Option<Duration>,
    /// A node of ours, by name, that this attempt does not wait for: for a
    /// read taken while its thread holds the write lock (a downgrade),
    /// that write node. The attempt queues behind it and holds as though
    /// it were gone, but only while another attempt of this machine holds
    /// it; if a contender that blocks us waits above it, the attempt
    /// fails with [`LockError::WouldDeadlock`](crate::lock::LockError::WouldDeadlock).
    pub passes: Option<String>,
    /// The longest a grant may last, counted from the machine's grant: at
    /// its end the holder is told `Lost` ([`LossReason::MaxHold`](super::LossReason::MaxHold)),
    /// then its node is deleted, whether or not the holder lets go (a
    /// holder whose thread hangs while its session lives would hold for
    /// ever). With lock-delay the node goes without its mark, so the next
    /// holder serves the delay as after any unclean end.
    pub max_hold: Option<Duration>,
}

impl LockSpec {
    /// A lock under `parent` (the server's path), nodes named
    /// `_c_<uuid><marker><sequence>`, open ACLs, no holder data, no watch
    /// on a held node, not revocable, no lock-delay, no node passed, no max hold.
    pub fn new(parent: &str, marker: &'static str, rule: Rule) -> LockSpec {
        LockSpec {
            parent: parent.to_owned(),
            marker,
            data: Vec::new(),
            acl: Acl::open_unsafe(),
            parent_acl: Acl::open_unsafe(),
            ancestor_acl: Acl::open_unsafe(),
            rule,
            watch_node: false,
            revocable: false,
            lock_delay: None,
            passes: None,
            max_hold: None,
        }
    }

    pub(crate) fn child(&self, name: &str) -> String {
        crate::path::join(&self.parent, name)
    }

    /// The path an attempt creates its sequential node at:
    /// `parent/_c_<uuid><marker>`, the server appending the sequence.
    pub(crate) fn node_prefix(&self, uuid: &str) -> String {
        crate::path::join_all(&self.parent, &["_c_", uuid, self.marker])
    }
}

/// Our node, once known. Its Stat is unknown for a node found again after
/// an ambiguous create, until read.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub name: String,
    pub stat: Option<Stat>,
    /// Found again by a listing (after an ambiguous create), its owner not
    /// read yet: it may be another session's node with our attempt id.
    pub found: bool,
}

/// One acquisition, from queueing to the removal of its node.
#[derive(Debug)]
pub(crate) struct Attempt {
    pub spec: Arc<LockSpec>,
    /// The protected id in our node names, new per attempt.
    pub uuid: String,
    pub phase: Phase,
    pub node: Option<Node>,
    /// Duplicates of our node (late creates of this attempt) to delete.
    pub strays: Vec<String>,
    /// Nodes with our attempt id that a listing showed, whose owner is
    /// still to read: a late create of ours is deleted, a node another
    /// session made with our id is not ours to delete.
    pub suspects: Vec<String>,
    /// Deletes in flight, by node name.
    pub deleting: Vec<String>,
    /// The server refused to delete a node of ours (with this code): told
    /// when the release finishes.
    pub release_refused: Option<jute::ErrorCode>,
    /// With lock-delay (and only then): its sub-machine, from the first
    /// reading of the server's clock to the release of our mark.
    pub delay: Option<Box<Delay>>,
}

impl Attempt {
    pub(crate) fn new(
        spec: Arc<LockSpec>,
        uuid: String,
        deadline: Option<Instant>,
        no_wait: bool,
    ) -> Self {
        Attempt {
            delay: spec.lock_delay.is_some().then(Box::default),
            spec,
            uuid,
            phase: Phase::queueing(deadline, no_wait),
            node: None,
            strays: Vec::new(),
            suspects: Vec::new(),
            deleting: Vec::new(),
            release_refused: None,
        }
    }

    pub(crate) fn node_name(&self) -> Option<&str> {
        self.node.as_ref().map(|n| n.name.as_str())
    }

    /// Records a duplicate of our node to delete, once.
    pub(crate) fn add_stray(&mut self, name: &str) {
        if self.node_name() != Some(name)
            && !self.strays.iter().any(|s| s == name)
            && !self.deleting.iter().any(|s| s == name)
        {
            self.strays.push(name.to_owned());
        }
    }

    /// Records a node with our attempt id, found by a listing, whose owner
    /// is to be read before it is deleted, once.
    pub(crate) fn add_suspect(&mut self, name: &str) {
        if self.node_name() != Some(name)
            && !self.strays.iter().any(|s| s == name)
            && !self.suspects.iter().any(|s| s == name)
            && !self.deleting.iter().any(|s| s == name)
        {
            self.suspects.push(name.to_owned());
        }
    }

    /// Nothing of this attempt can be left on the server.
    pub(crate) fn is_clean(&self) -> bool {
        let maybe_created = match &self.phase {
            Phase::Queueing(q) => matches!(&q.step, Step::Creating(c) if c.maybe_created),
            Phase::Releasing(r) => r.maybe_created,
            Phase::Held(_) => false,
        };
        self.node.is_none()
            && !maybe_created
            && self.strays.is_empty()
            && self.suspects.is_empty()
            && self.deleting.is_empty()
            && self.phase.awaited().is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names of a read/write queue, `r` and `w` in sequence order, listed
    /// out of order as a server may.
    fn q(kinds: &str) -> Names {
        let mut names: Vec<String> = kinds
            .chars()
            .enumerate()
            .map(|(i, k)| {
                let marker = if k == 'r' { "-__READ__" } else { "-__WRIT__" };
                format!("_c_x{marker}{i:010}")
            })
            .collect();
        names.reverse();
        names.into()
    }

    fn blocker(rule: Rule, queue: &Names, me: usize) -> Option<Blocker<'_>> {
        let me = queue.get(queue.len() - 1 - me).unwrap();
        let Standing { blocker, .. } = rule.standing(queue, me, None).unwrap();
        blocker
    }

    fn node(queue: &Names, i: usize, alone: bool) -> Option<Blocker<'_>> {
        let name = queue.get(queue.len() - 1 - i).unwrap();
        Some(Blocker::Node { name, alone })
    }

    #[test]
    fn readers_wait_for_the_nearest_writer_only() {
        let queue = q("rrwrrw");
        let reader = Rule::NearestWriter;
        assert_eq!(blocker(reader, &queue, 0), None);
        assert_eq!(blocker(reader, &queue, 1), None);
        // Only one writer below: its deletion alone lets the reader in.
        assert_eq!(blocker(reader, &queue, 3), node(&queue, 2, true));
        assert_eq!(blocker(reader, &queue, 4), node(&queue, 2, true));
        // Writers wait for whatever is just below.
        assert_eq!(
            blocker(Rule::Predecessor, &queue, 5),
            node(&queue, 4, false)
        );
        assert_eq!(blocker(Rule::Predecessor, &queue, 1), node(&queue, 0, true));
        let queue = q("rwrwr");
        assert_eq!(blocker(reader, &queue, 4), node(&queue, 3, false));
        // A node missing from the listing stands nowhere.
        assert_eq!(
            reader.standing(&queue, "_c_x-__READ__0000000009", None),
            None
        );
    }

    #[test]
    fn a_passed_node_of_ours_blocks_no_one_and_one_above_it_waits_for_it() {
        fn standing(queue: &Names, me: usize, passed: usize) -> (Option<Blocker<'_>>, bool) {
            let name = |i: usize| queue.get(queue.len() - 1 - i).unwrap();
            let s = Rule::NearestWriter.standing(queue, name(me), Some(name(passed)));
            let s = s.unwrap();
            (s.blocker, s.behind_passed)
        }
        // Only our write node below, or readers besides: held.
        assert_eq!(standing(&q("wr"), 1, 0), (None, false));
        assert_eq!(standing(&q("wrr"), 2, 0), (None, false));
        // A writer above our write node waits for it.
        let queue = q("wwr");
        assert_eq!(standing(&queue, 2, 0), (node(&queue, 1, true), true));
        // One below it blocks us as usual, and does not wait for us.
        assert_eq!(standing(&queue, 2, 1), (node(&queue, 0, true), false));
    }

    #[test]
    fn leases_hold_among_the_first_n() {
        let queue = q("wwww");
        assert_eq!(blocker(Rule::FirstN(2), &queue, 1), None);
        assert_eq!(blocker(Rule::FirstN(2), &queue, 2), Some(Blocker::Queue));
    }
}
