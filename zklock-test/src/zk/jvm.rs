//! One server JVM: its config and directory, the wrapper that ties its life
//! to the test process, readiness, stop and restart.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use super::four_letter::{parse_mode, try_four_letter};
use super::ZkOptions;
use crate::watchdog::Watched;

/// How long a killed JVM may take to be reaped before we escalate.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);
/// Pause between readiness probes.
pub(super) const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// Lines of `server.log` included in failure messages.
const LOG_TAIL_LINES: usize = 60;

pub(super) const STANDALONE_MAIN: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";
pub(super) const QUORUM_MAIN: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";

/// Jars the Debian `zookeeper.jar` manifest forgets but Netty (the TLS
/// connection factory) needs.
const NETTY_JARS: &[&str] = &[
    "/usr/share/java/netty-codec.jar",
    "/usr/share/java/netty-resolver.jar",
    "/usr/share/java/netty-transport-native-unix-common.jar",
];

/// Why a server did not become ready, and whether retrying on new ports may help.
pub(super) struct StartFailure {
    pub(super) message: String,
    pub(super) port_in_use: bool,
}

/// A server process (standalone or ensemble member) with its directory.
pub(super) struct Node {
    label: String,
    pub(super) dir: PathBuf,
    client_port: u16,
    main_class: &'static str,
    process: Mutex<Option<Jvm>>,
    secure_port: Option<u16>,
    jvm_extra: Vec<String>,
    classpath: String,
    classpath_extra: Vec<&'static str>,
}

/// A running wrapper + JVM pair.
struct Jvm {
    watched: Watched,
    started: Instant,
}

impl Node {
    pub(super) fn new(
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
            classpath: String::new(),
            classpath_extra: Vec::new(),
        }
    }

    pub(super) fn set_options(&mut self, options: &ZkOptions, secure_port: Option<u16>) {
        self.secure_port = secure_port;
        self.jvm_extra = options.jvm.clone();
        self.classpath = options.resolved_classpath();
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

    pub(super) fn secure_addr(&self) -> SocketAddr {
        let port = self
            .secure_port
            .unwrap_or_else(|| panic!("{} has no TLS port (ZkOptions::tls)", self.label));
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    pub(super) fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.client_port))
    }

    pub(super) fn log_path(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    fn lock(&self) -> MutexGuard<'_, Option<Jvm>> {
        // A panic while holding the lock leaves the state usable; recover it.
        self.process
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn spawn(&self) {
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
            "==== zklock testkit: starting {} ====",
            self.label
        );
        let log_for_stderr = log
            .try_clone()
            .unwrap_or_else(|e| panic!("cloning log handle: {e}"));
        let pid_file = self.dir.join("java.pid");
        let _ = fs::remove_file(&pid_file);

        let mut command = Watched::command("zklock-zk-wrapper", &self.dir, Some(&pid_file), java());
        command
            .args(jvm_flags())
            .args(&self.jvm_extra)
            .arg("-cp")
            .arg(
                std::iter::once(self.classpath.clone())
                    .chain(self.classpath_extra.iter().map(|j| j.to_string()))
                    .collect::<Vec<_>>()
                    .join(":"),
            )
            .arg(self.main_class)
            .arg(self.dir.join("zoo.cfg"))
            .current_dir(&self.dir)
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_for_stderr));
        let watched = Watched::spawn(command)
            .unwrap_or_else(|e| panic!("{}: cannot run bash to start ZooKeeper: {e}", self.label));
        Jvm {
            watched,
            started: Instant::now(),
        }
    }

    pub(super) fn is_running(&self) -> bool {
        match self.lock().as_mut() {
            None => false,
            Some(jvm) => matches!(jvm.watched.try_wait(), Ok(None)),
        }
    }

    /// True if we started the JVM and did not stop it (so if it is not running, it died).
    pub(super) fn was_expected_running(&self) -> bool {
        self.lock().is_some()
    }

    pub(super) fn stop(&self) {
        let jvm = self.lock().take();
        if let Some(jvm) = jvm {
            jvm.stop(&self.label);
        }
    }

    pub(super) fn restart(&self) {
        let mut process = self.lock();
        if let Some(jvm) = process.take() {
            jvm.stop(&self.label);
        }
        *process = Some(self.spawn_jvm());
    }

    pub(super) fn java_pid(&self) -> Option<u32> {
        fs::read_to_string(self.dir.join("java.pid"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    }

    /// Polls the client port until the server answers `ruok` with `imok` and,
    /// if `serving`, `srvr` reports a `Mode:` (ZooKeeper says `imok` before it
    /// serves requests). Fails early if the JVM exits.
    pub(super) fn wait_answering(
        &self,
        timeout: Duration,
        serving: bool,
    ) -> Result<(), StartFailure> {
        let deadline = Instant::now() + timeout;
        loop {
            {
                let mut process = self.lock();
                let Some(jvm) = process.as_mut() else {
                    return Err(self.failure("was stopped while waiting for it"));
                };
                match jvm.watched.try_wait() {
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

    pub(super) fn log_says_port_in_use(&self) -> bool {
        let log = fs::read(self.log_path()).unwrap_or_default();
        let log = String::from_utf8_lossy(&log);
        log.contains("Address already in use") || log.contains("BindException")
    }

    pub(super) fn log_tail_message(&self) -> String {
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
    fn stop(self, label: &str) {
        if !self.watched.stop(STOP_TIMEOUT) {
            eprintln!("ZooKeeper {label}: wrapper did not exit after {STOP_TIMEOUT:?}; killed it");
        }
    }
}

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

/// `$JAVA_HOME/bin/java` when `JAVA_HOME` is set, else `java` from `PATH`.
fn java() -> PathBuf {
    match std::env::var_os("JAVA_HOME") {
        Some(home) if !home.is_empty() => Path::new(&home).join("bin").join("java"),
        _ => PathBuf::from("java"),
    }
}

/// The last `lines` lines of a file, or a note saying why it cannot be read.
pub(super) fn tail_of_file(path: &Path, lines: usize) -> String {
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
