//! `floor-waiters`: the waiters mode by the codec alone. A holder (a session
//! of its own) takes the lock; `waiters` nodes queue behind it, spread over
//! `sessions` sessions, one thread and one blocking socket each, every node
//! watching its predecessor with getData (unless the predecessor is the same
//! session's: see `Waiting::rewatch`). When the holder lets go, each session
//! lists the children when a watch fires (once for every event read before
//! the listing's reply), takes and at once releases (deletes) its nodes at
//! the head of the queue, and watches the new predecessors of the nodes it
//! still has, in one write, never waiting on a reply while an event could
//! stand behind it (`Waiting::pass`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;

use jute::ReplyResult;

use super::raw::{
    create, created, delete, is_no_node, list, node_prefix, queue_of, seq, watch, Msg, Session,
};
use crate::json::ObjWriter;
use crate::stage::{ns, stage, Params};
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
            let sent = w.rewatch(&queue);
            w.session.flush()?;
            let mut gone = false;
            for (x, n) in sent {
                let r = w.session.until(x)?;
                gone |= w.watched(n, r)?;
            }
            if !gone {
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

    /// Queues a watch on the predecessor of each waiting node whose watch is
    /// on another node (or none), and counts it as set; returns the xid and
    /// node of each. A node right behind another of this session's needs no
    /// watch: it leaves the queue in the same write as that one (`pass`).
    fn rewatch(&mut self, queue: &[(u64, String)]) -> Vec<(i32, u64)> {
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
                self.watching.insert(*n, ahead.clone());
                sent.push((x, *n));
            }
        }
        sent
    }

    /// The answer to node `n`'s watch: true when its predecessor was already
    /// gone (no watch was left: list again).
    fn watched(&mut self, n: u64, r: ReplyResult) -> BoxResult<bool> {
        if is_no_node(&r) {
            self.watching.remove(&n);
            return Ok(true);
        }
        r.map_err(|e| format!("a getData with a watch answered {e:?}"))?;
        Ok(false)
    }

    /// Until every node of this session has taken the lock and let it go:
    /// one loop over whatever the server sends, so that no reply is waited
    /// for while a watch event stands behind it.
    fn pass(&mut self, t0: Instant, last_done: &AtomicU64, passed: &AtomicUsize) -> BoxResult<()> {
        // The getChildren in flight, if any; whether the last listing is
        // out of date; the getData watches in flight, by xid.
        let mut listing: Option<i32> = None;
        let mut stale = false;
        let mut watches: BTreeMap<i32, u64> = BTreeMap::new();
        let mut listings = 0;
        while !self.mine.is_empty() {
            if stale && listing.is_none() {
                listings += 1;
                if listings > MAX_LISTINGS {
                    return Err("more listings than a pass-through can need".into());
                }
                listing = Some(self.session.queue(&list(&self.parent)));
                self.session.flush()?;
                stale = false;
            }
            match self.session.next()? {
                // An event read before a listing's reply is in that listing
                // (the server sends no read's reply across a commit).
                Msg::Event(_) => stale |= listing.is_none(),
                Msg::Reply(x, r) if Some(x) == listing => {
                    listing = None;
                    let r = r.map_err(|e| format!("a getChildren answered {e:?}"))?;
                    let mut queue = queue_of(r)?;
                    // This session's nodes at the head hold the lock, one
                    // after the other: each is released at once, all in one
                    // write, with the watches the rest now need.
                    let head = queue
                        .iter()
                        .take_while(|(n, _)| self.mine.contains_key(n))
                        .count();
                    for (n, name) in queue.drain(..head) {
                        self.mine.remove(&n);
                        self.watching.remove(&n);
                        self.session
                            .queue(&delete(format!("{}/{name}", self.parent)));
                    }
                    watches.extend(self.rewatch(&queue));
                    self.session.flush()?;
                    if head > 0 {
                        last_done.fetch_max(ns(t0), Ordering::SeqCst);
                        passed.fetch_add(head, Ordering::SeqCst);
                    }
                }
                Msg::Reply(x, r) => match watches.remove(&x) {
                    // A listing sent later covers a predecessor found gone.
                    Some(n) => stale |= self.watched(n, r)? && listing.is_none(),
                    None => {
                        r.map_err(|e| format!("a delete answered {e:?}"))?;
                    }
                },
            }
        }
        self.session.drain()
    }
}
