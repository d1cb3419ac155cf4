//! TLS settings and errors (cargo feature `tls`): rustls with the `ring`
//! provider, driven by the client's own I/O thread.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{CertificateError, ClientConfig, RootCertStore};

/// How to reach ZooKeeper's secure client port: the CA that signed the
/// servers' certificates and, for mutual TLS, our certificate and key. The
/// host of each connect-string entry is the name verified against the
/// server's certificate (a DNS name or an IP address).
///
/// ```no_run
/// # #[cfg(feature = "tls")] {
/// use std::time::Duration;
/// use zklock::{Client, TlsOptions};
///
/// let client = Client::builder("zk1.example.com:2281")
///     .session_timeout(Duration::from_secs(10))
///     .tls(TlsOptions::new("ca.pem").client_cert("client.pem", "client.key"))
///     .connect()?;
/// # let _ = client; }
/// # Ok::<(), zklock::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsOptions {
    ca_file: PathBuf,
    client_cert: Option<(PathBuf, PathBuf)>,
    server_name: Option<String>,
}

impl TlsOptions {
    /// Trusts the CA certificates (PEM) in `ca_file`, and nothing else.
    pub fn new(ca_file: impl AsRef<Path>) -> TlsOptions {
        TlsOptions {
            ca_file: ca_file.as_ref().to_owned(),
            client_cert: None,
            server_name: None,
        }
    }

    /// Presents this certificate chain (PEM) and private key (PEM: PKCS#8,
    /// PKCS#1 or SEC1) when the server asks for one (mutual TLS).
    pub fn client_cert(mut self, cert_file: impl AsRef<Path>, key_file: impl AsRef<Path>) -> Self {
        self.client_cert = Some((cert_file.as_ref().to_owned(), key_file.as_ref().to_owned()));
        self
    }

    /// Verifies every server's certificate against `name` instead of the
    /// host written in the connect string (for servers reached by address
    /// whose certificates name a service).
    pub fn server_name(mut self, name: &str) -> Self {
        self.server_name = Some(name.to_owned());
        self
    }

    /// Reads the files and builds the rustls configuration.
    pub(crate) fn load(&self) -> Result<TlsSetup, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        let pem_error = |path: &Path, e: rustls::pki_types::pem::Error| TlsError::File {
            path: path.to_owned(),
            reason: e.to_string(),
        };
        for cert in
            CertificateDer::pem_file_iter(&self.ca_file).map_err(|e| pem_error(&self.ca_file, e))?
        {
            let cert = cert.map_err(|e| pem_error(&self.ca_file, e))?;
            roots.add(cert).map_err(|source| TlsError::Config {
                what: format!("CA certificate in {}", self.ca_file.display()),
                source,
            })?;
        }
        if roots.is_empty() {
            return Err(TlsError::File {
                path: self.ca_file.clone(),
                reason: "no PEM certificate in the file".into(),
            });
        }
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|source| TlsError::Config {
                what: "protocol versions".into(),
                source,
            })?
            .with_root_certificates(roots);
        let config = match &self.client_cert {
            None => builder.with_no_client_auth(),
            Some((cert_file, key_file)) => {
                let chain = CertificateDer::pem_file_iter(cert_file)
                    .map_err(|e| pem_error(cert_file, e))?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| pem_error(cert_file, e))?;
                if chain.is_empty() {
                    return Err(TlsError::File {
                        path: cert_file.clone(),
                        reason: "no PEM certificate in the file".into(),
                    });
                }
                let key =
                    PrivateKeyDer::from_pem_file(key_file).map_err(|e| pem_error(key_file, e))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|source| TlsError::Config {
                        what: format!("client certificate and key {}", key_file.display()),
                        source,
                    })?
            }
        };
        Ok(TlsSetup {
            config: Arc::new(config),
            server_name: self.server_name.clone(),
        })
    }
}

/// A loaded configuration, shared by every connection of a client.
#[derive(Debug, Clone)]
pub(crate) struct TlsSetup {
    pub(crate) config: Arc<ClientConfig>,
    pub(crate) server_name: Option<String>,
}

