//! `exec` and `leader`: connect, take the lock (or leadership), run CMD with
//! it held, watch for loss, release when CMD exits.

use std::io::ErrorKind;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus};
use std::sync::{Arc, Mutex as StdMutex};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{never, select, Receiver};
use zklock::recipes::{
    inspect, CancelToken, Election, LockError, LockGuard, LockState, LossReason, Mutex,
    MutexOptions, RwLock,
};
use zklock::{Client, SessionState};

use crate::args::{Global, Hold, HoldKind};
use crate::supervisor::{send_signal, Control, Event, INTERNAL_ENV};
use crate::{complain, connect, exit, lock_failure, secs, Failure};

/// How often CMD's exit is checked (also bounds the release latency).
const CHILD_POLL: Duration = Duration::from_millis(20);

/// Runs the whole `exec`/`leader` and returns the exit code, after telling
/// the supervisor (if any) to exit with it too.
pub fn run(global: &Global, h: &Hold, control: Option<Control>) -> u8 {
    let code = match work(global, h, control.as_ref()) {
        Ok(code) => code,
        Err(f) => {
            complain(&f.message);
            f.code
        }
    };
    if let Some(c) = &control {
        c.report_exit(code);
    }
    code
}

/// The exit code after an interruption before CMD started.
fn interrupted(ev: Option<Event>, during: &str) -> u8 {
    match ev {
        Some(Event::Signal(sig)) => {
            log::info!("interrupted by SIG{} while {during}", sig.name());
            128 + sig.number()
        }
        Some(Event::ParentDied) | None => {
            log::info!("zklock went away while {during}");
            128 + 9
        }
    }
}

/// Who we are in the lock node: `hostname:pid` of the process the user started.
fn default_data(control: Option<&Control>) -> String {
    zklock::recipes::holder_identity(control.map_or(std::process::id(), |c| c.parent))
}

fn work(global: &Global, h: &Hold, control: Option<&Control>) -> Result<u8, Failure> {
    let sub = h.subcommand();
    let events: Receiver<Event> = control.map_or_else(never, |c| c.events.clone());

    // Connect, while listening for signals (a dead server can take the
    // whole session timeout to give up on).
    let (tx, rx) = crossbeam_channel::bounded(1);
    let g = global.clone();
    thread::spawn(move || {
        let _ = tx.send(connect(&g));
    });
    let client = select! {
        recv(rx) -> r => r.unwrap_or_else(|_| Err(Failure::new(exit::SOFTWARE, "internal error: connect thread died")))?,
        recv(events) -> ev => return Ok(interrupted(ev.ok(), "connecting")),
    };

    // Acquire; a signal cancels the wait (the library removes our node).
    let cancel = CancelToken::new();
    let pending: Arc<StdMutex<Option<Event>>> = Arc::default();
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
    let canceller = {
        let (events, cancel, pending) = (events.clone(), cancel.clone(), pending.clone());
        thread::spawn(move || {
            select! {
                recv(events) -> ev => if let Ok(ev) = ev {
                    if let Ok(mut p) = pending.lock() {
                        *p = Some(ev);
                    }
                    cancel.cancel();
                },
                recv(stop_rx) -> _ => {}
            }
        })
    };
    let deadline = h.wait.map(|w| Instant::now() + w);
    log::info!(
        "{} {} (waiting {})",
        match h.kind {
            HoldKind::Leader { .. } => "campaigning at",
            HoldKind::Shared => "taking the read lock",
            HoldKind::Exclusive => "taking the lock",
        },
        h.path,
        h.wait.map_or("forever".to_owned(), secs)
    );
    let data = h.data.clone().unwrap_or_else(|| default_data(control));
    let acquired = match &h.kind {
        HoldKind::Exclusive => Mutex::with_options(
            &client,
            &h.path,
            MutexOptions::default().data(data.as_bytes()),
        )
        .and_then(|m| m.lock_with(deadline, Some(&cancel))),
        HoldKind::Shared => RwLock::with_options(
            &client,
            &h.path,
            MutexOptions::default().data(data.as_bytes()),
        )
        .and_then(|l| l.read_with(deadline, Some(&cancel))),
        HoldKind::Leader { id } => Election::new(&client, &h.path, id.as_bytes())
            .and_then(|e| e.campaign_with(deadline, Some(&cancel))),
    };
    drop(stop_tx);
    let _ = canceller.join();
    let pending = pending.lock().ok().and_then(|mut p| p.take());

    let guard = match acquired {
        Ok(guard) => guard,
        Err(LockError::Cancelled) => {
            let _ = client.close();
            return Ok(interrupted(pending, "waiting for the lock"));
        }
        Err(LockError::Timeout) => {
            let code = h.conflict_exit_code;
            let holder = holder_of(&client, &h.path);
            let _ = client.close();
            let what = match h.kind {
                HoldKind::Leader { .. } => "not elected at",
                _ => "lock not acquired:",
            };
            let after = match h.wait {
                Some(w) if !w.is_zero() => format!("gave up after {}", secs(w)),
                _ => "not waiting (-n)".to_owned(),
            };
            complain(&format!(
                "{sub}: {what} {} is held{holder}; {after}",
                h.path
            ));
            return Ok(code);
        }
        Err(e) => {
            let doing = format!("{sub}: waiting for {}", h.path);
            return Err(lock_failure(&e, &doing));
        }
    };
    if pending.is_some() {
        drop(guard);
        let _ = client.close();
        return Ok(interrupted(pending, "taking the lock"));
    }
    let code = run_command(&client, h, guard, control, events);
    Ok(code)
}

