//! Free TCP ports on 127.0.0.1 for servers that must be told their port
//! before they start (ZooKeeper's client, quorum and election ports).

use std::collections::HashSet;
use std::io;
use std::net::TcpListener;
use std::sync::{Mutex, OnceLock};

/// `count` distinct free ports on 127.0.0.1, never handed out twice by this process.
///
/// The listeners are all held until every port is chosen, so the kernel cannot
/// give the same port twice; the ports are free again when this returns (a
/// small race with other processes remains, handled by retrying the start).
pub fn free_ports(count: usize) -> Vec<u16> {
    static HANDED_OUT: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    let handed_out = HANDED_OUT.get_or_init(|| Mutex::new(HashSet::new()));
    let mut handed_out = handed_out
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut listeners = Vec::new();
    let mut ports = Vec::new();
    while ports.len() < count {
        let listener =
            TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0 for a free port");
        let port = listener
            .local_addr()
            .expect("local_addr of a bound listener")
            .port();
        if handed_out.insert(port) {
            ports.push(port);
        }
        listeners.push(listener);
    }
    ports
}

/// Why 127.0.0.1:`port` cannot be listened on (another server holds it),
/// or `None` when it is free. A server started there would exit at once,
/// and a readiness probe would be answered by the other one.
pub(crate) fn port_taken(port: u16) -> Option<io::Error> {
    TcpListener::bind(("127.0.0.1", port)).err()
}
