//! Connections and the wire: bytes in, split into frames (the first a
//! ConnectRequest, then requests), frames out in order, and the closes,
//! by the server or by the client's side.

use super::*;

#[derive(Debug, Default)]
pub(super) struct Conn {
    input: BytesMut,
    /// Set once the handshake succeeded.
    pub(super) session: Option<i64>,
    /// Added a digest identity (needed for `auth`-scheme ACLs).
    pub(super) authed: bool,
    /// The highest zxid this connection has been shown: the client's own
    /// at the handshake, then every reply's.
    pub(super) shown_zxid: i64,
    /// Served by the lagging follower (lagging.rs).
    pub(super) lagging: bool,
}

impl SimZooKeeper {
    /// A new TCP connection. While the server is stopped the connection is
    /// refused: it appears at once in `poll_closed`.
    pub fn connect(&mut self, now: Instant) -> ConnId {
        self.handle_timeout(now);
        let id = self.next_conn;
        self.next_conn += 1;
        if self.running {
            self.conns.insert(id, Conn::default());
        } else {
            self.closed.push_back(id);
        }
        id
    }

    /// Bytes from the client on `conn`, split anywhere. Ignored once the
    /// connection is closed.
    pub fn receive(&mut self, now: Instant, conn: ConnId, bytes: &[u8]) {
        self.receive_frames(now, conn, bytes);
        if !self.holding {
            self.in_flight.clear();
        }
    }

    fn receive_frames(&mut self, now: Instant, conn: ConnId, bytes: &[u8]) {
        self.handle_timeout(now);
        match self.conns.get_mut(&conn) {
            Some(c) => c.input.extend_from_slice(bytes),
            None => return,
        }
        // Each round consumes one whole frame; the bound is only a guard.
        for _ in 0..=bytes.len() {
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            let frame = match split_frame(&mut c.input, jute::DEFAULT_MAX_FRAME) {
                Ok(Some(frame)) => frame,
                Ok(None) => return,
                Err(_) => return self.close_conn(conn),
            };
            match c.session {
                None => self.on_connect(now, conn, &frame),
                Some(session) => self.on_request(now, conn, session, &frame),
            }
        }
    }

    /// The next bytes to deliver: one frame, to one connection, in order.
    pub fn poll_output(&mut self) -> Option<(ConnId, Vec<u8>)> {
        self.out.pop_front().map(|(c, b, _)| (c, b))
    }

    /// [`SimZooKeeper::poll_output`], with the zxid the connection's server
    /// had applied when it wrote the frame (below [`SimZooKeeper::last_zxid`]
    /// for a frame of a lagging follower that had not caught up).
    pub fn poll_output_viewed(&mut self) -> Option<(ConnId, Vec<u8>, i64)> {
        self.out.pop_front()
    }

    /// The next connection the server closed (or refused).
    pub fn poll_closed(&mut self) -> Option<ConnId> {
        self.closed.pop_front()
    }

    /// The client side (or the network) dropped `conn`. Output not yet
    /// delivered to it is discarded; its watches are gone; its session
    /// lives on until it expires or resumes elsewhere.
    pub fn disconnect(&mut self, now: Instant, conn: ConnId) {
        self.handle_timeout(now);
        if self.drop_conn(conn) {
            self.log(|| format!("conn {conn}: dropped by the client or the network"));
            self.out.retain(|(c, _, _)| *c != conn);
        }
    }

    /// The session attached to `conn`, and whether it added a digest
    /// identity; `None` before its handshake or once it is closed.
    pub fn conn_session(&self, conn: ConnId) -> Option<(i64, bool)> {
        let c = self.conns.get(&conn)?;
        Some((c.session?, c.authed))
    }

    /// The server closes connection `conn` (its session lives on).
    pub fn close_connection(&mut self, conn: ConnId) {
        if self.conns.contains_key(&conn) {
            self.close_conn(conn);
        }
    }

    pub(super) fn send(&mut self, conn: ConnId, write: impl FnOnce(&mut BytesMut)) {
        if !self.conns.contains_key(&conn) {
            return;
        }
        let mut buf = BytesMut::new();
        encode_frame(&mut buf, write);
        let view = self.applied_for(conn);
        self.out.push_back((conn, buf.to_vec(), view));
    }

    pub(super) fn reply(
        &mut self,
        conn: ConnId,
        xid: i32,
        zxid: i64,
        result: Result<Response, ErrorCode>,
    ) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.shown_zxid = c.shown_zxid.max(zxid);
        }
        self.send(conn, |b| match result {
            Ok(resp) => {
                ReplyHeader {
                    xid,
                    zxid,
                    err: ErrorCode::Ok,
                }
                .encode(b);
                resp.encode(b);
            }
            Err(err) => ReplyHeader { xid, zxid, err }.encode(b),
        });
    }

    /// Forgets `conn` and its watches; false if it was not open.
    fn drop_conn(&mut self, conn: ConnId) -> bool {
        let Some(c) = self.conns.remove(&conn) else {
            return false;
        };
        self.forget_follower_conn(conn);
        if let Some(id) = c.session {
            if let Some(s) = self.sessions.get_mut(&id) {
                if s.conn == Some(conn) {
                    s.conn = None;
                }
            }
        }
        for table in [&mut self.data_watches, &mut self.child_watches] {
            table.retain(|_, set| {
                set.remove(&conn);
                !set.is_empty()
            });
        }
        true
    }

    /// The server closes `conn`: queued output stays deliverable.
    pub(super) fn close_conn(&mut self, conn: ConnId) {
        if self.drop_conn(conn) {
            self.log(|| format!("conn {conn}: closed by the server"));
            self.closed.push_back(conn);
        }
    }
}
