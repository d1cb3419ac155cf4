//! Curator over TLS against zklock over TLS, on one TLS server (Netty,
//! `ssl.clientAuth=need`) with certificates made at test time.

use std::time::Duration;

use testkit::certs::{self, secure};
use zklock::{Client, Error, TlsOptions};

const T: Duration = Duration::from_secs(6);

/// CA and client certificate: what the server requires.
fn mtls() -> TlsOptions {
    let c = certs::shared();
    TlsOptions::new(&c.ca_pem).client_cert(&c.client_pem, &c.client_key)
}

fn connect(connect_string: &str, tls: TlsOptions) -> Result<Client, Error> {
    Client::builder(connect_string)
        .session_timeout(T)
        .tls(tls)
        .connect()
}

#[test]
fn curator_over_tls_and_zklock_exclude_each_other() {
    use testkit::peers::{Peer, PeerKind};
    use zklock::recipes::{LockError, Mutex};

    let c = certs::shared();
    let path = "/tls-interop";
    let mut curator = Peer::start_with_jvm_args(
        PeerKind::Curator,
        &c.java_client_flags(),
        certs::JAVA_CLIENT_NETTY_JARS,
        &secure("127.0.0.1"),
        path,
        "mutex",
        "curator-tls",
    );
    let client = connect(&secure("localhost"), mtls()).unwrap();
    let ours = Mutex::new(&client, path).unwrap();

    // Curator holds: zklock waits.
    curator.acquire();
    curator
        .wait_acquired(Duration::from_secs(20))
        .expect("Curator acquires a free lock over TLS");
    assert_eq!(
        ours.lock_timeout(Duration::from_millis(500)).unwrap_err(),
        LockError::Timeout
    );
    // Curator releases: zklock takes it, and Curator waits.
    curator.release();
    let guard = ours
        .lock_timeout(Duration::from_secs(10))
        .expect("zklock after Curator released");
    assert_eq!(
        curator.try_acquire(500),
        None,
        "Curator acquired while zklock held"
    );
    guard.unlock().unwrap();
    curator.quit();
}
