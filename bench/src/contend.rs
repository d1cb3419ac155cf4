//! The contended mode's harness: `sessions` sessions, one thread each,
//! take turns on one lock and record a timeline. It drives zklock's
//! sessions (src/worker.rs) and the raw floor's (src/floor/contended.rs)
//! alike, through [`ContendedSession`].

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use crate::json::ObjWriter;
use crate::stage::{ns, stage, Params};
use crate::BoxResult;

/// One session's side of the contended mode, as [`contended`] drives it:
/// zklock's (`ZklockSession` in src/worker.rs) or the raw floor's
/// (`Contender` in src/floor/contended.rs).
pub(crate) trait ContendedSession: Send + 'static {
    /// Returns once this session holds the lock.
    fn lock(&mut self) -> BoxResult<()>;
    /// Lets the lock go; the delete may still be on its way, ahead of
    /// whatever the session sends next. `again`: another turn of the same
    /// phase (warm-up or timed) follows, so a session may queue for it at
    /// once (zklock's requeue); after the last turn of each it releases.
    fn unlock(&mut self, again: bool) -> BoxResult<()>;
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

/// `sessions` sessions, one thread each, opened by `open(session index)`,
/// take turns on one lock `cycles` times each, holding it `hold_us`.
pub(crate) fn contended<S: ContendedSession>(
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
                let turn = |s: &mut S, record: &mut Vec<[u64; 3]>, again: bool| -> BoxResult<()> {
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
                    s.unlock(again)
                };
                let warm_result = open(id).and_then(|mut s| {
                    let mut scratch = Vec::new();
                    for i in 0..warm {
                        turn(&mut s, &mut scratch, i + 1 < warm)?;
                    }
                    s.settle()?;
                    Ok(s)
                });
                warmed.wait();
                go.wait();
                let mut s = warm_result?;
                let mut record = Vec::with_capacity(cycles);
                for i in 0..cycles {
                    turn(&mut s, &mut record, i + 1 < cycles)?;
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
