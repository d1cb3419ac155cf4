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

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use jute::Encode;

    const SERVER: SocketAddr =
        SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 2181);

    /// A server's first frame: its length, then a `ConnectResponse`.
    fn frame(session_id: i64, timeout_ms: i32) -> Vec<u8> {
        let mut body = BytesMut::new();
        ConnectResponse {
            protocol_version: 0,
            timeout_ms,
            session_id,
            passwd: (1..=16).collect(),
            read_only: false,
        }
        .encode(&mut body);
        let mut out = (body.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(&body);
        out
    }

    fn granted(session_id: i64, timeout_ms: u64) -> Handshake {
        Handshake {
            session_id,
            password: (1..=16).collect(),
            timeout: Duration::from_millis(timeout_ms),
            server: SERVER,
        }
    }

    /// The session is read off the first frame however it is split, once
    /// the frame is whole, and only from the first frame.
    #[test]
    fn the_session_comes_from_the_first_frame_in_any_pieces() {
        let mut bytes = frame(0x1234, 4000);
        let whole = bytes.len();
        // A reply after the handshake, in the same read.
        bytes.extend_from_slice(&frame(0x9999, 9000));
        for split in 0..=whole {
            let mut reader = HandshakeReader::new();
            let first = reader.feed(&bytes[..split], SERVER);
            let second = reader.feed(&bytes[split..], SERVER);
            let want = Some(granted(0x1234, 4000));
            if split == whole {
                assert_eq!((first, second), (want, None), "split at {split}");
            } else {
                assert_eq!((first, second), (None, want), "split at {split}");
            }
            assert_eq!(reader.feed(&frame(0x5555, 5000), SERVER), None);
        }
    }

    /// A refused session (id 0, or timeout 0: expired) names none.
    #[test]
    fn a_refused_session_is_none() {
        for (id, timeout) in [(0, 4000), (0x1234, 0), (0x1234, -1)] {
            let mut reader = HandshakeReader::new();
            assert_eq!(reader.feed(&frame(id, timeout), SERVER), None);
        }
    }

    /// A first frame longer than any handshake ends the scan at once,
    /// whatever follows; one of exactly the limit is still read.
    #[test]
    fn a_first_frame_past_the_limit_is_not_a_handshake() {
        let mut long = ((MAX_HANDSHAKE + 1) as u32).to_be_bytes().to_vec();
        long.extend_from_slice(&frame(0x1234, 4000));
        let mut reader = HandshakeReader::new();
        assert_eq!(reader.feed(&long[..4], SERVER), None);
        assert_eq!(reader.feed(&long[4..], SERVER), None);
        assert_eq!(reader.feed(&frame(0x1234, 4000), SERVER), None);

        // A handshake padded to exactly the limit: the record, then bytes
        // that decode_exact refuses, so none; but the frame is waited for
        // whole (a shorter wait would decode part of it).
        let mut padded = frame(0x1234, 4000);
        let body = padded.len() - 4;
        padded.resize(4 + MAX_HANDSHAKE, 0);
        padded[..4].copy_from_slice(&(MAX_HANDSHAKE as u32).to_be_bytes());
        let mut reader = HandshakeReader::new();
        assert_eq!(reader.feed(&padded[..4 + body], SERVER), None);
        assert!(!reader.done, "waiting for the rest of the frame");
        assert_eq!(reader.feed(&padded[4 + body..], SERVER), None);
        assert!(reader.done);
    }
}
