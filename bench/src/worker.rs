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

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use zklock::recipes::{LockGuard, LockState, Mutex, PendingSet};
use zklock::{Client, SessionState};

use crate::json::ObjWriter;
use crate::BoxResult;

const SESSION_TIMEOUT: Duration = Duration::from_secs(30);

/// The `name=value` parameters after the fixed arguments.
pub(crate) struct Params(BTreeMap<String, String>);

impl Params {
    pub(crate) fn parse(args: &[String]) -> BoxResult<Params> {
        let mut m = BTreeMap::new();
        for a in args {
            let (k, v) = a
                .split_once('=')
                .ok_or_else(|| format!("parameter {a:?} is not name=value"))?;
            m.insert(k.to_owned(), v.to_owned());
        }
        Ok(Params(m))
    }

    pub(crate) fn usize(&self, key: &str, default: usize) -> BoxResult<usize> {
        match self.0.get(key) {
            None => Ok(default),
            Some(v) => Ok(v.parse().map_err(|_| format!("{key}={v} is not a count"))?),
        }
    }

    pub(crate) fn str<'a>(&'a self, key: &str, default: &'a str) -> &'a str {
        self.0.get(key).map_or(default, String::as_str)
    }
}

/// Prints `S <name>` and waits for the orchestrator's answer.
pub(crate) fn stage(name: &str) -> BoxResult<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "S {name}")?;
    out.flush()?;
    drop(out);
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line)? == 0 {
        return Err("the orchestrator went away".into());
    }
    Ok(())
}

/// Nanoseconds since `t0`.
pub(crate) fn ns(t0: Instant) -> u64 {
    t0.elapsed().as_nanos() as u64
}

/// How zklock's clients connect: the `leader_check` (`on`, the default, or
/// `off`) and `timeout_ms` (the session timeout, default 30 s) parameters.
#[derive(Clone, Copy)]
struct Conn {
    leader_check: bool,
    timeout: Duration,
}

impl Conn {
    fn of(p: &Params) -> BoxResult<Conn> {
        let leader_check = match p.str("leader_check", "on") {
            "on" => true,
            "off" => false,
            other => return Err(format!("leader_check={other} is neither on nor off").into()),
        };
        let timeout = match p.0.get("timeout_ms") {
            None => SESSION_TIMEOUT,
            Some(_) => Duration::from_millis(p.usize("timeout_ms", 0)? as u64),
        };
        Ok(Conn {
            leader_check,
            timeout,
        })
    }

    fn connect(&self, connect: &str) -> BoxResult<Client> {
        Ok(Client::builder(connect)
            .session_timeout(self.timeout)
            .leader_check(self.leader_check)
            .connect()?)
    }
}

/// Counts the times a session went Suspended, Lost or Expired, from
/// [`Client::subscribe`] (its first message is the state at subscription).
/// Read by draining at the end: the channel keeps the first
/// `STATE_CHANNEL_CAPACITY` changes, so a first alarm is never missed.
struct SessionAlarms(Receiver<SessionState>);

impl SessionAlarms {
    fn of(client: &Client) -> SessionAlarms {
        SessionAlarms(client.subscribe())
    }

    fn count(&self) -> usize {
        self.0
            .try_iter()
            .filter(|s| {
                matches!(
                    s,
                    SessionState::Suspended | SessionState::Lost | SessionState::Expired
                )
            })
            .count()
    }
}

/// The states other than `Held` a guard went through from `changes`
/// (its [`LockGuard::state_changes`], taken right after the lock was granted)
/// until now.
fn guard_alarms(changes: &Receiver<LockState>) -> usize {
    changes.try_iter().filter(|s| *s != LockState::Held).count()
}