impl TlsSetup {
    /// A client connection to `host` (the connect string's host), and the
    /// name its certificate is verified against.
    pub(crate) fn connect(
        &self,
        host: &str,
    ) -> Result<(rustls::ClientConnection, String), TlsError> {
        let name = self.server_name.as_deref().unwrap_or(host);
        let server_name =
            ServerName::try_from(name.to_owned()).map_err(|_| TlsError::InvalidServerName {
                name: name.to_owned(),
            })?;
        let conn =
            rustls::ClientConnection::new(self.config.clone(), server_name).map_err(|source| {
                TlsError::Config {
                    what: "new connection".into(),
                    source,
                }
            })?;
        Ok((conn, name.to_owned()))
    }
}

/// Why TLS failed. Each variant names the likely culprit.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A certificate or key file could not be read or holds no usable PEM.
    #[error("{}: {reason}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// rustls refused the configuration (e.g. a key that does not match the
    /// certificate).
    #[error("TLS configuration ({what}): {source}")]
    Config {
        /// Which part of the configuration.
        what: String,
        /// rustls's reason.
        #[source]
        source: rustls::Error,
    },
    /// The host cannot be used as a TLS server name.
    #[error("{name:?} is not a valid TLS server name")]
    InvalidServerName {
        /// The host or configured server name.
        name: String,
    },
    /// The server's certificate is not signed by the configured CA: the
    /// wrong CA file, or the wrong server.
    #[error("the server's certificate is not signed by a trusted CA: {source}")]
    UnknownCa {
        /// rustls's reason.
        #[source]
        source: rustls::Error,
    },
    /// The server's certificate is valid but for another name or address
    /// than the host we connected to.
    #[error("the server's certificate does not name {name:?}: {source}")]
    NameMismatch {
        /// The name we verified.
        name: String,
        /// rustls's reason.
        #[source]
        source: rustls::Error,
    },
    /// The server's certificate is unacceptable for another reason
    /// (expired, not yet valid, revoked, bad encoding).
    #[error("the server's certificate was rejected: {source}")]
    BadCertificate {
        /// rustls's reason.
        #[source]
        source: rustls::Error,
    },
    /// The server aborted the handshake with an alert: most often it
    /// requires a client certificate we did not send or does not trust ours.
    #[error("the server refused the TLS handshake: {source}")]
    RefusedByServer {
        /// The alert, as rustls reports it.
        #[source]
        source: rustls::Error,
    },
    /// The server answered with something that is not TLS: probably a
    /// plaintext port.
    #[error("the server does not speak TLS (a plaintext port?): {source}")]
    NotTls {
        /// rustls's reason.
        #[source]
        source: rustls::Error,
    },
    /// The server closed the connection in the middle of the TLS handshake:
    /// a plaintext ZooKeeper port closes on a TLS hello like this.
    #[error("the server closed the connection during the TLS handshake (a plaintext port?)")]
    ClosedDuringHandshake,
    /// Any other TLS failure.
    #[error("TLS failed: {source}")]
    Other {
        /// rustls's reason.
        #[source]
        source: rustls::Error,
    },
}

impl Eq for TlsError {}

impl TlsError {
    /// Sorts a rustls error from the handshake with the server named `name`.
    pub(crate) fn from_rustls(source: rustls::Error, name: &str) -> TlsError {
        use rustls::Error as E;
        match &source {
            E::InvalidCertificate(
                CertificateError::UnknownIssuer | CertificateError::BadSignature,
            ) => TlsError::UnknownCa { source },
            E::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            ) => TlsError::NameMismatch {
                name: name.to_owned(),
                source,
            },
            E::InvalidCertificate(_) | E::NoCertificatesPresented => {
                TlsError::BadCertificate { source }
            }
            E::AlertReceived(_) => TlsError::RefusedByServer { source },
            E::InvalidMessage(_)
            | E::InappropriateMessage { .. }
            | E::InappropriateHandshakeMessage { .. } => TlsError::NotTls { source },
            _ => TlsError::Other { source },
        }
    }

    /// A failure that retrying the same server will not cure. A connection
    /// closed mid-handshake is not one: a loaded or restarting server (or a
    /// proxy in between) closes connections too.
    pub(crate) fn is_definitive(&self) -> bool {
        !matches!(
            self,
            TlsError::Other { .. } | TlsError::ClosedDuringHandshake
        )
    }
}
