//! SASL authentication of a session (ZooKeeper's opcode 102), sans-I/O.
//!
//! After the ConnectResponse, a session configured with SASL sends nothing
//! but SASL tokens until the server accepts the login: queued requests,
//! credentials and re-armed watches wait, and the state stays what it was
//! (Connecting or Suspended) until the exchange is done. Every reconnect
//! authenticates again. A refusal ends the session in `AuthFailed`.
//!
//! Only DIGEST-MD5 (RFC 2831, what ZooKeeper's `DigestLoginModule` serves) is
//! implemented; [`SaslMechanism`] is an enum so GSSAPI can join it.

use std::time::Instant;

use bytes::BytesMut;
use jute::primitives::{write_buffer, Reader};
use jute::{decode_server_message, encode_frame, ErrorCode, OpCode, RequestHeader, ServerMessage};

use super::md5::{hex, md5};
use super::{DropReason, RequestError, Session, SessionState};
use jute::Encode;

/// How a session proves who it is with SASL.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SaslMechanism {
    /// DIGEST-MD5 with a user and password from the server's JAAS
    /// `DigestLoginModule` section (`user_<name>="<password>"`).
    DigestMd5 {
        /// The user name.
        username: String,
        /// The user's password.
        password: String,
    },
}

impl std::fmt::Debug for SaslMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SaslMechanism::DigestMd5 { username, .. } => f
                .debug_struct("DigestMd5")
                .field("username", username)
                .field("password", &"<hidden>")
                .finish(),
        }
    }
}

/// SASL settings of a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslConfig {
    /// The mechanism and its credentials.
    pub mechanism: SaslMechanism,
    /// The service name of the server principal: `zookeeper` unless the
    /// server runs under another (Java's `zookeeper.sasl.client.username`).
    pub service: String,
    /// The server name in DIGEST-MD5's `digest-uri`: ZooKeeper's server
    /// always uses `zk-sasl-md5`.
    pub server_name: String,
}

impl SaslConfig {
    /// DIGEST-MD5 with ZooKeeper's defaults.
    pub fn digest_md5(username: &str, password: &str) -> SaslConfig {
        SaslConfig {
            mechanism: SaslMechanism::DigestMd5 {
                username: username.to_owned(),
                password: password.to_owned(),
            },
            service: "zookeeper".to_owned(),
            server_name: "zk-sasl-md5".to_owned(),
        }
    }
}

/// Why a SASL exchange failed; every one ends the session in `AuthFailed`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SaslError {
    /// The server refused the login (wrong user or password, or a mechanism
    /// it does not serve).
    #[error("the server refused the SASL login ({0:?})")]
    Refused(ErrorCode),
    /// The server's challenge is not one we can answer.
    #[error("malformed SASL challenge: {0}")]
    BadChallenge(String),
    /// The server's `rspauth` does not prove that it knows the password.
    #[error("the server's rspauth does not match: it does not know the password")]
    BadServerProof,
    /// The server sent an empty token before the exchange was complete
    /// (treated as a failure, never as a reason to loop).
    #[error("the server stopped the SASL exchange before it was complete")]
    Incomplete,
}

/// One DIGEST-MD5 client exchange: empty initial token, the response to the
/// server's challenge, then the check of the server's `rspauth`.
#[derive(Debug)]
pub(crate) struct DigestMd5 {
    config: SaslConfig,
    cnonce: String,
    step: DigestStep,
}

#[derive(Debug, PartialEq, Eq)]
enum DigestStep {
    AwaitChallenge,
    AwaitRspauth { expected: String },
    Done,
}

/// What a token from the server asks of us.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SaslStep {
    /// Send this token.
    Send(Vec<u8>),
    /// Authenticated; nothing more to send.
    Done,
}

impl DigestMd5 {
    /// A new exchange; `cnonce` is the client's random nonce (hex or any
    /// token characters).
    pub(crate) fn new(config: SaslConfig, cnonce: String) -> DigestMd5 {
        DigestMd5 {
            config,
            cnonce,
            step: DigestStep::AwaitChallenge,
        }
    }

