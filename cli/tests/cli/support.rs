//! What every topic shares: running zklock ([`zklock`], [`Proc`], [`run`],
//! [`hold`]), the scripts given to it as CMD, signals, the processes under it
//! (read from `/proc`), and `status --json` read strictly ([`Json`]).

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use testkit::zk;

const BIN: &str = env!("CARGO_BIN_EXE_zklock");
/// Bound for anything that should happen promptly.
pub(crate) const PROMPT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(25);

pub(crate) fn shared() -> String {
    zk::shared().connect_string()
}

pub(crate) fn zklock(connect: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env_remove("ZKLOCK_CONNECT")
        .arg("-c")
        .arg(connect)
        .args(args);
    cmd
}

/// A running zklock with its stdout lines and stderr collected.
pub(crate) struct Proc {
    label: String,
    pub(crate) child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    pub(crate) seen: Vec<String>,
    stderr: Arc<Mutex<String>>,
    stderr_reader: Option<JoinHandle<()>>,
}

impl Proc {
    pub(crate) fn spawn(mut cmd: Command) -> Proc {
        let label = format!("{cmd:?}");
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {label}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut err_pipe = child.stderr.take().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let stderr_reader = thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Proc {
            label,
            stdin: child.stdin.take(),
            child,
            lines,
            seen: Vec::new(),
            stderr,
            stderr_reader: Some(stderr_reader),
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for a stdout line equal to `want`.
    pub(crate) fn expect_line(&mut self, want: &str) {
        let deadline = Instant::now() + PROMPT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line == want => {
                    self.seen.push(line);
                    return;
                }
                Ok(line) => self.seen.push(line),
                Err(_) => panic!(
                    "{}: no line {want:?} within {PROMPT:?}; stdout so far {:?}; stderr {:?}",
                    self.label,
                    self.seen,
                    self.stderr()
                ),
            }
        }
    }

    /// Waits for a stdout line that starts with `prefix`, and returns it.
    pub(crate) fn expect_line_starting(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + PROMPT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.starts_with(prefix) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "{}: no line starting {prefix:?} within {PROMPT:?}; stdout so far {:?}; stderr {:?}",
                    self.label,
                    self.seen,
                    self.stderr()
                ),
            }
        }
    }

    /// Ends CMD's `read` by sending a line.
    pub(crate) fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits (bounded) for exit; returns the status, all stdout lines and stderr.
    pub(crate) fn finish(mut self, timeout: Duration) -> (ExitStatus, Vec<String>, String) {
        self.stdin = None;
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                panic!(
                    "{}: still running after {timeout:?}; stdout {:?}; stderr {:?}",
                    self.label,
                    self.seen,
                    self.stderr()
                );
            }
            thread::sleep(POLL);
        };
        // The pipes close once every process that shares them is gone.
        let end = Instant::now() + Duration::from_secs(5);
        if let Some(reader) = self.stderr_reader.take() {
            while !reader.is_finished() && Instant::now() < end {
                thread::sleep(POLL);
            }
        }
        while let Ok(line) = self
            .lines
            .recv_timeout(end.saturating_duration_since(Instant::now()))
        {
            self.seen.push(line);
        }
        let err = self.stderr();
        (status, std::mem::take(&mut self.seen), err)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs zklock to completion within `PROMPT`.
pub(crate) fn run(connect: &str, args: &[&str]) -> (i32, Vec<String>, String) {
    let (status, out, err) = Proc::spawn(zklock(connect, args)).finish(PROMPT);
    (status.code().unwrap_or(-1), out, err)
}

/// A process holding `path` until `release`: CMD prints `locked`, then reads a line.
pub(crate) fn hold(connect: &str, extra: &[&str], path: &str) -> Proc {
    let mut args = vec!["exec"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[path, "--", "sh", "-c", "echo locked; read x"]);
    let mut p = Proc::spawn(zklock(connect, &args));
    p.expect_line("locked");
    p
}

