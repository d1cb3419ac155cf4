//! `exec` and `leader`: connect, take the lock (or leadership), run CMD as
//! our child with it held, pass signals on, watch for loss, release when CMD
//! exits. Everything happens in the process the user started.

use std::thread;
use std::time::Instant;

use crossbeam_channel::{never, select, Receiver};
use zklock::recipes::{
    inspect, CancelToken, Election, LockError, LockGuard, LockState, LossReason, Mutex,
    MutexOptions, RwLock,
};
use zklock::{Acl, Client, SessionState};

use crate::args::{Global, Hold, HoldKind, NodeAcl};
use crate::command::{status_code, terminal_foreground_group, Cmd};
use crate::release_helper::ReleaseHelper;
use crate::signals::{self, Caught};
use crate::{complain, connect_with, exit, lock_failure, secs, Failure, Secrets};

/// Runs the whole `exec`/`leader` and returns the exit code.
pub fn run(global: &Global, h: &Hold) -> u8 {
    let signals = match signals::catch() {
        Ok(s) => s,
        Err(e) => {
            complain(&format!("internal error: cannot catch signals: {e}"));
            return exit::SOFTWARE;
        }
    };
    // Read once: the helper gets the very secrets this session uses.
    let secrets = match crate::secrets(&global.security) {
        Ok(s) => s,
        Err(f) => {
            complain(&f.message);
            return f.code;
        }
    };
    let mut helper = match ReleaseHelper::start(global, &secrets, h.kill_after) {
        Ok(helper) => Some(helper),
        Err(e) => {
            log::warn!("no release helper ({e}): if zklock is SIGKILLed, its lock stays held until the session times out");
            None
        }
    };
    let code = match work(global, &secrets, h, &signals, helper.as_mut()) {
        Ok(code) => code,
        Err(f) => {
            complain(&f.message);
            f.code
        }
    };
    if let Some(helper) = helper {
        helper.finish();
    }
    code
}

/// The exit code after a signal before CMD started.
fn interrupted(signal: i32, during: &str) -> u8 {
    log::info!("interrupted by SIG{} while {during}", Caught::name(signal));
    128u8.wrapping_add(signal as u8)
}

