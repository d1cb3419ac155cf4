//! GSSAPI (RFC 4752) over Kerberos v5, the client side, as the JDK's
//! `GSSAPI` SASL mechanism speaks it to ZooKeeper's `SaslServer`: the
//! security context is established with the service principal
//! `<service>/<host>@REALM` (a host-based service name, `service@host`),
//! then the server's wrapped 4-byte offer of security layers is unwrapped
//! and answered, wrapped, with "no security layer". Tokens in, tokens out;
//! the cryptography and the talk with the KDC are the system's GSSAPI
//! library's (MIT's `libgssapi_krb5`, through the `libgssapi` crate).
//!
//! The client's credentials are the GSSAPI defaults: the credential cache
//! (`KRB5CCNAME`, else the system's default cache), which MIT's library
//! fills from a client keytab (`KRB5_CLIENT_KTNAME`) when it can. Getting
//! the service ticket may ask the KDC, from the thread that drives the
//! session, once per connection at most (the ticket is cached).

use libgssapi::context::{ClientCtx, CtxFlags, SecurityContext};
use libgssapi::credential::{Cred, CredUsage};
use libgssapi::name::Name;
use libgssapi::oid::{OidSet, GSS_MECH_KRB5, GSS_NT_HOSTBASED_SERVICE, GSS_NT_KRB5_PRINCIPAL};

use super::digest_md5::SaslStep;
use super::{SaslConfig, SaslError, SaslMechanism};

/// RFC 4752 section 3.3: the security layers, as bits of the first octet.
const NO_SECURITY_LAYER: u8 = 1;

/// One GSSAPI client exchange.
pub(crate) struct Gssapi {
    ctx: ClientCtx,
    step: GssStep,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GssStep {
    /// The context is not established yet: tokens go to GSSAPI.
    Context,
    /// Established: the next token is the server's wrapped offer.
    AwaitOffer,
    /// Our wrapped choice went out: the server's answer ends the exchange.
    AwaitOutcome,
    Done,
}

/// The context holds keys: only the step is shown.
impl std::fmt::Debug for Gssapi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gssapi")
            .field("step", &self.step)
            .finish_non_exhaustive()
    }
}

/// A GSSAPI failure as a SASL error: the library's own message (names and
/// codes, never key material).
fn kerberos(what: &str, e: libgssapi::error::Error) -> SaslError {
    SaslError::Kerberos(format!("{what}: {e}"))
}

impl Gssapi {
    /// Acquires the client's credentials, starts the context with the
    /// server's principal and returns the exchange with its initial token
    /// (the Kerberos AP-REQ). Fails if there are no credentials, the KDC
    /// cannot be reached or does not know the server's principal.
    pub(crate) fn start(config: &SaslConfig) -> Result<(Gssapi, Vec<u8>), SaslError> {
        let SaslMechanism::Gssapi { principal } = &config.mechanism else {
            return Err(SaslError::Kerberos("not a GSSAPI configuration".into()));
        };
        if config.service.is_empty() || config.server_name.is_empty() {
            return Err(SaslError::Kerberos(
                "the server principal needs a service and a host".into(),
            ));
        }
        let mut mechs = OidSet::new().map_err(|e| kerberos("GSSAPI", e))?;
        mechs
            .add(&GSS_MECH_KRB5)
            .map_err(|e| kerberos("GSSAPI", e))?;
        let client = match principal {
            Some(p) => Some(
                Name::new(p.as_bytes(), Some(&GSS_NT_KRB5_PRINCIPAL))
                    .map_err(|e| kerberos(&format!("client principal {p:?}"), e))?,
            ),
            None => None,
        };
        let cred = Cred::acquire(client.as_ref(), None, CredUsage::Initiate, Some(&mechs))
            .map_err(|e| match principal {
                Some(p) => kerberos(&format!("no credentials for {p:?}"), e),
                None => kerberos("no default Kerberos credentials", e),
            })?;
        let target_name = format!("{}@{}", config.service, config.server_name);
        let target = Name::new(target_name.as_bytes(), Some(&GSS_NT_HOSTBASED_SERVICE))
            .map_err(|e| kerberos(&format!("server principal {target_name:?}"), e))?;
        // As the JDK's client: integrity and confidentiality available for
        // the security-layer messages; mutual authentication, so that the
        // server proves it holds the service key before we go on.
        let flags =
            CtxFlags::GSS_C_MUTUAL_FLAG | CtxFlags::GSS_C_INTEG_FLAG | CtxFlags::GSS_C_CONF_FLAG;
        let mut ctx = ClientCtx::new(Some(cred), target, flags, Some(&GSS_MECH_KRB5));
        let first = ctx
            .step(None, None)
            .map_err(|e| kerberos(&format!("a ticket for {target_name:?}"), e))?;
        let Some(first) = first else {
            return Err(SaslError::Kerberos(
                "GSSAPI produced no initial token".into(),
            ));
        };
        let step = if ctx.is_complete() {
            GssStep::AwaitOffer
        } else {
            GssStep::Context
        };
        Ok((Gssapi { ctx, step }, first.to_vec()))
    }

