//! Options shared by the lock recipes, and the default data of a node.

use std::time::Duration;

use crate::Acl;

/// The default data of a lock node, naming who holds or waits:
/// `hostname:pid`. Tools acting for another process pass its pid.
pub fn holder_identity(pid: u32) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    format!("{host}:{pid}")
}

fn default_holder_data() -> Vec<u8> {
    holder_identity(std::process::id()).into_bytes()
}

/// Options shared by the lock recipes.
#[derive(Debug, Clone, Default)]
pub struct MutexOptions {
    data: Option<Vec<u8>>,
    pub(super) reentrant: bool,
    pub(super) watch_node: bool,
    pub(super) revocable: bool,
    pub(super) lock_delay: Option<Duration>,
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
        assert_eq!(default, holder_identity(std::process::id()));
        let told = MutexOptions::default().data(b"x");
        assert_eq!(told.holder_data(), b"x");
    }
}
