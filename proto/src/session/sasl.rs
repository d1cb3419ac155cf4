//! SASL authentication of a session (ZooKeeper's opcode 102), sans-I/O.
//!
//! After the ConnectResponse, a session configured with SASL sends nothing
//! but SASL tokens until the server accepts the login: queued requests,
//! credentials and re-armed watches wait, and the state stays what it was
//! (Connecting or Suspended) until the exchange is done. Every reconnect
//! authenticates again. A refusal ends the session in `AuthFailed`, and so
//! does a login that cannot even start (no Kerberos credentials, say).
//!
//! All of it with the cargo feature `sasl` (on by default). Two mechanisms:
//! DIGEST-MD5 (RFC 2831, what ZooKeeper's `DigestLoginModule` serves), and GSSAPI (RFC 4752, Kerberos v5, what its
//! `Krb5LoginModule` serves) with the cargo feature `kerberos`, through the
//! system's GSSAPI library.

use std::time::Instant;

use bytes::BytesMut;
use jute::primitives::{write_buffer, Reader};
use jute::{decode_server_message, encode_frame, ErrorCode, OpCode, RequestHeader, ServerMessage};

use super::md5::hex;
use super::{DropReason, RequestError, Session, SessionState};
use jute::Encode;

mod digest_md5;
use digest_md5::{DigestMd5, SaslStep};
#[cfg(feature = "kerberos")]
mod gssapi;

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
    /// GSSAPI with Kerberos v5 (cargo feature `kerberos`, which links the
    /// system's GSSAPI library: MIT's `libgssapi_krb5`). The server's
    /// principal is `<service>/<server_name>@REALM` ([`SaslConfig::service`],
    /// [`SaslConfig::server_name`]; the realm from the `krb5.conf`
    /// mapping of that host). The client's credentials are the Kerberos
    /// defaults: the credential cache `KRB5CCNAME` (e.g. filled by `kinit`),
    /// else the system's default one, which MIT's library can fill from a
    /// client keytab named by `KRB5_CLIENT_KTNAME`. No security layer is
    /// negotiated (use TLS for privacy on the wire).
    #[cfg(feature = "kerberos")]
    Gssapi {
        /// The client principal (`alice@EXAMPLE.COM`) whose credentials to
        /// use; `None`: the default principal of the credential cache.
        principal: Option<String>,
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
            // A principal's name is no secret; its keys stay in GSSAPI.
            #[cfg(feature = "kerberos")]
            SaslMechanism::Gssapi { principal } => f
                .debug_struct("Gssapi")
                .field("principal", principal)
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
    /// always uses `zk-sasl-md5`. For GSSAPI, the host part of the server's
    /// principal `<service>/<host>@REALM`, the same for every server of the
    /// connect string.
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

    /// GSSAPI (Kerberos v5) with the default credentials, to a server whose
    /// principal is `zookeeper/<host>@REALM` (cargo feature `kerberos`).
    /// Set [`SaslMechanism::Gssapi`]'s `principal` to pick a client
    /// principal other than the credential cache's default.
    ///
    /// ```
    /// use zklock_proto::session::{SaslConfig, SaslMechanism};
    ///
    /// // After `kinit alice@EXAMPLE.COM` (or with KRB5_CLIENT_KTNAME set).
    /// let config = SaslConfig::gssapi("zk.example.com");
    /// assert!(matches!(config.mechanism, SaslMechanism::Gssapi { principal: None }));
    /// ```
    #[cfg(feature = "kerberos")]
    pub fn gssapi(host: &str) -> SaslConfig {
        SaslConfig {
            mechanism: SaslMechanism::Gssapi { principal: None },
            service: "zookeeper".to_owned(),
            server_name: host.to_owned(),
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
    /// Kerberos (GSSAPI) failed on our side: no credentials, a KDC that
    /// cannot be reached or does not know the server's principal, a server
    /// token that does not verify. The text is the GSSAPI library's.
    #[cfg(feature = "kerberos")]
    #[error("Kerberos (GSSAPI): {0}")]
    Kerberos(String),
}

/// The mechanism's side of one exchange.
#[derive(Debug)]
enum Exchange {
    DigestMd5(DigestMd5),
    #[cfg(feature = "kerberos")]
    Gssapi(gssapi::Gssapi),
}

impl Exchange {
    /// A new exchange for `config`, and the token that opens it.
    fn start(config: SaslConfig) -> Result<(Exchange, Vec<u8>), SaslError> {
        match config.mechanism {
            SaslMechanism::DigestMd5 { .. } => {
                let cnonce = hex(&crate::random_seed().to_be_bytes());
                let exchange = DigestMd5::new(config, cnonce);
                let token = exchange.initial_token();
                Ok((Exchange::DigestMd5(exchange), token))
            }
            #[cfg(feature = "kerberos")]
            SaslMechanism::Gssapi { .. } => {
                let (exchange, token) = gssapi::Gssapi::start(&config)?;
                Ok((Exchange::Gssapi(exchange), token))
            }
        }
    }

    fn on_token(&mut self, token: &[u8]) -> Result<SaslStep, SaslError> {
        match self {
            Exchange::DigestMd5(d) => d.on_token(token),
            #[cfg(feature = "kerberos")]
            Exchange::Gssapi(g) => g.on_token(token),
        }
    }
}

/// The SASL exchange of the current connection.
#[derive(Debug)]
pub(super) struct SaslRound {
    exchange: Exchange,
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
        let (exchange, token) = match Exchange::start(config) {
            Ok(started) => started,
            Err(e) => {
                // The login cannot even start (no Kerberos credentials, a
                // server principal the KDC refuses or a KDC out of reach):
                // terminal like a refusal, as in ZooKeeper's Java client,
                // rather than a reconnect loop that asks the KDC each time.
                self.sasl_failed(e);
                return true;
            }
        };
        let xid = self.take_xid();
        encode_sasl(&mut self.out, xid, &token);
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

    /// The connection (or the session) ended: its exchange with it.
    pub(super) fn end_sasl(&mut self) {
        self.sasl = None;
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
        self.answered(now, sent);
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
            Err(e) => self.sasl_failed(e),
        }
        Some(Ok(()))
    }

    /// The login failed: the session ends in `AuthFailed`, terminally.
    fn sasl_failed(&mut self, e: SaslError) {
        log::error!("SASL authentication failed: {e}");
        self.sasl = None;
        self.auth_error = Some(e);
        self.events.push_back(super::SessionEvent::DropConnection(
            DropReason::SessionEnded,
        ));
        self.finish(SessionState::AuthFailed, RequestError::AuthFailed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::digest_md5::{lookup, parse_directives};
    use crate::session::{SessionConfig, SessionEvent};
    use bytes::BytesMut;
    use jute::{decode_request_header, split_frame, ConnectResponse, ReplyHeader, Request};
    use std::time::{Duration, Instant};

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
        handshake_at(s, now);
    }

    /// The server's answer to the handshake, read at `now`.
    fn handshake_at(s: &mut S, now: Instant) {
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

    /// A session that logs in with DIGEST-MD5 against a healthy server
    /// `rtt` away (the handshake and the login's two round trips
    /// included), stepped 1 ms at a time for `span` after the login; the
    /// states it announced after Connected.
    fn run_logged_in_at_round_trip(rtt: Duration, span: Duration) -> Vec<SessionState> {
        let (mut s, mut now) = session();
        s.handle_connected(now);
        s.consume_output(s.output().len());
        now += rtt;
        handshake_at(&mut s, now);
        let (xid, op, _) = sent(&mut s).remove(0);
        assert_eq!(op, OpCode::Sasl);
        now += rtt;
        let challenge = b"realm=\"zk-sasl-md5\",nonce=\"srv\",charset=utf-8,algorithm=md5-sess";
        sasl_reply(&mut s, now, xid, ErrorCode::Ok, Some(challenge));
        let (xid, _, body) = sent(&mut s).remove(0);
        let response = token_of(&body);
        let fields = parse_directives(&response).unwrap();
        let cnonce = lookup(&fields, "cnonce").unwrap().to_owned();
        let (_, rspauth) = DigestMd5::new(SaslConfig::digest_md5("alice", "pw"), cnonce)
            .respond(challenge)
            .unwrap();
        now += rtt;
        let last = format!("rspauth={rspauth}");
        sasl_reply(&mut s, now, xid, ErrorCode::Ok, Some(last.as_bytes()));
        let states = |ev: Vec<SessionEvent<u32, u32>>| -> Vec<SessionState> {
            ev.into_iter()
                .filter_map(|e| match e {
                    SessionEvent::State(st) => Some(st),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(states(events(&mut s)), vec![SessionState::Connected]);
        let start = now;
        // (when the answer lands, xid, op, body), oldest first.
        let mut in_flight = std::collections::VecDeque::new();
        let mut seen = Vec::new();
        while now < start + span && seen.is_empty() {
            now += Duration::from_millis(1);
            for _ in 0..2 {
                for (xid, op, body) in sent(&mut s) {
                    in_flight.push_back((now + rtt, xid, op, body));
                }
                while in_flight.front().is_some_and(|(at, ..)| *at <= now) {
                    let (_, xid, op, body) = in_flight.pop_front().unwrap();
                    feed(&mut s, now, |b| {
                        ReplyHeader {
                            xid,
                            zxid: 9,
                            err: ErrorCode::Ok,
                        }
                        .encode(b);
                        if op == OpCode::Sync {
                            // A sync is answered with its path.
                            b.extend_from_slice(&body);
                        }
                    });
                }
                s.handle_timeout(now);
            }
            seen.extend(states(events(&mut s)));
        }
        seen
    }

    /// A DIGEST-MD5 login adds two round trips before the session's first
    /// touch (a login touches nothing at the server, `processSasl`), so the
    /// first proof of the leader comes later than without one: the session
    /// stays Connected at a steady round trip of T/12 less 1 ms, and is
    /// Suspended at 10 ms more (the bound without a login is T/8).
    /// Kills: a login's requests taken for touches of the session (a proof
    /// would then reach past what the server holds).
    #[test]
    fn a_digest_login_leaves_no_false_alarm_within_a_twelfth_of_the_timeout_and_no_more() {
        let t = Duration::from_secs(10);
        let inside = run_logged_in_at_round_trip(t / 12 - Duration::from_millis(1), t * 6);
        assert_eq!(inside, vec![], "round trip T/12 less 1 ms");
        let past = run_logged_in_at_round_trip(t / 12 + Duration::from_millis(10), t * 2);
        assert_eq!(
            past,
            vec![SessionState::Suspended],
            "round trip T/12 + 10 ms"
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

    /// A GSSAPI login that cannot start (here: no server principal; on a
    /// machine, no credentials) ends the session at once, sending nothing.
    #[cfg(feature = "kerberos")]
    #[test]
    fn a_login_that_cannot_start_is_terminal_and_sends_nothing() {
        let now = Instant::now();
        let mut s = S::new(SessionConfig::default(), now);
        s.set_sasl(Some(SaslConfig::gssapi("")));
        s.submit(now, Request::Sync("/".into()), 1, None);
        handshake(&mut s, now);
        assert_eq!(s.state(), SessionState::AuthFailed);
        assert!(matches!(s.auth_error(), Some(SaslError::Kerberos(_))));
        assert!(!s.wants_connection(), "no reconnect loop");
        assert!(sent(&mut s).is_empty());
        let ev = events(&mut s);
        assert!(ev.iter().any(|e| matches!(
            e,
            SessionEvent::Reply {
                handle: 1,
                result: Err(RequestError::AuthFailed)
            }
        )));
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
