//! `floor-waiters`: the waiters mode by the codec alone. A holder (a session
//! of its own) takes the lock; `waiters` nodes queue behind it, spread over
//! `sessions` sessions, one thread and one blocking socket each, every node
//! watching its predecessor with getData (unless the predecessor is the same
//! session's: see `Waiting::rewatch`). When the holder lets go, each
//! session lists the children once per batch of watch events, takes and at
//! once releases (deletes, in one write) its nodes at the head of the queue,
//! and watches the new predecessors of the nodes it still has.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;

use super::{
    create, created, delete, is_no_node, list, node_prefix, queue_of, seq, watch, Session,
};
use crate::json::ObjWriter;
use crate::worker::{ns, stage, Params};
use crate::BoxResult;

/// Creates in one write while queueing.
const BATCH: usize = 250;
/// Listings one session may make in a row without being done: each follows
/// a predecessor that left between a listing and its watch.
const MAX_LISTINGS: usize = 100_000;

/// `floor-waiters <connect> <lock path> waiters=N sessions=S`.
pub fn waiters(connect: &str, path: &str, p: &Params, out: &mut ObjWriter) -> BoxResult<()> {
    let n = p.usize("waiters", 1000)?;
    let sessions = p.usize("sessions", 10)?.max(1);
    let mut holder = Session::connect(connect)?;
    let x = holder.queue(&create(&node_prefix(path, sessions)));
    holder.flush()?;
    let held = created(holder.ok(x)?)?;
    let t0 = Instant::now();
    // opened → `ready` → start → queue → queued → `queued` → go.
    let barriers: [Arc<Barrier>; 4] = std::array::from_fn(|_| Arc::new(Barrier::new(sessions + 1)));
    let last_done = Arc::new(AtomicU64::new(0));
    let passed = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::with_capacity(sessions);
    for id in 0..sessions {
        let count = n / sessions + usize::from(id < n % sessions);
        let (connect, parent) = (connect.to_owned(), path.to_owned());
        let [opened, start, queued, go] = barriers.clone();
        let (last_done, passed) = (last_done.clone(), passed.clone());
        threads.push(std::thread::spawn(move || -> BoxResult<()> {
            let session = Session::connect(&connect);
            opened.wait();
            start.wait();
            let prefix = node_prefix(&parent, id);
            let queue = session.and_then(|s| Waiting::queue(s, parent, &prefix, count));
            queued.wait();
            go.wait();
            let mut w = queue?;
            w.pass(t0, &last_done, &passed)?;
            w.session.close()
        }));
    }
    let [opened, start, queued, go] = barriers;
    opened.wait();
    stage("ready")?;
    start.wait();
    queued.wait();
    stage("queued")?;
    go.wait();
    let released = ns(t0);
    let x = holder.queue(&delete(held));
    holder.flush()?;
    holder.ok(x)?;
    let mut first_error = None;
    for t in threads {
        if let Err(e) = t.join().map_err(|_| "a session thread panicked")? {
            first_error.get_or_insert(e.to_string());
        }
    }
    let passed = passed.load(Ordering::SeqCst);
    out.num(
        "pass_ns",
        last_done.load(Ordering::SeqCst).saturating_sub(released) as f64,
    )
    .num("errors", n.saturating_sub(passed) as f64);
    if let Some(e) = first_error {
        out.str("first_error", &e);
    }
    stage("done")?;
    out.num("passed", passed as f64);
    holder.close()
}

/// One session's nodes in the queue.
struct Waiting {
    session: Session,
    parent: String,
    /// This session's nodes not yet passed through, by sequence number.
    mine: BTreeMap<u64, String>,
    /// The predecessor each of them watches.
    watching: BTreeMap<u64, String>,
}

impl Waiting {
    /// Creates `count` nodes and sets every predecessor watch.
    fn queue(session: Session, parent: String, prefix: &str, count: usize) -> BoxResult<Waiting> {
        let mut w = Waiting {
            session,
            parent,
            mine: BTreeMap::new(),
            watching: BTreeMap::new(),
        };
        let mut left = count;
        while left > 0 {
            let k = left.min(BATCH);
            let xids: Vec<i32> = (0..k).map(|_| w.session.queue(&create(prefix))).collect();
            w.session.flush()?;
            for x in xids {
                let path = created(w.session.ok(x)?)?;
                let name = path.rsplit('/').next().unwrap_or(&path).to_owned();
                let n = seq(&name).ok_or_else(|| format!("{path} has no sequence suffix"))?;
                w.mine.insert(n, name);
            }
            left -= k;
        }
        // Nobody leaves while the holder holds: one listing sets them all.
        for _ in 0..MAX_LISTINGS {
            let queue = w.list()?;
            if !w.rewatch(&queue)? {
                return Ok(w);
            }
        }
        Err("predecessors kept leaving while queueing".into())
    }

    /// The queue now; every watch event read so far is accounted for in it.
    fn list(&mut self) -> BoxResult<Vec<(u64, String)>> {
        let x = self.session.queue(&list(&self.parent));
        self.session.flush()?;
        let queue = queue_of(self.session.ok(x)?)?;
        self.session.fired.clear();
        Ok(queue)
    }

    /// Watches the predecessor of each waiting node whose watch is on
    /// another node (or none); true when one of them was already gone. A
    /// node right behind another of this session's needs no watch: it
    /// leaves the queue in the same write as that one (see `pass`).
    fn rewatch(&mut self, queue: &[(u64, String)]) -> BoxResult<bool> {
        let mut sent = Vec::new();
        for pair in queue.windows(2) {
            let ((a, ahead), (n, _)) = (&pair[0], &pair[1]);
            if self.mine.contains_key(n)
                && !self.mine.contains_key(a)
                && self.watching.get(n) != Some(ahead)
            {
                let x = self
                    .session
                    .queue(&watch(format!("{}/{ahead}", self.parent)));
                sent.push((x, *n, ahead.clone()));
            }
        }
        if sent.is_empty() {
            return Ok(false);
        }
        self.session.flush()?;
        let mut gone = false;
        for (x, n, ahead) in sent {
            let r = self.session.until(x)?;
            if is_no_node(&r) {
                self.watching.remove(&n);
                gone = true;
            } else {
                r.map_err(|e| format!("a getData with a watch answered {e:?}"))?;
                self.watching.insert(n, ahead);
            }
        }
        Ok(gone)
    }

    /// Until every node of this session has taken the lock and let it go.
    fn pass(&mut self, t0: Instant, last_done: &AtomicU64, passed: &AtomicUsize) -> BoxResult<()> {
        while !self.mine.is_empty() {
            self.session.events()?;
            for listings in 0.. {
                if listings == MAX_LISTINGS {
                    return Err("predecessors kept leaving while passing through".into());
                }
                let mut queue = self.list()?;
                // This session's nodes at the head hold the lock, one after
                // the other: each is released at once, all in one write.
                let head = queue
                    .iter()
                    .take_while(|(n, _)| self.mine.contains_key(n))
                    .count();
                if head > 0 {
                    for (n, name) in queue.drain(..head) {
                        self.mine.remove(&n);
                        self.watching.remove(&n);
                        self.session
                            .queue(&delete(format!("{}/{name}", self.parent)));
                    }
                    self.session.flush()?;
                    last_done.fetch_max(ns(t0), Ordering::SeqCst);
                    passed.fetch_add(head, Ordering::SeqCst);
                }
                if !self.rewatch(&queue)? {
                    break;
                }
            }
        }
        self.session.drain()
    }
}