fn work(
    global: &Global,
    secrets: &Secrets,
    h: &Hold,
    signals: &Receiver<Caught>,
    mut helper: Option<&mut ReleaseHelper>,
) -> Result<u8, Failure> {
    let sub = h.subcommand();

    // Connect, while listening for signals (a dead server can take the
    // whole session timeout to give up on).
    let (tx, rx) = crossbeam_channel::bounded(1);
    let (g, s) = (global.clone(), secrets.clone());
    thread::spawn(move || {
        let _ = tx.send(connect_with(&g, &s));
    });
    let client = loop {
        select! {
            recv(rx) -> r => break r.unwrap_or_else(|_| Err(Failure::new(exit::SOFTWARE, "internal error: connect thread died")))?,
            recv(signals) -> s => if let Ok(Caught::Forwardable { signal, .. }) = s {
                return Ok(interrupted(signal, "connecting"));
            },
        }
    };

    // Acquire; a signal cancels the wait (the library removes our node).
    let cancel = CancelToken::new();
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
    let canceller = {
        let (signals, cancel) = (signals.clone(), cancel.clone());
        thread::spawn(move || loop {
            select! {
                recv(signals) -> s => match s {
                    Ok(Caught::Forwardable { signal, .. }) => {
                        cancel.cancel();
                        return Some(signal);
                    }
                    Ok(Caught::Child) => {}
                    Err(_) => return None,
                },
                recv(stop_rx) -> _ => return None,
            }
        })
    };
    // A wait too long for the clock is no deadline at all.
    let deadline = h.wait.and_then(|w| Instant::now().checked_add(w));
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
    // A held lock outlives many commands: watch its node so that an
    // operator breaking it ends the hold at once.
    let authenticated = global.security.sasl_user.is_some() || secrets.digest.is_some();
    let acl = match &h.acl {
        NodeAcl::Default if authenticated => Acl::creator_all(),
        NodeAcl::Default | NodeAcl::Open => Acl::open_unsafe(),
        NodeAcl::Creator => Acl::creator_all(),
        NodeAcl::List(acl) => acl.clone(),
    };
    let options = match h.max_hold {
        Some(max) => MutexOptions::default().max_hold(max),
        None => MutexOptions::default(),
    };
    // Without --data the node carries the recipes' default, `host:pid`.
    let options = match &h.data {
        Some(data) => options.data(data.as_bytes()),
        None => options,
    };
    let options = options
        .watch_node(true)
        .revocable(h.revocable)
        .acl(acl.clone())
        .parent_acl(acl)
        .ancestor_acl(folder_acl(authenticated));
    let acquired = match &h.kind {
        HoldKind::Exclusive => Mutex::with_options(&client, &h.path, options)
            .and_then(|m| m.lock_with(deadline, Some(&cancel))),
        HoldKind::Shared => RwLock::with_options(&client, &h.path, options)
            .and_then(|l| l.read_with(deadline, Some(&cancel))),
        HoldKind::Leader { id } => Election::with_options(&client, &h.path, id.as_bytes(), options)
            .and_then(|e| e.campaign_with(deadline, Some(&cancel))),
    };
    drop(stop_tx);
    let pending = canceller.join().ok().flatten();

    let guard = match acquired {
        Ok(guard) => guard,
        Err(LockError::Cancelled) => {
            let _ = client.close();
            return Ok(interrupted(pending.unwrap_or(0), "waiting for the lock"));
        }
        Err(LockError::Timeout) => {
            let code = h.conflict_exit_code;
            let holder = holder_of(&client, &h.path);
            let _ = client.close();
            let (what, held) = match h.kind {
                HoldKind::Leader { .. } => ("not elected", "led"),
                _ => ("lock not acquired", "held"),
            };
            let after = match h.wait {
                Some(w) if !w.is_zero() => format!("gave up after {}", secs(w)),
                _ => "not waiting (-n)".to_owned(),
            };
            complain(&format!(
                "{sub}: {what}: {} is {held}{holder}; {after}",
                h.path
            ));
            return Ok(code);
        }
        Err(e) => {
            let doing = format!("{sub}: waiting for {}", h.path);
            return Err(lock_failure(&e, &doing));
        }
    };
    if let Some(signal) = pending {
        release(&client, guard);
        return Ok(interrupted(signal, "taking the lock"));
    }
    if let Some(helper) = helper.as_deref_mut() {
        let timeout = client
            .negotiated_timeout()
            .unwrap_or(global.session_timeout);
        helper.holding(client.session_id(), timeout, guard.node_path());
    }
    Ok(run_command(&client, h, guard, signals, helper))
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

/// Releases and ends the session; the lock is free when this returns.
fn release(client: &Client, guard: LockGuard) {
    if let Err(e) = guard.unlock() {
        log::warn!("releasing: {e}");
    }
    if let Err(e) = client.close() {
        log::warn!("closing the session: {e}");
    }
}

fn run_command(
    client: &Client,
    h: &Hold,
    guard: LockGuard,
    signals: &Receiver<Caught>,
    helper: Option<&mut ReleaseHelper>,
) -> u8 {
    let sub = h.subcommand();
    let program = h.command[0].to_string_lossy().into_owned();
    log::info!(
        "holding {}: node {}, fencing token {}",
        h.path,
        guard.node_path(),
        guard.fencing_token()
    );
    let in_terminal = terminal_foreground_group().is_some();
    if !in_terminal {
        // What CMD leaves behind in its group becomes our child, so that we
        // can tell when it has ended (a slow init leaves zombies around).
        if let Err(e) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
            log::debug!("cannot become a child subreaper: {e}");
        }
    }
    let env = [
        ("ZKLOCK_FENCING_TOKEN", guard.fencing_token().to_string()),
        ("ZKLOCK_NODE", guard.node_path().to_owned()),
    ];
    let mut cmd = match Cmd::spawn(&h.command, &env, in_terminal) {
        Ok(cmd) => cmd,
        Err(e) => {
            let code = match e.kind() {
                std::io::ErrorKind::NotFound => exit::NOT_FOUND,
                _ => exit::CANNOT_RUN,
            };
            complain(&format!("{sub}: cannot run {program:?}: {e}"));
            release(client, guard);
            return code;
        }
    };
    if let Some(helper) = helper {
        helper.running(cmd.pid(), cmd.own_group);
    }

    let mut states = guard.state_changes();
    let mut signals_open = signals.clone();
    // Asked to let go: CMD gets SIGTERM once; the lock goes when it exits.
    let mut revocations = if h.revocable {
        guard.revocation_requests()
    } else {
        never()
    };
    let status = loop {
        match cmd.child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                log::error!("waiting for CMD: {e}");
                break cmd.stop(h.kill_after, signals);
            }
        }
        select! {
            recv(states) -> s => match s {
                Ok(LockState::Lost) => return lost(client, h, guard, &mut cmd, signals),
                Ok(LockState::Suspended) => log::warn!(
                    "connection to ZooKeeper lost: {} is ours only if the session survives",
                    h.path
                ),
                Ok(LockState::Held) => log::info!("{} held", h.path),
                Err(_) => states = never(),
            },
            recv(revocations) -> r => {
                revocations = never();
                if r.is_ok() {
                    log::warn!(
                        "asked to let go of {}: sending CMD (pid {}) SIGTERM",
                        h.path,
                        cmd.pid().as_raw_nonzero()
                    );
                    cmd.signal(rustix::process::Signal::TERM.as_raw());
                }
            },
            recv(signals_open) -> s => match s {
                Ok(Caught::Child) => {}
                Ok(Caught::Forwardable { signal, from_terminal: true }) if !cmd.own_group => {
                    log::debug!("SIG{} came from the terminal and reached CMD directly", Caught::name(signal));
                }
                Ok(Caught::Forwardable { signal, .. }) => {
                    log::info!("passing SIG{} to CMD (pid {})", Caught::name(signal), cmd.pid().as_raw_nonzero());
                    cmd.signal(signal);
                }
                Err(_) => signals_open = never(),
            },
        }
    };
    let code = status_code(status);
    log::info!("CMD exited ({status}); releasing {}", h.path);
    if guard.state() == LockState::Lost {
        complain(&format!(
            "{sub}: lost {} while {program:?} was finishing (it exited with {code})",
            h.path
        ));
        let_go_after_loss(client, guard);
        return exit::LOST;
    }
    release(client, guard);
    code
}

