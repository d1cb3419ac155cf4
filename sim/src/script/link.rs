//! The connection between the core and the model server, as the script
//! steers it: the core's frames wait on the way until the script lets the
//! oldest reach the server (which answers it at once, as
//! FinalRequestProcessor would) or has it refused before it runs; the
//! server's frames wait until the connection moves; a drop lands the
//! writes on the way or not; a stall holds everything; a silent session
//! expires.

use std::collections::VecDeque;

use bytes::BytesMut;
use jute::{
    decode_request_header, decode_server_message, encode_frame, encode_request, xid, Encode,
    ErrorCode, OpCode, ReplyHeader, Request, ServerMessage,
};
use zklock::testing::CoreEvent;

use super::Script;
use crate::world::checker::read_past_deletion;
use crate::world::wire::{note_answers, note_requests};
use crate::zookeeper::ConnId;

/// Codes a server may answer a request with before running it (busy,
/// throttled, not allowed): the request did nothing.
pub(super) const REFUSALS: [ErrorCode; 4] = [
    ErrorCode::SystemError,
    ErrorCode::OperationTimeout,
    ErrorCode::Throttled,
    ErrorCode::NoAuth,
];

/// One connection of the core's to the server.
pub(super) struct Link {
    pub(super) conn: ConnId,
    /// Whole frames the core wrote, on their way to the server, in order;
    /// `output` holds what it wrote and has not yet been split.
    pub(super) up: VecDeque<Vec<u8>>,
    output: BytesMut,
    /// The next frame to reach the server is the connection's first (its
    /// handshake).
    first_pending: bool,
    /// Frames the server wrote, numbered, on their way to the core; and
    /// the server closed the connection after them.
    down: VecDeque<(u64, Vec<u8>)>,
    closed: bool,
    /// Requests written and not yet answered, for S2's proof of life.
    unanswered: VecDeque<(Option<i32>, std::time::Instant)>,
    sent_handshake: bool,
    heard_handshake: bool,
}

impl Link {
    fn new(conn: ConnId) -> Link {
        Link {
            conn,
            up: VecDeque::new(),
            output: BytesMut::new(),
            first_pending: true,
            down: VecDeque::new(),
            closed: false,
            unanswered: VecDeque::new(),
            sent_handshake: false,
            heard_handshake: false,
        }
    }
}

impl Script {
    /// A connection, if the core wants one.
    pub(super) fn connect(&mut self) {
        if self.link.is_none() && self.core.wants_connection() {
            self.core.prepare_connection();
            let conn = self.server.connect(self.now);
            self.link = Some(Link::new(conn));
            self.stalled = false;
            self.core.handle_connected(self.now);
        }
    }

    /// The connection drops. With `landed`, the frames on their way had
    /// reached the server (their answers are lost); a handshake on its way
    /// never lands (it would only make a session nobody uses).
    pub(super) fn drop_connection(&mut self, landed: bool) {
        let Some(mut link) = self.link.take() else {
            return;
        };
        if landed && !link.first_pending {
            while let Some(frame) = link.up.pop_front() {
                self.server.receive(self.now, link.conn, &frame);
            }
        }
        self.server.disconnect(self.now, link.conn);
        self.drain_server();
        self.stalled = false;
        self.core.handle_disconnected(self.now);
    }

