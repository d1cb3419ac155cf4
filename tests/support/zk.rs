//! Real Apache ZooKeeper servers for integration tests.
//!
//! Each server is a JVM started from the Debian `zookeeper.jar` (override the
//! classpath with `ZOOKEEPER_CLASSPATH`), listening on 127.0.0.1 only, with its
//! config, data and log in a fresh directory under `std::env::temp_dir()`.
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

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long a server (or ensemble) may take to become ready before the test fails.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a killed JVM may take to be reaped before we escalate.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);
/// Pause between readiness probes.
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// Lines of `server.log` included in failure messages.
const LOG_TAIL_LINES: usize = 60;
/// Attempts to start when a freshly picked port turned out to be taken.
const START_ATTEMPTS: usize = 3;

const STANDALONE_MAIN: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";
const QUORUM_MAIN: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";

/// Runs `"$@"` (the java command) in the background and ties its life to our stdin.
///
/// * a line on stdin (`stop`): kill the JVM, keep the directory;
/// * EOF without a line (the test process died): kill the JVM, remove `$ZKW_DIR`;
/// * the JVM exits on its own: the wrapper exits with its status, so
///   `Child::try_wait` on the wrapper tells whether the JVM is alive.
const WRAPPER_SCRIPT: &str = r#"
exec 3<&0
"$@" </dev/null 3<&- &
jpid=$!
echo "$jpid" > "$ZKW_DIR/java.pid"
(
  if IFS= read -r _line <&3; then
    kill -9 "$jpid" 2>/dev/null
  else
    : > "$ZKW_DIR/.orphaned"
    kill -9 "$jpid" 2>/dev/null
  fi
) &
wpid=$!
exec 3<&- 0</dev/null
wait "$jpid"
status=$?
kill "$wpid" 2>/dev/null
wait "$wpid" 2>/dev/null
if [ -e "$ZKW_DIR/.orphaned" ]; then rm -rf "$ZKW_DIR"; fi
exit "$status"
"#;

/// Settings shared by standalone servers and ensembles.
#[derive(Clone, Debug)]
pub struct ZkOptions {
    tick_ms: u64,
    extra: Vec<(String, String)>,
    /// A TLS client port besides the plaintext one.
    secure: bool,
    /// Extra JVM flags (`-D...`).
    jvm: Vec<String>,
    /// A JAAS configuration, written into each server's directory.
    jaas: Option<String>,
}

impl Default for ZkOptions {
    fn default() -> Self {
        ZkOptions {
            tick_ms: 2000,
            extra: Vec::new(),
            secure: false,
            jvm: Vec::new(),
            jaas: None,
        }
    }
}

/// Jars the Debian `zookeeper.jar` manifest forgets but Netty (the TLS
/// connection factory) needs.
const NETTY_JARS: &[&str] = &[
    "/usr/share/java/netty-codec.jar",
    "/usr/share/java/netty-resolver.jar",
    "/usr/share/java/netty-transport-native-unix-common.jar",
];

impl ZkOptions {
    /// Defaults: `tickTime=2000`, nothing extra.
    pub fn new() -> Self {
        Self::default()
    }

    /// `tickTime` in milliseconds. Session timeouts are clamped by the server to
    /// `[2 * tick, 20 * tick]` unless `minSessionTimeout`/`maxSessionTimeout` are set.
    pub fn tick_ms(mut self, tick_ms: u64) -> Self {
        self.tick_ms = tick_ms;
        self
    }

    /// An extra `key=value` line for `zoo.cfg` (e.g. `minSessionTimeout`); it
    /// comes after the defaults, so it overrides them.
    pub fn config(mut self, key: &str, value: &str) -> Self {
        self.extra.push((key.to_string(), value.to_string()));
        self
    }

    /// Adds a TLS client port (Netty connection factory) with these PKCS12
    /// stores (see `support::certs`); `need_client_cert`:
    /// `ssl.clientAuth=need`, else `none`.
    pub fn tls(
        mut self,
        keystore: &Path,
        truststore: &Path,
        password: &str,
        need_client_cert: bool,
    ) -> Self {
        self.secure = true;
        let auth = if need_client_cert { "need" } else { "none" };
        for (key, value) in [
            (
                "serverCnxnFactory",
                "org.apache.zookeeper.server.NettyServerCnxnFactory",
            ),
            ("ssl.keyStore.location", &keystore.display().to_string()),
            ("ssl.keyStore.password", password),
            ("ssl.keyStore.type", "PKCS12"),
            ("ssl.trustStore.location", &truststore.display().to_string()),
            ("ssl.trustStore.password", password),
            ("ssl.trustStore.type", "PKCS12"),
            ("ssl.clientAuth", auth),
            // The server would check our client certificate against the
            // reverse DNS of 127.0.0.1; the rustls side is what is tested.
            ("ssl.hostnameVerification", "false"),
        ] {
            self.extra.push((key.to_owned(), value.to_owned()));
        }
        self
    }