/// ` by <data>` for the first holder, if it can be found quickly.
fn holder_of(client: &Client, path: &str) -> String {
    match inspect(client, path) {
        Ok(q) => q
            .first()
            .map(|e| format!(" by {:?}", String::from_utf8_lossy(&e.data)))
            .unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// Exit code for a finished child: its code, or 128+N for signal N.
fn status_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(c), _) => (c & 0xff) as u8,
        (None, Some(s)) => 128u8.wrapping_add(s as u8),
        (None, None) => exit::SOFTWARE,
    }
}

/// Releases and ends the session; the lock is free when this returns.
fn release(client: Client, guard: LockGuard) {
    if let Err(e) = guard.unlock() {
        log::warn!("releasing: {e}");
    }
    if let Err(e) = client.close() {
        log::warn!("closing the session: {e}");
    }
}

fn spawn_command(h: &Hold, guard: &LockGuard, join: Option<Option<i32>>) -> std::io::Result<Child> {
    let mut cmd = Command::new(&h.command[0]);
    cmd.args(&h.command[1..])
        .env("ZKLOCK_FENCING_TOKEN", guard.fencing_token().to_string())
        .env("ZKLOCK_NODE", guard.node_path());
    for var in INTERNAL_ENV {
        cmd.env_remove(var);
    }
    match join {
        // Supervised, in a terminal's foreground: join zklock's group.
        Some(Some(group)) => {
            cmd.process_group(group);
        }
        // Supervised otherwise: a group of CMD's own.
        Some(None) => {
            cmd.process_group(0);
        }
        // In-process: stay in our group, like flock.
        None => {}
    }
    cmd.spawn()
}

fn run_command(
    client: &Client,
    h: &Hold,
    guard: LockGuard,
    control: Option<&Control>,
    mut events: Receiver<Event>,
) -> u8 {
    let sub = h.subcommand();
    let program = h.command[0].to_string_lossy().into_owned();
    log::info!(
        "holding {}: node {}, fencing token {}",
        h.path,
        guard.node_path(),
        guard.fencing_token()
    );
    let join = control.map(|c| c.join_pgrp);
    let spawned = match spawn_command(h, &guard, join) {
        // The terminal's group may be gone (zklock killed meanwhile): retry alone.
        Err(e) if join.is_some_and(|j| j.is_some()) && e.kind() != ErrorKind::NotFound => {
            log::warn!("cannot run CMD in zklock's process group: {e}");
            spawn_command(h, &guard, Some(None)).map(|c| (c, true))
        }
        other => other.map(|c| (c, join == Some(None))),
    };
    let (mut child, own_group) = match spawned {
        Ok(c) => c,
        Err(e) => {
            let code = match e.kind() {
                ErrorKind::NotFound => exit::NOT_FOUND,
                _ => exit::CANNOT_RUN,
            };
            complain(&format!("{sub}: cannot run {program:?}: {e}"));
            release(client.clone(), guard);
            return code;
        }
    };
    let target = if own_group {
        format!("-{}", child.id())
    } else {
        child.id().to_string()
    };
    if let Some(c) = control {
        c.report_cmd(&target);
    }
    // In a terminal's foreground group, Ctrl-C, Ctrl-\ and hangups reach CMD directly.
    let in_terminal_group = join.is_some_and(|j| j.is_some()) && !own_group;

    let mut states = guard.state_changes();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                log::error!("waiting for CMD: {e}");
                break stop_command(&mut child, &target, h.kill_after);
            }
        }
        select! {
            recv(states) -> s => match s {
                Ok(LockState::Lost) => return lost(client, h, guard, &mut child, &target),
                Ok(LockState::Suspended) => log::warn!(
                    "connection to ZooKeeper lost: {} is ours only if the session survives",
                    h.path
                ),
                Ok(LockState::Held) => log::info!("{} held", h.path),
                Err(_) => states = never(),
            },
            recv(events) -> ev => match ev {
                Ok(Event::Signal(sig)) if sig.sent_by_terminals() && in_terminal_group => {
                    log::debug!("SIG{} came from the terminal and reached CMD directly", sig.name());
                }
                Ok(Event::Signal(sig)) => {
                    log::info!("passing SIG{} to CMD ({target})", sig.name());
                    send_signal(sig.name(), &target);
                }
                Ok(Event::ParentDied) => {
                    log::warn!("zklock was killed: stopping CMD and releasing {}", h.path);
                    let status = stop_command(&mut child, &target, h.kill_after);
                    release(client.clone(), guard);
                    return status_code(status);
                }
                Err(_) => events = never(),
            },
            default(CHILD_POLL) => {}
        }
    };
    let code = status_code(status);
    log::info!("CMD exited ({status}); releasing {}", h.path);
    if guard.state() == LockState::Lost {
        complain(&format!(
            "{sub}: lost {} while {program:?} was finishing (it exited with {code})",
            h.path
        ));
        std::mem::forget(guard);
        return exit::LOST;
    }
    release(client.clone(), guard);
    code
}

