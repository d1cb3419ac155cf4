//! A real ZooKeeper 3.8 server whose in-memory tree a test can edit:
//! `testkit/harness/ZkHarness.java` embeds ZooKeeper's own standalone server
//! (ZooKeeperServer + NIO ServerCnxnFactory from Debian's `zookeeper.jar`) and
//! takes commands on stdin. It exists to put a lock parent's sequence counter
//! (its stored cversion) near 2^31 - 1, which no client request can do and
//! which would take 2^31 creates to reach honestly.
//!
//! The JVM's stdin is a pipe only this process holds: if the test process
//! dies, the harness reads EOF, shuts the server down and deletes its
//! directory. [`ZkHarness::stop`] (or drop) shuts it down on purpose.

use std::collections::hash_map::DefaultHasher;
use std::fs::{self, OpenOptions};
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use crate::scratch::{subsec_nanos, target_dir, testkit_dir};
use crate::scratch_dir;

/// How long the embedded server may take to bind and print its port.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound for one command's answer.
const REPLY_TIMEOUT: Duration = Duration::from_secs(20);

/// What the server stores for a node, as its DataTree holds it (not the
/// `Stat` clients see: DataNode.copyStat shows cversion as
/// `2 × stored − numChildren`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredStat {
    /// The stored cversion: the number the next sequential child is named with.
    pub cversion: i32,
    pub pzxid: i64,
    pub num_children: i32,
}

struct Io {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

/// One embedded standalone server on a free 127.0.0.1 port. See the module docs.
pub struct ZkHarness {
    addr: SocketAddr,
    dir: PathBuf,
    io: Mutex<Io>,
}

impl ZkHarness {
    /// Starts a server with ZooKeeper's tickTime `tick` (sessions may ask
    /// for 2–20 ticks). Panics, with the server's log, if it cannot start.
    pub fn start(tick: Duration) -> ZkHarness {
        let classes = harness_classes();
        let dir = scratch_dir("harness");
        let log_path = dir.join("server.log");
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .unwrap_or_else(|e| panic!("opening {}: {e}", log_path.display()));
        let mut child = Command::new("java")
            .args([
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-XX:-UsePerfData",
                "-Djava.net.preferIPv4Stack=true",
                "-Dzookeeper.jmx.log4j.disable=true",
            ])
            .arg("-cp")
            .arg(format!("{}:{}", classes.display(), server_classpath()))
            .arg("ZkHarness")
            .arg(&dir)
            .arg(tick.as_millis().max(1).to_string())
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap_or_else(|e| panic!("ZkHarness: cannot run `java` ({e}); a JDK is needed"));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        thread::Builder::new()
            .name("zk-harness-stdout".into())
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            })
            .expect("spawning the harness reader");
        let mut io = Io {
            child,
            stdin,
            lines,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        let port = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match io.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(port) = line.strip_prefix("zkh ready ") {
                        break port
                            .trim()
                            .parse::<u16>()
                            .unwrap_or_else(|e| panic!("ZkHarness: bad port in {line:?}: {e}"));
                    }
                }
                Err(e) => {
                    let _ = io.child.kill();
                    let status = io.child.wait();
                    panic!(
                        "ZkHarness did not start ({e:?}, exit {status:?}); log {}:\n{}",
                        log_path.display(),
                        log_end(&log_path)
                    );
                }
            }
        };
        ZkHarness {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            dir,
            io: Mutex::new(io),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `127.0.0.1:<port>`, for zklock, Curator and kazoo clients.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Sets `path`'s stored cversion, so its next sequential child is named
    /// `value` (as if `value` children had been created before). Panics if
    /// the node does not exist.
    pub fn set_sequence_counter(&self, path: &str, value: i32) {
        let answer = self.command(&format!("cversion {path} {value}"));
        assert_eq!(answer, "ok", "ZkHarness: cversion {path} {value}: {answer}");
    }

    /// What the server's DataTree stores for `path`. Panics if it does not exist.
    pub fn stored(&self, path: &str) -> StoredStat {
        let answer = self.command(&format!("stored {path}"));
        let fields: Vec<&str> = answer.split(' ').collect();
        match fields.as_slice() {
            ["ok", cv, pzxid, n] => StoredStat {
                cversion: cv.parse().expect("cversion"),
                pzxid: pzxid.parse().expect("pzxid"),
                num_children: n.parse().expect("numChildren"),
            },
            _ => panic!("ZkHarness: stored {path}: {answer}"),
        }
    }

    /// Shuts the server down and waits for the JVM to exit.
    pub fn stop(&self) {
        let mut io = self.io.lock().unwrap_or_else(|p| p.into_inner());
        if io.stdin.is_none() {
            return;
        }
        if let Some(stdin) = io.stdin.as_mut() {
            let _ = stdin.write_all(b"stop\n");
            let _ = stdin.flush();
        }
        let _ = io.lines.recv_timeout(REPLY_TIMEOUT);
        io.stdin = None;
        let deadline = Instant::now() + REPLY_TIMEOUT;
        loop {
            match io.child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
                _ => {
                    let _ = io.child.kill();
                    let _ = io.child.wait();
                    return;
                }
            }
        }
    }

    fn command(&self, line: &str) -> String {
        let mut io = self.io.lock().unwrap_or_else(|p| p.into_inner());
        let stdin = io
            .stdin
            .as_mut()
            .unwrap_or_else(|| panic!("ZkHarness: `{line}` after stop"));
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|_| stdin.flush())
            .unwrap_or_else(|e| panic!("ZkHarness: writing `{line}`: {e}"));
        let deadline = Instant::now() + REPLY_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match io.lines.recv_timeout(left) {
                Ok(answer) => {
                    if let Some(rest) = answer.strip_prefix("zkh ") {
                        return rest.to_string();
                    }
                }
                Err(RecvTimeoutError::Timeout) => panic!("ZkHarness: no answer to `{line}`"),
                Err(RecvTimeoutError::Disconnected) => panic!(
                    "ZkHarness died before answering `{line}`:\n{}",
                    log_end(&self.dir.join("server.log"))
                ),
            }
        }
    }
}