    /// The oldest frame on its way reaches the server, which answers it;
    /// with `refusal`, a request that may be refused before it runs is
    /// answered with that code instead (the server heard it: the session
    /// is renewed as by a ping, and nothing else happens). A handshake, a
    /// release (delete, multi: a refused release leaves its node by
    /// design, `LockError::ReleaseRefused`, and the end could not tell it
    /// from a lost one) and the session's own housekeeping are always run.
    pub(super) fn answer(&mut self, refusal: Option<ErrorCode>) {
        let Some(link) = self.link.as_mut() else {
            return;
        };
        let Some(frame) = link.up.pop_front() else {
            return;
        };
        let first = std::mem::replace(&mut link.first_pending, false);
        let conn = link.conn;
        let refused = refusal
            .filter(|_| !first)
            .and_then(|code| refusable(&frame).map(|xid| (xid, code)));
        // The server received the others as they left (`touch`); a
        // handshake makes or renews the session as it runs.
        if first {
            self.heard = self.now;
        }
        let Some((refused_xid, code)) = refused else {
            self.server.receive(self.now, conn, &frame);
            return self.drain_server();
        };
        let mut ping = BytesMut::new();
        encode_request(&mut ping, xid::PING, &Request::Ping);
        self.server.receive(self.now, conn, &ping);
        let before = self.link.as_ref().map_or(0, |l| l.down.len());
        self.drain_server();
        // The ping's answer becomes the refusal.
        let Some(link) = self.link.as_mut() else {
            return;
        };
        for (_, bytes) in link.down.iter_mut().skip(before) {
            let Some(ServerMessage::Reply { header, .. }) =
                bytes.get(4..).and_then(|b| decode_server_message(b).ok())
            else {
                continue;
            };
            if header.xid != xid::PING {
                continue;
            }
            let mut reply = BytesMut::new();
            encode_frame(&mut reply, |b| {
                ReplyHeader {
                    xid: refused_xid,
                    zxid: header.zxid,
                    err: code,
                }
                .encode(b)
            });
            *bytes = reply.to_vec();
            break;
        }
    }

    /// The server has received what the core wrote, before it runs it:
    /// ZooKeeper renews the session then (ZooKeeperServer.submitRequest
    /// touches it), which the model does as it runs a request. A ping
    /// stands for the bytes: it renews the session, changes nothing else,
    /// and its answer is dropped.
    fn touch(&mut self) {
        let Some(conn) = self.link.as_ref().map(|l| l.conn) else {
            return;
        };
        let mut ping = BytesMut::new();
        encode_request(&mut ping, xid::PING, &Request::Ping);
        self.server.receive(self.now, conn, &ping);
        self.heard = self.now;
        let before = self.link.as_ref().map_or(0, |l| l.down.len());
        self.drain_server();
        let Some(link) = self.link.as_mut() else {
            return;
        };
        let answer = link
            .down
            .iter()
            .skip(before)
            .position(|(_, bytes)| reply_xid(bytes) == Some(xid::PING));
        if let Some(at) = answer {
            link.down.remove(before + at);
        }
    }

    /// Everything on its way reaches the server.
    pub(super) fn answer_all(&mut self) {
        // Bounded: a connection carries at most what the core wrote.
        for _ in 0..256 {
            if self.link.as_ref().is_none_or(|l| l.up.is_empty()) {
                return;
            }
            self.answer(None);
        }
    }

    /// What the server wrote and closed, on the core's connection's way
    /// (to an old connection's, nowhere).
    pub(super) fn drain_server(&mut self) {
        while let Some((conn, bytes)) = self.server.poll_output() {
            self.writes += 1;
            if let Some(link) = self.link.as_mut().filter(|l| l.conn == conn) {
                link.down.push_back((self.writes, bytes));
            }
        }
        while let Some(conn) = self.server.poll_closed() {
            self.writes += 1;
            if let Some(link) = self.link.as_mut().filter(|l| l.conn == conn) {
                link.closed = true;
            }
        }
    }

