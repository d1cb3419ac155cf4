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

use std::process::Command;
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

mod cli;
use cli::{work, zklock_binary, Cli, Event};

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
        say(format!(
            "$ zklock exec --data {who} {path} -- sh -c '...' &"
        ));
        cli.exec(&who, &connect, &[], &path, "0.6");
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
    cli.exec("holder", &connect, &[], &path, "60");
    let line = cli.wait_for("holder", "got the lock");
    tokens.push(("holder".into(), token_in(&line.text)));
    cli.exec("successor", &connect, &[], &path, "0");
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
    cli.exec(
        "machine",
        &connect,
        &["--session-timeout", SHORT_SESSION],
        &path,
        "60",
    );
    let line = cli.wait_for("machine", "got the lock");
    tokens.push(("machine".into(), token_in(&line.text)));
    cli.exec("survivor", &connect, &[], &path, "0");
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
    cli.exec(
        "doomed",
        &via_proxy,
        &["--session-timeout", SHORT_SESSION],
        &path,
        "60",
    );
    let line = cli.wait_for("doomed", "got the lock");
    tokens.push(("doomed".into(), token_in(&line.text)));
    cli.exec("next", &connect, &[], &path, "0");
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
