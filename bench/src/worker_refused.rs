//! zklock's `refused` mode: clients that hold a lock while they go on
//! writing, half of their writes refused by the server (create of an
//! existing path, setData at a stale version, delete of a missing node, a
//! failing multi). A refusal the leader ordered proves the session alive as
//! a success does, so no holder may go Suspended or Lost on a healthy
//! server.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zklock::recipes::{LockState, Mutex};
use zklock::{Client, CreateMode, Error, ErrorCode, Op, SessionState};

use crate::json::ObjWriter;
use crate::session::Conn;
use crate::stage::{stage, Params};
use crate::BoxResult;

/// What one client's writer saw.
#[derive(Default)]
struct Tally {
    ok: u64,
    refused: u64,
    /// Anything else: a connection lost, a refusal not of the kind sent.
    failed: u64,
}

enum Outcome {
    Ok,
    Refused,
    Failed,
}

/// A write of a client whose own nodes lie under `root`: a setData on its
/// own node that succeeds, or refusal `kind` of four.
fn write(client: &Client, root: &str, refused: bool, kind: usize) -> Outcome {
    let mine = format!("{root}/mine");
    if !refused {
        return match client.set_data(&mine, b"w", None) {
            Ok(_) => Outcome::Ok,
            Err(_) => Outcome::Failed,
        };
    }
    let outcome = match kind % 4 {
        0 => client.create(&mine, b"", CreateMode::Persistent).map(drop),
        1 => client.set_data(&mine, b"w", Some(1 << 30)).map(drop),
        2 => client.delete(&format!("{root}/missing"), None),
        _ => client
            .multi(&[
                Op::check(&mine, None),
                Op::create(&mine, b"", CreateMode::Persistent),
            ])
            .map(drop),
    };
    match outcome {
        Err(Error::Server {
            code: ErrorCode::NodeExists | ErrorCode::BadVersion | ErrorCode::NoNode,
            ..
        })
        | Err(Error::MultiFailed {
            code: ErrorCode::NodeExists,
            ..
        }) => Outcome::Refused,
        _ => Outcome::Failed,
    }
}

/// `clients` clients (session timeout `timeout_ms`), each holding one lock
/// (`<path>/l<i>`, parents made by the orchestrator) and writing every
/// `every_ms` under `<path>/w<i>`, for `run_ms` between `ready` and `done`.
/// Half of the writes are refused: in turns of `phase_ms` (default 5 s,
/// over three quarters of a 6 s timeout) every write is refused, then
/// every write succeeds; the clients' turns are staggered. Client `i`'s
/// refusals are of kind `i % 4`: a create of an existing path, a setData at
/// a stale version, a delete of a missing node, a failing multi. Refusals
/// in a row, as a create-if-absent sees while someone else holds the path,
/// are what a session that counted only successes as the leader's word
/// could not live through. JSON: `suspended` and `lost`
/// (times a session or a held guard said so; `Expired` counts as lost),
/// `writes_ok`, `writes_refused`, `writes_failed`, `held_at_end`,
/// `negotiated_ms`.
pub(crate) fn refused(
    conn: Conn,
    connect_string: &str,
    path: &str,
    p: &Params,
    out: &mut ObjWriter,
) -> BoxResult<()> {
    let n = p.usize("clients", 6)?.max(1);
    let run = Duration::from_millis(p.usize("run_ms", 30_000)? as u64);
    let every = Duration::from_millis(p.usize("every_ms", 200)? as u64);
    let phase = Duration::from_millis(p.usize("phase_ms", 5_000)? as u64);
    let clients = (0..n)
        .map(|_| conn.connect(connect_string))
        .collect::<BoxResult<Vec<_>>>()?;
    let sessions: Vec<_> = clients.iter().map(Client::subscribe).collect();
    let mut guards = Vec::with_capacity(n);
    for (i, c) in clients.iter().enumerate() {
        let root = format!("{path}/w{i}");
        for node in [root.clone(), format!("{root}/mine")] {
            match c.create(&node, b"", CreateMode::Persistent) {
                Ok(_)
                | Err(Error::Server {
                    code: ErrorCode::NodeExists,
                    ..
                }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let g = Mutex::new(c, &format!("{path}/l{i}"))?.lock()?;
        let changes = g.state_changes();
        guards.push((g, changes));
    }
    stage("ready")?;
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let (c, stop, root) = (c.clone(), Arc::clone(&stop), format!("{path}/w{i}"));
            std::thread::spawn(move || {
                let mut tally = Tally::default();
                let start = Instant::now();
                let offset = phase * 2 * i as u32 / n as u32;
                let mut next = start;
                while !stop.load(Ordering::SeqCst) {
                    let turn = (next - start + offset).as_millis() / phase.as_millis().max(1);
                    match write(&c, &root, turn.is_multiple_of(2), i) {
                        Outcome::Ok => tally.ok += 1,
                        Outcome::Refused => tally.refused += 1,
                        Outcome::Failed => tally.failed += 1,
                    }
                    next += every;
                    std::thread::sleep(next.saturating_duration_since(Instant::now()));
                }
                tally
            })
        })
        .collect();
    std::thread::sleep(run);
    stop.store(true, Ordering::SeqCst);
    let mut total = Tally::default();
    for w in writers {
        let t = w.join().map_err(|_| "a writer panicked")?;
        total.ok += t.ok;
        total.refused += t.refused;
        total.failed += t.failed;
    }
    stage("done")?;
    let (mut suspended, mut lost, mut held_at_end) = (0usize, 0usize, 0usize);
    for (g, changes) in &guards {
        for s in changes.try_iter() {
            match s {
                LockState::Suspended => suspended += 1,
                LockState::Lost => lost += 1,
                _ => {}
            }
        }
        if g.state() == LockState::Held {
            held_at_end += 1;
        }
    }
    for states in &sessions {
        for s in states.try_iter() {
            match s {
                SessionState::Suspended => suspended += 1,
                SessionState::Lost | SessionState::Expired => lost += 1,
                _ => {}
            }
        }
    }
    let negotiated = clients[0]
        .negotiated_timeout()
        .map_or(f64::NAN, |t| t.as_millis() as f64);
    out.num("suspended", suspended as f64)
        .num("lost", lost as f64)
        .num("writes_ok", total.ok as f64)
        .num("writes_refused", total.refused as f64)
        .num("writes_failed", total.failed as f64)
        .num("held_at_end", held_at_end as f64)
        .num("negotiated_ms", negotiated);
    for (g, _) in guards {
        g.unlock()?;
    }
    for c in clients {
        c.close()?;
    }
    Ok(())
}
