//! The handshake: the first frame each way on a new connection. These carry
//! no request or reply header.

use bytes::BytesMut;

use crate::primitives::{write_bool, write_buffer, write_i32, write_i64, Reader};
use crate::{Decode, DecodeError, Encode};

/// Opens a session (session_id 0) or resumes one after a reconnect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectRequest {
    /// Always [`PROTOCOL_VERSION`](crate::PROTOCOL_VERSION).
    pub protocol_version: i32,
    /// The last zxid this client saw; a server behind it refuses the session.
    pub last_zxid_seen: i64,
    /// Requested session timeout in milliseconds.
    pub timeout_ms: i32,
    /// 0 to open a new session, else the session to resume.
    pub session_id: i64,
    /// The password the server issued with `session_id`; ignored for a new session.
    pub passwd: Vec<u8>,
    /// Whether a read-only server may accept us.
    pub read_only: bool,
}

impl Encode for ConnectRequest {
    fn encode(&self, buf: &mut BytesMut) {
        write_i32(buf, self.protocol_version);
        write_i64(buf, self.last_zxid_seen);
        write_i32(buf, self.timeout_ms);
        write_i64(buf, self.session_id);
        write_buffer(buf, &self.passwd);
        write_bool(buf, self.read_only);
    }
}

impl Decode for ConnectRequest {
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(ConnectRequest {
            protocol_version: r.read_i32()?,
            last_zxid_seen: r.read_i64()?,
            timeout_ms: r.read_i32()?,
            session_id: r.read_i64()?,
            passwd: r.read_buffer()?,
            read_only: r.read_trailing_bool()?,
        })
    }
}

/// The server's answer. `timeout_ms == 0` means the session we asked to
/// resume has expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectResponse {
    /// The server's protocol version.
    pub protocol_version: i32,
    /// Negotiated session timeout in milliseconds.
    pub timeout_ms: i32,
    /// The granted (or resumed) session id.
    pub session_id: i64,
    /// The secret to present with `session_id` when resuming it on a later connection.
    pub passwd: Vec<u8>,
    /// The server is read-only (partitioned from its quorum).
    pub read_only: bool,
}

impl ConnectResponse {
    /// The session we asked to resume no longer exists (the server answers
    /// with a timeout of 0).
    pub fn is_expired(&self) -> bool {
        self.timeout_ms <= 0
    }
}

impl Encode for ConnectResponse {
    fn encode(&self, buf: &mut BytesMut) {
        write_i32(buf, self.protocol_version);
        write_i32(buf, self.timeout_ms);
        write_i64(buf, self.session_id);
        write_buffer(buf, &self.passwd);
        write_bool(buf, self.read_only);
    }
}

impl Decode for ConnectResponse {
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(ConnectResponse {
            protocol_version: r.read_i32()?,
            timeout_ms: r.read_i32()?,
            session_id: r.read_i64()?,
            passwd: r.read_buffer()?,
            read_only: r.read_trailing_bool()?,
        })
    }
}
