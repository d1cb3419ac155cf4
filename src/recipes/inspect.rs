//! A read-only view of a lock queue, for operators and the CLI.

use jute::{PathWatch, Request, Response};

use super::queue::{sorted_contenders, NodeKind, NodeOrigin};
use crate::{Client, Error};

/// One node in a lock queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueEntry {
    /// Child name under the lock path.
    pub name: String,
    /// The sequence ZooKeeper appended; the queue is in this order.
    pub sequence: i32,
    /// What the node asks for (exclusive, read, write, lease).
    pub kind: NodeKind,
    /// Who named it (zklock/Curator protected names, kazoo, other).
    pub origin: NodeOrigin,
    /// Session that owns the node (0 if it is not ephemeral).
    pub owner_session: i64,
    /// The node's data: who holds or waits (`hostname:pid` by default).
    pub data: Vec<u8>,
    /// Creation zxid: the holder's fencing token.
    pub czxid: i64,
}

/// Lists `path`'s contenders in queue order with owner, data and czxid;
/// one round trip for the list, one for all the nodes together.
///
/// # Errors
/// The client's error (see [`Client`](crate::Client#errors)); a path that
/// does not exist has an empty queue.
pub fn inspect(client: &Client, path: &str) -> Result<Vec<QueueEntry>, Error> {
    let children = match client.get_children(path) {
        Ok(c) => c,
        Err(e) if e.is_no_node() => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let queue = sorted_contenders(&children);
    let mut requests = Vec::with_capacity(queue.len());
    for c in &queue {
        let child = if path == "/" {
            format!("/{}", c.name)
        } else {
            format!("{path}/{}", c.name)
        };
        requests.push(Request::GetData(PathWatch {
            path: client.to_server_path(&child, false)?,
            watch: false,
        }));
    }
    let replies = client.pipeline(requests);
    let mut out = Vec::with_capacity(queue.len());
    for (c, reply) in queue.into_iter().zip(replies) {
        match reply {
            Ok(Response::Data { data, stat }) => out.push(QueueEntry {
                name: c.name,
                sequence: c.sequence,
                kind: c.kind,
                origin: c.origin,
                owner_session: stat.ephemeral_owner,
                data,
                czxid: stat.czxid,
            }),
            // Gone since the listing: no longer in the queue.
            Err(e) if e.is_no_node() => {}
            Err(e) => return Err(e),
            Ok(_) => return Err(Error::server(jute::ErrorCode::MarshallingError)),
        }
    }
    Ok(out)
}
