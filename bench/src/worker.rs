//! zklock's benchmark worker (the `zklock-worker` binary). Every worker
//! (this one, `bench/zkrs`, `bench/CuratorBench.java`,
//! `bench/kazoo_bench.py`) speaks the same protocol, described in
//! `bench/README.md`:
//!
//! ```text
//! <worker> <mode> <connect string> <lock path> [name=value ...]
//! ```
//!
//! It prints `S <stage>` lines and reads one line from stdin after each (the
//! orchestrator takes its readings of the process and of the server there),
//! then one JSON object line with what only the worker can see, and exits.
//! Times in the JSON are nanoseconds of a monotonic clock started by the worker.

use std::io::Write;
use std::time::Instant;

use crossbeam_channel::Receiver;
use zklock::recipes::{LockGuard, LockState, Mutex, PendingLock};
use zklock::Client;

use crate::contend::{contended, ContendedSession};
use crate::json::ObjWriter;
use crate::session::{checked_cycle, guard_alarms, Conn, Release, SessionAlarms};
use crate::stage::{stage, Params};
use crate::worker_refused::refused;
use crate::worker_scale::{held, idle, waiters};
use crate::BoxResult;

/// `zklock-worker <mode> <connect> <path> [name=value ...]`
pub fn main(args: &[String]) -> BoxResult<()> {
    let [mode, connect_string, path, rest @ ..] = args else {
        return Err("usage: zklock-worker <mode> <connect> <path> [name=value ...]".into());
    };
    let p = Params::parse(rest)?;
    let conn = Conn::of(&p)?;
    let release = Release::of(&p)?;
    let mut out = ObjWriter::new();
    out.str("impl", "zklock")
        .str("mode", mode)
        .str("leader_check", if conn.leader_check { "on" } else { "off" })
        .str("release", release.name());
    if release == Release::Requeue && !matches!(mode.as_str(), "contended" | "uncontended") {
        return Err(format!("release=requeue is for the timed loops, not {mode}").into());
    }
    match mode.as_str() {
        "uncontended" => uncontended(conn, release, connect_string, path, &p, &mut out)?,
        "contended" => {
            let (connect_string, path) = (connect_string.clone(), path.clone());
            contended(&p, &mut out, move |_| {
                let client = conn.connect(&connect_string)?;
                let alarms = SessionAlarms::of(&client);
                let mutex = Mutex::new(&client, &path)?;
                Ok(ZklockSession {
                    client,
                    alarms,
                    mutex,
                    release,
                    guard: None,
                    pending: None,
                    guard_alarms: 0,
                })
            })?
        }
        "waiters" => waiters(conn, connect_string, path, &p, &mut out)?,
        "held" => held(conn, connect_string, path, &p, &mut out)?,
        "idle" => idle(conn, connect_string, path, &p, &mut out)?,
        "refused" => refused(conn, connect_string, path, &p, &mut out)?,
        "floor" => crate::floor::uncontended(connect_string, path, &p, &mut out)?,
        "floor-contended" => {
            let (connect_string, path) = (connect_string.clone(), path.clone());
            contended(&p, &mut out, move |id| {
                crate::floor::Contender::open(&connect_string, &path, id)
            })?
        }
        "floor-waiters" => crate::floor::waiters(connect_string, path, &p, &mut out)?,
        other => return Err(format!("unknown mode {other:?}").into()),
    }
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", out.finish())?;
    stdout.flush()?;
    Ok(())
}