    /// DIGEST-MD5 has no initial response: the client starts empty.
    pub(crate) fn initial_token(&self) -> Vec<u8> {
        Vec::new()
    }

    /// Handles the server's next token.
    pub(crate) fn on_token(&mut self, token: &[u8]) -> Result<SaslStep, SaslError> {
        match std::mem::replace(&mut self.step, DigestStep::Done) {
            DigestStep::AwaitChallenge => {
                if token.is_empty() {
                    return Err(SaslError::Incomplete);
                }
                let (response, expected) = self.respond(token)?;
                self.step = DigestStep::AwaitRspauth { expected };
                Ok(SaslStep::Send(response.into_bytes()))
            }
            DigestStep::AwaitRspauth { expected } => {
                if token.is_empty() {
                    return Err(SaslError::Incomplete);
                }
                let fields = parse_directives(token)?;
                match lookup(&fields, "rspauth") {
                    Some(got) if got.eq_ignore_ascii_case(&expected) => Ok(SaslStep::Done),
                    Some(_) => Err(SaslError::BadServerProof),
                    None => Err(SaslError::BadChallenge(
                        "no rspauth in the final token".into(),
                    )),
                }
            }
            DigestStep::Done => Err(SaslError::BadChallenge(
                "a token after the exchange was complete".into(),
            )),
        }
    }

    /// The response to `challenge`, and the `rspauth` the server must send.
    fn respond(&self, challenge: &[u8]) -> Result<(String, String), SaslError> {
        let SaslMechanism::DigestMd5 { username, password } = &self.config.mechanism;
        let fields = parse_directives(challenge)?;
        let nonce =
            lookup(&fields, "nonce").ok_or_else(|| SaslError::BadChallenge("no nonce".into()))?;
        let realm = lookup(&fields, "realm").unwrap_or("");
        if let Some(qop) = lookup(&fields, "qop") {
            if !qop.split(',').any(|q| q.trim() == "auth") {
                return Err(SaslError::BadChallenge(format!(
                    "qop {qop:?} does not offer auth"
                )));
            }
        }
        if let Some(alg) = lookup(&fields, "algorithm") {
            if alg != "md5-sess" {
                return Err(SaslError::BadChallenge(format!("algorithm {alg:?}")));
            }
        }
        let utf8 = lookup(&fields, "charset") == Some("utf-8");
        let digest_uri = format!("{}/{}", self.config.service, self.config.server_name);
        let nc = "00000001";
        let qop = "auth";
        // A1 = H(user:realm:password):nonce:cnonce (RFC 2831 2.1.2.1).
        let mut secret = credential_bytes(username);
        secret.push(b':');
        secret.extend(credential_bytes(realm));
        secret.push(b':');
        secret.extend(credential_bytes(password));
        let mut a1 = md5(&secret).to_vec();
        a1.extend_from_slice(format!(":{nonce}:{}", self.cnonce).as_bytes());
        let ha1 = hex(&md5(&a1));
        let kd = |a2: &str| {
            let ha2 = hex(&md5(a2.as_bytes()));
            hex(&md5(format!(
                "{ha1}:{nonce}:{nc}:{}:{qop}:{ha2}",
                self.cnonce
            )
            .as_bytes()))
        };
        let response = kd(&format!("AUTHENTICATE:{digest_uri}"));
        let expected = kd(&format!(":{digest_uri}"));
        let mut out = String::new();
        if utf8 {
            out.push_str("charset=utf-8,");
        }
        out.push_str(&format!(
            "username=\"{}\",realm=\"{}\",nonce=\"{}\",nc={nc},cnonce=\"{}\",\
             digest-uri=\"{}\",maxbuf=65536,response={response},qop={qop}",
            quote(username),
            quote(realm),
            quote(nonce),
            quote(&self.cnonce),
            quote(&digest_uri),
        ));
        Ok((out, expected))
    }
}

