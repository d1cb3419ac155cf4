//! TLS to ZooKeeper's secure client port (Netty, `ssl.clientAuth=need`),
//! with certificates made at test time: mutual TLS, host-name and IP
//! verification, every way a handshake can be refused and the error it
//! gives, reconnects, and a 3-node TLS ensemble losing its leader.
#![cfg(feature = "tls")]

use std::time::{Duration, Instant};

use testkit::certs::{self, secure, tls_server as server};
use testkit::proxy::Proxy;
use testkit::zk::ZkEnsemble;
use zklock::{
    Client, ConnectError, CreateMode, Error, EventType, Op, SessionState, TlsError, TlsOptions,
};

const T: Duration = Duration::from_secs(6);
/// A refusal must come long before the session timeout...
const PROMPT: Duration = Duration::from_secs(4);
/// ...of a client that would wait this long.
const PATIENT: Duration = Duration::from_secs(12);

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

/// Connects, expecting a TLS refusal long before the session timeout;
/// returns its cause.
fn refused(connect_string: &str, tls: TlsOptions) -> TlsError {
    let start = Instant::now();
    let r = Client::builder(connect_string)
        .session_timeout(PATIENT)
        .tls(tls)
        .connect();
    assert!(start.elapsed() < PROMPT, "took {:?}", start.elapsed());
    match r {
        Err(Error::Connect(ConnectError::Tls { source, .. })) => source,
        other => panic!("expected a TLS refusal, got {other:?}"),
    }
}

#[test]
fn exclusive_ephemeral_sequential_nodes_and_fencing_over_tls() {
    // One client verified by IP address, one by DNS name.
    let a = connect(&secure("127.0.0.1"), mtls()).expect("TLS by IP address");
    let b = connect(&secure("localhost"), mtls()).expect("TLS by host name");
    let _ = a.create("/tls-lock", b"", CreateMode::Persistent);
    let opts = zklock::CreateOptions::new(CreateMode::EphemeralSequential);
    let (first, first_stat) = a.create_with("/tls-lock/n-", b"a", &opts).unwrap();
    let (second, second_stat) = b.create_with("/tls-lock/n-", b"b", &opts).unwrap();
    assert!(second_stat.czxid > first_stat.czxid, "fencing tokens rise");
    let mut holders = b.get_children("/tls-lock").unwrap();
    holders.sort();
    assert_eq!(format!("/tls-lock/{}", holders[0]), first, "a holds");

    // A write fenced by the holder's node succeeds; by a stale one it fails.
    let _ = a.create("/tls-lock-data", b"", CreateMode::Persistent);
    a.multi(&[
        Op::check(&first, None),
        Op::set_data("/tls-lock-data", b"a", None),
    ])
    .expect("fenced write by the holder");
    a.close().unwrap();
    let w = b.exists("/tls-lock-data").unwrap();
    assert!(w.is_some());
    let stale = b.multi(&[
        Op::check(&first, None),
        Op::set_data("/tls-lock-data", b"late", None),
    ]);
    assert!(
        matches!(stale, Err(Error::MultiFailed { index: 0, .. })),
        "{stale:?}"
    );
    let mut left = b.get_children("/tls-lock").unwrap();
    left.sort();
    assert_eq!(format!("/tls-lock/{}", left[0]), second, "b holds next");
    b.delete(&second, None).unwrap();
}

/// Kills: `Links::link` `==` → `!=` (a server was verified under the name
/// of another host of the connect string).
#[test]
fn each_server_is_verified_under_the_host_its_connect_string_names() {
    // The certificate names localhost and 127.0.0.1, not 127.0.0.2, whose
    // port is closed.
    let closed = format!("127.0.0.2:{}", testkit::free_ports(1)[0]);
    let client = connect(&format!("{closed},{}", secure("localhost")), mtls())
        .expect("the TLS server verified as localhost");
    assert!(client.exists("/").unwrap().is_some());
    client.close().unwrap();
}

#[test]
fn large_frames_and_many_threads_cross_tls_records() {
    let c = connect(&secure("127.0.0.1"), mtls()).unwrap();
    // Near the server's 1 MiB frame limit: many TLS records each way.
    let big: Vec<u8> = (0..900_000u32).map(|i| (i % 251) as u8).collect();
    let node = c.create("/tls-big", &big, CreateMode::Ephemeral).unwrap();
    assert_eq!(c.get_data(&node).unwrap().0, big);
    std::thread::scope(|s| {
        for t in 0..8 {
            let c = c.clone();
            s.spawn(move || {
                for i in 0..50 {
                    let path = format!("/tls-many-{t}-{i}");
                    c.create(&path, &[t as u8; 100], CreateMode::Ephemeral)
                        .unwrap();
                    assert_eq!(c.get_data(&path).unwrap().0, vec![t as u8; 100]);
                    c.delete(&path, None).unwrap();
                }
            });
        }
    });
    c.delete(&node, None).unwrap();
}

#[test]
fn mutual_tls_is_refused_without_a_client_certificate() {
    let cause = refused(
        &secure("127.0.0.1"),
        TlsOptions::new(&certs::shared().ca_pem),
    );
    assert!(
        matches!(cause, TlsError::RefusedByServer { .. }),
        "{cause:?}"
    );
}

