//! Expiring a session now, as Curator's `KillSession` does: a second
//! connection re-attaches to the session with its id and password (the
//! server then drops the connection the client had), and closes it. The
//! server deletes the session's ephemeral nodes before it answers the
//! close; the client, once it reconnects, is told its session expired.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::BytesMut;
use jute::{ConnectRequest, ConnectResponse, Decode, Request};

/// Bound for connecting and for each answer.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Re-attaching races the client's own reconnect (each takes the session
/// from the other): tries before giving up.
const ATTEMPTS: usize = 10;

/// Closes session `session_id` on the ZooKeeper server (or ensemble member)
/// at `server`, as if it had expired: its ephemeral nodes (a holder's lock
/// node) are gone when this returns, and the client that owned it is told
/// `Expired` when it next reaches a server.
///
/// The id and password of a zklock client's session are what a
/// [`ClientLink`](crate::ClientLink) it connects through saw
/// ([`ClientLink::expire_session`](crate::ClientLink::expire_session) does
/// all of this).
///
/// # Errors
///
/// `NotFound` if the server does not know the session (it has expired
/// already, or the password is wrong); an I/O error if the server cannot
/// be reached or does not answer within 10 s.
pub fn expire_session(server: SocketAddr, session_id: i64, password: &[u8]) -> io::Result<()> {
    let mut last = None;
    for _ in 0..ATTEMPTS {
        match close_once(server, session_id, password) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(e),
            // The client re-attached between our handshake and our close.
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no attempt made")))
}

fn close_once(server: SocketAddr, session_id: i64, password: &[u8]) -> io::Result<()> {
    let mut stream = TcpStream::connect_timeout(&server, IO_TIMEOUT)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_nodelay(true)?;
    let mut out = BytesMut::new();
    jute::encode_connect(
        &mut out,
        &ConnectRequest {
            protocol_version: jute::PROTOCOL_VERSION,
            last_zxid_seen: 0,
            timeout_ms: 30_000,
            session_id,
            passwd: password.to_vec(),
            read_only: false,
        },
    );
    stream.write_all(&out)?;
    let answer = read_frame(&mut stream)?;
    let response = ConnectResponse::decode_exact(&answer)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    if response.timeout_ms <= 0 || response.session_id != session_id {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{server} does not know session {session_id:#x} (expired, or wrong password)"),
        ));
    }
    out.clear();
    let xid = 1;
    jute::encode_request(&mut out, xid, &Request::CloseSession);
    stream.write_all(&out)?;
    // The reply to the close, once the server has ended the session; any
    // watch event before it is skipped.
    loop {
        let frame = read_frame(&mut stream)?;
        if frame.get(..4) == Some(&xid.to_be_bytes()[..]) {
            return Ok(());
        }
    }
}

/// One frame's body.
fn read_frame(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let len = jute::frame_len(&len, jute::DEFAULT_MAX_FRAME)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no frame length"))?;
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body)?;
    Ok(body)
}