fn lost(
    client: &Client,
    h: &Hold,
    guard: LockGuard,
    cmd: &mut Cmd,
    signals: &Receiver<Caught>,
) -> u8 {
    let max_hold;
    let why = match guard.lost_reason() {
        Some(LossReason::SessionExpired) => "the session expired",
        Some(LossReason::NodeDeleted) => "its node was deleted",
        Some(LossReason::ClientClosed) => "the session ended",
        Some(LossReason::SequenceExhausted) => {
            "the lock path's sequence counter is exhausted (recreate the path); no zklock \
             contender gets it before the command has ended"
        }
        Some(LossReason::MaxHold) => {
            let held = h.max_hold.map(secs).unwrap_or_default();
            max_hold = format!("held for its --max-hold of {held}; its node is deleted");
            &max_hold
        }
        Some(LossReason::NoContact) | Some(_) | None => {
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
    let status = cmd.stop(h.kill_after, signals);
    log::info!("CMD ended after the loss: {status}");
    let_go_after_loss(client, guard);
    exit::LOST
}

/// Lets go of a lost lock once CMD has ended. At the sequence counter's
/// end the node is still ours and still keeps every zklock contender out
/// (the library deletes it only when the guard goes): delete it now. After
/// no contact for a whole session timeout the session, and the node with
/// it, may still live: if connected, closing the session deletes both;
/// otherwise the server expires them (do not wait on an unreachable
/// server). Any other loss left nothing to release.
fn let_go_after_loss(client: &Client, guard: LockGuard) {
    if guard.lost_reason() == Some(LossReason::SequenceExhausted) {
        return release(client, guard);
    }
    guard.abandon();
    if client.state() == SessionState::Connected {
        let _ = client.close();
    }
}

/// The ACL of the folders above the lock path that zklock creates. They are
/// shared by every lock below them, so whoever creates one first must not
/// lock the others out: anyone may list it and create locks in it, and
/// with a login only its creator may change or delete it. Without a login
/// there is no creator to name: open.
fn folder_acl(authenticated: bool) -> Vec<Acl> {
    if !authenticated {
        return Acl::open_unsafe();
    }
    let mut acl = vec![Acl {
        perms: zklock::perms::READ | zklock::perms::CREATE,
        id: zklock::Id {
            scheme: "world".into(),
            id: "anyone".into(),
        },
    }];
    acl.extend(Acl::creator_all());
    acl
}
