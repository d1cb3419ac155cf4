//! Reading requests and replies on the simulated wire: which request each
//! reply answers, and when that request was sent (S2's proof of life).

use std::collections::VecDeque;
use std::time::Instant;

use super::World;

impl World {
    /// The server's answers in `bytes` (whole frames, as the server model
    /// writes them): each proves the server heard the client when the
    /// request it answers was sent.
    pub(super) fn note_answers(&mut self, c: usize, bytes: &[u8]) {
        let client = &mut self.clients[c];
        let Some(link) = client.link.as_mut() else {
            return;
        };
        let sent = note_answers(&mut link.unanswered, &mut link.heard_handshake, bytes);
        if let Some(sent) = sent {
            client.last_answered_send = client.last_answered_send.max(sent);
        }
    }
}

/// The server's answers in `bytes` (whole frames) to the requests in
/// `unanswered` (see [`note_requests`]; `heard_handshake`: the
/// connection's handshake was answered): the answered ones leave it, and
/// the latest time one of them was sent comes back.
pub(crate) fn note_answers(
    unanswered: &mut VecDeque<(Option<i32>, Instant)>,
    heard_handshake: &mut bool,
    bytes: &[u8],
) -> Option<Instant> {
    let mut latest: Option<Instant> = None;
    for body in frames(bytes) {
        let answered = if !*heard_handshake {
            *heard_handshake = true;
            match unanswered.front() {
                Some((None, _)) => unanswered.pop_front(),
                _ => None,
            }
        } else {
            let Some(xid) = body
                .get(..4)
                .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
            else {
                continue;
            };
            if xid == -1 {
                continue; // a watch event answers nothing
            }
            // Replies come in request order.
            loop {
                match unanswered.pop_front() {
                    Some((Some(x), at)) if x == xid => break Some((Some(x), at)),
                    Some(_) => continue,
                    None => break None,
                }
            }
        };
        if let Some((_, sent)) = answered {
            latest = Some(latest.map_or(sent, |l| l.max(sent)));
        }
    }
    latest
}

/// The bodies of the length-prefixed frames in `bytes` (a cut-short last
/// frame is left out).
pub(crate) fn frames(bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while let Some(len) = rest.get(..4) {
        let len = i32::from_be_bytes([len[0], len[1], len[2], len[3]]);
        let Some(body) = usize::try_from(len).ok().and_then(|n| rest.get(4..4 + n)) else {
            break;
        };
        out.push(body);
        rest = &rest[4 + body.len()..];
    }
    out
}

/// Records the requests in `bytes`, written at `now`: the handshake first
/// on a new connection, then each request by its xid.
pub(crate) fn note_requests(
    unanswered: &mut VecDeque<(Option<i32>, Instant)>,
    bytes: &[u8],
    now: Instant,
    handshake: bool,
) {
    for (i, body) in frames(bytes).into_iter().enumerate() {
        if i == 0 && handshake {
            unanswered.push_back((None, now));
        } else if let Some(b) = body.get(..4) {
            unanswered.push_back((Some(i32::from_be_bytes([b[0], b[1], b[2], b[3]])), now));
        }
    }
}
