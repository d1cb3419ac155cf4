//! SASL GSSAPI (Kerberos v5, cargo feature `kerberos`) against a ZooKeeper
//! 3.8 whose JAAS `Server` section is a `Krb5LoginModule` with a keytab, and
//! a real MIT KDC that testkit starts: a principal's login and the `sasl:`
//! identity it gets, logins that cannot be had (no credentials for the
//! principal asked, a ticket for a key the server does not hold, a server
//! principal the KDC does not know), a new login after a reconnect, and a
//! lock over the authenticated session.
//!
//! The client's credentials are the Kerberos defaults of this process,
//! pointed once, before its first login, at the test realm: `KRB5CCNAME`
//! is a cache collection where `kinit` put alice's ticket from her keytab
//! (the default principal), and `KRB5_CLIENT_KTNAME` is bob's keytab, from
//! which MIT's library gets his ticket itself when bob is asked for.
#![cfg(feature = "kerberos")]

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use testkit::kdc::Kdc;
use testkit::proxy::Proxy;
use testkit::zk::{ZkOptions, ZkServer};
use zklock::recipes::{LockState, Mutex, MutexOptions};
use zklock::{
    perms, Acl, Client, CreateMode, CreateOptions, Error, ErrorCode, Id, OpCode, SaslConfig,
    SaslMechanism, SessionState,
};

const T: Duration = Duration::from_secs(10);
const REALM: &str = "ZKLOCK.TEST";

struct Realm {
    kdc: Kdc,
    server: ZkServer,
}

/// The KDC, the server and the process's Kerberos environment, once per
/// test binary (never stopped: the KDC and the JVM go with the process).
fn realm() -> &'static Realm {
    static REALM_ONCE: OnceLock<Realm> = OnceLock::new();
    REALM_ONCE.get_or_init(|| {
        let kdc = Kdc::start(REALM);
        let server_keytab = kdc.add_principal("zookeeper/localhost");
        // Known to the KDC, but the server holds no key for it.
        kdc.add_principal("zookeeper/elsewhere");
        let alice = kdc.add_principal("alice");
        // Bob has a keytab and no tickets: GSSAPI gets them when asked.
        let bob = kdc.add_principal("bob");
        let ccache = kdc.kinit("alice", &alice);
        // Before any GSSAPI call of this process: every test reaches the
        // library through this fixture, so nobody reads them while they
        // change.
        std::env::set_var("KRB5_CONFIG", kdc.krb5_conf());
        std::env::set_var("KRB5CCNAME", ccache);
        std::env::set_var("KRB5_CLIENT_KTNAME", &bob);
        let server = ZkServer::start_with_options(&ZkOptions::new().sasl_kerberos(
            &kdc.principal("zookeeper/localhost"),
            &server_keytab,
            &kdc.krb5_conf(),
        ));
        Realm { kdc, server }
    })
}

fn login(connect_string: &str, config: SaslConfig) -> Result<Client, Error> {
    Client::builder(connect_string)
        .session_timeout(T)
        .sasl(config)
        .connect()
}

fn alice() -> Client {
    let r = realm();
    login(&r.server.connect_string(), SaslConfig::gssapi("localhost")).unwrap_or_else(|e| {
        panic!(
            "alice's Kerberos login: {e}\n---- ZooKeeper ----\n{}\n---- KDC ----\n{}",
            r.server.log_tail(40),
            r.kdc.log_tail(20)
        )
    })
}

/// The identity ZooKeeper gives a Kerberos login: the client principal,
/// realm included (`kerberos.removeRealmFromPrincipal` is off by default).
fn alice_id() -> Id {
    Id {
        scheme: "sasl".into(),
        id: realm().kdc.principal("alice"),
    }
}

/// Whether `f` came back within the session timeout: a refused login must
/// be told at once, not after a session timeout of retries.
fn promptly<R>(f: impl FnOnce() -> R) -> R {
    let start = Instant::now();
    let r = f();
    assert!(start.elapsed() < T / 2, "took {:?}", start.elapsed());
    r
}

#[test]
fn a_principal_gets_its_sasl_identity() {
    let c = alice();
    assert_eq!(c.state(), SessionState::Connected);
    let only_alice = vec![Acl {
        perms: perms::ALL,
        id: alice_id(),
    }];
    let opts = CreateOptions::new(CreateMode::Ephemeral).acl(only_alice.clone());
    let (path, _) = c.create_with("/krb-mine", b"x", &opts).unwrap();
    assert_eq!(c.get_data(&path).unwrap().0, b"x");
    assert_eq!(c.get_acl(&path).unwrap().0, only_alice);

    // The server names the authenticated identity itself: a creator-only
    // node's ACL is the principal.
    let creator = CreateOptions::new(CreateMode::Ephemeral).acl(Acl::creator_all());
    let (own, _) = c.create_with("/krb-creator", b"y", &creator).unwrap();
    let acl = c.get_acl(&own).unwrap().0;
    assert_eq!(acl.len(), 1, "{acl:?}");
    assert_eq!(acl[0].id, alice_id());

    // Someone without the identity cannot read either.
    let anonymous = Client::connect(&realm().server.connect_string(), T).unwrap();
    for p in [&path, &own] {
        assert_eq!(
            anonymous.get_data(p).unwrap_err(),
            Error::Server {
                code: ErrorCode::NoAuth,
                op: Some(OpCode::GetData),
                path: Some(p.clone()),
            }
        );
    }
}

