//! The application's own writes on a client that also holds and waits for
//! locks, most of them refused by the server: a create of a path that
//! exists, a setData at a stale version, a delete of a missing node, a
//! multi whose check fails; and now and then one that succeeds. Everyday
//! patterns (create-if-absent, compare-and-set, delete-if-present) that
//! must never make the session or its holders flap.
//!
//! ZooKeeper orders a refused write like any other: the leader's
//! PrepRequestProcessor.pRequest checks the session first
//! (`checkSession` in pRequest2TxnCreate and the other pRequest2Txn
//! branches), and when the op then fails with a KeeperException it keeps
//! the txn header and its zxid, turns the type into `OpCode.error` with an
//! `ErrorTxn` carrying the code, and hands it on to be proposed and
//! committed; FinalRequestProcessor answers the client only once that txn
//! is applied. So the answer comes after the leader heard the session, as
//! for a write that succeeds. The server model follows it (requests.rs:
//! every write takes a zxid, failed or not, and a server cut from its
//! leader answers none of them, follower.rs).
//!
//! The public calls block, so each runs on a thread of its own; the world
//! waits until its request is queued for the core (the only moment that
//! matters to the run, which stays deterministic) and never reads the
//! outcome: the thread ends when the reply comes or the client goes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex as StdMutex};

use zklock::{CreateMode, Op};

use super::*;

type Call = Box<dyn FnOnce() + Send>;

/// Threads that make blocking calls for the world, each waiting for its
/// next call when its last one returned (a call waits for a reply only
/// the world's later steps bring, so a busy thread is never waited for).
#[derive(Default)]
pub(super) struct Callers {
    threads: Vec<(Sender<Call>, Arc<AtomicBool>)>,
    /// Calls begun (rung by a thread as it takes one up): the world sleeps
    /// on it rather than spin while the thread is still waking.
    begun: Arc<(StdMutex<u64>, Condvar)>,
    asked: u64,
}

impl Callers {
    /// Runs `call` on an idle thread (a new one if none is): the flag says
    /// whether it is still running.
    pub(super) fn run(&mut self, call: Call) -> Arc<AtomicBool> {
        self.asked += 1;
        let idle = self
            .threads
            .iter()
            .position(|(_, busy)| !busy.load(Ordering::Acquire));
        let at = idle.unwrap_or_else(|| {
            let (tx, rx) = channel::<Call>();
            let busy = Arc::new(AtomicBool::new(false));
            let flag = busy.clone();
            let begun = self.begun.clone();
            std::thread::spawn(move || {
                while let Ok(call) = rx.recv() {
                    if let Ok(mut n) = begun.0.lock() {
                        *n += 1;
                        begun.1.notify_all();
                    }
                    call();
                    flag.store(false, Ordering::Release);
                }
            });
            self.threads.push((tx, busy));
            self.threads.len() - 1
        });
        let (tx, busy) = &self.threads[at];
        busy.store(true, Ordering::Release);
        let flag = busy.clone();
        if tx.send(call).is_err() {
            flag.store(false, Ordering::Release);
            self.asked -= 1;
            return flag;
        }
        // Until the thread has taken the call up.
        let (lock, rung) = &*self.begun;
        if let Ok(mut n) = lock.lock() {
            while *n < self.asked {
                n = match rung.wait(n) {
                    Ok(n) => n,
                    Err(_) => break,
                };
            }
        }
        flag
    }
}

/// The node the application's writes aim at (it exists; its version is
/// never the one a refused setData expects), and one that never exists.
pub(super) const APP_NODE: &str = "/app/config";
const MISSING_NODE: &str = "/app/missing";
/// A version no write ever brings `APP_NODE` to.
pub(super) const STALE_VERSION: i32 = 1_000_000;

impl World {
    /// Client `c` sends write number `n` of its own: refused unless `n`
    /// is a multiple of five.
    pub(super) fn app_write(&mut self, c: usize, n: u64) {
        let now = self.now;
        // Whatever the core has queued goes first, so that "a command is
        // queued" below means this one.
        self.clients[c].core.turn(now);
        if self.clients[c].core.state().is_terminal() || self.clients[c].core.has_commands() {
            return;
        }
        let client = self.clients[c].client.clone();
        let kind = n % 5;
        let call = self.callers.run(Box::new(move || {
            let _ = match kind {
                0 => client.set_data(APP_NODE, b"written", None).map(drop),
                1 => client
                    .create(APP_NODE, b"again", CreateMode::Persistent)
                    .map(drop),
                2 => client
                    .set_data(APP_NODE, b"stale", Some(STALE_VERSION))
                    .map(drop),
                3 => client.delete(MISSING_NODE, None),
                _ => client
                    .multi(&[
                        Op::check(APP_NODE, Some(STALE_VERSION)),
                        Op::create(MISSING_NODE, b"never", CreateMode::Persistent),
                    ])
                    .map(drop),
            };
        }));
        while !self.clients[c].core.has_commands() && call.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        self.stats.app_writes += 1;
        let what = [
            "setData (accepted)",
            "create of an existing node",
            "setData at a stale version",
            "delete of a missing node",
            "multi with a failing check",
        ][kind as usize];
        self.note(|| format!("c{c}: writes: {what}"));
    }

    /// Creates the nodes the application's writes aim at.
    pub(super) fn create_app_nodes(&mut self) {
        let now = self.now;
        for path in ["/app", APP_NODE, super::fenced::FENCED_NODE] {
            let _ = self
                .server
                .create_as_admin(now, path, b"", CreateMode::Persistent);
        }
    }
}
