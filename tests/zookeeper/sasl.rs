//! SASL DIGEST-MD5 against a ZooKeeper 3.8 with a JAAS DigestLoginModule:
//! logins accepted and refused, re-authentication after a reconnect, and
//! creator-only nodes another identity (SASL or digest) cannot delete.
//! Cargo feature `sasl` (on by default).
#![cfg(feature = "sasl")]

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use testkit::proxy::Proxy;
use testkit::zk::{ZkOptions, ZkServer};
use zklock::{
    perms, Acl, Client, CreateMode, CreateOptions, Error, ErrorCode, Id, OpCode, SaslConfig,
};

const T: Duration = Duration::from_secs(10);

fn server() -> &'static ZkServer {
    static SERVER: OnceLock<ZkServer> = OnceLock::new();
    SERVER.get_or_init(|| {
        ZkServer::start_with_options(
            &ZkOptions::new().sasl_digest(&[("alice", "alice-secret"), ("bob", "bob-secret")]),
        )
    })
}

fn login(connect_string: &str, user: &str, password: &str) -> Result<Client, Error> {
    Client::builder(connect_string)
        .session_timeout(T)
        .sasl(SaslConfig::digest_md5(user, password))
        .connect()
}

fn alice() -> Client {
    login(&server().connect_string(), "alice", "alice-secret").expect("alice logs in")
}

fn only(user: &str, perms: i32) -> Acl {
    Acl {
        perms,
        id: Id {
            scheme: "sasl".into(),
            id: user.into(),
        },
    }
}

#[test]
fn a_good_login_gets_its_identity() {
    let c = alice();
    let opts = CreateOptions::new(CreateMode::Ephemeral).acl(vec![only("alice", perms::ALL)]);
    let (path, _) = c.create_with("/sasl-mine", b"x", &opts).unwrap();
    assert_eq!(c.get_data(&path).unwrap().0, b"x");
    // Someone without the identity cannot read it.
    let anonymous = Client::connect(&server().connect_string(), T).unwrap();
    assert_eq!(
        anonymous.get_data(&path).unwrap_err(),
        Error::Server {
            code: ErrorCode::NoAuth,
            op: Some(OpCode::GetData),
            path: Some(path.clone()),
        }
    );
}

#[test]
fn a_wrong_password_is_refused_with_a_typed_error_at_once() {
    let start = Instant::now();
    let r = login(&server().connect_string(), "alice", "not-her-password");
    assert_eq!(r.unwrap_err(), Error::AuthFailed);
    // At once: not after a session timeout of retries.
    assert!(start.elapsed() < T / 2, "{:?}", start.elapsed());
    let r = login(&server().connect_string(), "mallory", "x");
    assert_eq!(r.unwrap_err(), Error::AuthFailed);
}

#[test]
fn a_refused_login_is_terminal_not_a_loop() {
    let proxy = Proxy::start(server().addr());
    let c = Client::builder(&proxy.connect_string())
        .session_timeout(T)
        .sasl(SaslConfig::digest_md5("alice", "wrong"))
        .wait_connected(false)
        .connect()
        .unwrap();
    assert_eq!(c.wait_connected(T).unwrap_err(), Error::AuthFailed);
    assert_eq!(c.state(), zklock::SessionState::AuthFailed);
    assert_eq!(c.exists("/").unwrap_err(), Error::AuthFailed);
    // A looping client would be back within its first backoff (50 ms to
    // 1 s): for longer than that, the state must not change, nor the
    // proxy see a new connection.
    let accepted = proxy.connections_accepted();
    let states = c.subscribe();
    assert_eq!(states.recv_timeout(T), Ok(zklock::SessionState::AuthFailed));
    if let Ok(state) = states.recv_timeout(Duration::from_millis(1500)) {
        panic!("a terminal session changed to {state:?}");
    }
    assert_eq!(proxy.connections_accepted(), accepted, "it reconnected");
}