#[test]
fn no_credentials_for_the_principal_asked_is_a_typed_error_at_once() {
    let r = realm();
    let mut config = SaslConfig::gssapi("localhost");
    config.mechanism = SaslMechanism::Gssapi {
        principal: Some(r.kdc.principal("mallory")),
    };
    let e = promptly(|| login(&r.server.connect_string(), config)).unwrap_err();
    assert_eq!(e, Error::AuthFailed);
}

#[test]
fn a_ticket_for_a_key_the_server_does_not_hold_is_refused_at_once() {
    let r = realm();
    // The KDC issues the ticket; the server cannot decrypt it and refuses.
    let e = promptly(|| login(&r.server.connect_string(), SaslConfig::gssapi("elsewhere")))
        .unwrap_err();
    assert_eq!(e, Error::AuthFailed);
    // The refusal was the server's (no other test here gets that far).
    testkit::wait_until("the server's log of the refusal", T, || {
        r.server
            .log_tail(400)
            .contains("Closing client connection due to SASL authentication failure")
    });
}

#[test]
fn a_server_principal_the_kdc_does_not_know_is_a_typed_error_and_terminal() {
    let r = realm();
    let proxy = Proxy::start(r.server.addr());
    let c = Client::builder(&proxy.connect_string())
        .session_timeout(T)
        .sasl(SaslConfig::gssapi("nowhere"))
        .wait_connected(false)
        .connect()
        .unwrap();
    assert_eq!(
        promptly(|| c.wait_connected(T)).unwrap_err(),
        Error::AuthFailed
    );
    assert_eq!(c.state(), SessionState::AuthFailed);
    assert_eq!(c.exists("/").unwrap_err(), Error::AuthFailed);
    // Terminal: no new connection within more than the longest backoff.
    let accepted = proxy.connections_accepted();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(proxy.connections_accepted(), accepted, "it reconnected");
    assert_eq!(c.state(), SessionState::AuthFailed);
}

#[test]
fn every_connection_logs_in_again_with_a_new_context() {
    let r = realm();
    let proxy = Proxy::start(r.server.addr());
    let c = login(&proxy.connect_string(), SaslConfig::gssapi("localhost")).unwrap();
    let session = c.session_id();
    let opts = CreateOptions::new(CreateMode::Ephemeral).acl(vec![Acl {
        perms: perms::ALL,
        id: alice_id(),
    }]);
    let (path, _) = c.create_with("/krb-reauth", b"x", &opts).unwrap();
    proxy.cut_all();
    let (data, _) = testkit::read_after_reconnect(&c, &path, T);
    assert_eq!(data, b"x");
    assert_eq!(c.session_id(), session);
    assert!(proxy.connections_accepted() >= 2);
}

#[test]
fn a_mutex_round_trip_over_the_authenticated_session() {
    let c = alice();
    // The lock path only for the principal, its nodes the creator's: every
    // lock request below needs the Kerberos identity.
    let only_alice = vec![Acl {
        perms: perms::ALL,
        id: alice_id(),
    }];
    let options = MutexOptions::default()
        .parent_acl(only_alice.clone())
        .acl(Acl::creator_all());
    let lock = Mutex::with_options(&c, "/krb-locks/job", options).unwrap();
    let guard = lock.lock_timeout(T).unwrap();
    assert_eq!(guard.state(), LockState::Held);
    assert!(guard.fencing_token() > 0);
    assert_eq!(c.get_acl(guard.node_path()).unwrap().0, only_alice);
    assert_eq!(c.get_acl("/krb-locks/job").unwrap().0, only_alice);
    // Nobody else can even look at the queue.
    let anonymous = Client::connect(&realm().server.connect_string(), T).unwrap();
    assert_eq!(
        anonymous.get_children("/krb-locks/job").unwrap_err(),
        Error::Server {
            code: ErrorCode::NoAuth,
            op: Some(OpCode::GetChildren2),
            path: Some("/krb-locks/job".into()),
        }
    );
    guard.unlock().unwrap();
    assert!(c.get_children("/krb-locks/job").unwrap().is_empty());
    let again = lock.lock_timeout(T).unwrap();
    assert_eq!(again.state(), LockState::Held);
    again.unlock().unwrap();
}

#[test]
fn a_client_keytab_serves_a_principal_without_kinit() {
    let r = realm();
    let mut config = SaslConfig::gssapi("localhost");
    config.mechanism = SaslMechanism::Gssapi {
        principal: Some(r.kdc.principal("bob")),
    };
    let c = login(&r.server.connect_string(), config).unwrap();
    let creator = CreateOptions::new(CreateMode::Ephemeral).acl(Acl::creator_all());
    let (own, _) = c.create_with("/krb-bob", b"y", &creator).unwrap();
    let acl = c.get_acl(&own).unwrap().0;
    assert_eq!(acl[0].id.id, r.kdc.principal("bob"));
}
