//! Real Apache ZooKeeper servers for integration tests.
//!
//! Each server is a JVM listening on 127.0.0.1 only, with its config, data
//! and log in a fresh directory under `std::env::temp_dir()`. Which
//! ZooKeeper runs is chosen by [`ZkOptions::classpath`] or
//! [`ZkOptions::zookeeper_home`], else the environment (`ZOOKEEPER_CLASSPATH`,
//! then `ZOOKEEPER_HOME`, an unpacked Apache release), else Debian's
//! package (`/usr/share/java/zookeeper.jar`, what `apt install zookeeper`
//! and zklock's `scripts/setup.sh` install). `java` is `$JAVA_HOME/bin/java`
//! when `JAVA_HOME` is set, else the one on `PATH`.
//!
//! Servers die with the test process even when `Drop` never runs (a `static`
//! shared server, a panic that aborts, a SIGKILL): the JVM is started by a small
//! `bash` wrapper whose stdin is a pipe held only by the test process. When that
//! process goes away the pipe closes, the wrapper's `read` returns EOF, and the
//! wrapper kills the JVM and removes the server's directory. A deliberate stop
//! writes a line first, which tells the wrapper to keep the directory.
//!
//! Set `ZKLOCK_KEEP_ZK_DIRS=1` to keep directories (config, data, `server.log`)
//! after `Drop` for debugging.

mod ensemble;
mod four_letter;
mod jvm;
mod options;
mod server;

use std::time::Duration;

use jvm::StartFailure;

use crate::ports::port_taken;

pub use ensemble::{LinkState, ZkEnsemble};
pub use four_letter::try_four_letter;
pub use options::ZkOptions;
pub use server::{shared, ZkServer};

/// How long a server (or ensemble) may take to become ready before the test fails.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Attempts to start when a freshly picked port turned out to be taken.
const START_ATTEMPTS: usize = 3;

/// Runs `start` until it succeeds; again on fresh ports (at most
/// `START_ATTEMPTS` times) when a port it picked was taken meanwhile, never
/// when the caller chose the port. Panics with the failure otherwise.
fn start_retrying<T>(options: &ZkOptions, mut start: impl FnMut() -> Result<T, StartFailure>) -> T {
    let mut attempt = 1;
    loop {
        match start() {
            Ok(started) => return started,
            Err(failure)
                if failure.port_in_use
                    && attempt < START_ATTEMPTS
                    && options.client_port.is_none() =>
            {
                attempt += 1;
            }
            Err(failure) => panic!("{}", failure.message),
        }
    }
}

/// Panics, before any JVM is started, if a client port the caller chose
/// (`ZkOptions::client_port`, and the `count - 1` after it) is taken: the
/// server would exit at once, while the one already there answered for it.
fn check_chosen_ports(options: &ZkOptions, count: usize) {
    let Some(base) = options.client_port else {
        return;
    };
    for port in (0..count).filter_map(|i| base.checked_add(i as u16)) {
        if let Some(e) = port_taken(port) {
            panic!(
                "ZooKeeper client port 127.0.0.1:{port} is taken ({e}): another server \
                 listens there; choose another port, or none for a free one"
            );
        }
    }
}
