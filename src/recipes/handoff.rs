//! The bookkeeping of BatchMutex's local hand-off, apart from threads,
//! condvars and the ZooKeeper lock, so that every interleaving of local
//! threads can be simulated (tests below) — the process's hold must never
//! stay with nobody using or waiting for it.

/// What a local thread does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// The process holds the ZooKeeper lock and nobody uses it: take it.
    Take,
    /// Nobody holds or is queueing for it: queue in ZooKeeper for the process.
    Acquire,
    /// Someone uses it, or queues for it: wait for a change.
    Wait,
}

/// Who uses, waits for and holds the process's ZooKeeper lock.
#[derive(Debug, Default)]
pub(crate) struct HandOff {
    /// The process holds the ZooKeeper lock.
    pub held: bool,
    /// A thread of this process is inside the lock.
    pub busy: bool,
    /// A thread is queueing in ZooKeeper for the process.
    pub acquiring: bool,
    /// Threads of this process waiting locally.
    pub waiting: usize,
    /// Threads that held it since the ZooKeeper lock was taken.
    pub batch: usize,
}

impl HandOff {
    /// A thread starts waiting.
    pub(crate) fn arrive(&mut self) {
        self.waiting += 1;
    }

    /// A waiting thread looks; `usable`: the held lock is not lost.
    pub(crate) fn turn(&mut self, usable: bool) -> Turn {
        if self.busy {
            return Turn::Wait;
        }
        if self.held && usable {
            self.busy = true;
            self.waiting -= 1;
            self.batch += 1;
            return Turn::Take;
        }
        // Lost while idle: it goes back, and the process queues again.
        self.held = false;
        if self.acquiring {
            return Turn::Wait;
        }
        self.acquiring = true;
        Turn::Acquire
    }

    /// The queueing thread is back, with the lock or without.
    pub(crate) fn acquired(&mut self, ok: bool) {
        self.acquiring = false;
        if ok {
            self.held = true;
            self.batch = 0;
        }
    }

    /// A waiting thread leaves without the lock (timeout, cancel, error).
    /// `true`: give the hold back, nobody is left to use it.
    pub(crate) fn leave(&mut self) -> bool {
        self.waiting -= 1;
        self.give_back_if_idle()
    }

    /// The thread inside leaves. `true`: give the hold back (nobody waits,
    /// or the batch is full), else it stays for a local waiter.
    pub(crate) fn exit(&mut self, max_batch: usize) -> bool {
        self.busy = false;
        if self.held && (self.waiting == 0 || self.batch >= max_batch) {
            self.held = false;
            return true;
        }
        false
    }

    fn give_back_if_idle(&mut self) -> bool {
        let idle = self.held && !self.busy && self.waiting == 0 && !self.acquiring;
        if idle {
            self.held = false;
        }
        idle
    }

    /// Nobody uses or awaits the hold, yet it is kept.
    #[cfg(test)]
    fn idle_hold(&self) -> bool {
        self.held && !self.busy && self.waiting == 0 && !self.acquiring
    }
}

