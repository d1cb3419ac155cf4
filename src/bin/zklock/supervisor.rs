//! Passing SIGINT/SIGTERM/SIGHUP on to CMD without unsafe code or libc.
//!
//! Safe Rust cannot install a signal handler, so the process the user
//! started (the one that receives `kill -TERM <pid>`) must not be a Rust
//! process: it becomes a POSIX shell, whose `trap` can catch signals.
//!
//! 1. `zklock` (pid P) checks the arguments, creates two FIFOs in a private
//!    temporary directory (`mkfifo`), and starts a copy of itself, the
//!    *worker* W, in a process group of its own. W opens both FIFOs first
//!    thing, then connects, takes the lock, runs CMD and watches for loss.
//! 2. P opens the `up` FIFO (W -> P), removes the directory, and replaces
//!    itself (`exec`, same pid) with `/bin/sh` running [`SCRIPT`]: stdin is
//!    `up`, stdout the `down` FIFO (P -> W).
//! 3. The shell traps HUP, INT, QUIT, TERM, USR1 and USR2 and writes the
//!    signal's name to
//!    `down`; W passes it to CMD with the shell's `kill` builtin. The shell
//!    blocks in `read` on `up` (a trapped signal interrupts it at once, no
//!    polling) until W reports `exit N`, then exits N. W reports CMD's pid
//!    (`cmd PID`) so that the shell can stop CMD if W dies unexpectedly.
//! 4. W notices that P is gone (its parent pid changes; it checks every
//!    100 ms): P was killed, e.g. with SIGKILL. W then stops CMD (SIGTERM,
//!    SIGKILL after the grace period) and closes its session, which frees the
//!    lock at once.
//!
//! Process groups: W has a group of its own, so a terminal's Ctrl-C (sent to
//! the foreground group) never reaches it; W runs with default signal
//! dispositions, which CMD inherits. When zklock runs in the foreground of a
//! terminal, CMD joins zklock's group: it can read the terminal, and Ctrl-C,
//! Ctrl-\ and hangups reach it directly, so SIGINT, SIGQUIT and SIGHUP are
//! not forwarded a second time. Otherwise
//! (no terminal, background job, services) CMD gets a group of its own and
//! signals go to that whole group, so CMD's children stop too.
//!
//! If any of this cannot be set up (no `/bin/sh`, no `mkfifo`, or
//! `ZKLOCK_NO_SUPERVISOR=1`), zklock runs the worker part in-process: all
//! works except passing signals on.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, Sender};

use crate::{complain, exit, Failure};

/// Directory holding the FIFOs (worker side).
const ENV_CTL: &str = "ZKLOCK_INTERNAL_CTL";
/// The supervisor's pid (worker side).
const ENV_PARENT: &str = "ZKLOCK_INTERNAL_PARENT";
/// The terminal's foreground process group for CMD to join, or empty.
const ENV_JOIN: &str = "ZKLOCK_INTERNAL_JOIN_PGRP";
/// Variables that must not leak into CMD.
pub const INTERNAL_ENV: [&str; 3] = [ENV_CTL, ENV_PARENT, ENV_JOIN];

/// How long the worker may take to open its end of the FIFOs.
const WORKER_START_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the worker checks that the supervisor still lives.
const PARENT_CHECK: Duration = Duration::from_millis(100);

/// The supervisor shell. `$1` is the worker's pid; stdin is `up`, stdout `down`.
const SCRIPT: &str = r#"w=$1 cmd= part=
for s in HUP INT QUIT TERM USR1 USR2; do trap "got=1; echo $s" $s; done
while :; do
  got= line=
  if IFS= read -r line; then
    line=$part$line part=
    case $line in
      "cmd "*) cmd=${line#cmd } ;;
      "exit "*) exit "${line#exit }" ;;
    esac
  elif [ -n "$got" ]; then
    part=$part$line
  else
    if [ -n "$cmd" ]; then kill -s TERM -- "$cmd" 2>/dev/null; fi
    echo "zklock: internal error: the process holding the lock (pid $w) died" >&2
    exit 70
  fi
done
"#;

/// A type with no values: `supervise` returns only on failure.
pub enum Never {}

/// A signal the supervisor passes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sig {
    Hup,
    Int,
    Quit,
    Term,
    Usr1,
    Usr2,
}

impl Sig {
    const ALL: [Sig; 6] = [
        Sig::Hup,
        Sig::Int,
        Sig::Quit,
        Sig::Term,
        Sig::Usr1,
        Sig::Usr2,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Sig::Hup => "HUP",
            Sig::Int => "INT",
            Sig::Quit => "QUIT",
            Sig::Term => "TERM",
            Sig::Usr1 => "USR1",
            Sig::Usr2 => "USR2",
        }
    }

    /// Linux's numbers (for the 128+N exit code).
    pub fn number(self) -> u8 {
        match self {
            Sig::Hup => 1,
            Sig::Int => 2,
            Sig::Quit => 3,
            Sig::Term => 15,
            Sig::Usr1 => 10,
            Sig::Usr2 => 12,
        }
    }

    /// Signals a terminal sends to its whole foreground process group
    /// (Ctrl-C, Ctrl-\, hangup).
    pub fn sent_by_terminals(self) -> bool {
        matches!(self, Sig::Int | Sig::Quit | Sig::Hup)
    }

    fn parse(s: &str) -> Option<Sig> {
        Sig::ALL.into_iter().find(|sig| sig.name() == s.trim())
    }
}

