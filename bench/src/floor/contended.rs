//! `floor-contended`: Curator's lock protocol by the codec alone, one
//! blocking socket and one thread per session, driven by the same harness
//! as zklock's `contended` mode (src/contend.rs). Each turn writes the
//! previous node's delete (the release of the turn before), a create2 and a
//! getChildren in one go; the first node holds; any other watches its
//! predecessor with getData and lists again when that watch fires (or at
//! once if the predecessor is already gone).

use super::raw::{
    create, created, delete, is_no_node, list, node_prefix, queue_of, seq, watch, Session,
};
use crate::contend::ContendedSession;
use crate::BoxResult;

/// Listings one acquisition may take before it gives up: each one follows
/// the departure of a node ahead, and at most every other session's node
/// can be ahead, many times over.
const MAX_LISTINGS: usize = 100_000;

/// One session of the raw contended floor.
pub struct Contender {
    session: Session,
    parent: String,
    prefix: String,
    /// This session's node while it holds the lock.
    node: Option<String>,
    /// The node released last, deleted at the front of the next write.
    released: Option<String>,
}

impl Contender {
    /// Session `id` contending for the lock at `parent`.
    pub fn open(connect: &str, parent: &str, id: usize) -> BoxResult<Contender> {
        Ok(Contender {
            session: Session::connect(connect)?,
            parent: parent.to_owned(),
            prefix: node_prefix(parent, id),
            node: None,
            released: None,
        })
    }
}

impl ContendedSession for Contender {
    fn lock(&mut self) -> BoxResult<()> {
        let s = &mut self.session;
        if let Some(node) = self.released.take() {
            s.queue(&delete(node));
        }
        let create_xid = s.queue(&create(&self.prefix));
        let mut list_xid = s.queue(&list(&self.parent));
        s.flush()?;
        let node = created(s.ok(create_xid)?)?;
        let mine = seq(&node).ok_or_else(|| format!("{node} has no sequence suffix"))?;
        for _ in 0..MAX_LISTINGS {
            let queue = queue_of(s.ok(list_xid)?)?;
            if !queue.iter().any(|(n, _)| *n == mine) {
                return Err(format!("{node} is not in its lock's listing").into());
            }
            // The predecessor: the last node ahead of this one.
            let Some((_, ahead)) = queue.iter().take_while(|(n, _)| *n < mine).last() else {
                self.node = Some(node);
                return Ok(());
            };
            let watch_xid = s.queue(&watch(format!("{}/{ahead}", self.parent)));
            s.flush()?;
            let watched = s.until(watch_xid)?;
            if !is_no_node(&watched) {
                watched.map_err(|e| format!("a getData with a watch answered {e:?}"))?;
                // The only watch this session has: the predecessor's.
                s.events()?;
            }
            list_xid = s.queue(&list(&self.parent));
            s.flush()?;
        }
        Err(format!("{node} still waits after {MAX_LISTINGS} listings").into())
    }

    /// Nothing is sent: the delete leads the next turn's write (or
    /// `settle`'s, after the last turn).
    fn unlock(&mut self, _again: bool) -> BoxResult<()> {
        self.released = self.node.take();
        Ok(())
    }

    fn settle(&mut self) -> BoxResult<()> {
        if let Some(node) = self.released.take() {
            let x = self.session.queue(&delete(node));
            self.session.flush()?;
            self.session.ok(x)?;
        }
        Ok(())
    }

    fn close(self) -> BoxResult<()> {
        self.session.close()
    }
}
