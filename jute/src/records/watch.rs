//! The notification a server pushes (reserved xid -1) when a watch fires.

use bytes::BytesMut;

use crate::primitives::{write_i32, write_string, Reader};
use crate::{Decode, DecodeError, Encode, EventType, KeeperState};

/// The body of a watch notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatcherEvent {
    /// What happened (the wire's `type` field).
    pub kind: EventType,
    /// The session's state; SyncConnected for node events.
    pub state: KeeperState,
    /// The node concerned, as the server names it (chroot included); empty
    /// for session events.
    pub path: String,
}

impl Encode for WatcherEvent {
    fn encode(&self, buf: &mut BytesMut) {
        write_i32(buf, self.kind.code());
        write_i32(buf, self.state.code());
        write_string(buf, &self.path);
    }
}

impl Decode for WatcherEvent {
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(WatcherEvent {
            kind: EventType::from(r.read_i32()?),
            state: KeeperState::from(r.read_i32()?),
            // Session-level events carry a null path.
            path: r.read_string_opt()?.unwrap_or_default(),
        })
    }
}