/// What the worker hears from its supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// zklock received this signal.
    Signal(Sig),
    /// zklock is gone (killed with SIGKILL, most likely).
    ParentDied,
}

/// The worker's side of the channel to its supervisor.
pub struct Control {
    pub events: Receiver<Event>,
    up: Mutex<File>,
    /// The process group CMD joins (zklock's, in a terminal's foreground).
    pub join_pgrp: Option<i32>,
    /// The supervisor's pid: the zklock process the user started.
    pub parent: u32,
}

impl Control {
    fn say(&self, line: &str) {
        let mut up = match self.up.lock() {
            Ok(u) => u,
            Err(poisoned) => poisoned.into_inner(),
        };
        // One write of a short line: atomic on a pipe.
        let _ = up.write_all(format!("{line}\n").as_bytes());
    }

    /// Tells the supervisor whom to stop should the worker die: a pid, or
    /// `-PGID` for a whole group.
    pub fn report_cmd(&self, target: &str) {
        self.say(&format!("cmd {target}"));
    }

    /// Tells the supervisor to exit with `code`.
    pub fn report_exit(&self, code: u8) {
        self.say(&format!("exit {code}"));
    }
}

/// Sends `sig` (a name such as TERM or KILL) to `target` (a pid, or -PGID)
/// with the shell's `kill` builtin, which every system has.
pub fn send_signal(sig: &str, target: &str) -> bool {
    log::debug!("kill -s {sig} -- {target}");
    Command::new("/bin/sh")
        .args([
            "-c",
            "kill -s \"$1\" -- \"$2\" 2>/dev/null",
            "sh",
            sig,
            target,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// In the worker (started by [`supervise`]): opens the channel to the
/// supervisor. `None` in the process the user started.
pub fn worker_control() -> Result<Option<Control>, Failure> {
    let Some(dir) = std::env::var_os(ENV_CTL) else {
        return Ok(None);
    };
    let dir = PathBuf::from(dir);
    let parent: u32 = std::env::var(ENV_PARENT)
        .ok()
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| {
            Failure::new(
                exit::SOFTWARE,
                format!("internal error: {ENV_PARENT} unset"),
            )
        })?;
    let join_pgrp = std::env::var(ENV_JOIN).ok().and_then(|g| g.parse().ok());
    let open = |name: &str| {
        // Read-write: never blocks, whoever opens first.
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(dir.join(name))
            .map_err(|e| {
                Failure::new(
                    exit::SOFTWARE,
                    format!("internal error: opening {}: {e}", dir.join(name).display()),
                )
            })
    };
    let down = open("down")?;
    let up = open("up")?;
    let (tx, events) = crossbeam_channel::unbounded();
    spawn_named("zklock-signals", {
        let tx = tx.clone();
        move || read_signals(down, &tx)
    });
    spawn_named("zklock-parent", move || watch_parent(parent, &tx));
    log::debug!("worker of supervisor {parent}; CMD joins process group {join_pgrp:?}");
    Ok(Some(Control {
        events,
        up: Mutex::new(up),
        join_pgrp,
        parent,
    }))
}

fn spawn_named(name: &str, body: impl FnOnce() + Send + 'static) {
    if let Err(e) = thread::Builder::new().name(name.into()).spawn(body) {
        log::error!("cannot start thread {name}: {e}");
    }
}

fn read_signals(down: File, tx: &Sender<Event>) {
    for line in BufReader::new(down).lines() {
        let Ok(line) = line else { return };
        match Sig::parse(&line) {
            Some(sig) => {
                log::info!("zklock got SIG{}", sig.name());
                if tx.send(Event::Signal(sig)).is_err() {
                    return;
                }
            }
            None => log::warn!("unknown message from the supervisor: {line:?}"),
        }
    }
}

fn watch_parent(parent: u32, tx: &Sender<Event>) {
    loop {
        thread::sleep(PARENT_CHECK);
        if std::os::unix::process::parent_id() != parent {
            log::warn!("zklock (pid {parent}) is gone");
            let _ = tx.send(Event::ParentDied);
            return;
        }
    }
}

/// Our process group when it is the foreground group of our terminal.
fn terminal_foreground_group() -> Option<i32> {
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    // pid (comm) state ppid pgrp session tty_nr tpgid ...; comm may hold spaces.
    let fields: Vec<&str> = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    let pgrp: i32 = fields.get(2)?.parse().ok()?;
    let tty: i64 = fields.get(4)?.parse().ok()?;
    let tpgid: i32 = fields.get(5)?.parse().ok()?;
    (tty != 0 && pgrp > 0 && tpgid == pgrp).then_some(pgrp)
}

fn private_dir() -> std::io::Result<PathBuf> {
    let base = std::env::temp_dir();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut last = None;
    for attempt in 0..16u32 {
        let dir = base.join(format!(
            "zklock-{}-{:x}",
            std::process::id(),
            nanos.wrapping_add(attempt)
        ));
        match fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no temporary directory")))
}

/// In the process the user started: sets up the worker and turns this
/// process into the supervisor shell. Returns only if that cannot be set up
/// before the worker starts; later failures exit.
pub fn supervise(argv: Vec<OsString>) -> Result<Never, String> {
    if std::env::var_os("ZKLOCK_NO_SUPERVISOR").is_some_and(|v| !v.is_empty() && v != "0") {
        return Err("ZKLOCK_NO_SUPERVISOR is set".into());
    }
    let shell = Path::new("/bin/sh");
    if !shell.exists() {
        return Err("no /bin/sh".into());
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find our executable: {e}"))?;
    let dir = private_dir().map_err(|e| format!("cannot create a temporary directory: {e}"))?;
    let (up, down) = (dir.join("up"), dir.join("down"));
    let made = Command::new("mkfifo")
        .args(["-m", "600"])
        .arg(&up)
        .arg(&down)
        .stdin(Stdio::null())
        .status();
    if !made.is_ok_and(|s| s.success()) {
        let _ = fs::remove_dir_all(&dir);
        return Err("mkfifo failed".into());
    }
    let join = terminal_foreground_group();
    let mut worker = Command::new(&exe);
    worker
        .args(&argv)
        .env(ENV_CTL, &dir)
        .env(ENV_PARENT, std::process::id().to_string())
        .env(ENV_JOIN, join.map(|g| g.to_string()).unwrap_or_default())
        .process_group(0);
    let mut worker = match worker.spawn() {
        Ok(w) => w,
        Err(e) => {
            let _ = fs::remove_dir_all(&dir);
            return Err(format!("cannot start {}: {e}", exe.display()));
        }
    };
    let fail = |worker: &mut std::process::Child, why: String| -> ! {
        let _ = worker.kill();
        let _ = fs::remove_dir_all(&dir);
        complain(&format!("internal error: {why}"));
        std::process::exit(exit::SOFTWARE.into())
    };

    // Opening `up` read-only returns once the worker has it open: the
    // worker is up. Done in a thread so that a worker dying first is seen.
    let (tx, rx) = crossbeam_channel::bounded(1);
    let up_path = up.clone();
    thread::spawn(move || {
        let _ = tx.send(File::open(up_path));
    });
    let deadline = Instant::now() + WORKER_START_TIMEOUT;
    let up_file = loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(Ok(f)) => break f,
            Ok(Err(e)) => fail(&mut worker, format!("opening {}: {e}", up.display())),
            Err(_) => {}
        }
        if let Ok(Some(status)) = worker.try_wait() {
            // It failed before opening its channel and said why itself.
            let _ = fs::remove_dir_all(&dir);
            std::process::exit(status.code().unwrap_or(exit::SOFTWARE.into()));
        }
        if Instant::now() >= deadline {
            fail(&mut worker, "the worker process did not start".into());
        }
    };
    let down_file = match OpenOptions::new().read(true).write(true).open(&down) {
        Ok(f) => f,
        Err(e) => fail(&mut worker, format!("opening {}: {e}", down.display())),
    };
    let _ = fs::remove_dir_all(&dir);

    let (stdin, stdout) = match (up_file.try_clone(), down_file.try_clone()) {
        (Ok(a), Ok(b)) => (a, b),
        _ => fail(&mut worker, "cannot duplicate a file descriptor".into()),
    };
    let err = Command::new(shell)
        .arg0("zklock")
        .arg("-c")
        .arg(SCRIPT)
        .arg("zklock")
        .arg(worker.id().to_string())
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(stdout))
        .exec();
    // Still here: exec failed. Wait for the worker without forwarding signals.
    log::warn!(
        "cannot run {}: {err}; signals will not reach CMD",
        shell.display()
    );
    wait_for_worker(up_file)
}

/// Without the shell: waits for the worker's `exit N` and exits N.
fn wait_for_worker(up: File) -> ! {
    for line in BufReader::new(up).lines() {
        let Ok(line) = line else { break };
        if let Some(code) = line.strip_prefix("exit ") {
            std::process::exit(code.trim().parse().unwrap_or(exit::SOFTWARE.into()));
        }
    }
    complain("internal error: the process holding the lock died");
    std::process::exit(exit::SOFTWARE.into())
}