/// RFC 2831: names and passwords that fit ISO 8859-1 are hashed in ISO
/// 8859-1, others (allowed only with `charset=utf-8`) in UTF-8.
fn credential_bytes(s: &str) -> Vec<u8> {
    if s.chars().all(|c| u32::from(c) <= 0xff) {
        s.chars().map(|c| u32::from(c) as u8).collect()
    } else {
        s.as_bytes().to_vec()
    }
}

fn quote(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn lookup<'a>(fields: &'a [(String, String)], key: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v.as_str())
}

/// Parses `key=value,key="quoted, value",...` (RFC 2831 section 7.1).
fn parse_directives(token: &[u8]) -> Result<Vec<(String, String)>, SaslError> {
    let text =
        std::str::from_utf8(token).map_err(|_| SaslError::BadChallenge("not UTF-8".into()))?;
    let mut fields = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while matches!(chars.peek(), Some(c) if *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(fields);
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' {
                break;
            }
            key.push(c);
            chars.next();
        }
        if chars.next() != Some('=') {
            return Err(SaslError::BadChallenge(format!(
                "directive {key:?} has no value"
            )));
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('\\') => match chars.next() {
                        Some(c) => value.push(c),
                        None => return Err(SaslError::BadChallenge("unterminated quote".into())),
                    },
                    Some('"') => break,
                    Some(c) => value.push(c),
                    None => return Err(SaslError::BadChallenge("unterminated quote".into())),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                value.push(c);
                chars.next();
            }
        }
        fields.push((key.trim().to_owned(), value.trim().to_owned()));
        if fields.len() > 64 {
            return Err(SaslError::BadChallenge("too many directives".into()));
        }
    }
}

/// The SASL exchange of the current connection.
#[derive(Debug)]
pub(super) struct SaslRound {
    exchange: DigestMd5,
    /// The xid of the SASL request in flight.
    xid: i32,
    /// When it was sent: its answer proves the server heard us then.
    sent: Instant,
    /// Whether the connection resumed an existing session.
    resumed: bool,
}

/// Appends one framed SASL request (opcode 102, a `GetSASLRequest` body).
fn encode_sasl(out: &mut BytesMut, xid: i32, token: &[u8]) {
    encode_frame(out, |b| {
        RequestHeader {
            xid,
            op: OpCode::Sasl,
        }
        .encode(b);
        write_buffer(b, token);
    });
}

impl<R, W: Clone> Session<R, W> {
    /// The handshake is done and SASL is configured: start authenticating.
    /// Returns false if SASL is not configured (the session opens at once).
    pub(super) fn start_sasl(&mut self, now: Instant, resumed: bool) -> bool {
        let Some(config) = self.sasl_config.clone() else {
            return false;
        };
        let cnonce = hex(uuid::Uuid::new_v4().as_bytes());
        let exchange = DigestMd5::new(config, cnonce);
        let xid = self.take_xid();
        encode_sasl(&mut self.out, xid, &exchange.initial_token());
        self.last_sent = now;
        self.sasl = Some(SaslRound {
            exchange,
            xid,
            sent: now,
            resumed,
        });
        true
    }

    /// Whether SASL authentication is under way on this connection.
    pub(super) fn sasl_in_progress(&self) -> bool {
        self.sasl.is_some()
    }

