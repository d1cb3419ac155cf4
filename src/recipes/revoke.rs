//! Asking a holder to let go: Curator's revocation protocol, so that
//! zklock and Curator holders can be asked by either.

use super::error::LockError;
use super::inspect::inspect;
use crate::machine::REVOKE;
use crate::Client;

/// Asks the holder of lock node `node` to release (writes `__REVOKE__` into
/// it, as Curator's `Revoker.attemptRevoke` does). Only a
/// [revocable](super::MutexOptions::revocable) zklock holder (or a Curator
/// holder made revocable) hears it; releasing stays its decision.
/// `Ok(false)` if the node is gone.
///
/// # Errors
/// [`LockError::Client`] with the client's error (an ACL refusing the
/// write: [`ErrorCode::NoAuth`](crate::ErrorCode::NoAuth)).
pub fn revoke(client: &Client, node: &str) -> Result<bool, LockError> {
    match client.set_data(node, REVOKE, None) {
        Ok(_) => Ok(true),
        Err(e) if e.is_no_node() => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Asks whoever holds the lock at `lock_path` to release: the first node in
/// its queue. The holder's node, or `None` if nobody holds it.
///
/// # Errors
/// As [`revoke`], and the client's error listing the queue.
pub fn revoke_holder(client: &Client, lock_path: &str) -> Result<Option<String>, LockError> {
    for _ in 0..3 {
        let Some(head) = inspect(client, lock_path)?.into_iter().next() else {
            return Ok(None);
        };
        let node = format!("{}/{}", lock_path.trim_end_matches('/'), head.name);
        if revoke(client, &node)? {
            return Ok(Some(node));
        }
        // Released meanwhile: the next one holds now.
    }
    Ok(None)
}
