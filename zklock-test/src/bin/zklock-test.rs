//! `zklock-test serve`: a ZooKeeper server (or ensemble) for your desk, on
//! `127.0.0.1:2181` by default. Prints the connect string as its first line
//! on stdout, runs until Ctrl-C, SIGTERM, SIGHUP or the end of its stdin
//! (when stdin is a terminal or a pipe), then stops the servers and removes
//! their directories. Killed outright, its servers die with it all the same
//! (the crate's watchdog).

use std::io::{self, IsTerminal, Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::FileTypeExt;
use std::process::ExitCode;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread;
use std::time::Duration;

use lexopt::prelude::*;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use zklock_test::{ZkEnsemble, ZkOptions, ZkServer};

const HELP: &str = "\
usage: zklock-test serve [--port N] [--ensemble N] [--tick-ms MS]

Starts a ZooKeeper server on 127.0.0.1, prints its connect string as the
first line on stdout, and runs until Ctrl-C, SIGTERM or SIGHUP, or until its
stdin ends when stdin is a terminal (Ctrl-D) or a pipe. Then it stops the
server and removes its directory.

  --port N       client port (default 2181; 0: a free one); an ensemble's
                 member i listens on N + i
  --ensemble N   N servers in a quorum instead of one standalone server
  --tick-ms MS   ZooKeeper's tickTime (default 2000); sessions may ask for
                 2 to 20 ticks

Which ZooKeeper: ZOOKEEPER_CLASSPATH, else ZOOKEEPER_HOME (an unpacked
Apache release), else Debian's package (/usr/share/java/zookeeper.jar).
";

/// What the command line asks for.
struct Serve {
    port: u16,
    members: Option<usize>,
    tick_ms: u64,
}

/// The servers, stopped and removed when dropped.
enum Running {
    Standalone(ZkServer),
    Ensemble(ZkEnsemble),
}

/// Why the command stops.
enum Stop {
    Signal(i32),
    StdinClosed,
}

fn main() -> ExitCode {
    let serve = match parse() {
        Ok(Some(serve)) => serve,
        Ok(None) => {
            print!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("zklock-test: {message}\n\n{HELP}");
            return ExitCode::from(64);
        }
    };
    let (stop_tx, stop_rx) = mpsc::channel();
    // Before the servers start: a Ctrl-C while they start stops them too.
    if let Err(e) = watch_signals(stop_tx.clone()) {
        eprintln!("zklock-test: cannot handle signals: {e}");
        return ExitCode::FAILURE;
    }
    // A server on a taken port exits at once, while the one already there
    // would answer the readiness probe: say so before starting anything.
    if serve.port != 0 {
        let count = serve.members.unwrap_or(1);
        for port in (0..count).filter_map(|i| serve.port.checked_add(i as u16)) {
            if let Err(e) = TcpListener::bind(("127.0.0.1", port)) {
                eprintln!(
                    "zklock-test: cannot serve on 127.0.0.1:{port}: {e} (another ZooKeeper \
                     running?); stop it, or choose another port with --port N (0: a free one)"
                );
                return ExitCode::FAILURE;
            }
        }
    }
    let mut options = ZkOptions::new().tick_ms(serve.tick_ms);
    options = options.client_port(serve.port);
    let running = match serve.members {
        None => Running::Standalone(ZkServer::start_with_options(&options)),
        Some(n) => Running::Ensemble(ZkEnsemble::start_with_options(n, &options)),
    };
    let connect = running.connect_string();
    let mut stdout = io::stdout();
    // A reader that went away (`| head -1`) costs nothing but this line.
    let _ = writeln!(stdout, "{connect}").and_then(|()| stdout.flush());
    let stdin_watched = watch_stdin(stop_tx);
    eprintln!(
        "zklock-test: ZooKeeper {} on {connect}; stop with Ctrl-C{}",
        running.describe(),
        if stdin_watched {
            " or by closing stdin"
        } else {
            ""
        }
    );
    let status = loop {
        match stop_rx.recv_timeout(Duration::from_secs(1)) {
            Ok(Stop::Signal(signal)) => {
                eprintln!("zklock-test: signal {signal}, stopping");
                break ExitCode::SUCCESS;
            }
            Ok(Stop::StdinClosed) => {
                eprintln!("zklock-test: stdin closed, stopping");
                break ExitCode::SUCCESS;
            }
            Err(RecvTimeoutError::Timeout) if running.all_alive() => {}
            Err(RecvTimeoutError::Timeout) => {
                eprintln!("zklock-test: a server exited on its own; stopping the rest");
                eprint!("{}", running.dead_logs());
                break ExitCode::FAILURE;
            }
            Err(RecvTimeoutError::Disconnected) => break ExitCode::SUCCESS,
        }
    };
    drop(running);
    status
}

/// `serve` and its options; `None` for `--help`.
fn parse() -> Result<Option<Serve>, String> {
    let mut parser = lexopt::Parser::from_env();
    let mut serve = Serve {
        port: 2181,
        members: None,
        tick_ms: 2000,
    };
    let mut command = None;
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Short('h') | Long("help") => return Ok(None),
            Long("port") => serve.port = number(&mut parser, "--port")?,
            Long("ensemble") => {
                let n: usize = number(&mut parser, "--ensemble")?;
                if n == 0 {
                    return Err("--ensemble needs at least one member".into());
                }
                serve.members = Some(n);
            }
            Long("tick-ms") => serve.tick_ms = number(&mut parser, "--tick-ms")?,
            Value(word) if command.is_none() => {
                command = Some(
                    word.into_string()
                        .map_err(|w| format!("unknown command {w:?}"))?,
                );
            }
            other => return Err(other.unexpected().to_string()),
        }
    }
    match command.as_deref() {
        Some("serve") => Ok(Some(serve)),
        Some(other) => Err(format!("unknown command {other:?}")),
        None => Err("which command? (serve)".into()),
    }
}