/// `zklock exec OPTIONS PATH -- sh -c SCRIPT sh DIR`: a shell script as
/// CMD, with a scratch directory as `$1`.
pub(crate) fn exec_script(
    connect: &str,
    options: &[&str],
    path: &str,
    script: &str,
    dir: &str,
) -> Proc {
    let mut args = vec!["exec"];
    args.extend_from_slice(options);
    args.extend_from_slice(&[path, "--", "sh", "-c", script, "sh", dir]);
    Proc::spawn(zklock(connect, &args))
}

/// A CMD for [`exec_script`] that writes its pid to `$1/cmd`, prints
/// `locked` and waits; on SIGTERM it creates `$1/<marker>` and exits `code`.
pub(crate) fn trapping_script(marker: &str, code: u8) -> String {
    format!(
        r#"trap 'echo {marker} > "$1/{marker}"; kill $! 2>/dev/null; exit {code}' TERM
echo $$ > "$1/cmd"
echo locked
sleep 60 & wait"#
    )
}

pub(crate) fn release(mut p: Proc) {
    p.send_line("go");
    let (status, _, err) = p.finish(PROMPT);
    assert_eq!(status.code(), Some(0), "holder: {err}");
}

pub(crate) fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args(["-s", sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -s {sig} {pid}");
}

pub(crate) fn one_line(err: &str) -> &str {
    let t = err.trim_end();
    assert!(
        !t.is_empty() && !t.contains('\n'),
        "expected one line on stderr, got {err:?}"
    );
    t
}

/// The pid a command wrote to `file`.
pub(crate) fn read_pid(file: &std::path::Path) -> u32 {
    let text =
        std::fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
    text.trim().parse().unwrap()
}

/// The live children of `pid`, as (pid, comm, command line), from /proc.
pub(crate) fn children_of(pid: u32) -> Vec<(u32, String, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...; comm may hold spaces and parentheses.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next().unwrap_or("Z");
        let ppid = fields.next().and_then(|p| p.parse::<u32>().ok());
        if ppid != Some(pid) || state == "Z" {
            continue;
        }
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        found.push((child, comm.trim().to_owned(), cmdline.trim().to_owned()));
    }
    found
}

pub(crate) fn comm_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// Number of contenders `zklock status --json` reports.
pub(crate) fn queue_len(connect: &str, path: &str) -> usize {
    let (code, out, err) = run(connect, &["status", "--json", path]);
    assert_eq!(code, 0, "status: {err}");
    let v = Json::parse(&out.join("\n"));
    v.get("queue").array().len()
}

/// `status --json` output, read strictly: every accessor panics on a missing
/// key or a value of another type.
#[derive(Clone)]
pub(crate) struct Json(serde_json::Value);

impl Json {
    pub(crate) fn parse(text: &str) -> Json {
        Json(serde_json::from_str(text).unwrap_or_else(|e| panic!("{e} in {text:?}")))
    }

    pub(crate) fn get(&self, key: &str) -> Json {
        let value = self.0.get(key);
        Json(
            value
                .unwrap_or_else(|| panic!("no {key:?} in {}", self.0))
                .clone(),
        )
    }

    pub(crate) fn str(&self) -> &str {
        self.0
            .as_str()
            .unwrap_or_else(|| panic!("not a string: {}", self.0))
    }

    pub(crate) fn num(&self) -> f64 {
        self.0
            .as_f64()
            .unwrap_or_else(|| panic!("not a number: {}", self.0))
    }

    pub(crate) fn array(&self) -> Vec<Json> {
        let items = self.0.as_array();
        items
            .unwrap_or_else(|| panic!("not an array: {}", self.0))
            .iter()
            .cloned()
            .map(Json)
            .collect()
    }
}

/// A command for `sh -c` that prints `locked`, waits, and when `signal`
/// reaches it prints `got SIGNAL` and exits with `code`.
pub(crate) fn until_signalled(signal: &str, code: i32) -> String {
    format!(
        "trap 'echo \"got {signal}\"; kill $! 2>/dev/null; exit {code}' {signal}\necho locked\nsleep 60 & wait"
    )
}