#[cfg(test)]
mod tests {
    //! A deterministic simulation of local threads around the hand-off:
    //! each seed draws who arrives, waits, leaves (timeout or cancel),
    //! queues in ZooKeeper (and gets it or not) and exits, in every order.
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Actor {
        Idle,
        Waiting,
        Acquiring,
        Inside,
        Done,
    }

    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n.max(1)
        }
    }

    /// Runs one seed; `Err` says which invariant broke.
    fn run(seed: u64) -> Result<(), String> {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut h = HandOff::default();
        let max_batch = 1 + rng.below(3) as usize;
        let mut actors = vec![Actor::Idle; 2 + rng.below(4) as usize];
        // The ZooKeeper lock itself, as the threads take and give it back:
        // what the bookkeeping must agree with.
        let mut zk_held = false;
        let give_back = |zk_held: &mut bool, step: usize| {
            if !*zk_held {
                return Err(format!("step {step}: gives back a hold it does not have"));
            }
            *zk_held = false;
            Ok(())
        };
        for step in 0..400 {
            let i = rng.below(actors.len() as u64) as usize;
            match actors[i] {
                Actor::Idle => {
                    h.arrive();
                    actors[i] = Actor::Waiting;
                }
                Actor::Waiting => {
                    if rng.below(4) == 0 {
                        // Its deadline or cancel token: it leaves.
                        if h.leave() {
                            give_back(&mut zk_held, step)?;
                        }
                        actors[i] = Actor::Done;
                    } else {
                        let had = h.held;
                        actors[i] = match h.turn(rng.below(10) != 0) {
                            Turn::Take => Actor::Inside,
                            Turn::Acquire => Actor::Acquiring,
                            Turn::Wait => Actor::Waiting,
                        };
                        if had && !h.held {
                            // Lost while idle: the hold went with it.
                            zk_held = false;
                        }
                    }
                }
                Actor::Acquiring => {
                    let ok = rng.below(5) != 0;
                    h.acquired(ok);
                    zk_held |= ok;
                    actors[i] = if ok {
                        Actor::Waiting
                    } else {
                        if h.leave() {
                            give_back(&mut zk_held, step)?;
                        }
                        Actor::Done
                    };
                }
                Actor::Inside => {
                    if h.exit(max_batch) {
                        give_back(&mut zk_held, step)?;
                    }
                    actors[i] = Actor::Done;
                }
                Actor::Done => {}
            }
            let inside = actors.iter().filter(|a| **a == Actor::Inside).count();
            if inside > 1 {
                return Err(format!("step {step}: {inside} threads inside"));
            }
            if inside == 1 && !zk_held {
                return Err(format!("step {step}: a thread inside a hold given back"));
            }
            if h.held != zk_held {
                return Err(format!(
                    "step {step}: the bookkeeping says held {}, the lock says {zk_held}",
                    h.held
                ));
            }
            if h.idle_hold() {
                return Err(format!("step {step}: the hold is kept for nobody ({h:?})"));
            }
            if actors.iter().all(|a| *a == Actor::Done) {
                break;
            }
        }
        Ok(())
    }

    #[test]
    fn no_hold_is_kept_for_nobody_in_any_interleaving() {
        for seed in 1..=20_000 {
            if let Err(e) = run(seed) {
                panic!("seed {seed}: {e}");
            }
        }
    }
    // Issue 9's scenario 5, the old shape (a waiter that leaves keeps the
    // hold it was kept for), is `batch-leave-keeps-the-hold` in
    // scripts/inject-bugs.py: this simulation finds it.
}

/// The local hand-off as `BatchMutex` runs it between threads, under every
/// interleaving loom finds (`scripts/loom.sh`).
///
/// The real `BatchMutex` needs a `Client`, so these tests run [`HandOff`]
/// (the real decisions) inside a model of batch.rs's and batch_waiter.rs's
/// threading: the hand-off under one mutex, one condvar told of every
/// change, a waiter that polls under the mutex and waits on the condvar
/// with the same guard (`BatchMutex::lock_with`, which registers its
/// thread's waker under the mutex and parks: a wake after a change unparks
/// it, as the condvar's notify does here), a holder that leaves under
/// the mutex and notifies after letting it go (`BatchGuard`'s drop), a
/// waiter that queues in ZooKeeper with the mutex let go and notifies once
/// back (`BatchWaiter::step`), one that gives up and notifies
/// (`BatchWaiter::leave`). loom's `wait_timeout` never times out, so a
/// lost wake-up shows as a deadlock. Not covered: batch.rs's own code (a
/// change there that this model does not copy goes unseen), the ZooKeeper
/// lock and its guard (an acquisition here always succeeds, at once),
/// deadlines, cancel tokens and lost holds.
#[cfg(all(test, zklock_loom))]
mod loom_tests {
    use super::*;
    use crate::sync::{Arc, Condvar, Mutex, MutexGuard};
    use loom::thread;
    use std::time::Duration;

    /// batch.rs's `Shared`, less the ZooKeeper lock.
    struct Shared {
        local: Mutex<Local>,
        changed: Condvar,
        max_batch: usize,
    }

