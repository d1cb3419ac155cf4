//! A lock taken and released on a hand-written, single-threaded poll loop:
//! one blocking socket, no I/O thread, no async runtime. The protocol
//! crate decides everything; this loop only moves bytes and tells it the
//! time.
//!
//! ```sh
//! ./scripts/zk.sh &                       # a local ZooKeeper
//! cargo run -p zklock-proto --example poll_loop
//! ```
//!
//! `ZKLOCK_CONNECT` names another server (`host:port`, the first of a list).

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zklock_proto::lock::{AttemptIds, LockEvent, LockSpec, Rule};
use zklock_proto::session::{SessionConfig, SessionState};
use zklock_proto::{Client, Event};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let connect = std::env::var("ZKLOCK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
    let host = connect
        .split(',')
        .next()
        .and_then(|h| h.split('/').next())
        .ok_or("an empty connect string")?;
    let give_up = Instant::now() + Duration::from_secs(30);

    let mut stream = TcpStream::connect(host)?;
    stream.set_nodelay(true)?;
    let mut zk: Client<u32, u32> = Client::new(SessionConfig::default(), Instant::now());
    zk.handle_connected(Instant::now());

    let ids = AttemptIds::new();
    let spec = Arc::new(LockSpec::new(
        "/examples/poll-loop",
        "-lock-",
        Rule::Predecessor,
    ));
    let mut attempt = None;
    let mut closing = false;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // Whatever the machines want sent, sent.
        while !zk.output().is_empty() {
            let n = stream.write(zk.output())?;
            zk.consume_output(n);
        }
        // Everything they decided, acted on.
        while let Some(event) = zk.poll_event() {
            match event {
                Event::State(change)
                    if change.state == SessionState::Connected && attempt.is_none() =>
                {
                    let (id, uuid) = ids.next();
                    attempt = Some(id);
                    zk.acquire(Instant::now(), id, spec.clone(), uuid, Some(give_up), false);
                }
                Event::State(change) if change.state == SessionState::Closed && closing => {
                    println!("session closed");
                    return Ok(());
                }
                Event::State(change) if change.state.is_terminal() => {
                    let (state, id) = (change.state, change.session_id);
                    return Err(format!("session {id:#x} ended: {state:?}").into());
                }
                Event::Lock(LockEvent::Acquired { id, path, stat, .. }) => {
                    println!("holding {path}, fencing token {}", stat.czxid);
                    zk.release(Instant::now(), id, true);
                }
                Event::Lock(LockEvent::Failed { error, .. }) => return Err(error.into()),
                Event::Lock(LockEvent::Released { refused, .. }) => {
                    println!("released (refused by the server: {refused:?})");
                    closing = true;
                    zk.close(Instant::now(), None);
                }
                Event::DropConnection(reason) => {
                    return Err(format!("the connection dropped: {reason:?}").into());
                }
                _ => {}
            }
        }
        if !zk.output().is_empty() {
            continue;
        }
        // Sleep in the socket until bytes arrive or the next timer is due.
        let now = Instant::now();
        if now > give_up {
            return Err("no lock within 30 s".into());
        }
        let wake = zk.poll_timeout().unwrap_or(give_up).min(give_up);
        let wait = wake
            .saturating_duration_since(now)
            .max(Duration::from_millis(1));
        stream.set_read_timeout(Some(wait))?;
        match stream.read(&mut buf) {
            Ok(0) => {
                zk.handle_disconnected(Instant::now());
                return Err("the server closed the connection".into());
            }
            Ok(n) => zk.handle_input(Instant::now(), &buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(e.into()),
        }
        zk.handle_timeout(Instant::now());
    }
}
