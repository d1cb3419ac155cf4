//! DIGEST-MD5 (RFC 2831), the client side: the server's challenge parsed,
//! the response and the `rspauth` the server must send computed from the
//! password. Tokens in, tokens out.

use super::{SaslConfig, SaslError, SaslMechanism};
use crate::session::md5::{hex, md5};

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
    pub(super) fn respond(&self, challenge: &[u8]) -> Result<(String, String), SaslError> {
        // Irrefutable unless the `kerberos` feature adds GSSAPI.
        #[allow(irrefutable_let_patterns)]
        let SaslMechanism::DigestMd5 { username, password } = &self.config.mechanism
        else {
            return Err(SaslError::BadChallenge("not a DIGEST-MD5 login".into()));
        };
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

pub(super) fn lookup<'a>(fields: &'a [(String, String)], key: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v.as_str())
}

/// Parses `key=value,key="quoted, value",...` (RFC 2831 section 7.1).
pub(super) fn parse_directives(token: &[u8]) -> Result<Vec<(String, String)>, SaslError> {
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
}