/// `cycles` lock+unlock in a row on one mutex, released as `release`
/// says (`drop` or `unlock`); the latency of each.
/// `suspended_lost`: the times the session or a held guard went Suspended
/// or Lost, from the connection to `done`.
fn uncontended(
    conn: Conn,
    release: Release,
    connect_string: &str,
    path: &str,
    p: &Params,
    out: &mut ObjWriter,
) -> BoxResult<()> {
    let cycles = p.usize("cycles", 1000)?;
    let warm = p.usize("warm", cycles / 2)?;
    let client = conn.connect(connect_string)?;
    let session_alarms = SessionAlarms::of(&client);
    let mut alarms = 0;
    let mutex = Mutex::new(&client, path)?;
    let mut requeue = RequeueLoop::default();
    let mut cycle = |alarms: &mut usize| match release {
        Release::Requeue => requeue.cycle(&mutex, alarms),
        _ => checked_cycle(&mutex, alarms, release),
    };
    cycle(&mut alarms)?;
    stage("rest")?;
    for _ in 0..warm {
        cycle(&mut alarms)?;
    }
    stage("ready")?;
    let mut lat = Vec::with_capacity(cycles);
    for _ in 0..cycles {
        let t = Instant::now();
        cycle(&mut alarms)?;
        lat.push(t.elapsed().as_nanos() as u64);
    }
    alarms += requeue.finish();
    stage("done")?;
    alarms += session_alarms.count();
    out.nums("latencies_ns", &lat)
        .num("suspended_lost", alarms as f64);
    client.close()?;
    Ok(())
}

/// The uncontended loop with `release=requeue`: the lock is held between
/// cycles, and each cycle is one `Mutex::requeue` (delete and create in
/// one multi, whose reply confirms the delete) and the wait for the new
/// node's grant; the first cycle takes the lock with `lock()`.
#[derive(Default)]
struct RequeueLoop {
    held: Option<(LockGuard, Receiver<LockState>)>,
}

impl RequeueLoop {
    fn cycle(&mut self, mutex: &Mutex, alarms: &mut usize) -> BoxResult<()> {
        let guard = match self.held.take() {
            Some((guard, changes)) => {
                *alarms += guard_alarms(&changes);
                mutex.requeue(guard, None).wait()?
            }
            None => mutex.lock()?,
        };
        let changes = guard.state_changes();
        self.held = Some((guard, changes));
        Ok(())
    }

    /// Releases the last cycle's lock; the alarms its guard heard.
    fn finish(&mut self) -> usize {
        self.held.take().map_or(0, |(guard, changes)| {
            let alarms = guard_alarms(&changes);
            drop(guard);
            alarms
        })
    }
}

/// zklock's contended session: one client and one mutex.
struct ZklockSession {
    client: Client,
    alarms: SessionAlarms,
    mutex: Mutex,
    release: Release,
    /// The guard held, and its state changes since it was granted.
    guard: Option<(LockGuard, Receiver<LockState>)>,
    /// The next turn's acquisition, queued by the last release
    /// (`release=requeue`).
    pending: Option<PendingLock>,
    guard_alarms: usize,
}

impl ContendedSession for ZklockSession {
    /// `Mutex::lock`, or the wait on the acquisition the last requeue
    /// started.
    fn lock(&mut self) -> BoxResult<()> {
        let guard = match self.pending.take() {
            Some(pending) => pending.wait()?,
            None => self.mutex.lock()?,
        };
        let changes = guard.state_changes();
        self.guard = Some((guard, changes));
        Ok(())
    }

    /// Released as in `cycle` (the guard drops); with `release=unlock` by
    /// `unlock()`, which waits for the delete's reply; with
    /// `release=requeue` released and queued again in one multi while
    /// another turn follows.
    fn unlock(&mut self, again: bool) -> BoxResult<()> {
        if let Some((guard, changes)) = self.guard.take() {
            self.guard_alarms += guard_alarms(&changes);
            match self.release {
                Release::Requeue if again => {
                    self.pending = Some(self.mutex.requeue(guard, None));
                }
                Release::Unlock => guard.unlock()?,
                Release::Drop | Release::Requeue => drop(guard),
            }
        }
        Ok(())
    }

    fn alarms(&mut self) -> Option<usize> {
        Some(self.guard_alarms + self.alarms.count())
    }

    /// A dropped guard's delete is already the I/O thread's (an unlocked
    /// one's is answered). The harness
    /// ends each phase with `unlock(false)`, so no requeue is left pending;
    /// if one were, it is taken and released here.
    fn settle(&mut self) -> BoxResult<()> {
        if let Some(pending) = self.pending.take() {
            drop(pending.wait()?);
        }
        Ok(())
    }

    fn close(self) -> BoxResult<()> {
        Ok(self.client.close()?)
    }
}