/// SIGTERM to CMD, SIGKILL after `grace`; returns how CMD ended. When CMD
/// has a process group of its own, the whole group is signalled, and
/// members left behind by CMD get the SIGKILL too.
fn stop_command(child: &mut Child, target: &str, grace: Duration) -> ExitStatus {
    let group = target.starts_with('-');
    send_signal("TERM", target);
    let deadline = Instant::now() + grace;
    let mut ended = None;
    loop {
        if ended.is_none() {
            ended = child.try_wait().ok().flatten();
        }
        if let Some(status) = ended {
            if !group || !group_alive(target) {
                return status;
            }
        }
        if Instant::now() >= deadline {
            break;
        }
        thread::sleep(if ended.is_some() {
            Duration::from_millis(100)
        } else {
            CHILD_POLL
        });
    }
    log::warn!(
        "{} still running {} after SIGTERM: SIGKILL",
        if ended.is_some() {
            "CMD's children"
        } else {
            "CMD"
        },
        secs(grace)
    );
    if group {
        send_signal("KILL", target);
    }
    if let Some(status) = ended {
        return status;
    }
    let _ = child.kill();
    match child.wait() {
        Ok(s) => s,
        Err(_) => ExitStatus::from_raw(9),
    }
}

/// Whether a process group (`-PGID`) still has a live member. Zombies do
/// not count: where PID 1 reaps slowly (containers), CMD's orphans linger
/// as zombies that `kill -0` still finds.
fn group_alive(target: &str) -> bool {
    let Some(pgid) = target.strip_prefix('-').and_then(|g| g.parse::<i64>().ok()) else {
        return false;
    };
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return send_signal("0", target);
    };
    procs.filter_map(Result::ok).any(|entry| {
        let name = entry.file_name();
        if !name
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        {
            return false;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // pid (comm) state ppid pgrp ...
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return false;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next().unwrap_or("Z");
        let pgrp = fields.nth(1).and_then(|p| p.parse::<i64>().ok());
        pgrp == Some(pgid) && !matches!(state, "Z" | "X")
    })
}

fn lost(client: &Client, h: &Hold, guard: LockGuard, child: &mut Child, target: &str) -> u8 {
    let why = match guard.lost_reason() {
        Some(LossReason::SessionExpired) => "the session expired",
        Some(LossReason::NodeDeleted) => "its node was deleted",
        Some(LossReason::ClientClosed) => "the session ended",
        Some(LossReason::NoContact) | None => {
            "no contact with ZooKeeper for a whole session timeout"
        }
    };
    let what = match h.kind {
        HoldKind::Leader { .. } => "leadership at",
        _ => "the lock",
    };
    let program = h.command[0].to_string_lossy();
    complain(&format!(
        "{}: lost {what} {} ({why}); stopping {program:?} with SIGTERM (SIGKILL after {})",
        h.subcommand(),
        h.path,
        secs(h.kill_after)
    ));
    let status = stop_command(child, target, h.kill_after);
    log::info!("CMD ended after the loss: {status}");
    // Nothing to release; do not wait on an unreachable server.
    std::mem::forget(guard);
    if client.state() == SessionState::Connected {
        let _ = client.close();
    }
    exit::LOST
}
