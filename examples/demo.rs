//! A one-minute tour of `zklock` against a real ZooKeeper ensemble.
//!
//! Run it with `./scripts/demo.sh`, or `cargo run --release --example demo`.
//! Without `ZKLOCK_CONNECT` it starts its own 3-node ensemble on free
//! loopback ports (and stops it at the end); with `ZKLOCK_CONNECT` it uses
//! that server, under a path of its own, and skips the step that kills an
//! ensemble member.
//!
//! It shows: `zklock exec` processes queueing on one lock and getting it in
//! order; a holder killed with SIGKILL and the next one taking over; the
//! ensemble's leader killed while a lock is held, and the lock surviving; a
//! session expired on purpose and its holder told that it lost the lock
//! (exit 75); and the fencing token rising with every holder.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use testkit::{poll_until, proxy, zk};
use zklock::recipes::{inspect, LockState, Mutex};
use zklock::Client;

/// Bound for every wait in the demo.
const PATIENCE: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(25);
/// Session timeout of the clients the demo expires on purpose.
const SHORT_SESSION: &str = "4";

fn t0() -> Instant {
    static T0: OnceLock<Instant> = OnceLock::new();
    *T0.get_or_init(Instant::now)
}

fn say(text: impl AsRef<str>) {
    println!("[{:5.1}s] {}", t0().elapsed().as_secs_f64(), text.as_ref());
}

fn heading(text: &str) {
    println!();
    say(format!("== {text}"));
}

fn fail(why: impl AsRef<str>) -> ! {
    eprintln!("demo failed: {}", why.as_ref());
    std::process::exit(1);
}