    /// A frame that answers the SASL request in flight, if it is one:
    /// `None` if it is not ours, else the result of handling it.
    pub(super) fn on_sasl_frame(
        &mut self,
        now: Instant,
        frame: &[u8],
    ) -> Option<Result<(), String>> {
        let round = self.sasl.as_mut()?;
        let Ok(ServerMessage::Reply { header, body }) = decode_server_message(frame) else {
            return None;
        };
        if header.xid != round.xid {
            return None;
        }
        let sent = round.sent;
        self.answered(sent);
        if header.zxid > 0 {
            self.last_zxid = self.last_zxid.max(header.zxid);
        }
        let round = self.sasl.as_mut()?;
        let step = if header.err != ErrorCode::Ok {
            Err(SaslError::Refused(header.err))
        } else {
            let mut r = Reader::new(body);
            match r.read_buffer_opt().and_then(|t| r.finish().map(|()| t)) {
                Ok(token) => round.exchange.on_token(&token.unwrap_or_default()),
                Err(e) => return Some(Err(format!("SASL reply: {e}"))),
            }
        };
        match step {
            Ok(SaslStep::Send(token)) => {
                let xid = self.take_xid();
                encode_sasl(&mut self.out, xid, &token);
                self.last_sent = now;
                if let Some(round) = self.sasl.as_mut() {
                    round.xid = xid;
                    round.sent = now;
                }
            }
            Ok(SaslStep::Done) => {
                let resumed = self.sasl.take().is_some_and(|r| r.resumed);
                log::debug!("SASL authentication succeeded");
                self.open_for_requests(now, resumed);
            }
            Err(e) => {
                log::error!("SASL authentication failed: {e}");
                self.sasl = None;
                self.auth_error = Some(e);
                self.events.push_back(super::SessionEvent::DropConnection(
                    DropReason::SessionEnded,
                ));
                self.finish(SessionState::AuthFailed, RequestError::AuthFailed);
            }
        }
        Some(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 2831 section 4's example, with the RFC's own inputs: the response
    /// and rspauth it prints.
    #[test]
    fn rfc_2831_example() {
        let config = SaslConfig {
            mechanism: SaslMechanism::DigestMd5 {
                username: "chris".into(),
                password: "secret".into(),
            },
            service: "imap".into(),
            server_name: "elwood.innosoft.com".into(),
        };
        let mut d = DigestMd5::new(config, "OA6MHXh6VqTrRk".into());
        assert!(d.initial_token().is_empty());
        let challenge = b"realm=\"elwood.innosoft.com\",nonce=\"OA6MG9tEQGm2hh\",qop=\"auth\",\
                          algorithm=md5-sess,charset=utf-8";
        let SaslStep::Send(resp) = d.on_token(challenge).unwrap() else {
            panic!("expected a response");
        };
        let resp = String::from_utf8(resp).unwrap();
        assert!(
            resp.contains("response=d388dad90d4bbd760a152321f2143af7"),
            "{resp}"
        );
        assert!(
            resp.contains("digest-uri=\"imap/elwood.innosoft.com\""),
            "{resp}"
        );
        assert!(resp.contains("nc=00000001"), "{resp}");
        let done = d.on_token(b"rspauth=ea40f60335c427b5527b84dbabcdfffd");
        assert_eq!(done, Ok(SaslStep::Done));
    }

    fn zk_exchange() -> DigestMd5 {
        DigestMd5::new(SaslConfig::digest_md5("alice", "pw"), "cn".into())
    }

    #[test]
    fn wrong_rspauth_is_refused() {
        let mut d = zk_exchange();
        d.on_token(b"realm=\"zk-sasl-md5\",nonce=\"n\",charset=utf-8,algorithm=md5-sess")
            .unwrap();
        assert_eq!(
            d.on_token(b"rspauth=00000000000000000000000000000000"),
            Err(SaslError::BadServerProof)
        );
    }

    #[test]
    fn empty_tokens_before_completion_fail_instead_of_looping() {
        let mut d = zk_exchange();
        assert_eq!(d.on_token(b""), Err(SaslError::Incomplete));
        let mut d = zk_exchange();
        d.on_token(b"nonce=\"n\"").unwrap();
        assert_eq!(d.on_token(b""), Err(SaslError::Incomplete));
    }

    #[test]
    fn zookeeper_digest_uri_and_no_qop_in_challenge() {
        let mut d = zk_exchange();
        let SaslStep::Send(resp) = d
            .on_token(b"realm=\"zk-sasl-md5\",nonce=\"abc\",charset=utf-8,algorithm=md5-sess")
            .unwrap()
        else {
            panic!("expected a response");
        };
        let resp = String::from_utf8(resp).unwrap();
        assert!(resp.starts_with("charset=utf-8,username=\"alice\",realm=\"zk-sasl-md5\""));
        assert!(
            resp.contains("digest-uri=\"zookeeper/zk-sasl-md5\""),
            "{resp}"
        );
        assert!(resp.contains(",qop=auth"), "{resp}");
    }

    #[test]
    fn malformed_challenges_are_errors_not_panics() {
        for bad in [
            &b"nonce"[..],
            b"nonce=\"unterminated",
            b"realm=\"r\"",
            b"\xff\xfe",
            b"nonce=\"n\",qop=\"auth-conf\"",
            b"nonce=\"n\",algorithm=md5",
        ] {
            let mut d = zk_exchange();
            assert!(
                matches!(d.on_token(bad), Err(SaslError::BadChallenge(_))),
                "{bad:?}"
            );
        }
    }

    /// Random and mutated tokens at every step: errors, never a panic.
    #[test]
    fn arbitrary_tokens_never_panic() {
        let good = b"realm=\"zk-sasl-md5\",nonce=\"n\",charset=utf-8,algorithm=md5-sess";
        // MD5 of a counter is a good enough stream of bytes here.
        let mut counter = 0u64;
        let mut next = move || {
            counter += 1;
            let d = md5(&counter.to_le_bytes());
            u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
        };
        for _ in 0..5000 {
            let mut token = good.to_vec();
            let len = (next() % 80) as usize;
            match next() % 3 {
                0 => token = (0..len).map(|_| next() as u8).collect(),
                1 => token.truncate(len),
                _ => {
                    for _ in 0..4 {
                        let i = (next() as usize) % token.len();
                        token[i] = b"\",= \\a\xff"[(next() % 7) as usize];
                    }
                }
            }
            let mut d = zk_exchange();
            let _ = d.on_token(&token);
            let _ = d.on_token(&token);
            let mut d = zk_exchange();
            if d.on_token(good).is_ok() {
                let _ = d.on_token(&token);
            }
        }
    }

    // ---- the session with SASL, bytes in and out ----------------------

    use crate::session::{SessionConfig, SessionEvent};
    use bytes::BytesMut;
    use jute::{decode_request_header, split_frame, ConnectResponse, ReplyHeader, Request};
    use std::time::Instant;

    type S = Session<u32, u32>;

    fn session() -> (S, Instant) {
        let now = Instant::now();
        let mut s = S::new(SessionConfig::default(), now);
        s.set_sasl(Some(SaslConfig::digest_md5("alice", "pw")));
        (s, now)
    }

    /// Frames written, as (xid, op, body).
    fn sent(s: &mut S) -> Vec<(i32, OpCode, Vec<u8>)> {
        let mut buf = BytesMut::from(s.output());
        s.consume_output(buf.len());
        let mut out = Vec::new();
        while let Some(f) = split_frame(&mut buf, usize::MAX).unwrap() {
            if let Ok((h, body)) = decode_request_header(&f) {
                out.push((h.xid, h.op, body.to_vec()));
            }
        }
        out
    }

    fn feed(s: &mut S, now: Instant, body: impl FnOnce(&mut BytesMut)) {
        let mut buf = BytesMut::new();
        encode_frame(&mut buf, body);
        s.handle_input(now, &buf);
    }

    fn handshake(s: &mut S, now: Instant) {
        s.handle_connected(now);
        s.consume_output(s.output().len());
        feed(s, now, |b| {
            ConnectResponse {
                protocol_version: 0,
                timeout_ms: 10_000,
                session_id: 0x42,
                passwd: vec![7; 16],
                read_only: false,
            }
            .encode(b)
        });
    }

    fn sasl_reply(s: &mut S, now: Instant, xid: i32, err: ErrorCode, token: Option<&[u8]>) {
        feed(s, now, |b| {
            ReplyHeader { xid, zxid: 5, err }.encode(b);
            if let Some(t) = token {
                write_buffer(b, t);
            }
        });
    }

    fn token_of(body: &[u8]) -> Vec<u8> {
        let mut r = Reader::new(body);
        r.read_buffer().unwrap()
    }

    fn events(s: &mut S) -> Vec<SessionEvent<u32, u32>> {
        std::iter::from_fn(|| s.poll_event()).collect()
    }

    /// Plays ZooKeeper's side of a successful exchange.
    fn authenticate(s: &mut S, now: Instant) {
        let frames = sent(s);
        assert_eq!(frames.len(), 1, "only the SASL request goes first");
        let (xid, op, body) = &frames[0];
        assert_eq!(*op, OpCode::Sasl);
        assert!(token_of(body).is_empty(), "DIGEST-MD5 starts empty");
        let challenge = b"realm=\"zk-sasl-md5\",nonce=\"srv\",charset=utf-8,algorithm=md5-sess";
        sasl_reply(s, now, *xid, ErrorCode::Ok, Some(challenge));
        let frames = sent(s);
        assert_eq!(frames.len(), 1);
        let (xid, op, body) = &frames[0];
        assert_eq!(*op, OpCode::Sasl);
        let response = token_of(body);
        let fields = parse_directives(&response).unwrap();
        let cnonce = lookup(&fields, "cnonce").unwrap().to_owned();
        let (_, rspauth) = DigestMd5::new(SaslConfig::digest_md5("alice", "pw"), cnonce)
            .respond(challenge)
            .unwrap();
        sasl_reply(
            s,
            now,
            *xid,
            ErrorCode::Ok,
            Some(format!("rspauth={rspauth}").as_bytes()),
        );
    }

    #[test]
    fn requests_wait_for_the_login_and_every_reconnect_logs_in_again() {
        let (mut s, now) = session();
        s.submit(now, Request::Sync("/".into()), 1, None);
        handshake(&mut s, now);
        assert_eq!(
            s.state(),
            SessionState::Connecting,
            "not usable before the login"
        );
        s.submit(now, Request::Sync("/a".into()), 2, None);
        authenticate(&mut s, now);
        assert_eq!(s.state(), SessionState::Connected);
        let ops: Vec<OpCode> = sent(&mut s).into_iter().map(|(_, op, _)| op).collect();
        assert_eq!(
            ops,
            vec![OpCode::Sync, OpCode::Sync],
            "the queue goes after the login"
        );

        s.handle_disconnected(now);
        s.submit(now, Request::Sync("/b".into()), 3, None);
        handshake(&mut s, now);
        assert_eq!(s.state(), SessionState::Suspended);
        authenticate(&mut s, now);
        assert_eq!(s.state(), SessionState::Connected);
        let ops: Vec<OpCode> = sent(&mut s).into_iter().map(|(_, op, _)| op).collect();
        assert_eq!(ops, vec![OpCode::Sync]);
    }

    #[test]
    fn a_refusal_is_terminal_and_answers_everyone() {
        let (mut s, now) = session();
        s.submit(now, Request::Sync("/".into()), 1, None);
        handshake(&mut s, now);
        let (xid, _, _) = sent(&mut s).remove(0);
        sasl_reply(&mut s, now, xid, ErrorCode::AuthFailed, None);
        assert_eq!(s.state(), SessionState::AuthFailed);
        assert_eq!(
            s.auth_error(),
            Some(&SaslError::Refused(ErrorCode::AuthFailed))
        );
        assert!(!s.wants_connection(), "no reconnect loop");
        let ev = events(&mut s);
        assert!(ev.iter().any(|e| matches!(
            e,
            SessionEvent::Reply {
                handle: 1,
                result: Err(RequestError::AuthFailed)
            }
        )));
        assert!(ev
            .iter()
            .any(|e| matches!(e, SessionEvent::DropConnection(DropReason::SessionEnded))));
        assert!(sent(&mut s).is_empty());
    }

    #[test]
    fn an_empty_challenge_fails_instead_of_looping() {
        let (mut s, now) = session();
        handshake(&mut s, now);
        let (xid, _, _) = sent(&mut s).remove(0);
        sasl_reply(&mut s, now, xid, ErrorCode::Ok, Some(b""));
        assert_eq!(s.state(), SessionState::AuthFailed);
        assert!(sent(&mut s).is_empty());
    }
}
