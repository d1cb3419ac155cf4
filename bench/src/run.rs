//! Worker processes: starting one, answering its stages, reading its result;
//! readings of a process from `/proc/<pid>` and of the server from its
//! four-letter words.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use testkit::zk;

use zklock_bench::json::Json;
use zklock_bench::BoxResult;

/// A worker whose stdout lines arrive on a channel and whose stderr tail is
/// kept for error messages. Killed when dropped unfinished.
pub struct Worker {
    label: String,
    child: Child,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
    deadline: Instant,
    timeout: Duration,
}

impl Worker {
    pub fn start(label: String, mut cmd: Command, timeout: Duration) -> BoxResult<Worker> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{label}: cannot start: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut stderr_pipe = child.stderr.take().ok_or("no stderr")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let keep = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut s = keep.lock().unwrap_or_else(|p| p.into_inner());
                s.push_str(&String::from_utf8_lossy(&buf[..n]));
                if s.len() > 16_384 {
                    let cut = s.len() - 8_192;
                    let cut = (cut..s.len()).find(|&i| s.is_char_boundary(i)).unwrap_or(0);
                    s.drain(..cut);
                }
            }
        });
        Ok(Worker {
            label,
            child,
            lines: rx,
            stderr,
            deadline: Instant::now() + timeout,
            timeout,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The time left before this worker's deadline.
    pub fn time_left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    fn failure(&mut self, what: &str) -> Box<dyn std::error::Error + Send + Sync> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let err = self.stderr.lock().map(|s| s.clone()).unwrap_or_default();
        let tail: Vec<&str> = err.lines().rev().take(25).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!(
            "{}: {what}\n--- stderr tail ---\n{}",
            self.label,
            tail.join("\n")
        )
        .into()
    }

    fn next_line(&mut self) -> BoxResult<Option<String>> {
        match self.lines.recv_timeout(self.time_left()) {
            Ok(l) => Ok(Some(l)),
            Err(RecvTimeoutError::Disconnected) => Ok(None),
            Err(RecvTimeoutError::Timeout) => {
                let t = self.timeout;
                Err(self.failure(&format!("not finished within {t:?}")))
            }
        }
    }

    fn send(&mut self, line: &str) {
        if let Some(stdin) = self.child.stdin.as_mut() {
            let _ = writeln!(stdin, "{line}");
            let _ = stdin.flush();
        }
    }

    /// Answers every `S <stage>` line after `on_stage` has run, returns the
    /// worker's JSON result once it has exited cleanly.
    pub fn drive(
        mut self,
        mut on_stage: impl FnMut(&str, &Worker) -> BoxResult<()>,
    ) -> BoxResult<Json> {
        let mut result = None;
        while let Some(line) = self.next_line()? {
            if let Some(stage) = line.strip_prefix("S ") {
                if let Err(e) = on_stage(stage.trim(), &self) {
                    return Err(self.failure(&format!("at stage {stage}: {e}")));
                }
                self.send("go");
            } else if line.starts_with('{') {
                match Json::parse(&line) {
                    Ok(j) => result = Some(j),
                    Err(e) => return Err(self.failure(&format!("bad JSON ({e}): {line:.200}"))),
                }
            } else if !line.trim().is_empty() {
                eprintln!("  [{}] {line:.300}", self.label);
            }
        }
        drop(self.child.stdin.take());
        let status = loop {
            if let Some(s) = self.child.try_wait()? {
                break s;
            }
            if self.time_left().is_zero() {
                return Err(self.failure("did not exit"));
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        if !status.success() {
            return Err(self.failure(&format!("exited with {status}")));
        }
        result.ok_or_else(|| self.failure("exited without a JSON result"))
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Readings of one process from `/proc/<pid>`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Proc {
    /// utime + stime of every thread, live or exited, in clock ticks.
    pub ticks: u64,
    pub rss_kb: u64,
    pub hwm_kb: u64,
    pub threads: u64,
}

/// Clock ticks per second (`getconf CLK_TCK`, 100 on Linux).
pub const CLK_TCK: f64 = 100.0;

impl Proc {
    pub fn of(pid: u32) -> Proc {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |i: usize| -> u64 { fields.get(i).and_then(|f| f.parse().ok()).unwrap_or(0) };
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let kb = |key: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| {
                    v.trim_start_matches(':')
                        .split_whitespace()
                        .next()?
                        .parse()
                        .ok()
                })
                .unwrap_or(0)
        };
        let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| d.count() as u64)
            .unwrap_or(0);
        // utime and stime are the 14th and 15th fields of the whole line.
        Proc {
            ticks: field(11) + field(12),
            rss_kb: kb("VmRSS"),
            hwm_kb: kb("VmHWM"),
            threads,
        }
    }

    /// CPU seconds from `self` to `later`.
    pub fn cpu_s_until(&self, later: &Proc) -> f64 {
        later.ticks.saturating_sub(self.ticks) as f64 / CLK_TCK
    }
}

/// The server's counters that the bench reads.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mntr {
    pub received: f64,
    pub sent: f64,
    pub watches: f64,
    /// Watches fired (notifications sent), all four kinds.
    pub notifications: f64,
    /// Four-letter words sent by the bench up to and including this one:
    /// each is counted by the server as a received packet.
    pub words: f64,
}