/// `zklock-worker <mode> <connect> <path> [name=value ...]`
pub fn main(args: &[String]) -> BoxResult<()> {
    let [mode, connect_string, path, rest @ ..] = args else {
        return Err("usage: zklock-worker <mode> <connect> <path> [name=value ...]".into());
    };
    let p = Params::parse(rest)?;
    let conn = Conn::of(&p)?;
    let mut out = ObjWriter::new();
    out.str("impl", "zklock")
        .str("mode", mode)
        .str("leader_check", if conn.leader_check { "on" } else { "off" });
    match mode.as_str() {
        "uncontended" => uncontended(conn, connect_string, path, &p, &mut out)?,
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
                    guard: None,
                    guard_alarms: 0,
                })
            })?
        }
        "waiters" => waiters(conn, connect_string, path, &p, &mut out)?,
        "held" => held(conn, connect_string, path, &p, &mut out)?,
        "idle" => idle(conn, connect_string, path, &p, &mut out)?,
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

/// One lock and release. zklock's own way to release is dropping the guard:
/// it returns at once, and the delete travels ahead of whatever the session
/// sends next (the next create, in a loop), so another session can take the
/// lock as soon as the server applies it, as with a waited-for unlock.
fn cycle(mutex: &Mutex) -> BoxResult<()> {
    drop(mutex.lock()?);
    Ok(())
}

/// [`cycle`], counting the states other than `Held` the guard went through
/// while held into `alarms` (from its `state_changes`, taken as soon as it
/// is granted and read just before the release).
fn checked_cycle(mutex: &Mutex, alarms: &mut usize) -> BoxResult<()> {
    let guard = mutex.lock()?;
    let changes = guard.state_changes();
    *alarms += guard_alarms(&changes);
    drop(guard);
    Ok(())
}

/// `cycles` lock+unlock in a row on one mutex; the latency of each.
/// `suspended_lost`: the times the session or a held guard went Suspended
/// or Lost, from the connection to `done`.
fn uncontended(
    conn: Conn,
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
    checked_cycle(&mutex, &mut alarms)?;
    stage("rest")?;
    for _ in 0..warm {
        checked_cycle(&mutex, &mut alarms)?;
    }
    stage("ready")?;
    let mut lat = Vec::with_capacity(cycles);
    for _ in 0..cycles {
        let t = Instant::now();
        checked_cycle(&mutex, &mut alarms)?;
        lat.push(t.elapsed().as_nanos() as u64);
    }
    stage("done")?;
    alarms += session_alarms.count();
    out.nums("latencies_ns", &lat)
        .num("suspended_lost", alarms as f64);
    client.close()?;
    Ok(())
}

/// One session's side of the contended mode, as [`contended`] drives it:
/// zklock's ([`ZklockSession`]) or the raw floor's
/// ([`crate::floor::Contender`]).
pub(crate) trait ContendedSession: Send + 'static {
    /// Returns once this session holds the lock.
    fn lock(&mut self) -> BoxResult<()>;
    /// Lets the lock go; the delete may still be on its way, ahead of
    /// whatever the session sends next.
    fn unlock(&mut self) -> BoxResult<()>;
    /// Every release has left for the server: called after the warm-up and
    /// after the timed turns, so that no session waits at a barrier while
    /// the lock is still its own.
    fn settle(&mut self) -> BoxResult<()>;
    /// Ends the session, after the `done` stage.
    fn close(self) -> BoxResult<()>;
    /// The times this session or a guard it held went Suspended or Lost,
    /// from its opening until now; `None` where nothing says (the raw floor).
    fn alarms(&mut self) -> Option<usize> {
        None
    }
}

/// zklock's contended session: one client and one mutex.
struct ZklockSession {
    client: Client,
    alarms: SessionAlarms,
    mutex: Mutex,
    /// The guard held, and its state changes since it was granted.
    guard: Option<(LockGuard, Receiver<LockState>)>,
    guard_alarms: usize,
}

impl ContendedSession for ZklockSession {
    fn lock(&mut self) -> BoxResult<()> {
        let guard = self.mutex.lock()?;
        let changes = guard.state_changes();
        self.guard = Some((guard, changes));
        Ok(())
    }

