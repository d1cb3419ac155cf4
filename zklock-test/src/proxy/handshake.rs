//! The session a client opened through the proxy, read off the server's
//! first frame on each connection (ZooKeeper's `ConnectResponse`): what
//! [`crate::ClientLink::expire_session`] needs to close that session.

use std::net::SocketAddr;
use std::time::Duration;

use jute::{ConnectResponse, Decode};

/// A handshake longer than this is not a `ConnectResponse` (it is 36 to
/// 41 bytes); the scan stops rather than buffer a stranger's stream.
const MAX_HANDSHAKE: usize = 256;

/// A session a server granted (or re-attached) through the proxy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handshake {
    /// The session's id, as `zklock::Client::session_id` reports it.
    pub session_id: i64,
    /// The session's password, which re-attaching to the session requires.
    pub password: Vec<u8>,
    /// The session timeout the server granted.
    pub timeout: Duration,
    /// The server that granted it.
    pub server: SocketAddr,
}

/// Collects a connection's first server frame and decodes it once whole.
pub(super) struct HandshakeReader {
    bytes: Vec<u8>,
    done: bool,
}

impl HandshakeReader {
    pub(super) fn new() -> HandshakeReader {
        HandshakeReader {
            bytes: Vec::new(),
            done: false,
        }
    }

    /// Takes the next bytes the server sent; returns the session once the
    /// first frame is complete and names one (a refused session, id 0 or
    /// timeout 0, is none). Later calls return nothing.
    pub(super) fn feed(&mut self, chunk: &[u8], server: SocketAddr) -> Option<Handshake> {
        if self.done {
            return None;
        }
        let room = MAX_HANDSHAKE + 4 - self.bytes.len();
        self.bytes
            .extend_from_slice(&chunk[..chunk.len().min(room)]);
        let len = self.bytes.get(..4)?;
        let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
        if len > MAX_HANDSHAKE {
            self.done = true;
            return None;
        }
        let body = self.bytes.get(4..4 + len)?;
        self.done = true;
        let response = ConnectResponse::decode_exact(body).ok()?;
        let timeout = u64::try_from(response.timeout_ms)
            .ok()
            .filter(|&ms| ms > 0)?;
        (response.session_id != 0).then(|| Handshake {
            session_id: response.session_id,
            password: response.passwd,
            timeout: Duration::from_millis(timeout),
            server,
        })
    }
}