    /// batch.rs's `Local`: the hand-off, and how many threads are inside.
    struct Local {
        hand: HandOff,
        inside: usize,
    }

    impl Shared {
        fn new(hand: HandOff, max_batch: usize) -> Arc<Shared> {
            let inside = usize::from(hand.busy);
            Arc::new(Shared {
                local: Mutex::new(Local { hand, inside }),
                changed: Condvar::new(),
                max_batch,
            })
        }

        fn local(&self) -> MutexGuard<'_, Local> {
            self.local.lock().unwrap()
        }

        /// `BatchWaiter::new`: counted as waiting, in a lock of its own.
        fn arrive(&self) {
            self.local().hand.arrive();
        }

        /// A `turn` that says Take: now inside.
        fn enter(local: &mut Local) {
            local.inside += 1;
            assert_eq!(local.inside, 1, "two threads inside");
        }

        /// A waiter that waits as long as it takes (`lock_with`, no
        /// deadline), uses the lock, and leaves.
        fn patient(&self) {
            self.arrive();
            let mut local = self.local();
            loop {
                match local.hand.turn(true) {
                    Turn::Take => break,
                    Turn::Acquire => {
                        // It queues in ZooKeeper for the process, with the
                        // local state let go; once granted, `step` records
                        // it, notifies, and looks again.
                        drop(local);
                        local = self.local();
                        local.hand.acquired(true);
                        self.changed.notify_all();
                    }
                    Turn::Wait => {
                        local = self
                            .changed
                            .wait_timeout(local, Duration::from_secs(3600))
                            .unwrap()
                            .0;
                    }
                }
            }
            Shared::enter(&mut local);
            drop(local);
            self.exit();
        }

        /// A waiter whose deadline passes at its first look: it takes what
        /// needs no waiting, else it gives up, with the process's queueing
        /// if that fell to it (`BatchWaiter::leave`).
        fn impatient(&self) {
            self.arrive();
            let mut local = self.local();
            match local.hand.turn(true) {
                Turn::Take => {
                    Shared::enter(&mut local);
                    drop(local);
                    self.exit();
                    return;
                }
                Turn::Acquire => {
                    drop(local);
                    local = self.local();
                    local.hand.acquired(false);
                }
                Turn::Wait => {}
            }
            let _given_back = local.hand.leave();
            self.changed.notify_all();
        }

        /// `BatchGuard`'s drop.
        fn exit(&self) {
            let mut local = self.local();
            local.inside -= 1;
            let _given_back = local.hand.exit(self.max_batch);
            drop(local);
            self.changed.notify_all();
        }

        /// Everyone is gone: nothing is held for nobody.
        fn assert_settled(&self) {
            let local = self.local();
            assert_eq!(local.inside, 0);
            let h = &local.hand;
            assert!(!h.busy && !h.acquiring && h.waiting == 0, "{h:?}");
            assert!(!h.held, "the hold is kept for nobody: {h:?}");
        }
    }

    /// A thread inside leaves while two more arrive, with room in the batch
    /// for one of them: the hold passes to one, goes back to ZooKeeper at
    /// the batch's end, and the other queues for the process again; nobody
    /// sleeps through the change that lets it go on.
    #[test]
    fn a_leaving_holder_and_two_waiters_all_get_through() {
        loom::model(|| {
            let inside = HandOff {
                held: true,
                busy: true,
                batch: 1,
                ..HandOff::default()
            };
            let s = Shared::new(inside, 2);
            let waiters: Vec<_> = (0..2)
                .map(|_| {
                    let s = s.clone();
                    thread::spawn(move || s.patient())
                })
                .collect();
            s.exit();
            for w in waiters {
                w.join().unwrap();
            }
            s.assert_settled();
        });
    }

    /// Two waiters with nothing held: if the one that gives up was queueing
    /// for the process, the other is woken to queue in its place.
    #[test]
    fn a_waiter_that_gives_up_wakes_the_one_left() {
        loom::model(|| {
            let s = Shared::new(HandOff::default(), 2);
            let other = s.clone();
            let t = thread::spawn(move || other.impatient());
            s.patient();
            t.join().unwrap();
            s.assert_settled();
        });
    }
}
