//! Options shared by the lock recipes, and the default data of a node.

use std::time::Duration;

use crate::Acl;

/// The default data of a lock node, naming who holds or waits:
/// `hostname:pid`.
fn default_holder_data() -> Vec<u8> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    format!("{host}:{}", std::process::id()).into_bytes()
}

/// Options shared by the lock recipes.
#[derive(Debug, Clone, Default)]
pub struct MutexOptions {
    data: Option<Vec<u8>>,
    pub(super) reentrant: bool,
    pub(super) watch_node: bool,
    pub(super) revocable: bool,
    pub(super) lock_delay: Option<Duration>,
    pub(super) max_hold: Option<Duration>,
    pub(super) acl: Option<Vec<Acl>>,
    pub(super) parent_acl: Option<Vec<Acl>>,
    pub(super) ancestor_acl: Option<Vec<Acl>>,
}

impl MutexOptions {
    /// Data stored in our lock node (default `hostname:pid`), shown by inspection.
    pub fn data(mut self, data: &[u8]) -> Self {
        self.data = Some(data.to_vec());
        self
    }

    /// Lets others ask the holder to release (Curator's revocation: a
    /// third party writes `__REVOKE__` into the holder's node, e.g. with
    /// [`revoke`](super::revoke) or Curator's `Revoker.attemptRevoke`); the
    /// guard then says so ([`LockGuard::revocation_requests`](super::LockGuard::revocation_requests)).
    /// Releasing stays the holder's choice. Implies
    /// [`watch_node`](Self::watch_node).
    pub fn revocable(mut self, yes: bool) -> Self {
        self.revocable = yes;
        self
    }

    /// Lock-delay (Chubby's and Consul's): when a holder ends uncleanly —
    /// its session expired or was closed, not a release — no one is
    /// granted until `delay` has passed on the server's clock since the
    /// end was first recorded there, giving the old holder time to notice
    /// ([`LockState::Lost`](crate::recipes::LockState)) and stop before
    /// anyone else acts. The holder granted then is told so
    /// ([`LockGuard::follows_unclean_end`](super::LockGuard::follows_unclean_end)).
    /// A try is granted at once once the delay has passed (the first try
    /// after the end records it, and is refused); a wait is granted as
    /// soon as it has passed. A clean release adds no delay.
    ///
    /// Each holder keeps a tenure mark, a persistent node
    /// `<lock path>~tenure/<uuid>` ([`tenure_path`](zklock_proto::lock::tenure_path)),
    /// outside the lock path so that no peer lists it (Curator's
    /// participants and semaphore leases, kazoo, [`inspect`](super::inspect)),
    /// deleted with the holder's node on release in one write; a mark
    /// without its node is what an unclean end leaves. So every contender
    /// on the path should set the same delay: a holder without it leaves no
    /// mark, and its unclean end goes unseen. A grant costs two listings, a
    /// write, and after an unclean end a read (and the first time a write)
    /// more. Without this option: no delay and no marks. A zero delay keeps
    /// the marks, to tell the next holder, and does not wait. The
    /// semaphore's internal gate runs none. The marks take the
    /// [`parent_acl`](Self::parent_acl), and `<lock path>~tenure` is created
    /// beside the lock path when missing (CREATE on the lock path's
    /// parent); where contenders may not create there, create it
    /// beforehand.
    pub fn lock_delay(mut self, delay: Duration) -> Self {
        self.lock_delay = Some(delay);
        self
    }

    /// The longest a hold may last (ShedLock's `lockAtMostFor`): `max` after
    /// the grant the holder is told [`Lost`](crate::recipes::LockState::Lost),
    /// with [`LossReason::MaxHold`](crate::recipes::LossReason::MaxHold),
    /// and its node is deleted in the same turn of the client's I/O thread,
    /// whether or not the holder's thread ever lets go. For a worker whose
    /// thread may hang (a deadlock, a stuck call) while its process and
    /// session live: without a max hold such a holder keeps the lock for
    /// ever.
    ///
    /// The holder hears of it as of any loss ([`LockGuard::state`](super::LockGuard::state),
    /// [`state_changes`](super::LockGuard::state_changes), and
    /// [`valid_until`](super::LockGuard::valid_until), which is never past
    /// the end); dropping or unlocking the guard afterwards has nothing left
    /// to do and returns `Ok`. The next waiter is granted as after a
    /// release, or, with [lock-delay](Self::lock_delay), after the delay: a
    /// max hold's end counts as an unclean end, since the holder may still
    /// be at work. It is counted on the client's monotonic clock from the
    /// moment the I/O thread hands out the grant, and ends the hold whatever
    /// the guard said before (a holder told `Lost` for no contact keeps its
    /// node only until then). If the connection is down at the end, the
    /// delete goes once the session is connected again, or the node goes
    /// with the session if the server expires it.
    ///
    /// Per recipe: a `Mutex` hold, each `RwLock` read or write hold,
    /// each `Semaphore` lease (its internal gate has none), each part of a
    /// `MultiLock` from its own grant (the first part taken ends first), a
    /// `BatchMutex`'s hold of its one node (the local turns within it share
    /// its end), and leadership in an `Election`: a
    /// [`LeaderLatch`](super::LeaderLatch) reports `Lost` with the reason
    /// and campaigns again, behind the candidates already queued.
    /// Re-entrant guards share one hold and its end. `Duration::MAX` (or any
    /// duration past a century) means no limit in practice.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zklock::{Client, recipes::{LockState, LossReason, Mutex, MutexOptions}};
    ///
    /// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
    /// let options = MutexOptions::default().max_hold(Duration::from_secs(60));
    /// let mutex = Mutex::with_options(&client, "/locks/nightly-job", options)?;
    /// let guard = mutex.lock()?;
    /// // ... the work; if it is not done within 60 s, the lock is let go:
    /// if guard.state() == LockState::Lost {
    ///     assert_eq!(guard.lost_reason(), Some(LossReason::MaxHold));
    /// }
    /// # Ok::<(), zklock::recipes::LockError>(())
    /// ```
    ///
    /// # Errors
    /// A zero `max` holds nothing: the recipe built with these options
    /// (`with_options`) refuses it with [`LockError::Client`](super::LockError::Client)
    /// and [`Error::InvalidSetting`](crate::Error::InvalidSetting).
    pub fn max_hold(mut self, max: Duration) -> Self {
        self.max_hold = Some(max);
        self
    }