    /// Handles the server's next token.
    pub(crate) fn on_token(&mut self, token: &[u8]) -> Result<SaslStep, SaslError> {
        match std::mem::replace(&mut self.step, GssStep::Done) {
            GssStep::Context => {
                if token.is_empty() {
                    return Err(SaslError::Incomplete);
                }
                let out = self
                    .ctx
                    .step(Some(token), None)
                    .map_err(|e| kerberos("the server's context token", e))?;
                self.step = if self.ctx.is_complete() {
                    GssStep::AwaitOffer
                } else {
                    GssStep::Context
                };
                // Established with nothing more to say: an empty response
                // asks the server for its offer (as the JDK's client does).
                Ok(SaslStep::Send(out.map(|b| b.to_vec()).unwrap_or_default()))
            }
            GssStep::AwaitOffer => {
                if token.is_empty() {
                    return Err(SaslError::Incomplete);
                }
                let offer = self
                    .ctx
                    .unwrap(token)
                    .map_err(|e| kerberos("unwrapping the server's security-layer offer", e))?;
                let reply = security_layer_reply(&offer)?;
                let wrapped = self
                    .ctx
                    .wrap(false, &reply)
                    .map_err(|e| kerberos("wrapping the security-layer choice", e))?;
                self.step = GssStep::AwaitOutcome;
                Ok(SaslStep::Send(wrapped.to_vec()))
            }
            // ZooKeeper answers the last response with no token; RFC 4752
            // has nothing more for the server to say.
            GssStep::AwaitOutcome => Ok(SaslStep::Done),
            GssStep::Done => Err(SaslError::BadChallenge(
                "a token after the exchange was complete".into(),
            )),
        }
    }
}

/// RFC 4752 section 3.1: the server offers, in 4 octets, a bit mask of the
/// security layers it supports and the largest message it can receive. We
/// take none (the connection carries ZooKeeper's packets as they are; use
/// TLS for privacy) and say so with a maximum size of 0, and no
/// authorization identity (the server then uses the authenticated one).
pub(crate) fn security_layer_reply(offer: &[u8]) -> Result<[u8; 4], SaslError> {
    let [layers, _, _, _] = offer else {
        return Err(SaslError::BadChallenge(format!(
            "a security-layer offer of {} bytes, not 4",
            offer.len()
        )));
    };
    if layers & NO_SECURITY_LAYER == 0 {
        return Err(SaslError::BadChallenge(format!(
            "the server requires a security layer (offer {layers:#04x}); \
             only \"no security layer\" is supported"
        )));
    }
    Ok([NO_SECURITY_LAYER, 0, 0, 0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_security_layer_is_chosen_with_a_max_size_of_zero() {
        // What ZooKeeper's server (the JDK's GssKrb5Server) offers by
        // default: no layer only, 65536 bytes.
        assert_eq!(security_layer_reply(&[1, 1, 0, 0]), Ok([1, 0, 0, 0]));
        // All three offered: still none.
        assert_eq!(
            security_layer_reply(&[7, 0xff, 0xff, 0xff]),
            Ok([1, 0, 0, 0])
        );
    }

    #[test]
    fn an_offer_without_the_no_layer_option_or_of_another_size_is_refused() {
        for bad in [&[2u8, 1, 0, 0][..], &[4, 0, 0, 0], &[6, 0, 16, 0]] {
            assert!(
                matches!(security_layer_reply(bad), Err(SaslError::BadChallenge(_))),
                "{bad:?}"
            );
        }
        for bad in [&[][..], &[1], &[1, 0, 0], &[1, 0, 0, 0, 0]] {
            assert!(
                matches!(security_layer_reply(bad), Err(SaslError::BadChallenge(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_configuration_without_a_server_principal_is_an_error_not_a_panic() {
        let mut config = SaslConfig::gssapi("");
        assert!(matches!(
            Gssapi::start(&config),
            Err(SaslError::Kerberos(_))
        ));
        config.server_name = "localhost".into();
        config.service = String::new();
        assert!(matches!(
            Gssapi::start(&config),
            Err(SaslError::Kerberos(_))
        ));
    }

    #[test]
    fn a_digest_configuration_is_not_started_as_gssapi() {
        let config = SaslConfig::digest_md5("alice", "pw");
        assert!(matches!(
            Gssapi::start(&config),
            Err(SaslError::Kerberos(_))
        ));
    }
}