impl Drop for ZkHarness {
    fn drop(&mut self) {
        self.stop();
        if std::env::var_os("ZKLOCK_KEEP_ZK_DIRS").is_some() {
            eprintln!("keeping ZooKeeper directory {}", self.dir.display());
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// Debian's server jar (its manifest brings jute, netty and slf4j-api) plus
/// slf4j-simple when present, so the log says something.
fn server_classpath() -> String {
    let mut cp = String::from("/usr/share/java/zookeeper.jar");
    let simple = "/usr/share/java/slf4j-simple.jar";
    if Path::new(simple).exists() {
        cp.push(':');
        cp.push_str(simple);
    }
    cp
}

/// Compiles ZkHarness.java once per source version into
/// `<target>/peers/harness-<hash>/` (built under a temporary name and
/// renamed, so concurrent test processes never see a partial build).
fn harness_classes() -> &'static Path {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match DIR.get_or_init(compile) {
        Ok(dir) => dir,
        Err(e) => panic!("{e}"),
    }
}

fn compile() -> Result<PathBuf, String> {
    let source = testkit_dir().join("harness/ZkHarness.java");
    let text = fs::read(&source)
        .map_err(|e| format!("ZkHarness: cannot read {}: {e}", source.display()))?;
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    let root = target_dir().join("peers");
    let dir = root.join(format!("harness-{:016x}", hasher.finish()));
    if dir.join("ZkHarness.class").is_file() {
        return Ok(dir);
    }
    let tmp = root.join(format!(
        ".tmp-harness-{}-{}",
        std::process::id(),
        subsec_nanos()
    ));
    fs::create_dir_all(&tmp).map_err(|e| format!("ZkHarness: creating {}: {e}", tmp.display()))?;
    let output = Command::new("javac")
        .args(["-nowarn", "-encoding", "UTF-8", "-d"])
        .arg(&tmp)
        .arg("-cp")
        .arg(server_classpath())
        .arg(&source)
        .output()
        .map_err(|e| format!("ZkHarness: cannot run `javac` ({e}); a JDK is needed"))?;
    if !output.status.success() {
        let _ = fs::remove_dir_all(&tmp);
        return Err(format!(
            "ZkHarness: javac failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    if let Err(e) = fs::rename(&tmp, &dir) {
        let _ = fs::remove_dir_all(&tmp);
        if !dir.join("ZkHarness.class").is_file() {
            return Err(format!(
                "ZkHarness: moving classes to {}: {e}",
                dir.display()
            ));
        }
    }
    Ok(dir)
}

/// The end of the harness's log (its last 4 KiB), for failure messages.
fn log_end(path: &Path) -> String {
    match fs::read(path) {
        Ok(bytes) => {
            String::from_utf8_lossy(&bytes[bytes.len().saturating_sub(4096)..]).into_owned()
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}