    /// Bytes both ways, unless stalled, and the server's close once what
    /// it wrote before has arrived; `true` if anything moved.
    pub(super) fn move_bytes(&mut self) -> bool {
        let now = self.now;
        if self.stalled {
            return false;
        }
        let Some(link) = self.link.as_mut() else {
            return false;
        };
        let mut moved = false;
        let out = self.core.output();
        if !out.is_empty() {
            let n = out.len();
            let handshake = !link.sent_handshake;
            link.sent_handshake = true;
            note_requests(&mut link.unanswered, out, now, handshake);
            link.output.extend_from_slice(out);
            self.core.consume_output(n);
            // Whole frames, each with its length.
            while let Some(len) = link.output.get(..4).map(|b| {
                let len = i32::from_be_bytes([b[0], b[1], b[2], b[3]]);
                usize::try_from(len).unwrap_or(0)
            }) {
                if link.output.len() < 4 + len {
                    break;
                }
                link.up.push_back(link.output.split_to(4 + len).to_vec());
            }
            moved = true;
            if !link.first_pending {
                self.touch();
            }
        }
        let Some(link) = self.link.as_mut() else {
            return moved;
        };
        if !link.down.is_empty() {
            let written = link.down.back().map_or(0, |(n, _)| *n);
            let bytes: Vec<u8> = link.down.drain(..).flat_map(|(_, b)| b).collect();
            let conn = link.conn;
            if let Some(sent) =
                note_answers(&mut link.unanswered, &mut link.heard_handshake, &bytes)
            {
                self.last_answered_send = self.last_answered_send.max(sent);
            }
            self.core.handle_input(now, &bytes);
            self.collect();
            self.check_told_of_deletion(written, conn);
            moved = true;
        }
        if self
            .link
            .as_ref()
            .is_some_and(|l| l.closed && l.down.is_empty())
        {
            self.link = None;
            self.core.handle_disconnected(now);
            moved = true;
        }
        moved
    }

    /// What the core asks of its driver.
    pub(super) fn events(&mut self) {
        while let Some(event) = self.core.poll_event() {
            if let CoreEvent::DropConnection(_) = event {
                if let Some(link) = self.link.take() {
                    self.server.disconnect(self.now, link.conn);
                    self.drain_server();
                    self.stalled = false;
                }
            }
        }
    }

    /// The server expires the session if it has heard nothing from it
    /// for a whole session timeout (at the moment a server whose expiry
    /// clock ticks at another phase than the model's would; the model
    /// itself expires it up to a tick later on its own).
    pub(super) fn expire_if_silent(&mut self) {
        let session = self.core.session_id();
        if self.server.session_alive(session) && self.now > self.heard + self.timeout {
            self.server.expire_session(self.now, session);
            self.drain_server();
        }
    }

    /// S1 for watched holders: a holder that has read what the server
    /// wrote after a third party deleted its node (the notification came
    /// first, on this connection) no longer says Held.
    fn check_told_of_deletion(&self, written: u64, conn: ConnId) {
        for a in &self.acquisitions {
            let super::Handle::Held(guard) = &a.handle else {
                continue;
            };
            if !self.watching[a.lock] {
                continue;
            }
            let node = guard.node_path();
            let Some((before, watchers)) = self.admin_deleted.get(node) else {
                continue;
            };
            if read_past_deletion((*before, watchers), written, conn)
                && guard.state() == zklock::recipes::LockState::Held
            {
                panic!(
                    "mutex {}: read past the deletion of its node {node} and still says Held",
                    a.lock
                );
            }
        }
    }
}

/// The xid of a request the script may have the server refuse before it
/// runs (a read, a create, a setData...), from its frame; `None` for the
/// ones it may not (see [`Script::answer`]) or a frame that is no request.
fn refusable(frame: &[u8]) -> Option<i32> {
    let (header, _) = decode_request_header(frame.get(4..)?).ok()?;
    let never = matches!(
        header.op,
        OpCode::Delete
            | OpCode::Multi
            | OpCode::Ping
            | OpCode::CloseSession
            | OpCode::SetWatches
            | OpCode::SetWatches2
            | OpCode::Auth
    );
    (!never).then_some(header.xid)
}

/// The xid of a reply frame (`None` for a notification or no reply).
fn reply_xid(frame: &[u8]) -> Option<i32> {
    match decode_server_message(frame.get(4..)?).ok()? {
        ServerMessage::Reply { header, .. } => Some(header.xid),
        ServerMessage::WatchEvent { .. } => None,
    }
}
