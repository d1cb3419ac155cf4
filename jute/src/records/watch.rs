//! The notification a server pushes (reserved xid -1) when a watch fires.

use bytes::BytesMut;

use crate::primitives::{write_i32, write_string, Reader};
use crate::{Decode, DecodeError, Encode, EventType, KeeperState};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatcherEvent {
    pub kind: EventType,
    pub state: KeeperState,
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