/// The server the bench reads counters from, and a count of its own
/// four-letter words (each is one packet in the server's counters).
pub struct Server {
    pub addr: SocketAddr,
    words: Mutex<u64>,
}

impl Server {
    pub fn new(addr: SocketAddr) -> Server {
        Server {
            addr,
            words: Mutex::new(0),
        }
    }

    pub fn word(&self, w: &str) -> String {
        let mut n = self.words.lock().unwrap_or_else(|p| p.into_inner());
        *n += 1;
        zk::try_four_letter(self.addr, w).unwrap_or_default()
    }

    pub fn mntr(&self) -> Mntr {
        let text = self.word("mntr");
        let words = *self.words.lock().unwrap_or_else(|p| p.into_inner()) as f64;
        let mut m = Mntr {
            received: f64::NAN,
            sent: f64::NAN,
            watches: f64::NAN,
            notifications: 0.0,
            words,
        };
        for l in text.lines() {
            let mut it = l.split_whitespace();
            let (Some(k), Some(v)) = (it.next(), it.next()) else {
                continue;
            };
            let Ok(v) = v.parse::<f64>() else { continue };
            match k {
                "zk_packets_received" => m.received = v,
                "zk_packets_sent" => m.sent = v,
                "zk_watch_count" => m.watches = v,
                "zk_sum_node_created_watch_count"
                | "zk_sum_node_deleted_watch_count"
                | "zk_sum_node_changed_watch_count"
                | "zk_sum_node_children_watch_count" => m.notifications += v,
                _ => {}
            }
        }
        m
    }

    /// `Total watches:` of `wchs`.
    pub fn total_watches(&self) -> f64 {
        self.word("wchs")
            .lines()
            .find_map(|l| l.strip_prefix("Total watches:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(f64::NAN)
    }

    /// The last zxid the server applied (`Zxid: 0x...` of `srvr`): the
    /// change between two readings counts the transactions committed in
    /// between (within one leader epoch, as here). NaN if unreadable.
    pub fn zxid(&self) -> f64 {
        self.word("srvr")
            .lines()
            .find_map(|l| l.trim().strip_prefix("Zxid:"))
            .and_then(|v| i64::from_str_radix(v.trim().trim_start_matches("0x"), 16).ok())
            .map_or(f64::NAN, |z| z as f64)
    }

    /// The `cons` listing: one line per client connection, with its
    /// packets received (`recved=`) and session id (`sid=0x...`).
    pub fn cons(&self) -> String {
        self.word("cons")
    }

    /// The first line of `srvr`'s version.
    pub fn version(&self) -> String {
        self.word("srvr")
            .lines()
            .next()
            .unwrap_or("")
            .trim_start_matches("Zookeeper version:")
            .trim()
            .split(['-', ','])
            .next()
            .unwrap_or("")
            .to_owned()
    }
}

impl Mntr {
    /// Client requests between `self` and `later`: received packets less the
    /// bench's own four-letter words.
    pub fn requests_until(&self, later: &Mntr) -> f64 {
        later.received - self.received - (later.words - self.words)
    }

    pub fn notifications_until(&self, later: &Mntr) -> f64 {
        later.notifications - self.notifications
    }
}

/// The packets received on each connection of a `cons` listing, by session
/// id (lower-case hex without `0x`).
pub fn cons_received(cons: &str) -> std::collections::BTreeMap<String, f64> {
    let mut m = std::collections::BTreeMap::new();
    for line in cons.lines() {
        let Some((_, fields)) = line.split_once('(') else {
            continue;
        };
        let fields = fields.trim_end().trim_end_matches(')');
        let (mut sid, mut recved) = (None, None);
        for f in fields.split(',') {
            if let Some(v) = f.strip_prefix("sid=0x") {
                sid = Some(v.to_ascii_lowercase());
            } else if let Some(v) = f.strip_prefix("recved=") {
                recved = v.parse::<f64>().ok();
            }
        }
        if let (Some(sid), Some(recved)) = (sid, recved) {
            m.insert(sid, recved);
        }
    }
    m
}

/// mean, p50, p99 of nanosecond samples, in microseconds.
pub fn stats_us(mut ns: Vec<f64>) -> (f64, f64, f64) {
    ns.retain(|x| x.is_finite());
    if ns.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    ns.sort_by(f64::total_cmp);
    let n = ns.len();
    let pct = |p: usize| ns[(n * p / 100).min(n - 1)] / 1e3;
    (ns.iter().sum::<f64>() / n as f64 / 1e3, pct(50), pct(99))
}
