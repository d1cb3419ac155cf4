//! The `zklock` processes the demo runs: built when missing, started,
//! watched line by line, killed.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread;
use std::time::{Duration, Instant};

use super::{fail, say, PATIENCE, POLL};

/// `target/<profile>/zklock` (the `zklock-cli` crate's binary), next to
/// `target/<profile>/examples/demo`; built with cargo first when it is
/// missing or older than the demo.
pub(crate) fn zklock_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|e| fail(format!("current_exe: {e}")));
    let profile_dir = exe
        .parent()
        .and_then(|examples| examples.parent())
        .unwrap_or_else(|| fail("cannot find the target directory"))
        .to_path_buf();
    let bin = profile_dir.join("zklock");
    let modified = |p: &PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let stale = match (modified(&bin), modified(&exe)) {
        (Some(b), Some(e)) => b < e,
        _ => true,
    };
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    if let (true, Some(cargo), true) = (
        stale,
        option_env!("CARGO"),
        manifest.join("Cargo.toml").exists(),
    ) {
        let mut build = Command::new(cargo);
        build
            .args(["build", "--quiet", "-p", "zklock-cli", "--bin", "zklock"])
            .current_dir(&manifest);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        if let Some(target) = profile_dir.parent() {
            build.env("CARGO_TARGET_DIR", target);
        }
        if !build.status().is_ok_and(|s| s.success()) && !bin.exists() {
            fail("cannot build the zklock binary");
        }
    }
    if !bin.exists() {
        fail(format!(
            "{} not found; run `cargo build --release -p zklock-cli` first",
            bin.display()
        ));
    }
    bin
}

/// A line from one of the demo's child processes.
pub(crate) struct Line {
    pub(crate) who: String,
    pub(crate) text: String,
    pub(crate) at: Instant,
}

/// What happened next among the demo's child processes.
pub(crate) enum Event {
    Line(Line),
    Exit { who: String, code: i32 },
}

/// Runs zklock processes and reports their output and exits in order.
pub(crate) struct Cli {
    bin: PathBuf,
    connect: String,
    tx: Sender<Line>,
    rx: Receiver<Line>,
    children: Vec<(String, Child)>,
    pending: VecDeque<Event>,
    exited: HashMap<String, i32>,
}

impl Cli {
    pub(crate) fn new(bin: PathBuf, connect: String) -> Cli {
        let (tx, rx) = mpsc::channel();
        Cli {
            bin,
            connect,
            tx,
            rx,
            children: Vec::new(),
            pending: VecDeque::new(),
            exited: HashMap::new(),
        }
    }

    pub(crate) fn command(&self, connect: &str, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.env_remove("ZKLOCK_CONNECT")
            .arg("-c")
            .arg(connect)
            .args(args);
        c
    }

    /// Starts `zklock [options] exec --data <who> <path> -- sh -c ...` as
    /// `who`, running [`work`].
    pub(crate) fn exec(
        &mut self,
        who: &str,
        connect: &str,
        options: &[&str],
        path: &str,
        seconds: &str,
    ) {
        let work = work(who, seconds);
        let mut args = options.to_vec();
        args.extend(["exec", "--data", who, path, "--", "sh", "-c", &work]);
        self.start(who, connect, &args);
    }