    /// Lets the holding thread lock again; the lock is released when its last
    /// guard drops. Off by default: a second lock from the holder is an error.
    pub fn reentrant(mut self, yes: bool) -> Self {
        self.reentrant = yes;
        self
    }

    /// Whether a guard watches its own node, so that it reports `Lost` the
    /// moment a third party deletes the node (an operator breaking the
    /// lock). Off by default, as in Curator and kazoo: the watch costs one
    /// read per acquisition and one more notification per release. Without
    /// it, loss is still reported at once on session expiry or loss of
    /// contact, re-checked after every reconnect, and caught by
    /// [`LockGuard::fenced`](super::LockGuard::fenced) writes. Elections
    /// watch their leader's node always.
    pub fn watch_node(mut self, yes: bool) -> Self {
        self.watch_node = yes;
        self
    }

    /// The ACL of our lock nodes (default: open). With
    /// [`Acl::creator_all`] and an authenticated session, only this identity
    /// may change them; to stop others from deleting them, the lock path's
    /// ACL must also deny them DELETE (ZooKeeper checks it on the parent).
    pub fn acl(mut self, acl: Vec<Acl>) -> Self {
        self.acl = Some(acl);
        self
    }

    /// The ACL of the lock path, the parent of the contenders' nodes, when
    /// the lock creates it (default: open); a semaphore's path and its
    /// `locks` and `leases` take it too. It says who may queue (CREATE on
    /// it) and who may delete a contender's node (DELETE, which ZooKeeper
    /// checks on the parent): with [`Acl::creator_all`] here and in
    /// [`acl`](Self::acl), other identities can neither delete this
    /// identity's nodes nor queue on this path. The folders above it take
    /// [`ancestor_acl`](Self::ancestor_acl).
    pub fn parent_acl(mut self, acl: Vec<Acl>) -> Self {
        self.parent_acl = Some(acl);
        self
    }

    /// The ACL of the folders above the lock path that the lock creates on
    /// the way (default: open, as in Curator and kazoo); folders that exist
    /// keep theirs. A folder is shared by every lock below it, whoever made
    /// it first: one that denies an identity CREATE locks it out of every
    /// lock below (`NoAuth` on `createContainer`), which is why a
    /// creator-only [`parent_acl`](Self::parent_acl) does not reach up
    /// here. To let anyone create locks below a folder but only its creator
    /// change or delete it, pass an entry for `world:anyone` with
    /// [`perms`](crate::perms) `READ | CREATE` beside [`Acl::creator_all`]'s,
    /// as the `zklock` command does with a login.
    /// Folders are containers: the server deletes one once it is empty,
    /// whatever its ACL.
    pub fn ancestor_acl(mut self, acl: Vec<Acl>) -> Self {
        self.ancestor_acl = Some(acl);
        self
    }

    pub(crate) fn parent_acl_or_open(&self) -> Vec<Acl> {
        self.parent_acl.clone().unwrap_or_else(Acl::open_unsafe)
    }

    pub(crate) fn ancestor_acl_or_open(&self) -> Vec<Acl> {
        self.ancestor_acl.clone().unwrap_or_else(Acl::open_unsafe)
    }

    /// Refuses the options no lock can work with.
    pub(crate) fn check(&self) -> Result<(), crate::Error> {
        if self.max_hold.is_some_and(|d| d.is_zero()) {
            return Err(crate::Error::InvalidSetting {
                setting: "max_hold",
                reason: "zero: every hold would end as it is granted",
            });
        }
        Ok(())
    }

    pub(crate) fn holder_data(&self) -> Vec<u8> {
        self.data.clone().unwrap_or_else(default_holder_data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_carry_host_and_pid_unless_told_otherwise() {
        let ours = format!(":{}", std::process::id());
        let default = String::from_utf8(MutexOptions::default().holder_data()).unwrap();
        assert!(
            default.ends_with(&ours) && default.len() > ours.len(),
            "{default}"
        );
        let told = MutexOptions::default().data(b"x");
        assert_eq!(told.holder_data(), b"x");
    }

    #[test]
    fn a_zero_max_hold_is_refused_and_any_other_accepted() {
        let zero = MutexOptions::default().max_hold(Duration::ZERO).check();
        assert!(
            matches!(
                zero,
                Err(crate::Error::InvalidSetting {
                    setting: "max_hold",
                    ..
                })
            ),
            "{zero:?}"
        );
        for d in [
            Duration::from_nanos(1),
            Duration::from_secs(60),
            Duration::MAX,
        ] {
            assert!(MutexOptions::default().max_hold(d).check().is_ok(), "{d:?}");
        }
        assert!(MutexOptions::default().check().is_ok());
    }
}