    /// Released as in `cycle`: the guard drops.
    fn unlock(&mut self) -> BoxResult<()> {
        if let Some((guard, changes)) = self.guard.take() {
            self.guard_alarms += guard_alarms(&changes);
            drop(guard);
        }
        Ok(())
    }

    fn alarms(&mut self) -> Option<usize> {
        Some(self.guard_alarms + self.alarms.count())
    }

    /// A dropped guard's delete is already the I/O thread's.
    fn settle(&mut self) -> BoxResult<()> {
        Ok(())
    }

    fn close(self) -> BoxResult<()> {
        Ok(self.client.close()?)
    }
}

/// `sessions` sessions, one thread each, opened by `open(session index)`,
/// take turns on one lock `cycles` times each, holding it `hold_us`.
fn contended<S: ContendedSession>(
    p: &Params,
    out: &mut ObjWriter,
    open: impl Fn(usize) -> BoxResult<S> + Send + Sync + 'static,
) -> BoxResult<()> {
    let sessions = p.usize("sessions", 8)?.max(1);
    let cycles = p.usize("cycles", 100)?;
    let warm = p.usize("warm", cycles / 4)?;
    let hold = Duration::from_micros(p.usize("hold_us", 0)? as u64);
    let t0 = Instant::now();
    let open = Arc::new(open);
    let warmed = Arc::new(Barrier::new(sessions + 1));
    let go = Arc::new(Barrier::new(sessions + 1));
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for id in 0..sessions {
        let open = open.clone();
        let (warmed, go) = (warmed.clone(), go.clone());
        let (inside, overlaps) = (inside.clone(), overlaps.clone());
        threads.push(std::thread::spawn(
            move || -> BoxResult<(Vec<[u64; 3]>, S)> {
                let turn = |s: &mut S, record: &mut Vec<[u64; 3]>| -> BoxResult<()> {
                    s.lock()?;
                    let acquired = ns(t0);
                    if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    if !hold.is_zero() {
                        std::thread::sleep(hold);
                    }
                    inside.fetch_sub(1, Ordering::SeqCst);
                    record.push([id as u64, acquired, ns(t0)]);
                    s.unlock()
                };
                let warm_result = open(id).and_then(|mut s| {
                    let mut scratch = Vec::new();
                    for _ in 0..warm {
                        turn(&mut s, &mut scratch)?;
                    }
                    s.settle()?;
                    Ok(s)
                });
                warmed.wait();
                go.wait();
                let mut s = warm_result?;
                let mut record = Vec::with_capacity(cycles);
                for _ in 0..cycles {
                    turn(&mut s, &mut record)?;
                }
                s.settle()?;
                Ok((record, s))
            },
        ));
    }
    warmed.wait();
    stage("ready")?;
    go.wait();
    let mut timeline = Vec::new();
    let mut opened = Vec::new();
    let mut first_error = None;
    for t in threads {
        match t.join().map_err(|_| "a session thread panicked")? {
            Ok((r, s)) => {
                timeline.extend(r);
                opened.push(s);
            }
            Err(e) => first_error = first_error.or(Some(e)),
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    stage("done")?;
    out.rows("timeline", &timeline)
        .num("overlaps_seen", overlaps.load(Ordering::SeqCst) as f64);
    let alarms: Option<usize> = opened.iter_mut().map(S::alarms).sum();
    if let Some(n) = alarms {
        out.num("suspended_lost", n as f64);
    }
    for s in opened {
        s.close()?;
    }
    Ok(())
}

/// `waiters` contenders over `sessions` sessions queue behind one holder
/// (a session of its own), then pass through: each takes the lock and
/// releases it at once. `suspended_lost`: the times a session or the
/// holder's guard went Suspended or Lost, from the connections to `done`.
fn waiters(
    conn: Conn,
    connect_string: &str,
    path: &str,
    p: &Params,
    out: &mut ObjWriter,
) -> BoxResult<()> {
    let n = p.usize("waiters", 1000)?;
    let sessions = p.usize("sessions", 10)?.max(1);
    let variant = p.str("variant", "blocking");
    let holder_client = conn.connect(connect_string)?;
    let holder = Mutex::new(&holder_client, path)?;
    let guard = holder.lock()?;
    let holder_changes = guard.state_changes();
    let clients = (0..sessions)
        .map(|_| conn.connect(connect_string))
        .collect::<BoxResult<Vec<_>>>()?;
    let session_alarms: Vec<SessionAlarms> = std::iter::once(&holder_client)
        .chain(&clients)
        .map(SessionAlarms::of)
        .collect();
    stage("ready")?;
    let t0 = Instant::now();
    let mut alarms = 0;
    let last_done = Arc::new(AtomicU64::new(0));
    let passed = Arc::new(AtomicUsize::new(0));
    match variant {
        "blocking" => {
            // The blocking API: one thread per waiter.
            let mut threads = Vec::with_capacity(n);
            for i in 0..n {
                let (client, path) = (clients[i % sessions].clone(), path.to_owned());
                let (last_done, passed) = (last_done.clone(), passed.clone());
                threads.push(std::thread::spawn(move || -> BoxResult<()> {
                    let mutex = Mutex::new(&client, &path)?;
                    cycle(&mutex)?;
                    passed.fetch_add(1, Ordering::SeqCst);
                    last_done.fetch_max(ns(t0), Ordering::SeqCst);
                    Ok(())
                }));
            }
            stage("queued")?;
            let released = ns(t0);
            alarms += guard_alarms(&holder_changes);
            guard.unlock()?;
            let mut errors = 0;
            let mut first_error = None;
            for t in threads {
                if let Err(e) = t.join().map_err(|_| "a waiter thread panicked")? {
                    errors += 1;
                    first_error.get_or_insert(e.to_string());
                }
            }
            out.num(
                "pass_ns",
                last_done.load(Ordering::SeqCst).saturating_sub(released) as f64,
            )
            .num("errors", errors as f64);
            if let Some(e) = first_error {
                out.str("first_error", &e);
            }
        }
        "nonblocking" => {
            // The non-blocking handles: one thread for every waiter.
            let mutexes = (0..n)
                .map(|i| Mutex::new(&clients[i % sessions], path))
                .collect::<Result<Vec<_>, _>>()?;
            // One channel for every outcome: a Select over thousands of
            // receivers would cost the harness O(n) per hand-off.
            let mut pending = PendingSet::new();
            for m in &mutexes {
                let _ = pending.start_lock(m, None);
            }
            stage("queued")?;
            let released = ns(t0);
            alarms += guard_alarms(&holder_changes);
            guard.unlock()?;
            let mut errors = 0;
            let mut first_error = None;
            for _ in 0..n {
                let (_, outcome) = pending
                    .recv_timeout(Duration::from_secs(600))
                    .ok_or("no hand-off within 600 s")?;
                match outcome {
                    Ok(g) => {
                        drop(g);
                        passed.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert(e.to_string());
                    }
                }
            }
            out.num("pass_ns", ns(t0).saturating_sub(released) as f64)
                .num("errors", errors as f64);
            if let Some(e) = first_error {
                out.str("first_error", &e);
            }
        }
        other => return Err(format!("unknown waiters variant {other:?}").into()),
    }
    stage("done")?;
    alarms += session_alarms
        .iter()
        .map(SessionAlarms::count)
        .sum::<usize>();
    out.num("passed", passed.load(Ordering::SeqCst) as f64)
        .num("suspended_lost", alarms as f64);
    holder_client.close()?;
    for c in clients {
        c.close()?;
    }
    Ok(())
}

/// One session takes `locks` different locks (`<path>/l<i>`, parents made
/// by the orchestrator), holds them all, then releases them all.
fn held(
    conn: Conn,
    connect_string: &str,
    path: &str,
    p: &Params,
    out: &mut ObjWriter,
) -> BoxResult<()> {
    let locks = p.usize("locks", 10_000)?;
    let client = conn.connect(connect_string)?;
    let mutexes = (0..locks)
        .map(|i| Mutex::new(&client, &format!("{path}/l{i}")))
        .collect::<Result<Vec<_>, _>>()?;
    stage("ready")?;
    let t = Instant::now();
    let guards = mutexes
        .iter()
        .map(Mutex::lock)
        .collect::<Result<Vec<_>, _>>()?;
    let take_ns = t.elapsed().as_nanos() as u64;
    stage("held")?;
    let t = Instant::now();
    for g in guards {
        g.unlock()?;
    }
    let release_ns = t.elapsed().as_nanos() as u64;
    stage("done")?;
    out.num("take_ns", take_ns as f64)
        .num("release_ns", release_ns as f64);
    client.close()?;
    Ok(())
}

/// `clients` clients, each holding one lock (`<path>/l<i>`, parents made by
/// the orchestrator, taken `stagger_ms / clients` apart), then idle for
/// `idle_ms` between `ready` and `done`:
/// what the sessions alone send to the server (pings, and with the leader
/// check its `sync`s). The JSON names the sessions (`session_ids`, hex, for
/// the orchestrator to find them in `cons`), the session timeout the server
/// granted (`negotiated_ms`), and `suspended_lost` as the other modes.
fn idle(
    conn: Conn,
    connect_string: &str,
    path: &str,
    p: &Params,
    out: &mut ObjWriter,
) -> BoxResult<()> {
    let n = p.usize("clients", 10)?.max(1);
    let idle = Duration::from_millis(p.usize("idle_ms", 10_000)? as u64);
    let clients = (0..n)
        .map(|_| conn.connect(connect_string))
        .collect::<BoxResult<Vec<_>>>()?;
    let session_alarms: Vec<SessionAlarms> = clients.iter().map(SessionAlarms::of).collect();
    let mutexes = clients
        .iter()
        .enumerate()
        .map(|(i, c)| Mutex::new(c, &format!("{path}/l{i}")))
        .collect::<Result<Vec<_>, _>>()?;
    // The locks are taken `stagger_ms / clients` apart (default: over a
    // third of the session timeout, one ping period), so that the sessions'
    // pings and syncs, each timed from the session's last request, are
    // spread over their periods instead of all falling at once, possibly
    // just inside or just outside the window.
    let stagger =
        Duration::from_millis(p.usize("stagger_ms", conn.timeout.as_millis() as usize / 3)? as u64);
    let mut guards = Vec::with_capacity(n);
    for m in &mutexes {
        let g = m.lock()?;
        let changes = g.state_changes();
        guards.push((g, changes));
        std::thread::sleep(stagger / n as u32);
    }
    stage("ready")?;
    std::thread::sleep(idle);
    stage("done")?;
    let mut alarms = 0;
    let mut held_at_end = 0;
    for (g, changes) in &guards {
        alarms += guard_alarms(changes);
        if g.state() == LockState::Held {
            held_at_end += 1;
        }
    }
    alarms += session_alarms
        .iter()
        .map(SessionAlarms::count)
        .sum::<usize>();
    let ids: Vec<String> = clients
        .iter()
        .map(|c| format!("0x{:x}", c.session_id()))
        .collect();
    let negotiated = clients[0]
        .negotiated_timeout()
        .map_or(f64::NAN, |t| t.as_millis() as f64);
    out.str("session_ids", &ids.join(","))
        .num("negotiated_ms", negotiated)
        .num("held_at_end", held_at_end as f64)
        .num("suspended_lost", alarms as f64);
    for (g, _) in guards {
        g.unlock()?;
    }
    for c in clients {
        c.close()?;
    }
    Ok(())
}
