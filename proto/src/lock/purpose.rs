//! Why a request was sent, so that its reply reaches the step that
//! awaits it.

use super::delay::DelayPurpose;

/// Why a request was sent, so its reply can be routed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// create2 of our node.
    Create,
    /// createContainer of the `n`th ancestor (the lock path is the last).
    Parent(usize),
    /// getChildren after an ambiguous create: is a node of ours there?
    Recover,
    /// sync of the lock path, just before a `Recover` or `CleanupList`
    /// listing: a create of ours that the old server forwarded before we
    /// reconnected elsewhere is committed before our session moved (the
    /// leader refuses it after), but the new server may not have applied
    /// it yet. After a sync it has, and the listing behind it shows it.
    CatchUp,
    /// exists of a node found again: its Stat and owner.
    Stat,
    /// getChildren to find our place (with a watch for [`Rule::FirstN`](super::Rule::FirstN)).
    List,
    /// getData with a watch on the node we wait for.
    WatchBlocker,
    /// getData with a watch on the node below the one we wait for (see
    /// [`Standing::scout`](super::attempt::Standing)).
    WatchScout,
    /// getData (with a watch if asked) on our own held node.
    Confirm,
    /// getData with a watch on our own node, sent with the first watch on
    /// a blocker: see [`OwnWatch`](super::phase::OwnWatch).
    WatchOwn,
    /// getData on our node once the blocker went: it must still exist.
    /// Only when [`OwnWatch`](super::phase::OwnWatch) cannot prove it.
    GrantCheck,
    /// delete of a node of ours (the node itself or a stray duplicate).
    Delete(String),
    /// exists of a node with our attempt id found by a listing: deleted
    /// only if our session owns it (see [`Attempt::suspects`](super::attempt::Attempt::suspects)).
    StrayStat(String),
    /// getChildren with a watch, for a holder near the counter's end.
    EndWatch,
    /// getChildren to find every node of this attempt before releasing.
    CleanupList,
    /// A step of lock-delay's sub-machine (see `lock::delay`).
    Delay(DelayPurpose),
    /// multi(delete the node `name` of the holder `old`, create2 ours):
    /// release and queue again in one write.
    Requeue { old: u64, name: String },
}

impl Purpose {
    /// Main-line requests: at most one in flight per attempt; a reply that
    /// is not the one awaited is stale.
    pub(crate) fn is_main_line(&self) -> bool {
        !matches!(
            self,
            Purpose::Confirm
                | Purpose::CatchUp
                | Purpose::Delete(_)
                | Purpose::StrayStat(_)
                | Purpose::EndWatch
                | Purpose::WatchOwn
                | Purpose::WatchScout
        ) && !matches!(self, Purpose::Delay(p) if !p.is_main_line())
    }
}