#[test]
fn the_identity_is_restored_after_a_reconnect() {
    let proxy = Proxy::start(server().addr());
    let c = login(&proxy.connect_string(), "alice", "alice-secret").unwrap();
    let session = c.session_id();
    let opts = CreateOptions::new(CreateMode::Ephemeral).acl(vec![only("alice", perms::ALL)]);
    let (path, _) = c.create_with("/sasl-reauth", b"x", &opts).unwrap();
    proxy.cut_all();
    let (data, _) = testkit::read_after_reconnect(&c, &path, T);
    assert_eq!(data, b"x");
    assert_eq!(c.session_id(), session);
    assert!(proxy.connections_accepted() >= 2);
}

#[test]
fn another_identity_cannot_delete_a_creator_only_node() {
    let a = alice();
    let bob = login(&server().connect_string(), "bob", "bob-secret").unwrap();
    // The parent lets others read and create, not delete.
    let parent = CreateOptions::new(CreateMode::Persistent).acl(vec![
        only("alice", perms::ALL),
        world(perms::READ | perms::CREATE),
    ]);
    let _ = a.create_with("/sasl-locks", b"", &parent);
    let node = CreateOptions::new(CreateMode::EphemeralSequential).acl(Acl::creator_all());
    let (mine, _) = a.create_with("/sasl-locks/lock-", b"", &node).unwrap();
    assert_eq!(
        bob.delete(&mine, None).unwrap_err(),
        Error::Server {
            code: ErrorCode::NoAuth,
            op: Some(OpCode::Delete),
            path: Some(mine.clone()),
        }
    );
    assert!(a.exists(&mine).unwrap().is_some());

    // The control: under a parent that lets anyone delete, the node's own
    // creator-only ACL protects nothing.
    let _ = a.create("/sasl-open", b"", CreateMode::Persistent);
    let (exposed, _) = a.create_with("/sasl-open/lock-", b"", &node).unwrap();
    bob.delete(&exposed, None)
        .expect("delete is checked on the parent");
    a.delete(&mine, None).unwrap();
}

#[test]
fn digest_identities_cannot_delete_each_others_creator_only_nodes_either() {
    let connect = || Client::connect(&server().connect_string(), T).unwrap();
    let (carol, dave) = (connect(), connect());
    carol.add_auth("digest", b"carol:carol-pw").unwrap();
    dave.add_auth("digest", b"dave:dave-pw").unwrap();
    let parent = CreateOptions::new(CreateMode::Persistent)
        .acl([Acl::creator_all(), vec![world(perms::READ | perms::CREATE)]].concat());
    let _ = carol.create_with("/digest-locks", b"", &parent);
    let node = CreateOptions::new(CreateMode::EphemeralSequential).acl(Acl::creator_all());
    let (mine, _) = carol
        .create_with("/digest-locks/lock-", b"", &node)
        .unwrap();
    assert_eq!(
        dave.delete(&mine, None).unwrap_err(),
        Error::Server {
            code: ErrorCode::NoAuth,
            op: Some(OpCode::Delete),
            path: Some(mine.clone()),
        }
    );
    carol.delete(&mine, None).unwrap();
}

fn world(perms: i32) -> Acl {
    Acl {
        perms,
        id: Id {
            scheme: "world".into(),
            id: "anyone".into(),
        },
    }
}

/// After an expiry the client logs the new session in with the same SASL
/// login: a node only that identity may read stays readable.
#[test]
fn the_login_is_carried_to_the_session_after_an_expiry() {
    let link = testkit::ClientLink::start(&server().connect_string());
    let c = login(&link.connect_string(), "alice", "alice-secret").expect("alice logs in");
    let opts = CreateOptions::new(CreateMode::Persistent).acl(vec![only("alice", perms::ALL)]);
    let (path, _) = c.create_with("/sasl-renewed", b"hers", &opts).unwrap();
    let first = c.session_id();
    link.expire_session();
    testkit::wait_until("a new session", Duration::from_secs(30), || {
        c.state() == zklock::SessionState::Connected && c.session_id() != first
    });
    assert_eq!(c.get_data(&path).unwrap().0, b"hers");
    c.delete(&path, None).unwrap();
}