    /// SASL with a JAAS `DigestLoginModule` serving `users` (name, password).
    pub fn sasl_digest(mut self, users: &[(&str, &str)]) -> Self {
        let mut jaas =
            String::from("Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required");
        for (user, password) in users {
            jaas.push_str(&format!("\n  user_{user}=\"{password}\""));
        }
        jaas.push_str(";\n};\n");
        self.jaas = Some(jaas);
        self.extra.push((
            "authProvider.1".to_owned(),
            "org.apache.zookeeper.server.auth.SASLAuthenticationProvider".to_owned(),
        ));
        self
    }

    fn secure_config(&self, secure_port: Option<u16>) -> String {
        match secure_port {
            Some(port) => format!("secureClientPort={port}\nsecureClientPortAddress=127.0.0.1\n"),
            None => String::new(),
        }
    }

    fn common_config(&self, data_dir: &Path, client_port: u16) -> String {
        let mut cfg = format!(
            "tickTime={tick}\n\
             dataDir={data}\n\
             clientPort={client_port}\n\
             clientPortAddress=127.0.0.1\n\
             maxClientCnxns=0\n\
             4lw.commands.whitelist=*\n\
             admin.enableServer=false\n\
             # Tests kill JVMs, not machines: the page cache survives, so skipping\n\
             # fsync loses nothing and makes every write much cheaper.\n\
             forceSync=no\n\
             preAllocSize=1024\n",
            tick = self.tick_ms,
            data = data_dir.display(),
        );
        for (key, value) in &self.extra {
            cfg.push_str(&format!("{key}={value}\n"));
        }
        cfg
    }
}

// ---------------------------------------------------------------------------
// Standalone server
// ---------------------------------------------------------------------------

/// One standalone ZooKeeper server on 127.0.0.1 with its own temporary directory.
///
/// Starting takes about 0.4 s on an idle 2-core machine (1-1.5 s under load);
/// `restart` about 0.9 s.
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
        let mut attempt = 1;
        loop {
            let ports = free_ports(2);
            let port = ports[0];
            let secure_port = options.secure.then_some(ports[1]);
            let dir = unique_temp_dir("zk");
            let data_dir = dir.join("data");
            fs::create_dir_all(&data_dir)
                .unwrap_or_else(|e| panic!("creating {}: {e}", data_dir.display()));
            let config =
                options.common_config(&data_dir, port) + &options.secure_config(secure_port);
            let mut node = Node::new("standalone", dir, port, STANDALONE_MAIN, &config);
            node.set_options(options, secure_port);
            node.spawn();
            match node.wait_answering(READY_TIMEOUT, true) {
                Ok(()) => return ZkServer { node },
                Err(failure) if failure.port_in_use && attempt < START_ATTEMPTS => {
                    attempt += 1;
                    drop(node);
                }
                Err(failure) => panic!("{}", failure.message),
            }
        }
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

// ---------------------------------------------------------------------------
// Ensemble
// ---------------------------------------------------------------------------

/// A ZooKeeper ensemble of `n` members on 127.0.0.1 (`initLimit=5`,
/// `syncLimit=2`). Members are indexed from 0; member `i` has `myid` `i + 1`.
///
/// Starting 3 members takes about 2-3 s on a 2-core machine; re-electing after
/// the leader is killed about 0.5 s; restarting a member about 0.9 s.
pub struct ZkEnsemble {
    members: Vec<Node>,
}

impl ZkEnsemble {
    /// Starts `n` members with `tickTime=2000` and waits for a leader.
    pub fn start(n: usize) -> ZkEnsemble {
        Self::start_with_options(n, &ZkOptions::default())
    }

    /// Starts `n` members with the given `tickTime` (milliseconds).
    pub fn start_with(n: usize, tick_ms: u64) -> ZkEnsemble {
        Self::start_with_options(n, &ZkOptions::new().tick_ms(tick_ms))
    }

