//! A client made of the codec alone over a blocking socket, one request at a
//! time: for tests that must not lean on the client under test (the kit's
//! own, the codec's against a live server).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::BytesMut;
use jute::{ConnectRequest, ConnectResponse, Decode, ReplyHeader, ReplyResult, Request};

/// Bound for connecting and for every read: a server that says nothing fails the test.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A session opened with a raw handshake.
pub struct RawClient {
    stream: TcpStream,
    session: ConnectResponse,
    xid: i32,
}

impl RawClient {
    /// Connects to `addr` and opens a session asking for `timeout_ms`; panics
    /// if the server does not answer or refuses the session.
    pub fn connect(addr: SocketAddr, timeout_ms: i32) -> RawClient {
        let mut stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
            .unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
        stream
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("setting a read timeout");
        stream.set_nodelay(true).expect("setting TCP_NODELAY");
        let mut handshake = BytesMut::new();
        jute::encode_connect(
            &mut handshake,
            &ConnectRequest {
                protocol_version: jute::PROTOCOL_VERSION,
                last_zxid_seen: 0,
                timeout_ms,
                session_id: 0,
                passwd: vec![0; 16],
                read_only: false,
            },
        );
        stream.write_all(&handshake).expect("sending the handshake");
        let frame = read_frame(&mut stream)
            .unwrap_or_else(|e| panic!("no ConnectResponse from {addr}: {e}"));
        let session = ConnectResponse::decode_exact(&frame)
            .unwrap_or_else(|e| panic!("bad ConnectResponse from {addr}: {e}"));
        assert_ne!(
            session.session_id, 0,
            "{addr} refused the session: {session:?}"
        );
        RawClient {
            stream,
            session,
            xid: 0,
        }
    }

    /// The server's answer to the handshake.
    pub fn session(&self) -> &ConnectResponse {
        &self.session
    }

    /// The socket, for tests that send bytes of their own or watch it close.
    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    /// Sends `request` with the next xid and returns its reply, decoded;
    /// watch events on the way are skipped.
    pub fn call(&mut self, request: &Request) -> (ReplyHeader, ReplyResult) {
        self.xid += 1;
        self.call_with(self.xid, request)
    }

    /// [`RawClient::call`] with an xid of the caller's: a reserved one
    /// ([`jute::xid`]), or one it numbers itself.
    pub fn call_with(&mut self, xid: i32, request: &Request) -> (ReplyHeader, ReplyResult) {
        self.send(xid, request);
        loop {
            let frame = self.read_frame().expect("reading a reply");
            match jute::decode_server_message(&frame) {
                Ok(jute::ServerMessage::WatchEvent { .. }) => {}
                Ok(jute::ServerMessage::Reply { header, body }) => {
                    assert_eq!(header.xid, xid, "replies come in request order");
                    let result = jute::decode_reply(request.op_code(), &header, body)
                        .unwrap_or_else(|e| panic!("bad reply to {request:?}: {e}"));
                    return (header, result);
                }
                Err(e) => panic!("bad server frame {frame:?}: {e}"),
            }
        }
    }

    /// Sends `request` with `xid` and reads nothing.
    pub fn send(&mut self, xid: i32, request: &Request) {
        let mut buf = BytesMut::new();
        jute::encode_request(&mut buf, xid, request);
        self.write(&buf);
    }

    /// The body of the next frame from the server.
    pub fn read_frame(&mut self) -> io::Result<Vec<u8>> {
        read_frame(&mut self.stream)
    }

    fn write(&mut self, bytes: &[u8]) {
        self.stream
            .write_all(bytes)
            .expect("sending a frame to ZooKeeper");
    }
}

/// One frame's body; a length the codec refuses is `InvalidData`.
fn read_frame(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let len = jute::frame_len(&len, jute::DEFAULT_MAX_FRAME)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?
        .expect("4 bytes make a length");
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body)?;
    Ok(body)
}