#[test]
fn a_server_signed_by_another_ca_is_refused() {
    let c = certs::shared();
    let tls = TlsOptions::new(&c.other_ca_pem).client_cert(&c.client_pem, &c.client_key);
    let cause = refused(&secure("127.0.0.1"), tls);
    assert!(matches!(cause, TlsError::UnknownCa { .. }), "{cause:?}");
}

#[test]
fn a_certificate_for_another_name_is_refused() {
    let cause = refused(&secure("localhost"), mtls().server_name("zk.example.com"));
    assert!(
        matches!(&cause, TlsError::NameMismatch { name, .. } if name == "zk.example.com"),
        "{cause:?}"
    );
}

#[test]
fn a_tls_client_on_the_plaintext_port_is_told_so() {
    // A close mid-handshake may be transient: retried until the wait ends.
    let t = Duration::from_secs(2);
    // The server first: its JVM's start is not the client's wait.
    let connect_string = server().connect_string();
    let start = Instant::now();
    let r = Client::builder(&connect_string)
        .session_timeout(t)
        .tls(mtls())
        .connect();
    assert!(start.elapsed() < t + PROMPT, "took {:?}", start.elapsed());
    // Said at once when the server's bytes are not TLS; at the deadline,
    // naming what was tried, when it only closed the connection.
    let told = match &r {
        Err(Error::Connect(e)) => Some(e),
        Err(Error::NoSession(ns)) => ns.last.as_ref(),
        _ => None,
    };
    assert!(
        matches!(
            told,
            Some(ConnectError::Tls {
                source: TlsError::ClosedDuringHandshake | TlsError::NotTls { .. },
                ..
            })
        ),
        "{r:?}"
    );
}

#[test]
fn a_plaintext_client_on_the_tls_port_is_told_so() {
    let t = Duration::from_secs(2);
    let connect_string = secure("127.0.0.1");
    let start = Instant::now();
    let r = Client::builder(&connect_string)
        .session_timeout(t)
        .connect();
    assert!(start.elapsed() < t + PROMPT, "took {:?}", start.elapsed());
    // Retried until the wait ends (a server not serving yet closes too),
    // then named with the time spent and the hint.
    let Err(Error::NoSession(ns)) = &r else {
        panic!("{r:?}")
    };
    assert!(
        matches!(ns.last, Some(ConnectError::ClosedBeforeHandshake { .. })),
        "{r:?}"
    );
    assert!(ns.waited >= t, "{ns:?}");
    let text = r.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(text.contains("a TLS port reached without TLS"), "{text}");
}

#[test]
fn missing_files_fail_before_connecting() {
    let r = connect(&secure("127.0.0.1"), TlsOptions::new("/nonexistent/ca.pem"));
    assert!(
        matches!(
            r,
            Err(Error::Connect(ConnectError::Tls {
                source: TlsError::File { .. },
                ..
            }))
        ),
        "{r:?}"
    );
}

/// Waits until the client is connected again with the same session.
fn wait_reconnected(c: &Client, session: i64, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        if c.state() == SessionState::Connected
            && c.session_id() == session
            && c.exists("/").is_ok()
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not reconnected: {:?}",
            c.state()
        );
        assert_eq!(c.session_id(), session, "a new session was opened");
        let _ = c.wait_connected(Duration::from_millis(200));
    }
}

#[test]
fn a_cut_tls_connection_resumes_the_session_and_rearms_watches() {
    let proxy = Proxy::start(server().secure_addr());
    let c = connect(&proxy.connect_string(), mtls()).unwrap();
    let other = connect(&secure("127.0.0.1"), mtls()).unwrap();
    let session = c.session_id();
    let node = c.create("/tls-cut", b"", CreateMode::Ephemeral).unwrap();
    let (_, _, watch) = c.get_data_and_watch(&node).unwrap();
    proxy.cut_all();
    wait_reconnected(&c, session, T);
    other.set_data(&node, b"changed", None).unwrap();
    let event = watch.recv_timeout(T).expect("the watch was re-armed");
    assert_eq!(event.kind, EventType::NodeDataChanged);
    assert!(proxy.connections_accepted() >= 2);
    c.delete(&node, None).unwrap();
}

#[test]
fn a_tls_ensemble_survives_a_leader_kill_with_the_same_session() {
    let ensemble = ZkEnsemble::start_with_options(3, &certs::shared().server_options(true));
    let c = Client::builder(&ensemble.secure_connect_string())
        .session_timeout(Duration::from_secs(8))
        .tls(mtls())
        .connect()
        .expect("TLS to the ensemble");
    let session = c.session_id();
    let node = c.create("/ens-tls", b"", CreateMode::Ephemeral).unwrap();
    let leader = ensemble.leader().expect("a leader");
    ensemble.kill(leader);
    assert!(
        ensemble.try_wait_ready(Duration::from_secs(30)),
        "no new leader"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match c.set_data(&node, b"after", None) {
            Ok(_) => break,
            Err(e) if e.is_connection_loss() && Instant::now() < deadline => {
                let _ = c.wait_connected(Duration::from_millis(500));
            }
            Err(e) => panic!("after the leader kill: {e}"),
        }
    }
    assert_eq!(c.session_id(), session);
    assert_eq!(c.get_data(&node).unwrap().0, b"after");
}
