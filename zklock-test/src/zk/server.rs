//! One standalone server, and the one a test binary shares.

use std::fs;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::OnceLock;

use super::four_letter::try_four_letter;
use super::jvm::{tail_of_file, Node, STANDALONE_MAIN};
use super::{check_chosen_ports, start_retrying, ZkOptions, READY_TIMEOUT};
use crate::{free_ports, scratch_dir};

/// One standalone ZooKeeper server on 127.0.0.1 with its own temporary directory.
///
/// Starting and `restart` each take around a second, more on a loaded
/// machine (bench/FIGURES.md has the figures).
///
/// All methods take `&self` so a server can be stopped/restarted from one
/// thread while others hold references to it.
pub struct ZkServer {
    node: Node,
}

impl ZkServer {
    /// Starts a server with `tickTime=2000` and waits until it serves requests
    /// (`ruok` answers `imok` and `srvr` reports `Mode: standalone`).
    pub fn start() -> ZkServer {
        Self::start_with_options(&ZkOptions::default())
    }

    /// Starts a server with the given `tickTime` (milliseconds).
    pub fn start_with(tick_ms: u64) -> ZkServer {
        Self::start_with_options(&ZkOptions::new().tick_ms(tick_ms))
    }

    /// Starts a server with full options. Panics (with the log tail) if it is
    /// not ready within 30 s: tests must fail loudly, never skip.
    pub fn start_with_options(options: &ZkOptions) -> ZkServer {
        check_chosen_ports(options, 1);
        start_retrying(options, || {
            let ports = free_ports(2);
            let port = options.client_port.unwrap_or(ports[0]);
            let secure_port = options.secure.then_some(ports[1]);
            let dir = scratch_dir("zk");
            let data_dir = dir.join("data");
            fs::create_dir_all(&data_dir)
                .unwrap_or_else(|e| panic!("creating {}: {e}", data_dir.display()));
            let config =
                options.common_config(&data_dir, port) + &options.secure_config(secure_port);
            let mut node = Node::new("standalone", dir, port, STANDALONE_MAIN, &config);
            node.set_options(options, secure_port);
            node.spawn();
            node.wait_answering(READY_TIMEOUT, true)
                .map(|()| ZkServer { node })
        })
    }

    /// The client address, `127.0.0.1:<port>`.
    pub fn addr(&self) -> SocketAddr {
        self.node.addr()
    }

    /// Connect string for a client, `"127.0.0.1:<port>"`.
    pub fn connect_string(&self) -> String {
        self.node.addr().to_string()
    }

    /// The TLS client address; panics if the server has none.
    pub fn secure_addr(&self) -> SocketAddr {
        self.node.secure_addr()
    }

    /// Sends a four-letter word (`ruok`, `srvr`, `mntr`, `cons`, `stat`, ...)
    /// and returns the whole answer. Panics if the server cannot be reached;
    /// use [`try_four_letter`] when that is expected.
    pub fn four_letter(&self, word: &str) -> String {
        try_four_letter(self.addr(), word).unwrap_or_else(|e| {
            panic!(
                "four-letter word {word:?} to {} failed: {e}\n{}",
                self.addr(),
                self.node.log_tail_message()
            )
        })
    }

    /// Kills the server (SIGKILL, like a crash) but keeps its data directory.
    ///
    /// A holder connected to it says `Suspended` at once, and `Lost`
    /// (`NoContact`) a session timeout `T` after the server last answered,
    /// unless the server is [restarted](ZkServer::restart) before: it keeps
    /// its sessions on disk and gives each a fresh timeout, and the holder
    /// says `Held` again once it has reconnected and read its node.
    pub fn stop(&self) {
        self.node.stop();
    }

    /// Starts the server again on the same port with the same data directory
    /// and waits until it serves requests. Panics (with the log tail) on failure.
    pub fn restart(&self) {
        self.node.restart();
        if let Err(failure) = self.node.wait_answering(READY_TIMEOUT, true) {
            panic!("{}", failure.message);
        }
    }

    /// Whether the JVM is alive.
    pub fn is_running(&self) -> bool {
        self.node.is_running()
    }

    /// The server's directory (`zoo.cfg`, `data/`, `server.log`, `java.pid`).
    pub fn dir(&self) -> &Path {
        &self.node.dir
    }

    /// The last `lines` lines of the server log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        tail_of_file(&self.node.log_path(), lines)
    }

    /// Process id of the most recently started JVM (not its wrapper).
    pub fn java_pid(&self) -> Option<u32> {
        self.node.java_pid()
    }
}

/// One server per test binary, started on first use and never stopped by the
/// tests (its JVM and directory go away with the test process). Tests sharing it
/// must use their own unique znode paths.
pub fn shared() -> &'static ZkServer {
    static SHARED: OnceLock<ZkServer> = OnceLock::new();
    SHARED.get_or_init(ZkServer::start)
}
