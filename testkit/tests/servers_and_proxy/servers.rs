//! Standalone servers: four-letter words, a restart on the same port that keeps
//! the data, and the shared server started once.

use super::*;

#[test]
fn standalone_answers_four_letter_words_and_restarts_on_same_port() {
    let started = Instant::now();
    let server = ZkServer::start_with(1000);
    eprintln!("standalone start took {:?}", started.elapsed());

    assert!(server.is_running());
    assert_eq!(server.four_letter("ruok"), "imok");
    let srvr = server.four_letter("srvr");
    assert!(srvr.contains("Mode: standalone"), "srvr answered {srvr:?}");
    let conf = server.four_letter("conf");
    assert!(conf.contains("tickTime=1000"), "conf answered {conf:?}");
    assert_eq!(
        server.connect_string(),
        format!("127.0.0.1:{}", server.addr().port())
    );

    // Write something so we can tell the data directory survives a restart.
    let path = unique_path("restart");
    let mut client = RawClient::connect(server.addr(), 10_000);
    assert_eq!(create(&mut client, &path, b"kept"), ErrorCode::Ok);
    drop(client);

    let addr = server.addr();
    server.stop();
    assert!(!server.is_running());
    assert!(
        try_four_letter(addr, "ruok").is_err(),
        "a stopped server must not answer"
    );

    let restarted = Instant::now();
    server.restart();
    eprintln!("standalone restart took {:?}", restarted.elapsed());
    assert!(server.is_running());
    assert_eq!(server.addr(), addr, "restart must reuse the port");
    assert_eq!(server.four_letter("ruok"), "imok");
    let mut client = RawClient::connect(server.addr(), 10_000);
    assert_eq!(
        exists(&mut client, &path),
        ErrorCode::Ok,
        "znode written before the restart is gone"
    );
}

#[test]
fn shared_server_is_started_once() {
    let first = zk::shared();
    let second = zk::shared();
    assert!(std::ptr::eq(first, second));
    assert_eq!(first.four_letter("ruok"), "imok");
    let srvr = first.four_letter("srvr");
    assert!(srvr.contains("Mode: standalone"), "srvr answered {srvr:?}");
}