    /// Starts `n` members and waits (30 s at most, then panics with every
    /// member's log tail) until each reports `Mode: leader` or `Mode: follower`.
    pub fn start_with_options(n: usize, options: &ZkOptions) -> ZkEnsemble {
        assert!(n >= 1, "an ensemble needs at least one member");
        let mut attempt = 1;
        loop {
            let ensemble = Self::spawn_members(n, options);
            match ensemble.wait_ready_within(READY_TIMEOUT) {
                Ok(()) => return ensemble,
                Err(failure) if failure.port_in_use && attempt < START_ATTEMPTS => {
                    attempt += 1;
                    drop(ensemble);
                }
                Err(failure) => panic!("{}", failure.message),
            }
        }
    }

    fn spawn_members(n: usize, options: &ZkOptions) -> ZkEnsemble {
        // client, quorum and election port for each member, all distinct.
        let ports = free_ports(3 * n);
        let secure_ports = free_ports(if options.secure { n } else { 0 });
        let servers: String = (0..n)
            .map(|i| {
                format!(
                    "server.{}=127.0.0.1:{}:{}\n",
                    i + 1,
                    ports[3 * i + 1],
                    ports[3 * i + 2]
                )
            })
            .collect();
        let members: Vec<Node> = (0..n)
            .map(|i| {
                let dir = unique_temp_dir(&format!("ens-m{}", i + 1));
                let data_dir = dir.join("data");
                fs::create_dir_all(&data_dir)
                    .unwrap_or_else(|e| panic!("creating {}: {e}", data_dir.display()));
                fs::write(data_dir.join("myid"), format!("{}\n", i + 1))
                    .unwrap_or_else(|e| panic!("writing myid in {}: {e}", data_dir.display()));
                let secure_port = secure_ports.get(i).copied();
                let config = format!(
                    "{}{}initLimit=5\nsyncLimit=2\n{servers}",
                    options.common_config(&data_dir, ports[3 * i]),
                    options.secure_config(secure_port),
                );
                let mut node = Node::new(
                    &format!("member {i}"),
                    dir,
                    ports[3 * i],
                    QUORUM_MAIN,
                    &config,
                );
                node.set_options(options, secure_port);
                node
            })
            .collect();
        for member in &members {
            member.spawn();
        }
        ZkEnsemble { members }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Always false; an ensemble has at least one member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// `"127.0.0.1:p1,127.0.0.1:p2,..."`, every member whether running or not.
    pub fn connect_string(&self) -> String {
        self.members
            .iter()
            .map(|m| m.addr().to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `"127.0.0.1:s1,127.0.0.1:s2,..."`: every member's TLS client port.
    pub fn secure_connect_string(&self) -> String {
        let addrs: Vec<String> = self
            .members
            .iter()
            .map(|m| m.secure_addr().to_string())
            .collect();
        addrs.join(",")
    }

    /// Client address of member `i`.
    pub fn member_addr(&self, i: usize) -> SocketAddr {
        self.member(i).addr()
    }

    /// Index of the running member whose `srvr` says `Mode: leader`, if any.
    pub fn leader(&self) -> Option<usize> {
        (0..self.members.len()).find(|&i| self.member_mode(i).as_deref() == Some("leader"))
    }

    /// `Mode:` reported by member `i` (`leader`, `follower`, `standalone`, ...),
    /// or `None` if it is down or not serving (e.g. during an election).
    pub fn member_mode(&self, i: usize) -> Option<String> {
        let member = self.member(i);
        if !member.is_running() {
            return None;
        }
        try_four_letter(member.addr(), "srvr")
            .ok()
            .and_then(|answer| parse_mode(&answer))
    }

    /// Kills member `i` (SIGKILL, like a crash); its data directory is kept.
    pub fn kill(&self, i: usize) {
        self.member(i).stop();
    }

    /// Whether member `i`'s JVM is alive.
    pub fn is_running(&self, i: usize) -> bool {
        self.member(i).is_running()
    }

    /// Starts member `i` again with the same ports and data. If a majority of
    /// members is then running, waits until the ensemble is ready
    /// ([`ZkEnsemble::wait_ready`]); otherwise (no quorum possible yet) only
    /// until member `i` answers `ruok`.
    pub fn restart(&self, i: usize) {
        let member = self.member(i);
        member.restart();
        let running = (0..self.members.len())
            .filter(|&j| self.is_running(j))
            .count();
        if running * 2 > self.members.len() {
            self.wait_ready();
        } else if let Err(failure) = member.wait_answering(READY_TIMEOUT, false) {
            panic!("{}", failure.message);
        }
    }

    /// Waits (30 s at most, then panics with logs) until every running member
    /// serves as leader or follower and exactly one of them is the leader.
    pub fn wait_ready(&self) {
        if let Err(failure) = self.wait_ready_within(READY_TIMEOUT) {
            panic!("{}", failure.message);
        }
    }

    /// Like [`ZkEnsemble::wait_ready`] but returns false instead of panicking,
    /// for tests that expect the ensemble to stay unavailable.
    pub fn try_wait_ready(&self, timeout: Duration) -> bool {
        self.wait_ready_within(timeout).is_ok()
    }

    /// Four-letter word to member `i`; panics if it cannot be reached.
    pub fn four_letter(&self, i: usize, word: &str) -> String {
        let member = self.member(i);
        try_four_letter(member.addr(), word).unwrap_or_else(|e| {
            panic!(
                "four-letter word {word:?} to member {i} ({}) failed: {e}\n{}",
                member.addr(),
                member.log_tail_message()
            )
        })
    }

    /// Directory of member `i` (`zoo.cfg`, `data/myid`, `server.log`).
    pub fn member_dir(&self, i: usize) -> &Path {
        &self.member(i).dir
    }

    /// The last `lines` lines of member `i`'s log.
    pub fn log_tail(&self, i: usize, lines: usize) -> String {
        tail_of_file(&self.member(i).log_path(), lines)
    }

    fn member(&self, i: usize) -> &Node {
        self.members.get(i).unwrap_or_else(|| {
            panic!(
                "no ensemble member {i}; members are 0..{}",
                self.members.len()
            )
        })
    }

    fn wait_ready_within(&self, timeout: Duration) -> Result<(), StartFailure> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut modes = Vec::new();
            let mut died = None;
            for (i, member) in self.members.iter().enumerate() {
                if member.is_running() {
                    modes.push(self.member_mode(i));
                } else if member.was_expected_running() {
                    died = Some(i);
                }
            }
            if let Some(i) = died {
                return Err(self.failure(&format!("member {i} exited while starting")));
            }
            let serving = modes
                .iter()
                .all(|m| matches!(m.as_deref(), Some("leader" | "follower" | "standalone")));
            let leaders = modes
                .iter()
                .filter(|m| matches!(m.as_deref(), Some("leader" | "standalone")))
                .count();
            if !modes.is_empty() && serving && leaders == 1 {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(self.failure(&format!(
                    "ensemble not ready after {timeout:?}; modes of running members: {modes:?}"
                )));
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    fn failure(&self, what: &str) -> StartFailure {
        let mut message = format!("ZooKeeper ensemble: {what}\n");
        let mut port_in_use = false;
        for member in &self.members {
            message.push_str(&member.log_tail_message());
            port_in_use |= member.log_says_port_in_use();
        }
        StartFailure {
            message,
            port_in_use,
        }
    }
}

// ---------------------------------------------------------------------------
// Four-letter words
// ---------------------------------------------------------------------------

/// Sends a four-letter word to `addr` and reads the answer to EOF.
pub fn try_four_letter(addr: SocketAddr, word: &str) -> io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(word.as_bytes())?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

/// The value of the `Mode:` line of a `srvr`/`stat` answer.
fn parse_mode(answer: &str) -> Option<String> {
    answer
        .lines()
        .find_map(|line| line.strip_prefix("Mode:"))
        .map(|mode| mode.trim().to_string())
}

// ---------------------------------------------------------------------------
// One JVM: config, directory, process
// ---------------------------------------------------------------------------

/// Why a server did not become ready, and whether retrying on new ports may help.
struct StartFailure {
    message: String,
    port_in_use: bool,
}

/// A server process (standalone or ensemble member) with its directory.
struct Node {
    label: String,
    dir: PathBuf,
    client_port: u16,
    main_class: &'static str,
    process: Mutex<Option<Jvm>>,
    secure_port: Option<u16>,
    jvm_extra: Vec<String>,
    classpath_extra: Vec<&'static str>,
}

/// A running wrapper + JVM pair.
struct Jvm {
    wrapper: Child,
    /// Write end of the wrapper's stdin; closing it without a line means "we died".
    lifeline: Option<ChildStdin>,
    started: Instant,
}

impl Node {
    fn new(
        label: &str,
        dir: PathBuf,
        client_port: u16,
        main_class: &'static str,
        config: &str,
    ) -> Node {
        let cfg_path = dir.join("zoo.cfg");
        fs::write(&cfg_path, config)
            .unwrap_or_else(|e| panic!("writing {}: {e}", cfg_path.display()));
        Node {
            label: label.to_string(),
            dir,
            client_port,
            main_class,
            process: Mutex::new(None),
            secure_port: None,
            jvm_extra: Vec::new(),
            classpath_extra: Vec::new(),
        }
    }

    fn set_options(&mut self, options: &ZkOptions, secure_port: Option<u16>) {
        self.secure_port = secure_port;
        self.jvm_extra = options.jvm.clone();
        if let Some(jaas) = &options.jaas {
            let path = self.dir.join("jaas.conf");
            fs::write(&path, jaas).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
            self.jvm_extra.push(format!(
                "-Djava.security.auth.login.config={}",
                path.display()
            ));
        }
        if options.secure {
            self.classpath_extra = NETTY_JARS.to_vec();
        }
    }

    fn secure_addr(&self) -> SocketAddr {
        let port = self
            .secure_port
            .unwrap_or_else(|| panic!("{} has no TLS port (ZkOptions::tls)", self.label));
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.client_port))
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    fn lock(&self) -> MutexGuard<'_, Option<Jvm>> {
        // A panic while holding the lock leaves the state usable; recover it.
        self.process
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn spawn(&self) {
        let mut process = self.lock();
        assert!(process.is_none(), "{}: already running", self.label);
        *process = Some(self.spawn_jvm());
    }

    fn spawn_jvm(&self) -> Jvm {
        let log_path = self.log_path();
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .unwrap_or_else(|e| panic!("opening {}: {e}", log_path.display()));
        let mut log_for_header = log
            .try_clone()
            .unwrap_or_else(|e| panic!("cloning log handle: {e}"));
        let _ = writeln!(
            log_for_header,
            "==== zklock test support: starting {} ====",
            self.label
        );
        let log_for_stderr = log
            .try_clone()
            .unwrap_or_else(|e| panic!("cloning log handle: {e}"));
        let _ = fs::remove_file(self.dir.join("java.pid"));

        let mut command = Command::new("bash");
        command
            .arg("-c")
            .arg(WRAPPER_SCRIPT)
            .arg("zklock-zk-wrapper")
            .arg("java")
            .args(jvm_flags())
            .args(&self.jvm_extra)
            .arg("-cp")
            .arg(
                std::iter::once(classpath())
                    .chain(self.classpath_extra.iter().map(|j| j.to_string()))
                    .collect::<Vec<_>>()
                    .join(":"),
            )
            .arg(self.main_class)
            .arg(self.dir.join("zoo.cfg"))
            .env("ZKW_DIR", &self.dir)
            .current_dir(&self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_for_stderr));
        let mut wrapper = command
            .spawn()
            .unwrap_or_else(|e| panic!("{}: cannot run bash to start ZooKeeper: {e}", self.label));
        let lifeline = wrapper.stdin.take();
        Jvm {
            wrapper,
            lifeline,
            started: Instant::now(),
        }
    }

    fn is_running(&self) -> bool {
        match self.lock().as_mut() {
            None => false,
            Some(jvm) => matches!(jvm.wrapper.try_wait(), Ok(None)),
        }
    }

    /// True if we started the JVM and did not stop it (so if it is not running, it died).
    fn was_expected_running(&self) -> bool {
        self.lock().is_some()
    }

    fn stop(&self) {
        let jvm = self.lock().take();
        if let Some(jvm) = jvm {
            jvm.stop(&self.label);
        }
    }

    fn restart(&self) {
        let mut process = self.lock();
        if let Some(jvm) = process.take() {
            jvm.stop(&self.label);
        }
        *process = Some(self.spawn_jvm());
    }

    fn java_pid(&self) -> Option<u32> {
        fs::read_to_string(self.dir.join("java.pid"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    }

    /// Polls the client port until the server answers `ruok` with `imok` and,
    /// if `serving`, `srvr` reports a `Mode:` (ZooKeeper says `imok` before it
    /// serves requests). Fails early if the JVM exits.
    fn wait_answering(&self, timeout: Duration, serving: bool) -> Result<(), StartFailure> {
        let deadline = Instant::now() + timeout;
        loop {
            {
                let mut process = self.lock();
                let Some(jvm) = process.as_mut() else {
                    return Err(self.failure("was stopped while waiting for it"));
                };
                match jvm.wrapper.try_wait() {
                    Ok(None) => {}
                    Ok(Some(status)) => {
                        let what = format!("JVM exited with {status} before becoming ready");
                        return Err(self.failure(&what));
                    }
                    Err(e) => return Err(self.failure(&format!("cannot poll the JVM: {e}"))),
                }
            }
            if self.answers(serving) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let started = self.lock().as_ref().map(|jvm| jvm.started.elapsed());
                let what = format!("not serving on {} after {started:?}", self.addr());
                return Err(self.failure(&what));
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    fn answers(&self, serving: bool) -> bool {
        let imok =
            matches!(try_four_letter(self.addr(), "ruok"), Ok(answer) if answer.trim() == "imok");
        imok && (!serving
            || try_four_letter(self.addr(), "srvr")
                .ok()
                .and_then(|answer| parse_mode(&answer))
                .is_some())
    }

    fn failure(&self, what: &str) -> StartFailure {
        StartFailure {
            message: format!(
                "ZooKeeper {}: {what}\n{}",
                self.label,
                self.log_tail_message()
            ),
            port_in_use: self.log_says_port_in_use(),
        }
    }

    fn log_says_port_in_use(&self) -> bool {
        let log = fs::read(self.log_path()).unwrap_or_default();
        let log = String::from_utf8_lossy(&log);
        log.contains("Address already in use") || log.contains("BindException")
    }

    fn log_tail_message(&self) -> String {
        format!(
            "---- last lines of {} ({}; set ZKLOCK_KEEP_ZK_DIRS=1 to keep it) ----\n{}\n---- end of log ----\n",
            self.log_path().display(),
            self.label,
            tail_of_file(&self.log_path(), LOG_TAIL_LINES)
        )
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop();
        if std::env::var_os("ZKLOCK_KEEP_ZK_DIRS").is_some() {
            eprintln!("keeping ZooKeeper directory {}", self.dir.display());
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

impl Jvm {
    /// Tells the wrapper to kill the JVM (keeping the directory) and reaps both.
    fn stop(mut self, label: &str) {
        if let Some(mut lifeline) = self.lifeline.take() {
            // If the wrapper is already gone this fails with EPIPE; nothing to do then.
            let _ = lifeline.write_all(b"stop\n");
        }
        if wait_with_timeout(&mut self.wrapper, STOP_TIMEOUT).is_none() {
            eprintln!("ZooKeeper {label}: wrapper did not exit after {STOP_TIMEOUT:?}; killing it");
            let _ = self.wrapper.kill();
            let _ = self.wrapper.wait();
        }
    }
}

fn wait_with_timeout(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
            _ => return None,
        }
    }
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// Small, quick-starting JVMs: the machine running the tests has 2 cores.
fn jvm_flags() -> Vec<&'static str> {
    vec![
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-XX:-UsePerfData",
        "-Djava.net.preferIPv4Stack=true",
        "-Dzookeeper.admin.enableServer=false",
        "-Dzookeeper.4lw.commands.whitelist=*",
        "-Dzookeeper.jmx.log4j.disable=true",
        "-Dorg.slf4j.simpleLogger.showDateTime=true",
        "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
    ]
}

/// `ZOOKEEPER_CLASSPATH`, or Debian's jar plus slf4j-simple (when present) so
/// that the server actually writes a log instead of slf4j's silent default.
fn classpath() -> String {
    if let Ok(cp) = std::env::var("ZOOKEEPER_CLASSPATH") {
        if !cp.is_empty() {
            return cp;
        }
    }
    let mut cp = String::from("/usr/share/java/zookeeper.jar");
    let simple = "/usr/share/java/slf4j-simple.jar";
    if Path::new(simple).exists() {
        cp.push(':');
        cp.push_str(simple);
    }
    cp
}

/// A new, empty directory `zklock-<kind>-<pid>-<n>-<nanos>` under the temp dir.
fn unique_temp_dir(kind: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir =
        std::env::temp_dir().join(format!("zklock-{kind}-{}-{n}-{nanos}", std::process::id()));
    fs::create_dir(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    dir
}

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

/// The last `lines` lines of a file, or a note saying why it cannot be read.
pub fn tail_of_file(path: &Path, lines: usize) -> String {
    let mut bytes = Vec::new();
    match File::open(path).and_then(|mut f| f.read_to_end(&mut bytes)) {
        Ok(_) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}