/// `target/<profile>/zklock` (the `zklock-cli` crate's binary), next to
/// `target/<profile>/examples/demo`; built with cargo first when it is
/// missing or older than the demo.
fn zklock_binary() -> PathBuf {
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
struct Line {
    who: String,
    text: String,
    at: Instant,
}

/// What happened next among the demo's child processes.
enum Event {
    Line(Line),
    Exit { who: String, code: i32 },
}

/// Runs zklock processes and reports their output and exits in order.
struct Cli {
    bin: PathBuf,
    connect: String,
    tx: Sender<Line>,
    rx: Receiver<Line>,
    children: Vec<(String, Child)>,
    pending: VecDeque<Event>,
    exited: HashMap<String, i32>,
}

impl Cli {
    fn new(bin: PathBuf, connect: String) -> Cli {
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

    fn command(&self, connect: &str, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.env_remove("ZKLOCK_CONNECT")
            .arg("-c")
            .arg(connect)
            .args(args);
        c
    }

    /// Starts `zklock <args>` as `who`.
    fn start(&mut self, who: &str, connect: &str, args: &[&str]) {
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
    fn output(&self, args: &[&str]) -> String {
        let out = self
            .command(&self.connect, args)
            .output()
            .unwrap_or_else(|e| fail(format!("running zklock: {e}")));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn show(line: Line) -> Event {
        say(format!("  {:<10}| {}", line.who, line.text));
        Event::Line(line)
    }

    /// The next line or exit, printed as it happens.
    fn next(&mut self) -> Event {
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
    fn wait_for(&mut self, who: &str, want: &str) -> Line {
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
    fn wait_exit(&mut self, who: &str) -> i32 {
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
    fn process_tree(&self, who: &str) -> Vec<u32> {
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

    fn kill9(&mut self, who: &str) {
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

/// Waits for `cond`, ending the demo with a message after [`PATIENCE`].
fn wait_until(what: &str, cond: impl FnMut() -> bool) {
    if !poll_until(PATIENCE, cond) {
        fail(format!("timed out waiting for {what}"));
    }
}

fn queue_len(client: &Client, path: &str) -> usize {
    inspect(client, path).map(|q| q.len()).unwrap_or(0)
}

/// `fencing token N` in a line printed by the demo's commands.
fn token_in(text: &str) -> i64 {
    text.rsplit(' ')
        .next()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| fail(format!("no token in {text:?}")))
}

/// The command each holder runs: say who got the lock, then work a while.
fn work(name: &str, seconds: &str) -> String {
    format!("echo \"{name} got the lock, fencing token $ZKLOCK_FENCING_TOKEN\"; sleep {seconds}")
}

fn indent(text: &str) {
    for line in text.lines() {
        println!("           {line}");
    }
}

fn main() {
    let bin = zklock_binary();
    let started = t0();
    println!("zklock demo: {}", bin.display());

    let external = std::env::var("ZKLOCK_CONNECT")
        .ok()
        .filter(|c| !c.trim().is_empty());
    let ensemble = match external {
        Some(_) => None,
        None => {
            say("starting a 3-node ZooKeeper ensemble on loopback (no ZKLOCK_CONNECT given)");
            let e = zk::ZkEnsemble::start(3);
            say(format!(
                "ensemble up: {} (leader: member {})",
                e.connect_string(),
                e.leader().map_or("?".into(), |l| l.to_string())
            ));
            Some(e)
        }
    };
    let connect = external
        .clone()
        .unwrap_or_else(|| ensemble.as_ref().unwrap().connect_string());
    let base = match external {
        Some(_) => format!("/zklock-demo-{}", std::process::id()),
        None => "/demo".to_owned(),
    };
    let client = Client::connect(&connect, Duration::from_secs(10))
        .unwrap_or_else(|e| fail(format!("connecting to {connect}: {e}")));
    let mut cli = Cli::new(bin, connect.clone());
    let mut tokens: Vec<(String, i64)> = Vec::new();

    // ------------------------------------------------------------------
    heading("1. Four `zklock exec` processes queue on one lock");
    let path = format!("{base}/queue");
    for i in 1..=4 {
        let who = format!("worker-{i}");
        let cmd = work(&who, "0.6");
        say(format!(
            "$ zklock exec --data {who} {path} -- sh -c '...' &"
        ));
        cli.start(
            &who,
            &connect,
            &["exec", "--data", &who, &path, "--", "sh", "-c", &cmd],
        );
        // Start the next one only once this one is in the queue: a fixed order.
        wait_until("the worker to queue", || queue_len(&client, &path) >= i);
    }
    say(format!("$ zklock status {path}"));
    indent(&cli.output(&["status", &path]));
    let mut order = Vec::new();
    while order.len() < 4 {
        if let Event::Line(line) = cli.next() {
            if line.text.contains("got the lock") {
                order.push(line.who.clone());
                tokens.push((line.who, token_in(&line.text)));
            }
        }
    }
    for i in 1..=4 {
        cli.wait_exit(&format!("worker-{i}"));
    }
    if order != ["worker-1", "worker-2", "worker-3", "worker-4"] {
        fail(format!("out of order: {order:?}"));
    }
    say(format!(
        "=> one at a time, in the order they asked: {}",
        order.join(", ")
    ));

    // ------------------------------------------------------------------
    heading("2. A holder killed with SIGKILL; the next one takes over");
    let path = format!("{base}/sigkill");
    cli.start(
        "holder",
        &connect,
        &[
            "exec",
            "--data",
            "holder",
            &path,
            "--",
            "sh",
            "-c",
            &work("holder", "60"),
        ],
    );
    let line = cli.wait_for("holder", "got the lock");
    tokens.push(("holder".into(), token_in(&line.text)));
    cli.start(
        "successor",
        &connect,
        &[
            "exec",
            "--data",
            "successor",
            &path,
            "--",
            "sh",
            "-c",
            &work("successor", "0"),
        ],
    );
    wait_until("the successor to queue", || queue_len(&client, &path) == 2);
    say("$ kill -9 <pid of the holder's zklock>");
    let killed = Instant::now();
    cli.kill9("holder");
    let line = cli.wait_for("successor", "got the lock");
    tokens.push(("successor".into(), token_in(&line.text)));
    say(format!(
        "=> taken over {:.2}s after the SIGKILL: the kernel sent the command SIGTERM, and \
         zklock's release helper saw zklock die, waited for the command to end and deleted \
         the lock node, which frees the lock at once",
        line.at.duration_since(killed).as_secs_f64()
    ));
    cli.wait_exit("successor");

    say("now the whole process tree at once, as if its machine died:");
    cli.start(
        "machine",
        &connect,
        &[
            "--session-timeout",
            SHORT_SESSION,
            "exec",
            "--data",
            "machine",
            &path,
            "--",
            "sh",
            "-c",
            &work("machine", "60"),
        ],
    );
    let line = cli.wait_for("machine", "got the lock");
    tokens.push(("machine".into(), token_in(&line.text)));
    cli.start(
        "survivor",
        &connect,
        &[
            "exec",
            "--data",
            "survivor",
            &path,
            "--",
            "sh",
            "-c",
            &work("survivor", "0"),
        ],
    );
    wait_until("the survivor to queue", || queue_len(&client, &path) == 2);
    let tree = cli.process_tree("machine");
    say(format!(
        "$ kill -9 {}   (zklock, its release helper, the command and its child)",
        tree.iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    ));
    let killed = Instant::now();
    let _ = Command::new("/bin/sh")
        .args(["-c", "kill -9 \"$@\"", "sh"])
        .args(tree.iter().map(u32::to_string))
        .status();
    let line = cli.wait_for("survivor", "got the lock");
    tokens.push(("survivor".into(), token_in(&line.text)));
    say(format!(
        "=> nobody ended that session: the server expired it and survivor got the lock \
         {:.1}s after the kill (session timeout {SHORT_SESSION}s)",
        line.at.duration_since(killed).as_secs_f64()
    ));
    cli.wait_exit("survivor");

    // ------------------------------------------------------------------
    heading("3. The ensemble's leader dies while a lock is held");
    if let Some(ens) = &ensemble {
        let path = format!("{base}/failover");
        let holder = Client::connect(&connect, Duration::from_secs(10))
            .unwrap_or_else(|e| fail(format!("connecting: {e}")));
        let guard = Mutex::new(&holder, &path)
            .and_then(|m| m.lock())
            .unwrap_or_else(|e| fail(format!("locking {path}: {e}")));
        let token = guard.fencing_token();
        say(format!(
            "an in-process holder (zklock library) holds {path}, fencing token {token}"
        ));
        tokens.push(("in-process".into(), token));
        let states = guard.state_changes();
        let cli_path = format!("{base}/failover-cli");
        cli.start(
            "cli-holder",
            &connect,
            &[
                "exec",
                &cli_path,
                "--",
                "sh",
                "-c",
                &format!(
                    "{}; echo 'cli-holder finished its work'",
                    work("cli-holder", "5")
                ),
            ],
        );
        let line = cli.wait_for("cli-holder", "got the lock");
        tokens.push(("cli-holder".into(), token_in(&line.text)));
        let leader = ens.leader().unwrap_or_else(|| fail("no leader"));
        say(format!(
            "killing ensemble member {leader} (the leader, {}) with SIGKILL",
            ens.member_addr(leader)
        ));
        ens.kill(leader);
        let killed = Instant::now();
        let mut seen = vec![states.recv().unwrap_or(LockState::Lost)];
        wait_until("a new leader", || ens.leader().is_some());
        say(format!(
            "member {} leads now ({:.1}s after the kill)",
            ens.leader().unwrap_or(0),
            killed.elapsed().as_secs_f64()
        ));
        // Followers drop their clients during the election; the holder's
        // session moves to a live member and the lock stays.
        let deadline = Instant::now() + PATIENCE;
        loop {
            while let Ok(s) = states.try_recv() {
                say(format!("  in-process holder's lock state: {s:?}"));
                seen.push(s);
            }
            let settled = guard.state() == LockState::Held
                && holder.state() == zklock::SessionState::Connected;
            if settled && (seen.len() > 1 || killed.elapsed() > Duration::from_secs(3)) {
                break;
            }
            if Instant::now() >= deadline || guard.state() == LockState::Lost {
                fail(format!("the lock did not survive: {seen:?}"));
            }
            thread::sleep(POLL);
        }
        let states_text: Vec<String> = seen.iter().map(|s| format!("{s:?}")).collect();
        say(format!(
            "=> the lock survived the leader's death: state {}",
            states_text.join(" -> ")
        ));
        say(format!("$ zklock status {path}"));
        indent(&cli.output(&["status", &path]));
        drop(guard);
        let _ = holder.close();
        let code = cli.wait_exit("cli-holder");
        say(format!(
            "=> cli-holder kept its lock across the failover and exited {code} (not 75)"
        ));
    } else {
        say("skipped: ZKLOCK_CONNECT names a server this demo did not start");
    }

    // ------------------------------------------------------------------
    heading("4. A session expired on purpose: the holder is told it lost the lock");
    let path = format!("{base}/expiry");
    let upstream = ensemble
        .as_ref()
        .map(|e| {
            let live = (0..e.len()).find(|&i| e.is_running(i)).unwrap_or(0);
            e.member_addr(live)
        })
        .unwrap_or_else(|| first_address(&connect));
    let proxy = proxy::Proxy::start(upstream);
    let via_proxy = format!("{}{}", proxy.connect_string(), chroot_of(&connect));
    say(format!(
        "$ zklock -c {via_proxy} --session-timeout {SHORT_SESSION} exec {path} -- ...   (through a fault proxy)"
    ));
    cli.start(
        "doomed",
        &via_proxy,
        &[
            "--session-timeout",
            SHORT_SESSION,
            "exec",
            "--data",
            "doomed",
            &path,
            "--",
            "sh",
            "-c",
            &work("doomed", "60"),
        ],
    );
    let line = cli.wait_for("doomed", "got the lock");
    tokens.push(("doomed".into(), token_in(&line.text)));
    cli.start(
        "next",
        &connect,
        &[
            "exec",
            "--data",
            "next",
            &path,
            "--",
            "sh",
            "-c",
            &work("next", "0"),
        ],
    );
    wait_until("the next holder to queue", || {
        queue_len(&client, &path) == 2
    });
    say("black-holing the doomed holder's connection (both directions)");
    proxy.blackhole(proxy::Direction::Both);
    let cut = Instant::now();
    let told = cli.wait_for("doomed", "lost the lock");
    let code = cli.wait_exit("doomed");
    say(format!(
        "=> doomed was told {:.1}s after the cut and exited {code}",
        told.at.duration_since(cut).as_secs_f64()
    ));
    let line = cli.wait_for("next", "got the lock");
    tokens.push(("next".into(), token_in(&line.text)));
    say(format!(
        "=> the server expired the session; next got the lock {:.1}s after the cut",
        line.at.duration_since(cut).as_secs_f64()
    ));
    cli.wait_exit("next");
    drop(proxy);

    // ------------------------------------------------------------------
    heading("5. Fencing tokens, in the order the holders got their locks");
    for (who, token) in &tokens {
        say(format!("  {who:<12} {token}"));
    }
    let rising = tokens.windows(2).all(|w| w[0].1 < w[1].1);
    if !rising {
        fail("fencing tokens did not rise");
    }
    say("=> every new holder's token is higher than all before it: a resource that");
    say("   remembers the highest token it has seen can refuse a stale holder");

    if external.is_some() {
        delete_tree(&client, &base);
    }
    let _ = client.close();
    drop(cli);
    if ensemble.is_some() {
        say("stopping the ensemble");
    }
    drop(ensemble);
    println!();
    say(format!(
        "demo finished in {:.0}s",
        started.elapsed().as_secs_f64()
    ));
}

/// The first `host:port` of a connect string, resolved.
fn first_address(connect: &str) -> std::net::SocketAddr {
    use std::net::ToSocketAddrs;
    let hosts = connect.split('/').next().unwrap_or(connect);
    let first = hosts.split(',').next().unwrap_or(hosts).trim();
    let with_port = if first
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        first.to_owned()
    } else {
        format!("{first}:2181")
    };
    with_port
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .unwrap_or_else(|| fail(format!("cannot resolve {first}")))
}

/// `/chroot` of a connect string, or empty.
fn chroot_of(connect: &str) -> &str {
    connect.find('/').map_or("", |i| &connect[i..])
}

fn delete_tree(client: &Client, path: &str) {
    if let Ok(children) = client.get_children(path) {
        for c in children {
            delete_tree(client, &format!("{path}/{c}"));
        }
    }
    let _ = client.delete(path, None);
}
