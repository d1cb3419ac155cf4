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

use zklock::recipes::{LockGuard, Mutex, PendingSet};
use zklock::Client;

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

fn connect(connect: &str) -> BoxResult<Client> {
    Ok(Client::connect(connect, SESSION_TIMEOUT)?)
}

/// `zklock-worker <mode> <connect> <path> [name=value ...]`
pub fn main(args: &[String]) -> BoxResult<()> {
    let [mode, connect_string, path, rest @ ..] = args else {
        return Err("usage: zklock-worker <mode> <connect> <path> [name=value ...]".into());
    };
    let p = Params::parse(rest)?;
    let mut out = ObjWriter::new();
    out.str("impl", "zklock").str("mode", mode);
    match mode.as_str() {
        "uncontended" => uncontended(connect_string, path, &p, &mut out)?,
        "contended" => {
            let (connect_string, path) = (connect_string.clone(), path.clone());
            contended(&p, &mut out, move |_| {
                let client = connect(&connect_string)?;
                let mutex = Mutex::new(&client, &path)?;
                Ok(ZklockSession {
                    client,
                    mutex,
                    guard: None,
                })
            })?
        }
        "waiters" => waiters(connect_string, path, &p, &mut out)?,
        "held" => held(connect_string, path, &p, &mut out)?,
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

/// `cycles` lock+unlock in a row on one mutex; the latency of each.
fn uncontended(connect_string: &str, path: &str, p: &Params, out: &mut ObjWriter) -> BoxResult<()> {
    let cycles = p.usize("cycles", 1000)?;
    let warm = p.usize("warm", cycles / 2)?;
    let client = connect(connect_string)?;
    let mutex = Mutex::new(&client, path)?;
    cycle(&mutex)?;
    stage("rest")?;
    for _ in 0..warm {
        cycle(&mutex)?;
    }
    stage("ready")?;
    let mut lat = Vec::with_capacity(cycles);
    for _ in 0..cycles {
        let t = Instant::now();
        cycle(&mutex)?;
        lat.push(t.elapsed().as_nanos() as u64);
    }
    stage("done")?;
    out.nums("latencies_ns", &lat);
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
}

/// zklock's contended session: one client and one mutex.
struct ZklockSession {
    client: Client,
    mutex: Mutex,
    guard: Option<LockGuard>,
}

impl ContendedSession for ZklockSession {
    fn lock(&mut self) -> BoxResult<()> {
        self.guard = Some(self.mutex.lock()?);
        Ok(())
    }

    /// Released as in `cycle`: the guard drops.
    fn unlock(&mut self) -> BoxResult<()> {
        drop(self.guard.take());
        Ok(())
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
    for s in opened {
        s.close()?;
    }
    Ok(())
}

/// `waiters` contenders over `sessions` sessions queue behind one holder
/// (a session of its own), then pass through: each takes the lock and
/// releases it at once.
fn waiters(connect_string: &str, path: &str, p: &Params, out: &mut ObjWriter) -> BoxResult<()> {
    let n = p.usize("waiters", 1000)?;
    let sessions = p.usize("sessions", 10)?.max(1);
    let variant = p.str("variant", "blocking");
    let holder_client = connect(connect_string)?;
    let holder = Mutex::new(&holder_client, path)?;
    let guard = holder.lock()?;
    let clients = (0..sessions)
        .map(|_| connect(connect_string))
        .collect::<BoxResult<Vec<_>>>()?;
    stage("ready")?;
    let t0 = Instant::now();
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
    out.num("passed", passed.load(Ordering::SeqCst) as f64);
    holder_client.close()?;
    for c in clients {
        c.close()?;
    }
    Ok(())
}

/// One session takes `locks` different locks (`<path>/l<i>`, parents made
/// by the orchestrator), holds them all, then releases them all.
fn held(connect_string: &str, path: &str, p: &Params, out: &mut ObjWriter) -> BoxResult<()> {
    let locks = p.usize("locks", 10_000)?;
    let client = connect(connect_string)?;
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