fn number<T: std::str::FromStr>(parser: &mut lexopt::Parser, option: &str) -> Result<T, String> {
    let value = parser
        .value()
        .map_err(|_| format!("{option} needs a value"))?;
    let text = value.to_string_lossy();
    text.parse()
        .map_err(|_| format!("{option}: not a number: {text:?}"))
}

/// Tells `stop` of the first SIGINT, SIGTERM or SIGHUP.
fn watch_signals(stop: Sender<Stop>) -> io::Result<()> {
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                let _ = stop.send(Stop::Signal(signal));
            }
        })?;
    Ok(())
}

/// Tells `stop` when stdin ends, if stdin is a terminal or a pipe (or a
/// socket): a caller holding the other end stops the server by closing it
/// or by going away. Stdin from `/dev/null` or a file, as a background job
/// started by a script has it, ends at once and is not watched. Returns
/// whether it is watched.
fn watch_stdin(stop: Sender<Stop>) -> bool {
    let stdin = io::stdin();
    let piped = std::fs::metadata("/dev/stdin")
        .map(|meta| meta.file_type().is_fifo() || meta.file_type().is_socket())
        .unwrap_or(false);
    if !(stdin.is_terminal() || piped) {
        return false;
    }
    thread::Builder::new()
        .name("stdin".into())
        .spawn(move || {
            let mut sink = [0u8; 4096];
            let mut stdin = stdin.lock();
            loop {
                match stdin.read(&mut sink) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = stop.send(Stop::StdinClosed);
        })
        .is_ok()
}

impl Running {
    fn connect_string(&self) -> String {
        match self {
            Running::Standalone(server) => server.connect_string(),
            Running::Ensemble(ensemble) => ensemble.connect_string(),
        }
    }

    fn describe(&self) -> String {
        match self {
            Running::Standalone(server) => format!("standalone ({})", server.dir().display()),
            Running::Ensemble(ensemble) => format!("ensemble of {}", ensemble.len()),
        }
    }

    /// The log tails of the servers that died, for the reason.
    fn dead_logs(&self) -> String {
        match self {
            Running::Standalone(server) => format!("server log:\n{}\n", server.log_tail(20)),
            Running::Ensemble(ensemble) => (0..ensemble.len())
                .filter(|&i| !ensemble.is_running(i))
                .map(|i| format!("member {i}'s log:\n{}\n", ensemble.log_tail(i, 20)))
                .collect(),
        }
    }

    fn all_alive(&self) -> bool {
        match self {
            Running::Standalone(server) => server.is_running(),
            Running::Ensemble(ensemble) => (0..ensemble.len()).all(|i| ensemble.is_running(i)),
        }
    }
}
