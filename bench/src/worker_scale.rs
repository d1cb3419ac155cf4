//! zklock's modes at scale: many waiters queued behind one holder
//! (`waiters`), many locks held by one session (`held`), and idle clients
//! each holding a lock (`idle`).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zklock::recipes::{LockState, Mutex, PendingSet};

use crate::json::ObjWriter;
use crate::session::{cycle, guard_alarms, Conn, SessionAlarms};
use crate::stage::{ns, stage, Params};
use crate::BoxResult;

/// `waiters` contenders over `sessions` sessions queue behind one holder
/// (a session of its own), then pass through: each takes the lock and
/// releases it at once. `suspended_lost`: the times a session or the
/// holder's guard went Suspended or Lost, from the connections to `done`.
pub(crate) fn waiters(
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
pub(crate) fn held(
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
pub(crate) fn idle(
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