    /// Starts `zklock <args>` as `who`.
    pub(crate) fn start(&mut self, who: &str, connect: &str, args: &[&str]) {
        let mut child = self
            .command(connect, args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| fail(format!("starting zklock: {e}")));
        let forward = |pipe: Box<dyn Read + Send>, tx: Sender<Line>, who: String| {
            thread::spawn(move || {
                for text in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let at = Instant::now();
                    if tx
                        .send(Line {
                            who: who.clone(),
                            text,
                            at,
                        })
                        .is_err()
                    {
                        break;
                    }
                }
            });
        };
        forward(
            Box::new(child.stdout.take().unwrap()),
            self.tx.clone(),
            who.into(),
        );
        forward(
            Box::new(child.stderr.take().unwrap()),
            self.tx.clone(),
            who.into(),
        );
        self.exited.remove(who);
        self.children.push((who.into(), child));
    }

    /// Runs `zklock <args>` to the end and returns its stdout.
    pub(crate) fn output(&self, args: &[&str]) -> String {
        let out = self
            .command(&self.connect, args)
            .output()
            .unwrap_or_else(|e| fail(format!("running zklock: {e}")));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub(crate) fn show(line: Line) -> Event {
        say(format!("  {:<10}| {}", line.who, line.text));
        Event::Line(line)
    }

    /// The next line or exit, printed as it happens.
    pub(crate) fn next(&mut self) -> Event {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return ev;
            }
            if let Ok(line) = self.rx.recv_timeout(POLL) {
                return Cli::show(line);
            }
            if let Some(i) = self
                .children
                .iter_mut()
                .position(|(_, c)| matches!(c.try_wait(), Ok(Some(_))))
            {
                let (who, mut child) = self.children.remove(i);
                let status = child.wait().ok();
                let code = status.and_then(|s| s.code()).unwrap_or(-1);
                let how = match status.and_then(|s| s.signal()) {
                    Some(sig) => format!("killed by signal {sig}"),
                    None => format!("exited {code}"),
                };
                // Its last lines come before its exit.
                while let Ok(line) = self.rx.recv_timeout(Duration::from_millis(50)) {
                    let ev = Cli::show(line);
                    self.pending.push_back(ev);
                }
                say(format!("  {who:<10}| (zklock {how})"));
                self.exited.insert(who.clone(), code);
                self.pending.push_back(Event::Exit { who, code });
            }
            if Instant::now() >= deadline {
                fail(format!("nothing happened for {PATIENCE:?}"));
            }
        }
    }

    /// Waits for a line from `who` that contains `want`.
    pub(crate) fn wait_for(&mut self, who: &str, want: &str) -> Line {
        loop {
            match self.next() {
                Event::Line(line) if line.who == who && line.text.contains(want) => return line,
                Event::Exit { who: w, code } if w == who => {
                    fail(format!("{who} exited {code} before saying {want:?}"))
                }
                _ => {}
            }
        }
    }

    /// Waits for `who` to exit; returns its exit code.
    pub(crate) fn wait_exit(&mut self, who: &str) -> i32 {
        loop {
            if let Some(code) = self.exited.get(who) {
                return *code;
            }
            if !self.children.iter().any(|(w, _)| w == who) && self.pending.is_empty() {
                fail(format!("no process {who}"));
            }
            self.next();
        }
    }

    /// `who`'s pid and all its descendants, parents first.
    pub(crate) fn process_tree(&self, who: &str) -> Vec<u32> {
        let Some((_, child)) = self.children.iter().find(|(w, _)| w == who) else {
            return Vec::new();
        };
        let mut parents: Vec<(u32, u32)> = Vec::new();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            if let Some(ppid) = ppid {
                parents.push((pid, ppid));
            }
        }
        let mut tree = vec![child.id()];
        let mut i = 0;
        while i < tree.len() {
            let p = tree[i];
            tree.extend(
                parents
                    .iter()
                    .filter(|(_, pp)| *pp == p)
                    .map(|(pid, _)| *pid),
            );
            i += 1;
        }
        tree
    }

    pub(crate) fn kill9(&mut self, who: &str) {
        if let Some((_, child)) = self.children.iter_mut().find(|(w, _)| w == who) {
            let _ = child.kill();
        }
    }
}

impl Drop for Cli {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The command a demo holder runs: it says it got the lock, with its
/// fencing token, and sleeps `seconds`.
pub(crate) fn work(name: &str, seconds: &str) -> String {
    format!("echo \"{name} got the lock, fencing token $ZKLOCK_FENCING_TOKEN\"; sleep {seconds}")
}
